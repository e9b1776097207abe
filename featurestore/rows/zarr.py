"""Rows of any zarr array (:class:`ZarrRows`): compressed arrays, other layouts.

zarr reads whole inner chunks; this reader reads the chunks a gather touches concurrently
and keeps the decoded ones in a bounded LRU cache (``cache_bytes``).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from featurestore.rows.base import ForkSafePool, RowReader
from featurestore.remote import forksafe

__all__ = ["ZarrRows"]


class ZarrRows(RowReader):
    """Rows of a zarr array, read chunk by chunk through a bounded cache of decoded chunks.

    Parameters
    ----------
    zarray
        An opened ``zarr.Array`` (local or remote store).
    cache_bytes
        Bound of the decoded-chunk cache (a chunk larger than it is not cached).
    io_threads
        Chunks read at once.
    name
        A name for messages.
    reopen
        Opens the array again in a child process after ``fork`` (a remote store's client is
        bound to the parent's event loop and shares its connections: a child reading through
        it fails, and its answers can reach the parent's reads). ``None`` keeps the array
        (a local store's files can be shared).
    """

    def __init__(self, zarray, cache_bytes: int = 256 << 20, io_threads: int = 16,
                 name: str = "", reopen=None):
        super().__init__(tuple(zarray.shape), np.dtype(zarray.dtype), name or str(zarray))
        self._z = forksafe.PerProcess(reopen or (lambda: zarray), first=zarray)
        self.chunk_rows = int(zarray.chunks[0])
        self.cache_bytes = cache_bytes
        self.io_threads = io_threads
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cached = 0
        self._lock = forksafe.Lock()
        self._pool = ForkSafePool(io_threads, "fs-zarr")
        self.hits = self.misses = 0

    @property
    def z(self):
        """The zarr array, opened again after ``fork`` when a ``reopen`` was given."""
        return self._z.get()

    def _chunk(self, c: int) -> np.ndarray:
        lo = c * self.chunk_rows
        return np.asarray(self.z[lo:min(lo + self.chunk_rows, self.shape[0])])

    def _gather(self, ids: np.ndarray, out: np.ndarray, read_path: str) -> str:
        chunks_of = ids // self.chunk_rows
        order = np.argsort(chunks_of, kind="stable")
        need, lo = np.unique(chunks_of[order], return_index=True)
        hi = np.r_[lo[1:], ids.shape[0]]
        span = {int(c): (int(a), int(b)) for c, a, b in zip(need, lo, hi)}

        def copy(c: int, data: np.ndarray) -> None:
            sel = order[span[c][0]:span[c][1]]
            out[sel] = data[ids[sel] - c * self.chunk_rows]

        with self._lock:
            have = {c: self._cache[c] for c in span if c in self._cache}
            for c in have:
                self._cache.move_to_end(c)
            missing = [c for c in span if c not in have]
            self.hits += len(have)
            self.misses += len(missing)
        for c, data in have.items():
            copy(c, data)
        del have
        # decoded chunks held at once: one wave of io_threads (the LRU keeps what it keeps)
        wave = max(1, self.io_threads)
        for w in range(0, len(missing), wave):
            part = missing[w:w + wave]
            for c, data in zip(part, self._pool.get().map(self._chunk, part)):
                copy(c, data)
                self._remember(c, data)
        return "zarr"

    def _remember(self, c: int, data: np.ndarray) -> None:
        with self._lock:
            if data.nbytes > self.cache_bytes or c in self._cache:
                return
            self._cache[c] = data
            self._cached += data.nbytes
            while self._cached > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached -= old.nbytes

    def _read_slice(self, start: int, stop: int, out: np.ndarray) -> None:
        out[...] = self.z[start:stop]

    def array(self) -> np.ndarray:
        """Return the whole array, read into memory."""
        self._check_open()
        return np.asarray(self.z[...])

    def stats(self) -> dict:
        """Chunk cache hits and misses, and the bytes it holds against its bound."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "cached_bytes": self._cached,
                    "cache_bytes": self.cache_bytes, "cached_chunks": len(self._cache)}

    def _close(self) -> None:
        self._pool.shutdown()
        with self._lock:
            self._cache.clear()
            self._cached = 0
