"""NeighborLoader: epochs, batches, features, shutdown and error propagation."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

import featurestore as fs

from loaders import NeighborLoader, NeighborSampler
from loaders.sample.reference import reference_sample


def loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("loader-")]


@pytest.fixture(autouse=True)
def no_leaked_threads():
    yield
    deadline = time.time() + 5
    while loader_threads() and time.time() < deadline:
        time.sleep(0.02)
    assert loader_threads() == []


@pytest.mark.parametrize("shuffle,drop_last", [(False, False), (True, False), (True, True)])
def test_epoch_covers_inputs_once(homo_store, shuffle, drop_last):
    train = np.asarray(homo_store.split("train"))
    ld = NeighborLoader(homo_store, [4, 3], "train", batch_size=128, shuffle=shuffle,
                        drop_last=drop_last, device="cpu")
    seen, n = [], 0
    for mb in ld:
        sub = mb.subgraph
        assert sub.batch_size == sub.input_id.shape[0] <= 128
        assert np.array_equal(train[sub.input_id], sub.seeds)
        seen.append(sub.input_id)
        n += 1
    assert n == len(ld) == (len(train) // 128 if drop_last else -(-len(train) // 128))
    seen = np.concatenate(seen)
    assert np.unique(seen).shape[0] == seen.shape[0]  # nothing twice
    if drop_last:
        assert seen.shape[0] == len(train) // 128 * 128
    else:
        assert np.array_equal(np.sort(seen), np.arange(len(train)))  # everything once
    if not shuffle:
        assert np.array_equal(seen, np.arange(len(train)))


def test_features_labels_and_sampling_match_the_store(homo_store):
    ld = NeighborLoader(homo_store, [5, 5], "train", batch_size=100, shuffle=True, seed=3,
                        device="cpu")
    F = homo_store.features(None, "feat").numpy()
    labels = np.asarray(homo_store.labels())
    for k, mb in enumerate(ld):
        sub = mb.subgraph
        ids = sub.node["node"]
        assert torch.equal(mb.x["node"], torch.from_numpy(np.asarray(F[ids])))
        assert torch.equal(mb.y, torch.from_numpy(labels[sub.seeds]))
        ref = reference_sample(homo_store, [5, 5], sub.seeds, seed=3, epoch=0, batch=k,
                               input_id=sub.input_id)
        assert np.array_equal(ref.node["node"], ids)
        assert np.array_equal(ref.row[next(iter(ref.row))], sub.row[next(iter(sub.row))])


def test_epochs_differ_and_runs_repeat(homo_store):
    def run(loader):
        return [[mb.subgraph.node["node"].copy() for mb in loader] for _ in range(2)]

    a = run(NeighborLoader(homo_store, [3, 3], "train", batch_size=200, shuffle=True, seed=9,
                           device="cpu", num_threads=1))
    b = run(NeighborLoader(homo_store, [3, 3], "train", batch_size=200, shuffle=True, seed=9,
                           device="cpu", num_threads=2, prefetch=4))
    for ea, eb in zip(a, b):
        assert all(np.array_equal(x, y) for x, y in zip(ea, eb))
    assert not np.array_equal(a[0][0], a[1][0])  # epoch 1 has another order


def test_kept_batches_are_not_overwritten(homo_store):
    """Buffers are reused only once the loop dropped the batch that used them."""
    ld = NeighborLoader(homo_store, [5], "train", batch_size=64, device="cpu")
    F = homo_store.features(None, "feat").numpy()
    kept = list(ld)
    for mb in kept:
        assert torch.equal(mb.x["node"], torch.from_numpy(np.asarray(F[mb.subgraph.node["node"]])))
    del kept, mb
    pool = ld._pools["node"]
    before = pool.allocations
    for _ in ld:  # dropping each batch: a handful of buffers serve the whole epoch
        pass
    assert pool.allocations - before <= ld.prefetch * 2 + 3


def test_break_stops_every_thread(homo_store):
    ld = NeighborLoader(homo_store, [5, 5], "train", batch_size=16, device="cpu", prefetch=2)
    it = iter(ld)
    next(it)
    assert loader_threads()  # stages are running ahead
    for i, _ in enumerate(it):
        if i == 2:
            break
    del it  # the fixture checks that no loader thread is left


def test_exception_in_training_loop_stops_threads(homo_store):
    ld = NeighborLoader(homo_store, [5, 5], "train", batch_size=16, device="cpu")
    with pytest.raises(RuntimeError, match="boom"):
        for i, _ in enumerate(ld):
            if i == 1:
                raise RuntimeError("boom")


def test_stage_exception_reaches_the_loop_with_its_traceback(homo_store, monkeypatch):
    ld = NeighborLoader(homo_store, [5], "train", batch_size=64, device="cpu")

    def broken(self, seeds, *a, **kw):
        if kw["batch"] == 2:
            raise ValueError("sampler exploded on batch 2")
        return orig(self, seeds, *a, **kw)

    orig = NeighborSampler.sample
    monkeypatch.setattr(NeighborSampler, "sample", broken)
    got = []
    with pytest.raises(ValueError, match="exploded") as info:
        for mb in ld:
            got.append(mb)
    assert len(got) == 2
    assert any(f.name == "broken" for f in info.traceback)  # the stage's own frame


def test_heterogeneous_loader(hetero_store):
    ld = NeighborLoader(hetero_store, {"cites": [4, 2], "writes": [3, 2],
                        "rev_writes": [2, 2]}, ("paper", "train"), batch_size=100, device="cpu")
    F = hetero_store.features("paper", "feat").numpy()
    for mb in ld:
        assert set(mb.x) == {"paper"}  # only papers have features
        want = np.asarray(F[mb.subgraph.node["paper"]])
        assert torch.equal(mb.x["paper"], torch.from_numpy(want))
        assert (mb.y >= 0).all()
        assert mb.subgraph.node["author"].shape[0] > 0


def test_input_node_forms_and_errors(hetero_store, homo_store):
    ids = np.asarray(hetero_store.split("valid", "paper"))
    a = NeighborLoader(hetero_store, [2], ("paper", ids), batch_size=7, device="cpu")
    b = NeighborLoader(hetero_store, [2], ("paper", "valid"), batch_size=7, device="cpu")
    assert np.array_equal(a.input_nodes, b.input_nodes) and len(a) == len(b)
    c = NeighborLoader(homo_store, [2], torch.arange(10), batch_size=4, device="cpu")
    assert len(c) == 3
    with pytest.raises(IndexError, match="input nodes in"):
        NeighborLoader(homo_store, [2], [0, 10**9], device="cpu")
    with pytest.raises(TypeError, match="1-D integer"):
        NeighborLoader(homo_store, [2], np.zeros((2, 2), np.int64), device="cpu")
    with pytest.raises(ValueError, match="output in"):
        NeighborLoader(homo_store, [2], "train", output="jax")
    with pytest.raises(KeyError, match="node type"):
        NeighborLoader(hetero_store, [2], "train")


def test_boolean_mask_input_nodes(hetero_store, homo_store):
    """PyG's input_nodes=mask / ("paper", mask): the mask's true positions, in order."""
    rng = np.random.default_rng(4)
    n = hetero_store.num_nodes("paper")
    mask = rng.random(n) < 0.2
    want = np.array([i for i in range(n) if mask[i]], np.int64)  # brute force
    for m in (mask, torch.from_numpy(mask)):
        ld = NeighborLoader(hetero_store, [2], ("paper", m), batch_size=50, device="cpu")
        assert ld.seed_type == "paper" and np.array_equal(ld.input_nodes, want)
    hm = np.zeros(homo_store.num_nodes(), bool)
    hm[[3, 7, 2999]] = True
    assert NeighborLoader(homo_store, [2], hm, device="cpu").input_nodes.tolist() == [3, 7, 2999]
    with pytest.raises(fs.errors.InvalidIdsError, match=f"mask of {n} entries.*Got {n - 1}"):
        NeighborLoader(hetero_store, [2], ("paper", mask[1:]), device="cpu")


@pytest.mark.parametrize("kw", [dict(batch_size=100.5), dict(batch_size=True),
                                dict(prefetch=0), dict(num_threads=0), dict(staging_bytes=-5),
                                dict(world_size=10**6), dict(rank=1.0, world_size=2),
                                dict(batches_in_flight=0), dict(feature="nope"),
                                dict(input_nodes=np.array([1.7, 2.2])),
                                dict(input_nodes=np.array([True, False]))])
def test_values_are_refused_not_coerced(homo_store, kw):
    """Issue 10 item 12: floats, bools and out-of-range values are refused with a named error."""
    kw = {"input_nodes": "train", "device": "cpu", **kw}
    with pytest.raises(fs.FeatureStoreError, match="Expected"):
        NeighborLoader(homo_store, [2], **kw)


@pytest.mark.parametrize("staging_bytes", [1000, 64 << 20, 10])
def test_chunked_device_path_on_cpu(hetero_store, staging_bytes):
    """The GPU path's chunked gather (staging ring, slice copies), run on the CPU."""
    ld = NeighborLoader(hetero_store, [3, 2], ("paper", "train"), batch_size=100, device="cpu",
                        staging_bytes=staging_bytes)
    ld._chunked = True
    ref = NeighborLoader(hetero_store, [3, 2], ("paper", "train"), batch_size=100, device="cpu")
    F = hetero_store.features("paper", "feat").numpy()
    n = 0
    for a, b in zip(ld, ref):
        ids = a.subgraph.node["paper"]
        assert torch.equal(a.x["paper"], torch.from_numpy(np.asarray(F[ids])))
        assert torch.equal(a.x["paper"], b.x["paper"]) and torch.equal(a.y, b.y)
        for et in a.subgraph.row:
            assert np.array_equal(a.subgraph.row[et], b.subgraph.row[et])
        n += 1
    assert n == len(ld)


def test_ranks_take_disjoint_equal_shares(homo_store):
    n = len(homo_store.split("train"))
    shares = []
    for rank in range(3):
        ld = NeighborLoader(homo_store, [2], "train", batch_size=50, shuffle=True, seed=4,
                            device="cpu", rank=rank, world_size=3)
        shares.append(np.concatenate([p for p in ld.batch_order(0)]))
        assert len(ld) == -(-(n // 3) // 50)
    assert all(s.shape[0] == n // 3 for s in shares)
    allpos = np.concatenate(shares)
    assert np.unique(allpos).shape[0] == allpos.shape[0] == 3 * (n // 3)
    with pytest.raises(ValueError, match="rank"):
        NeighborLoader(homo_store, [2], "train", rank=3, world_size=3)


@pytest.mark.parametrize("chunked", [False, True])
def test_two_live_iterators_gather_their_own_rows(homo_store, chunked):
    """Two iterators over one loader, advanced in turn (as PyG and DGL allow), each get the
    features of their own batches: each iterator stages rows in a ring of its own."""
    full = torch.from_numpy(np.array(homo_store.features().numpy())).double()
    ld = NeighborLoader(homo_store, [10, 10], None, batch_size=64, output="pyg", device="cpu",
                        dtype=torch.float64, cache=None, staging_bytes=256, prefetch=4)
    ld._chunked = chunked  # the device path's chunked staging, on the CPU
    bad = total = 0
    for _ in range(6):
        for a, b in zip(iter(ld), iter(ld)):
            for batch in (a, b):
                total += 1
                bad += not torch.equal(batch.x, full[batch.n_id])
    assert total > 50 and bad == 0, f"{bad} of {total} batches hold other batches' rows"
