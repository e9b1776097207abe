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


# -- the spec job --------------------------------------------------------------------------
EDGE_SPEC = """
name: edge-toy
reorder: {reorder}
nodes:
  user:
    ids: user_ids.npy
  item:
    count: 40
edges:
  - relation: user:rates:item
    path: rates.parquet
    reverse: true
    features:
      edge_attr: {{columns: [f0, f1], dtype: float16}}
    values:
      rating: {{column: rating}}
      ts: ts.npy
    edge_splits:
      train: {{path: train.parquet, src: s, dst: d, neg_dst: neg}}
  - relation: item:similar:item
    path: sim.npy
    undirected: true
    values:
      w: sim_w.npy
edge_splits:
  valid:
    user:rates:item: {{src: valid_src.npy, dst: valid_dst.npy, label: valid_y.npy}}
options:
  drop_self_loops: {drop}
"""


def make_edge_spec(root, reorder="none", drop="false", **overrides):
    rng = np.random.default_rng(21)
    users = rng.choice(10**6, 60, replace=False)  # sparse user ids
    e = 1500
    u = users[rng.integers(0, 60, e)]
    i = rng.integers(0, 40, e)
    u[700:900], i[700:900] = u[:200], i[:200]  # duplicate pairs
    data = {"src": u, "dst": i, "rating": rng.integers(1, 6, e).astype(np.int8),
            "f0": rng.standard_normal(e).astype(np.float32),
            "f1": rng.standard_normal(e).astype(np.float32)}
    np.save(root / "user_ids.npy", users)
    pq.write_table(pa.table(data), root / "rates.parquet")
    np.save(root / "ts.npy", np.arange(e) * 3)
    sim = rng.integers(0, 40, (2, 500))
    sim[1, ::5] = sim[0, ::5]  # self loops
    np.save(root / "sim.npy", sim)
    np.save(root / "sim_w.npy", rng.random(500).astype(np.float32))
    k = 30
    pq.write_table(pa.table({"s": users[:k], "d": np.arange(k) % 40,
                             "neg": [list(rng.integers(0, 40, 3)) for _ in range(k)]}),
                   root / "train.parquet")
    np.save(root / "valid_src.npy", users[5:15])
    np.save(root / "valid_dst.npy", np.arange(10))
    np.save(root / "valid_y.npy", np.arange(10) % 2)
    text = EDGE_SPEC.format(reorder=reorder, drop=drop)
    for old, new in overrides.items():
        assert old in text
        text = text.replace(old, new)
    (root / "spec.yaml").write_text(text)
    return str(root / "spec.yaml"), data, users, sim


@pytest.mark.parametrize("reorder,drop", [("none", "false"), ("degree", "true")])
def test_spec_edge_columns_and_splits(tmp_path, reorder, drop):
    from preprocess.jobs.spec_steps import run_spec

    spec, data, users, sim = make_edge_spec(tmp_path, reorder, drop)
    run_spec(spec, tmp_path / "s", budget_bytes=16 << 20, progress=False)
    s = fs.open_store(tmp_path / "s")
    new_user = {int(o): k for k, o in enumerate(np.asarray(s.orig_ids("user")))}
    new_item = np.argsort(np.asarray(s.orig_ids("item")))  # orig -> store id
    u = np.array([new_user[int(x)] for x in data["src"]])
    i = new_item[data["dst"]]
    ts = np.arange(len(u)) * 3
    feat = np.stack([data["f0"], data["f1"]], 1).astype(np.float16)
    for et, a, b in ((("user", "rates", "item"), u, i), (("item", "rev_rates", "user"), i, u)):
        # drop_self_loops drops equal ids, between two types too (as build_csc does)
        ref = reference_order(a, b, drop_self_loops=drop == "true")
        np.testing.assert_array_equal(np.asarray(s.csc(et)[1]), a[ref])
        assert len(ref) < len(a) if drop == "true" else len(ref) == len(a)
        np.testing.assert_array_equal(s.edge_features(et, "edge_attr").gather(
            np.arange(len(ref))), feat[ref])
        np.testing.assert_array_equal(s.edge_values(et, "rating"), data["rating"][ref])
        np.testing.assert_array_equal(s.edge_values(et, "ts"), ts[ref])
    opts = {"symmetrize": True, "drop_self_loops": drop == "true"}
    w = np.load(tmp_path / "sim_w.npy")
    ref = reference_order(new_item[sim[0]], new_item[sim[1]], **opts)
    np.testing.assert_array_equal(s.edge_values(("item", "similar", "item"), "w"), w[ref])
    assert s.edge_split_names == ["train", "valid"]
    tr = s.edge_split("train")
    t = pq.read_table(tmp_path / "train.parquet").to_pydict()
    np.testing.assert_array_equal(tr["src"], [new_user[x] for x in t["s"]])
    np.testing.assert_array_equal(tr["dst"], new_item[np.array(t["d"])])
    np.testing.assert_array_equal(tr["neg_dst"], new_item[np.array(t["neg"])])
    va = s.edge_split("valid")
    np.testing.assert_array_equal(va["label"], np.arange(10) % 2)
    np.testing.assert_array_equal(va["src"], [new_user[x] for x in users[5:15]])


def test_killed_spec_job_resumes_to_the_same_store(tmp_path):
    from preprocess.jobs.spec_steps import run_spec

    spec, *_ = make_edge_spec(tmp_path)
    run_spec(spec, tmp_path / "want", budget_bytes=16 << 20, progress=False)
    want = store_snapshot(tmp_path / "want")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # kill points: the indices of user:rates:item, edge_attr of its reverse type, the values
    # of the undirected item:similar:item, an edge split's second column
    for k in (4, 10, 15, 17):
        store = tmp_path / f"killed-{k}"
        p = subprocess.run([sys.executable, os.path.join(HERE, "kill_run.py"), spec,
                            str(store), str(k)], env=env, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == -9, p.stderr[-2000:]
        run_spec(spec, store, budget_bytes=16 << 20, progress=False)
        assert store_snapshot(store) == want


@pytest.mark.parametrize("change,error,match", [
    (("  drop_self_loops: false", "  coalesce: true"), "SpecError",
     r"edges\[0\]: Expected options.coalesce false with edge features"),
    (("  drop_self_loops: false", "  sort_neighbors: false"), "SpecError",
     "Expected options.sort_neighbors true"),
    (("      ts: ts.npy", "      ts: sim_w.npy"), "EdgeColumnError",
     r"edges\[0\]: Expected 1500 rows .one per edge. for the edge values 'ts' in .*sim_w"),
    (("      ts: ts.npy", "      ts: {path: ts.npy, colour: x}"), "SpecError",
     r"edges\[0\].values.ts: Expected keys path"),
    (("    user:rates:item: {", "    user:rated:item: {"), "SpecError",
     r"edge_splits.valid.user:rated:item: Expected an edge type of the spec"),
    (("{src: valid_src.npy, dst", "{dst"), "SpecError", "Expected a src column"),
    (("dst: valid_dst.npy", "dst: user_ids.npy"), "IdsOutOfRangeInputError",
     r"user_ids.npy"),
    (("label: valid_y.npy", "label: sim_w.npy"), "BadInputError",
     r"Expected 10 rows .as src, .*valid_src.npy. in column 'label' of edge split 'valid'"),
    (("      rating: {column: rating}", "      rating: {column: nothere}"), "BadInputError",
     r"Expected a column 'nothere' in .*rates.parquet"),
])
def test_spec_refusals(tmp_path, change, error, match):
    import preprocess.errors as pe
    from preprocess.jobs.spec_steps import run_spec

    spec, *_ = make_edge_spec(tmp_path)
    text = (tmp_path / "spec.yaml").read_text()
    assert change[0] in text
    (tmp_path / "spec.yaml").write_text(text.replace(change[0], change[1]))
    with pytest.raises(getattr(pe, error), match=match):
        run_spec(spec, tmp_path / "s", budget_bytes=16 << 20, progress=False)


def test_spec_columns_of_several_csv_edge_files(tmp_path, capsys):
    """`{columns: [...]}` without a path reads the relation's own CSV files, one after the
    other; a parquet list column gives the feature rows; a dry run plans every step."""
    from preprocess.jobs.spec_steps import run_spec

    rng = np.random.default_rng(30)
    src, dst = random_graph(31, 30, 800)
    w = rng.integers(0, 100, 800)
    f = rng.integers(-5, 5, (800, 2)).astype(np.float64)
    for k, sl in enumerate((slice(0, 300), slice(300, 800))):
        rows = zip(src[sl], dst[sl], w[sl], f[sl, 0], f[sl, 1])
        (tmp_path / f"e{k}.csv").write_text(
            "s,d,w,f0,f1\n" + "".join(f"{a},{b},{c},{x},{y}\n" for a, b, c, x, y in rows))
    pq.write_table(pa.table({"emb": [list(r) for r in f * 2]}), tmp_path / "emb.parquet")
    (tmp_path / "spec.yaml").write_text(
        "nodes:\n  n: {count: 30}\nedges:\n  - relation: n:to:n\n"
        "    paths: [e0.csv, e1.csv]\n    src: s\n    dst: d\n"
        "    features:\n      edge_attr: {columns: [f0, f1]}\n"
        "      emb: {path: emb.parquet, column: emb}\n"
        "    values:\n      w: {column: w}\n")
    spec = str(tmp_path / "spec.yaml")
    job = run_spec(spec, tmp_path / "s", dry_run=True, progress=False, budget_bytes=16 << 20)
    plan = job.plan_text()
    for step in ("order:n__to__n", "edge_features:n__to__n/edge_attr",
                 "edge_features:n__to__n/emb", "edge_values:n__to__n/w"):
        assert step in plan
    run_spec(spec, tmp_path / "s", progress=False, budget_bytes=16 << 20)
    s = fs.open_store(tmp_path / "s")
    ref = reference_order(src, dst)
    np.testing.assert_array_equal(s.edge_values(None, "w"), w[ref])
    np.testing.assert_array_equal(s.edge_features(None, "edge_attr").gather(np.arange(800)),
                                  f[ref])
    np.testing.assert_array_equal(s.edge_features(None, "emb").gather(np.arange(800)),
                                  2 * f[ref])
