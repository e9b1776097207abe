"""The gather: a sampled batch's feature rows, labels and node attributes into batch tensors.

One path with two sinks. The rows of each node type go chunk by chunk (``staging_bytes`` of
rows each) through the iterator's staging ring, read in the store's dtype, into the batch:

* :class:`HostSink` (CPU batches): the batch tensors are reused host buffers
  (:class:`~loaders.loader.buffers.BufferPool`, pinned with ``pin_memory``). A chunk that
  needs no cast is read straight into its rows; one that does (``dtype=``) is cast in its copy
  out of the staging chunk (:func:`~loaders.memory.cast.cast_rows`). Rows of a type with a
  feature cache come in one call for the whole batch: its misses land in their rows.
* :class:`DeviceSink` (a CUDA device): the batch tensors are on the device; each staged chunk
  is copied to its slice on a side stream (``non_blocking``, ``copy_`` casting for ``dtype=``),
  so host memory for features stays at the staging ring whatever the batch size. Without a
  stream the same copies run synchronously (the tests' CPU run of this sink). With a GPU
  tier (:mod:`loaders.memory.gpu_cache`) only its misses take that way; its hits are copied
  device to device.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import numpy as np
import torch

from loaders.errors import LoaderArgumentError
from loaders.loader.buffers import BufferPool, RingPool
from loaders.memory.cast import cast_rows, resolve_dtype
from loaders.loader.edge_attrs import EdgeAttrs, loader_edge_attrs
from loaders.loader.node_attrs import NodeAttrs, loader_attrs
from loaders.loader.stats import LoaderStats
from loaders.memory.cache import FeatureCache
from loaders.memory.gpu_cache import GpuTier
from loaders.sample.relational import NTYPE, HomogeneousView
from loaders.sample.sampler import MiniBatch, SampledSubgraph

__all__ = ["BatchGather", "HostSink", "DeviceSink", "Ready", "torch_dtype"]

log = logging.getLogger(__name__)


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    """The torch dtype of a numpy dtype."""
    return torch.from_numpy(np.empty(0, dtype)).dtype


def on(stream):
    """``torch.cuda.stream(stream)``, or nothing for ``None`` (the CPU path)."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


class Ready:
    """A batch, with the event ending its device copies when they were issued on a side
    stream (``None``: the batch is ready as it is)."""

    def __init__(self, batch: Any, event: Any = None):
        self.batch, self.event = batch, event

    def deliver(self):
        """In the training loop's thread: order its stream after the copies, and tell the
        caching allocator that the batch's tensors are used there (``record_stream``)."""
        if self.event is None:
            return self.batch
        cur = torch.cuda.current_stream()
        cur.wait_event(self.event)
        for t in _cuda_tensors(self.batch):
            t.record_stream(cur)
        return self.batch


def _cuda_tensors(obj, depth: int = 0):
    if depth > 6:
        return
    if isinstance(obj, torch.Tensor):
        if obj.is_cuda:
            yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _cuda_tensors(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _cuda_tensors(v, depth + 1)
    elif isinstance(obj, MiniBatch):
        yield from _cuda_tensors(obj.x, depth + 1)
        yield from _cuda_tensors(obj.y, depth + 1)
        yield from _cuda_tensors(obj.y_all, depth + 1)
    elif hasattr(obj, "stores"):  # PyG Data / HeteroData
        for store in obj.stores:
            yield from _cuda_tensors(dict(store.items()), depth + 1)
    elif hasattr(obj, "ndata") and hasattr(obj, "srcdata"):  # a DGL graph or block
        for frame in (obj.srcdata, obj.dstdata, obj.edata):
            try:
                yield from _cuda_tensors(dict(frame), depth + 1)
            except Exception:  # noqa: BLE001 - heterogeneous frames: skip
                pass


class HostSink:
    """Batch tensors in reused host buffers; a cast happens in the copy out of staging."""

    #: reads may land straight in the batch's rows
    in_place = True
    device = torch.device("cpu")

    def __init__(self, gather: BatchGather, wait=None):
        self.gather, self.wait = gather, wait

    def empty(self, key: str, t: str, n: int) -> torch.Tensor:
        """A batch buffer of ``n`` rows of the pool ``key`` (for rows of type ``t``)."""
        return self.gather.take(key, n, self.wait)

    def put(self, staged: torch.Tensor, out: torch.Tensor, ring) -> None:
        """Rows staged in the store's dtype into ``out``, cast."""
        m = staged.shape[0]
        cast_rows(staged.numpy(), np.arange(m, dtype=np.int64), out.numpy())

    def extras(self, ys: dict, attrs: dict, eattrs: dict) -> tuple[dict, dict, dict]:
        """Labels (pinned with ``pin``) and attributes as they go into the batch."""
        if self.gather.pin:
            ys = {t: v.pin_memory() for t, v in ys.items()}
        return ys, attrs, eattrs

    def finish(self, mb: MiniBatch, convert) -> Ready:
        """The converted batch."""
        return Ready(convert(mb))


class DeviceSink:
    """Batch tensors on ``device``; staged chunks copied there on ``stream`` (or in turn)."""

    in_place = False

    def __init__(self, gather: BatchGather, device: torch.device, stream=None):
        self.gather, self.device, self.stream = gather, device, stream

    def empty(self, key: str, t: str, n: int) -> torch.Tensor:
        """An uninitialised device tensor of ``n`` rows of type ``t`` in the batch's dtype."""
        f = self.gather.features[t]
        with on(self.stream):
            return torch.empty((n,) + f.shape[1:], dtype=torch_dtype(self.gather.feature_dtypes[t]),
                               device=self.device)

    def put(self, staged: torch.Tensor, out: torch.Tensor, ring) -> None:
        """Copy a staged chunk to its device slice (``copy_`` casts) and mark the ring slot."""
        with on(self.stream):
            out.copy_(staged, non_blocking=self.stream is not None)
            ring.record(self.stream)
        self.gather.stats.h2d_bytes += staged.nbytes

    def extras(self, ys: dict, attrs: dict, eattrs: dict) -> tuple[dict, dict, dict]:
        """Labels and node and edge attributes copied to the device on the stream."""
        dev = self.device
        with on(self.stream):
            ys = {t: v.to(dev) for t, v in ys.items()}
            attrs = {t: {k: v.to(dev) for k, v in a.items()} for t, a in attrs.items()}
            eattrs = {t: {k: v.to(dev) for k, v in a.items()} for t, a in eattrs.items()}
        return ys, attrs, eattrs

    def finish(self, mb: MiniBatch, convert) -> Ready:
        """The converted batch (edge tensors go to the device on the stream too) and the
        event that ends its copies."""
        with on(self.stream):
            out = convert(mb)
        ready = None
        if self.stream is not None:
            ready = torch.cuda.Event()
            ready.record(self.stream)
        return Ready(out, ready)


class BatchGather:
    """What a batch carries and how it is read: the features (cast with ``dtype=``), their
    caches and batch buffers, the labels, the node attributes and the relational view.

    Parameters
    ----------
    store
        The store.
    feature
        The feature gathered per node type (types without it get none; ``None``: none).
    dtype
        The floating dtype features reach the batch in (``None``: the store's; ``"auto"``:
        float32 for fp16 rows of ``output="pyg"``/``"dgl"`` batches, see
        :func:`~loaders.memory.cast.resolve_dtype`).
    output
        The loader's ``output=`` (what ``"auto"`` reads).
    labels
        Carry the labels (store value ``label``) of every sampled node of the types with one.
    homogeneous
        ``False``, or ``True``/an order of node types: the relational view.
    attrs, pyg_attrs
        The node values and split masks batches carry (``attrs=``; ``pyg_attrs``: all of
        them by default, as from a PyG view).
    pin
        Pin host buffers.
    staging_bytes
        Bytes of rows per chunk.
    stats
        The loader's counters (cache hits and misses, buffer overflows).
    """

    def __init__(self, store, feature, *, dtype, labels: bool, homogeneous, attrs,
                 pyg_attrs: bool, pin: bool, staging_bytes: int, stats: LoaderStats,
                 edge_attrs=None, output: str = "raw"):
        self.pin, self.stats = pin, stats
        self.features = {t: store.features(t, feature) for t in store.node_types
                         if feature in store.feature_names(t)}
        #: per node type, the dtype rows are cast to (``None``: the store's, no cast)
        self.casts = {t: resolve_dtype(dtype, f.dtype, f"feature {feature!r} of {t!r} in "
                                                       f"{store.url}", output)
                      for t, f in self.features.items()}
        #: per node type, the dtype features reach the batch in
        self.feature_dtypes = {t: self.casts[t] if self.casts[t] is not None else f.dtype
                               for t, f in self.features.items()}
        #: label arrays of the node types that have them (all sampled nodes get theirs)
        self.labels = ({t: store.labels(t) for t in store.node_types
                        if "label" in store.value_names(t)} if labels else {})
        self.view = None
        if homogeneous:
            if len(set(self.feature_dtypes.values())) > 1:
                raise LoaderArgumentError(
                    f"Expected one feature dtype on every node type of {store.url} for "
                    f"homogeneous=True. Got {self.feature_dtypes} instead: pass dtype= (say "
                    f"torch.float32) to cast them alike.")
            self.view = HomogeneousView.from_store(store, self.features, homogeneous)
        self.attrs: NodeAttrs = loader_attrs(store, attrs, homogeneous, pyg_attrs)
        self.edge_attrs: EdgeAttrs = loader_edge_attrs(store, edge_attrs, homogeneous)
        #: feature caches per node type, when the memory plan has the features not fit
        self.caches: dict[str, FeatureCache] = {}
        #: GPU tiers per node type (``gpu_cache_bytes=``), used by the device sink
        self.gpu_tiers: dict[str, GpuTier] = {}
        self.rings = RingPool(staging_bytes, pin=pin)
        self.pools: dict[str, BufferPool] = {}
        self.budgeted = False

    def make_pools(self, plan, in_flight: int) -> None:
        """The batch buffer pools: per node type, or one for the relational view; bounded by
        the memory plan when the features do not fit."""
        planned = plan is not None and not plan.fits
        kw = dict(pin=self.pin, max_buffers=in_flight if planned else 8)
        self.pools = {t: BufferPool(torch_dtype(self.feature_dtypes[t]), f.shape[1:], **kw,
                                    rows=plan.batch_rows.get(t, 0) if planned else 0)
                      for t, f in self.features.items()}
        if self.view is not None and self.features:  # one buffer holds every type's rows
            t0, f0 = next(iter(self.features.items()))
            self.pools = {NTYPE: BufferPool(
                torch_dtype(self.feature_dtypes[t0]), f0.shape[1:], **kw,
                rows=sum(plan.batch_rows.get(t, 0) for t in self.features) if planned else 0)}
        self.budgeted = planned

    def take(self, key: str, n: int, wait) -> torch.Tensor:
        """A batch buffer of ``n`` rows from the pool ``key`` (counting overflows)."""
        pool = self.pools[key]
        o0 = pool.overflows
        if self.budgeted and n > pool.rows:
            self._past_plan(key, n, pool)
        buf = pool.take(n, wait if self.budgeted else None)
        if pool.overflows != o0:
            self.stats.overflows += 1
            if self.stats.overflows == 1:
                log.warning("the training loop holds every one of the plan's %d batch "
                            "buffers while asking for the next batch: one more made past "
                            "the memory plan (drop each batch before the next, or use "
                            "batches_in_flight=2)", pool.max_buffers)
        return buf

    def _past_plan(self, key: str, n: int, pool) -> None:
        """Count (and warn once of) a batch with more rows than the plan's buffers hold."""
        st = self.stats
        row = int(torch.Size(pool.row_shape).numel()) * torch.empty((), dtype=pool.dtype) \
            .element_size()
        past = n * row  # a buffer of its own, besides the planned ones (BufferPool._new)
        st.past_plan_batches += 1
        if st.past_plan_batches == 1:
            log.warning("a batch of %d %s rows, more than the %d the memory plan's buffers hold "
                        "(the most of the batches it measured, plus headroom): a buffer of "
                        "its own, %.1f MiB past the plan, freed with the batch. Leave more "
                        "room (memory=) or lower batch_size or the fanouts if this repeats",
                        n, key, pool.rows, past / 2**20)
        st.past_plan_bytes = max(st.past_plan_bytes, past)

    # -- the path ------------------------------------------------------------------------
    def batch(self, sub: SampledSubgraph, sink, dropped=frozenset()) -> MiniBatch:
        """The :class:`MiniBatch` of ``sub`` in ``sink``'s tensors, less the names
        ``dropped`` (``del data.x``)."""
        if "x" in dropped or not self.features:
            x = {}
        elif self.view is not None:  # one tensor, rows where the view puts them
            blocks, n = self.view.blocks(sub)
            out = sink.empty(NTYPE, next(iter(self.features)), n)
            for t, lo, hi, at in blocks:
                if t in self.features:
                    self._fill(t, sub.node[t][lo:hi], out[at:at + hi - lo], sink)
            x = {NTYPE: out}
        else:
            x = {}
            for t in self.features:
                x[t] = sink.empty(t, t, sub.node[t].shape[0])
                self._fill(t, sub.node[t], x[t], sink)
        ys, attrs, eattrs = sink.extras(*self._extras(sub, dropped))
        y = ys.get(sub.seed_type)  # the seeds' labels: the first rows (seeds come first)
        y = None if y is None else y[: sub.batch_size]
        return MiniBatch(sub, x, y, sink.device, ys, attrs, eattrs)

    def _fill(self, t: str, ids: np.ndarray, out: torch.Tensor, sink) -> None:
        """Rows ``ids`` of type ``t`` into ``out``: on a device with a GPU tier, its hits
        device to device and the misses as below."""
        tier = self.gpu_tiers.get(t)
        if tier is None or sink.in_place:
            self._fill_rows(t, ids, out, sink)
            return
        s0 = (tier.stats.hits, tier.stats.misses, tier.stats.saved_bytes)
        with on(sink.stream):
            tier.gather(ids, out, lambda mi, mo: self._fill_rows(t, mi, mo, sink))
        st = self.stats
        st.gpu_hits += tier.stats.hits - s0[0]
        st.gpu_misses += tier.stats.misses - s0[1]
        st.gpu_saved_bytes += tier.stats.saved_bytes - s0[2]

    def _fill_rows(self, t: str, ids: np.ndarray, out: torch.Tensor, sink) -> None:
        """Rows ``ids`` of type ``t`` into ``out``, a chunk at a time through the staging
        ring in the store's dtype (chunks bound the reader's scratch memory)."""
        f, n, ring = self.features[t], ids.shape[0], self.rings.current()
        step = max(1, ring.chunk_bytes // max(1, f.row_bytes))
        cast = self.casts[t] is not None
        if sink.in_place and t in self.caches:  # misses land in their rows: one call
            stage = ring.next(max(min(step, n), 1), torch_dtype(f.dtype),
                              f.shape[1:]).numpy() if cast else None
            self._read(t, ids, out, stage)  # (cast: hits from the cache, misses via stage)
            return
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            if sink.in_place and not cast:
                self._read(t, ids[lo:hi], out[lo:hi])
                continue
            staged = ring.next(hi - lo, torch_dtype(f.dtype), f.shape[1:])
            self._read(t, ids[lo:hi], staged)
            sink.put(staged, out[lo:hi], ring)

    def _read(self, t: str, ids: np.ndarray, out, stage=None) -> None:
        """Rows ``ids`` of type ``t`` into ``out``: through the cache (counted), or read."""
        c = self.caches.get(t)
        if c is None:
            self.features[t].gather(ids, out=out)
            return
        s0 = (c.stats.hits, c.stats.misses, c.stats.reads, c.stats.bytes_read)
        c.gather(ids, out=out, stage=stage)
        st = self.stats
        st.hits += c.stats.hits - s0[0]
        st.misses += c.stats.misses - s0[1]
        st.reads += c.stats.reads - s0[2]
        st.bytes_read += c.stats.bytes_read - s0[3]

    def _extras(self, sub: SampledSubgraph, dropped) -> tuple[dict, dict, dict]:
        """The labels and attributes of a batch's nodes and edges, less the dropped names."""
        ys = {} if "y" in dropped else {
            t: torch.from_numpy(np.asarray(lab[sub.node[t]], dtype=np.int64))
            for t, lab in self.labels.items()}  # one fancy index per type
        attrs = self.attrs.rows(sub.node) if self.attrs.per_type else {}
        if dropped and attrs:
            attrs = {t: {k: v for k, v in a.items() if k not in dropped}
                     for t, a in attrs.items()}
        eattrs = self.edge_attrs.rows(sub.edge) if self.edge_attrs.per_type else {}
        if dropped and eattrs:
            eattrs = {t: {k: v for k, v in a.items() if k not in dropped}
                      for t, a in eattrs.items()}
        return ys, attrs, eattrs
