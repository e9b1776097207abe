"""Reused host buffers for gathered features, pinned when CUDA is available.

A buffer goes back to use only when nothing outside the pool still refers to its memory
(PyTorch's storage use count), so a batch kept by the training loop is never overwritten,
while the usual loop, which drops each batch before the next, runs on a few buffers
allocated (and pinned) once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import torch

try:  # private, but stable since torch 1.x; without it every batch gets a fresh buffer
    _use_count = torch._C._storage_Use_Count
except AttributeError:  # pragma: no cover
    _use_count = None


def _in_use(buf: torch.Tensor) -> bool:
    if _use_count is None:  # pragma: no cover
        return True
    s = buf.untyped_storage()
    return _use_count(s._cdata) > 2  # our ``buf`` + the temporary ``s``


class BufferPool:
    """Buffers of one dtype and row shape; :meth:`take` returns a ``(n,) + row_shape`` view."""

    def __init__(self, dtype: torch.dtype, row_shape: tuple, *, pin: bool, max_buffers: int = 8,
                 rows: int = 0):
        self.dtype, self.row_shape, self.pin = dtype, tuple(row_shape), pin
        self.max_buffers = max_buffers
        self.rows = int(rows)  # planned rows per buffer (a budget's plan); 0: as needed
        self._bufs: list[torch.Tensor] = []
        self._lock = threading.Lock()
        self.allocations = 0
        self.overflows = 0  # buffers made past max_buffers because the caller held them all

    def take(self, n: int, wait: Callable[[], bool] | None = None) -> torch.Tensor:
        """A ``(n,) + row_shape`` buffer nothing else refers to.

        With ``wait`` (a budgeted loader), at most ``max_buffers`` buffers exist: while all
        are in use and ``wait()`` is true, this waits for one to come free; when ``wait()``
        says waiting cannot help (the training loop itself holds them all), a buffer is made
        past the limit and counted in :attr:`overflows`.
        """
        while True:
            with self._lock:
                free = [b for b in self._bufs if not _in_use(b)]
                fit = [b for b in free if b.shape[0] >= n]
                if fit:
                    return min(fit, key=lambda b: b.shape[0])[:n]
                full = len(self._bufs) - len(free) >= self.max_buffers
                if wait is None or not full or _use_count is None:
                    return self._new(n, free)
                free = fit = None
                if not wait():
                    self.overflows += 1
                    return self._new(n, [], keep=False)
            time.sleep(0.0005)

    def _new(self, n: int, free: list, keep: bool = True) -> torch.Tensor:
        if self.rows and n > self.rows:  # past the plan's rows: made for this batch alone,
            # and the planned buffers are kept (a grown one would stay past the plan)
            keep, free = False, []
        # free buffers too small for this batch are dropped, not hoarded
        gone = {id(b) for b in free}  # by identity: == on tensors compares values
        self._bufs = [b for b in self._bufs if id(b) not in gone]
        free.clear()  # drop our references too
        cap = max(n, self.rows) if self.rows else max(int(n * 1.1), 1024)
        buf = torch.empty((cap,) + self.row_shape, dtype=self.dtype, pin_memory=self.pin)
        self.allocations += 1
        if keep and _use_count is not None and len(self._bufs) < self.max_buffers:
            self._bufs.append(buf)
        return buf[:n]

    def clear(self) -> None:
        """Drop the pooled buffers."""
        with self._lock:
            self._bufs.clear()


class StagingRing:
    """Two (pinned) byte buffers used in turn to stage chunks of rows on their way to the GPU.

    :meth:`next` waits until the copy that last read the buffer has finished (its CUDA event),
    then returns it viewed as ``(rows,) + row_shape`` of ``dtype``; :meth:`record` marks the
    copy just issued from it.
    """

    def __init__(self, chunk_bytes: int, *, pin: bool, slots: int = 2):
        self.chunk_bytes, self.pin, self.slots = int(chunk_bytes), pin, slots
        self._bufs: list[torch.Tensor] | None = None
        self._events: list = [None] * slots
        self._i = -1

    def next(self, rows: int, dtype: torch.dtype, row_shape: tuple) -> torch.Tensor:
        """The next chunk of the ring as a ``(rows, *row_shape)`` tensor of ``dtype``."""
        n = rows * int(torch.Size(row_shape).numel()) * torch.empty((), dtype=dtype).element_size()
        if self._bufs is None or n > self._bufs[0].shape[0]:  # first use, or one row > chunk
            for ev in self._events:
                if ev is not None:
                    ev.synchronize()
            self._events = [None] * self.slots
            self._bufs = [torch.empty(max(n, self.chunk_bytes), dtype=torch.uint8,
                                      pin_memory=self.pin) for _ in range(self.slots)]
        self._i = (self._i + 1) % self.slots
        ev = self._events[self._i]
        if ev is not None:
            ev.synchronize()
            self._events[self._i] = None
        return self._bufs[self._i][:n].view(dtype).view((rows,) + tuple(row_shape))

    def record(self, stream) -> None:
        """Record an event on ``stream``: the chunk is reused only once the copy is done."""
        if stream is not None:
            ev = torch.cuda.Event()
            ev.record(stream)
            self._events[self._i] = ev


class RingPool:
    """Staging rings, one per live iterator: two iterators gathering at once would otherwise
    stage rows in each other's buffers. Free rings are kept for the next epochs."""

    def __init__(self, chunk_bytes: int, *, pin: bool):
        self.chunk_bytes, self.pin = int(chunk_bytes), pin
        self._free: list[StagingRing] = []
        self._lock = threading.Lock()
        self._of_thread = threading.local()

    def take(self) -> StagingRing:
        """A free ring, else a new one."""
        with self._lock:
            if self._free:
                return self._free.pop()
        return StagingRing(self.chunk_bytes, pin=self.pin)

    def give(self, ring: StagingRing) -> None:
        """Give ``ring`` back for later iterators."""
        with self._lock:
            self._free.append(ring)

    def bind(self, ring: StagingRing) -> None:
        """Make ``ring`` the calling thread's (a pipeline's gather thread stages in it)."""
        self._of_thread.ring = ring

    def current(self) -> StagingRing:
        """The calling thread's ring (its pipeline's), else one taken and bound to it."""
        ring = getattr(self._of_thread, "ring", None)
        if ring is None:
            ring = self._of_thread.ring = self.take()
        return ring
