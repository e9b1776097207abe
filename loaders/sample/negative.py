"""Negative sampling for link-level batches: uniform or weighted (degree^0.75) node draws.

Every draw is a pure function of ``(seed, epoch, batch, endpoint, position)``, as the
neighbour sampler's (:mod:`loaders.sample.rng`), so a run's negatives do not depend on the
thread count. The weighted draw inverts a cumulative table of weights with a binary search
(float64, one entry per node of the destination type). The plain-Python twins at the bottom
define the same streams for tests.
"""

from __future__ import annotations

import bisect

import numba
import numpy as np

from featurestore.threading_layer import parallel_safe
from loaders.sample.rng import GOLDEN, MASK, mix, mix_py, node_state, node_state_py

__all__ = ["negative_key", "uniform_negatives", "weighted_negatives", "degree_weights",
           "cumulative_weights", "uniform_negatives_py", "weighted_negatives_py"]

#: tag mixed into a batch key for negative draws: no collision with (layer, etype) keys
_NEG_TAG = 0x4E45_4700_0000
_2_53 = float(1 << 53)


def negative_key(batch_key: int, endpoint: int) -> int:
    """The key of one endpoint's negative draws (0: source, 1: destination) of a batch."""
    return mix_py(batch_key ^ mix_py(_NEG_TAG | (endpoint & 0xFF)))


@numba.njit(nogil=True, cache=True, inline="always")
def _unit(key, i):
    """A float64 in [0, 1) for draw ``i`` under ``key`` (53 random bits)."""
    z = mix(node_state(key, i) + np.uint64(GOLDEN))
    return np.float64(z >> np.uint64(11)) / _2_53


@numba.njit(nogil=True, parallel=True, cache=True)
def _uniform(key, num_nodes, out):
    n = np.uint64(num_nodes)
    for i in numba.prange(out.shape[0]):
        out[i] = np.int64(mix(node_state(key, i) + np.uint64(GOLDEN)) % n)


@numba.njit(nogil=True, parallel=True, cache=True)
def _weighted(key, cdf, out):
    total = cdf[cdf.shape[0] - 1]
    last = cdf.shape[0] - 1
    for i in numba.prange(out.shape[0]):
        u = _unit(key, i) * total
        j = np.searchsorted(cdf, u, side="right")
        out[i] = j if j <= last else last


_uniform_ser = numba.njit(nogil=True, cache=True)(_uniform.py_func)
_weighted_ser = numba.njit(nogil=True, cache=True)(_weighted.py_func)


def uniform_negatives(key: int, n: int, num_nodes: int,
                      out: np.ndarray | None = None) -> np.ndarray:
    """``n`` node ids drawn uniformly from ``[0, num_nodes)`` (int64)."""
    if num_nodes <= 0:
        raise ValueError(f"Expected a node type with nodes to draw negatives from. Got "
                         f"num_nodes={num_nodes} instead.")
    out = np.empty(n, dtype=np.int64) if out is None else out
    (_uniform if parallel_safe() else _uniform_ser)(np.uint64(key), int(num_nodes), out[:n])
    return out[:n]


def degree_weights(degree: np.ndarray, power: float = 0.75) -> np.ndarray:
    """``degree ** power`` as float64 (word2vec's and PinSage's negative distribution)."""
    return np.power(np.asarray(degree, dtype=np.float64), power)


def cumulative_weights(weights: np.ndarray) -> np.ndarray:
    """The table :func:`weighted_negatives` searches; refuses negative, NaN or all-zero weights."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"Expected a 1-D array of node weights. Got shape {w.shape} instead.")
    if not np.all(np.isfinite(w)) or (w < 0).any():
        raise ValueError("Expected finite, non-negative node weights. Got negative, NaN or "
                         "infinite weights instead.")
    cdf = np.cumsum(w)
    if cdf[-1] <= 0:
        raise ValueError("Expected at least one node of positive weight. Got all zeros instead.")
    return cdf


def weighted_negatives(key: int, n: int, cdf: np.ndarray,
                       out: np.ndarray | None = None) -> np.ndarray:
    """``n`` node ids drawn with probability proportional to their weight (``cdf`` from
    :func:`cumulative_weights`; a node of weight 0 is never drawn)."""
    out = np.empty(n, dtype=np.int64) if out is None else out
    (_weighted if parallel_safe() else _weighted_ser)(np.uint64(key), cdf, out[:n])
    return out[:n]


# -- plain Python twins ---------------------------------------------------------------------
def uniform_negatives_py(key: int, n: int, num_nodes: int) -> list[int]:
    """The twin of :func:`uniform_negatives`."""
    return [mix_py((node_state_py(key, i) + GOLDEN) & MASK) % num_nodes for i in range(n)]


def weighted_negatives_py(key: int, n: int, cdf) -> list[int]:
    """The twin of :func:`weighted_negatives`."""
    cdf = [float(c) for c in cdf]
    out = []
    for i in range(n):
        z = mix_py((node_state_py(key, i) + GOLDEN) & MASK)
        u = (z >> 11) / _2_53 * cdf[-1]
        out.append(min(bisect.bisect_right(cdf, u), len(cdf) - 1))
    return out
