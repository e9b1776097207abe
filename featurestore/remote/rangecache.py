"""A node-local cache of a remote store's byte ranges: ``open_store(url, cache_dir=...)``.

:class:`RangeCacheFileSystem` wraps the store's fsspec filesystem. Reads of the data files
(every file but the ``zarr.json`` metadata, which stays fresh for the generation checks) are
served from a sparse local copy, filled on demand in blocks of ``block_bytes``: the blocks a
read needs and the cache lacks are merged into runs and fetched in one batch (concurrent on
s3fs/HTTP, the first failure cancelling the rest), written, then marked present. A row touched
once is read from local disk afterwards, in this process and in any other that opens the store
with the same ``cache_dir`` (the ranks of a node share one).

Layout: ``cache_dir/<sha256(url)[:16]>-<generation>/<sha256(path)[:24]>.{data,state,sum,json}``.
``.data`` is a sparse file of the remote file's size, ``.state`` one byte per block (1 when the
block's bytes are in ``.data``), ``.sum`` the CRC-32 of each block as fetched, ``.json`` the
remote path, size and block size with a CRC-32 of its own. Keying by the store's generation
means a rewritten store never serves the old bytes; a ``.data`` deleted or cut under its
``.state`` is noticed at open, and its blocks are fetched again.

The cache does not trust its own files. A block this process did not fetch is read back and
checked against its ``.sum`` before it is first served (once per process, a bitmap in
memory, at most ``MAX_REQUEST_BYTES`` read at a time); a block that fails (zeroed, flipped, or
listed by ``.state`` but never written) is fetched again. When a fill completes a checksum
block of rows of a v1 array (about 64 MiB), those bytes are checked against the writer's
CRC-32 in the array's ``zarr.json`` (fetched again once, then a ``CorruptStoreError``). The
writer's CRC-32s cover 64 MiB of rows, so they cannot check the sparse blocks a gather serves
without fetching the whole block of rows: ``.sum`` does that. A ``.json`` that fails its check
or names an impossible size or block size is made again (and the ``.state`` reset); a read past
the recorded size asks the remote's size once per process. A cache directory removed under a
reader is made again; one that cannot be written is a ``CacheDirError`` naming it.

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
import logging
import os
import uuid
import zlib

import numpy as np
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from featurestore.errors import CacheDirError, CorruptStoreError, DiskFullError, \
    InvalidArgumentError
from featurestore.fileio import pwrite_all
from featurestore.remote import forksafe
from featurestore.remote.failfast import cat_ranges

__all__ = ["RangeCacheFileSystem", "CACHE_BLOCK_BYTES"]

log = logging.getLogger(__name__)

#: default bytes of one cache block (the unit fetched and marked).
CACHE_BLOCK_BYTES = 64 << 10
#: longest single request of a fill (longer runs of missing blocks are split); also the
#: most bytes read at once to check cached blocks.
MAX_REQUEST_BYTES = 16 << 20
#: largest block size a cache's ``.json`` may name.
MAX_BLOCK_BYTES = 1 << 30
#: version of a cache's ``.json``; 2 added the ``.sum`` file and the record's own check.
CACHE_FORMAT = 2


def _hash(s: str, n: int) -> str:
    return hashlib.sha256(s.encode()).hexdigest()[:n]


def _meta_check(path: str, size: int, block: int) -> int:
    """The CRC-32 a cache's ``.json`` carries of its own fields (a hand-edited or rotted one
    fails it)."""
    return zlib.crc32(f"{CACHE_FORMAT}\n{path}\n{size}\n{block}".encode())


def _parse_meta(raw: bytes, path: str) -> tuple[int, int] | None:
    """``(size, block bytes)`` of a cache's ``.json`` for ``path``, or None when it is not a
    sound record of this format (unparsable, another path, a size or block size out of range,
    its check failing)."""
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    size, block = meta.get("size"), meta.get("block_bytes")
    if (meta.get("version") != CACHE_FORMAT or meta.get("path") != path
            or type(size) is not int or type(block) is not int or size < 0
            or not 0 < block <= MAX_BLOCK_BYTES
            or meta.get("check") != _meta_check(path, size, block)):
        return None
    return size, block


def _block_crcs(buf, block: int) -> np.ndarray:
    """CRC-32 of each ``block`` bytes of ``buf`` (the last one shorter)."""
    mv = memoryview(buf).cast("B")
    return np.array([zlib.crc32(mv[i:i + block]) for i in range(0, len(mv), block)],
                    dtype=np.uint32)


def _sized(path: str, nbytes: int) -> bool:
    """Create ``path`` or set its size to ``nbytes``; whether it was created or resized here."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size == nbytes:
            return False
        os.ftruncate(fd, nbytes)
        return True
    finally:
        os.close(fd)


class _Entry:
    """The local copy of one remote file: data descriptor, block states and CRC-32s, size.

    ``.sum`` holds the CRC-32 of each block as fetched (written before the block's mark), so a
    block this process did not fetch is checked once before it is served (:attr:`checked`).
    """

    def __init__(self, base: str, path: str, size: int, block_bytes: int, reset: bool = False):
        self.path, self.size, self.block_bytes = path, int(size), int(block_bytes)
        self.nblocks = -(-self.size // self.block_bytes)
        self.fd, fresh = _open_data(base + ".data")
        try:
            if os.fstat(self.fd).st_size != self.size:
                os.ftruncate(self.fd, self.size)  # sparse
                fresh = True
            fresh = _sized(base + ".state", self.nblocks) or fresh
            fresh = _sized(base + ".sum", 4 * self.nblocks) or fresh
            n = self.nblocks
            self.state = (np.memmap(base + ".state", dtype=np.uint8, mode="r+", shape=(n,))
                          if n else np.zeros(0, np.uint8))
            self.sums = (np.memmap(base + ".sum", dtype="<u4", mode="r+", shape=(n,))
                         if n else np.zeros(0, "<u4"))
        except BaseException:
            os.close(self.fd)
            raise
        #: blocks this process fetched, or read back and found to match their ``.sum``.
        self.checked = np.zeros(self.nblocks, bool)
        #: checksum blocks (of rows) found to match the writer's CRC-32 in this process.
        self.rows_ok: set[int] = set()
        #: the writer's CRC-32s ``(block bytes, values, data bytes)``; False: none; None: unread.
        self.writer = None
        if fresh or reset:  # a .data (or .sum) made or resized here holds none of the blocks
            self.state[:] = 0  # .state may list, nor does a .state beside a .json made here
            # count this block size: forgetting costs refetches; keeping them serves zeros

    def close(self) -> None:
        """Close the data descriptor and unmap the states (idempotent)."""
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)
            self.fd = -1
        self.state = np.zeros(0, np.uint8)
        self.sums = np.zeros(0, "<u4")

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
    #: ``(zarr.json bytes, data file size) -> (bytes per checksum block, CRC-32s, data
    #: bytes) | None``: the writer's row checksums, which fills of a v1 array's rows are
    #: checked against (set by the store that opens this cache:
    #: :func:`featurestore.format.integrity.writer_checksums`); None: no such check
    writer_record = None

    def __init__(self, fs: AbstractFileSystem, storage: str,
                 block_bytes: int = CACHE_BLOCK_BYTES, **kwargs):
        super().__init__(**kwargs)
        self.target = fs
        self.storage = os.fspath(storage)
        self.block_bytes = int(block_bytes)
        if not 0 < self.block_bytes <= MAX_BLOCK_BYTES:
            raise InvalidArgumentError(f"Expected cache_block_bytes in [1, {MAX_BLOCK_BYTES}] "
                                       f"for the cache directory {self.storage}. Got "
                                       f"{block_bytes!r} instead.")
        self._makedirs()
        self._entries: dict[str, _Entry] = {}
        self._lock = forksafe.Lock()
        #: paths whose cached size was compared with the remote's in this process.
        self._sized: set[str] = set()
        #: requests sent to the remote, bytes fetched, bytes served, reads served locally only,
        #: cached blocks checked against their CRC-32 and those that failed it (fetched again).
        self.stats = {"requests": 0, "bytes_fetched": 0, "bytes_served": 0, "local_reads": 0,
                      "blocks_checked": 0, "blocks_refetched": 0}

    def _unusable(self, err: OSError) -> CacheDirError:
        """The error for a cache directory this process cannot use (``err`` the cause)."""
        why = err.strerror or str(err)
        return CacheDirError(f"Expected a writable cache directory at {self.storage} (the "
                             f"store's cache_dir). Got {type(err).__name__}: {why} instead"
                             f"{f' ({err.filename})' if err.filename else ''}. Make it "
                             "writable, choose another cache_dir, or open the store without "
                             "one.")

    def _makedirs(self) -> None:
        try:
            os.makedirs(self.storage, exist_ok=True)
        except OSError as e:
            raise self._unusable(e) from e

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
            e = self._entries[path] = self._open_entry(os.path.join(self.storage,
                                                                    _hash(path, 24)), path)
            return e

    def _open_entry(self, base: str, path: str) -> _Entry:
        """Open ``path``'s cache files, making the cache directory again if it was removed;
        a cache directory that cannot be used is a :class:`CacheDirError` naming it (remote
        errors propagate as they are)."""
        size, made_dirs = None, False
        for _ in range(4):
            try:
                got = _meta(self, base, path, size)
                if got is not None:
                    return _Entry(base, path, got[0], got[1], reset=got[2])
            except (FileNotFoundError, NotADirectoryError) as e:  # removed under us
                if made_dirs:
                    raise self._unusable(e) from e
                self._makedirs()
                made_dirs = True
                continue
            except DiskFullError:
                raise
            except OSError as e:
                raise self._unusable(e) from e
            size = int(self.target.info(path)["size"])
        raise CacheDirError(f"Expected to settle the cache metadata {base}.json in "
                            f"{self.storage}. Got it removed again and again instead: keep the "
                            "cache_dir of a running reader in place.")

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
                    out[i] = self._pread(e, b - a, a) if b > a else b""
                    self.stats["bytes_served"] += b - a
        return out

    def _pread(self, e: _Entry, n: int, off: int) -> bytes:
        try:
            return os.pread(e.fd, n, off)
        except OSError as err:
            raise self._unusable(err) from err

    def _filled(self, by_path: dict, starts, ends) -> tuple[dict, dict]:
        """The entries of ``by_path``'s files and the byte bounds asked of each, every block
        of them in the local files. A ``.data`` deleted under us (``st_nlink`` 0) is dropped
        and opened again: its blocks in another process's new file are not in ours."""
        for _ in range(3):
            entries = {p: self._entry(p) for p in by_path}
            if _resized(self, entries, by_path, starts, ends):
                continue
            bounds = {p: self._bounds(entries[p], [starts[i] for i in idx],
                                      [ends[i] for i in idx]) for p, idx in by_path.items()}
            self._fill(bounds, entries)
            stale = [e for e in entries.values() if os.fstat(e.fd).st_nlink == 0]
            if not stale:
                return entries, bounds
            for e in stale:
                self._forget(e)
        raise CacheDirError(f"Expected the cache files of {sorted(by_path)} in {self.storage} "
                            "to stay in place while being read. Got them deleted again and "
                            "again instead: keep the cache_dir of a running reader in place.")

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

    def _fill(self, bounds: dict[str, tuple[np.ndarray, np.ndarray]], entries: dict,
              retry: bool = True) -> None:
        """Fetch every missing block the ranges need, in one remote ``cat_ranges``. Cached
        blocks not yet checked in this process are checked against their CRC-32 first (and
        count as missing when they fail it); blocks of rows completed here are checked
        against the writer's CRC-32 (:meth:`_check_writer`)."""
        req_paths, req_lo, req_hi, marks = [], [], [], []
        for p, (lo, hi) in bounds.items():
            e = entries[p]
            blocks = _blocks_of(lo, hi, e.block_bytes)
            if not blocks.size:
                continue
            _check_cached(self, e, blocks)
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
        first_error, done = None, []
        for (e, a, b), lo, hi, data in zip(marks, req_lo, req_hi, got):
            if isinstance(data, BaseException) or len(data) != hi - lo:
                first_error = first_error or (data if isinstance(data, BaseException) else
                                              OSError(f"short read of {e.path} [{lo}, {hi}): "
                                                      f"{len(data)} bytes"))
                continue
            # the bytes, their CRC-32s, then the mark: never a hole (a full disk is no
            # transport error)
            try:
                pwrite_all(e.fd, data, lo, f"{e.path} in the cache directory {self.storage}",
                           " Free space or choose another cache_dir.")
            except DiskFullError:
                raise
            except OSError as err:
                raise self._unusable(err) from err
            if os.fstat(e.fd).st_nlink == 0:  # our .data was deleted: a new one lacks these
                continue  # bytes, so mark nothing (the caller opens the new one)
            e.sums[a:b] = _block_crcs(data, e.block_bytes)
            e.state[a:b] = 1
            e.checked[a:b] = True
            self.stats["bytes_fetched"] += hi - lo
            done.append((e, a, b))
        if first_error is not None:
            raise first_error
        bad = _check_writer(self, done)
        if not bad:
            return
        redo: dict[str, tuple[list, list]] = {}
        for e, k, lo, hi in bad:
            blk = slice(lo // e.block_bytes, -(-hi // e.block_bytes))
            e.state[blk] = 0
            e.checked[blk] = False
            if not retry:
                raise CorruptStoreError(
                    f"Expected bytes [{lo}, {hi}) of {e.path} (checksum block {k} of its rows) "
                    "to match the CRC-32 its writer recorded in the array's zarr.json. Got "
                    "another CRC-32 instead, fetched twice from the remote: the remote store is "
                    "damaged; run `featurestore verify --data` on it.")
            r = redo.setdefault(e.path, ([], []))
            r[0].append(lo)
            r[1].append(hi)
        log.warning("%s: %d block(s) of rows failed the writer's CRC-32 after a fill; fetching "
                    "them again", self.storage, len(bad))
        self._fill({p: (np.array(a, np.int64), np.array(b, np.int64))
                    for p, (a, b) in redo.items()}, entries, retry=False)

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


def _meta(cfs: RangeCacheFileSystem, base: str, path: str,
          size: int | None) -> tuple[int, int, bool] | None:
    """``(size, block bytes, made)`` of ``path``'s cache files from their ``.json``; made
    (with this reader's block size and the remote ``size``) when missing or damaged, or
    None when it must be made and ``size`` is not known yet. The first ``.json`` written
    wins, so every reader counts the shared ``.state`` in one block size; a made one means
    the ``.state`` beside it may count another's blocks (``made``: reset it)."""
    try:
        with open(base + ".json", "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raw = None
    if raw is not None:
        got = _parse_meta(raw, path)
        if got is not None:
            return got[0], got[1], False
    if size is None:
        return None
    if raw is not None:
        log.warning("%s.json: the cache's record of %s is damaged; making it again and "
                    "fetching its blocks again", base, path)
    return _write_meta(cfs, base, path, size, replace=raw is not None)


def _write_meta(cfs: RangeCacheFileSystem, base: str, path: str, size: int,
                replace: bool) -> tuple[int, int, bool] | None:
    tmp = f"{base}.json.{uuid.uuid4().hex}.tmp"
    meta = {"version": CACHE_FORMAT, "path": path, "size": size,
            "block_bytes": cfs.block_bytes,
            "check": _meta_check(path, size, cfs.block_bytes)}
    try:
        with open(tmp, "w") as f:
            json.dump(meta, f)
        if not replace:
            try:
                os.link(tmp, base + ".json")  # fails if another reader wrote one first
                return size, cfs.block_bytes, True
            except FileExistsError:
                return _meta(cfs, base, path, size)  # read the winner's
            except (FileNotFoundError, NotADirectoryError):
                raise
            except OSError:  # a file system without hard links: last writer wins
                pass
        os.replace(tmp, base + ".json")
        return size, cfs.block_bytes, True
    finally:
        try:
            os.remove(tmp)
        except OSError:
            pass


def _resized(cfs: RangeCacheFileSystem, entries: dict, by_path: dict, starts, ends) -> bool:
    """Whether a read past a cached file's recorded size found the remote file of another
    size (the entry is then made again from the remote's); asked once per file and
    process, so a sound cache costs no request."""
    again = False
    for p, idx in by_path.items():
        e = entries[p]
        if p in cfs._sized or not any(x is not None and x > e.size
                                       for i in idx for x in (starts[i], ends[i])):
            continue
        size = int(cfs.target.info(p)["size"])
        cfs._sized.add(p)
        if size == e.size:
            continue
        log.warning("%s: the cache recorded %d bytes of %s, the remote has %d; making its "
                    "cache files again", cfs.storage, e.size, p, size)
        try:
            _write_meta(cfs, os.path.join(cfs.storage, _hash(p, 24)), p, size, True)
        except (FileNotFoundError, NotADirectoryError):
            pass  # the directory went: the next open makes it (and the .json) again
        except OSError as err:
            raise cfs._unusable(err) from err
        cfs._forget(e)
        again = True
    return again


def _check_cached(cfs: RangeCacheFileSystem, e: _Entry, blocks: np.ndarray) -> None:
    """Check the cached blocks among ``blocks`` that this process did not fetch or check
    yet against their CRC-32 in ``.sum``, reading at most ``MAX_REQUEST_BYTES`` at a time;
    unmark those that fail it (a zeroed or flipped block, a ``.state`` listing blocks never
    written), so they are fetched again."""
    todo = blocks[(e.state[blocks] != 0) & ~e.checked[blocks]]
    if not todo.size:
        return
    bad = []
    for a, b in _runs(todo, max(1, MAX_REQUEST_BYTES // e.block_bytes)):
        lo, hi = a * e.block_bytes, min(e.size, b * e.block_bytes)
        buf = cfs._pread(e, hi - lo, lo)
        ok = (_block_crcs(buf, e.block_bytes) == e.sums[a:b] if len(buf) == hi - lo else
              np.zeros(b - a, bool))
        e.checked[a:b] = ok
        bad.extend((np.arange(a, b)[~ok]).tolist())
    cfs.stats["blocks_checked"] += int(todo.size)
    if bad:
        log.warning("%s: %d cached block(s) of %s fail their CRC-32; fetching them again",
                    cfs.storage, len(bad), e.path)
        e.state[bad] = 0
        cfs.stats["blocks_refetched"] += len(bad)


def _check_writer(cfs: RangeCacheFileSystem,
                  done: list) -> list[tuple[_Entry, int, int, int]]:
    """Check each block of rows that the fills ``done`` (``(entry, first, end block)``)
    completed in the cache against the CRC-32 its writer recorded; returns the failures
    ``(entry, checksum block, lo, hi)``."""
    bad = []
    for e, a, b in done:
        w = _writer_sums(cfs, e)
        if w is None:
            continue
        cb, values, nbytes = w
        lo, hi = a * e.block_bytes, min(b * e.block_bytes, nbytes)
        for k in range(lo // cb, (hi - 1) // cb + 1) if lo < hi else ():
            if k in e.rows_ok:
                continue
            rlo, rhi = k * cb, min((k + 1) * cb, nbytes)
            blk = slice(rlo // e.block_bytes, -(-rhi // e.block_bytes))
            if not e.state[blk].all():
                continue  # not all in the cache yet: checked when it is
            if _crc_of(cfs, e, rlo, rhi) == values[k]:
                e.rows_ok.add(k)
                e.checked[blk] = True
            elif all(x[:2] != (e, k) for x in bad):
                bad.append((e, k, rlo, rhi))
    return bad


def _crc_of(cfs: RangeCacheFileSystem, e: _Entry, lo: int, hi: int) -> int | None:
    """CRC-32 of bytes ``[lo, hi)`` of the local copy, read in bounded pieces (None when
    the file is shorter)."""
    crc = 0
    for off in range(lo, hi, MAX_REQUEST_BYTES):
        n = min(MAX_REQUEST_BYTES, hi - off)
        buf = cfs._pread(e, n, off)
        if len(buf) != n:
            return None
        crc = zlib.crc32(buf, crc)
    return crc


def _writer_sums(cfs: RangeCacheFileSystem,
                 e: _Entry) -> tuple[int, list[int], int] | None:
    """The writer's CRC-32s of ``e``'s rows, ``(bytes per checksum block, values, data
    bytes)``, from its array's ``zarr.json`` (read once, when a fill first completes a
    block of rows); None for a file that has none (compressed, or not a v1 shard)."""
    if e.writer is None:
        head, sep, tail = e.path.rpartition("/c/")
        if cfs.writer_record is None or not sep or set(tail.split("/")) != {"0"}:
            e.writer = False
            return None
        try:
            raw = cfs.target.cat_file(f"{head}/zarr.json")
        except Exception as err:  # noqa: BLE001 - the data read reports the remote's state
            log.debug("%s: no writer checksums (%s)", e.path, err)
            return None  # asked again at the next completed block
        e.writer = cfs.writer_record(raw, e.size) or False
    return e.writer or None


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
