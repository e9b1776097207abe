"""Numba kernels of the COO to CSC conversion.

Each kernel has a plain NumPy twin in ``tests/preprocess/test_kernels.py`` that it is checked
against. Kernels release the GIL; none allocates memory proportional to the edge count.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def histogram_block(src, dst, num_src, num_dst, shift, hist, drop_self_loops):
    """``hist[d >> shift] += 1`` per edge ``(s, d)``: edges per bucket of ``2**shift``
    destinations. Returns -1, or the index of the first edge with an id outside
    ``[0, num_src)`` / ``[0, num_dst)`` (then ``hist`` is partly updated).

    Self loops (``s == d``) are not counted when ``drop_self_loops``. ``hist`` is small (at
    most ~2**20 entries), so this pass runs at the speed of reading the input.
    """
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        if s < 0 or s >= num_src or d < 0 or d >= num_dst:
            return i
        if drop_self_loops and s == d:
            continue
        hist[d >> shift] += 1
    return -1


@numba.njit(nogil=True, cache=True)
def partition_block(src, dst, lo, hi, shift, bucket_pos, ts, td, drop_self_loops):
    """Radix-partition the edges with ``lo <= d < hi`` into buckets of ``2**shift`` destinations.

    Bucket ``b`` holds destinations ``lo + b * 2**shift ...``; its edges go to
    ``ts``/``td`` at ``bucket_pos[b]`` (advanced): ``ts`` gets the source, ``td`` the
    destination's offset inside the bucket. Few buckets (hundreds) means few write streams,
    which is what makes this pass fast where a direct per-destination scatter misses cache.
    """
    mask = (1 << shift) - 1
    for i in range(src.shape[0]):
        d = dst[i]
        if d >= lo and d < hi:
            s = src[i]
            if drop_self_loops and s == d:
                continue
            k = d - lo
            b = k >> shift
            p = bucket_pos[b]
            ts[p] = s
            td[p] = k & mask
            bucket_pos[b] = p + 1


@numba.njit(nogil=True, cache=True)
def _range_of(range_hi, d):
    lo = 0
    hi = range_hi.shape[0] - 1
    while lo < hi:  # the first range whose end is past d
        mid = (lo + hi) >> 1
        if range_hi[mid] > d:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(nogil=True, cache=True)
def split_block(src, dst, range_hi, out_s, out_d, counts, drop_self_loops):
    """Group a block's edges by destination range (``range_hi``: the ranges' ends, ascending)
    for the spill pass: ``out_s``/``out_d`` get the sources and the destinations' offsets in
    their range, range by range (stable); ``counts[r]`` the number of edges of range ``r``.
    Self loops are dropped here when asked (offsets no longer show them). Returns the total."""
    nr = range_hi.shape[0]
    for r in range(nr):
        counts[r] = 0
    for i in range(src.shape[0]):
        if drop_self_loops and src[i] == dst[i]:
            continue
        counts[_range_of(range_hi, dst[i])] += 1
    pos = np.empty(nr, np.int64)
    acc = 0
    for r in range(nr):
        pos[r] = acc
        acc += counts[r]
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        if drop_self_loops and s == d:
            continue
        r = _range_of(range_hi, d)
        p = pos[r]
        out_s[p] = s
        out_d[p] = d - (range_hi[r - 1] if r > 0 else 0)
        pos[r] = p + 1
    return acc


@numba.njit(nogil=True, cache=True)
def _insertion_sort(a, lo, hi):
    for i in range(lo + 1, hi):
        v = a[i]
        j = i - 1
        while j >= lo and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@numba.njit(nogil=True, cache=True)
def _sort_segment(a, lo, hi):
    if hi - lo <= 24:
        _insertion_sort(a, lo, hi)
    else:
        a[lo:hi].sort()


@numba.njit(nogil=True, parallel=True, cache=True)
def finish_buckets(ts, td, bstart, width, shift, sort, coalesce, counts_out, kept):
    """Turn a partitioned range (see :func:`partition_block`) into CSC order, in place.

    Bucket ``b`` (``ts``/``td`` at ``bstart[b]:bstart[b+1]``, destinations ``b * 2**shift``
    on, of ``width`` in the range) is finished in parallel and in cache: count its
    destinations, counting-sort it by destination in place (American flag sort: each element
    is swapped straight to its slot, so no buffer is needed whatever the bucket's size),
    sort each destination's sources (``sort`` or ``coalesce``) and, when ``coalesce``, keep
    the distinct ones, packed to the front of the bucket. ``counts_out[d]`` gets the number
    of sources of destination ``d`` kept and ``kept[b]`` the number of values kept in bucket
    ``b`` (see :func:`pack_buckets`).
    """
    nb = bstart.shape[0] - 1
    for b in numba.prange(nb):
        g0 = b << shift
        w = min(1 << shift, width - g0)
        a = bstart[b]
        e = bstart[b + 1]
        off = np.zeros(w + 1, np.int64)
        for i in range(a, e):
            off[np.int64(td[i]) + 1] += 1
        for k in range(w):
            off[k + 1] += off[k]
        heads = np.empty(w, np.int64)
        for k in range(w):
            heads[k] = a + off[k]
        for k in range(w):
            end = a + off[k + 1]
            while heads[k] < end:
                i = heads[k]
                vs = ts[i]
                vd = np.int64(td[i])
                while vd != k:
                    j = heads[vd]
                    heads[vd] = j + 1
                    ns = ts[j]
                    nd = np.int64(td[j])
                    ts[j] = vs
                    vs = ns
                    vd = nd
                ts[i] = vs
                heads[k] = i + 1
        if sort or coalesce:
            for k in range(w):
                _sort_segment(ts, a + off[k], a + off[k + 1])
        if coalesce:
            wpos = a
            for k in range(w):
                lo = a + off[k]
                hi = a + off[k + 1]
                start = wpos
                for i in range(lo, hi):
                    v = ts[i]
                    if wpos == start or v != ts[wpos - 1]:
                        ts[wpos] = v
                        wpos += 1
                counts_out[g0 + k] = wpos - start
            kept[b] = wpos - a
        else:
            for k in range(w):
                counts_out[g0 + k] = off[k + 1] - off[k]
            kept[b] = e - a


@numba.njit(nogil=True, cache=True)
def pack_buckets(ts, bstart, kept):
    """Close the gaps coalescing left: bucket ``b``'s first ``kept[b]`` values move to follow
    bucket ``b - 1``'s. Returns the new total."""
    w = 0
    for b in range(kept.shape[0]):
        a = bstart[b]
        c = kept[b]
        if a != w:
            for i in range(c):
                ts[w + i] = ts[a + i]
        w += c
    return w


@numba.njit(nogil=True, cache=True)
def plan_ranges(cum, item_bytes, limit):
    """Cut buckets ``[0, n)`` (``cum``: the ``n + 1`` cumulative edge counts) into consecutive
    ranges of at most ``limit`` bytes at ``item_bytes`` per edge; a single bucket over the
    limit gets a range of its own. Returns the boundaries ``[0, ..., n]``."""
    n = cum.shape[0] - 1
    cap = 2 * ((cum[n] - cum[0]) * item_bytes // max(limit, 1)) + 3
    out = np.empty(cap, np.int64)
    out[0] = 0
    k = 0
    lo = 0
    while lo < n:
        hi = lo + 1
        step = 1  # galloping, then bisection
        while hi + step <= n and (cum[hi + step] - cum[lo]) * item_bytes <= limit:
            hi += step
            step *= 2
        while step > 1:
            step //= 2
            if hi + step <= n and (cum[hi + step] - cum[lo]) * item_bytes <= limit:
                hi += step
        k += 1
        out[k] = hi  # k < cap: every two consecutive ranges hold more than limit bytes
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


@numba.njit(nogil=True, cache=True, inline="always")
def _half_bits(f):
    """float32 bits -> float16 bits, round to nearest even (NumPy's rules, NaN payload kept).
    Only selects, no branches on data, so the loop around it vectorises."""
    one = np.uint32(1)
    sign = (f >> np.uint32(16)) & np.uint32(0x8000)
    a = f & np.uint32(0x7FFFFFFF)
    # normal range: rebias the exponent, round to nearest even on bit 13
    norm = (a + np.uint32(0xC8000FFF) + ((a >> np.uint32(13)) & one)) >> np.uint32(13)
    # subnormal range: shift the significand right by 126 - e (14..24), round to nearest even
    e = a >> np.uint32(23)
    sh = np.uint32(126) - (e if e < np.uint32(112) else np.uint32(112))
    sh = sh if sh < np.uint32(25) else np.uint32(25)
    sig = (a & np.uint32(0x7FFFFF)) | np.uint32(0x800000)
    q = sig >> sh
    rem = sig & ((one << sh) - one)
    halfway = one << (sh - one)
    up = (rem > halfway) | ((rem == halfway) & ((q & one) == one))
    q = q + (one if up else np.uint32(0))
    sub = np.uint32(0) if e < np.uint32(102) else q
    nan = np.uint32(0x7C00) + ((a & np.uint32(0x7FFFFF)) >> np.uint32(13))
    nan = np.uint32(0x7C01) if nan == np.uint32(0x7C00) else nan
    big = nan if a > np.uint32(0x7F800000) else np.uint32(0x7C00)
    small = sub if a < np.uint32(0x38800000) else norm
    return sign | (big if a >= np.uint32(0x47800000) else small)


@numba.njit(nogil=True, parallel=True, cache=True)
def f32_to_f16(src, dst):
    """float32 bits (``src``, uint32) to float16 bits (``dst``, uint16) exactly as NumPy's
    ``astype(float16)``, faster than NumPy's own cast (docs/benchmarks.md); returns how many finite
    values overflowed to inf."""
    over = 0
    for i in numba.prange(src.shape[0]):
        f = src[i]
        h = _half_bits(f)
        a = f & np.uint32(0x7FFFFFFF)
        if (h & np.uint32(0x7FFF)) == np.uint32(0x7C00) and a < np.uint32(0x7F800000):
            over += 1
        dst[i] = np.uint16(h)
    return over
