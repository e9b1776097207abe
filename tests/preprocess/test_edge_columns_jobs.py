"""Edge columns through the jobs: ``preprocess edges --edge-feature/--edge-value`` and the
spec's per-relation ``features``/``values`` and ``edge_splits``; stores compared with a NumPy
reference (a stable sort by (destination, source, input position)), resumed after SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import featurestore as fs
from featurestore.cli import main
from preprocess.errors import EdgeColumnError
from preprocess.jobs.edges import run_edges_job

from pp_helpers import store_snapshot
from test_edge_columns import random_graph, reference_order

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture
def edge_file(tmp_path):
    n, e = 200, 3000
    src, dst = random_graph(11, n, e)
    rng = np.random.default_rng(12)
    cols = {"src": src, "dst": dst, "w": rng.random(e), "t": rng.integers(0, 10**9, e),
            "f0": rng.standard_normal(e).astype(np.float32),
            "f1": rng.standard_normal(e).astype(np.float32)}
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table(cols), path)
    return path, cols


def _check(store, cols, etype=None, **opts):
    s = fs.open_store(store)
    ref = reference_order(cols["src"], cols["dst"], **opts)
    feat = np.stack([cols["f0"], cols["f1"]], 1)
    np.testing.assert_array_equal(s.edge_features(etype, "edge_attr").gather(
        np.arange(len(ref))), feat[ref].astype(np.float16))
    np.testing.assert_array_equal(s.edge_values(etype, "w"), cols["w"][ref])
    np.testing.assert_array_equal(s.edge_values(etype, "t"), cols["t"][ref])
    return s


@pytest.mark.parametrize("flags", [[], ["--undirected", "--drop-self-loops"], ["--csr"]])
def test_edges_command_carries_columns(tmp_path, edge_file, flags):
    path, cols = edge_file
    store = str(tmp_path / "s")
    args = ["preprocess", "edges", str(path), store, "--edge-feature", "f0,f1",
            "--edge-feature-dtype", "float16", "--edge-value", "w=w", "--edge-value", "t=t",
            "--memory", "16MiB", "--no-progress", *flags]
    assert main(args + ["--dry-run"]) == 0
    assert not os.path.exists(store)
    assert main(args) == 0
    opts = {"symmetrize": "--undirected" in flags, "drop_self_loops": "--undirected" in flags}
    s = _check(store, cols, ("node", "to", "node"), **opts)
    if "--csr" in flags:
        _check(store, {**cols, "src": cols["dst"], "dst": cols["src"]},
               ("node", "rev_to", "node"))
    assert s.num_edges(("node", "to", "node")) == len(reference_order(
        cols["src"], cols["dst"], **opts))
    assert main(args) == 0  # finished: every step done before


def test_dry_run_plans_the_edge_columns(tmp_path, edge_file, capsys):
    path, _ = edge_file
    assert main(["preprocess", "edges", str(path), str(tmp_path / "s"), "--edge-feature",
                 "f0,f1", "--edge-value", "w=w", "--dry-run", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for step in ("order:node__to__node", "edge_features:node__to__node/edge_attr",
                 "edge_values:node__to__node/w"):
        assert step in out


def test_npy_edges_with_npy_columns(tmp_path):
    src, dst = random_graph(3, 100, 1000)
    np.save(tmp_path / "e.npy", np.stack([src, dst]))
    rel = np.random.default_rng(0).integers(0, 50, 1000).astype(np.int32)
    attr = np.random.default_rng(1).standard_normal((1000, 4)).astype(np.float32)
    np.save(tmp_path / "rel.npy", rel)
    np.save(tmp_path / "attr.npy", attr)
    run_edges_job(tmp_path / "e.npy", tmp_path / "s", edge_feature=str(tmp_path / "attr.npy"),
                  edge_values={"relation": str(tmp_path / "rel.npy")}, progress=False,
                  budget_bytes=16 << 20)
    s = fs.open_store(tmp_path / "s")
    ref = reference_order(src, dst)
    np.testing.assert_array_equal(s.edge_values(None, "relation"), rel[ref])
    np.testing.assert_array_equal(s.edge_features(None, "edge_attr").gather(np.arange(1000)),
                                  attr[ref])


def test_edges_job_refusals(tmp_path, edge_file, capsys):
    path, _ = edge_file
    with pytest.raises(EdgeColumnError, match="Expected no coalescing"):
        run_edges_job(path, tmp_path / "a", edge_values={"w": "w"}, coalesce=True,
                      progress=False)
    assert not os.path.exists(tmp_path / "a")
    np.save(tmp_path / "e.npy", np.zeros((2, 5), np.int64))
    with pytest.raises(EdgeColumnError, match="has no named columns"):
        run_edges_job(tmp_path / "e.npy", tmp_path / "b", edge_values={"w": "w"},
                      progress=False)
    np.save(tmp_path / "short.npy", np.zeros(4))
    with pytest.raises(EdgeColumnError, match="Expected 5 rows .one per edge. for the edge "
                                              "values 'w' in .*short.npy. Got 4"):
        run_edges_job(tmp_path / "e.npy", tmp_path / "c",
                      edge_values={"w": str(tmp_path / "short.npy")}, progress=False)
    assert not os.path.exists(tmp_path / "c")  # refused before anything was written
    with pytest.raises(SystemExit) as e:  # a usage error
        main(["preprocess", "edges", str(path), str(tmp_path / "d"), "--edge-value",
              "nocolumn", "--no-progress"])
    assert e.value.code == 2
    assert "--edge-value: expected NAME=COL" in capsys.readouterr().err


def test_killed_edges_job_resumes_to_the_same_store(tmp_path, edge_file):
    path, _ = edge_file
    args = [str(path), "--edge-feature", "f0,f1", "--edge-value", "w=w",
            "--edge-value", "t=t", "--undirected"]
    want_store = tmp_path / "want"
    assert main(["preprocess", "edges", args[0], str(want_store), *args[1:],
                 "--memory", "16MiB", "--no-progress"]) == 0
    want = store_snapshot(want_store)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + HERE + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    for k in (3, "order", 4, 6):  # kill points: csc, order, edge_attr, the second values
        store = tmp_path / f"killed-{k}"
        p = subprocess.run([sys.executable, os.path.join(HERE, "kill_edges_run.py"), str(store),
                            str(k), *args], env=env, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == -9, p.stderr[-2000:] + p.stdout[-500:]
        with pytest.raises(fs.IncompleteStoreError):
            fs.open_store(store)
        assert main(["preprocess", "edges", args[0], str(store), *args[1:],
                     "--memory", "16MiB", "--no-progress"]) == 0
        assert store_snapshot(store) == want
