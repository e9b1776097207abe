"""Rows of a remote uncompressed v1 array, fetched as byte ranges (:class:`RangeRows`).

In the v1 layout (``docs/format.md``) row ``r`` of an uncompressed array starts at byte
``r * row_bytes`` of its shard file, so a remote gather needs no chunk: it sorts and
deduplicates the ids, turns runs of consecutive rows into byte ranges, merges ranges whose gap
is at most ``max_gap_bytes`` (:func:`fsspec.utils.merge_offset_ranges`, blocks of at most
``max_block_bytes``) and fetches them in one batch, ``concurrency`` requests in flight, the
first failure cancelling the rest (:func:`~featurestore.remote.failfast.cat_ranges`: a
stalled server fails a gather of any size within one read timeout). A 1.5 KiB row costs about
1.5 KiB on the network instead of its 1 MiB inner chunk. With the default gap (one row), the
bytes fetched are at most twice the rows' bytes.

S3 (s3fs/aiobotocore) keeps 10 connections per client by default: :func:`pooled_filesystem`
gives the reader a client with ``max_pool_connections`` = ``concurrency``.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from fsspec.utils import merge_offset_ranges

from featurestore.rows import kernels as K
from featurestore.format.shard import ShardLayout
from featurestore.errors import CorruptStoreError
from featurestore.rows.base import RowReader
from featurestore.rows.local import copy_within, sort_unique
from featurestore.remote import forksafe
from featurestore.remote.failfast import cat_ranges

__all__ = ["RangeRows", "pooled_filesystem", "REMOTE_CONCURRENCY", "MAX_BLOCK_BYTES"]

#: requests in flight of one remote gather (and the S3 connection pool that serves them)
REMOTE_CONCURRENCY = 64
#: largest merged request (a slice is read in requests of this size, concurrently)
MAX_BLOCK_BYTES = 4 << 20

_memcpy = K._memcpy


@numba.njit(nogil=True, cache=True)
def place_rows(src_addr, src_pos, row_bytes, dst_addr, dst_row):
    """Copy ``row_bytes`` from ``src_addr + src_pos[i]`` to row ``dst_row[i]`` of ``dst``."""
    for i in range(src_pos.shape[0]):
        _memcpy(dst_addr + dst_row[i] * row_bytes, src_addr + src_pos[i], row_bytes)


def pooled_filesystem(fs, concurrency: int):
    """Return ``fs``, or for S3 an equivalent client whose connection pool holds
    ``concurrency`` connections (aiobotocore's default of 10 would queue the requests)."""
    proto = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
    if proto not in ("s3", "s3a"):
        return fs
    opts = dict(fs.storage_options)
    cfg = dict(opts.get("config_kwargs") or {})
    if cfg.get("max_pool_connections", 10) >= concurrency:
        return fs
    cfg["max_pool_connections"] = int(concurrency)
    opts["config_kwargs"] = cfg
    return type(fs)(*fs.storage_args, **opts)


class RangeRows(RowReader):
    """Rows of an uncompressed v1 shard file on a remote filesystem, read by byte range.

    Parameters
    ----------
    fs
        An fsspec filesystem (HTTP, S3, a caching wrapper, ...).
    path
        The shard file's path on ``fs``.
    layout
        Its geometry (the file must hold ``layout.file_bytes``; checked at open).
    concurrency
        Requests in flight (``cat_ranges``'s ``batch_size`` on an async filesystem).
    max_gap_bytes
        Ranges at most this far apart are fetched as one (default: one row, which bounds the
        bytes fetched by twice the rows' bytes).
    max_block_bytes
        Largest merged request.
    reopen
        Makes the filesystem again in a child process after ``fork`` (an event loop and its
        connections do not survive it). Default: the filesystem's class and arguments.
    check_size
        Compare the file's size with the layout at open (one request).

    Raises
    ------
    CorruptStoreError
        The file is missing or has another size than the layout says.
    """

    def __init__(self, fs, path: str, layout: ShardLayout, *,
                 concurrency: int = REMOTE_CONCURRENCY, max_gap_bytes: int | None = None,
                 max_block_bytes: int = MAX_BLOCK_BYTES, reopen: Callable | None = None,
                 check_size: bool = True):
        super().__init__(layout.shape, layout.dtype, path)
        self.path = path
        self.layout = layout
        self.concurrency = int(concurrency)
        self.max_gap_bytes = self.row_bytes if max_gap_bytes is None else int(max_gap_bytes)
        self.max_block_bytes = max(int(max_block_bytes), self.row_bytes)
        self._fs = forksafe.PerProcess(
            reopen or (lambda: type(fs)(*fs.storage_args, **fs.storage_options)), first=fs)
        self._lock = forksafe.Lock()
        self._counts = dict(gathers=0, requests=0, bytes_fetched=0, bytes_needed=0, rows=0)
        if check_size and layout.shape[0]:
            self._check_size()

    def _check_size(self) -> None:
        try:
            size = self.fs.size(self.path)
        except FileNotFoundError as e:
            raise CorruptStoreError(f"Expected shard file {self.path}. It is missing.") from e
        if size != self.layout.file_bytes:
            raise CorruptStoreError(f"Expected {self.layout.file_bytes} bytes in {self.path}. "
                                    f"Got {size} instead (truncated or overwritten).")

    @property
    def fs(self):
        """The filesystem, made again after ``fork``."""
        return self._fs.get()

    def stats(self) -> dict:
        """Gathers, requests, bytes fetched and bytes the rows needed, since open.

        ``amplification`` is ``bytes_fetched / bytes_needed`` (1.0 when every byte fetched
        belonged to a row asked for; slices count as needed in full).
        """
        with self._lock:
            st = dict(self._counts)
        st["amplification"] = st["bytes_fetched"] / st["bytes_needed"] if st["bytes_needed"] \
            else 1.0
        return st

    def _fetch(self, starts: list[int], ends: list[int]) -> list[bytes]:
        blocks = cat_ranges(self.fs, [self.path] * len(starts), starts, ends,
                            batch_size=self.concurrency)  # the first failure ends the batch
        for s, e, b in zip(starts, ends, blocks):
            if len(b) != e - s:
                raise CorruptStoreError(f"Expected {e - s} bytes at offset {s} of {self.path}. "
                                        f"Got {len(b)} instead (file truncated?).")
        with self._lock:
            self._counts["requests"] += len(starts)
            self._counts["bytes_fetched"] += int(sum(e - s for s, e in zip(starts, ends)))
        return blocks

    def _gather(self, ids: np.ndarray, out: np.ndarray, read_path: str) -> str:
        rows, dstpos, dup_src, dup_dst = sort_unique(ids.astype(np.int64, copy=False))
        rb = self.row_bytes
        start, length, _ = K.coalesce_runs(rows)  # runs of consecutive rows, in numba
        lo, hi = start * rb, (start + length) * rb
        _, bstart, bend = merge_offset_ranges([self.path] * lo.size, lo.tolist(), hi.tolist(),
                                              max_gap=self.max_gap_bytes,
                                              max_block=self.max_block_bytes, sort=False)
        blocks = self._fetch(bstart, bend)
        buf = np.frombuffer(b"".join(blocks), np.uint8)
        bstart = np.asarray(bstart, np.int64)
        base = np.zeros(bstart.size, np.int64)
        np.cumsum(np.asarray(bend, np.int64)[:-1] - bstart[:-1], out=base[1:])
        off = rows * rb
        k = np.searchsorted(bstart, off, side="right") - 1
        place_rows(buf.ctypes.data, base[k] + off - bstart[k], rb, out.ctypes.data,
                   dstpos.astype(np.int64, copy=False))
        if dup_src is not None:
            copy_within(out.ctypes.data, rb, dup_src, dup_dst)
        with self._lock:
            self._counts["gathers"] += 1
            self._counts["rows"] += int(rows.size)
            self._counts["bytes_needed"] += int(rows.size) * rb
        return "ranges"

    def _read_slice(self, start: int, stop: int, out: np.ndarray) -> None:
        rb = self.row_bytes
        step = max(1, self.max_block_bytes // rb) * rb
        lo, hi = start * rb, stop * rb
        starts = list(range(lo, hi, step))
        ends = [min(s + step, hi) for s in starts]
        dst = out.reshape(-1).view(np.uint8)
        for s, e, b in zip(starts, ends, self._fetch(starts, ends)):
            dst[s - lo:e - lo] = np.frombuffer(b, np.uint8)
        with self._lock:
            self._counts["bytes_needed"] += hi - lo

    def _close(self) -> None:
        self._fs.drop()
