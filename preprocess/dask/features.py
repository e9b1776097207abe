"""Feature chunking as Dask tasks: row blocks read, cast, permuted and written by workers.

The rows of a feature matrix are cut into the store's checksum blocks (``block_rows`` rows,
whole inner chunks, about 64 MiB). Each Dask task takes one block: it reads its source rows
(``perm[lo:hi]`` of a permutation, or ``lo:hi``) from the memory-mapped ``.npy`` (or by byte
range from a ``.npy`` on an fsspec URL, :mod:`preprocess.sources.remote`), casts them
in sub-blocks that fit the memory budget, writes them with ``os.pwrite`` at their byte offset
and returns the block's CRC-32. Blocks never share a byte, so the tasks run in any order on
any worker. For a local store the tasks write into the array's preallocated shard file
(:class:`featurestore.format.rowfile.RowFile`) and the driver records the CRCs it gathered; for a
remote store they write a raw scratch file (which must be on storage the workers share) and
the driver streams it into the store. Either way the store equals the single-process one
byte for byte (same rows, same padding and index, same checksums).

Sources a worker cannot reopen by name (an in-memory array, parquet columns) are written in
the driver as without Dask.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import time
import zlib
from dataclasses import dataclass

import numpy as np

from featurestore.fileio import disk_full_as_error, pwrite_all
from featurestore.format.rowfile import open_row_file

from preprocess.errors import PreprocessError
from preprocess.progress import bar
from preprocess.sources.remote import RemoteArray
from preprocess.steps.cast import cast_block
from preprocess.steps.memory import PeakMemory

__all__ = ["dask_feature_source", "write_features_dask", "MappedArray"]

log = logging.getLogger(__name__)

#: Dask key prefix of the feature tasks (tests count them).
TASK_PREFIX = "feature-rows"
#: output bytes per task for a remote store (a local one uses its checksum blocks).
REMOTE_TASK_BYTES = 64 << 20


@dataclass(frozen=True)
class MappedArray:
    """A memory-mapped array by file name (what a worker needs to map it itself)."""

    filename: str
    offset: int
    dtype: str
    shape: tuple

    @classmethod
    def of(cls, arr) -> MappedArray | None:
        """The file behind ``arr`` (a read-only ``np.memmap`` of a whole file), or None."""
        if not isinstance(arr, np.memmap) or arr.filename is None:
            return None
        if not isinstance(arr.base, mmap.mmap) or not arr.flags.c_contiguous:
            return None  # a slice keeps its parent's offset; Fortran order maps differently
        if arr.flags.writeable:
            arr.flush()  # rows the driver wrote, on disk for workers on other machines
        return cls(os.fspath(arr.filename), int(arr.offset), arr.dtype.str, tuple(arr.shape))

    def open(self) -> np.ndarray:
        """Map the array (read only)."""
        if not self.shape[0]:
            return np.empty(self.shape, self.dtype)
        return np.memmap(self.filename, dtype=np.dtype(self.dtype), mode="r",
                         offset=self.offset, shape=self.shape)


@dataclass(frozen=True)
class _RowsTask:
    """What every feature task shares (pickled once per task: names and numbers only)."""

    name: str
    source: MappedArray | RemoteArray
    perm: MappedArray | None
    out_path: str
    out_dtype: str
    num_rows: int
    row_bytes: int
    block_rows: int
    sub_rows: int


def _fill(task: _RowsTask, fd: int, lo: int, hi: int, src, perm, state: dict,
          crc: int) -> int:
    """Rows ``[lo, hi)`` cast and written at their offset; returns ``crc`` carried over them."""
    dtype = np.dtype(task.out_dtype)
    if perm is None:
        rows = np.asarray(src[lo:hi])
    elif isinstance(src, RemoteArray):  # fetched as merged byte ranges
        rows = src.take_rows(np.asarray(perm[lo:hi], dtype=np.int64))
    else:
        rows = np.take(src, np.asarray(perm[lo:hi], dtype=np.int64), axis=0)
    out = np.ascontiguousarray(cast_block(rows, dtype.newbyteorder("="), task.name, state),
                               dtype=dtype)
    mv = memoryview(out).cast("B")
    pwrite_all(fd, mv, lo * task.row_bytes, f"the rows of {task.name}")
    state["bytes_read"] = state.get("bytes_read", 0) + rows.nbytes
    return zlib.crc32(mv, crc)


def _rows_task(task: _RowsTask, block: int) -> dict:
    """Checksum block ``block`` of the output: read, cast, written; its CRC-32 and counts."""
    lo = block * task.block_rows
    hi = min(task.num_rows, lo + task.block_rows)
    src = task.source.open()
    perm = task.perm.open() if task.perm is not None else None
    state: dict = {}
    crc = 0
    fd = os.open(task.out_path, os.O_WRONLY)
    try:
        for a in range(lo, hi, task.sub_rows):
            crc = _fill(task, fd, a, min(hi, a + task.sub_rows), src, perm, state, crc)
    finally:
        os.close(fd)
    return {"block": block, "crc": crc, "overflow": state.get("overflow", 0),
            "bytes_read": state.get("bytes_read", 0)}


def dask_feature_source(source, perm) -> tuple[MappedArray | RemoteArray | None,
                                               MappedArray | None, str]:
    """(source file, perm file, why not) for a Dask feature write; a reason when not possible.

    The source is a memory-mapped ``.npy`` (reopened by name) or a ``.npy`` on an fsspec URL
    (its header: the tasks fetch their rows by byte range)."""
    arr = source.array()
    src = MappedArray.of(arr) if arr is not None else getattr(source, "remote", None)
    if src is None:
        return None, None, "the source is not a memory-mapped .npy (workers reopen it by name)"
    if perm is None:
        return src, None, ""
    p = MappedArray.of(perm)
    if p is None:
        return src, None, "the row permutation is not a file the workers can map"
    return src, p, ""


def _target(writer, ntype, name, out_dtype, row_shape, n, row_bytes, scratch):
    """(RowFile or None, path the tasks write, rows per task) for a local or remote store."""
    if writer.loc.is_local:
        rf = open_row_file(writer, ntype, name, out_dtype, row_shape)
        return rf, rf.path, rf.block_rows
    if scratch is None:
        raise PreprocessError(
            f"Expected a shared scratch directory for the Dask feature tasks of {writer.url} "
            "(a remote store). Pass --scratch DIR (scratch_dir=) on storage every worker sees.")
    os.makedirs(scratch, exist_ok=True)
    # a name of its own: ``scratch`` may be a caller's directory, whose files are not ours
    path = os.path.join(scratch, f"features-{ntype}-{name}-{os.urandom(6).hex()}.bin")
    with disk_full_as_error(path), open(path, "xb") as f:
        f.truncate(max(1, n * row_bytes))
    return None, path, max(1, REMOTE_TASK_BYTES // max(row_bytes, 1))


def write_features_dask(client, writer, ntype: str, name: str, source, *, src: MappedArray,
                        perm: MappedArray | None, dtype=None, budget_bytes: int = 1 << 30,
                        scratch: str | None = None, progress: bool = True) -> dict:
    """:func:`~preprocess.steps.features.write_features` with the row blocks as Dask tasks.

    ``src`` and ``perm`` are what :func:`dask_feature_source` found. Returns the statistics
    of :func:`~preprocess.steps.features.write_features` plus ``tasks``.
    """
    from distributed import as_completed

    t0 = time.perf_counter()
    n = source.num_rows
    out_dtype = np.dtype(dtype if dtype is not None else source.dtype)
    out_row = int(np.prod(source.row_shape, dtype=np.int64)) * out_dtype.itemsize
    rf, path, block_rows = _target(writer, ntype, name, out_dtype, source.row_shape, n,
                                   out_row, scratch)
    task = _RowsTask(source.name, src, perm, path, out_dtype.newbyteorder("<").str, n, out_row,
                     block_rows, max(1, int(budget_bytes // 4 // max(source.row_bytes + out_row,
                                                                     1))))
    nb = -(-n // block_rows) if n else 0
    crcs, got = [0] * nb, {"overflow": 0, "bytes_read": 0}
    tag = os.urandom(4).hex()
    with PeakMemory() as mem, bar(n, f"{ntype}/{name} (dask)", progress, unit="row") as pb:
        futures = [client.submit(_rows_task, task, b, key=f"{TASK_PREFIX}-{tag}-{b}",
                                 pure=False) for b in range(nb)]
        try:
            for fut in as_completed(futures):
                r = fut.result()
                crcs[r["block"]] = r["crc"]
                for k in got:
                    got[k] += r[k]
                pb.update(min(block_rows, n - r["block"] * block_rows))
        except BaseException:
            client.cancel(futures)
            if rf is not None:
                rf.abort()
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            raise
        if rf is not None:
            rf.commit(crcs)
        else:
            _stream_scratch(writer, ntype, name, path, out_dtype, source.row_shape, n)
    dt = time.perf_counter() - t0
    if got["overflow"]:
        log.warning("%s: %d values overflowed to inf when cast to %s", source.name,
                    got["overflow"], out_dtype)
    return {"seconds": round(dt, 3), "rows": n, "bytes_read": got["bytes_read"],
            "bytes_written": n * out_row, "rows_per_s": n / dt if dt else 0.0,
            "gb_per_s": got["bytes_read"] / dt / 1e9 if dt else 0.0,
            "peak_anon_bytes": mem.peak, "overflow": got["overflow"], "tasks": nb}


def _stream_scratch(writer, ntype, name, path, dtype, row_shape, n) -> None:
    """The raw rows the tasks left in ``path`` into a (remote) store, then the file removed."""
    try:
        arr = (np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r", shape=(n,) + row_shape)
               if n else np.empty((0,) + row_shape, dtype))
        writer.add_features(ntype, name, arr, dtype=dtype, row_shape=row_shape)
        del arr
    finally:
        os.remove(path)
