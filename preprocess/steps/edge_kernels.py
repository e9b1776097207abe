"""Numba kernels of the edge-column step (:mod:`preprocess.steps.edge_columns`).

Each kernel works on one block; none allocates memory proportional to the edge count, and all
release the GIL.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["compose_keys", "key_positions", "bucket_order", "place_rows", "take_rows", "as_words"]


def as_words(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array's rows as a 2-D array of the widest unsigned words that divide
    the row's bytes (a view: the kernels below copy rows whatever their dtype)."""
    a = np.ascontiguousarray(a)
    n = a.shape[0]
    row = a.dtype.itemsize * (a.size // n if n else int(np.prod(a.shape[1:], dtype=np.int64)))
    word = next(w for w in (8, 4, 2, 1) if row % w == 0)
    return a.reshape(n, -1).view(np.uint8).view(f"u{word}") if n else \
        np.empty((0, max(row // word, 1)), f"u{word}")


@numba.njit(nogil=True, cache=True)
def compose_keys(src, dst, pos0, shift, num_src, num_dst, drop_self_loops, out_key, out_dst):
    """``out_key = src << shift | position`` and ``out_dst = dst`` for each edge of a block
    whose first edge is at stream position ``pos0``; self loops are left out when
    ``drop_self_loops``. Returns the number written, or ``-1 - i`` when edge ``i`` has an id
    outside ``[0, num_src)`` / ``[0, num_dst)``."""
    n = 0
    for i in range(src.shape[0]):
        s = np.int64(src[i])
        d = np.int64(dst[i])
        if s < 0 or s >= num_src or d < 0 or d >= num_dst:
            return -1 - i
        if drop_self_loops and s == d:
            continue
        out_key[n] = (s << shift) | (pos0 + i)
        out_dst[n] = d
        n += 1
    return n


@numba.njit(nogil=True, cache=True)
def key_positions(keys, shift, pos, stored, check):
    """``pos[i]``: the input position in sorted key ``keys[i]`` (see :func:`compose_keys`).
    With ``check``, the key's source must equal ``stored[i]`` (the store's ``indices`` at that
    slot). Returns -1, or the first ``i`` where it does not."""
    mask = (np.int64(1) << shift) - 1
    bad = -1
    for i in range(keys.shape[0]):
        k = np.int64(keys[i])
        pos[i] = k & mask
        if check and bad < 0 and (k >> shift) != np.int64(stored[i]):
            bad = i
    return bad


@numba.njit(nogil=True, cache=True)
def bucket_order(dest, bucket_rows, counts, order):
    """Counting sort of a block's rows by output bucket (``dest // bucket_rows``), stable,
    rows with ``dest < 0`` left out: ``order`` gets the row indices bucket by bucket and
    ``counts[b]`` the rows of bucket ``b``. Returns the number of rows placed."""
    nb = counts.shape[0]
    for b in range(nb):
        counts[b] = 0
    for i in range(dest.shape[0]):
        if dest[i] >= 0:
            counts[dest[i] // bucket_rows] += 1
    pos = np.empty(nb, np.int64)
    acc = 0
    for b in range(nb):
        pos[b] = acc
        acc += counts[b]
    for i in range(dest.shape[0]):
        v = dest[i]
        if v >= 0:
            b = v // bucket_rows
            order[pos[b]] = i
            pos[b] += 1
    return acc


@numba.njit(nogil=True, parallel=True, cache=True)
def place_rows(out, dest, rows):
    """``out[dest[i]] = rows[i % len(rows)]`` for every ``dest[i] >= 0`` (rows as machine
    words; distinct destinations, so rows are copied in parallel)."""
    k = rows.shape[0]
    for i in numba.prange(dest.shape[0]):
        d = dest[i]
        if d >= 0:
            r = i % k
            for j in range(rows.shape[1]):
                out[d, j] = rows[r, j]


@numba.njit(nogil=True, parallel=True, cache=True)
def take_rows(out, rows, idx):
    """``out[i] = rows[idx[i] % len(rows)]`` (rows as machine words)."""
    k = rows.shape[0]
    for i in numba.prange(idx.shape[0]):
        r = idx[i] % k
        for j in range(rows.shape[1]):
            out[i, j] = rows[r, j]
