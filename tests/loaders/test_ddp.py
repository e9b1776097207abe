"""Two ranks (processes, gloo) train ``examples/train_ddp.py`` on one store.

One spawn of two processes runs, in one process group: a single SGD step; two full epochs
recording the seeds each rank trained on; one epoch, then a resume to epoch two. The parent
checks the seeds' shares, the parameters against a single-process reference of the averaged
gradient, and that the resumed run ends where the uninterrupted one did.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import time
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

import featurestore as fs  # noqa: E402
from loaders import NeighborLoader  # noqa: E402
from loaders.datasets.synthetic import mag_like_store, power_law_store  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_ddp.py"
WORLD = 2
HARD_TIMEOUT_S = 120


def load_example():
    spec = importlib.util.spec_from_file_location("train_ddp_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_args(store: str, **kw) -> Namespace:
    ex = load_example()
    argv = [store, "--batch-size", "64", "--fanouts", "5,5", "--hidden", "16",
            "--num-threads", "1", "--seed", "7", "--checkpoint-dir", ""]
    args = ex.parse_args(argv)
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def _worker(rank: int, world: int, tmp: str, store: str, hetero: str) -> None:
    """One rank: join the group (file rendezvous, no port), run the three trainings."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        ex = load_example()
        step = ex.train(make_args(store, epochs=1, max_batches=1, optimizer="sgd", lr=0.5,
                                  dropout=0.0, no_eval=True))
        straight = ex.train(make_args(store, epochs=2, checkpoint_dir=f"{tmp}/ck-straight"),
                            record_seeds=True)
        first = ex.train(make_args(store, epochs=1, checkpoint_dir=f"{tmp}/ck-resume",
                                   no_eval=True))
        resumed = ex.train(make_args(store, epochs=2, checkpoint_dir=f"{tmp}/ck-resume",
                                     resume=True, no_eval=True))
        # heterogeneous (to_hetero): the last layer's convolutions into authors and
        # institutions get no gradient; DDP must still step both ranks alike
        het = ex.train(make_args(hetero, epochs=1, max_batches=2, no_eval=True))
        torch.save({"step": step["params"], "straight": straight["params"],
                    "hetero": het["params"], "hetero_batches": het["batches"],
                    "straight_epochs": straight["epochs"],
                    "seeds": {e: torch.from_numpy(s) for e, s in straight["seeds"].items()},
                    "first_epochs": first["epochs"], "resumed_epochs": resumed["epochs"],
                    "resumed": resumed["params"], "world": straight["world_size"]},
                   f"{tmp}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """Spawn the two ranks (hard timeout), return (store path, tmp dir, per-rank results)."""
    import torch.multiprocessing as mp

    tmp = tmp_path_factory.mktemp("ddp")
    store = power_law_store(tmp / "store", num_nodes=2000, num_edges=20000, feat_dim=16,
                            num_classes=4, homophily=0.8, train_frac=0.3, seed=1)
    hetero = mag_like_store(tmp / "hetero", num_papers=800, num_authors=500,
                            num_institutions=20, feat_dim=16, seed=3)
    ctx = mp.start_processes(_worker, args=(WORLD, str(tmp), store, hetero), nprocs=WORLD,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + HARD_TIMEOUT_S
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"the {WORLD} ranks did not finish within {HARD_TIMEOUT_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join(5)
    res = [torch.load(tmp / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]
    return store, tmp, res


def test_ranks_train_disjoint_equal_shares_covering_the_split(ddp_run):
    store, _, res = ddp_run
    with fs.open_store(store) as s:
        train = np.asarray(s.split("train"))
    assert train.shape[0] % WORLD == 0  # so the shares cover the whole split
    assert [r["world"] for r in res] == [WORLD] * WORLD
    for epoch in (0, 1):
        seen = [r["seeds"][epoch].numpy() for r in res]
        for s in seen:
            assert s.shape[0] == train.shape[0] // WORLD  # an equal share...
            assert np.unique(s).shape[0] == s.shape[0]  # ...without repeats
        assert np.intersect1d(seen[0], seen[1]).size == 0  # disjoint
        np.testing.assert_array_equal(np.sort(np.concatenate(seen)), np.sort(train))  # covers
    # each epoch is reshuffled: rank 0 does not see the same seeds in the same order
    assert not np.array_equal(res[0]["seeds"][0].numpy(), res[0]["seeds"][1].numpy())
    assert set(res[0]["seeds"][0].tolist()) != set(res[0]["seeds"][1].tolist())


def test_one_step_gives_identical_parameters_equal_to_averaged_gradient(ddp_run):
    """After one SGD step the ranks hold the same parameters, and they equal a single
    process applying the mean of the two ranks' gradients (each on its own first batch)."""
    store, _, res = ddp_run
    assert torch.equal(res[0]["step"], res[1]["step"])
    ex = load_example()
    args = make_args(store, epochs=1, max_batches=1, optimizer="sgd", lr=0.5, dropout=0.0)
    with fs.open_store(store) as s:
        model = ex.build_model(s, args, "node", num_classes=int(np.asarray(s.labels()).max()) + 1)
        init = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for rank in range(WORLD):
            ld = NeighborLoader(s, [5, 5], "train", batch_size=64, shuffle=True, seed=7,
                                output="pyg", device="cpu", rank=rank, world_size=WORLD)
            b = next(iter(ld))
            model.zero_grad()
            torch.nn.functional.cross_entropy(ex.forward(model, b, "node", 16),
                                              b.y[: b.batch_size]).backward()
            for g, p in zip(grads, model.parameters()):
                g += p.grad / WORLD
        with torch.no_grad():
            for g, p in zip(grads, model.parameters()):
                p -= 0.5 * g
        expect = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert not torch.allclose(res[0]["step"], init)  # the step moved the parameters
    torch.testing.assert_close(res[0]["step"], expect, rtol=1e-5, atol=1e-6)


def test_resume_continues_at_the_next_epoch_and_matches_an_uninterrupted_run(ddp_run):
    _, tmp, res = ddp_run
    for r in res:
        assert r["straight_epochs"] == [0, 1]
        assert r["first_epochs"] == [0]
        assert r["resumed_epochs"] == [1]  # not epoch 0 again
    assert sorted(os.listdir(tmp / "ck-resume")) == ["epoch-0000.pt", "epoch-0001.pt"]
    ck = torch.load(tmp / "ck-resume" / "epoch-0001.pt", weights_only=True)
    assert ck["epoch"] == 1 and ck["config"]["world_size"] == WORLD
    # dropout is reseeded per (seed, epoch, rank), sampling depends on (seed, epoch, batch)
    # and the optimizer state is restored: the resumed run ends bit for bit where the
    # uninterrupted one did
    for r in res:
        assert torch.equal(r["resumed"], r["straight"])
    flat = torch.cat([v.reshape(-1).float() for v in ck["model"].values()])
    assert torch.equal(flat, res[0]["resumed"])


def test_heterogeneous_model_steps_alike_on_both_ranks(ddp_run):
    _, _, res = ddp_run
    assert [r["hetero_batches"] for r in res] == [[2], [2]]
    assert torch.equal(res[0]["hetero"], res[1]["hetero"])
