"""Numba kernels of the neighbour sampler (see :mod:`loaders.sample.reference` for the NumPy twin).

One sampling step takes a frontier of destination nodes and, per node, picks source
neighbours from the CSC arrays (:func:`sample_counts` then :func:`sample_fill`, both parallel
over the frontier); :func:`dedup` then maps the sampled global ids to local ids with an
open-addressing hash table, appending new nodes in the order they are met (serial, so the
numbering does not depend on the thread count).

Without replacement, ``k`` of ``d`` neighbours are drawn with Floyd's algorithm; the
membership test is a linear scan for small ``k`` and a bitmap for large ``k`` (the chosen
set is the same either way).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

from featurestore.threading_layer import parallel_safe
from loaders.sample.packed import kernel_ids, nbr
from loaders.sample.rng import mix, next_below, node_state

#: libc's memcpy as an external symbol (resolved by name, so kernels using it can be cached);
#: pointers are passed as size_t, the same ABI on 64-bit Linux.
memcpy = types.ExternalFunction("memcpy", types.uintp(types.uintp, types.uintp, types.uintp))

#: up to this many draws, Floyd's membership test scans the draws made so far.
SCAN_LIMIT = 64

#: frontiers (and edge counts) below this run in the serial twin of a kernel.
PARALLEL_MIN = 4096


@numba.njit(nogil=True, cache=True, inline="always")
def _count_one(indptr, frontier, fanout, replace, start, deg, counts, i):
    v = frontier[i]
    s0 = np.int64(indptr[v])
    d = np.int64(indptr[v + 1]) - s0
    start[i] = s0
    deg[i] = d
    if fanout < 0:
        c = d
    elif replace:
        c = np.int64(fanout) if d > 0 else np.int64(0)
    else:
        c = min(np.int64(fanout), d)
    counts[i + 1] = c


@numba.njit(nogil=True, parallel=True, cache=True)
def _counts_par(indptr, frontier, fanout, replace, start, deg, counts):
    for i in numba.prange(frontier.shape[0]):
        _count_one(indptr, frontier, fanout, replace, start, deg, counts, i)


@numba.njit(nogil=True, cache=True)
def _counts_ser(indptr, frontier, fanout, replace, start, deg, counts):
    for i in range(frontier.shape[0]):
        _count_one(indptr, frontier, fanout, replace, start, deg, counts, i)


def _parallel_ok() -> bool:
    """Whether parallel kernels may run while another thread runs them too
    (:func:`featurestore.threading_layer.parallel_safe`)."""
    return parallel_safe()


def sample_counts(indptr, frontier, fanout, replace, start, deg):
    """Offsets (length ``len(frontier) + 1``) of each destination's sampled edges.

    Also fills ``start`` and ``deg`` (each destination's CSC range) for :func:`sample_fill`,
    so that ``indptr`` is read once. Small frontiers run serially (a parallel region costs
    more than it saves there).
    """
    counts = np.empty(frontier.shape[0] + 1, np.int64)
    counts[0] = 0
    fn = _counts_par if frontier.shape[0] >= PARALLEL_MIN and _parallel_ok() else _counts_ser
    fn(indptr, frontier, fanout, replace, start, deg, counts)
    return np.cumsum(counts, out=counts)


@numba.njit(nogil=True, cache=True, inline="always")
def _draw_one(d, c, fanout, replace, key, i, out, o, base):
    """Write ``c`` draws of ``0..d-1`` (plus ``base``) for frontier node ``i`` to
    ``out[o:o + c]``: all in order, with replacement, or Floyd's ``c`` distinct ones."""
    if fanout < 0 or (not replace and c >= d):
        for j in range(c):
            out[o + j] = base + j
    elif replace:
        state = node_state(key, i)
        for j in range(c):
            state, t = next_below(state, d)
            out[o + j] = base + t
    elif c <= SCAN_LIMIT:  # Floyd, linear membership scan over the draws so far
        state = node_state(key, i)
        m = 0
        for jj in range(d - c, d):
            state, t = next_below(state, jj + 1)
            for q in range(m):
                if out[o + q] == base + t:
                    t = jj
                    break
            out[o + m] = base + t
            m += 1
    else:  # Floyd with a bitmap
        state = node_state(key, i)
        seen = np.zeros(d, np.bool_)
        m = 0
        for jj in range(d - c, d):
            state, t = next_below(state, jj + 1)
            if seen[t]:
                t = jj
            seen[t] = True
            out[o + m] = base + t
            m += 1


@numba.njit(nogil=True, cache=True, inline="always")
def _fill_one(starts, degs, indices, fanout, replace, key, offsets, src, eid, dst, i):
    o = offsets[i]
    c = offsets[i + 1] - o
    if c == 0:
        return
    for j in range(c):
        dst[o + j] = i
    _draw_one(degs[i], c, fanout, replace, key, i, eid, o, starts[i])
    for j in range(c):
        src[o + j] = nbr(indices, eid[o + j])


@numba.njit(nogil=True, parallel=True, cache=True)
def _fill_par(starts, degs, indices, fanout, replace, key, offsets, src, eid, dst):
    for i in numba.prange(starts.shape[0]):
        _fill_one(starts, degs, indices, fanout, replace, key, offsets, src, eid, dst, i)


@numba.njit(nogil=True, cache=True)
def _fill_ser(starts, degs, indices, fanout, replace, key, offsets, src, eid, dst):
    for i in range(starts.shape[0]):
        _fill_one(starts, degs, indices, fanout, replace, key, offsets, src, eid, dst, i)


def sample_fill(starts, degs, indices, fanout, replace, key, offsets, src, eid, dst):
    """Fill ``src`` (global source id), ``eid`` (position in ``indices``), ``dst`` (frontier
    index) for every destination whose CSC range is ``starts``/``degs``. ``indices``: an
    array or :class:`loaders.sample.packed.PackedIds`."""
    fn = _fill_par if src.shape[0] >= PARALLEL_MIN and _parallel_ok() else _fill_ser
    fn(starts, degs, kernel_ids(indices), fanout, replace, key, offsets, src, eid, dst)


# -- one fanout per node over several relations (the relational view) ------------------------
@numba.njit(nogil=True, cache=True, inline="always")
def _union_one(degs, fanout, replace, key, offsets, pos, rel, i):
    """Draw node ``i``'s picks over the concatenated in-edges of every relation (``degs[r, i]``
    each), then split each pick into its relation and its position in that relation."""
    o = offsets[i]
    c = offsets[i + 1] - o
    if c == 0:
        return
    total = np.int64(0)
    for r in range(degs.shape[0]):
        total += degs[r, i]
    _draw_one(total, c, fanout, replace, key, i, pos, o, np.int64(0))
    for j in range(c):
        p = pos[o + j]
        r = 0
        while p >= degs[r, i]:
            p -= degs[r, i]
            r += 1
        pos[o + j] = p
        rel[o + j] = r


@numba.njit(nogil=True, parallel=True, cache=True)
def _union_par(degs, fanout, replace, key, offsets, pos, rel):
    for i in numba.prange(offsets.shape[0] - 1):
        _union_one(degs, fanout, replace, key, offsets, pos, rel, i)


@numba.njit(nogil=True, cache=True)
def _union_ser(degs, fanout, replace, key, offsets, pos, rel):
    for i in range(offsets.shape[0] - 1):
        _union_one(degs, fanout, replace, key, offsets, pos, rel, i)


def union_draw(degs, fanout, replace, key):
    """Picks of every frontier node over all its relations together (``degs``: ``(R, n)``
    in-degrees per relation): ``(offsets, rel, pos)``, each node's picks in draw order, with
    the relation of each and its position among that relation's in-edges of the node.

    A node of total in-degree ``D`` gets ``min(fanout, D)`` distinct picks (``fanout`` with
    ``replace`` when ``D > 0``, all ``D`` for ``-1``): uniform over the union, as a sampler on
    the homogenised graph draws them.
    """
    total = degs.sum(axis=0) if degs.shape[0] else np.zeros(degs.shape[1], np.int64)
    if fanout < 0:
        counts = total
    elif replace:
        counts = np.where(total > 0, np.int64(fanout), np.int64(0))
    else:
        counts = np.minimum(total, np.int64(fanout))
    offsets = np.zeros(degs.shape[1] + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    m = int(offsets[-1])
    pos, rel = np.empty(m, np.int64), np.empty(m, np.int64)
    fn = _union_par if m >= PARALLEL_MIN and _parallel_ok() else _union_ser
    fn(np.ascontiguousarray(degs, dtype=np.int64), fanout, replace, key, offsets, pos, rel)
    return offsets, rel, pos


@numba.njit(nogil=True, cache=True)
def union_pick(offsets, rel, pos, r, starts, indices, src, eid, dst):
    """The picks of relation ``r``, in node then draw order: source ids, CSC positions
    (``starts`` of each node plus the pick's position) and frontier indices. Returns the count."""
    m = 0
    for i in range(offsets.shape[0] - 1):
        for j in range(offsets[i], offsets[i + 1]):
            if rel[j] == r:
                e = starts[i] + pos[j]
                eid[m] = e
                src[m] = nbr(indices, e)
                dst[m] = i
                m += 1
    return m


# -- disjoint mode: one tree per seed -----------------------------------------------------------
@numba.njit(nogil=True, cache=True, inline="always")
def _pair_one(src, dst, owner, n, e):
    src[e] = owner[dst[e]] * n + src[e]


@numba.njit(nogil=True, parallel=True, cache=True)
def _pairs_par(src, dst, owner, n):
    for e in numba.prange(src.shape[0]):
        _pair_one(src, dst, owner, n, e)


@numba.njit(nogil=True, cache=True)
def _pairs_ser(src, dst, owner, n):
    for e in range(src.shape[0]):
        _pair_one(src, dst, owner, n, e)


def pair_keys(src, dst, owner, n: int) -> np.ndarray:
    """``src`` made, in place, the key ``owner[dst] * n + src`` of each sampled source: its
    seed index (that of its destination, ``owner`` per frontier node) and its id among ``n``
    nodes, which :func:`dedup` then dedupes per seed (``disjoint=True``)."""
    fn = _pairs_par if src.shape[0] >= PARALLEL_MIN and _parallel_ok() else _pairs_ser
    fn(src, dst, owner, np.int64(n))
    return src


@numba.njit(nogil=True, cache=True)
def dedup_direct(src, local_of, nodes, count, local):
    """:func:`dedup` with a dense ``local_of`` array (``-1`` = unseen) instead of a hash table."""
    for e in range(src.shape[0]):
        g = src[e]
        v = local_of[g]
        if v < 0:
            local_of[g] = count
            nodes[count] = g
            local[e] = count
            count += 1
        else:
            local[e] = v
    return count


@numba.njit(nogil=True, cache=True)
def seeds_direct(seeds, local_of, nodes):
    """:func:`insert_seeds` with a dense ``local_of`` array."""
    for i in range(seeds.shape[0]):
        g = seeds[i]
        nodes[i] = g
        if local_of[g] < 0:
            local_of[g] = i
    return seeds.shape[0]


@numba.njit(nogil=True, cache=True)
def clear_direct(local_of, nodes, count):
    """Reset ``local_of`` of the first ``count`` ``nodes`` to -1."""
    for i in range(count):
        local_of[nodes[i]] = -1


@numba.njit(nogil=True, cache=True, inline="always")
def _slot(g, mask):
    return np.int64(mix(np.uint64(g)) & np.uint64(mask))


@numba.njit(nogil=True, cache=True)
def insert_seeds(seeds, keys, vals, nodes, slots):
    """Put ``seeds`` first in ``nodes``; repeated seeds keep their place but map to the first."""
    n = seeds.shape[0]
    nodes[:n] = seeds
    rehash(nodes, n, keys, vals, slots)
    return n


@numba.njit(nogil=True, cache=True)
def dedup(src, keys, vals, nodes, slots, count, local):
    """``local[e]`` = local id of ``src[e]``, appending unseen ids to ``nodes``; returns the new
    count."""
    mask = keys.shape[0] - 1
    for e in range(src.shape[0]):
        g = src[e]
        h = _slot(g, mask)
        while True:
            k = keys[h]
            if k == -1:
                keys[h] = g
                vals[h] = count
                nodes[count] = g
                slots[count] = h
                local[e] = count
                count += 1
                break
            if k == g:
                local[e] = vals[h]
                break
            h = (h + 1) & mask
    return count


@numba.njit(nogil=True, cache=True)
def clear(keys, slots, count):
    """Empty the table slots used by the first ``count`` nodes."""
    for i in range(count):
        h = slots[i]
        if h >= 0:
            keys[h] = -1


@numba.njit(nogil=True, cache=True)
def rehash(nodes, count, keys, vals, slots):
    """Fill an empty table from the first ``count`` nodes (a repeated id maps to its first)."""
    mask = keys.shape[0] - 1
    for i in range(count):
        g = nodes[i]
        h = _slot(g, mask)
        slots[i] = -1
        while True:
            k = keys[h]
            if k == -1:
                keys[h] = g
                vals[h] = i
                slots[i] = h
                break
            if k == g:
                break
            h = (h + 1) & mask
