"""Worker processes: the numba threading layer survives fork, the samplers pickle.

Each multi-process run happens in a fresh interpreter under a timeout, so a deadlock fails
the test instead of blocking the suite.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 150


@pytest.mark.parametrize("env, config", [("workqueue", "default"), ("", "omp")])
def test_the_users_threading_layer_wins(monkeypatch, env, config):
    import numba

    from featurestore import threading_layer as _threading

    if env:
        monkeypatch.setenv("NUMBA_THREADING_LAYER", env)
    else:
        monkeypatch.delenv("NUMBA_THREADING_LAYER", raising=False)
    monkeypatch.setattr(numba.config, "THREADING_LAYER", config)
    assert _threading.choose() is None
    assert numba.config.THREADING_LAYER == config


def test_core_sampler_pickles(homo_store, skewed_graph):
    from loaders import NeighborSampler

    for graph in (homo_store, skewed_graph):
        s = NeighborSampler(graph, [4, 3])
        seeds = np.arange(0, 200, 3)
        want = s.sample(seeds, seed=1, batch=2)
        blob = pickle.dumps(s)
        if graph is homo_store:  # the store reopens itself: its CSC is not in the pickle
            assert len(blob) < homo_store.csc()[1].nbytes // 4
        got = pickle.loads(blob).sample(seeds, seed=1, batch=2)
        for t in want.node:
            assert np.array_equal(want.node[t], got.node[t])
        for et in want.row:
            assert np.array_equal(want.row[et], got.row[et])
            assert np.array_equal(want.edge[et], got.edge[et])


# -- PyG NodeLoader with worker processes --------------------------------------------------
WORKERS = """
    import sys, numba, numpy as np, torch
    import featurestore as fs
    import loaders
    PYG_AT_IMPORT = "torch_geometric" in sys.modules  # loaders.pyg is lazy
    from torch_geometric.loader import NodeLoader
    from loaders.pyg import NeighborSampler, remote_backend
    from loaders.sample import kernels as K
    from featurestore import threading_layer as _threading

    K.PARALLEL_MIN = 1  # parallel kernels even on this small graph (also in spawned workers)

    def epoch(store, ids, num_workers, ctx):
        sampler = NeighborSampler(store, [4, 3], seed=5)
        kw = dict(multiprocessing_context=ctx) if num_workers else {}
        ld = NodeLoader(remote_backend(store), node_sampler=sampler, input_nodes=ids,
                        batch_size=64, num_workers=num_workers, **kw)
        return [(b.input_id.tolist(), b.n_id.tolist(), b.edge_index.tolist(),
                 b.x.sum().item()) for b in ld]

    def main():
        path, ctx = sys.argv[1], sys.argv[2]
        store = fs.open_store(path)
        torch.randn(300, 300) @ torch.randn(300, 300)  # torch's CPU thread pool is up
        K._parallel_ok()                              # and numba's
        ids = torch.from_numpy(np.array(store.split("train")))
        ref = epoch(store, ids, 0, None)
        got = epoch(store, ids, 2, ctx)
        assert got == ref, "worker batches differ from the in-process ones"
        seen = sorted(i for b in got for i in b[0])
        assert seen == list(range(len(ids)))
        print(len(got), numba.threading_layer(), _threading.tbb_loadable(), PYG_AT_IMPORT,
              loaders.pyg.__name__)

    if __name__ == "__main__":
        main()
"""


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_pyg_nodeloader_with_workers(homo_store_path, tmp_path, ctx):
    """num_workers=2 after torch and numba ran in the parent: no hang, no dead worker, and
    the same batches as in-process (worker w's k-th call is batch k * W + w). Also: the
    default threading layer is fork-safe, and ``import loaders`` does not import PyG."""
    pytest.importorskip("torch_geometric")
    script = tmp_path / "workers.py"  # spawn re-imports the main module: it must be a file
    script.write_text(textwrap.dedent(WORKERS))
    e = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.pop("NUMBA_THREADING_LAYER", None)
    try:
        p = subprocess.run([sys.executable, str(script), str(homo_store_path), ctx],
                           capture_output=True, text=True, timeout=TIMEOUT_S, env=e, cwd=ROOT)
    except subprocess.TimeoutExpired as ex:
        pytest.fail(f"NodeLoader(num_workers=2, {ctx}) hung for {TIMEOUT_S} s: "
                    f"{(ex.stderr or b'')[-2000:]!r}")
    assert p.returncode == 0, p.stderr[-3000:]
    n, layer, tbb, pyg_at_import, pyg = p.stdout.split()
    assert int(n) > 2
    assert layer == ("tbb" if tbb == "True" else "workqueue")  # the default is fork-safe
    assert pyg_at_import == "False" and pyg == "loaders.pyg"
