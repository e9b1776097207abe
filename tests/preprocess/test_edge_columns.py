"""Edge columns from input (COO) order to CSC edge order, against a NumPy reference: the
edges sorted stably by (destination, source, input position), the column taken in that order."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import featurestore as fs
from preprocess import build_csc, from_arrays
from preprocess.errors import BadInputError, EdgeColumnError, IdsOutOfRangeInputError
from preprocess.sources.features import FeatureSource
from preprocess.steps import csc
from preprocess.steps import edge_columns as ec
from preprocess.steps.edge_columns import EdgeOrder, carry_columns, edge_order

from pp_helpers import reference_csc


@pytest.fixture(autouse=True)
def small_budgets(monkeypatch):
    monkeypatch.setattr(csc, "MIN_BUDGET_BYTES", 1 << 10)


def reference_order(src, dst, *, drop_self_loops=False, symmetrize=False):
    """Input row of each CSC slot: a stable sort by (dst, src, position); reverse edges
    carry their forward edge's row."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    rows = np.arange(src.shape[0])
    if symmetrize:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        rows = np.concatenate([rows, rows])
    if drop_self_loops:
        keep = src != dst
        src, dst, rows = src[keep], dst[keep], rows[keep]
    order = np.lexsort((np.arange(src.shape[0]), src, dst))
    return rows[order]


def random_graph(seed, n, e):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    dst = rng.integers(0, n, e)
    dst[: e // 4] = 3                      # a hub destination
    src[e // 2: e // 2 + e // 8] = src[: e // 8]   # duplicate pairs
    dst[e // 2: e // 2 + e // 8] = dst[: e // 8]
    dst[::7] = src[::7]                    # self loops
    return src, dst


def _store(path, n, src, dst, budget, **kw):
    w = fs.create_store(path)
    w.add_node_type("n", n)
    build_csc(w, ("n", "to", "n"), from_arrays(src, dst), num_src=n, num_dst=n,
              budget_bytes=budget, progress=False, **kw)
    return w


@pytest.mark.parametrize("budget", [1 << 12, 1 << 15, 64 << 20])
@pytest.mark.parametrize("opts", [{}, {"drop_self_loops": True}, {"symmetrize": True},
                                  {"symmetrize": True, "drop_self_loops": True}])
def test_columns_match_the_reference(tmp_path, budget, opts):
    n, e = 300, 6000
    src, dst = random_graph(budget + len(opts), n, e)
    rng = np.random.default_rng(1)
    feat = rng.standard_normal((e, 5)).astype(np.float32)
    rel = rng.integers(0, 1000, e).astype(np.int16)
    ts = np.arange(e, dtype=np.int64) * 10
    w = _store(tmp_path / "s", n, src, dst, budget, **opts)
    stats = carry_columns(w, ("n", "to", "n"), from_arrays(src, dst),
                          {"edge_attr": feat, "relation": rel, "time": ts},
                          budget_bytes=budget, scratch_dir=tmp_path / "scratch",
                          progress=False, **opts)
    w.commit()
    ref = reference_order(src, dst, **opts)
    s = fs.open_store(tmp_path / "s")
    want_ptr, want_idx = reference_csc(src, dst, n, n, **opts)
    assert np.array_equal(np.asarray(s.csc()[1]), want_idx)
    assert s.edge_feature_names() == ["edge_attr"]
    assert s.edge_value_names() == ["relation", "time"]
    got = s.edge_features(name="edge_attr").gather(np.arange(len(ref)))
    np.testing.assert_array_equal(got, feat[ref])
    np.testing.assert_array_equal(s.edge_values(None, "relation"), rel[ref])
    assert s.edge_values(None, "relation").dtype == np.int16
    np.testing.assert_array_equal(s.edge_values(None, "time"), ts[ref])
    assert stats["edge_attr"]["kind"] == "features" and stats["time"]["kind"] == "values"
    if budget == 1 << 12:
        assert stats["order"]["edges_out"] == len(ref)
    assert not list((tmp_path / "scratch").iterdir())  # scratch removed


def test_many_ranges_and_buckets(tmp_path, monkeypatch):
    """A tiny budget: many sort ranges with the spill pass, many output buckets."""
    seen = {}
    real = ec.coo_to_csc

    def spy(*a, **kw):
        st = real(*a, **kw)
        seen.update(st)
        return st

    monkeypatch.setattr(ec, "coo_to_csc", spy)
    monkeypatch.setattr(csc, "SPILL_MIN_SEGMENT", 1)
    n, e = 500, 20000
    src, dst = random_graph(7, n, e)
    feat = np.random.default_rng(2).standard_normal((e, 3)).astype(np.float32)
    w = _store(tmp_path / "s", n, src, dst, 1 << 16)
    order = edge_order(w, ("n", "to", "n"), from_arrays(src, dst), tmp_path / "o.npy",
                       budget_bytes=1 << 14, tmpdir=tmp_path / "t", progress=False)
    assert seen["ranges"] > 3 and "spill_bytes" in seen
    ref = reference_order(src, dst)
    slot = np.asarray(order.slots())
    np.testing.assert_array_equal(np.argsort(slot), ref)  # slot_of_edge inverts coo_of_slot
    st = ec.write_edge_column(w, ("n", "to", "n"), "x", FeatureSource.from_array(feat), order,
                              dtype=np.float16, budget_bytes=1 << 12, tmpdir=tmp_path / "t",
                              progress=False)
    w.commit()
    assert st["rows"] == e
    s = fs.open_store(tmp_path / "s")
    got = s.edge_features(name="x").gather(np.arange(e))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, feat[ref].astype(np.float16))
    assert EdgeOrder.load(tmp_path / "o.npy") == order  # a finished order is found again


def test_bipartite_reverse_edge_type(tmp_path):
    rng = np.random.default_rng(3)
    s_, d_ = rng.integers(0, 40, 900), rng.integers(0, 25, 900)
    s_[100:200] = s_[:100]
    d_[100:200] = d_[:100]
    rel = rng.integers(0, 9, 900)
    w = fs.create_store(tmp_path / "s")
    w.add_node_type("a", 40)
    w.add_node_type("b", 25)
    src = from_arrays(s_, d_)
    build_csc(w, ("a", "to", "b"), src, num_src=40, num_dst=25, budget_bytes=1 << 12,
              progress=False)
    build_csc(w, ("b", "rev_to", "a"), src.reversed(), num_src=25, num_dst=40,
              budget_bytes=1 << 12, progress=False)
    for et, s in ((("a", "to", "b"), src), (("b", "rev_to", "a"), src.reversed())):
        carry_columns(w, et, s, {"rel": rel}, budget_bytes=1 << 12, progress=False,
                      scratch_dir=tmp_path / "t")
    w.commit()
    st = fs.open_store(tmp_path / "s")
    np.testing.assert_array_equal(st.edge_values(("a", "to", "b"), "rel"),
                                  rel[reference_order(s_, d_)])
    np.testing.assert_array_equal(st.edge_values(("b", "rev_to", "a"), "rel"),
                                  rel[reference_order(d_, s_)])


def test_parquet_and_csv_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from preprocess.sources.columns import open_columns

    n, e = 50, 400
    src, dst = random_graph(4, n, e)
    w_ = np.random.default_rng(5).random(e)
    pq.write_table(pa.table({"src": src, "dst": dst, "w": w_, "f0": w_ * 2, "f1": -w_}),
                   tmp_path / "e.parquet")
    with open(tmp_path / "e.csv", "w") as f:
        f.write("src,dst,w\n" + "".join(f"{a},{b},{float(c)!r}\n"
                                         for a, b, c in zip(src, dst, w_)))
    ref = reference_order(src, dst)
    for ext in ("parquet", "csv"):
        w = _store(tmp_path / ext, n, src, dst, 1 << 12)
        cols = {"w": open_columns(tmp_path / f"e.{ext}", "w")}
        if ext == "parquet":
            cols["edge_attr"] = open_columns(tmp_path / "e.parquet", ["f0", "f1"])
        carry_columns(w, ("n", "to", "n"), from_arrays(src, dst), cols, budget_bytes=1 << 12,
                      progress=False)
        w.commit()
        s = fs.open_store(tmp_path / ext)
        np.testing.assert_array_equal(s.edge_values(None, "w"), w_[ref])
        if ext == "parquet":
            np.testing.assert_array_equal(s.edge_features(name="edge_attr").gather(
                np.arange(e)), np.stack([w_ * 2, -w_], 1)[ref])


def test_refusals(tmp_path):
    n = 20
    src = np.array([1, 1, 2, 3, 1])
    dst = np.array([0, 0, 0, 4, 0])
    et = ("n", "to", "n")
    w = _store(tmp_path / "c", n, src, dst, 1 << 12, coalesce=True)
    with pytest.raises(EdgeColumnError, match="other options"):  # duplicates merged
        carry_columns(w, et, from_arrays(src, dst), {"x": np.arange(5)}, progress=False)
    w.close()
    rs, rd = np.random.default_rng(1).integers(0, n, (2, 3000))
    w = _store(tmp_path / "u", n, rs, rd, 1 << 12, sort_neighbors=False)
    with pytest.raises(EdgeColumnError, match="Edge [0-9]+ has another source"):  # unsorted
        carry_columns(w, et, from_arrays(rs, rd), {"x": np.arange(3000)}, progress=False)
    w.close()
    w = _store(tmp_path / "s", n, src, dst, 1 << 12)
    with pytest.raises(EdgeColumnError, match="other source|other number"):  # other edges
        carry_columns(w, et, from_arrays(dst, src), {"x": np.arange(5)}, progress=False)
    with pytest.raises(BadInputError, match="Expected 5 rows in <column x>"):
        carry_columns(w, et, from_arrays(src, dst), {"x": np.arange(6)}, progress=False)
    with pytest.raises(EdgeColumnError, match="1-D column for per-edge values"):
        carry_columns(w, et, from_arrays(src, dst), {"x": np.ones((5, 2))}, kind="values",
                      progress=False)
    with pytest.raises(EdgeColumnError, match="before its edge columns"):
        carry_columns(w, ("n", "other", "n"), from_arrays(src, dst), {"x": np.arange(5)},
                      progress=False)
    with pytest.raises(IdsOutOfRangeInputError, match="Got 20 at edge 1"):
        edge_order(w, et, from_arrays(src, np.array([0, 20, 0, 4, 0])), tmp_path / "o.npy",
                   progress=False)
    assert EdgeOrder.load(tmp_path / "o.npy") is None  # nothing half-written counts as done
    w.close()


MEMCAP = "/work/shared/tools/memcap"


@pytest.mark.skipif(not os.path.exists(MEMCAP), reason="no memcap tool")
def test_edge_columns_stay_in_the_budget_under_memcap(tmp_path):
    """4M edges, a 128 MB feature column and an int16 column, budget 32 MiB, under a 400 MiB
    cap: the order and column steps each add at most the budget (plus 8 MiB of slack)."""
    rng = np.random.default_rng(0)
    e, n = 4_000_000, 1_000_000
    edges = rng.integers(0, n, (2, e)).astype(np.int32)
    rel = rng.integers(0, 1000, e).astype(np.int16)
    np.save(tmp_path / "e.npy", edges)
    np.save(tmp_path / "attr.npy", rng.standard_normal((e, 8)).astype(np.float32))
    np.save(tmp_path / "rel.npy", rel)
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([MEMCAP, "400M", "--", sys.executable,
                        os.path.join(here, "edge_columns_run.py"), str(tmp_path), str(n), "32"],
                       capture_output=True, text=True, timeout=300)
    if p.returncode == 3 and "memcap" in p.stderr:
        pytest.skip("memcap cannot make a memory cgroup here")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "oom_kills=0" in p.stderr
    phases = json.loads(p.stdout.strip().splitlines()[-1])
    for name in ("order", "attr", "rel"):
        assert phases[name]["added_mib"] <= 32 + 8, phases
    ref = reference_order(edges[0], edges[1])
    s = fs.open_store(tmp_path / "s")
    np.testing.assert_array_equal(s.edge_values(None, "rel"), rel[ref])
    rows = rng.integers(0, e, 1000)
    attr = np.load(tmp_path / "attr.npy", mmap_mode="r")
    np.testing.assert_array_equal(s.edge_features(None, "attr").gather(rows), attr[ref[rows]])
