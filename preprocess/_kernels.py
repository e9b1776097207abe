"""Numba kernels of the COO to CSC conversion.

Each kernel has a plain NumPy twin in ``tests/preprocess/test_kernels.py`` that it is checked
against. Kernels release the GIL; none allocates memory proportional to the edge count.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def count_block(src, dst, num_src, num_dst, counts, drop_self_loops):
    """``counts[d] += 1`` per edge ``(s, d)``; returns -1, or the index of the first edge with an
    id outside ``[0, num_src)`` / ``[0, num_dst)`` (then ``counts`` is partly updated).

    Self loops (``s == d``) are not counted when ``drop_self_loops``.
    """
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        if s < 0 or s >= num_src or d < 0 or d >= num_dst:
            return i
        if drop_self_loops and s == d:
            continue
        counts[d] += 1
    return -1


@numba.njit(nogil=True, cache=True)
def scatter_block(src, dst, lo, hi, cursor, out, drop_self_loops):
    """Place the source of each edge with ``lo <= d < hi`` at ``out[cursor[d - lo]]`` and advance
    that cursor: a stable counting-sort scatter restricted to one destination range."""
    for i in range(src.shape[0]):
        d = dst[i]
        if d >= lo and d < hi:
            s = src[i]
            if drop_self_loops and s == d:
                continue
            k = d - lo
            out[cursor[k]] = s
            cursor[k] += 1


@numba.njit(nogil=True, parallel=True, cache=True)
def sort_segments(out, ends):
    """Sort ``out[ends[k-1]:ends[k]]`` (``ends[-1]`` read as 0) for every ``k``, in parallel."""
    for k in numba.prange(ends.shape[0]):
        a = ends[k - 1] if k > 0 else 0
        b = ends[k]
        if b - a > 1:
            out[a:b].sort()


@numba.njit(nogil=True, cache=True)
def dedupe_segments(out, ends):
    """Remove repeated ids inside each sorted segment (as in :func:`sort_segments`), compacting
    ``out`` to the front; ``ends[k]`` becomes segment ``k``'s new length. Returns the new total."""
    w = 0
    a = 0
    for k in range(ends.shape[0]):
        b = ends[k]
        start = w
        if b > a:
            out[w] = out[a]
            w += 1
            for i in range(a + 1, b):
                v = out[i]
                if v != out[w - 1]:
                    out[w] = v
                    w += 1
        ends[k] = w - start
        a = b
    return w


@numba.njit(nogil=True, cache=True)
def plan_ranges(indptr, item_bytes, dst_bytes, limit):
    """Cut ``[0, n)`` (``n = len(indptr) - 1``) into consecutive destination ranges whose cost
    ``edges * item_bytes + dsts * dst_bytes`` stays within ``limit``; a single destination
    over the limit gets a range of its own. Returns the boundaries ``[0, ..., n]``."""
    n = indptr.shape[0] - 1
    total = (indptr[n] - indptr[0]) * item_bytes + n * dst_bytes
    cap = 2 * (total // max(limit, 1)) + 3
    out = np.empty(cap, np.int64)
    out[0] = 0
    k = 0
    lo = 0
    while lo < n:
        hi = lo + 1
        # galloping then bisection keeps this O(ranges * log n) on a memory-mapped indptr
        step = 1
        while hi + step <= n and (indptr[hi + step] - indptr[lo]) * item_bytes \
                + (hi + step - lo) * dst_bytes <= limit:
            hi += step
            step *= 2
        while step > 1:
            step //= 2
            if hi + step <= n and (indptr[hi + step] - indptr[lo]) * item_bytes \
                    + (hi + step - lo) * dst_bytes <= limit:
                hi += step
        k += 1
        if k >= cap:  # cannot happen with the bound above; keep the kernel total anyway
            grown = np.empty(cap * 2, np.int64)
            grown[:cap] = out
            out = grown
            cap *= 2
        out[k] = hi
        lo = hi
    return out[:k + 1]


@numba.njit(nogil=True, cache=True)
def write_indptr(counts, start, out):
    """``out[i] = start + counts[0] + ... + counts[i]``; returns the last value (or ``start``)."""
    acc = start
    for i in range(counts.shape[0]):
        acc += counts[i]
        out[i] = acc
    return acc
