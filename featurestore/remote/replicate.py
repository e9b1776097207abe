"""``featurestore replicate URL LOCAL``: copy a (remote) store to a local directory.

The copy is parallel (a thread pool over the files and over byte ranges of the large shard
files), resumable and verified:

* The source must be a complete store (``IncompleteStoreError`` otherwise). The files to copy
  are derived from its metadata (every array's ``zarr.json`` and shard files, the group
  ``zarr.json`` files above them); each one must be there with the size its metadata implies.
* The target is a new or empty directory, a replica this function left unfinished, or (with
  ``force=True``) a store of this package; anything else is never touched (the writer's rule).
  Until the copy is whole its root ``zarr.json`` says ``complete: false``, so readers refuse a
  half replica; ``.preprocess/replicate.json`` names the source and its generation.
* Each file is written to ``<name>.replica-partial`` in parts (each part recorded once on disk,
  so a rerun resumes inside a large file), checked, then renamed into place: its size;
  for an uncompressed (v1) shard the CRC-32 of every block of rows against the checksums the
  writer recorded and the shard index byte for byte; for a compressed shard its index crc32c.
  A rerun skips the files already in place (with ``recheck``, those that pass the same checks
  again) and copies the rest; a finished replica of the same generation is left untouched.
* Every read of a remote source goes through the readers' retries
  (:func:`~featurestore.remote.retry.retry_remote`): a reset, a short body, a 500 or a read
  timeout is retried, then raised as a ``RemoteStoreError`` naming the URL and the file.
* At the end the source's root ``zarr.json`` is written unchanged (the replica is the source byte
  for byte) after checking that the source was not rewritten meanwhile, and the replica is
  verified (``featurestore verify``: sizes, shard indexes, topology).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import google_crc32c
import numpy as np

from featurestore.errors import (
    CorruptStoreError,
    IncompleteStoreError,
    InvalidArgumentError,
    NotAStoreError,
    SchemaError,
    StoreChangedError,
    StoreExistsError,
    StoreNotFoundError,
    UnsafePathError,
)
from featurestore.fileio import pwrite_all
from featurestore.format import names as fmt
from featurestore.format.integrity import CHECKSUM_ALGORITHM, CHECKSUM_ATTR, file_checksums
from featurestore.format.schema import parse_root
from featurestore.format.shard import ShardLayout
from featurestore.remote.location import Location
from featurestore.remote.lock import LOCK_NAME, WriteLock
from featurestore.remote.retry import is_transport_error, retry_remote
from featurestore.writer import _inspect, _remove_store_files

__all__ = ["replicate", "ReplicateReport", "MANIFEST"]

log = logging.getLogger(__name__)

#: the replica's manifest (inside the jobs' scratch directory, which replacing a store removes).
MANIFEST = ".preprocess/replicate.json"
#: suffix of a file being copied.
PARTIAL = ".replica-partial"
#: default bytes per copy task (a large file is copied as several ranges at once).
PART_BYTES = 32 << 20


@dataclass(frozen=True)
class SourceFile:
    """One file of the source store: path relative to the root, size, and its array's
    metadata when it is a shard file (for the checks after the copy)."""

    rel: str
    size: int
    array_meta: dict | None = None


@dataclass
class ReplicateReport:
    """What :func:`replicate` did: files and bytes copied or found in place, time taken;
    ``up_to_date`` when the target already was a finished replica (nothing written)."""

    source: str
    target: str
    generation: str | None
    files_total: int = 0
    files_copied: int = 0
    files_skipped: int = 0
    bytes_total: int = 0
    bytes_copied: int = 0
    bytes_resumed: int = 0
    blocks_checked: int = 0
    up_to_date: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """The report as a JSON-ready dict."""
        return dict(self.__dict__)


def replicate(url, local, *, storage_options: dict | None = None, threads: int = 8,
              part_bytes: int = PART_BYTES, force: bool = False, recheck: bool = False,
              progress: bool | None = None) -> ReplicateReport:
    """Copy the store at ``url`` (any fsspec URL or a local path) to the directory ``local``.

    Parameters
    ----------
    url
        The source store; it must be complete.
    local
        A local directory: new, empty, an unfinished replica (the copy resumes) or, with
        ``force``, a store of this package (replaced; only its own files are removed).
    storage_options
        fsspec options of the source (``endpoint_url``, keys, ...).
    threads
        Copy tasks in flight (s3fs/aiobotocore pool 10 connections unless
        ``config_kwargs={"max_pool_connections": N}`` says more).
    part_bytes
        Bytes per copy task; larger files are split into ranges copied concurrently.
    force
        Replace a store of this package that is not a replica of this source's generation.
    recheck
        Check the files already in place (a rerun) as fresh copies are checked and copy the
        ones that fail again. By default their sizes are trusted: each was checked and
        synced to disk before it got its final name.
    progress
        A tqdm bar over the bytes (``None``: only on a terminal).

    Returns
    -------
    ReplicateReport
        Counts of files and bytes copied and found in place.
    """
    for name, v in (("threads", threads), ("part_bytes", part_bytes)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InvalidArgumentError(f"Expected {name} as an integer >= 1. Got {v!r} "
                                       f"instead.")
    t0 = time.perf_counter()
    src = Location(url, storage_options)
    dst = Location(local)
    if not dst.is_local:
        raise NotAStoreError(f"Expected a local directory to replicate {src.url} into. "
                             f"Got {dst.url} instead.")
    root_raw, attrs, files = plan_source(src)
    gen = attrs.get("generation")
    rep = ReplicateReport(src.url, dst.url, gen, files_total=len(files),
                          bytes_total=sum(f.size for f in files))
    _prepare_dir(dst, src.url)
    lock = WriteLock(dst).acquire()
    try:
        if _up_to_date(dst, root_raw, files, recheck):
            rep.files_skipped, rep.up_to_date = len(files), True
            log.info("replicate %s -> %s: up to date", src.url, dst.url)
            rep.seconds = time.perf_counter() - t0
            return rep
        done = _prepare_target(dst, src.url, gen, attrs, files, force, recheck)
        todo = [f for f in files if f.rel not in done]
        rep.files_skipped = len(files) - len(todo)
        log.info("replicate %s -> %s: %d of %d files to copy (%d in place)", src.url, dst.url,
                 len(todo), len(files), rep.files_skipped)
        _copy_all(src, dst, todo, rep, threads=threads, part_bytes=part_bytes,
                  progress=progress)
        _commit(src, dst, root_raw, rep)
    finally:
        lock.release()
    rep.seconds = time.perf_counter() - t0
    return rep


# -- the source -------------------------------------------------------------------------
def _read(src: Location, read, rel: str):
    """``read()`` of file ``rel`` of the source, retried after a transport error and then
    raised as a ``RemoteStoreError`` naming the source's URL and ``rel``."""
    return retry_remote(read, None if src.is_local else src.url, rel)


def plan_source(src: Location) -> tuple[bytes, dict, list[SourceFile]]:
    """The source's root ``zarr.json`` (bytes and attributes) and its files with their sizes.

    Raises ``StoreNotFoundError``, ``NotAStoreError`` or ``IncompleteStoreError`` unless the
    source is a complete store with every file its metadata names, at the size it implies.
    """
    try:
        root_raw = _read(src, lambda: src.fs.cat_file(src.path("zarr.json")), "zarr.json")
    except FileNotFoundError as e:
        what = "Nothing is there" if not src.exists() else "It has no zarr.json"
        raise StoreNotFoundError(f"Expected a feature store to replicate at {src.url}. "
                                 f"{what}.") from e
    try:
        attrs = json.loads(root_raw).get("attributes", {})
    except (ValueError, AttributeError) as e:
        raise NotAStoreError(f"Expected JSON in {src.path('zarr.json')}: {e}") from e
    if not isinstance(attrs, dict) or attrs.get("format") != fmt.FORMAT_NAME:
        raise NotAStoreError(f"Expected a store of format {fmt.FORMAT_NAME!r} at {src.url}.")
    if attrs.get("complete") is not True:
        raise IncompleteStoreError(
            f"The store at {src.url} is incomplete (its writer never committed); it cannot be "
            "replicated. Finish the job that writes it first.")
    parse_root(root_raw, src.url, src.path("zarr.json"))  # the reader's rules: names, types
    keys = list(attrs.get("arrays") or [])
    for k in keys:
        _check_key(k, src.path("zarr.json"))
    metas = _cat_all(src, [f"{k}/zarr.json" for k in keys])
    files: list[SourceFile] = []
    groups: set[str] = set()
    for k in keys:
        meta = metas[f"{k}/zarr.json"]
        files.append(SourceFile(f"{k}/zarr.json", len(meta)))
        files += _array_files(src, k, json.loads(meta))
        parts = k.split("/")
        groups.update("/".join(parts[:i]) for i in range(1, len(parts)))
    sizes = _sizes(src, [f"{g}/zarr.json" for g in sorted(groups)], required=False)
    files += [SourceFile(rel, n) for rel, n in sizes.items()]
    return root_raw, attrs, files


def _check_key(key, file: str) -> None:
    """Refuse an array key that would reach outside the store: every part a non-empty name
    without a leading ``.``, separators or control characters (as ``open_store`` refuses it),
    before a byte is written."""
    if not isinstance(key, str) or not key:
        raise CorruptStoreError(f"{file}: expected array keys as non-empty strings. Got "
                                f"{key!r} instead.")
    for part in key.split("/"):
        try:
            fmt.check_name("array key part", part)
        except UnsafePathError as e:
            raise UnsafePathError(f"{file}: array key {key!r}: {e} Refusing to replicate: it "
                                  "would write outside the target directory.") from e
        except SchemaError as e:
            if not part:
                raise UnsafePathError(f"{file}: array key {key!r} has an empty part. Refusing "
                                      "to replicate it.") from e


def _cat_all(src: Location, rels: list[str]) -> dict[str, bytes]:
    """Bytes of small files, fetched concurrently (those failing with a transport error again,
    one by one, with retries); a missing one makes the source incomplete."""
    paths = [src.path(r) for r in rels]
    got = src.fs.cat(paths, on_error="return") if paths else {}
    out = {}
    for r, p in zip(rels, paths):
        v = got.get(p)
        if isinstance(v, Exception) and is_transport_error(v):
            try:
                v = _read(src, lambda p=p: src.fs.cat_file(p), r)
            except FileNotFoundError as e:
                v = e
        if not isinstance(v, bytes):
            raise IncompleteStoreError(f"Expected {p} in {src.url} (its root zarr.json lists "
                                       f"the array). It cannot be read: {v!r}.")
        out[r] = v
    return out


def _array_files(src: Location, key: str, meta: dict) -> list[SourceFile]:
    """The chunk (shard) files of array ``key``, checked for presence and size."""
    shape = meta.get("shape") or []
    if any(s == 0 for s in shape):
        return []
    layout = ShardLayout.from_metadata(meta)
    if layout is not None:
        rel = f"{key}/{layout.chunk_key()}"
        size = _sizes(src, [rel], required=True)[rel]
        if size != layout.file_bytes:
            raise IncompleteStoreError(f"Expected {layout.file_bytes} bytes in "
                                       f"{src.path(rel)}. Found {size} (truncated?).")
        return [SourceFile(rel, size, meta)]
    grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
    counts = [-(-s // c) for s, c in zip(shape, grid)]
    rels = [f"{key}/c/" + "/".join(map(str, i)) for i in np.ndindex(*counts)]
    sizes = _sizes(src, rels, required=True)
    return [SourceFile(r, sizes[r], meta) for r in rels]


def _sizes(src: Location, rels: list[str], *, required: bool) -> dict[str, int]:
    """Sizes of files relative to the root (``info`` per file, concurrently)."""
    def one(rel):
        try:
            return rel, int(_read(src, lambda: src.fs.info(src.path(rel)), rel)["size"])
        except FileNotFoundError:
            if required:
                raise IncompleteStoreError(f"Expected {src.path(rel)} in {src.url} (its "
                                           "metadata names it). It is missing.") from None
            return rel, None

    if len(rels) <= 1:
        got = [one(r) for r in rels]
    else:
        with ThreadPoolExecutor(min(16, len(rels)), thread_name_prefix="fs-info") as pool:
            got = list(pool.map(one, rels))
    return {r: n for r, n in got if n is not None}


# -- the target -------------------------------------------------------------------------
def _prepare_dir(dst: Location, src_url: str) -> None:
    """Refuse a target that is a file or holds files this package did not write; create it."""
    state = _inspect(dst)
    if state == "file":
        raise StoreExistsError(f"Expected a directory to replicate {src_url} into. {dst.url} is "
                               "a file; nothing was removed.")
    if state == "scratch" and _manifest(dst) is None:
        raise StoreExistsError(f"Expected no other job at {dst.url}: its .preprocess "
                               "directory holds another job's files; nothing was removed.")
    if state == "other" and not _is_replica(dst):
        raise StoreExistsError(
            f"Expected an empty or new directory, a store of this package or an unfinished "
            f"replica at {dst.url}. It holds other files; nothing was removed. Choose another "
            "path.")
    os.makedirs(dst.root, exist_ok=True)


def _is_replica(dst: Location) -> bool:
    """An unfinished replica: our manifest, and nothing beside the store's own entries."""
    if not os.path.isfile(dst.path(MANIFEST)):
        return False
    names = set(os.listdir(dst.root)) - {LOCK_NAME}
    return all(n in fmt.STORE_ENTRIES or n.startswith("zarr.json.") for n in names)


def _up_to_date(dst: Location, root_raw: bytes, files: list[SourceFile], recheck: bool) -> bool:
    """A finished replica of this generation: the source's root byte for byte and every file
    in place (nothing is written then)."""
    try:
        with open(dst.path("zarr.json"), "rb") as f:
            if f.read() != root_raw:
                return False
    except OSError:
        return False
    return len(_in_place(dst, files, recheck)) == len(files)


def _manifest(dst: Location) -> dict | None:
    try:
        with open(dst.path(MANIFEST), "rb") as f:
            got = json.load(f)
        return got if isinstance(got, dict) else None
    except (FileNotFoundError, ValueError):
        return None


def _prepare_target(dst: Location, src_url: str, gen, attrs: dict, files: list[SourceFile],
                    force: bool, recheck: bool) -> set[str]:
    """Make ``dst`` an unfinished replica of this source's generation; return the files
    already in place (right size) that need no copy."""
    man = _manifest(dst)
    state = _inspect(dst)
    # a source without a generation (written before generations) cannot tell a rewrite from
    # itself: its replica starts over rather than trust files copied from an older version
    ours = (man is not None and man.get("source") == src_url and man.get("generation") == gen
            and gen is not None)
    if state == "store" and not ours:
        try:
            cur = dst.read_json("zarr.json").get("attributes", {})
        except (ValueError, OSError):
            cur = {}
        same = cur.get("complete") is True and cur.get("generation") == gen and gen is not None
        if not same and man is None and not force:
            raise StoreExistsError(
                f"Expected a new directory or a replica of {src_url} at {dst.url}. A store of "
                f"generation {cur.get('generation')!r} is there (the source is {gen!r}); pass "
                "force=True (--force) to replace it.")
        ours = same
    if not ours and (state == "store" or _is_replica(dst)):
        _remove_store_files(dst)  # ours to remove: a store of this package or our own replica
    os.makedirs(os.path.dirname(dst.path(MANIFEST)), exist_ok=True)
    dst.write_json_atomic(MANIFEST, {"source": src_url, "generation": gen,
                                     "started": time.time()})
    partial = {**attrs, "complete": False}
    dst.write_json_atomic("zarr.json", {"zarr_format": 3, "node_type": "group",
                                        "attributes": partial})
    return _in_place(dst, files, recheck)


def _in_place(dst: Location, files: list[SourceFile], recheck: bool) -> set[str]:
    """Files already at their final name with the expected size (and, with ``recheck``,
    passing :func:`check_copy`: a local file damaged since is copied again)."""
    def ok(f: SourceFile) -> bool:
        try:
            if os.path.getsize(dst.path(f.rel)) != f.size:
                return False
            if recheck:
                check_copy(dst.path(f.rel), f)
            return True
        except OSError as e:  # CorruptStoreError is an OSError too
            if recheck and os.path.exists(dst.path(f.rel)):
                log.warning("copying %s again: %s", f.rel, e)
            return False

    with ThreadPoolExecutor(4, thread_name_prefix="fs-recheck") as pool:
        found = list(pool.map(ok, files))
    return {f.rel for f, good in zip(files, found) if good}


# -- copying ----------------------------------------------------------------------------
class _FileCopy:
    """A file being copied: its temporary file, the parts still to write, and a record of
    the parts written (``<tmp>.parts``: a JSON header, then one start offset per line, each
    appended after its bytes reached the disk), so a rerun resumes inside a large file."""

    def __init__(self, dst: Location, f: SourceFile, part_bytes: int):
        self.f = f
        self.path = dst.path(f.rel)
        self.tmp = self.path + PARTIAL
        self.record = self.tmp + ".parts"
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        header = json.dumps({"size": f.size, "part_bytes": part_bytes})
        done = self._done_parts(header)
        if done is None:  # a fresh copy of this file
            done = set()
            self.fd = os.open(self.tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.ftruncate(self.fd, f.size)
            with open(self.record, "w") as r:
                r.write(header + "\n")
        else:
            self.fd = os.open(self.tmp, os.O_RDWR)
        self.rfd = os.open(self.record, os.O_WRONLY | os.O_APPEND)
        every = [(lo, min(f.size, lo + part_bytes)) for lo in range(0, f.size, part_bytes)]
        self.parts = [p for p in every if p[0] not in done]
        self.resumed = sum(hi - lo for lo, hi in every if lo in done)
        self.left = len(self.parts) or 1
        self.lock = threading.Lock()

    def _done_parts(self, header: str) -> set[int] | None:
        """Parts a previous run wrote, or None when there is nothing to resume."""
        try:
            if os.path.getsize(self.tmp) != self.f.size:
                return None
            with open(self.record) as r:
                lines = r.read().split("\n")
        except OSError:
            return None
        if lines[0] != header:
            return None
        return {int(x) for x in lines[1:-1] if x.isdigit()}  # the last may be torn

    def wrote(self, lo: int) -> None:
        """Record part ``lo`` as written, once its bytes are on disk."""
        os.fdatasync(self.fd)
        os.write(self.rfd, f"{lo}\n".encode())

    def part_done(self) -> bool:
        """Count one part written; True for the last one."""
        with self.lock:
            self.left -= 1
            return self.left == 0

    def close(self) -> None:
        """Close the descriptors (idempotent)."""
        for name in ("fd", "rfd"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)


def copy_part(src: Location, c: _FileCopy, lo: int, hi: int) -> int:
    """Copy bytes ``[lo, hi)`` of one file into its temporary file; return the bytes."""
    data = _read(src, lambda: src.fs.cat_file(src.path(c.f.rel), start=lo, end=hi), c.f.rel)
    if len(data) != hi - lo:
        raise CorruptStoreError(f"Expected {hi - lo} bytes at offset {lo} of "
                                f"{src.path(c.f.rel)}. Got {len(data)} (short read).")
    pwrite_all(c.fd, data, lo, f"the replica of {c.f.rel}")
    c.wrote(lo)
    return len(data)


def _copy_all(src: Location, dst: Location, todo: list[SourceFile], rep: ReplicateReport, *,
              threads: int, part_bytes: int, progress: bool | None) -> None:
    """Copy ``todo`` with ``threads`` range copies in flight, largest files first."""
    from tqdm.auto import tqdm

    copies: list[_FileCopy] = []
    bar = None
    pool = ThreadPoolExecutor(max(1, int(threads)), thread_name_prefix="fs-replicate")
    failed = threading.Event()

    def task(c: _FileCopy, lo: int, hi: int) -> None:
        if failed.is_set():  # after a failure no part starts (each would wait its timeouts)
            return
        try:
            if hi > lo:
                bar.update(copy_part(src, c, lo, hi))
            if c.part_done():
                finish_file(c, rep)
        except BaseException:
            failed.set()
            raise

    try:
        for f in sorted(todo, key=lambda f: -f.size):
            copies.append(_FileCopy(dst, f, part_bytes))
        bar = tqdm(total=sum(hi - lo for c in copies for lo, hi in c.parts), unit="B",
                   unit_scale=True, unit_divisor=1024, desc="replicate",
                   disable=(not progress) if progress is not None else None)
        futures = [pool.submit(task, c, lo, hi) for c in copies for lo, hi in
                   (c.parts or [(0, 0)])]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for fut in finished:
            fut.result()  # the first failure, with its cause
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()
        for c in copies:
            c.close()


def finish_file(c: _FileCopy, rep: ReplicateReport) -> None:
    """Check a fully written file, then rename it into place (atomically)."""
    os.fsync(c.fd)
    c.close()
    try:
        size = os.path.getsize(c.tmp)
        if size != c.f.size:
            raise CorruptStoreError(f"Expected {c.f.size} bytes in {c.tmp}. Found {size}.")
        blocks = check_copy(c.tmp, c.f)
    except CorruptStoreError:
        for p in (c.tmp, c.record):  # a rerun copies this file from the start
            os.remove(p)
        raise
    os.replace(c.tmp, c.path)
    os.remove(c.record)
    with c.lock:
        rep.files_copied += 1
        rep.bytes_copied += c.f.size - c.resumed
        rep.bytes_resumed += c.resumed
        rep.blocks_checked += blocks


def check_copy(path: str, f: SourceFile) -> int:
    """Check a copied file against its store's metadata; return the CRC-32 blocks checked.

    JSON files must parse; a v1 shard must hold the writer's CRC-32 of every block of rows and
    the v1 shard index; a compressed shard's index must pass its crc32c.
    """
    if f.array_meta is None:
        with open(path, "rb") as fh:
            try:
                json.load(fh)
            except ValueError as e:
                raise CorruptStoreError(f"{path}: the copy is not JSON ({e}).") from e
        return 0
    layout = ShardLayout.from_metadata(f.array_meta)
    if layout is None:
        _check_compressed_index(path, f)
        return 0
    with open(path, "rb") as fh:
        fh.seek(layout.data_bytes)
        if fh.read() != layout.index_blob():
            raise CorruptStoreError(f"{path}: the copied shard index is not the v1 layout.")
    rec = (f.array_meta.get("attributes") or {}).get(CHECKSUM_ATTR)
    if not rec or rec.get("algorithm") != CHECKSUM_ALGORITHM:
        return 0
    n, rb = layout.shape[0], layout.row_bytes
    got = file_checksums(path, n * rb, int(rec["block_rows"]) * rb, threads=2)
    bad = [k for k, (a, b) in enumerate(zip(rec["values"], got)) if a != b]
    if bad or len(got) != len(rec["values"]):
        raise CorruptStoreError(f"{path}: {len(bad)} block(s) of the copy fail the CRC-32 "
                                f"recorded at write time (first: block {bad[:1]}).")
    return len(got)


def _check_compressed_index(path: str, f: SourceFile) -> None:
    conf = f.array_meta["codecs"][0].get("configuration") or {}
    outer = f.array_meta["chunk_grid"]["configuration"]["chunk_shape"]
    inner = conf.get("chunk_shape") or outer
    n_inner = int(np.prod([o // i for o, i in zip(outer, inner)]))
    nbytes = 16 * n_inner + 4
    if [c.get("name") for c in conf.get("index_codecs", [])] != ["bytes", "crc32c"]:
        return
    with open(path, "rb") as fh:
        fh.seek(max(0, f.size - nbytes))
        blob = fh.read()
    if len(blob) != nbytes or google_crc32c.value(blob[:-4]) != int.from_bytes(blob[-4:],
                                                                              "little"):
        raise CorruptStoreError(f"{path}: the copied shard index fails its crc32c.")


def _commit(src: Location, dst: Location, root_raw: bytes, rep: ReplicateReport) -> None:
    """Write the source's root unchanged if the source is still that generation, drop the
    manifest, verify the replica's structure."""
    from featurestore.verify import verify_report

    now = _read(src, lambda: src.fs.cat_file(src.path("zarr.json")), "zarr.json")
    if now != root_raw:
        raise StoreChangedError(f"The store {src.url} was rewritten while it was being "
                                f"replicated to {dst.url}. Run replicate again.")
    dst.write_bytes_atomic("zarr.json", root_raw)
    os.remove(dst.path(MANIFEST))
    try:
        os.rmdir(os.path.dirname(dst.path(MANIFEST)))
    except OSError:
        pass
    found = verify_report(dst.root, data=False)
    rep.notes += found.notes
    if found.problems:
        raw = json.loads(root_raw)
        raw["attributes"]["complete"] = False
        dst.write_json_atomic("zarr.json", raw)
        raise CorruptStoreError(f"The replica {dst.url} fails verification: "
                                + "; ".join(found.problems[:5]))
