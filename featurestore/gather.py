"""Row gathers: the read paths behind :meth:`FeatureArray.gather`.

* ``LocalRows``: an uncompressed single-shard file on local disk. Resident rows are copied
  out of a memory map by a parallel numba kernel; rows not in the page cache are read with
  ``pread`` from many threads at once (``POSIX_FADV_RANDOM``, no readahead), after sorting,
  deduplicating and coalescing the ids, then scattered back into the order asked.
  ``mincore`` on a sample of the rows picks the path per call (``read_path="auto"``).
* ``ZarrRows``: anything else (compressed, remote, another layout): zarr reads whole inner
  chunks concurrently, through a bounded LRU cache of decoded chunks.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _kernels as K
from .errors import CorruptStoreError, IdsOutOfRangeError, InvalidIdsError, SchemaError
from ._shard import ShardLayout

READ_PATHS = ("auto", "mmap", "pread")
#: rows sampled by the residency probe, and the resident share above which memory maps win.
PROBE_ROWS = 64
RESIDENT_SHARE = 0.9


def check_ids(ids, num_rows: int, what: str) -> np.ndarray:
    """Validate ``ids`` (any 1-D integer array-like) against ``[0, num_rows)``; return an array."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InvalidIdsError(f"Expected a 1-D array of ids for {what}. "
                              f"Got an array of shape {arr.shape} instead.")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise InvalidIdsError(f"Expected integer ids for {what}. Got dtype {arr.dtype} instead.")
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
        arr = arr.astype(np.int64)  # uint64 has no numba-safe comparison with negative bounds
    lo, hi = K.id_range(arr)
    if lo < 0 or hi >= num_rows:
        bad = lo if lo < 0 else hi
        raise IdsOutOfRangeError(f"Expected ids in [0, {num_rows}) for {what}. "
                                 f"Got {int(bad)} instead.")
    return arr


def check_out(out, n: int, row_shape: tuple, dtype: np.dtype, what: str) -> np.ndarray:
    want = (n,) + tuple(row_shape)
    if out is None:
        return np.empty(want, dtype=dtype)
    o = out.numpy() if hasattr(out, "numpy") and not isinstance(out, np.ndarray) else out
    if not isinstance(o, np.ndarray) or o.shape != want or o.dtype != dtype:
        raise SchemaError(f"Expected out of shape {want} and dtype {dtype} for {what}. Got "
                          f"{getattr(o, 'shape', type(o))} {getattr(o, 'dtype', '')} instead.")
    if not o.flags.c_contiguous or not o.flags.writeable:
        raise SchemaError(f"Expected a C-contiguous writeable out buffer for {what}.")
    return o


class LocalRows:
    """Rows of a local uncompressed single-shard file."""

    def __init__(self, path: str, layout: ShardLayout, io_threads: int = 32):
        self.path = path
        self.layout = layout
        self.io_threads = io_threads
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = -1
        self._lock = threading.Lock()
        self._fd = -1
        self._mm = None
        self._map = None
        if layout.shape[0]:
            self._open()

    def _open(self) -> None:
        lay = self.layout
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise CorruptStoreError(f"Expected shard file {self.path}. It is missing.") from e
        size = os.fstat(self._fd).st_size
        if size != lay.file_bytes:
            os.close(self._fd)
            self._fd = -1
            raise CorruptStoreError(f"Expected {lay.file_bytes} bytes in {self.path}. "
                                    f"Got {size} instead (truncated or overwritten).")
        os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_RANDOM)
        self._mm = mmap.mmap(self._fd, lay.data_bytes, prot=mmap.PROT_READ)
        self._map = np.frombuffer(self._mm, dtype=lay.dtype, count=int(np.prod(lay.shape)))
        self._map = self._map.reshape(lay.shape)
        self._base = self._map.ctypes.data

    def array(self) -> np.ndarray:
        """The whole array as a read-only memory map (zero-copy)."""
        if self._map is None:
            return np.empty(self.layout.shape, self.layout.dtype)
        return self._map

    def resident_share(self, ids: np.ndarray) -> float:
        if ids.size == 0 or self._map is None:
            return 1.0
        k = PROBE_ROWS if ids.size >= 16384 else PROBE_ROWS // 4  # ~10 us instead of ~40
        step = max(1, ids.size // k)
        sample = np.ascontiguousarray(ids[::step][:k]).astype(np.int64, copy=False)
        return float(K.resident_fraction(self._base, self.layout.row_bytes, sample, K.PAGE,
                                         np.zeros(64, np.uint8)))

    def gather(self, ids: np.ndarray, out: np.ndarray, read_path: str = "auto") -> str:
        """Fill ``out`` with rows ``ids`` (validated). Returns the read path taken."""
        if ids.size == 0:
            return "none"
        if read_path == "auto":
            read_path = "mmap" if self.resident_share(ids) >= RESIDENT_SHARE else "pread"
        if read_path == "mmap":
            K.copy_rows(self._map, ids, out)
            return "mmap"
        rows, inv = np.unique(ids, return_inverse=True)
        direct = rows.size == ids.size and bool(np.all(inv == np.arange(ids.size)))
        stage = out if direct else np.empty((rows.size,) + self.layout.shape[1:], out.dtype)
        self._pread_into(rows, stage)
        if not direct:
            K.copy_rows(stage, inv.astype(np.int64, copy=False), out)
        return "pread"

    def _pread_into(self, rows: np.ndarray, stage: np.ndarray) -> None:
        start, length, pos = K.coalesce_runs(rows.astype(np.int64, copy=False))
        rb = self.layout.row_bytes
        nrun = start.size
        tasks = min(nrun, self.io_threads * 4)
        # split the runs into tasks of about equal bytes
        cum = np.cumsum(length)
        cuts = np.searchsorted(cum, np.linspace(0, cum[-1], tasks + 1)[1:-1], side="right")
        bounds = np.concatenate(([0], cuts, [nrun])).astype(np.int64)
        addr = stage.ctypes.data
        pool = self._executor()

        def run(lo, hi):
            return K.pread_runs(self._fd, rb, 0, start, length, pos, addr, lo, hi)

        if tasks <= 1:
            results = [run(0, nrun)]
        else:
            futs = [pool.submit(run, int(bounds[i]), int(bounds[i + 1]))
                    for i in range(len(bounds) - 1) if bounds[i] < bounds[i + 1]]
            results = [f.result() for f in futs]
        bad = [r for r in results if r >= 0]
        if bad:
            k = bad[0]
            want = int(length[k]) * rb
            try:
                got = len(os.pread(self._fd, want, int(start[k]) * rb))
            except OSError as e:
                raise CorruptStoreError(f"Could not read rows of {self.path}: {e}") from e
            raise CorruptStoreError(f"Expected {want} bytes at offset {int(start[k]) * rb} of "
                                    f"{self.path}. Got {got} instead (file truncated?).")

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pool_pid != os.getpid():  # threads do not survive fork
                self._pool = ThreadPoolExecutor(self.io_threads, thread_name_prefix="fs-pread")
                self._pool_pid = os.getpid()
            return self._pool

    def close(self) -> None:
        if self._pool is not None and self._pool_pid == os.getpid():
            self._pool.shutdown(wait=True)
        self._pool = None
        self._map = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a caller still holds array(); the map closes with it
                pass
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ZarrRows:
    """Rows of any zarr array, read chunk by chunk through a bounded cache of decoded chunks."""

    def __init__(self, zarray, cache_bytes: int = 256 << 20, io_threads: int = 16):
        self.z = zarray
        self.shape = tuple(zarray.shape)
        self.dtype = np.dtype(zarray.dtype)
        self.chunk_rows = int(zarray.chunks[0])
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.cache_bytes = cache_bytes
        self.io_threads = io_threads
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.hits = self.misses = 0

    def _chunk(self, c: int) -> np.ndarray:
        lo = c * self.chunk_rows
        return np.asarray(self.z[lo:min(lo + self.chunk_rows, self.shape[0])])

    def gather(self, ids: np.ndarray, out: np.ndarray, read_path: str = "auto") -> str:
        if ids.size == 0:
            return "none"
        chunks_of = ids // self.chunk_rows
        need = np.unique(chunks_of)
        with self._lock:
            have = {int(c): self._cache[int(c)] for c in need if int(c) in self._cache}
            for c in have:
                self._cache.move_to_end(c)
        missing = [int(c) for c in need if int(c) not in have]
        self.hits += len(have)
        self.misses += len(missing)
        if missing:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.io_threads, thread_name_prefix="fs-zarr")
            for c, data in zip(missing, self._pool.map(self._chunk, missing)):
                have[c] = data
                self._remember(c, data)
        order = np.argsort(chunks_of, kind="stable")
        lo = np.searchsorted(chunks_of[order], need, side="left")
        hi = np.searchsorted(chunks_of[order], need, side="right")
        for c, a, b in zip(need.tolist(), lo.tolist(), hi.tolist()):
            sel = order[a:b]
            out[sel] = have[c][ids[sel] - c * self.chunk_rows]
        return "zarr"

    def _remember(self, c: int, data: np.ndarray) -> None:
        with self._lock:
            if data.nbytes > self.cache_bytes:
                return
            self._cache[c] = data
            self._cached += data.nbytes
            while self._cached > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached -= old.nbytes

    def array(self) -> np.ndarray:
        return np.asarray(self.z[...])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._cache.clear()
        self._cached = 0
