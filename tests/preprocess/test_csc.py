"""COO to CSC against scipy.sparse on random graphs (hypothesis), in tiny budgets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import featurestore as fs
from preprocess import build_csc, coo_to_csc, from_arrays, reverse_etype
from preprocess.steps import csc
from preprocess.errors import BadInputError, IdsOutOfRangeInputError

from pp_helpers import csc_of, reference_csc


@pytest.fixture(autouse=True, scope="module")
def small_budgets():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(csc, "MIN_BUDGET_BYTES", 1 << 10)
        yield


def _collect(source, **kw):
    got = {}

    def indptr_out(a):
        got["indptr"] = np.array(a)

    def indices_out(blocks, n, dtype):
        parts = [np.array(b) for b in blocks]
        got["indices"] = np.concatenate(parts) if parts else np.empty(0, dtype)
        assert got["indices"].shape[0] == n and got["indices"].dtype == dtype

    stats = coo_to_csc(source, indptr_out=indptr_out, indices_out=indices_out, progress=False,
                       **kw)
    return got["indptr"], got["indices"].astype(np.int64), stats


@st.composite
def graphs(draw):
    num_src = draw(st.integers(1, 60))
    bipartite = draw(st.booleans())
    num_dst = draw(st.integers(1, 60)) if bipartite else num_src
    e = draw(st.integers(0, 400))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_src, e)
    dst = rng.integers(0, num_dst, e)
    shape = draw(st.sampled_from(["uniform", "hub", "dups", "loops", "isolated"]))
    if shape == "hub" and e:  # one huge-degree node
        dst[: e * 3 // 4] = draw(st.integers(0, num_dst - 1))
    elif shape == "dups" and e:
        src[e // 2:] = src[: e - e // 2]
        dst[e // 2:] = dst[: e - e // 2]
    elif shape == "loops" and not bipartite and e:
        dst[::3] = src[::3]
    elif shape == "isolated" and e:  # only a few nodes have edges
        src %= max(1, num_src // 5)
        dst %= max(1, num_dst // 5)
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    return src.astype(dtype), dst.astype(dtype), num_src, num_dst, bipartite


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=graphs(), coalesce=st.booleans(), drop=st.booleans(),
       budget=st.sampled_from([1 << 10, 1 << 12, 1 << 20, 64 << 20]),
       block=st.sampled_from([1, 7, 1 << 16]), spill=st.booleans())
def test_matches_scipy(g, coalesce, drop, budget, block, spill):
    src, dst, num_src, num_dst, bipartite = g
    drop = drop and not bipartite
    old = csc.MIN_BLOCK_EDGES, csc.SPILL_MIN_SEGMENT
    csc.MIN_BLOCK_EDGES, csc.SPILL_MIN_SEGMENT = block, 1 if spill else 1 << 40
    try:
        indptr, indices, stats = _collect(from_arrays(src, dst), num_src=num_src,
                                          num_dst=num_dst, coalesce=coalesce,
                                          drop_self_loops=drop, budget_bytes=budget)
    finally:
        csc.MIN_BLOCK_EDGES, csc.SPILL_MIN_SEGMENT = old
    want_ptr, want_idx = reference_csc(src, dst, num_src, num_dst, coalesce=coalesce,
                                       drop_self_loops=drop)
    np.testing.assert_array_equal(indptr, want_ptr)
    np.testing.assert_array_equal(indices, want_idx)
    assert stats["edges_in"] == src.shape[0]
    assert stats["edges_out"] == want_idx.shape[0]


@settings(max_examples=40, deadline=None)
@given(g=graphs())
def test_unsorted_neighbours_are_a_permutation(g):
    src, dst, num_src, num_dst, _ = g
    indptr, indices, _ = _collect(from_arrays(src, dst), num_src=num_src, num_dst=num_dst,
                                  sort_neighbors=False, budget_bytes=1 << 12)
    want_ptr, want_idx = reference_csc(src, dst, num_src, num_dst)
    np.testing.assert_array_equal(indptr, want_ptr)
    for v in range(num_dst):
        a, b = indptr[v], indptr[v + 1]
        np.testing.assert_array_equal(np.sort(indices[a:b]), want_idx[a:b])


@pytest.mark.parametrize("spill", [False, True])
def test_many_ranges_and_oversized_destination(tmp_path, monkeypatch, spill):
    monkeypatch.setattr(csc, "SPILL_MIN_SEGMENT", 1 if spill else 1 << 40)
    rng = np.random.default_rng(5)
    n = 3000
    src = rng.integers(0, n, 60000)
    dst = rng.integers(0, n, 60000)
    dst[:20000] = 7  # a destination alone over the budget: built in a scratch memory map
    indptr, indices, stats = _collect(from_arrays(src, dst), num_src=n, num_dst=n,
                                      coalesce=True, budget_bytes=64 << 10,
                                      tmpdir=str(tmp_path / "scratch"))
    assert stats["ranges"] > 3
    assert ("spill_bytes" in stats) == spill
    want_ptr, want_idx = reference_csc(src, dst, n, n, coalesce=True)
    np.testing.assert_array_equal(indptr, want_ptr)
    np.testing.assert_array_equal(indices, want_idx)
    assert not any((tmp_path / "scratch").iterdir())  # scratch files removed


def _store(tmp_path, counts):
    w = fs.create_store(tmp_path / "s")
    for nt, n in counts.items():
        w.add_node_type(nt, n)
    return w


def test_build_csc_writes_store_and_reverse(tmp_path):
    rng = np.random.default_rng(6)
    s = rng.integers(0, 30, 500)
    d = rng.integers(0, 20, 500)
    w = _store(tmp_path, {"a": 30, "p": 20})
    et = ("a", "writes", "p")
    stats = build_csc(w, et, from_arrays(s, d), num_src=30, num_dst=20, coalesce=True,
                      progress=False)
    build_csc(w, reverse_etype(et), from_arrays(s, d).reversed(), num_src=20, num_dst=30,
              coalesce=True, progress=False)
    w.commit()
    store = fs.open_store(tmp_path / "s")
    np.testing.assert_array_equal(csc_of(store, et)[1],
                                  reference_csc(s, d, 30, 20, coalesce=True)[1])
    rp, ri = csc_of(store, ("p", "rev_writes", "a"))
    wp, wi = reference_csc(d, s, 20, 30, coalesce=True)
    np.testing.assert_array_equal(rp, wp)
    np.testing.assert_array_equal(ri, wi)
    assert store.schema["edge_types"][0]["indices_dtype"] == "int32"
    assert stats["edges_per_s"] > 0 and stats["peak_anon_bytes"] > 0


def test_symmetrize_matches_pyg_to_undirected(tmp_path):
    s = np.array([0, 1, 2, 2, 3])
    d = np.array([1, 0, 2, 3, 1])
    w = _store(tmp_path, {"n": 4})
    build_csc(w, ("n", "e", "n"), from_arrays(s, d), num_src=4, num_dst=4, coalesce=True,
              symmetrize=True, progress=False)
    w.commit()
    ptr, idx = csc_of(fs.open_store(tmp_path / "s"))
    want = reference_csc(s, d, 4, 4, coalesce=True, symmetrize=True)
    np.testing.assert_array_equal(ptr, want[0])
    np.testing.assert_array_equal(idx, want[1])
    with pytest.raises(ValueError, match="reverse_etype"):
        w2 = _store(tmp_path / "x", {"a": 2, "b": 2})
        build_csc(w2, ("a", "r", "b"), from_arrays([0], [1]), num_src=2, num_dst=2,
                  symmetrize=True, progress=False)


def test_empty_edge_type(tmp_path):
    w = _store(tmp_path, {"n": 5})
    st_ = build_csc(w, ("n", "e", "n"), from_arrays(np.empty(0, np.int64), np.empty(0, np.int64)),
                    num_src=5, num_dst=5, coalesce=True, progress=False)
    w.commit()
    ptr, idx = csc_of(fs.open_store(tmp_path / "s"))
    np.testing.assert_array_equal(ptr, np.zeros(6))
    assert idx.shape == (0,) and st_["edges_out"] == 0


@pytest.mark.parametrize("s,d,msg", [
    ([0, 1, -1], [0, 1, 1], "source ids in \\[0, 4\\) in <arrays>. Got -1 at edge 2 \\(negative"),
    ([0, 1, 2], [0, 4, 1], "destination ids in \\[0, 4\\) in <arrays>. Got 4 at edge 1"),
])
def test_out_of_range_ids_name_the_source(s, d, msg):
    with pytest.raises(IdsOutOfRangeInputError, match=msg):
        _collect(from_arrays(np.array(s), np.array(d)), num_src=4, num_dst=4)


def test_node_count_must_match_store(tmp_path):
    w = _store(tmp_path, {"n": 5})
    with pytest.raises(BadInputError, match="Expected 5 nodes of type 'n'"):
        build_csc(w, ("n", "e", "n"), from_arrays([0], [1]), num_src=6, num_dst=6,
                  progress=False)


def test_not_enough_disk(tmp_path, monkeypatch):
    from preprocess.errors import NotEnoughDiskError

    w = _store(tmp_path, {"n": 10})
    monkeypatch.setattr(csc, "free_disk_bytes", lambda path: 100)
    with pytest.raises(NotEnoughDiskError, match="Expected .* free for .*Got 100 B"):
        build_csc(w, ("n", "e", "n"), from_arrays(np.arange(50) % 10, np.arange(50) % 7),
                  num_src=10, num_dst=10, progress=False)
