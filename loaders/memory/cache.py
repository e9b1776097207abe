"""A tiered feature cache: a static hot tier of rows in (pinned) host memory, the store below.

The hot tier is one contiguous array of the ``K`` rows most likely to be needed plus an
``int32`` position map with one entry per node (``-1`` = not cached), so a lookup is one load
per id. Which rows: :func:`presample_counts` runs the sampler alone over an epoch's batches
and counts how often each row is needed (:func:`rank_rows` takes the top ``K``, degree breaking
ties); :func:`degree_counts` is the cheap fallback (how often a node is someone's neighbour).

A gather (:meth:`FeatureCache.gather`) splits the ids with a numba kernel: misses are read
from the store, sorted, deduplicated and merged into spans, at ``io_threads`` reads in flight
(issued from a helper thread while the hits are copied from the hot tier in parallel),
straight into their rows of the output
(:meth:`RowReader.read_uncached <featurestore.rows.RowReader.read_uncached>`: on a local
store ``O_DIRECT`` by default, so a capped process's page cache is not filled with rows it
will not keep).

Tiers above this one (a GPU tier) need only :meth:`HotTier.lookup`: positions of the ids in
the tier, ``-1`` for a miss; a tier fills the hits it holds and passes the misses down.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numba
import numpy as np

from featurestore.gather import check_ids
from loaders.memory.cast import cast_rows
from loaders.sample.kernels import memcpy as _memcpy

__all__ = ["HotTier", "FeatureCache", "CacheStats", "presample_counts", "presample_scores",
           "degree_counts", "rank_rows", "PARALLEL_GATHER_ROWS", "row_order", "count_rows",
           "POLICIES"]

log = logging.getLogger(__name__)

#: how the loader's hot tier ranks its rows (``NeighborLoader(cache=)``)
POLICIES = ("presample", "degree")
#: below this many ids the split runs on the calling thread only
_PARALLEL_MIN = 1 << 14
#: ids of a gather from which its kernels run in parallel (the loader compiles both kinds)
PARALLEL_GATHER_ROWS = _PARALLEL_MIN


# -- kernels ---------------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def count_rows(ids, counts):
    """``counts[ids[i]] += 1`` for every ``i`` (serial: no lost updates)."""
    for i in range(ids.shape[0]):
        counts[ids[i]] += 1


@numba.njit(nogil=True, cache=True, inline="always")
def _split_one(ids, pos, hot_addr, row_bytes, out_addr, miss, i):
    p = pos[ids[i]]
    if p >= 0:
        _memcpy(out_addr + i * row_bytes, hot_addr + np.int64(p) * row_bytes, row_bytes)
        miss[i] = False
    else:
        miss[i] = True


@numba.njit(nogil=True, cache=True)
def _split_ser(ids, pos, hot_addr, row_bytes, out_addr, miss):
    for i in range(ids.shape[0]):
        _split_one(ids, pos, hot_addr, row_bytes, out_addr, miss, i)


@numba.njit(nogil=True, cache=True)
def _lookup(ids, pos, out):
    for i in range(ids.shape[0]):
        out[i] = pos[ids[i]]


@numba.njit(nogil=True, cache=True, inline="always")
def _copy_one(p, hot_addr, row_bytes, out_addr, i):
    if p[i] >= 0:
        _memcpy(out_addr + i * row_bytes, hot_addr + np.int64(p[i]) * row_bytes, row_bytes)


@numba.njit(nogil=True, parallel=True, cache=True)
def _copy_hits_par(p, hot_addr, row_bytes, out_addr):
    for i in numba.prange(p.shape[0]):
        _copy_one(p, hot_addr, row_bytes, out_addr, i)


@numba.njit(nogil=True, cache=True)
def _copy_hits_ser(p, hot_addr, row_bytes, out_addr):
    for i in range(p.shape[0]):
        _copy_one(p, hot_addr, row_bytes, out_addr, i)


def _copy_hits(p, hot_addr, row_bytes, out_addr) -> None:
    from loaders.sample.kernels import (
        _parallel_ok,  # the workqueue layer aborts on concurrent regions
    )

    (_copy_hits_par if _parallel_ok() else _copy_hits_ser)(p, hot_addr, row_bytes, out_addr)


# -- ranking ---------------------------------------------------------------------------------
def degree_counts(graph, ntype: str, dtype=np.int64) -> np.ndarray:
    """How often each node of ``ntype`` is a neighbour (its count in the CSC ``indices`` of
    every edge type with source ``ntype``): the degree ranking of the rows. ``graph``: a store
    or a :class:`~loaders.sample.sampler.CSCGraph` (e.g. a loader's resident topology).
    ``dtype=np.int32`` halves the array when the edges number fewer than ``2**31``."""
    if hasattr(graph, "csc") and not callable(graph.csc):  # a CSCGraph
        n, pairs = graph.num_nodes[ntype], graph.csc.items()
    else:
        n, pairs = graph.num_nodes(ntype), [(et, graph.csc(et)) for et in graph.edge_types]
    counts = np.zeros(n, dtype)
    for et, (_, indices) in pairs:
        if et.src != ntype:
            continue
        step = 1 << 24
        for lo in range(0, indices.shape[0], step):
            count_rows(np.asarray(indices[lo:lo + step]), counts)
    return counts


def presample_counts(sampler, batches, seed_type: str, ntypes, *, seed: int = 0,
                     epoch: int = 0, num_nodes: dict[str, int],
                     dtype=np.int64) -> dict[str, np.ndarray]:
    """Row accesses per node type over ``batches`` (seed id arrays, batch ``k`` sampled as the
    loader would: ``(seed, epoch, k)``), counted by the sampler alone (no features read);
    ``dtype=np.int32`` when fewer than ``2**31`` accesses can be counted."""
    counts = {t: np.zeros(num_nodes[t], dtype) for t in ntypes}
    for k, seeds in enumerate(batches):
        sub = sampler.sample(seeds, seed_type, seed=seed, epoch=epoch, batch=k)
        for t in ntypes:
            count_rows(sub.node[t], counts[t])
    return counts


@numba.njit(nogil=True, cache=True, inline="always")
def _degree_bin(d):
    return np.int64(np.floor(np.log2(np.float64(d) + 1.0) * 4))


@numba.njit(nogil=True, cache=True)
def _prior_scores(counts, degree, weight, out):
    nb = np.zeros(4 * 66, np.int64)
    sums = np.zeros(4 * 66, np.float64)
    for i in range(counts.shape[0]):
        b = _degree_bin(degree[i])
        nb[b] += 1
        sums[b] += counts[i]
    for b in range(nb.shape[0]):
        sums[b] = sums[b] / max(nb[b], 1)
    for i in range(counts.shape[0]):
        out[i] = counts[i] + weight * sums[_degree_bin(degree[i])]


def presample_scores(counts: np.ndarray, degree: np.ndarray, weight: float = 2.0) -> np.ndarray:
    """Presampled access counts shrunk towards a prior: ``counts + weight * prior``, the prior
    of a row being the mean count of the rows whose degree falls in the same bin (quarter
    powers of two). One epoch's counts are noisy at the cache's boundary (a row needed once
    by chance ties with one needed every epoch); the prior, learnt from the same pass, ranks
    such rows by what rows like them are needed. On R-MAT this lifted the next epoch's hit
    rate towards the epoch's optimal static cache (docs/benchmarks.md); it also keeps the first
    epoch, which the pass sampled, near that optimum. One float64 array is made (a kernel,
    no temporaries: the ranking's memory is in the loader's plan)."""
    counts = np.ascontiguousarray(counts)
    degree = np.ascontiguousarray(degree)
    if counts.shape != degree.shape:
        raise ValueError(f"Expected counts and degree of one shape. Got {counts.shape} and "
                         f"{degree.shape} instead.")
    if degree.size and degree.min() < 0:
        raise ValueError("Expected degrees >= 0. Got a negative one.")
    out = np.empty(counts.shape[0], np.float64)
    _prior_scores(counts, degree, np.float64(weight), out)
    return out


def row_order(scores: np.ndarray, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Every row, from most to least worth caching: ``scores`` descending (counts or any
    numeric scores), ties by ``tiebreak`` descending (e.g. degree), then by id ascending.

    The one ranking of the cache's rows: :func:`rank_rows` takes its first ``k``;
    ``featurestore plan`` and ``bench cache`` replay static caches of its prefixes.
    """
    c = np.asarray(scores)
    key = -(c if c.dtype.kind == "f" else c.astype(np.int64))
    if tiebreak is None:
        return np.argsort(key, kind="stable")
    # lexicographic (scores desc, tiebreak desc, id asc): lexsort is stable and its last key
    # is the primary one
    return np.lexsort((-np.asarray(tiebreak, np.int64), key))


_MIN64 = np.int64(-(1 << 63))
_LOW63 = np.int64((1 << 63) - 1)


@numba.njit(nogil=True, cache=True, inline="always")
def _order_key(x, is_float):
    """An int64 whose unsigned order (after ``^ _MIN64``) is the value's order: ``x`` is an
    int64, or a float64's bits (negative floats: every bit but the sign flipped)."""
    if is_float:
        x = x ^ ((x >> 63) & _LOW63)
    return x ^ _MIN64


@numba.njit(nogil=True, cache=True)
def _radix_threshold(keys, is_float, gate, gate_float, gate_key, need):
    """``(T, n)``: the ``need``-th largest key among the rows whose ``gate`` key is
    ``gate_key`` (every row when ``gate`` is empty), and how many of the rows with key ``T``
    are among the ``need`` largest. Four passes of 16 bits (a radix select), no copies."""
    hist = np.zeros(1 << 16, np.int64)
    prefix = np.int64(0)
    for level in range(4):
        shift = 48 - 16 * level
        hist[:] = 0
        for i in range(keys.shape[0]):
            if gate.shape[0] and _order_key(gate[i], gate_float) != gate_key:
                continue
            u = _order_key(keys[i], is_float)
            if level and ((u >> (shift + 16)) & ((np.int64(1) << (16 * level)) - 1)) != prefix:
                continue
            hist[(u >> shift) & 0xFFFF] += 1
        cum = np.int64(0)
        d = 0xFFFF
        while d > 0 and cum + hist[d] < need:
            cum += hist[d]
            d -= 1
        need -= cum
        prefix = (prefix << 16) | d
    return prefix, need


@numba.njit(nogil=True, cache=True)
def _collect_top(keys, is_float, ties, T, D, take, out):
    m = 0
    for i in range(keys.shape[0]):
        u = _order_key(keys[i], is_float)
        if u != T:
            if (u ^ _MIN64) > (T ^ _MIN64):
                out[m] = i
                m += 1
            continue
        t = _order_key(ties[i], False) if ties.shape[0] else D
        if (t ^ _MIN64) > (D ^ _MIN64) or (t == D and take > 0):
            if t == D:
                take -= 1
            if m == out.shape[0]:
                return -1  # never: the thresholds count exactly k rows
            out[m] = i
            m += 1
    return m


def _ints(a: np.ndarray) -> np.ndarray:
    """``a`` as the kernels take it: int32 and int64 as they are (no copy), else int64."""
    return a if a.dtype in (np.int32, np.int64) else a.astype(np.int64)


def rank_rows(counts: np.ndarray, k: int, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """The ``k`` rows with the largest ``counts`` (any numeric scores; ties: larger
    ``tiebreak``, then smaller id), sorted by id: the first ``k`` of :func:`row_order`.

    A radix select in numba: no sort, and nothing of the rows' size made but the ``k`` ids
    (the loader ranks 4.2M rows in its plan's memory: a sort held 32 bytes a row more)."""
    n = counts.shape[0]
    k = int(min(max(k, 0), n))
    if k == 0:
        return np.empty(0, np.int64)
    if k == n:
        return np.arange(n, dtype=np.int64)
    c = np.ascontiguousarray(counts)
    is_float = c.dtype.kind == "f"
    keys = c.astype(np.float64, copy=False).view(np.int64) if is_float else _ints(c)
    ties = np.zeros(0, np.int64) if tiebreak is None else _ints(np.ascontiguousarray(tiebreak))
    none = np.zeros(0, np.int64)
    T, need = _radix_threshold(keys, is_float, none, False, np.int64(0), np.int64(k))
    D, take = ((np.int64(0), need) if tiebreak is None else
               _radix_threshold(ties, False, keys, is_float, T, need))
    out = np.empty(k, np.int64)
    if _collect_top(keys, is_float, ties, T, D, take, out) != k:
        raise AssertionError(f"rank_rows selected another count than k={k}")
    return out


# -- the tiers -------------------------------------------------------------------------------
class HotTier:
    """``K`` rows in one contiguous host array (pinned with ``pin``) and a position map."""

    def __init__(self, num_rows: int, rows: np.ndarray, row_shape: tuple, dtype, *,
                 pin: bool = False):
        import torch

        self.rows = np.asarray(rows, np.int64)
        self.num_rows = int(num_rows)
        # no map without rows: a type with no hot tier held 4 bytes per row outside the plan
        # (8 GiB on a 2**31-row type); the gathers test len() before they touch it
        self.pos = np.full(self.num_rows if self.rows.shape[0] else 0, -1, np.int32)
        self.pos[self.rows] = np.arange(self.rows.shape[0], dtype=np.int32)
        tdt = torch.from_numpy(np.empty(0, dtype)).dtype
        self.tensor = torch.empty((self.rows.shape[0],) + tuple(row_shape), dtype=tdt,
                                  pin_memory=pin)
        self.data = self.tensor.numpy()
        self.row_bytes = int(np.prod(row_shape, dtype=np.int64)) * np.dtype(dtype).itemsize

    def __len__(self) -> int:
        return self.rows.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes held: the rows and the position map."""
        return self.data.nbytes + self.pos.nbytes

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Position of each id in this tier, ``-1`` where it is not held."""
        if not self.rows.shape[0]:
            return np.full(ids.shape[0], -1, np.int32)
        out = np.empty(ids.shape[0], np.int32)
        _lookup(np.ascontiguousarray(ids, np.int64), self.pos, out)
        return out


@dataclass
class CacheStats:
    """Counters of a :class:`FeatureCache` since it was made (or reset)."""

    hits: int = 0
    misses: int = 0
    reads: int = 0
    bytes_read: int = 0

    def reset(self) -> None:
        """Zero the counters."""
        self.hits = self.misses = self.reads = self.bytes_read = 0

    @property
    def hit_rate(self) -> float:
        """Hits over rows asked for (0 before any)."""
        return self.hits / max(self.hits + self.misses, 1)


class FeatureCache:
    """A feature array with a static hot tier in front of it.

    Parameters
    ----------
    feature
        A :class:`featurestore.FeatureArray`.
    rows
        Ids of the rows to hold (e.g. :func:`rank_rows` of presampled counts).
    pin
        Pin the hot tier (CUDA hosts: copies to the GPU run asynchronously from it).
    read_path
        How misses are read: ``"direct"`` (``O_DIRECT``, default), ``"dontneed"`` or any
        :meth:`~featurestore.FeatureArray.gather` read path.
    """

    def __init__(self, feature, rows, *, pin: bool = False, read_path: str = "direct"):
        self.feature = feature
        self.read_path = read_path
        self.hot = HotTier(feature.shape[0], rows, feature.shape[1:], feature.dtype, pin=pin)
        self.stats = CacheStats()
        self._local = feature.reader.is_local  # local rows: read_uncached around the page cache
        self._bg = None  # one thread that issues the misses' reads while hits are copied
        if len(self.hot):  # fill: one sorted pass of reads around the page cache
            self._read(self.hot.rows, self.hot.data, None)
            self.stats.reset()

    def __repr__(self) -> str:
        return (f"FeatureCache({self.feature.name!r}, hot rows={len(self.hot):,} "
                f"({self.hot.data.nbytes / 2**20:.0f} MiB), read_path={self.read_path!r})")

    def _read(self, ids: np.ndarray, out: np.ndarray, at: np.ndarray | None) -> None:
        rows = self.feature.reader
        if self._local and self.read_path in ("direct", "dontneed"):
            r0, b0 = rows.reads, rows.bytes_read
            rows.read_uncached(ids, out, self.read_path, at=at)
            self.stats.reads += rows.reads - r0
            self.stats.bytes_read += rows.bytes_read - b0
            return
        tmp = self.feature.gather(ids, read_path=self.read_path)
        n = np.unique(ids).shape[0]
        self.stats.reads += n
        self.stats.bytes_read += n * self.feature.row_bytes
        if at is None:
            out[:] = tmp
        else:
            out[at] = tmp

    def gather(self, ids, out: np.ndarray | None = None, *,
               stage: np.ndarray | None = None) -> np.ndarray:
        """Rows ``ids`` (any order, repeats allowed) into ``out`` (allocated when None).

        ``out`` may be of another floating dtype than the store's (the loader's ``dtype=``):
        hits are then cast in their copy from the hot tier, and misses are read into
        ``stage`` (a buffer in the store's dtype, a chunk of rows; a small one is made when
        None) and cast in their copy out of it.
        """
        f = self.feature
        ids = check_ids(ids, f.shape[0], f.name).astype(np.int64, copy=False)
        ids = np.ascontiguousarray(ids)
        from featurestore.gather import check_out

        o = out.numpy() if out is not None and not isinstance(out, np.ndarray) else out
        if o is not None and o.dtype != f.dtype:
            want = (ids.shape[0],) + tuple(f.shape[1:])
            if o.shape != want or o.dtype.kind != "f":
                from featurestore.errors import SchemaError
                raise SchemaError(f"Expected out of shape {want} and a floating dtype for "
                                  f"{f.name}. Got {o.shape} {o.dtype} instead.")
            self._gather_cast(ids, o, stage)
            return out
        buf = check_out(out, ids.shape[0], f.shape[1:], f.dtype, f.name)
        n = ids.shape[0]
        if n == 0:
            return out if out is not None else buf
        hot = self.hot
        if not len(hot):
            at = np.arange(n, dtype=np.int64)
        elif n < _PARALLEL_MIN:  # small: one pass copies hits and flags misses
            miss = np.empty(n, np.bool_)
            _split_ser(ids, hot.pos, hot.data.ctypes.data, hot.row_bytes, buf.ctypes.data, miss)
            at = np.flatnonzero(miss)
        else:  # large: find the misses, start their reads, copy the hits meanwhile
            p = np.empty(n, np.int32)
            _lookup(ids, hot.pos, p)
            at = np.flatnonzero(p < 0)
            fut = None
            if at.shape[0]:
                if self._bg is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._bg = ThreadPoolExecutor(1, thread_name_prefix="fs-cache-miss")
                fut = self._bg.submit(self._read, ids[at], buf, at)
            _copy_hits(p, hot.data.ctypes.data, hot.row_bytes, buf.ctypes.data)
            self.stats.hits += n - at.shape[0]
            self.stats.misses += at.shape[0]
            if fut is not None:
                fut.result()
            return out if out is not None else buf
        self.stats.hits += n - at.shape[0]
        self.stats.misses += at.shape[0]
        if at.shape[0]:
            self._read(ids[at], buf, at)
        return out if out is not None else buf

    def _gather_cast(self, ids: np.ndarray, out: np.ndarray, stage: np.ndarray | None) -> None:
        """:meth:`gather` into ``out`` of another dtype: hits cast by a kernel from the hot
        tier while the misses are read (a helper thread for large batches) chunk by chunk into
        ``stage`` and cast into their rows."""
        if not (out.flags.c_contiguous and out.flags.writeable):
            from featurestore.errors import SchemaError
            raise SchemaError(f"Expected a C-contiguous writeable out buffer for "
                              f"{self.feature.name}.")
        n, hot = ids.shape[0], self.hot
        p = hot.lookup(ids) if len(hot) else np.full(n, -1, np.int32)
        at = np.flatnonzero(p < 0)
        fut = None
        if at.shape[0]:
            if stage is None:
                rows = max(1, (4 << 20) // max(1, self.feature.row_bytes))
                stage = np.empty((min(rows, at.shape[0]),) + self.feature.shape[1:],
                                 self.feature.dtype)
            if n >= _PARALLEL_MIN and len(hot):
                if self._bg is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._bg = ThreadPoolExecutor(1, thread_name_prefix="fs-cache-miss")
                fut = self._bg.submit(self._read_cast, ids[at], out, at, stage)
            else:
                self._read_cast(ids[at], out, at, stage)
        if len(hot):
            cast_rows(hot.data, p, out)
        self.stats.hits += n - at.shape[0]
        self.stats.misses += at.shape[0]
        if fut is not None:
            fut.result()

    def _read_cast(self, ids: np.ndarray, out: np.ndarray, at: np.ndarray,
                   stage: np.ndarray) -> None:
        step = stage.shape[0]
        if ids.shape[0] > step:  # chunks of neighbouring rows: each one's reads merge into spans
            order = np.argsort(ids, kind="stable")
            ids, at = ids[order], at[order]
        for lo in range(0, ids.shape[0], step):
            m = min(step, ids.shape[0] - lo)
            self._read(ids[lo:lo + m], stage[:m], None)
            cast_rows(stage[:m], np.arange(m, dtype=np.int64), out, at[lo:lo + m])

    def close(self) -> None:
        """Stop the helper thread that reads misses (if one was started)."""
        if self._bg is not None:
            self._bg.shutdown(wait=True)
            self._bg = None
