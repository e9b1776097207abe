"""The streaming neighbour loader: sampling, feature gathering and host-to-device copies
overlapped on threads, with a bounded number of batches in flight.

Stages (one thread each; numba kernels and row reads release the GIL)::

    sample (batch k+2) -> gather (k+1) -> training loop (k)

With a CUDA device the gather stage reads rows chunk by chunk into a ring of two reused,
pinned staging buffers and copies each chunk to the GPU on a side CUDA stream with
``non_blocking=True`` while it gathers the next one; the training loop's stream waits on the
batch's event. Without CUDA, rows are gathered into reused host buffers that are the batch
(a buffer is reused only once nothing refers to it). An exception in a stage is raised in the
training loop (with its original traceback); leaving the loop early (``break``, an
exception, or dropping the iterator) stops and joins every stage thread.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from featurestore.errors import UnknownFeatureError
from loaders.errors import LoaderArgumentError
from loaders.loader import args as _compat
from loaders.loader.buffers import BufferPool, StagingRing
from loaders.loader.cast import cast_rows, resolve_dtype
from loaders.loader.node_attrs import NodeAttrs
from loaders.memory.budget import (
    LoaderPlan,
    available_memory,
    limit_allocator_slack,
    parse_size,
    plan_loader,
    resident_indptr_dtype,
)
from loaders.memory.cache import (
    POLICIES,
    FeatureCache,
    degree_counts,
    presample_counts,
    presample_scores,
    rank_rows,
)
from loaders.sample.relational import NTYPE
from loaders.sample.sampler import (
    CSCGraph,
    MiniBatch,
    NeighborSampler,
    SampledSubgraph,
    numba_threads,
)

__all__ = ["NeighborLoader", "LoaderStats", "resolve_input_nodes"]

log = logging.getLogger(__name__)

OUTPUTS = ("raw", "pyg", "dgl")
_POLL_S = 0.05


def resolve_input_nodes(store, input_nodes) -> tuple[str, np.ndarray]:
    """``(seed node type, seed ids)`` from the forms :class:`NeighborLoader` accepts.

    ``("paper", "train")`` (a split), ``("paper", ids)`` (or DGL's ``{"paper": ids}``),
    ``"train"`` (a split of the only node type), ``ids`` (homogeneous store) or ``None``
    (every node of the only node type, as PyG's ``input_nodes=None``); as in PyG, ``"paper"``
    or ``("paper", None)`` is every node of that type. ``ids`` may also be a boolean mask
    over the node type's nodes, as in PyG (``("paper", train_mask)``).
    """
    if input_nodes is None:
        ntype = store.resolve_ntype(None)
        return ntype, np.arange(store.num_nodes(ntype), dtype=np.int64)
    if isinstance(input_nodes, dict):  # DGL's {ntype: ids}
        if len(input_nodes) != 1:
            from loaders.errors import LoaderArgumentError
            raise LoaderArgumentError(f"Expected input nodes of one node type (a dict with one "
                                      f"key, as DGL's {{'paper': ids}}). Got keys "
                                      f"{list(input_nodes)} instead.")
        input_nodes = next(iter(input_nodes.items()))
    if isinstance(input_nodes, tuple) and len(input_nodes) == 2 and isinstance(input_nodes[0], str):
        ntype, what = input_nodes
        if what is None:  # PyG's ("paper", None): every node of the type
            ntype = store.resolve_ntype(ntype)
            return ntype, np.arange(store.num_nodes(ntype), dtype=np.int64)
        ids = store.split(what, ntype) if isinstance(what, str) else what
    elif isinstance(input_nodes, str) and input_nodes in store.node_types \
            and input_nodes not in store.split_names:  # PyG's "paper": every node of the type
        return input_nodes, np.arange(store.num_nodes(input_nodes), dtype=np.int64)
    elif isinstance(input_nodes, str):
        ntype = store.resolve_ntype(None)
        ids = store.split(input_nodes, ntype)
    else:
        ntype = store.resolve_ntype(None)
        ids = input_nodes
    if isinstance(ids, torch.Tensor):
        ids = ids.numpy()
    ids = np.asarray(ids)
    if ids.dtype == np.bool_ and ids.ndim == 1:  # PyG's boolean mask (data.train_mask)
        n = store.num_nodes(ntype)
        if ids.shape[0] != n:
            from featurestore.errors import InvalidIdsError
            raise InvalidIdsError(f"Expected a boolean mask of {n} entries (one per node of "
                                  f"type {ntype!r} of {store.url}). Got {ids.shape[0]} instead.")
        ids = np.flatnonzero(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        from featurestore.errors import InvalidIdsError
        raise InvalidIdsError(f"Expected 1-D integer input nodes for node type {ntype!r} of "
                              f"{store.url}. Got {ids.dtype} of shape {ids.shape} instead.")
    n = store.num_nodes(ntype)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        from featurestore.errors import IdsOutOfRangeError
        raise IdsOutOfRangeError(f"Expected input nodes in [0, {n}) for node type {ntype!r} of "
                                 f"{store.url}. Got ids in [{ids.min()}, {ids.max()}] instead.")
    return ntype, ids.astype(np.int64, copy=False)


def is_mask_input(input_nodes) -> bool:
    """Whether ``input_nodes`` gives its seeds as a boolean mask (PyG then reports each
    seed's node id as its ``input_id``, where ids given as indices report their position)."""
    if isinstance(input_nodes, dict) and len(input_nodes) == 1:
        input_nodes = next(iter(input_nodes.values()))
    elif isinstance(input_nodes, tuple) and len(input_nodes) == 2 \
            and isinstance(input_nodes[0], str):
        input_nodes = input_nodes[1]
    dtype = getattr(input_nodes, "dtype", None)
    return dtype in (torch.bool, np.bool_)


def _node_attrs(store, attrs, homogeneous, pyg_default: bool) -> NodeAttrs:
    """The node values and masks a loader carries (``attrs=``; by default all of them from a
    PyG view, as PyG slices ``data``'s node attributes)."""
    if attrs and homogeneous:
        raise LoaderArgumentError("Expected attrs=None with homogeneous=: the relational "
                                  "view carries x, y, node_type and edge_type only.")
    if attrs is None:
        attrs = "all" if pyg_default and not homogeneous else ()
    return NodeAttrs(store, attrs)


def _as_store(data):
    from loaders.datasets.views import as_store

    return as_store(data)


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


@dataclass
class LoaderStats:
    """Seconds each stage spent working, and the training loop spent waiting, since reset.

    ``gather`` includes, with a CUDA device, issuing the copies and waiting for staging
    buffers to come free.

    ``wait`` is the time the training loop blocked in ``next()``: the share of a training
    step spent waiting on data is ``wait / (time of the loop)``.

    With a memory budget whose features do not fit (``loader.plan.fits`` false), rows come
    through the feature cache: ``hits`` (rows served by the hot tier), ``misses`` (rows read
    from the store), ``reads`` (I/O requests issued for them, after merging neighbouring rows)
    and ``bytes_read``. ``overflows`` counts batch buffers made past the plan because the
    training loop held every planned one while asking for the next batch.
    """

    batches: int = 0
    sample: float = 0.0
    gather: float = 0.0
    wait: float = 0.0
    hits: int = 0
    misses: int = 0
    reads: int = 0
    bytes_read: int = 0
    overflows: int = 0

    def reset(self) -> None:
        """Zero every counter and time."""
        self.batches, self.sample, self.gather, self.wait = 0, 0.0, 0.0, 0.0
        self.hits = self.misses = self.reads = self.bytes_read = self.overflows = 0

    def per_batch_ms(self) -> dict[str, float]:
        """Milliseconds per batch of each stage and of the loop's wait."""
        n = max(self.batches, 1)
        return {k: round(1e3 * getattr(self, k) / n, 2)
                for k in ("sample", "gather", "wait")}

    @property
    def hit_rate(self) -> float:
        """Rows served by the hot tier over rows gathered through the cache."""
        return self.hits / max(self.hits + self.misses, 1)

    def per_batch(self) -> dict[str, float]:
        """Stage milliseconds and cache counters per batch, and the hit rate."""
        n = max(self.batches, 1)
        out = self.per_batch_ms()
        out.update(hits=round(self.hits / n), misses=round(self.misses / n),
                   reads=round(self.reads / n), mb_read=round(self.bytes_read / n / 1e6, 2),
                   hit_rate=round(self.hit_rate, 4))
        return out


@dataclass
class _Failure:
    """An exception raised in a stage thread, carried to the training loop."""

    exc: BaseException
    stage: str


_DONE = object()


def _on(stream):
    """``torch.cuda.stream(stream)``, or nothing for ``None`` (the CPU path)."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


@dataclass
class _Ready:
    """A batch whose device copies were issued on a side stream, with the event ending them."""

    batch: Any
    event: Any

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


def _seed_labels(sub: SampledSubgraph, ys: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """The seeds' labels: the first ``batch_size`` rows of the seed type's (seeds come first)."""
    y = ys.get(sub.seed_type)
    return None if y is None else y[: sub.batch_size]


def _check_int(name: str, v, lo: int, none_ok: bool = False) -> None:
    """An integer argument >= ``lo`` (not a float, a bool or a string that would be coerced)."""
    if v is None and none_ok:
        return
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo:
        raise LoaderArgumentError(f"Expected an integer {name} >= {lo}"
                                  f"{' or None' if none_ok else ''}. Got {v!r} instead.")


def _check_args(*, rank, world_size, cache, topology, num_threads, **ints) -> None:
    """The loader's integer arguments, ``rank < world_size``, ``cache`` and ``topology``."""
    lows = {"batch_size": 1, "prefetch": 1, "staging_bytes": 1, "batches_in_flight": 1,
            "presample_epochs": 0, "seed": 0}
    for name, v in ints.items():
        _check_int(name, v, lows[name])
    _check_int("num_threads", num_threads, 1, none_ok=True)
    _check_int("rank", rank, 0)
    _check_int("world_size", world_size, 1)
    if not 0 <= rank < world_size:
        raise LoaderArgumentError(f"Expected 0 <= rank < world_size. Got rank={rank}, "
                                  f"world_size={world_size} instead.")
    if cache not in (None, "auto") + POLICIES:
        raise LoaderArgumentError(f"Expected cache in {(None, 'auto') + POLICIES}. Got "
                                  f"{cache!r} instead.")
    if topology not in (None, "mmap", "memory"):
        raise LoaderArgumentError(f"Expected topology None, 'mmap' or 'memory'. Got "
                                  f"{topology!r} instead.")


class NeighborLoader:
    """Mini-batches of sampled subgraphs with their features, streamed from a store.

    Parameters
    ----------
    store
        An open :class:`featurestore.Store`.
    num_neighbors
        Fanouts per layer (``[15, 10, 5]``), or a dict per edge type / relation name; in
        PyG's order (the seeds' layer first) unless ``fanout_order="dgl"``. Also a
        ``dgl.dataloading.NeighborSampler`` or DGL's list of per-layer dicts. The argument
        order is PyG's: ``NeighborLoader(store, num_neighbors, input_nodes)``; a
        ``num_neighbors`` that is not a list or dict of integer fanouts (say, input nodes
        passed second) raises :class:`~loaders.errors.LoaderArgumentError`.
    input_nodes
        Seeds: ``("paper", "train")``, ``("paper", ids)``, a split name, an id array, or
        ``None`` (every node of a homogeneous store, as in PyG).
    fanout_order
        How a fanout list is read: ``"pyg"`` (first entry = the seeds' layer) or ``"dgl"``
        (first entry = the input layer, as ``dgl.dataloading.NeighborSampler([...])``).
        Default: ``"dgl"`` when ``output="dgl"``, else ``"pyg"``. A DGL sampler object is
        always read in DGL's order.
    transform
        PyG's ``transform=``: a callable applied to each batch (after the conversion to
        ``output``), in the loader's gather thread.
    homogeneous
        ``True`` or an order of the node types (``["paper", "author", "institution"]``, as
        OGB-LSC's R-GNN numbers them; default the store's): the relational view
        (:mod:`loaders.sample.relational`), each batch as one homogeneous graph, as PyG's
        ``HeteroData.to_homogeneous()`` and ``dgl.to_homogeneous`` make it, for the
        relational baselines (R-GNN, RGAT). ``output="pyg"`` yields ``Data`` with ``x`` (every
        node type's features: one width required), ``node_type``, ``edge_type`` (indices into
        ``store.node_types``/``store.edge_types``), ``n_id``/``e_id`` in the homogeneous
        numbering (offsets by type), ``y`` (``-1`` for unlabelled types); seeds first.
        ``output="dgl"`` yields blocks with ``srcdata``/``dstdata[dgl.NTYPE]`` and
        ``edata[dgl.ETYPE]`` (also ``edata["etype"]``). Fanouts then count per node over
        all its edge types, as on the homogenised graph (``fanout_per="node"``).
    attrs
        Per-node values (``"year"``) and split masks (``"train_mask"``, ``"val_mask"``,
        ``"test_mask"``) carried into each batch for every sampled node, as PyG slices node
        attributes (``batch["paper"].year``); ``"all"`` for every one the store has. Default:
        all of them when ``data`` is a PyG view (``PygNodePropPredDataset(...)[0]``,
        ``OGB_MAG(...)[0]``) and ``output="pyg"``, else none.
    fanout_per
        ``"edge_type"`` (PyG's and DGL's typed sampling: each fanout per node and edge type)
        or ``"node"`` (per node over all its edge types together, uniformly: what a sampler
        on the homogenised graph draws). Default: ``"node"`` with ``homogeneous``, else
        ``"edge_type"``. See :class:`loaders.sample.sampler.NeighborSampler`.
    dtype
        Cast features to this floating dtype on their way into the batch (``torch.float32``,
        ``np.float32`` or ``"float32"``): an fp16 store reaches an fp32 model without a pass
        over the batch (hits are cast in their copy from the cache, reads in their copy out
        of a staging chunk). Integer, boolean and complex dtypes are refused
        (:class:`~loaders.errors.LoaderArgumentError`). Default: the store's dtype.
    pin_memory
        Pin the host buffers of CPU batches (when CUDA is available; batches for a CUDA
        ``device`` always go through pinned buffers).
    **kwargs
        PyG's ``NeighborLoader``/PyTorch ``DataLoader`` and DGL ``DataLoader`` keywords: a
        no-op value (``num_workers=0``, ``directed=True``, ``subgraph_type="directional"``,
        ``disjoint=False``, ``filter_per_worker``...) is accepted; anything else raises
        :class:`~loaders.errors.UnsupportedArgumentError` naming our equivalent
        (``num_workers=4`` -> ``num_threads=``/``prefetch=``; see ``docs/compat.md``).
    batch_size, shuffle, drop_last
        As in PyTorch's ``DataLoader``; the order of each epoch comes from ``(seed, epoch)``.
    seed
        Seed of the shuffling and of the sampler's draws (``(seed, epoch, batch)``).
    output
        ``"raw"`` (:class:`~loaders.sample.sampler.MiniBatch`), ``"pyg"`` (``Data``/``HeteroData``)
        or ``"dgl"`` (``(input_nodes, output_nodes, blocks)``, needs DGL).
    device
        Where features, labels and edges go; default ``"cuda"`` when available, else ``"cpu"``.
    prefetch
        Batches each stage may hold ahead of the training loop.
    num_threads
        numba threads for sampling and gathering (default: numba's setting).
    replace
        Sample neighbours with replacement.
    feature
        Name of the feature to gather per node type (types without it get none); ``None``
        gathers none.
    labels
        Attach labels (store value ``label``) when present: for every sampled node of each
        node type that has them (PyG's ``y``, whose first ``batch_size`` rows are the seeds';
        ``MiniBatch.y_all``), and the seeds' (``MiniBatch.y``, DGL's ``label``). One
        vectorised lookup of the label array per node type and batch.
    staging_bytes
        Rows are gathered in chunks of this size. With a CUDA device each chunk goes through
        one of two pinned staging buffers to the GPU, so host memory for features stays
        bounded however large a batch is; on the CPU the chunks bound the reader's scratch
        memory.
    topology
        ``"mmap"`` (the store's CSC arrays memory-mapped) or ``"memory"`` (copied into the
        process, for tight memory budgets where feature reads would evict them). Default:
        memory-mapped, unless the budget's plan says the features do not fit.
    memory
        The loader's memory budget in bytes or as text (``"1.5GiB"``); default: what the
        process may still use (:func:`loaders.memory.budget.available_memory`: its cgroup limit,
        else 80% of physical memory, less what it holds). The loader plans every byte in it
        (:attr:`plan`). When the features do not fit, the topology is held resident, a hot
        tier of rows fills what is left, and missed rows are read around the page cache
        (``O_DIRECT``) so they evict nothing.
    cache
        How the hot tier is chosen when the features do not fit: ``"presample"`` (a
        sampling-only pass over an epoch's batches counts each row's accesses),
        ``"degree"`` (how often a node is a neighbour), ``"auto"`` (default: presample) or
        ``None`` (no cache: every row is read from the store).
    batches_in_flight
        Batch buffers the plan holds (host memory, CPU output): 2 (default) lets the next
        batch be gathered while the training loop holds the current one; 1 suits a loop
        that drops each batch before asking for the next (``del batch``), and saves a
        batch's worth of memory for the cache. Ignored without a plan or with CUDA
        (rows then go through the staging buffers).
    presample_epochs
        Epochs of batches the ``"presample"`` pass samples (1).
    rank, world_size
        Data-parallel training (DDP): every rank shuffles the inputs alike (same ``seed``)
        and takes its own contiguous share of ``len(inputs) // world_size`` of them, so the
        ranks see disjoint seeds and the same number of batches per epoch.

    Examples
    --------
    >>> loader = NeighborLoader(store, [15, 10, 5], ("paper", "train"), batch_size=1024,
    ...                         shuffle=True, output="pyg", device="cuda")
    >>> for batch in loader:
    ...     out = model(batch.x_dict, batch.edge_index_dict)
    """

    def __init__(self, store, num_neighbors, input_nodes=None, *, batch_size: int = 1024,
                 shuffle: bool = False, drop_last: bool = False, seed: int = 0,
                 output: str | None = None, device=None, prefetch: int = 2,
                 num_threads: int | None = None, replace: bool = False, feature: str = "feat",
                 labels: bool = True, staging_bytes: int = 64 << 20, topology: str | None = None,
                 rank: int = 0, world_size: int = 1, memory: int | str | None = None,
                 cache: str | None = "auto", batches_in_flight: int = 2,
                 presample_epochs: int = 1, fanout_order: str | None = None,
                 transform: Callable[[Any], Any] | None = None, pin_memory: bool = False,
                 dtype=None, homogeneous: bool = False, fanout_per: str | None = None,
                 attrs=None, **kwargs):
        # a PyG/DGL-like view (loaders.datasets.views) stands for its store and names its output
        output = output or getattr(store, "default_output", "raw")
        pyg_view = getattr(store, "default_output", None) == "pyg"
        #: what was passed as data (a view or the store), as PyG's ``loader.data``
        self.data = store
        store = _as_store(store)
        if output not in OUTPUTS:
            raise LoaderArgumentError(f"Expected output in {OUTPUTS}. Got {output!r} instead.")
        # PyG's/DGL's loader keywords: honoured or refused by name (docs/compat.md)
        peer = _compat.peer_options(kwargs, transform=transform, pin_memory=pin_memory)
        if peer.num_workers and num_threads is None:  # PyTorch's workers, as threads here
            num_threads = peer.num_workers
        if peer.prefetch_factor is not None:
            prefetch = peer.prefetch_factor
        num_neighbors, replace = _compat.fanouts(num_neighbors, input_nodes, output=output,
                                                 fanout_order=fanout_order, replace=replace)
        _check_args(batch_size=batch_size, prefetch=prefetch, num_threads=num_threads,
                    staging_bytes=staging_bytes, rank=rank, world_size=world_size,
                    batches_in_flight=batches_in_flight, presample_epochs=presample_epochs,
                    seed=seed, cache=cache, topology=topology)
        self.rank, self.world_size = int(rank), int(world_size)
        self.store = store
        self.seed_type, self.input_nodes = resolve_input_nodes(store, input_nodes)
        # PyG's input_id: positions in input_nodes, or the node ids when a mask gave them
        self._input_id = self.input_nodes if is_mask_input(input_nodes) else None
        if 0 < self.input_nodes.shape[0] < self.world_size:
            raise LoaderArgumentError(
                f"Expected at least world_size={self.world_size} input nodes (one per rank). "
                f"Got {self.input_nodes.shape[0]}: every rank would get no batch.")
        have = {t: store.feature_names(t) for t in store.node_types}
        if feature is not None and any(have.values()) and not any(
                feature in names for names in have.values()):
            raise UnknownFeatureError(f"Expected feature {feature!r} on some node type of "
                                      f"{store.url}. The store has {have}.")
        self._num_neighbors, self._replace = num_neighbors, replace
        self._fanout_per = fanout_per or ("node" if homogeneous else "edge_type")
        self.sampler = NeighborSampler(store, num_neighbors, replace=replace,
                                       num_threads=num_threads, topology=topology or "mmap",
                                       fanout_per=self._fanout_per)
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), shuffle, drop_last
        self.seed, self.output, self.prefetch = int(seed), output, int(prefetch)
        self.num_threads = num_threads
        self.device = torch.device(device if device is not None else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        self.pin = self.device.type == "cuda" or (peer.pin_memory and torch.cuda.is_available())
        self._setup_features(feature, dtype, labels, homogeneous)
        self._attrs = _node_attrs(store, attrs, homogeneous,
                                  pyg_default=pyg_view and output == "pyg")
        self._chunked = False  # tests set it to run the device path's chunking on the CPU
        # one staging ring per live iterator: two iterators gathering at once would otherwise
        # stage rows in each other's buffers (free rings are kept for the next epochs)
        self._staging_bytes = int(staging_bytes)
        self._free_rings: list[StagingRing] = []
        self._rings_lock = threading.Lock()
        self._ring_of_thread = threading.local()
        self._convert = peer.wrap(self._converter(output))
        self.epoch = 0
        self.stats = LoaderStats()
        #: the memory plan (:class:`~loaders.memory.budget.LoaderPlan`); ``print(loader.plan)``
        self.plan: LoaderPlan | None = None
        #: feature caches per node type, when the plan has the features not fit
        self.caches: dict[str, FeatureCache] = {}
        self._in_flight = int(batches_in_flight)
        self._plan(memory, cache, topology, staging_bytes, presample_epochs)
        self._setup_pools()

    def _setup_pools(self) -> None:
        """The batch buffer pools: per node type, or one for the relational view; bounded by
        the memory plan when the features do not fit."""
        planned = self.plan is not None and not self.plan.fits
        self._pools = {t: BufferPool(_torch_dtype(self.feature_dtypes[t]), f.shape[1:],
                                     pin=self.pin,
                                     max_buffers=self._in_flight if planned else 8,
                                     rows=self.plan.batch_rows.get(t, 0) if planned else 0)
                       for t, f in self.features.items()}
        if self._view is not None and self.features:  # one buffer holds every type's rows
            t0, f0 = next(iter(self.features.items()))
            self._pools = {NTYPE: BufferPool(
                _torch_dtype(self.feature_dtypes[t0]), f0.shape[1:], pin=self.pin,
                max_buffers=self._in_flight if planned else 8,
                rows=sum(self.plan.batch_rows.get(t, 0) for t in self.features) if planned
                else 0)}
        self._budgeted = planned

    def _setup_features(self, feature, dtype, labels: bool, homogeneous) -> None:
        """The feature arrays, their batch dtypes (``dtype=``), the label arrays and the
        relational view (``homogeneous=``)."""
        store = self.store
        self.features = {t: store.features(t, feature) for t in store.node_types
                         if feature in store.feature_names(t)}
        #: per node type, the dtype features reach the batch in (``dtype=``; the store's)
        self._cast = {t: resolve_dtype(dtype, f.dtype, f"feature {feature!r} of {t!r} in "
                                                       f"{store.url}")
                      for t, f in self.features.items()}
        self.feature_dtypes = {t: self._cast[t] if self._cast[t] is not None else f.dtype
                               for t, f in self.features.items()}
        #: label arrays of the node types that have them (all sampled nodes get theirs)
        self._labels = ({t: store.labels(t) for t in store.node_types
                         if "label" in store.value_names(t)} if labels else {})
        self._view = None
        if homogeneous:
            from loaders.sample.relational import HomogeneousView

            if len(set(self.feature_dtypes.values())) > 1:
                raise LoaderArgumentError(
                    f"Expected one feature dtype on every node type of {store.url} for "
                    f"homogeneous=True. Got {self.feature_dtypes} instead: pass dtype= (say "
                    f"torch.float32) to cast them alike.")
            self._view = HomogeneousView.from_store(store, self.features, homogeneous)

    # -- public --------------------------------------------------------------------------
    def _share(self) -> int:
        """Input nodes this rank sees per epoch (equal on every rank)."""
        return self.input_nodes.shape[0] // self.world_size

    def __len__(self) -> int:
        n, b = self._share(), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    @property
    def _staging(self) -> StagingRing:
        """The staging ring of the calling gather thread (its pipeline's), else a new one."""
        ring = getattr(self._ring_of_thread, "ring", None)
        if ring is None:
            ring = self._ring_of_thread.ring = self._take_ring()
        return ring

    def _take_ring(self) -> StagingRing:
        with self._rings_lock:
            if self._free_rings:
                return self._free_rings.pop()
        return StagingRing(self._staging_bytes, pin=self.pin)

    def _give_ring(self, ring: StagingRing) -> None:
        with self._rings_lock:
            self._free_rings.append(ring)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (its order and draws)."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self.epoch += 1
        return _Pipeline(self, epoch).run()

    def batch_order(self, epoch: int) -> list[np.ndarray]:
        """Positions in ``input_nodes`` of each batch of ``epoch`` (this rank's share)."""
        n = self.input_nodes.shape[0]
        pos = (np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle
               else np.arange(n))
        share = self._share()
        pos = pos[self.rank * share:(self.rank + 1) * share]
        return [pos[i:i + self.batch_size] for i in range(0, len(self) * self.batch_size,
                                                              self.batch_size)]

    # -- the memory plan -----------------------------------------------------------------
    def _plan(self, memory, cache, topology, staging_bytes, presample_epochs) -> None:
        """Make :attr:`plan`; when the features do not fit, hold the topology resident and
        build the feature caches (see :mod:`loaders.memory.budget`)."""
        if memory is None and cache is None:
            return  # no budget asked and no cache wanted: the page cache decides, as before
        if memory is None:
            budget, source = available_memory(), "available to this process (cgroup or RAM)"
        else:
            budget, source = parse_size(memory), "memory= argument"
        policy = None if cache is None else ("presample" if cache == "auto" else cache)
        g = self.sampler.graph
        rb = {t: f.row_bytes for t, f in self.features.items()}
        nrows = {t: f.shape[0] for t, f in self.features.items()}
        topo_bytes = sum(p.nbytes + i.nbytes for p, i in g.csc.values())
        cuda = self.device.type == "cuda"
        io = max([getattr(f.reader, "io_threads", 0) for f in self.features.values()] + [0])
        scratch = sum(f.reader.scratch_bytes() for f in self.features.values()
                      if hasattr(f.reader, "scratch_bytes"))
        casts = any(c is not None for c in self._cast.values())
        scratch += 2 * staging_bytes if cuda else (staging_bytes if casts else 0)
        in_flight = 0 if cuda else self._in_flight
        out_rb = {t: int(np.prod(f.shape[1:], dtype=np.int64)) * self.feature_dtypes[t].itemsize
                  for t, f in self.features.items()}  # batch rows, in the dtype= they get
        common = dict(budget=budget, budget_source=source, feature_row_bytes=rb,
                      batch_row_bytes=out_rb,
                      feature_rows=nrows, topology_bytes=topo_bytes, num_nodes=dict(g.num_nodes),
                      batches_in_flight=in_flight, subgraphs_in_flight=self.prefetch + 3,
                      io_threads=io, scratch_bytes=scratch, topology=topology, cache=policy)
        # first a bound without sampling: every type at its most rows per batch
        mult, fan = 1, self.sampler.fanouts
        for layer in range(fan.num_layers):
            widest = max(abs(v[layer]) if v[layer] >= 0 else 10**9 for v in fan.per_etype.values())
            mult *= 1 + max(widest, 0)
        bound = {t: min(n, self.batch_size * mult) for t, n in g.num_nodes.items() if t in rb}
        edges_bound = self.batch_size * mult * max(len(g.edge_types), 1)
        plan = plan_loader(batch_rows=bound, edges_per_batch=edges_bound, **common)
        if not plan.fits:
            limit_allocator_slack()  # freed batch arrays go back to the system, not to arenas
            if plan.topology == "memory" and topology is None:
                # resident first (read around the page cache), so that measuring batches and
                # ranking rows charge no page cache to a capped process
                t0 = time.perf_counter()
                self._resident_topology()
                common["topology"] = "memory"
                common["topology_bytes"] = sum(p.nbytes + i.nbytes
                                               for p, i in self.sampler.graph.csc.values())
                if memory is None:  # again, now that the mapped pages are gone; the resident
                    # copy is in what the process holds, and the plan counts it itself
                    common["budget"] = available_memory() + common["topology_bytes"]
                resident_s = time.perf_counter() - t0
            # a few batches for the real numbers, on a short-lived thread: the sampler's
            # per-thread id maps go with it
            rows, edges, k = _in_thread(self._measure_batches)
            plan = plan_loader(batch_rows=rows, edges_per_batch=edges, sampled_batches=k,
                               **common)
            if common["topology"] == "memory" and topology is None:
                plan.notes.append(f"topology copied in {resident_s:.1f} s")
        self.plan = plan
        if plan.fits:
            return
        if policy is not None and plan.cache_rows:
            t0 = time.perf_counter()
            scores = _in_thread(self._rank_scores, policy, presample_epochs, plan.cache_rows)
            plan.notes.append(f"{policy} ranking took {time.perf_counter() - t0:.1f} s")
            t0 = time.perf_counter()
            for t, n in plan.cache_rows.items():
                score, deg = scores.pop(t)
                ids = rank_rows(score, n, deg)
                del score, deg
                self.caches[t] = FeatureCache(self.features[t], ids, pin=self.pin,
                                              read_path=plan.read_path)
            plan.notes.append(f"cache filled in {time.perf_counter() - t0:.1f} s")
        for t, f in self.features.items():  # types without a hot tier: read around the cache
            if t not in self.caches:
                self.caches[t] = FeatureCache(f, np.empty(0, np.int64), pin=self.pin,
                                              read_path=plan.read_path)

    def _measure_batches(self, k: int = 8) -> tuple[dict[str, int], int, int]:
        """Most distinct rows per type and most edges over ``k`` batches of epoch 0."""
        order = self.batch_order(0)
        pick = np.linspace(0, len(order) - 1, min(k, len(order))).astype(int) if order else []
        rows = {t: 0 for t in self.features}
        edges = 0
        for j in sorted(set(int(i) for i in pick)):
            sub = self._sample(0, j, order[j])
            for t in rows:
                rows[t] = max(rows[t], int(sub.node[t].shape[0]))
            edges = max(edges, sub.num_edges)
        return rows, edges, len(pick)

    def _resident_topology(self) -> None:
        """Copy the CSC arrays into the process, reading around the page cache."""
        from featurestore.format import names as fmt

        store, g = self.store, self.sampler.graph
        csc = {}
        for et, (p, i) in g.csc.items():
            arrs = []
            for name, a in (("indptr", p), ("indices", i)):
                rows = (store.row_reader(fmt.edge_key(et, name))
                        if hasattr(store, "row_reader") else None)
                if rows is not None and rows.is_local:
                    arrs.append(rows.read_all())
                    rows.release_pages()  # pages a validation pass read through the map
                else:
                    arrs.append(np.array(a))
            arrs[0] = arrs[0].astype(resident_indptr_dtype(arrs[0]), copy=False)
            csc[et] = tuple(arrs)
        # the same files the store validated (its csc() gave the sampler's graph): no second pass
        graph = CSCGraph(dict(g.num_nodes), csc, validated=True)
        self.sampler = NeighborSampler(graph, self._num_neighbors, replace=self._replace,
                                       num_threads=self.num_threads, fanout_per=self._fanout_per)

    def _rank_scores(self, policy, epochs, cache_rows) -> dict:
        """Per type: ``(score, degree)``: the rank of each row (ties broken by degree).

        ``"degree"``: how often the node is a neighbour. ``"presample"``: accesses counted by
        a sampling-only pass over ``epochs`` epochs of batches (the first ones this loader
        will run), shrunk towards the mean count of nodes of the same degree
        (:func:`~loaders.memory.cache.presample_scores`), so that rows seen once by chance do not
        outrank rows the next epochs will need.
        """
        ntypes = list(cache_rows)
        g = self.sampler.graph
        deg = {t: degree_counts(g, t) for t in ntypes}
        if policy == "degree":
            return {t: (deg[t], deg[t]) for t in ntypes}
        counts = {t: np.zeros(self.features[t].shape[0], np.int64) for t in ntypes}
        nn = dict(g.num_nodes)
        for e in range(max(1, int(epochs))):
            order = self.batch_order(e)
            c = presample_counts(self.sampler, [self.input_nodes[p] for p in order],
                                 self.seed_type, ntypes, seed=self.seed, epoch=e, num_nodes=nn)
            for t in ntypes:
                counts[t] += c[t]
            del c
        return {t: (presample_scores(counts[t], deg[t]), deg[t]) for t in ntypes}

    # -- stages --------------------------------------------------------------------------
    def _sample(self, epoch: int, k: int, pos: np.ndarray) -> SampledSubgraph:
        return self.sampler.sample(self.input_nodes[pos], self.seed_type, seed=self.seed,
                                   epoch=epoch, batch=k,
                                   input_id=pos if self._input_id is None else self._input_id[pos])

    def _cached_gather(self, t: str, ids: np.ndarray, out, stage=None) -> None:
        c = self.caches[t]
        s0 = (c.stats.hits, c.stats.misses, c.stats.reads, c.stats.bytes_read)
        c.gather(ids, out=out, stage=stage)
        st = self.stats
        st.hits += c.stats.hits - s0[0]
        st.misses += c.stats.misses - s0[1]
        st.reads += c.stats.reads - s0[2]
        st.bytes_read += c.stats.bytes_read - s0[3]

    def _dropped(self) -> frozenset:
        """Names deleted from the data view (``del loader.data.x``): left out of batches."""
        return getattr(self.data, "deleted", frozenset())

    def _extras(self, sub: SampledSubgraph, dropped) -> tuple[dict, dict]:
        """The labels and attributes of a batch's nodes, less the dropped names."""
        ys = {} if "y" in dropped else self._label_rows(sub)
        attrs = self._attrs.rows(sub.node) if self._attrs.per_type else {}
        if dropped and attrs:
            attrs = {t: {k: v for k, v in a.items() if k not in dropped}
                     for t, a in attrs.items()}
        return ys, attrs

    def _gather(self, sub: SampledSubgraph, wait=None) -> MiniBatch:
        dropped = self._dropped()
        if "x" in dropped or not self.features:
            x = {}
        elif self._view is not None:  # one buffer, rows where the view puts them
            blocks, n = self._view.blocks(sub)
            buf = self._take(NTYPE, n, wait)
            for t, lo, hi, at in blocks:
                if t in self.features:
                    self._fill(t, sub.node[t][lo:hi], buf[at:at + hi - lo])
            x = {NTYPE: buf}
        else:
            x = {}
            for t in self.features:
                x[t] = self._take(t, sub.node[t].shape[0], wait)
                self._fill(t, sub.node[t], x[t])
        ys, attrs = self._extras(sub, dropped)
        if self.pin:
            ys = {t: v.pin_memory() for t, v in ys.items()}
        return MiniBatch(sub, x, _seed_labels(sub, ys), torch.device("cpu"), ys, attrs)

    def _take(self, key: str, n: int, wait) -> torch.Tensor:
        """A batch buffer of ``n`` rows from the pool ``key`` (counting overflows)."""
        pool = self._pools[key]
        o0 = pool.overflows
        buf = pool.take(n, wait if self._budgeted else None)
        if pool.overflows != o0:
            self.stats.overflows += 1
            if self.stats.overflows == 1:
                log.warning("the training loop holds every one of the plan's %d batch "
                            "buffers while asking for the next batch: one more made past "
                            "the memory plan (drop each batch before the next, or use "
                            "batches_in_flight=2)", pool.max_buffers)
        return buf

    def _fill(self, t: str, ids: np.ndarray, buf: torch.Tensor) -> None:
        """Rows ``ids`` of type ``t`` into the contiguous host buffer ``buf`` (cast with
        ``dtype=``): through the cache, or read in chunks."""
        f = self.features[t]
        step = max(1, self._staging.chunk_bytes // max(1, f.row_bytes))
        cast = self._cast[t] is not None
        stage = self._stage(t, min(step, ids.shape[0])) if cast else None
        if t in self.caches:  # reads need no staging: misses land in their rows
            self._cached_gather(t, ids, buf, stage)  # (or, cast, go through ``stage``)
            return
        for lo in range(0, ids.shape[0], step):  # chunks bound the reader's scratch memory
            if not cast:
                f.gather(ids[lo:lo + step], out=buf[lo:lo + step])
                continue
            m = min(step, ids.shape[0] - lo)  # read in the store's dtype, cast when copied
            f.gather(ids[lo:lo + m], out=stage[:m])
            cast_rows(stage[:m], np.arange(m, dtype=np.int64), buf[lo:lo + m].numpy())

    def _stage(self, t: str, rows: int) -> np.ndarray:
        """A staging buffer of ``rows`` rows of type ``t`` in the store's dtype (for casts)."""
        f = self.features[t]
        return self._staging.next(max(rows, 1), _torch_dtype(f.dtype), f.shape[1:]).numpy()

    def _label_rows(self, sub: SampledSubgraph) -> dict[str, torch.Tensor]:
        """Labels of every sampled node of each labelled type: one fancy index per type."""
        return {t: torch.from_numpy(np.asarray(lab[sub.node[t]], dtype=np.int64))
                for t, lab in self._labels.items()}

    def _gather_to_device(self, sub: SampledSubgraph, stream) -> MiniBatch:
        """Gather rows chunk by chunk into a ring of pinned staging buffers and copy each chunk
        to its slice of the device tensor on ``stream`` (non-blocking), so host memory stays at
        ``staging_bytes`` whatever the batch size. ``stream=None`` copies synchronously (the
        CPU path of the same code, used by the tests)."""
        dev = self.device

        def empty(n, t):
            f = self.features[t]
            with _on(stream):
                return torch.empty((n,) + f.shape[1:], dtype=_torch_dtype(self.feature_dtypes[t]),
                                   device=dev)

        dropped = self._dropped()
        if "x" in dropped or not self.features:
            x = {}
        elif self._view is not None:  # one tensor, rows where the view puts them
            blocks, n = self._view.blocks(sub)
            out = empty(n, next(iter(self.features)))
            for t, lo, hi, at in blocks:
                if t in self.features:
                    self._fill_device(t, sub.node[t][lo:hi], out[at:at + hi - lo], stream)
            x = {NTYPE: out}
        else:
            x = {}
            for t in self.features:
                x[t] = empty(sub.node[t].shape[0], t)
                self._fill_device(t, sub.node[t], x[t], stream)
        ys, attrs = self._extras(sub, dropped)
        with _on(stream):
            ys = {t: v.to(dev) for t, v in ys.items()}
            attrs = {t: {k: v.to(dev) for k, v in a.items()} for t, a in attrs.items()}
        mb = MiniBatch(sub, x, _seed_labels(sub, ys), dev, ys, attrs)
        with _on(stream):
            out = self._convert(mb)  # edge tensors go to the device on the side stream too
        ready = None
        if stream is not None:
            ready = torch.cuda.Event()
            ready.record(stream)
        return _Ready(out, ready)

    def _fill_device(self, t: str, ids: np.ndarray, out: torch.Tensor, stream) -> None:
        """Rows ``ids`` of type ``t`` into the device tensor ``out``, a chunk at a time through
        the staging ring (in the store's dtype; ``copy_`` casts for ``dtype=``)."""
        f, ring, n = self.features[t], self._staging, ids.shape[0]
        step = max(1, ring.chunk_bytes // max(1, f.row_bytes))
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            buf = ring.next(hi - lo, _torch_dtype(f.dtype), f.shape[1:])
            if t in self.caches:
                self._cached_gather(t, ids[lo:hi], buf)
            else:
                f.gather(ids[lo:hi], out=buf)
            with _on(stream):
                out[lo:hi].copy_(buf, non_blocking=stream is not None)
                ring.record(stream)

    def _converter(self, output: str) -> Callable[[MiniBatch], Any]:
        convert = self._converter_of(output)
        if self._view is None:
            return convert
        view = self._view
        return lambda mb: convert(view.apply(mb))

    def _converter_of(self, output: str) -> Callable[[MiniBatch], Any]:
        if output == "raw":
            return lambda mb: mb
        if output == "pyg":
            from loaders.pyg import to_pyg
            return to_pyg
        try:
            from loaders.dgl import to_dgl
        except ImportError as e:
            raise ImportError("output='dgl' needs DGL (dgl 2.1.0 with torch <= 2.2.1): "
                              "see the README's DGL section for its environment.") from e
        return to_dgl


def _in_thread(fn, *args):
    """``fn(*args)`` on a thread of its own (joined): what it keeps per thread (the sampler's
    id maps) is freed when it ends."""
    box: dict = {}

    def body():
        try:
            box["out"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["exc"] = e

    t = threading.Thread(target=body, name="loader-plan", daemon=True)
    t.start()
    t.join()
    if "exc" in box:
        raise box["exc"]
    return box["out"]


class _Pipeline:
    """One epoch: the stage threads, their queues, and their shutdown."""

    def __init__(self, loader: NeighborLoader, epoch: int):
        self.loader, self.epoch = loader, epoch
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.cuda = loader.device.type == "cuda"
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
        stats = self.loader.stats

        def timed(*a):
            t = time.perf_counter()
            out = fn(*a)
            setattr(stats, name, getattr(stats, name) + time.perf_counter() - t)
            return out

        def body():
            with numba_threads(self.loader.num_threads):
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
        ld = self.loader
        order = ld.batch_order(self.epoch)
        q_sample = queue.Queue(ld.prefetch)
        q_out = self.q_out = queue.Queue(ld.prefetch)

        def sample_all():
            for k, pos in enumerate(order):
                yield ld._sample(self.epoch, k, pos)

        self._stage("sample", None, q_sample, sample_all)
        self.ring = ld._take_ring()  # this iterator's own: another may gather at the same time

        def own_ring(fn):
            def gather(sub):
                ld._ring_of_thread.ring = self.ring  # the gather thread stages in it
                return fn(sub)
            return gather

        if self.cuda or ld._chunked:
            stream = torch.cuda.Stream(ld.device) if self.cuda else None
            self._stage("gather", q_sample, q_out,
                        own_ring(lambda sub: ld._gather_to_device(sub, stream)))
        else:
            self._stage("gather", q_sample, q_out,
                        own_ring(lambda sub: ld._convert(ld._gather(sub, self.may_wait))))
        try:
            for t in self.threads:
                t.start()
            stats = ld.stats
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
                if isinstance(item, _Ready):
                    item = item.deliver()
                box, item = [item], None
                yield box.pop()  # this frame keeps no reference: the loop owns the batch
        finally:
            self.close()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            if t.is_alive() and t is not threading.current_thread():
                t.join()
        ring, self.ring = self.ring, None
        if ring is not None and not any(t.is_alive() for t in self.threads):
            self.loader._give_ring(ring)
