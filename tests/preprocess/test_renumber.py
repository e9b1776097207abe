"""Renumbering and reordering round-trip through orig_id (hypothesis)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from preprocess.errors import BadInputError
from preprocess.steps.renumber import IdMapper, build_idmap, degree_rank, string_keys


def _blocks(a, k):
    return [a[i:i + k] for i in range(0, len(a), k)] or [a[:0]]


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(-2**62, 2**62), unique=True, max_size=300),
       block=st.integers(1, 50), budget=st.sampled_from([1, 1 << 30]),
       seed=st.integers(0, 2**31))
def test_id_file_round_trip(tmp_path_factory, ids, block, budget, seed):
    ids = np.array(ids, np.int64)
    d = tmp_path_factory.mktemp("m")
    m = build_idmap(str(d / "m"), _blocks(ids, block), name="ids.npy", what="paper",
                    from_file=True, strings=False, budget_bytes=budget)
    assert m.num_nodes == len(ids)
    # store id = row in the file; orig_id(store id) gives the id back
    orig = m.orig_ids(str(d / "o.bin"))
    np.testing.assert_array_equal(orig, ids)
    if len(ids):
        q = np.random.default_rng(seed).integers(0, len(ids), 100)
        np.testing.assert_array_equal(m.lookup(ids[q], "e.parquet", "source"), q)
        # reordering by degree composes: orig_id[rank[s]] is still s's original id
        deg = np.random.default_rng(seed).integers(0, 4, len(ids))
        rank = degree_rank(deg)
        mapper = IdMapper(len(ids), m, rank)
        new = mapper(ids[q], "e", "source")
        perm = np.empty_like(rank)
        perm[rank] = np.arange(len(ids))
        np.testing.assert_array_equal(orig[perm][new], ids[q])
        assert np.all(np.diff(deg[perm]) <= 0)  # highest degree first


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.integers(0, 10**15), max_size=400), block=st.integers(1, 64),
       budget=st.sampled_from([1, 1 << 30]))
def test_ids_discovered_from_edges(tmp_path_factory, ids, block, budget):
    ids = np.array(ids, np.int64)
    d = tmp_path_factory.mktemp("m")
    m = build_idmap(str(d / "m"), _blocks(ids, block), name="edges", what="n",
                    from_file=False, strings=False, budget_bytes=budget)
    u = np.unique(ids)
    assert m.num_nodes == len(u)
    np.testing.assert_array_equal(m.orig_ids(str(d / "o.bin")), u)
    np.testing.assert_array_equal(m.lookup(ids, "e", "source"), np.searchsorted(u, ids))


@settings(max_examples=30, deadline=None)
@given(names=st.lists(st.text(max_size=12), unique=True, max_size=200), block=st.integers(1, 40))
def test_string_ids_round_trip(tmp_path_factory, names, block):
    d = tmp_path_factory.mktemp("m")
    arr = pa.array(names, pa.string())
    m = build_idmap(str(d / "m"), [arr.slice(i, block) for i in range(0, len(arr), block)],
                    name="authors.parquet", what="author", from_file=True, strings=True,
                    budget_bytes=1)
    assert m.num_nodes == len(names)
    keys, _ = string_keys(arr)
    np.testing.assert_array_equal(m.orig_ids(str(d / "o.bin")), keys)  # orig_id = the key
    np.testing.assert_array_equal(m.lookup(arr, "e", "source"), np.arange(len(names)))


def test_unknown_and_repeated_ids(tmp_path):
    m = build_idmap(str(tmp_path / "m"), [np.array([10, 30, 20])], name="ids.npy",
                    what="paper", from_file=True, strings=False)
    with pytest.raises(BadInputError, match="cites.csv.*Got 25 \\(row 1\\)"):
        m.lookup(np.array([10, 25]), "cites.csv", "destination")
    with pytest.raises(BadInputError, match="each paper id once in ids.npy. Got id 3 twice"):
        build_idmap(str(tmp_path / "r"), [np.array([1, 3]), np.array([3])], name="ids.npy",
                    what="paper", from_file=True, strings=False, budget_bytes=1)
    with pytest.raises(BadInputError, match="in \\[0, 4\\) in e.npy. Got 4"):
        IdMapper(4)(np.array([0, 4]), "e.npy", "source")


def test_string_hash_collision_is_reported(tmp_path, monkeypatch):
    import preprocess.steps.renumber as R

    real = R.string_keys  # every string gets key 0; the check hashes still differ
    monkeypatch.setattr(R, "string_keys", lambda s: (np.zeros(len(s), np.int64), real(s)[1]))
    with pytest.raises(BadInputError, match="hash collision"):
        build_idmap(str(tmp_path / "m"), [pa.array(["a", "b"])], name="n.csv", what="author",
                    from_file=True, strings=True)
