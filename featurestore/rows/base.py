"""The row-reader contract: what :class:`~featurestore.FeatureArray` asks of a backend.

A row reader holds one 2-D (or 1-D) array of the store and answers three trusted calls:
:meth:`RowReader.gather` (rows by id, ids already validated), :meth:`RowReader.read_slice`
(a contiguous range of rows) and :meth:`RowReader.read_uncached` (rows by id, read around
the page cache where the backend has one: a row cache's misses). Validation happens once, at
the public edge (:meth:`FeatureArray.gather <featurestore.FeatureArray.gather>` with
:func:`featurestore.check_ids`); a reader trusts its input. Each public read checks that the
reader is open and counts as in flight until it returns: :meth:`RowReader.close` waits for
the reads in flight before it releases anything.

What a memory plan asks of every reader: :attr:`RowReader.io_threads` (reader threads it runs
reads on), :meth:`RowReader.scratch_bytes` (memory its reads hold at most) and the counters
:attr:`RowReader.reads` and :attr:`RowReader.bytes_read` of :meth:`RowReader.read_uncached`.

Capabilities are class flags, not methods that raise at run time:

``is_local``
    The rows live in a local file (memory maps, ``pread``, page-cache hints apply).
``supports_residency``
    :meth:`RowReader.resident_share` measures the page cache (else it answers 1.0).

Backends: :class:`~featurestore.rows.local.LocalRows` (local uncompressed shard file),
:class:`~featurestore.rows.ranges.RangeRows` (remote uncompressed shard file, row byte
ranges) and :class:`~featurestore.rows.zarr.ZarrRows` (anything else, through zarr).
:mod:`featurestore.testing.conformance` holds the conformance tests every backend passes.
"""

from __future__ import annotations

import abc
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np

from featurestore.errors import ClosedStoreError
from featurestore.remote import forksafe

__all__ = ["RowReader", "ForkSafePool"]


class ForkSafePool:
    """A thread pool made on first use, and made again in a forked child.

    Threads do not survive ``fork``: a child that inherited a pool would queue work that no
    thread runs. :meth:`get` compares the process id with the one that made the pool.

    Parameters
    ----------
    threads
        Worker threads of the pool.
    prefix
        Thread name prefix (``fs-pread``, ``fs-zarr``, ...).
    """

    def __init__(self, threads: int, prefix: str):
        self.threads = int(threads)
        self.prefix = prefix
        self._pool: ThreadPoolExecutor | None = None
        self._pid = -1
        self._lock = forksafe.Lock()

    def get(self) -> ThreadPoolExecutor:
        """Return this process's executor, making it on first use (or first use after fork)."""
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.prefix)
                self._pid = os.getpid()
            return self._pool

    def shutdown(self) -> None:
        """Stop this process's threads (a pool inherited through fork is only dropped)."""
        with self._lock:
            if self._pool is not None and self._pid == os.getpid():
                self._pool.shutdown(wait=True)
            self._pool = None


class RowReader(abc.ABC):
    """Rows of one array of the store: trusted gathers and slices.

    Parameters
    ----------
    shape
        The array's shape (rows first).
    dtype
        The array's dtype.
    name
        A name for messages (the file or URL read).

    Attributes
    ----------
    io_threads
        Reader threads this reader runs its reads on (0: none of its own; reads run on the
        caller's thread or an event loop).
    reads, bytes_read
        Reads issued and bytes read by :meth:`read_uncached` since the reader was opened
        (backends without their own uncached path count one read per distinct row).

    Notes
    -----
    Subclasses implement :meth:`_gather`, :meth:`_read_slice` and :meth:`_close`, and may
    override :meth:`_read_uncached` and :meth:`scratch_bytes`; the public methods add the
    empty and closed cases and the count of reads in flight. Every method may be called from
    several threads at once, and in a child process after ``fork`` (use
    :class:`ForkSafePool` for threads).
    """

    #: the rows live in a local file
    is_local: ClassVar[bool] = False
    #: :meth:`resident_share` measures the page cache
    supports_residency: ClassVar[bool] = False
    io_threads: int = 0

    def __init__(self, shape: tuple[int, ...], dtype, name: str = ""):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.name = name
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.closed = False
        self.reads = 0
        self.bytes_read = 0
        self._gate = forksafe.Lock()  # guards closed and the reads in flight
        self._inflight = 0
        self._pid = os.getpid()  # whose reads _inflight counts (a forked child starts at 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedStoreError(f"The row reader of {self.name} was closed. "
                                   "Open the store again.")

    def _own_count(self) -> None:
        """In a forked child, forget the parent's reads in flight (the caller holds _gate)."""
        if self._pid != os.getpid():
            self._pid, self._inflight = os.getpid(), 0

    def _enter(self) -> None:
        """A read starts: check the reader is open, and count the read as in flight."""
        with self._gate:
            self._check_open()
            self._own_count()
            self._inflight += 1

    def _exit(self) -> None:
        with self._gate:
            self._inflight -= 1

    def gather(self, ids: np.ndarray, out: np.ndarray, read_path: str = "auto") -> str:
        """Fill ``out`` with rows ``ids``, in the order given (repeats allowed).

        Parameters
        ----------
        ids
            Validated 1-D integer ids in ``[0, shape[0])``, native byte order.
        out
            A C-contiguous array of shape ``(len(ids),) + shape[1:]`` and this dtype.
        read_path
            A backend hint (``"auto"``, ``"mmap"``, ``"pread"``, ...); others ignore it.

        Returns
        -------
        str
            The read path taken (``"none"`` for no ids).
        """
        self._enter()
        try:
            if ids.shape[0] == 0:
                return "none"
            return self._gather(ids, out, read_path)
        finally:
            self._exit()

    def read_uncached(self, ids: np.ndarray, out: np.ndarray, read_path: str = "direct",
                      at: np.ndarray | None = None) -> str:
        """Fill ``out`` with rows ``ids`` read around the page cache, where the backend has one
        (a row cache's misses: rows it will not keep need not fill the page cache).

        Parameters
        ----------
        ids
            Validated 1-D integer ids in ``[0, shape[0])`` (repeats allowed).
        out
            A C-contiguous array of rows of this dtype: row ``ids[i]`` goes to ``out[i]``, or
            to ``out[at[i]]`` when ``at`` is given.
        read_path
            ``"direct"`` (``O_DIRECT``), ``"dontneed"`` (buffered, pages dropped after) or
            ``"spans"`` (buffered, pages kept) on a local file; other backends ignore it.
        at
            Positions in ``out`` of the rows read (a cache's misses go straight into the batch).

        Returns
        -------
        str
            The read path taken (``"none"`` for no ids).
        """
        self._enter()
        try:
            if ids.shape[0] == 0:
                return "none"
            return self._read_uncached(ids, out, read_path, at)
        finally:
            self._exit()

    def read_slice(self, start: int, stop: int, out: np.ndarray) -> None:
        """Fill ``out`` with rows ``start:stop`` (``0 <= start <= stop <= shape[0]``).

        Parameters
        ----------
        start, stop
            The row range, validated by the caller.
        out
            A C-contiguous array of shape ``(stop - start,) + shape[1:]`` and this dtype.
        """
        self._enter()
        try:
            if stop > start:
                self._read_slice(int(start), int(stop), out)
        finally:
            self._exit()

    def scratch_bytes(self) -> int:
        """Memory this reader's reads hold at most (scratch buffers), for memory plans; 0 for
        a backend that reads straight into the caller's buffers."""
        return 0

    def array(self) -> np.ndarray:
        """Return the whole array (local backends: a read-only memory map, zero-copy)."""
        out = np.empty(self.shape, self.dtype)
        self.read_slice(0, self.shape[0], out)
        return out

    def resident_share(self, ids: np.ndarray) -> float:
        """Share of the pages of rows ``ids`` in the page cache (1.0 without residency)."""
        return 1.0

    def stats(self) -> dict[str, Any]:
        """Counters of this reader since it was opened (backend-specific keys)."""
        return {}

    def close(self) -> None:
        """Release files, maps, connections and threads, once the reads in flight have
        finished; later calls raise. Idempotent."""
        with self._gate:
            if self.closed:
                return
            self.closed = True
            self._own_count()
        while self._inflight:  # reads in flight finish first (close is rare: poll)
            time.sleep(0.001)
        self._close()

    def _read_uncached(self, ids: np.ndarray, out: np.ndarray, read_path: str,
                       at: np.ndarray | None) -> str:
        """Trusted :meth:`read_uncached` of at least one row. Default: a gather (a backend
        with no page cache to go around), one read per distinct row."""
        if at is None:
            path = self._gather(ids, out, read_path)
        else:
            tmp = np.empty((ids.shape[0],) + self.shape[1:], self.dtype)
            path = self._gather(ids, tmp, read_path)
            out[at] = tmp
        n = int(np.unique(ids).shape[0])
        with self._gate:
            self.reads += n
            self.bytes_read += n * self.row_bytes
        return path

    @abc.abstractmethod
    def _gather(self, ids: np.ndarray, out: np.ndarray, read_path: str) -> str:
        """Trusted gather of at least one row."""

    @abc.abstractmethod
    def _read_slice(self, start: int, stop: int, out: np.ndarray) -> None:
        """Trusted slice of at least one row."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Release what the backend holds (called once)."""
