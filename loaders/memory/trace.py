"""The access trace the planner records: which feature rows a loader reads, batch by batch.

A loader reads, for every batch, the feature rows of the distinct nodes the sampler returned.
:func:`record_trace` records those row ids (sampling only, no features) for a few epochs, in
exactly the order and with exactly the draws of ``NeighborLoader(shuffle=True, seed=seed)``,
as an :class:`AccessTrace`. ``featurestore plan`` replays a static cache on it: the rows
ranked by :func:`loaders.memory.cache.row_order` (access counts of a presampled epoch, ties by
:func:`row_degree`), the first ``capacity`` of them as a :func:`static_mask`, and
:func:`static_hits` counts per batch the row reads that cache serves. (The replay of other
policies, LRU, SIEVE, CLOCK and Belady, is ``bench cache``'s: :mod:`benchmarks.cache_sim`.)

A *row read* is one distinct row in one batch; hit rate = row reads served / row reads.

Example::

    trace = record_trace(store, "train", [15, 10, 5], batch_size=1024, epochs=2)
    order = row_order(trace.counts(0), row_degree(store))
    hits = static_hits(trace.ids, trace.batch_ptr, static_mask(order, 1000, trace.num_rows))
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numba
import numpy as np

from loaders.memory.cache import count_rows
from loaders.sample.seeds import epoch_order, resolve_input_nodes

__all__ = ["AccessTrace", "record_trace", "record_loader_trace", "trace_batches", "row_degree",
           "static_mask", "static_hits", "epoch_order", "feature_type"]

log = logging.getLogger(__name__)

# -- traces ------------------------------------------------------------------------------------
@dataclass
class AccessTrace:
    """Row ids read per batch, batch after batch, epoch after epoch.

    Attributes
    ----------
    ids
        Row ids (of node type ``ntype``) in read order; distinct within a batch.
    batch_ptr
        ``ids[batch_ptr[b]:batch_ptr[b + 1]]`` are batch ``b``'s reads (``int64``).
    epoch_ptr
        Batches ``epoch_ptr[e]:epoch_ptr[e + 1]`` make epoch ``e``.
    num_rows
        Rows of ``ntype`` (ids are in ``[0, num_rows)``).
    seeds_per_batch
        Seeds of each batch.
    """

    ids: np.ndarray
    batch_ptr: np.ndarray
    epoch_ptr: np.ndarray
    num_rows: int
    ntype: str = "node"
    seeds_per_batch: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    @property
    def num_batches(self) -> int:
        """Batches in the trace, all epochs."""
        return int(self.batch_ptr.shape[0] - 1)

    @property
    def num_epochs(self) -> int:
        """Epochs in the trace."""
        return int(self.epoch_ptr.shape[0] - 1)

    def batch_sizes(self) -> np.ndarray:
        """Row reads of each batch."""
        return np.diff(self.batch_ptr)

    def epoch_reads(self, e: int) -> np.ndarray:
        """The ids read in epoch ``e``."""
        b0, b1 = int(self.epoch_ptr[e]), int(self.epoch_ptr[e + 1])
        return self.ids[self.batch_ptr[b0]:self.batch_ptr[b1]]

    def counts(self, e: int) -> np.ndarray:
        """How many batches of epoch ``e`` read each row (``int32``, length ``num_rows``)."""
        c = np.zeros(self.num_rows, np.int32)
        count_rows(self.epoch_reads(e), c)
        return c

    @classmethod
    def from_batches(cls, batches_per_epoch, num_rows: int, ntype: str = "node") -> AccessTrace:
        """From lists (one per epoch) of per-batch id arrays (tests and small examples)."""
        chunks, ptr, eptr = [], [0], [0]
        for batches in batches_per_epoch:
            for b in batches:
                b = np.asarray(b, np.int64)
                chunks.append(b)
                ptr.append(ptr[-1] + b.shape[0])
            eptr.append(len(ptr) - 1)
        ids = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
        return cls(ids.astype(_id_dtype(num_rows)), np.asarray(ptr, np.int64),
                   np.asarray(eptr, np.int64), int(num_rows), ntype)


def _id_dtype(num_rows: int):
    return np.int32 if num_rows < 2**31 else np.int64


def record_trace(store, input_nodes, num_neighbors, *, batch_size: int = 1024,
                 epochs: int = 3, ntype: str | None = None, seed: int = 0,
                 shuffle: bool = True, max_batches: int | None = None, replace: bool = False,
                 sampler=None, timings: list | None = None, on_batch=None) -> AccessTrace:
    """Sample ``epochs`` epochs (no features read) and record the rows of ``ntype`` each batch
    reads.

    Parameters
    ----------
    store
        A :class:`featurestore.Store`.
    input_nodes
        As :class:`loaders.NeighborLoader` takes them: ``("paper", "train")``, ``"train"``, ids.
    num_neighbors
        Fanouts, as :class:`loaders.NeighborSampler` takes them.
    ntype
        The node type whose rows are recorded (default: the seed type when it has features,
        else the only node type with features).
    max_batches
        Record only the first ``max_batches`` batches of each epoch.
    sampler
        A :class:`loaders.NeighborSampler` to reuse (its topology stays loaded).
    timings
        When given, the seconds each batch took to sample are appended to it.
    on_batch
        Called with each :class:`loaders.SampledSubgraph` (e.g. to count other node types).
    """
    from loaders.sample.sampler import NeighborSampler

    seed_type, inputs = resolve_input_nodes(store, input_nodes)
    ntype = ntype or feature_type(store, seed_type)
    s = sampler or NeighborSampler(store, num_neighbors, replace=replace)
    orders = [epoch_order(inputs.shape[0], batch_size, e, seed, shuffle)[:max_batches]
              for e in range(epochs)]

    def sample(e, k, pos):
        return s.sample(inputs[pos], seed_type, seed=seed, epoch=e, batch=k, input_id=pos)

    return trace_batches(sample, orders, ntype, store.num_nodes(ntype), timings, on_batch,
                         {"seed_type": seed_type, "num_inputs": int(inputs.shape[0]),
                          "batch_size": int(batch_size), "seed": seed, "shuffle": shuffle})


def record_loader_trace(loader, *, epochs: int = 2, ntype: str | None = None,
                        max_batches: int | None = None, timings: list | None = None,
                        on_batch=None) -> AccessTrace:
    """:func:`record_trace` of any loader's batches (sampling only, no features), in its own
    order and with its own draws (``loader.batch_order``, ``loader.sample_batch``): for a
    :class:`loaders.LinkNeighborLoader`, link batches (positives, negatives, both endpoints'
    neighbourhoods); ``seeds_per_batch`` counts its inputs (seed edges for a link loader)."""
    ntype = ntype or feature_type(loader.store, loader.seed_type)
    orders = [loader.batch_order(e)[:max_batches] for e in range(epochs)]
    return trace_batches(loader.sample_batch, orders, ntype, loader.store.num_nodes(ntype),
                         timings, on_batch,
                         {"seed_type": loader.seed_type,
                          "num_inputs": int(loader.input_nodes.shape[0]),
                          "batch_size": int(loader.batch_size), "seed": loader.seed,
                          "shuffle": loader.shuffle})


def trace_batches(sample, orders, ntype: str, n_rows: int, timings: list | None = None,
                  on_batch=None, meta: dict | None = None) -> AccessTrace:
    """The trace of ``sample(epoch, k, positions)`` over ``orders`` (per epoch, the input
    positions of each batch): the rows of ``ntype`` each sampled subgraph holds."""
    dt = _id_dtype(n_rows)
    chunks, ptr, eptr, seeds_pb = [], [0], [0], []
    t0 = time.perf_counter()
    for e, order in enumerate(orders):
        for k, pos in enumerate(order):
            t = time.perf_counter()
            sub = sample(e, k, pos)
            if timings is not None:
                timings.append(time.perf_counter() - t)
            if on_batch is not None:
                on_batch(sub)
            ids = sub.node[ntype]
            chunks.append(ids.astype(dt))
            ptr.append(ptr[-1] + ids.shape[0])
            seeds_pb.append(pos.shape[0])
        eptr.append(len(ptr) - 1)
    log.info("recorded %d epochs, %d batches, %d row reads in %.1f s", len(orders),
             len(ptr) - 1, ptr[-1], time.perf_counter() - t0)
    ids = np.concatenate(chunks) if chunks else np.zeros(0, dt)
    return AccessTrace(ids, np.asarray(ptr, np.int64), np.asarray(eptr, np.int64), n_rows, ntype,
                       np.asarray(seeds_pb, np.int64),
                       dict(meta or {}, sample_seconds=time.perf_counter() - t0))


def feature_type(store, seed_type: str, feature: str = "feat") -> str:
    """The node type whose feature rows a loader reads: ``seed_type`` when it has
    ``feature``, else the only node type that has it."""
    if feature in store.feature_names(seed_type):
        return seed_type
    having = [t for t in store.node_types if feature in store.feature_names(t)]
    if len(having) != 1:
        from featurestore.errors import UnknownFeatureError

        raise UnknownFeatureError(f"Expected one node type with feature {feature!r} in "
                                  f"{store.url} (or the seed type {seed_type!r} to have it). "
                                  f"Got {having} instead; name the node type.")
    return having[0]


# -- ranking ---------------------------------------------------------------------------------
def row_degree(store, ntype: str | None = None) -> np.ndarray:
    """How often each row of ``ntype`` can be drawn as a neighbour: its occurrences in the
    ``indices`` of every edge type whose source is ``ntype`` (``int64``, length num_nodes).

    Counted with a numba loop straight over the (memory-mapped) ``indices``: no copy.
    """
    ntype = store.resolve_ntype(ntype)
    deg = np.zeros(store.num_nodes(ntype), np.int64)
    for et in store.edge_types:
        if et.src == ntype:
            count_rows(store.csc(et)[1], deg)
    return deg


def static_mask(order: np.ndarray, capacity: int, num_rows: int) -> np.ndarray:
    """A boolean mask of the first ``capacity`` rows of ``order``."""
    m = np.zeros(num_rows, np.bool_)
    m[order[:max(0, int(capacity))]] = True
    return m


# -- static replay ----------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def static_hits(ids, batch_ptr, mask):
    """Per batch, the reads of rows in ``mask`` (a static cache)."""
    nb = batch_ptr.shape[0] - 1
    out = np.zeros(nb, np.int64)
    for b in range(nb):
        h = 0
        for i in range(batch_ptr[b], batch_ptr[b + 1]):
            if mask[ids[i]]:
                h += 1
        out[b] = h
    return out


