"""GraphBolt's ``DataLoader(datapipe)`` and ``MiniBatch`` over :class:`loaders.NeighborLoader`.

The datapipe's steps (:mod:`loaders.graphbolt.pipe`) become the loader's options: the item
sampler's seeds and batch size, ``sample_neighbor``'s fanouts (input layer first, as
GraphBolt lists them), ``sample_layer_neighbor`` as ``sampling="labor"``, the first feature
``fetch_feature`` names as ``feature=`` (gathered through the loader's cache and buffers),
``copy_to``'s device as ``device=``, ``num_workers`` as threads. Each epoch's batches follow the
item sampler's order (GraphBolt's shuffle), and each batch becomes a :class:`MiniBatch` with
GraphBolt's fields (``seed_nodes``, ``labels``, ``input_nodes``, ``node_features``, ``blocks``).
Features replaced in memory (``FeatureStore.update``) are read from there instead of the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from loaders.convert.dgl import require_dgl, to_dgl
from loaders.errors import LoaderArgumentError
from loaders.graphbolt.pipe import Datapipe, FetchStep, ItemSampler, DatapipeSteps
from loaders.loader import NeighborLoader
from loaders.sample.sampler import MiniBatch as RawBatch

__all__ = ["DataLoader", "MiniBatch", "ItemOrderLoader"]


@dataclass
class MiniBatch:
    """A batch as GraphBolt's ``MiniBatch`` carries it for node classification.

    ``seed_nodes`` and ``labels`` are the batch's items (a dict by node type when the items
    were an ``ItemSetDict``); ``input_nodes`` the store ids of ``blocks[0]``'s source nodes
    (a dict by node type on a typed store); ``node_features`` the fetched features of those
    nodes, keyed by name (``"feat"``) or by ``(node type, name)`` on a typed store;
    ``blocks`` the DGL blocks, input layer first; ``raw`` our loader's batch (the sampled
    subgraph in store ids).
    """

    seed_nodes: Any
    labels: Any
    input_nodes: Any
    node_features: dict
    blocks: list
    raw: RawBatch | None = field(default=None, repr=False)

    def num_layers(self) -> int:
        """The number of blocks (GNN layers)."""
        return len(self.blocks)

    def to(self, device) -> MiniBatch:
        """The batch on ``device`` (tensors and blocks; ``raw`` stays where it is)."""
        def move(v):
            if isinstance(v, dict):
                return {k: move(x) for k, x in v.items()}
            return v.to(device) if v is not None else None
        return MiniBatch(move(self.seed_nodes), move(self.labels), move(self.input_nodes),
                         move(self.node_features), [b.to(device) for b in self.blocks], self.raw)


class ItemOrderLoader(NeighborLoader):
    """:class:`loaders.NeighborLoader` whose epoch orders are given (:attr:`orders`, set
    by :class:`DataLoader` from its item sampler before each epoch). An epoch without a given
    order (the presample pass of the memory plan) uses the loader's own."""

    def __init__(self, *args, **kwargs):
        self.orders: dict[int, list[np.ndarray]] = {}
        super().__init__(*args, **kwargs)

    def batch_order(self, epoch: int) -> list[np.ndarray]:
        """The given order of ``epoch`` (used once), else the loader's own."""
        order = self.orders.pop(epoch, None)
        return order if order is not None else super().batch_order(epoch)


class DataLoader:
    """GraphBolt's ``DataLoader(datapipe, num_workers=...)`` over a store.

    ``datapipe`` is a chain begun by :class:`loaders.graphbolt.ItemSampler`; it must sample
    (``sample_neighbor`` or ``sample_layer_neighbor``). ``num_workers`` are threads of this
    process (sampling and gathering release the GIL); GraphBolt's other keywords
    (``persistent_workers``, ``overlap_feature_fetch``, ``overlap_graph_fetch``,
    ``max_uva_threads``) are accepted and need nothing: the loader always overlaps its stages.
    Further keywords are :class:`loaders.NeighborLoader`'s (``memory=``, ``cache=``,
    ``dtype=``...).

    Sampling draws come from ``(torch.initial_seed(), epoch, batch)``, not from torch's
    generator. A block's destination nodes are the seeds, in order, then the other nodes of
    the layer: the same nodes and edges as GraphBolt's with full neighbourhoods, but the
    non-seed nodes in another order (GraphBolt's compaction orders them by its hash map), so
    dropout masks fall on other rows than under GraphBolt.
    """

    def __init__(self, datapipe, num_workers: int = 0, persistent_workers: bool = True,
                 overlap_feature_fetch: bool = True,  # noqa: ARG002 - GraphBolt's keywords
                 overlap_graph_fetch: bool = False, max_uva_threads: int = 6144,  # noqa: ARG002
                 **options):
        if not isinstance(datapipe, DatapipeSteps):
            raise LoaderArgumentError(
                "Expected a datapipe begun by loaders.graphbolt.ItemSampler(...) (GraphBolt's "
                f"own datapipes run on GraphBolt's loader). Got {type(datapipe).__name__} "
                "instead.")
        pipe: Datapipe = datapipe.as_datapipe()
        if pipe.sampler is None:
            raise LoaderArgumentError(
                "Expected a sampling step in the datapipe (.sample_neighbor(graph, fanouts) or "
                ".sample_layer_neighbor(...)) before the DataLoader. Got none.")
        self.datapipe, self.num_workers = pipe, int(num_workers)
        self.persistent_workers = persistent_workers
        #: further :class:`loaders.NeighborLoader` keywords (``memory=``, ``cache=``...)
        self.options = options
        self.store = pipe.sampler.graph.store
        items: ItemSampler = pipe.items
        if items.seed_type is None and len(self.store.node_types) > 1:
            raise LoaderArgumentError(
                f"Expected an ItemSetDict {{node type: ItemSet}} of seeds on a store with node "
                f"types {self.store.node_types}. Got a plain ItemSet instead.")
        self.seed_type = self.store.resolve_ntype(items.seed_type)
        self._loaders: dict[str | None, ItemOrderLoader] = {}
        self.seed = int(torch.initial_seed()) % (1 << 62)
        self.epoch = 0
        require_dgl(pipe.device if pipe.device.type != "cpu" else None)

    def __len__(self) -> int:
        return len(self.datapipe.items)

    def loader(self, feature: str | None) -> ItemOrderLoader:
        """Our loader gathering ``feature`` (``None``: sampling only), made on first use."""
        if feature not in self._loaders:
            pipe, step = self.datapipe, self.datapipe.sampler
            threads = {} if self.num_workers == 0 else {"num_workers": self.num_workers}
            self._loaders[feature] = ItemOrderLoader(
                self.store, step.fanouts, (self.seed_type, pipe.items.items["seed_nodes"]),
                batch_size=pipe.items.batch_size, drop_last=pipe.items.drop_last,
                shuffle=False, seed=self.seed, output="raw", device=pipe.device,
                fanout_order="dgl", feature=feature, labels=False, replace=step.replace,
                sampling=step.sampling, layer_dependency=step.layer_dependency,
                **threads, **self.options)
        return self._loaders[feature]

    def __iter__(self) -> Iterator[MiniBatch]:
        pipe, epoch = self.datapipe, self.epoch
        self.epoch += 1
        fetch = pipe.fetch
        loader = self.loader(_store_feature(fetch))
        loader.set_epoch(epoch)
        loader.orders[epoch] = pipe.items.epoch_order()
        batches = iter(loader)  # now, while the loader's epoch is this one
        return (self._minibatch(mb, fetch) for mb in batches)

    def _minibatch(self, mb: RawBatch, fetch: FetchStep | None) -> MiniBatch:
        pipe, sub = self.datapipe, mb.subgraph
        input_nodes, _, blocks = to_dgl(mb)
        typed = len(self.store.node_types) > 1
        feats = {}
        for nt, names in (fetch.node_keys.items() if fetch else ()):
            ids = input_nodes[nt] if typed else input_nodes
            for name in names:
                x = mb.x.get(nt) if name == _store_feature(fetch) else None
                if x is None:
                    x = fetch.features.read("node", nt, name, ids).to(pipe.device)
                feats[(nt, name) if typed else name] = x
        pos = torch.from_numpy(np.asarray(sub.input_id, dtype=np.int64))
        items = pipe.items.items
        seeds = items["seed_nodes"][pos].to(pipe.device)
        labels = items["labels"][pos].to(pipe.device) if "labels" in items else None
        if pipe.items.seed_type is not None:
            seeds = {pipe.items.seed_type: seeds}
            labels = None if labels is None else {pipe.items.seed_type: labels}
        out = MiniBatch(seeds, labels, input_nodes, feats, blocks, mb)
        for fn in pipe.transforms:
            out = fn(out)
        return out


def _store_feature(fetch: FetchStep | None) -> str | None:
    """The first feature name asked for that no node type holds in memory: the loader
    gathers it (the others are read through the feature store)."""
    if fetch is None:
        return None
    for names in fetch.node_keys.values():
        for name in names:
            if all(fetch.features.in_memory(nt, name) is None or name not in ns
                   for nt, ns in fetch.node_keys.items()):
                return name
    return None
