"""Numba kernels of the read path: row copies, run coalescing, pread loops, residency probes.

Each kernel has a plain NumPy twin in ``tests/test_kernels.py`` that it is checked against.
"""

from __future__ import annotations

import os

import numba
import numpy as np
from numba import types

from featurestore.threading_layer import parallel_safe

# libc's pread and mincore as external symbols (resolved by name, so kernels can be cached);
# pointers are passed as size_t: the same ABI on 64-bit Linux, and numba passes integers.
_pread = types.ExternalFunction("pread", types.intp(types.intc, types.uintp, types.uintp,
                                                    types.int64))
_mincore = types.ExternalFunction("mincore", types.intc(types.uintp, types.uintp, types.uintp))
_memcpy = types.ExternalFunction("memcpy", types.uintp(types.uintp, types.uintp, types.uintp))

PAGE = os.sysconf("SC_PAGE_SIZE")


@numba.njit(nogil=True, parallel=True, cache=True)
def gather_rows(src_addr, row_bytes, ids, dst_addr):
    """Row ``i`` of ``dst`` = row ``ids[i]`` of ``src`` (both C-contiguous, given by address)."""
    for i in numba.prange(ids.shape[0]):
        _memcpy(dst_addr + i * row_bytes, src_addr + ids[i] * row_bytes, row_bytes)


@numba.njit(nogil=True, cache=True)
def gather_rows_serial(src_addr, row_bytes, ids, dst_addr):
    """:func:`gather_rows` on one thread: small batches do not pay for waking the pool."""
    for i in range(ids.shape[0]):
        _memcpy(dst_addr + i * row_bytes, src_addr + ids[i] * row_bytes, row_bytes)


#: below this many bytes a gather runs on the calling thread only: a large gather gains from
#: the pool (docs/benchmarks.md), but on oversubscribed cores small parallel regions stall.
PARALLEL_MIN_BYTES = 4 << 20


def copy_rows(src: np.ndarray, ids: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = src[ids[i]]`` for C-contiguous arrays of equal row size (ids trusted).

    Rows are copied with libc ``memcpy``; in parallel when the batch is large enough to pay
    for waking numba's threads.
    """
    row_bytes = out.nbytes // max(out.shape[0], 1)
    if ids.shape[0] == 0:
        return
    par = out.nbytes >= PARALLEL_MIN_BYTES and parallel_safe()  # workqueue: never beside another
    kernel = gather_rows if par else gather_rows_serial
    kernel(src.ctypes.data, row_bytes, ids, out.ctypes.data)


@numba.njit(nogil=True, cache=True)
def id_range(ids):
    """(min, max) of a non-empty id array in one pass."""
    lo = ids[0]
    hi = ids[0]
    for i in range(1, ids.shape[0]):
        v = ids[i]
        if v < lo:
            lo = v
        elif v > hi:
            hi = v
    return lo, hi


@numba.njit(nogil=True, cache=True)
def coalesce_runs(rows):
    """Runs of consecutive rows in sorted unique ``rows``: (first row, length, position in rows)."""
    n = rows.shape[0]
    start = np.empty(n, np.int64)
    length = np.empty(n, np.int64)
    pos = np.empty(n, np.int64)
    k = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and rows[j] == rows[j - 1] + 1:
            j += 1
        start[k] = rows[i]
        length[k] = j - i
        pos[k] = i
        k += 1
        i = j
    return start[:k], length[:k], pos[:k]


@numba.njit(nogil=True, cache=True)
def pread_runs(fd, row_bytes, file_offset, start, length, pos, dst_addr, lo, hi):
    """Pread runs ``lo..hi`` into ``dst_addr + pos*row_bytes``. Returns -1 or the failing run."""
    for k in range(lo, hi):
        want = length[k] * row_bytes
        off = file_offset + start[k] * row_bytes
        dst = dst_addr + pos[k] * row_bytes
        done = 0
        tries = 0
        while done < want:
            got = _pread(fd, dst + done, want - done, off + done)
            if got <= 0:
                tries += 1
                if got == 0 or tries > 8:  # EOF (truncated file) or a persistent error
                    return k
                continue  # EINTR / EAGAIN: try again
            done += got
    return -1


@numba.njit(nogil=True, cache=True)
def resident_fraction(base_addr, row_bytes, rows, page, vec):
    """Share of the pages holding ``rows`` of a mapping that are in the page cache (mincore).

    ``vec`` is a scratch uint8 array of at least 64 entries; -1.0 when mincore fails.
    """
    hit = 0
    total = 0
    vec_addr = vec.ctypes.data
    for i in range(rows.shape[0]):
        b0 = rows[i] * row_bytes
        p0 = (base_addr + b0) // page * page
        p1 = (base_addr + b0 + row_bytes + page - 1) // page * page
        npages = min((p1 - p0) // page, vec.shape[0])
        if _mincore(p0, npages * page, vec_addr) != 0:
            return -1.0
        total += npages
        for j in range(npages):
            hit += vec[j] & 1
    return hit / max(total, 1)
