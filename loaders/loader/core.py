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

:class:`NeighborLoader` ties the parts together: its arguments (:mod:`~loaders.loader.args`,
seeds from :mod:`loaders.sample.seeds`), the memory plan (:mod:`~loaders.loader.planning`),
the gather (:mod:`~loaders.loader.gather`) and the stage threads
(:mod:`~loaders.loader.pipeline`); batches leave as ``output=`` says
(:mod:`loaders.convert`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from loaders.convert import OUTPUTS, converter
from loaders.errors import LoaderArgumentError
from loaders.loader.args import check_args, check_feature, fanouts, peer_options
from loaders.loader.gather import BatchGather, DeviceSink, HostSink
from loaders.loader.pipeline import Pipeline
from loaders.loader.planning import build_gpu_tiers, plan_memory, resident_topology
from loaders.loader.stats import LoaderStats
from loaders.memory.budget import LoaderPlan, parse_size
from loaders.memory.cache import FeatureCache
from loaders.sample.sampler import MiniBatch, NeighborSampler, SampledSubgraph
from loaders.sample.seeds import as_store, epoch_order, is_mask_input, resolve_input_nodes

__all__ = ["NeighborLoader"]

log = logging.getLogger(__name__)


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
    edge_attrs
        Edge features (PyG's ``edge_attr``) and per-edge values (``relation``, ``time``) of
        the sampled edges, read by ``e_id`` (:mod:`~loaders.loader.edge_attrs`):
        ``batch.edge_attr`` / ``batch[edge_type].relation``. Default: all the store has
        (none in the relational view); ``()`` for none, or names.
    fanout_per
        ``"edge_type"`` (PyG's and DGL's typed sampling: each fanout per node and edge type)
        or ``"node"`` (per node over all its edge types together, uniformly: what a sampler
        on the homogenised graph draws). Default: ``"node"`` with ``homogeneous``, else
        ``"edge_type"``. See :class:`loaders.sample.sampler.NeighborSampler`, also for
        ``sampling="uniform"|"labor"`` (opt-in, fewer rows per batch) and ``layer_dependency``.
    disjoint
        PyG's ``disjoint=True``: one tree per seed (``n_id`` repeats shared nodes), and
        ``batch.batch``, each node's seed index (``subgraph.batch`` raw). Not for DGL/links.
    dtype
        Cast features to this floating dtype (``torch.float32``, ``"float32"``) on their way
        into the batch, in the copy from the cache or a staging chunk (with CUDA on the
        device); ``None`` keeps the store's. Default ``"auto"``: fp16 features reach
        ``output="pyg"``/``"dgl"`` batches as float32 (PyG's and DGL's layers are float32),
        other dtypes and ``"raw"`` batches as stored.
    pin_memory
        Pin the host buffers of CPU batches when CUDA is there (CUDA batches always are).
    **kwargs
        PyG's ``NeighborLoader``/PyTorch ``DataLoader`` and DGL ``DataLoader`` keywords: a
        no-op value (``num_workers=0``, ``directed=True``, ``filter_per_worker``...) is
        accepted; anything else raises :class:`~loaders.errors.UnsupportedArgumentError`
        naming our equivalent (docs/compat.md); ``num_workers=N`` is ``num_threads=N`` up to
        the cores available.
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
        The feature gathered per node type (none for types without it; ``None``: none).
    labels
        Attach labels (store value ``label``) of every sampled node of a labelled type (PyG's
        ``y``, seeds first; ``MiniBatch.y_all``) and of the seeds (``MiniBatch.y``, DGL's).
    staging_bytes
        Rows are gathered in chunks of this size: with CUDA through one of two pinned
        staging buffers (host memory stays bounded); on the CPU it bounds reader scratch.
    topology
        ``"mmap"`` (the CSC memory-mapped), ``"memory"`` (copied into the process) or
        ``"packed"`` (copied, ids in ``ceil(log2 N)`` bits). Default: mapped, unless the plan
        says the features do not fit; then packed, the bytes saved going to the cache.
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
        Host batch buffers the plan holds (CPU output): 2 (default) serves a loop that holds a
        batch while asking for the next; 1 one that drops it first, for more cache rows.
    presample_epochs
        Epochs of batches the ``"presample"`` pass samples (1).
    gpu_cache_bytes
        Device memory for a GPU tier of the feature cache (bytes or text, ``"8GiB"``; default
        0: none): the hottest rows by the presample ranking stay on the GPU, its hits are
        copied device to device and only the misses cross the host-to-device link
        (:mod:`loaders.memory.gpu_cache`; ``stats.gpu_hits``, ``stats.gpu_saved_bytes``). The
        batches are the same with or without it.
    rank, world_size
        Data-parallel training (DDP): every rank shuffles the inputs alike (same ``seed``)
        and takes its own share of ``len(inputs) // world_size`` of them (disjoint seeds).

    Example::

        loader = NeighborLoader(store, [15, 10, 5], ("paper", "train"), batch_size=1024,
                                shuffle=True, output="pyg", device="cuda")
        for batch in loader:
            out = model(batch.x_dict, batch.edge_index_dict)
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
                 dtype="auto", homogeneous: bool = False, fanout_per: str | None = None,
                 attrs=None, edge_attrs=None, gpu_cache_bytes: int | str = 0,
                 sampling: str = "uniform", layer_dependency: bool = False,
                 disjoint: bool = False, **kwargs):
        # a PyG/DGL-like view (loaders.datasets.views) stands for its store and names its output
        output = output or getattr(store, "default_output", "raw")
        pyg_view = getattr(store, "default_output", None) == "pyg"
        #: what was passed as data (a view or the store), as PyG's ``loader.data``
        self.data = store
        store = as_store(store)
        if output not in OUTPUTS:
            raise LoaderArgumentError(f"Expected output in {OUTPUTS}. Got {output!r} instead.")
        # PyG's/DGL's loader keywords: honoured or refused by name (docs/compat.md)
        peer = peer_options(kwargs, transform=transform, pin_memory=pin_memory)
        num_threads = peer.sampling_threads(num_threads)  # num_workers=, as threads here
        if peer.prefetch_factor is not None:
            prefetch = peer.prefetch_factor
        num_neighbors, replace = fanouts(num_neighbors, input_nodes, output=output,
                                         fanout_order=fanout_order, replace=replace)
        check_args(batch_size=batch_size, prefetch=prefetch, num_threads=num_threads,
                   staging_bytes=staging_bytes, rank=rank, world_size=world_size,
                   batches_in_flight=batches_in_flight, presample_epochs=presample_epochs,
                   seed=seed, cache=cache, topology=topology, disjoint=(disjoint, output))
        self.rank, self.world_size = int(rank), int(world_size)
        self.store = store
        self._set_inputs(input_nodes)
        check_feature(store, feature)
        #: how the sampler is built (again, over a resident topology, by the memory plan)
        self.sampler_options = dict(
            num_neighbors=num_neighbors, replace=replace, num_threads=num_threads,
            fanout_per=fanout_per or ("node" if homogeneous else "edge_type"),
            sampling=sampling, layer_dependency=layer_dependency, disjoint=disjoint)
        self.sampler = NeighborSampler(store, **self.sampler_options)
        if topology in ("memory", "packed"):  # read around the page cache
            resident_topology(self, pack=topology == "packed")
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), shuffle, drop_last
        self.seed, self.output, self.prefetch = int(seed), output, int(prefetch)
        self.num_threads = num_threads
        self.device = torch.device(device if device is not None else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        self.pin = self.device.type == "cuda" or (peer.pin_memory and torch.cuda.is_available())
        self.stats = LoaderStats()
        #: what batches carry and how rows reach them (:mod:`loaders.loader.gather`)
        self.gatherer = BatchGather(store, feature, dtype=dtype, labels=labels,
                                    homogeneous=homogeneous, attrs=attrs,
                                    pyg_attrs=pyg_view and output == "pyg", pin=self.pin,
                                    staging_bytes=int(staging_bytes), stats=self.stats,
                                    edge_attrs=edge_attrs, output=output)
        self._chunked = False  # tests set it to run the device path's chunking on the CPU
        self._convert = peer.wrap(self._converter(output))
        self.epoch = 0
        #: the memory plan (:class:`~loaders.memory.budget.LoaderPlan`); ``print(loader.plan)``
        self.plan: LoaderPlan | None = None
        self.batches_in_flight = int(batches_in_flight)
        plan_memory(self, memory, cache, topology, staging_bytes, presample_epochs)
        self.gatherer.make_pools(self.plan, self.batches_in_flight)
        gpu_cache_bytes = parse_size(gpu_cache_bytes) if gpu_cache_bytes else 0
        if gpu_cache_bytes:
            if self.device.type != "cuda":
                log.warning("gpu_cache_bytes=%d without a CUDA device: the tier is held on "
                            "%s and serves only the device path", gpu_cache_bytes, self.device)
            build_gpu_tiers(self, gpu_cache_bytes, presample_epochs)

    def _set_inputs(self, input_nodes) -> None:
        """The seed type and ids, and PyG's ``input_id`` of each (positions in
        ``input_nodes``, or the node ids when a mask gave them)."""
        self.seed_type, self.input_nodes = resolve_input_nodes(self.store, input_nodes)
        self._input_id = self.input_nodes if is_mask_input(input_nodes) else None
        if 0 < self.input_nodes.shape[0] < self.world_size:
            raise LoaderArgumentError(
                f"Expected at least world_size={self.world_size} input nodes (one per rank). "
                f"Got {self.input_nodes.shape[0]}: every rank would get no batch.")

    @property
    def features(self) -> dict:
        """The feature arrays gathered, per node type."""
        return self.gatherer.features

    @property
    def feature_dtypes(self) -> dict[str, np.dtype]:
        """Per node type, the dtype features reach the batch in (``dtype=``; the store's)."""
        return self.gatherer.feature_dtypes

    @property
    def caches(self) -> dict[str, FeatureCache]:
        """Feature caches per node type, when the plan has the features not fit."""
        return self.gatherer.caches

    @property
    def _pools(self) -> dict:
        return self.gatherer.pools

    # -- public --------------------------------------------------------------------------
    @property
    def dataset(self) -> range:
        """``range(len(inputs))``, as PyG's loaders' (``len(loader.dataset)``: the seeds)."""
        return range(int(self.input_nodes.shape[0]))

    def __len__(self) -> int:
        n, b = self.input_nodes.shape[0] // self.world_size, self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (its order and draws)."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        self.epoch += 1
        return Pipeline(lambda: self._samples(epoch), self._make_gather,
                        rings=self.gatherer.rings, stats=self.stats,
                        num_threads=self.num_threads, prefetch=self.prefetch).run()

    def batch_order(self, epoch: int) -> list[np.ndarray]:
        """Positions in ``input_nodes`` of each batch of ``epoch`` (this rank's share)."""
        return epoch_order(self.input_nodes.shape[0], self.batch_size, epoch, self.seed,
                           self.shuffle, self.drop_last, rank=self.rank,
                           world_size=self.world_size)

    def batch_seeds(self, pos: np.ndarray) -> np.ndarray:
        """The seeds of the batch of inputs at positions ``pos``."""
        return self.input_nodes[pos]

    def sample_batch(self, epoch: int, k: int, pos: np.ndarray) -> SampledSubgraph:
        """Batch ``k`` of ``epoch``, of the seeds at positions ``pos`` (sampled only)."""
        ids = pos.astype(np.int64) if self._input_id is None else self._input_id[pos]
        return self.sampler.sample(self.input_nodes[pos], self.seed_type, seed=self.seed,
                                   epoch=epoch, batch=k, input_id=ids)

    # -- stages --------------------------------------------------------------------------
    def _samples(self, epoch: int) -> Iterator[SampledSubgraph]:
        """The epoch's order (made now), and its batches sampled as they are asked for."""
        order = self.batch_order(epoch)
        return (self.sample_batch(epoch, k, pos) for k, pos in enumerate(order))

    def _make_gather(self, may_wait: Callable[[], bool]) -> Callable:
        """For one iterator: the gather stage's function. With a CUDA device (or
        ``_chunked``) rows go to the device sink through the staging ring, copied on a side
        stream of this iterator's; else into host buffers (waiting on them while
        ``may_wait()``)."""
        g, convert = self.gatherer, self._convert
        if self.device.type == "cuda" or self._chunked:
            stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
            sink = DeviceSink(g, self.device, stream)
        else:
            sink = HostSink(g, may_wait)
        return lambda sub: sink.finish(g.batch(sub, sink, self._dropped()), convert)

    def _dropped(self) -> frozenset:
        """Names deleted from the data view (``del loader.data.x``): left out of batches."""
        return getattr(self.data, "deleted", frozenset())

    def _converter(self, output: str) -> Callable[[MiniBatch], Any]:
        convert = converter(output)
        if self.gatherer.view is None:
            return convert
        view = self.gatherer.view
        return lambda mb: convert(view.apply(mb))
