"""Layer-neighbour sampling (LABOR-0, Balin & Catalyurek 2023; GraphBolt's
``sample_layer_neighbor``): an opt-in sampler with another distribution than uniform
neighbour sampling.

Each candidate source node ``t`` draws one uniform variate ``r_t`` per batch (and edge type;
per layer too unless ``layer_dependency``), shared by every destination: the edge ``t -> s``
is kept when ``r_t < k / d_s`` (``k`` the fanout, ``d_s`` the in-degree of ``s``; every edge
when ``d_s <= k``). Each destination keeps ``k`` neighbours *in expectation* (Poisson
sampling, not exactly ``k``), each in-edge with probability ``min(1, k / d_s)``, as uniform
sampling does; but destinations that share neighbours now pick the *same* ones, so a batch
holds fewer distinct nodes and reads fewer feature rows. The estimator a GNN layer computes is
unbiased per node as with uniform sampling; the kept neighbours of two nodes are correlated.
No edge weights are returned (GraphBolt's importance-sampling iterations are not done).

A batch's draws are pure functions of ``(seed, epoch, batch, layer, edge type, source id)``
(:mod:`loaders.sample.rng`), so batches do not depend on the thread count; the plain-Python
twin is :func:`labor_keep_py`.
"""

from __future__ import annotations

import numba
import numpy as np

from loaders.sample.packed import kernel_ids, nbr
from loaders.sample.rng import GOLDEN, MASK, mix, mix_py

__all__ = ["labor_counts", "labor_fill", "labor_keep_py", "unit_py"]

_GOLDEN_U = np.uint64(GOLDEN)
_S11 = np.uint64(11)
_INV53 = 1.0 / (1 << 53)

#: frontiers below this run in the serial twin of a kernel
PARALLEL_MIN = 4096


def unit_py(key: int, t: int) -> float:
    """``r_t`` of source ``t`` under ``key``: a float in [0, 1) (the twin of ``_unit``)."""
    return (mix_py((key ^ mix_py((t * GOLDEN) & MASK)) & MASK) >> 11) * _INV53


def labor_keep_py(key: int, sources, degree: int, fanout: int) -> list[int]:
    """Positions ``j`` of the in-edges (sources ``sources``, in CSC order) of one destination
    of in-degree ``degree`` that LABOR-0 keeps: every one when ``fanout < 0`` or
    ``degree <= fanout``, else those whose source has ``r_t < fanout / degree``."""
    if fanout < 0 or degree <= fanout:
        return list(range(degree))
    thr = fanout / degree
    return [j for j, t in enumerate(sources) if unit_py(key, int(t)) < thr]


@numba.njit(nogil=True, cache=True, inline="always")
def _unit(key, t):
    return np.float64(mix(key ^ mix(np.uint64(t) * _GOLDEN_U)) >> _S11) * _INV53


@numba.njit(nogil=True, cache=True, inline="always")
def _count_one(indptr, indices, frontier, fanout, key, start, deg, counts, i):
    v = frontier[i]
    s0 = np.int64(indptr[v])
    d = np.int64(indptr[v + 1]) - s0
    start[i] = s0
    deg[i] = d
    if fanout < 0 or d <= fanout:
        counts[i + 1] = d
        return
    thr = fanout / d
    c = 0
    for j in range(d):
        if _unit(key, nbr(indices, s0 + j)) < thr:
            c += 1
    counts[i + 1] = c


@numba.njit(nogil=True, parallel=True, cache=True)
def _counts_par(indptr, indices, frontier, fanout, key, start, deg, counts):
    for i in numba.prange(frontier.shape[0]):
        _count_one(indptr, indices, frontier, fanout, key, start, deg, counts, i)


@numba.njit(nogil=True, cache=True)
def _counts_ser(indptr, indices, frontier, fanout, key, start, deg, counts):
    for i in range(frontier.shape[0]):
        _count_one(indptr, indices, frontier, fanout, key, start, deg, counts, i)


@numba.njit(nogil=True, cache=True, inline="always")
def _fill_one(starts, degs, indices, fanout, key, offsets, src, eid, dst, i):
    o = offsets[i]
    if offsets[i + 1] == o:
        return
    s0, d = starts[i], degs[i]
    take_all = fanout < 0 or d <= fanout
    thr = 1.0 if take_all else fanout / d
    m = 0
    for j in range(d):
        t = nbr(indices, s0 + j)
        if take_all or _unit(key, t) < thr:
            src[o + m] = t
            eid[o + m] = s0 + j
            dst[o + m] = i
            m += 1


@numba.njit(nogil=True, parallel=True, cache=True)
def _fill_par(starts, degs, indices, fanout, key, offsets, src, eid, dst):
    for i in numba.prange(starts.shape[0]):
        _fill_one(starts, degs, indices, fanout, key, offsets, src, eid, dst, i)


@numba.njit(nogil=True, cache=True)
def _fill_ser(starts, degs, indices, fanout, key, offsets, src, eid, dst):
    for i in range(starts.shape[0]):
        _fill_one(starts, degs, indices, fanout, key, offsets, src, eid, dst, i)


def labor_counts(indptr, indices, frontier, fanout, key, start, deg, parallel: bool):
    """Offsets (length ``len(frontier) + 1``) of each destination's kept in-edges; fills
    ``start``/``deg`` (each destination's CSC range) for :func:`labor_fill`."""
    counts = np.empty(frontier.shape[0] + 1, np.int64)
    counts[0] = 0
    fn = _counts_par if parallel and frontier.shape[0] >= PARALLEL_MIN else _counts_ser
    fn(indptr, kernel_ids(indices), frontier, np.int64(fanout), np.uint64(key), start, deg, counts)
    return np.cumsum(counts, out=counts)


def labor_fill(starts, degs, indices, fanout, key, offsets, src, eid, dst, parallel: bool):
    """``src`` (global source id), ``eid`` (position in ``indices``), ``dst`` (frontier index)
    of the kept in-edges, in CSC order per destination."""
    fn = _fill_par if parallel and starts.shape[0] >= PARALLEL_MIN else _fill_ser
    fn(starts, degs, kernel_ids(indices), np.int64(fanout), np.uint64(key), offsets, src, eid, dst)
