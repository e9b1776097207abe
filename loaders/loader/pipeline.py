"""The thread pipeline of one epoch: a sampling thread and a gather thread with bounded
queues between them and the training loop.

Stages (one thread each; numba kernels and row reads release the GIL)::

    sample (batch k+2) -> gather (k+1) -> training loop (k)

An exception in a stage is raised in the training loop (with its original traceback);
leaving the loop early (``break``, an exception, or dropping the iterator) stops and joins
every stage thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from loaders.loader.buffers import RingPool
from loaders.loader.gather import Ready
from loaders.loader.stats import LoaderStats
from loaders.sample.sampler import numba_threads

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)

_POLL_S = 0.05
_DONE = object()


@dataclass
class _Failure:
    """An exception raised in a stage thread, carried to the training loop."""

    exc: BaseException
    stage: str


class Pipeline:
    """One epoch: the stage threads, their queues, and their shutdown.

    Parameters
    ----------
    samples
        Called when iteration starts: the epoch's sampled subgraphs, in order (an iterator
        that the sampling thread runs).
    make_gather
        Called when iteration starts with :meth:`may_wait`: the gather stage's function,
        from a sampled subgraph to a :class:`~loaders.loader.gather.Ready` batch.
    rings
        The loader's staging rings: this iterator takes its own while it runs.
    stats, num_threads, prefetch
        The loader's counters, numba threads per stage, and batches each queue holds.
    """

    def __init__(self, samples: Callable[[], Iterator], make_gather: Callable[..., Callable],
                 *, rings: RingPool, stats: LoaderStats, num_threads: int | None,
                 prefetch: int):
        self.samples, self.make_gather, self.rings = samples, make_gather, rings
        self.stats, self.num_threads, self.prefetch = stats, num_threads, prefetch
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.consumer_waiting = False
        self.wait_seq = 0
        self._suspect: tuple[int, float] | None = None
        self.q_out: queue.Queue | None = None
        self.ring = None  # this iterator's staging ring, taken when it starts

    def may_wait(self) -> bool:
        """Whether the gather stage may wait for a batch buffer: not when the pipeline stops,
        nor when the training loop has waited on an empty queue for 20 ms in one ``next()``
        call (then it holds the buffers itself, and waiting cannot end)."""
        if self.stop.is_set():
            return False
        if not (self.consumer_waiting and self.q_out is not None and self.q_out.empty()):
            self._suspect = None
            return True
        now = time.perf_counter()
        if self._suspect is None or self._suspect[0] != self.wait_seq:
            self._suspect = (self.wait_seq, now)
            return True
        return now - self._suspect[1] < 0.02

    # a put that gives up when the pipeline stops
    def _put(self, q: queue.Queue, item) -> bool:
        while not self.stop.is_set():
            try:
                q.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _get(self, q: queue.Queue):
        while not self.stop.is_set():
            try:
                return q.get(timeout=_POLL_S)
            except queue.Empty:
                continue
        return _DONE

    def _stage(self, name: str, inq, outq, fn):
        stats = self.stats

        def timed(*a):
            t = time.perf_counter()
            out = fn(*a)
            setattr(stats, name, getattr(stats, name) + time.perf_counter() - t)
            return out

        def body():
            with numba_threads(self.num_threads):
                run()

        def run():
            try:
                if inq is None:
                    it = fn()
                    while True:
                        t = time.perf_counter()
                        item = next(it, _DONE)
                        stats.sample += time.perf_counter() - t
                        if item is _DONE:
                            break
                        if not self._put(outq, item):
                            return
                    self._put(outq, _DONE)
                    return
                while True:
                    item = self._get(inq)
                    if item is _DONE or isinstance(item, _Failure):
                        self._put(outq, item)
                        return
                    if not self._put(outq, timed(item)):
                        return
            except BaseException as e:  # noqa: BLE001 - carried to the training loop
                self._put(outq, _Failure(e, name))

        t = threading.Thread(target=body, name=f"loader-{name}", daemon=True)
        self.threads.append(t)
        return t

    def run(self) -> Iterator[Any]:
        """The batches of the epoch, each as the training loop gets it."""
        samples = self.samples()
        q_sample = queue.Queue(self.prefetch)
        q_out = self.q_out = queue.Queue(self.prefetch)
        self._stage("sample", None, q_sample, lambda: samples)
        self.ring = self.rings.take()  # this iterator's own: another may gather at the same time
        gather = self.make_gather(self.may_wait)

        def own_ring(sub):
            self.rings.bind(self.ring)  # the gather thread stages in it
            return gather(sub)

        self._stage("gather", q_sample, q_out, own_ring)
        try:
            for t in self.threads:
                t.start()
            stats = self.stats
            while True:
                t = time.perf_counter()
                self.wait_seq += 1
                self.consumer_waiting = True
                item = self._get(q_out)
                self.consumer_waiting = False
                stats.wait += time.perf_counter() - t
                if item is _DONE:
                    return
                if isinstance(item, _Failure):
                    log.debug("loader stage %s failed", item.stage)
                    raise item.exc
                stats.batches += 1
                if isinstance(item, Ready):
                    item = item.deliver()
                box, item = [item], None
                yield box.pop()  # this frame keeps no reference: the loop owns the batch
        finally:
            self.close()

    def close(self) -> None:
        """Stop and join the stage threads; give the staging ring back once they ended."""
        self.stop.set()
        for t in self.threads:
            if t.is_alive() and t is not threading.current_thread():
                t.join()
        ring, self.ring = self.ring, None
        if ring is not None and not any(t.is_alive() for t in self.threads):
            self.rings.give(ring)
