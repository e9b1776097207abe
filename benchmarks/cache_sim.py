"""The replay simulator of ``bench cache``: feature-cache policies replayed on a recorded
access trace (:class:`loaders.memory.trace.AccessTrace`), counting per batch how many row
reads a cache of ``capacity`` rows would have served.

* static caches (:func:`loaders.memory.trace.static_hits`): a fixed set of rows, filled
  before training; the set is ranked by :func:`loaders.memory.cache.row_order` from
  in-degree (:func:`loaders.memory.trace.row_degree`, "degree-static"), from the access
  counts of a presampled epoch ("presample-static", what the loader's hot tier does), or from
  the replayed epoch's own counts (:func:`optimal_static_hits`, the best any static set can do
  on that epoch: the upper bound of static caching);
* dynamic caches filled on misses: :func:`lru_hits` (a doubly linked list in arrays),
  :func:`sieve_hits` (SIEVE: FIFO order, a hand and visited bits; Zhang et al., NSDI 2024),
  :func:`clock_hits` (CLOCK: a ring, a hand and reference bits);
* :func:`belady_hits`: Belady's MIN with bypass, seeing ``window`` batches ahead (evict the
  cached row whose next use is farthest; rows whose next use lies past the window are evicted
  first, least recently used first; a missed row whose next use is farther than every cached
  row's is not inserted). It starts with the cache holding the rows of the nearest first uses,
  so with the window covering the whole trace it is the offline optimum: no policy that starts
  from any cache content serves more reads of the replayed trace.

A *row read* is one distinct row in one batch; hit rate = row reads served / row reads. Ids
within one batch are distinct (the sampler deduplicates them), so a dynamic cache never
counts a hit on a row inserted by the same batch. Every kernel is a numba function over int
arrays; the dynamic policies index a dense ``int32`` array of ``num_rows`` entries, so
replaying costs ``4 * num_rows`` bytes plus a few arrays of ``capacity``.

Example::

    trace = record_trace(store, "train", [15, 10, 5], batch_size=1024, epochs=3)
    res = replay(trace, [trace.num_rows // 10], degree=row_degree(store))
    res.hit_rate("presample-static", trace.num_rows // 10)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numba
import numpy as np

from loaders.errors import LoaderArgumentError
from loaders.memory.cache import count_rows, row_order
from loaders.memory.trace import AccessTrace, static_hits, static_mask

__all__ = ["optimal_static_hits", "lru_hits", "sieve_hits", "clock_hits", "belady_hits",
           "next_use", "REPLAY_POLICIES", "ReplayResult", "replay"]

log = logging.getLogger(__name__)

#: every policy :func:`replay` knows, in the order tables list them.
REPLAY_POLICIES = ("degree-static", "presample-static", "sieve", "clock", "lru",
                   "belady-window", "belady", "optimal-static")


def optimal_static_hits(counts: np.ndarray, capacity: int) -> int:
    """Reads served by the best static set of ``capacity`` rows for reads with ``counts``:
    the sum of the ``capacity`` largest counts."""
    k = int(min(max(capacity, 0), counts.shape[0]))
    if k == 0:
        return 0
    top = np.partition(counts, counts.shape[0] - k)[counts.shape[0] - k:]
    return int(top.sum(dtype=np.int64))


@numba.njit(nogil=True, cache=True)
def lru_hits(ids, batch_ptr, num_rows, capacity):
    """Per batch, the reads an LRU cache of ``capacity`` rows serves (filled on misses)."""
    nb = batch_ptr.shape[0] - 1
    out = np.zeros(nb, np.int64)
    if capacity <= 0:
        return out
    slot_of = np.full(num_rows, -1, np.int32)
    key = np.empty(capacity, np.int64)
    prv = np.full(capacity, -1, np.int32)  # toward the most recent
    nxt = np.full(capacity, -1, np.int32)  # toward the least recent
    head = -1
    tail = -1
    size = 0
    for b in range(nb):
        h = 0
        for i in range(batch_ptr[b], batch_ptr[b + 1]):
            x = ids[i]
            s = slot_of[x]
            if s >= 0:
                h += 1
                if s == head:
                    continue
                # unlink s (not the head, so prv[s] >= 0)
                p = prv[s]
                q = nxt[s]
                nxt[p] = q
                if q >= 0:
                    prv[q] = p
                else:
                    tail = p
            else:
                if size < capacity:
                    s = size
                    size += 1
                    if tail < 0:
                        tail = s
                else:
                    s = tail
                    slot_of[key[s]] = -1
                    p = prv[s]
                    tail = p
                    if p >= 0:
                        nxt[p] = -1
                    else:
                        head = -1
                    if tail < 0:
                        tail = s
                key[s] = x
                slot_of[x] = s
            # push s at the head
            prv[s] = -1
            nxt[s] = head
            if head >= 0 and head != s:
                prv[head] = s
            head = s
        out[b] = h
    return out


@numba.njit(nogil=True, cache=True)
def sieve_hits(ids, batch_ptr, num_rows, capacity):
    """Per batch, the reads a SIEVE cache of ``capacity`` rows serves.

    New rows enter at the head of a FIFO list with the visited bit clear; a hit sets it. To
    evict, the hand moves from where it stopped (first: the tail, the oldest row) toward the
    head, clearing visited bits, and evicts the first row not visited; it wraps to the tail.
    """
    nb = batch_ptr.shape[0] - 1
    out = np.zeros(nb, np.int64)
    if capacity <= 0:
        return out
    slot_of = np.full(num_rows, -1, np.int32)
    key = np.empty(capacity, np.int64)
    vis = np.zeros(capacity, np.uint8)
    prv = np.full(capacity, -1, np.int32)  # toward the head (newer)
    nxt = np.full(capacity, -1, np.int32)  # toward the tail (older)
    head = -1
    tail = -1
    hand = -1
    size = 0
    for b in range(nb):
        h = 0
        for i in range(batch_ptr[b], batch_ptr[b + 1]):
            x = ids[i]
            s = slot_of[x]
            if s >= 0:
                h += 1
                vis[s] = 1
                continue
            if size < capacity:
                s = size
                size += 1
            else:
                o = hand if hand >= 0 else tail
                while vis[o]:
                    vis[o] = 0
                    o = prv[o] if prv[o] >= 0 else tail
                hand = prv[o]
                # unlink o
                p = prv[o]
                q = nxt[o]
                if p >= 0:
                    nxt[p] = q
                else:
                    head = q
                if q >= 0:
                    prv[q] = p
                else:
                    tail = p
                slot_of[key[o]] = -1
                s = o
            key[s] = x
            slot_of[x] = s
            vis[s] = 0
            prv[s] = -1
            nxt[s] = head
            if head >= 0:
                prv[head] = s
            head = s
            if tail < 0:
                tail = s
        out[b] = h
    return out


@numba.njit(nogil=True, cache=True)
def clock_hits(ids, batch_ptr, num_rows, capacity):
    """Per batch, the reads a CLOCK cache of ``capacity`` rows serves.

    Rows fill the ring's slots in order with the reference bit clear; a hit sets it. To
    evict, the hand (first at slot 0) clears set bits as it passes and stops at the first
    clear one; the new row takes that slot and the hand moves one past it.
    """
    nb = batch_ptr.shape[0] - 1
    out = np.zeros(nb, np.int64)
    if capacity <= 0:
        return out
    slot_of = np.full(num_rows, -1, np.int32)
    key = np.empty(capacity, np.int64)
    ref = np.zeros(capacity, np.uint8)
    hand = 0
    size = 0
    for b in range(nb):
        h = 0
        for i in range(batch_ptr[b], batch_ptr[b + 1]):
            x = ids[i]
            s = slot_of[x]
            if s >= 0:
                h += 1
                ref[s] = 1
                continue
            if size < capacity:
                s = size
                size += 1
            else:
                while ref[hand]:
                    ref[hand] = 0
                    hand += 1
                    if hand == capacity:
                        hand = 0
                s = hand
                slot_of[key[s]] = -1
                hand += 1
                if hand == capacity:
                    hand = 0
            key[s] = x
            ref[s] = 0
            slot_of[x] = s
        out[b] = h
    return out


@numba.njit(nogil=True, cache=True)
def next_use(ids, num_rows):
    """``nxt[i]``: the next position that reads ``ids[i]`` again, ``len(ids)`` when none."""
    n = ids.shape[0]
    nxt = np.empty(n, np.int64)
    last = np.full(num_rows, n, np.int64)
    for i in range(n - 1, -1, -1):
        x = ids[i]
        nxt[i] = last[x]
        last[x] = i
    return nxt


@numba.njit(nogil=True, cache=True, inline="always")
def _sift_up(heap, hpos, hkey, j):
    s = heap[j]
    k = hkey[s]
    while j > 0:
        p = (j - 1) >> 1
        t = heap[p]
        if hkey[t] >= k:
            break
        heap[j] = t
        hpos[t] = j
        j = p
    heap[j] = s
    hpos[s] = j


@numba.njit(nogil=True, cache=True, inline="always")
def _sift_down(heap, hpos, hkey, j, n):
    s = heap[j]
    k = hkey[s]
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and hkey[heap[c + 1]] > hkey[heap[c]]:
            c += 1
        t = heap[c]
        if hkey[t] <= k:
            break
        heap[j] = t
        hpos[t] = j
        j = c
    heap[j] = s
    hpos[s] = j


@numba.njit(nogil=True, cache=True)
def _rekey(heap, hpos, hkey, s, k, n):
    old = hkey[s]
    hkey[s] = k
    if k > old:
        _sift_up(heap, hpos, hkey, hpos[s])
    elif k < old:
        _sift_down(heap, hpos, hkey, hpos[s], n)


@numba.njit(nogil=True, cache=True)
def _belady_prefill(ids, wend, capacity, slot_of, key, last, heap, hpos, hkey):
    """Fill the cache with the distinct rows first read before ``wend`` (nearest first, up
    to ``capacity``), each keyed by its first read; returns how many."""
    size = 0
    for i in range(wend):
        if size == capacity:
            break
        x = ids[i]
        if slot_of[x] >= 0:
            continue
        s = size
        size += 1
        key[s] = x
        slot_of[x] = s
        last[s] = i  # pending: its next use is position i itself
        hkey[s] = i
        heap[s] = s
        hpos[s] = s
        _sift_up(heap, hpos, hkey, s)
    return size


@numba.njit(nogil=True, cache=True)
def belady_hits(ids, batch_ptr, num_rows, capacity, window, nxt):
    """Per batch, the reads Belady's MIN with bypass serves, seeing ``window`` batches ahead.

    ``nxt`` is :func:`next_use` of ``ids``. At batch ``b`` the reads of batches up to
    ``b + window`` are known: a cached row's key is its next use when known, else
    ``2n - (its last use)`` (unknown next uses are evicted first, least recently used first).
    The row with the largest key is evicted; a missed row is not inserted when its own key is
    at least that large. The cache starts with the rows first read in the first window
    (nearest first, up to ``capacity``). ``window >= num_batches``: the offline optimum.
    """
    nb = batch_ptr.shape[0] - 1
    n = ids.shape[0]
    out = np.zeros(nb, np.int64)
    if capacity <= 0 or nb == 0:
        return out
    slot_of = np.full(num_rows, -1, np.int32)
    key = np.empty(capacity, np.int64)
    last = np.empty(capacity, np.int64)  # position of the row's latest (or first) read
    heap = np.empty(capacity, np.int32)
    hpos = np.empty(capacity, np.int32)
    hkey = np.empty(capacity, np.int64)
    big = 2 * n
    wb = min(window, nb - 1)
    wend = batch_ptr[min(wb + 1, nb)]
    size = _belady_prefill(ids, wend, capacity, slot_of, key, last, heap, hpos, hkey)
    for b in range(nb):
        # the window now reaches batch b + window: learn the next uses it reveals
        if b > 0 and b + window < nb:
            wend = batch_ptr[b + window + 1]
            now = batch_ptr[b]
            for j in range(batch_ptr[b + window], wend):
                s = slot_of[ids[j]]
                # a row already read (not one prefilled and still awaiting its first read)
                if s >= 0 and last[s] < now and nxt[last[s]] == j:
                    _rekey(heap, hpos, hkey, s, j, size)
        elif b + window >= nb:
            wend = n
        h = 0
        for i in range(batch_ptr[b], batch_ptr[b + 1]):
            x = ids[i]
            ni = nxt[i]
            k = ni if ni < wend else big - i
            s = slot_of[x]
            if s >= 0:
                h += 1
                last[s] = i
                _rekey(heap, hpos, hkey, s, k, size)
                continue
            if size < capacity:
                s = size
                size += 1
                hkey[s] = k
                heap[size - 1] = s
                hpos[s] = size - 1
                _sift_up(heap, hpos, hkey, size - 1)
            else:
                top = heap[0]
                if k >= hkey[top]:
                    continue  # bypass
                slot_of[key[top]] = -1
                s = top
                hkey[s] = k
                _sift_down(heap, hpos, hkey, 0, size)
            key[s] = x
            last[s] = i
            slot_of[x] = s
        out[b] = h
    return out


# -- replay ------------------------------------------------------------------------------------
@dataclass
class ReplayResult:
    """Hits per policy, capacity and measured epoch; reads per measured epoch."""

    capacities: list[int]
    measured_epochs: list[int]
    reads: list[int]
    hits: dict[str, dict[int, list[int]]]
    seconds: dict[str, float]
    window: int

    def hit_rate(self, policy: str, capacity: int) -> float:
        """The hit rate ``policy`` reached with ``capacity`` rows."""
        tot = sum(self.reads)
        return sum(self.hits[policy][capacity]) / tot if tot else 0.0

    def as_dict(self) -> dict:
        """The results as a JSON-ready dict."""
        return {"capacities": self.capacities, "measured_epochs": self.measured_epochs,
                "reads_per_epoch": self.reads, "window_batches": self.window,
                "replay_seconds": self.seconds,
                "hits": {p: {str(c): v for c, v in d.items()} for p, d in self.hits.items()},
                "hit_rate": {p: {str(c): self.hit_rate(p, c) for c in d}
                             for p, d in self.hits.items()}}


def replay(trace: AccessTrace, capacities, policies=REPLAY_POLICIES, *,
           degree: np.ndarray | None = None, window: int = 4,
           presample_epochs: int = 1) -> ReplayResult:
    """Replay ``policies`` at each capacity (rows) on ``trace``; hits of the epochs after the
    first ``presample_epochs``.

    Static presample caches rank rows by their access counts over the first
    ``presample_epochs`` epochs (ties by ``degree``); dynamic caches run through the whole
    trace (the first epochs warm them); Belady replays the measured epochs only, starting with
    its own choice of rows (see :func:`belady_hits`); ``"belady-window"`` sees ``window``
    batches ahead, ``"belady"`` the whole trace. ``"optimal-static"`` is the best static set
    of each measured epoch for that epoch alone.
    """
    E = trace.num_epochs
    if not 0 < presample_epochs < E:
        raise LoaderArgumentError(f"Expected 0 < presample_epochs < epochs ({E}). "
                                  f"Got {presample_epochs} instead.")
    unknown = [p for p in policies if p not in REPLAY_POLICIES]
    if unknown:
        raise LoaderArgumentError(f"Expected policies among {REPLAY_POLICIES}. "
                                  f"Got {unknown} instead.")
    if "degree-static" in policies and degree is None:
        raise LoaderArgumentError("Expected the rows' degrees (row_degree) for the degree-static "
                                  "policy. Got degree=None instead.")
    caps = [int(c) for c in capacities]
    measured = list(range(presample_epochs, E))
    ep = trace.epoch_ptr
    b0 = int(ep[presample_epochs])
    ids, bp, n = trace.ids, trace.batch_ptr, trace.num_rows

    def per_epoch(per_batch, offset=0):
        return [int(per_batch[int(ep[e]) - offset:int(ep[e + 1]) - offset].sum())
                for e in measured]

    reads = per_epoch(np.diff(bp))
    hits: dict[str, dict[int, list[int]]] = {}
    secs: dict[str, float] = {}
    tail_ids = ids[bp[b0]:]
    tail_ptr = bp[b0:] - bp[b0]
    nxt = None
    for p in policies:
        t = time.perf_counter()
        hits[p] = {}
        if p in ("degree-static", "presample-static"):
            if p == "degree-static":
                order = row_order(degree)
            else:
                c = np.zeros(n, np.int32)
                count_rows(ids[:bp[b0]], c)
                order = row_order(c, degree)
            for k in caps:
                hits[p][k] = per_epoch(static_hits(ids, bp, static_mask(order, k, n)))
        elif p == "optimal-static":
            cs = {e: trace.counts(e) for e in measured}
            for k in caps:
                hits[p][k] = [optimal_static_hits(cs[e], k) for e in measured]
        elif p in ("lru", "sieve", "clock"):
            fn = {"lru": lru_hits, "sieve": sieve_hits, "clock": clock_hits}[p]
            for k in caps:
                hits[p][k] = per_epoch(fn(ids, bp, n, k))
        else:
            if nxt is None:
                nxt = next_use(tail_ids, n)
            w = window if p == "belady-window" else tail_ptr.shape[0]
            for k in caps:
                hits[p][k] = per_epoch(belady_hits(tail_ids, tail_ptr, n, k, w, nxt), b0)
        secs[p] = time.perf_counter() - t
        log.info("replayed %s at %d capacities in %.2f s", p, len(caps), secs[p])
    return ReplayResult(caps, measured, reads, hits, secs, int(window))
