"""Rows of a local uncompressed single-shard file (:class:`LocalRows`).

Resident rows are copied out of a memory map by a parallel numba kernel; rows not in the
page cache are read with ``pread`` from many threads at once (``POSIX_FADV_RANDOM``, no
readahead), after sorting, deduplicating and coalescing the ids, then scattered back into
the order asked. ``mincore`` on a sample of the rows picks the path per call
(``read_path="auto"``). Two more paths read without leaving the rows in the page cache, for
processes in a memory cgroup whose page cache must not evict what they hold (topology,
code, a row cache): ``"direct"`` (``O_DIRECT``: aligned reads of each span of rows into a
per-thread scratch, copied out) and ``"dontneed"`` (buffered reads, then
``POSIX_FADV_DONTNEED`` on the pages read). Both merge rows whose gap is at most
``SPAN_GAP_BYTES`` into one read.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading

import numba
import numpy as np
from numba import types

from featurestore.rows import kernels as K
from featurestore.format.shard import ShardLayout
from featurestore.errors import CorruptStoreError
from featurestore.rows.base import ForkSafePool, RowReader
from featurestore.remote import forksafe

__all__ = ["LocalRows", "READ_PATHS", "UNCACHED_PATHS", "plan_spans", "read_spans",
           "copy_within", "sort_unique"]

log = logging.getLogger(__name__)

READ_PATHS = ("auto", "mmap", "pread", "direct", "dontneed")
#: read paths that leave nothing in the page cache
UNCACHED_PATHS = ("direct", "dontneed")
#: rows whose gap is at most this many bytes are read as one span (one I/O beats two: a random
#: read costs more than reading the gap sequentially; docs/benchmarks.md)
SPAN_GAP_BYTES = 16 << 10
#: per-thread scratch of the uncached paths (a span is at most this minus two pages)
SCRATCH_BYTES = 64 << 10
#: ids whose mean gap is under this many bytes are read as long spans (up to
#: DENSE_SCRATCH_BYTES) by DENSE_STREAMS tasks, close to the device's sequential rate
DENSE_GAP_BYTES = 16 << 10
DENSE_SCRATCH_BYTES = 1 << 20
DENSE_STREAMS = 8
#: sparse reads are split into this many tasks per reader thread (smaller tasks, shorter tail)
TASKS_PER_THREAD = 4
ALIGN = 4096
#: rows sampled by the residency probe, and the resident share above which memory maps win.
PROBE_ROWS = 64
RESIDENT_SHARE = 0.9


_fadvise = types.ExternalFunction("posix_fadvise", types.intc(types.intc, types.int64,
                                                               types.int64, types.intc))


@numba.njit(nogil=True, cache=True)
def plan_spans(rows, row_bytes, max_gap_bytes, max_span_bytes):
    """Spans of sorted unique ``rows`` read as one I/O each: ``first`` (length spans + 1),
    span ``s`` being ``rows[first[s]:first[s + 1]]``. Rows join a span while the gap to the
    previous row is at most ``max_gap_bytes`` and the span stays within ``max_span_bytes``."""
    n = rows.shape[0]
    first = np.empty(n + 1, np.int64)
    k = 0
    i = 0
    while i < n:
        j = i + 1
        while (j < n and (rows[j] - rows[j - 1] - 1) * row_bytes <= max_gap_bytes
               and (rows[j] - rows[i] + 1) * row_bytes <= max_span_bytes):
            j += 1
        first[k] = i
        k += 1
        i = j
    first[k] = n
    return first[:k + 1]


def dense_ids(count: int, lo: int, hi: int, row_bytes: int) -> bool:
    """Whether ``count`` rows in ``[lo, hi]`` lie closer than ``DENSE_GAP_BYTES`` apart on
    average (then long span reads beat one read per run of rows)."""
    return count * DENSE_GAP_BYTES >= (int(hi) - int(lo) + 1) * row_bytes


@numba.njit(nogil=True, cache=True)
def read_spans(fd, row_bytes, rows, dstpos, first, lo, hi, dst_addr, scratch_addr, align,
               dontneed):
    """Read spans ``lo..hi`` (aligned to ``align`` bytes, whole) into the scratch and copy row
    ``rows[r]`` to ``dst_addr + dstpos[r] * row_bytes``. With ``dontneed`` the span's pages
    are dropped from the page cache afterwards. Returns -1, or the failing span."""
    for s in range(lo, hi):
        i = first[s]
        j = first[s + 1]
        off = rows[i] * row_bytes
        end = (rows[j - 1] + 1) * row_bytes
        a0 = off // align * align
        a1 = (end + align - 1) // align * align
        got = 0
        tries = 0
        while a0 + got < end:
            r = _pread(fd, scratch_addr + got, a1 - a0 - got, a0 + got)
            if r <= 0:
                tries += 1
                if r == 0 or tries > 8:  # EOF (truncated file) or a persistent error
                    return s
                continue
            got += r
        for q in range(i, j):
            _memcpy(dst_addr + dstpos[q] * row_bytes, scratch_addr + rows[q] * row_bytes - a0,
                    row_bytes)
        if dontneed:
            _fadvise(fd, a0, a1 - a0, 4)  # POSIX_FADV_DONTNEED
    return -1


@numba.njit(nogil=True, cache=True)
def copy_within(addr, row_bytes, src_pos, dst_pos):
    """Row ``dst_pos[i]`` = row ``src_pos[i]`` of one array (duplicated ids)."""
    for i in range(src_pos.shape[0]):
        _memcpy(addr + dst_pos[i] * row_bytes, addr + src_pos[i] * row_bytes, row_bytes)


_pread = K._pread
_memcpy = K._memcpy


def sort_unique(ids: np.ndarray):
    """``(rows, dstpos, dup_src, dup_dst)``: the sorted unique ids, the position in ``ids`` of
    each one's first occurrence, and the (source, destination) positions that repeat one."""
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    if s.size < 2 or not bool(np.any(s[1:] == s[:-1])):
        return s, order, None, None
    flag = np.empty(s.size, bool)
    flag[0] = True
    np.not_equal(s[1:], s[:-1], out=flag[1:])
    firsts = np.flatnonzero(flag)
    group = np.cumsum(flag) - 1
    dups = np.flatnonzero(~flag)
    return s[firsts], order[firsts], order[firsts[group[dups]]], order[dups]


class LocalRows(RowReader):
    """Rows of a local uncompressed single-shard file (see the module doc for the paths).

    Parameters
    ----------
    path
        The shard file (``<array>/c/0[/0]``).
    layout
        Its geometry; the file must hold exactly ``layout.file_bytes``.
    io_threads
        Reads in flight on the ``pread`` and uncached paths.

    Raises
    ------
    CorruptStoreError
        The file is missing or has another size than the layout says.
    """

    is_local = True
    supports_residency = True

    def __init__(self, path: str, layout: ShardLayout, io_threads: int = 32):
        super().__init__(layout.shape, layout.dtype, path)
        self.path = path
        self.layout = layout
        self.io_threads = io_threads
        self._pool = ForkSafePool(io_threads, "fs-pread")
        self._lock = forksafe.Lock()
        self._fd = -1
        self._dfd = -2  # O_DIRECT handle: -2 not opened yet, -1 unsupported here
        self._align = ALIGN  # O_DIRECT offset alignment: the device's logical block size
        self._scratch = threading.local()
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
        """Return the whole array as a read-only memory map (zero-copy)."""
        self._check_open()
        if self._map is None:
            return np.empty(self.layout.shape, self.layout.dtype)
        return self._map

    def stats(self) -> dict:
        """Reads issued and bytes read by the uncached paths since the array was opened."""
        return {"reads": self.reads, "bytes_read": self.bytes_read}

    def _read_slice(self, start: int, stop: int, out: np.ndarray) -> None:
        out[...] = self._map[start:stop]

    def resident_share(self, ids: np.ndarray) -> float:
        """Share of a sample of rows ``ids`` whose pages are in the page cache (``mincore``)."""
        if ids.size == 0 or self._map is None:
            return 1.0
        k = PROBE_ROWS if ids.size >= 16384 else PROBE_ROWS // 4  # fewer mincore probes
        step = max(1, ids.size // k)
        sample = np.ascontiguousarray(ids[::step][:k]).astype(np.int64, copy=False)
        return float(K.resident_fraction(self._base, self.layout.row_bytes, sample, K.PAGE,
                                         np.zeros(64, np.uint8)))

    def _gather(self, ids: np.ndarray, out: np.ndarray, read_path: str) -> str:
        if read_path == "auto":
            read_path = "mmap" if self.resident_share(ids) >= RESIDENT_SHARE else "pread"
            rb = self.layout.row_bytes
            if read_path == "pread" and dense_ids(ids.size, *K.id_range(ids), rb):
                # cold and dense: long buffered reads (they fill the page cache, so a later
                # gather of the same rows is warm), not one read per run of rows
                return self._read_uncached(ids, out, "spans", None)
        if read_path == "mmap":
            K.copy_rows(self._map, ids, out)
            return "mmap"
        if read_path in UNCACHED_PATHS:
            return self._read_uncached(ids, out, read_path, None)
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
        pool = self._pool.get()

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

    # -- reads that leave nothing in the page cache ----------------------------------------
    def _direct_fd(self) -> int:
        with self._lock:
            if self._dfd == -2:
                try:
                    self._dfd = os.open(self.path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
                except OSError as e:  # tmpfs and some network file systems refuse O_DIRECT
                    log.info("O_DIRECT refused for %s (%s): reading with POSIX_FADV_DONTNEED",
                             self.path, e)
                    self._dfd = -1
                if self._dfd >= 0:
                    self._align = _direct_align(self._dfd, self.path)
            return self._dfd

    def _scratch_addr(self) -> int:
        """Return this thread's page-aligned scratch (kept per thread, for the pool's threads)."""
        need = max(SCRATCH_BYTES, self.layout.row_bytes + 2 * ALIGN)
        buf = getattr(self._scratch, "buf", None)
        if buf is None or buf.nbytes < need + ALIGN:
            buf = self._scratch.buf = np.empty(need + ALIGN, np.uint8)
        a = buf.ctypes.data
        return a + (-a) % ALIGN

    def scratch_bytes(self) -> int:
        """Memory the uncached paths hold: one scratch per reader thread, and the shared
        scratch of a dense read while it runs."""
        rb = self.layout.row_bytes
        per_thread = (self.io_threads + 1) * (max(SCRATCH_BYTES, rb + 2 * ALIGN) + ALIGN)
        dense = min(DENSE_STREAMS, self.io_threads) * (max(DENSE_SCRATCH_BYTES, rb + 2 * ALIGN)
                                                       + ALIGN)
        return per_thread + dense

    def _read_uncached(self, ids: np.ndarray, out: np.ndarray, read_path: str,
                       at: np.ndarray | None) -> str:
        """Rows ``ids`` read around the page cache (see the module doc): sorted, deduplicated,
        merged into spans, read at up to ``io_threads`` in flight and copied straight to their
        places in ``out`` (row ``ids[i]`` to ``out[i]``, or to ``out[at[i]]``)."""
        rows, dstpos, dup_src, dup_dst = sort_unique(ids.astype(np.int64, copy=False))
        if at is not None:
            at = at.astype(np.int64, copy=False)
            dstpos = at[dstpos]
            if dup_src is not None:
                dup_src, dup_dst = at[dup_src], at[dup_dst]
        fd = self._direct_fd() if read_path == "direct" else -1
        dontneed = fd < 0 and read_path != "spans"
        if read_path == "spans":  # buffered, pages kept (the auto path's dense cold reads)
            fd, align, path = self._fd, 1, "pread"
        elif dontneed:
            fd, align, path = self._fd, 1, "dontneed"
        else:
            align, path = self._align, "direct"
        rb = self.layout.row_bytes
        dense = dense_ids(rows.size, rows[0], rows[-1], rb)
        scratch = DENSE_SCRATCH_BYTES if dense else SCRATCH_BYTES
        span = max(scratch, rb + 2 * ALIGN) - 2 * ALIGN
        first = plan_spans(rows, rb, SPAN_GAP_BYTES, span)
        nspan = first.shape[0] - 1
        addr = out.ctypes.data
        if dense:  # few long reads, each task with its own slot of one shared scratch
            tasks = min(nspan, DENSE_STREAMS, self.io_threads)
            slot = span + 2 * ALIGN
            shared = np.empty(tasks * slot + ALIGN, np.uint8)
            base = shared.ctypes.data + (-shared.ctypes.data) % ALIGN
            slots = iter(range(tasks))

            def run(lo, hi, k=None):
                k = next(slots) if k is None else k
                return read_spans(fd, rb, rows, dstpos, first, lo, hi, addr, base + k * slot,
                                  align, dontneed)
        else:
            tasks = min(nspan, self.io_threads * TASKS_PER_THREAD)

            def run(lo, hi):
                return read_spans(fd, rb, rows, dstpos, first, lo, hi, addr,
                                  self._scratch_addr(), align, dontneed)

        if tasks <= 1:
            results = [run(0, nspan)]
        else:
            bounds = np.linspace(0, nspan, tasks + 1).astype(np.int64)
            pool = self._pool.get()
            futs = [pool.submit(run, int(bounds[i]), int(bounds[i + 1]))
                    for i in range(tasks) if bounds[i] < bounds[i + 1]]
            results = [f.result() for f in futs]
        self.reads += nspan
        self.bytes_read += span_bytes(rows, first, rb, align)
        bad = [r for r in results if r >= 0]
        if bad:
            s0 = bad[0]
            off = int(rows[first[s0]]) * rb
            raise CorruptStoreError(f"Could not read the rows at offset {off} of {self.path} "
                                    f"(file truncated, or a read error).")
        if dup_src is not None:
            copy_within(addr, rb, dup_src, dup_dst)
        return path

    def release_pages(self) -> None:
        """Drop this array's pages from this process's map and from the page cache (after a
        resident copy, or a validation pass that read the whole file through the map), so a
        capped process is not charged for them."""
        if self._mm is not None:
            try:
                self._mm.madvise(mmap.MADV_DONTNEED)
            except (OSError, AttributeError, ValueError):
                pass
        if self._fd >= 0:
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def read_all(self, out: np.ndarray | None = None, block_bytes: int = 16 << 20) -> np.ndarray:
        """The whole array read into (anonymous) memory, its pages dropped from the page cache
        as it goes: a resident copy that costs the page cache nothing."""
        lay = self.layout
        if out is None:
            out = np.empty(lay.shape, lay.dtype)
        return self.read_range(0, int(lay.shape[0]), out, block_bytes)

    def read_range(self, lo: int, hi: int, out: np.ndarray | None = None,
                   block_bytes: int = 16 << 20) -> np.ndarray:
        """Rows ``[lo, hi)`` read into (anonymous) memory as :meth:`read_all` reads, their
        pages dropped from the page cache as it goes."""
        lay = self.layout
        row = int(np.prod(lay.shape[1:], dtype=np.int64)) * lay.dtype.itemsize
        if out is None:
            out = np.empty((hi - lo,) + tuple(lay.shape[1:]), lay.dtype)
        nbytes, base = (hi - lo) * row, lo * row
        view = memoryview(out.reshape(-1).view(np.uint8))
        fd = os.open(self.path, os.O_RDONLY)
        try:
            off = 0
            while off < nbytes:
                n = os.preadv(fd, [view[off:off + min(block_bytes, nbytes - off)]], base + off)
                if n <= 0:
                    raise CorruptStoreError(f"Expected {base + nbytes} bytes in {self.path}. "
                                            f"The file ends at {base + off}.")
                os.posix_fadvise(fd, base + off, n, os.POSIX_FADV_DONTNEED)
                off += n
        finally:
            os.close(fd)
        return out

    def _close(self) -> None:
        self._pool.shutdown()
        self._map = None
        if self._dfd >= 0:
            os.close(self._dfd)
        self._dfd = -2
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a caller still holds array(); the map closes with it
                pass
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _direct_align(fd: int, path: str) -> int:
    """Offset alignment for ``O_DIRECT`` reads of ``fd``: the logical block size of the device
    under ``path`` (512 on most disks) when a probe read at that alignment works, else
    ``ALIGN``. Rows of 1536 bytes are then read as 1536 bytes, not as one or two 4 KiB pages:
    more rows/s (an IOPS-bound device still moves fewer bytes; docs/benchmarks.md)."""
    try:
        st = os.fstat(fd)
        dev = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        lbs = None
        for q in (f"{dev}/queue/logical_block_size", f"{dev}/../queue/logical_block_size"):
            if os.path.exists(q):
                with open(q) as f:
                    lbs = int(f.read().strip())
                break
        if not lbs or lbs >= ALIGN or ALIGN % lbs or st.st_size < 2 * lbs:
            return ALIGN
        buf = np.empty(2 * ALIGN, np.uint8)
        off = (-buf.ctypes.data) % ALIGN
        if os.preadv(fd, [memoryview(buf[off:off + lbs])], lbs) != lbs:
            return ALIGN
        return lbs
    except (OSError, ValueError):
        return ALIGN


def span_bytes(rows, first, row_bytes, align) -> int:
    """Bytes the spans ``first`` of sorted ``rows`` read, each widened to ``align``."""
    lo = rows[first[:-1]] * row_bytes
    hi = (rows[first[1:] - 1] + 1) * row_bytes
    return int(np.sum((hi + align - 1) // align * align - lo // align * align))


