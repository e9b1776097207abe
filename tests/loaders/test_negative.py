"""Negative samplers (loaders.sample.negative): the numba kernels equal their plain-Python
twins draw for draw, and their distributions pass a chi-square test against the intended one."""

import numpy as np
import pytest
from scipy import stats

from loaders.sample.negative import (cumulative_weights, degree_weights, negative_key,
                                     uniform_negatives, uniform_negatives_py, weighted_negatives,
                                     weighted_negatives_py)
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
