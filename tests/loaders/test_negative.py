"""Negative samplers (loaders.sample.negative): the numba kernels equal their plain-Python
twins draw for draw, and their distributions pass a chi-square test against the intended one."""

import numpy as np
import pytest
from scipy import stats

from loaders.sample.negative import (cumulative_weights, degree_weights, edge_exists,
                                     global_uniform_negatives, global_uniform_negatives_py,
                                     negative_key, uniform_negatives, uniform_negatives_py,
                                     weighted_negatives, weighted_negatives_py)
from loaders.sample.rng import batch_key


@pytest.mark.parametrize("num_nodes", [1, 7, 1000, 2**31 + 11])
def test_uniform_equals_twin(num_nodes):
    key = negative_key(batch_key(3, 1, 4), 1)
    got = uniform_negatives(key, 500, num_nodes)
    assert got.tolist() == uniform_negatives_py(key, 500, num_nodes)
    assert got.min() >= 0 and got.max() < num_nodes


def test_weighted_equals_twin_and_skips_zero_weight():
    rng = np.random.default_rng(0)
    w = degree_weights(rng.integers(0, 50, 300))
    w[:5] = 0.0
    cdf = cumulative_weights(w)
    key = negative_key(batch_key(0, 0, 9), 0)
    got = weighted_negatives(key, 2000, cdf)
    assert got.tolist() == weighted_negatives_py(key, 2000, cdf)
    assert not np.isin(got, np.flatnonzero(w == 0)).any()


def test_uniform_chi_square():
    got = uniform_negatives(negative_key(batch_key(1, 0, 0), 1), 200_000, 50)
    counts = np.bincount(got, minlength=50)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_weighted_chi_square_degree_075():
    deg = np.random.default_rng(5).zipf(2.0, 40).clip(1, 500)
    w = degree_weights(deg)
    got = weighted_negatives(negative_key(batch_key(2, 0, 0), 1), 300_000, cumulative_weights(w))
    counts = np.bincount(got, minlength=w.size)
    expected = w / w.sum() * got.size
    assert stats.chisquare(counts, expected).pvalue > 1e-4


def test_keys_differ_by_batch_and_endpoint():
    a = uniform_negatives(negative_key(batch_key(0, 0, 0), 0), 64, 10**6)
    b = uniform_negatives(negative_key(batch_key(0, 0, 1), 0), 64, 10**6)
    c = uniform_negatives(negative_key(batch_key(0, 0, 0), 1), 64, 10**6)
    assert not np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize("bad", [[], [1.0, -1.0], [0.0, 0.0], [1.0, np.nan]])
def test_bad_weights_refused(bad):
    with pytest.raises(ValueError):
        cumulative_weights(np.array(bad))


def test_no_nodes_refused():
    with pytest.raises(ValueError, match="num_nodes=0"):
        uniform_negatives(1, 3, 0)


def _random_csc(n_src, n_dst, m, seed):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n_src, m), rng.integers(0, n_dst, m)
    order = np.lexsort((src, dst))
    indptr = np.zeros(n_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n_dst), out=indptr[1:])
    return indptr, src[order].astype(np.int64), set(zip(src.tolist(), dst.tolist()))


def test_edge_exists_against_set():
    indptr, indices, edges = _random_csc(30, 20, 200, 1)
    rng = np.random.default_rng(2)
    s, d = rng.integers(0, 30, 2000), rng.integers(0, 20, 2000)
    got = edge_exists(indptr, indices, s, d)
    assert got.tolist() == [(a, b) in edges for a, b in zip(s.tolist(), d.tolist())]


@pytest.mark.parametrize("self_loops,replace", [(True, False), (False, True), (True, True)])
def test_global_uniform_equals_twin_and_rejects_edges(self_loops, replace):
    indptr, indices, edges = _random_csc(40, 40, 600, 3)
    key = batch_key(7, 2, 5)
    s, d = global_uniform_negatives(key, 300, 40, 40, indptr, indices,
                                    exclude_self_loops=self_loops, replace=replace)
    want = global_uniform_negatives_py(key, 300, 40, 40, edges, exclude_self_loops=self_loops,
                                       replace=replace)
    pairs = list(zip(s.tolist(), d.tolist()))
    assert pairs == want and len(pairs) == 300
    assert not any(p in edges for p in pairs)
    if self_loops:
        assert not (s == d).any()
    if not replace:
        assert len(set(pairs)) == len(pairs)


def test_global_uniform_chi_square_over_non_edges():
    """Every non-edge pair is equally likely (with replacement, many batches)."""
    indptr, indices, edges = _random_csc(6, 5, 12, 4)
    counts = {}
    for b in range(400):
        s, d = global_uniform_negatives(batch_key(1, 0, b), 200, 6, 5, indptr, indices,
                                        exclude_self_loops=False, replace=True)
        for p in zip(s.tolist(), d.tolist()):
            counts[p] = counts.get(p, 0) + 1
    allowed = {(a, b) for a in range(6) for b in range(5)} - edges
    assert set(counts) == allowed
    assert stats.chisquare([counts[p] for p in sorted(allowed)]).pvalue > 1e-4


def test_global_uniform_fewer_on_a_full_graph():
    """A complete bipartite graph has no negatives: none come back, as DGL may return fewer."""
    indptr = np.arange(0, 13, 3, dtype=np.int64)
    indices = np.tile(np.arange(3, dtype=np.int64), 4)
    s, d = global_uniform_negatives(batch_key(0, 0, 0), 10, 3, 4, indptr, indices)
    assert s.shape == d.shape == (0,)
