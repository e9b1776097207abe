"""A node-local cache of a remote store's byte ranges: ``open_store(url, cache_dir=...)``.

:class:`RangeCacheFileSystem` wraps the store's fsspec filesystem. Reads of the data files
(every file but the ``zarr.json`` metadata, which stays fresh for the generation checks) are
served from a sparse local copy, filled on demand in blocks of ``block_bytes``: the blocks a
read needs and the cache lacks are merged into runs and fetched in one batch (concurrent on
s3fs/HTTP, the first failure cancelling the rest), written, then marked present. A row touched
once is read from local disk afterwards, in this process and in any other that opens the store
with the same ``cache_dir`` (the ranks of a node share one).

Layout: ``cache_dir/<sha256(url)[:16]>-<generation>/<sha256(path)[:24]>.{data,state,json}``.
``.data`` is a sparse file of the remote file's size, ``.state`` one byte per block (1 when the
block's bytes are in ``.data``), ``.json`` the remote path, size and block size. Keying by the
store's generation means a rewritten store never serves the old bytes; a ``.data`` deleted or
cut under its ``.state`` is noticed at open, and its blocks are fetched again.

Why not fsspec's ``blockcache``: it marks blocks present *before* fetching them, so a fetch
that fails (a reset connection, which the reader retries) leaves holes that later reads return
as zeros (``docs/scale-out.md`` shows it); its block set is one JSON file rewritten on every
open and close without a lock (a node's ranks race on it), and its ``cat_ranges`` opens the
file once per range. ``simplecache``/``filecache`` copy whole files, and a store's feature
shard is the whole matrix (187 GB for MAG240M's papers): use ``featurestore replicate`` for that.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid

import numpy as np
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from featurestore.fileio import pwrite_all
from featurestore.remote import forksafe
from featurestore.remote.failfast import cat_ranges

__all__ = ["RangeCacheFileSystem", "CACHE_BLOCK_BYTES"]

#: default bytes of one cache block (the unit fetched and marked).
CACHE_BLOCK_BYTES = 64 << 10
#: longest single request of a fill (longer runs of missing blocks are split).
MAX_REQUEST_BYTES = 16 << 20


def _hash(s: str, n: int) -> str:
    return hashlib.sha256(s.encode()).hexdigest()[:n]


class _Entry:
    """The local copy of one remote file: data descriptor, block states, size."""

    def __init__(self, base: str, path: str, size: int, block_bytes: int, reset: bool = False):
        self.path, self.size, self.block_bytes = path, int(size), int(block_bytes)
        self.nblocks = -(-self.size // self.block_bytes)
        self.fd, fresh = _open_data(base + ".data")
        if os.fstat(self.fd).st_size != self.size:
            os.ftruncate(self.fd, self.size)  # sparse
            fresh = True
        sfd = os.open(base + ".state", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(sfd).st_size != self.nblocks:
                os.ftruncate(sfd, self.nblocks)
        finally:
            os.close(sfd)
        self.state = (np.memmap(base + ".state", dtype=np.uint8, mode="r+",
                                shape=(self.nblocks,)) if self.nblocks else
                      np.zeros(0, np.uint8))
        if fresh or reset:  # a .data made (or resized) here holds none of the blocks .state
            self.state[:] = 0  # may list, nor does a .state beside a .json made here count
            # this block size: forgetting costs refetches; keeping them serves zeros

    def close(self) -> None:
        """Close the data descriptor and unmap the states (idempotent)."""
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)
            self.fd = -1
        self.state = np.zeros(0, np.uint8)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _open_data(path: str) -> tuple[int, bool]:
    """Open (or create) a cache's ``.data`` file: its descriptor, and whether it was created
    by this call (a deleted ``.data`` beside a surviving ``.state``)."""
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            pass
        try:
            return os.open(path, os.O_RDWR), False
        except FileNotFoundError:  # deleted between the two calls: create it
            continue


class RangeCacheFileSystem(AbstractFileSystem):
    """Read-only view of ``fs`` whose data files are cached block by block under ``storage``.

    Parameters
    ----------
    fs
        The remote filesystem (s3fs, HTTP, ...).
    storage
        This store generation's cache directory (created if missing).
    block_bytes
        Bytes per cache block: the smallest unit fetched and recorded.
    """

    protocol = "fs-rangecache"
    cachable = False

    def __init__(self, fs: AbstractFileSystem, storage: str,
                 block_bytes: int = CACHE_BLOCK_BYTES, **kwargs):
        super().__init__(**kwargs)
        self.target = fs
        self.storage = os.fspath(storage)
        self.block_bytes = int(block_bytes)
        os.makedirs(self.storage, exist_ok=True)
        self._entries: dict[str, _Entry] = {}
        self._lock = forksafe.Lock()
        #: requests sent to the remote, bytes fetched, bytes served, reads served locally only.
        self.stats = {"requests": 0, "bytes_fetched": 0, "bytes_served": 0, "local_reads": 0}

    # -- what is cached ---------------------------------------------------------------
    @staticmethod
    def cacheable(path: str) -> bool:
        """Data files are cached; metadata (``zarr.json``) and the lock are always fresh."""
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return name != "zarr.json" and not name.startswith(".")

    def _entry(self, path: str) -> _Entry:
        with self._lock:
            e = self._entries.get(path)
            if e is not None:
                return e
            base = os.path.join(self.storage, _hash(path, 24))
            size, block, made = self._meta(base, path)
            e = self._entries[path] = _Entry(base, path, size, block, reset=made)
            return e

    def _meta(self, base: str, path: str) -> tuple[int, int, bool]:
        """``(size, block bytes, made)`` of ``path``'s cache files from their ``.json``; made
        (with this reader's block size) when missing or unreadable. The first ``.json``
        written wins, so every reader counts the shared ``.state`` in one block size; a made
        one means the ``.state`` beside it may count another's blocks (``made``: reset it)."""
        for _ in range(3):
            try:
                with open(base + ".json", "rb") as f:
                    meta = json.load(f)
                return int(meta["size"]), int(meta["block_bytes"]), False
            except FileNotFoundError:
                broken = False
            except (ValueError, KeyError, TypeError):
                broken = True
            size = int(self.target.info(path)["size"])
            tmp = f"{base}.json.{uuid.uuid4().hex}.tmp"
            with open(tmp, "w") as f:
                json.dump({"path": path, "size": size, "block_bytes": self.block_bytes}, f)
            try:
                if broken:
                    os.replace(tmp, base + ".json")
                else:
                    os.link(tmp, base + ".json")  # fails if another reader wrote one first
                return size, self.block_bytes, True
            except FileExistsError:
                continue  # read the winner's
            except OSError:  # a file system without hard links: last writer wins
                os.replace(tmp, base + ".json")
                return size, self.block_bytes, True
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        raise OSError(f"Could not settle the cache metadata {base}.json in {self.storage}.")

    # -- reads --------------------------------------------------------------------------
    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """Bytes ``[start, end)`` of each path (``None`` and negative bounds as in
        ``cat_file``); cached files are filled first, in one ``cat_ranges`` of the remote."""
        n = len(paths)
        if not isinstance(starts, list):
            starts = [starts] * n
        if not isinstance(ends, list):
            ends = [ends] * n
        out: list = [None] * n
        other = [i for i in range(n) if not self.cacheable(paths[i])]
        if other:
            got = self.target.cat_ranges([paths[i] for i in other], [starts[i] for i in other],
                                         [ends[i] for i in other], on_error=on_error, **kwargs)
            for i, g in zip(other, got):
                out[i] = g
        mine = [i for i in range(n) if out[i] is None and self.cacheable(paths[i])]
        if mine:
            by_path: dict[str, list[int]] = {}
            for i in mine:
                by_path.setdefault(paths[i], []).append(i)
            entries, bounds = self._filled(by_path, starts, ends)
            for p, idx in by_path.items():
                e, (lo, hi) = entries[p], bounds[p]
                for i, a, b in zip(idx, lo.tolist(), hi.tolist()):
                    out[i] = os.pread(e.fd, b - a, a) if b > a else b""
                    self.stats["bytes_served"] += b - a
        return out

    def _filled(self, by_path: dict, starts, ends) -> tuple[dict, dict]:
        """The entries of ``by_path``'s files and the byte bounds asked of each, every block
        of them in the local files. A ``.data`` deleted under us (``st_nlink`` 0) is dropped
        and opened again: its blocks in another process's new file are not in ours."""
        for _ in range(3):
            entries = {p: self._entry(p) for p in by_path}
            bounds = {p: self._bounds(entries[p], [starts[i] for i in idx],
                                      [ends[i] for i in idx]) for p, idx in by_path.items()}
            self._fill(bounds, entries)
            stale = [e for e in entries.values() if os.fstat(e.fd).st_nlink == 0]
            if not stale:
                return entries, bounds
            for e in stale:
                self._forget(e)
        raise OSError(f"The cache files of {sorted(by_path)} in {self.storage} were deleted "
                      "again and again while being read: keep the cache_dir of a running "
                      "reader in place.")

    def cat_file(self, path, start=None, end=None, **kwargs):
        """Bytes ``[start, end)`` of one file (negative ``start``: from the end)."""
        if not self.cacheable(path):
            return self.target.cat_file(path, start=start, end=end, **kwargs)
        return self.cat_ranges([path], [start], [end])[0]

    @staticmethod
    def _bounds(e: _Entry, starts, ends) -> tuple[np.ndarray, np.ndarray]:
        """Absolute ``[lo, hi)`` byte bounds clipped to the file."""
        lo = np.array([0 if s is None else s for s in starts], dtype=np.int64)
        hi = np.array([e.size if x is None else x for x in ends], dtype=np.int64)
        lo = np.where(lo < 0, e.size + lo, lo).clip(0, e.size)
        hi = np.where(hi < 0, e.size + hi, hi).clip(0, e.size)
        return lo, np.maximum(lo, hi)

    def _fill(self, bounds: dict[str, tuple[np.ndarray, np.ndarray]], entries: dict) -> None:
        """Fetch every missing block the ranges need, in one remote ``cat_ranges``."""
        req_paths, req_lo, req_hi, marks = [], [], [], []
        for p, (lo, hi) in bounds.items():
            e = entries[p]
            blocks = _blocks_of(lo, hi, e.block_bytes)
            if not blocks.size:
                continue
            miss = blocks[e.state[blocks] == 0]
            if not miss.size:
                self.stats["local_reads"] += 1
                continue
            for a, b in _runs(miss, max(1, MAX_REQUEST_BYTES // e.block_bytes)):
                req_paths.append(p)
                req_lo.append(int(a) * e.block_bytes)
                req_hi.append(min(e.size, int(b) * e.block_bytes))
                marks.append((e, int(a), int(b)))
        if not req_paths:
            return
        got = cat_ranges(self.target, req_paths, req_lo, req_hi, on_error="return")
        self.stats["requests"] += len(req_paths)
        first_error = None
        for (e, a, b), lo, hi, data in zip(marks, req_lo, req_hi, got):
            if isinstance(data, BaseException) or len(data) != hi - lo:
                first_error = first_error or (data if isinstance(data, BaseException) else
                                              OSError(f"short read of {e.path} [{lo}, {hi}): "
                                                      f"{len(data)} bytes"))
                continue
            # the bytes first, then the mark: never a hole (a full disk is no transport error)
            pwrite_all(e.fd, data, lo, f"{e.path} in the cache directory {self.storage}",
                       " Free space or choose another cache_dir.")
            if os.fstat(e.fd).st_nlink == 0:  # our .data was deleted: a new one lacks these
                continue  # bytes, so mark nothing (the caller opens the new one)
            e.state[a:b] = 1
            self.stats["bytes_fetched"] += hi - lo
        if first_error is not None:
            raise first_error

    def _forget(self, e: _Entry) -> None:
        """Drop ``e`` (its file was deleted): the next read of its path opens the new one.
        ``e`` itself stays usable until it is garbage: a read in progress finishes on it."""
        with self._lock:
            if self._entries.get(e.path) is e:
                del self._entries[e.path]

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        if "r" not in mode:
            raise PermissionError(f"{path}: a cached store is read-only.")
        if not self.cacheable(path):
            return self.target.open(path, mode, block_size=block_size, **kwargs)
        return _CachedFile(self, path, size=self._entry(path).size)

    # -- everything else goes to the remote ----------------------------------------------
    def info(self, path, **kwargs):
        """The remote's ``info``."""
        return self.target.info(path, **kwargs)

    def ls(self, path, detail=True, **kwargs):
        """The remote's ``ls``."""
        return self.target.ls(path, detail=detail, **kwargs)

    def find(self, path, maxdepth=None, withdirs=False, detail=False, **kwargs):
        """The remote's ``find``."""
        return self.target.find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail,
                                **kwargs)

    def exists(self, path, **kwargs):
        """The remote's ``exists``."""
        return self.target.exists(path, **kwargs)

    def close(self) -> None:
        """Close the local files (the cache stays on disk)."""
        with self._lock:
            for e in self._entries.values():
                e.close()
            self._entries.clear()


class _CachedFile(AbstractBufferedFile):
    """A read-only file object over :meth:`RangeCacheFileSystem.cat_file`."""

    def __init__(self, fs, path, size):
        super().__init__(fs, path, mode="rb", cache_type="none", size=size)

    def _fetch_range(self, start, end):
        return self.fs.cat_file(self.path, start, end)


def _blocks_of(lo: np.ndarray, hi: np.ndarray, block: int) -> np.ndarray:
    """Sorted distinct blocks touched by the byte ranges ``[lo, hi)`` (empty ones skipped)."""
    keep = hi > lo
    first, last = lo[keep] // block, (hi[keep] - 1) // block
    counts = last - first + 1
    if not counts.size:
        return np.zeros(0, np.int64)
    offs = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts,
                                                                     counts)
    return np.unique(np.repeat(first, counts) + offs)


def _runs(blocks: np.ndarray, max_len: int) -> list[tuple[int, int]]:
    """Runs ``[a, b)`` of consecutive sorted blocks, none longer than ``max_len``."""
    cut = np.nonzero(np.diff(blocks) != 1)[0] + 1
    out = []
    for seg in np.split(blocks, cut):
        for a in range(int(seg[0]), int(seg[-1]) + 1, max_len):
            out.append((a, min(int(seg[-1]) + 1, a + max_len)))
    return out
