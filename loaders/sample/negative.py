"""Negative sampling for link-level batches: uniform or weighted (degree^0.75) node draws.

Every draw is a pure function of ``(seed, epoch, batch, endpoint, position)``, as the
neighbour sampler's (:mod:`loaders.sample.rng`), so a run's negatives do not depend on the
thread count. The weighted draw inverts a cumulative table of weights with a binary search
(float64, one entry per node of the destination type). :func:`global_uniform_negatives`
draws uniform ``(src, dst)`` pairs that are not edges (DGL's ``GlobalUniform``). The
plain-Python twins define the same streams for tests.
"""

from __future__ import annotations

import bisect

import numba
import numpy as np

from featurestore.threading_layer import parallel_safe
from loaders.sample.packed import kernel_ids, nbr
from loaders.sample.rng import GOLDEN, MASK, mix, mix_py, node_state, node_state_py

__all__ = ["negative_key", "uniform_negatives", "weighted_negatives", "degree_weights",
           "cumulative_weights", "edge_exists", "global_uniform_negatives",
           "uniform_negatives_py", "weighted_negatives_py", "global_uniform_negatives_py"]

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


# -- global uniform pairs (DGL's GlobalUniform) ---------------------------------------------
@numba.njit(nogil=True, cache=True)
def _edge_exists(indptr, indices, src, dst, out):
    """``out[i]``: whether the edge ``src[i] -> dst[i]`` is in the CSC (a scan of ``dst[i]``'s
    in-neighbours)."""
    for i in range(src.shape[0]):
        s = src[i]
        found = False
        for p in range(indptr[dst[i]], indptr[dst[i] + 1]):
            if nbr(indices, p) == s:
                found = True
                break
        out[i] = found


def edge_exists(indptr, indices, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Whether each pair ``src[i] -> dst[i]`` is an edge of the CSC ``(indptr, indices)``."""
    out = np.empty(src.shape[0], dtype=np.bool_)
    _edge_exists(indptr, kernel_ids(indices), np.ascontiguousarray(src, np.int64),
                 np.ascontiguousarray(dst, np.int64), out)
    return out


def _global_draws(m: int) -> int:
    """Candidates drawn in one round for ``m`` global negatives still missing."""
    return m + (m + 1) // 2 + 16


#: rounds of candidates before :func:`global_uniform_negatives` returns fewer than asked
GLOBAL_ROUNDS = 8


def global_uniform_negatives(key: int, m: int, num_src: int, num_dst: int, indptr, indices, *,
                             exclude_self_loops: bool = True,
                             replace: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``m`` ``(src, dst)`` pairs drawn uniformly that are not edges of the CSC
    ``(indptr, indices)``, as DGL's ``GlobalUniform``: no self-loops with
    ``exclude_self_loops`` (same source and destination type), no repeated pair unless
    ``replace``. Round ``r`` draws candidates under endpoint keys ``2r`` and ``2r + 1`` of
    :func:`negative_key` for the pairs still missing; after :data:`GLOBAL_ROUNDS` rounds
    fewer come back (graphs where most pairs are edges; DGL: "may rarely return less")."""
    src = dst = np.zeros(0, np.int64)
    for r in range(GLOBAL_ROUNDS):
        if src.shape[0] >= m:
            break
        c = _global_draws(m - src.shape[0])
        s = uniform_negatives(negative_key(key, 2 * r), c, num_src)
        d = uniform_negatives(negative_key(key, 2 * r + 1), c, num_dst)
        keep = ~edge_exists(indptr, indices, s, d)
        if exclude_self_loops:
            keep &= s != d
        src, dst = np.concatenate([src, s[keep]]), np.concatenate([dst, d[keep]])
        if not replace:
            _, first = np.unique(src * np.int64(num_dst) + dst, return_index=True)
            first.sort()
            src, dst = src[first], dst[first]
    return src[:m], dst[:m]


def global_uniform_negatives_py(key: int, m: int, num_src: int, num_dst: int, edges: set, *,
                                exclude_self_loops: bool = True,
                                replace: bool = False) -> list[tuple[int, int]]:
    """The twin of :func:`global_uniform_negatives` (``edges``: a set of ``(src, dst)``)."""
    out, seen = [], set()
    for r in range(GLOBAL_ROUNDS):
        if len(out) >= m:
            break
        c = _global_draws(m - len(out))
        src = uniform_negatives_py(negative_key(key, 2 * r), c, num_src)
        dst = uniform_negatives_py(negative_key(key, 2 * r + 1), c, num_dst)
        for p in zip(src, dst):
            if p in edges or (exclude_self_loops and p[0] == p[1]) or (not replace and p in seen):
                continue
            seen.add(p)
            out.append(p)
    return out[:m]
