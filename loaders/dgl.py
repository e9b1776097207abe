"""DGL side: DGL's ``DataLoader`` and ``NodeCollator`` calls over a store, and batches as DGL
message-flow graphs (blocks).

``to_dgl(batch)`` returns ``(input_nodes, output_nodes, blocks)`` as DGL's ``DataLoader`` with a
``dgl.dataloading.NeighborSampler`` yields them, so DGL training loops and ``dgl.nn`` modules
(``SAGEConv``, ``GATConv``, ``HeteroGraphConv``...) run unchanged::

    for input_nodes, output_nodes, blocks in loader:          # NeighborLoader(..., output="dgl")
        logits = model(blocks, blocks[0].srcdata["feat"])
        loss = F.cross_entropy(logits, blocks[-1].dstdata["label"])

The converter (:func:`to_dgl`, :func:`to_blocks`, :func:`require_dgl`) lives in
:mod:`loaders.convert.dgl`, below the loader, which calls it for ``output="dgl"``; it is
re-exported here. :func:`DataLoader` and :class:`NodeCollator` are built on the loader and the
sampler (this module sits above the loader). How sampled graphs map onto blocks, and the
fanout order, are described in :mod:`loaders.convert.dgl`. Edge prediction:
:func:`as_edge_prediction_sampler` and ``negative_sampler.Uniform``/``PerSourceUniform``/
``GlobalUniform`` (:mod:`loaders.dgl_link`, :mod:`loaders.dgl_negative`) for
``DataLoader(graph, seed_edges, sampler)``.

DGL is an optional dependency imported only when these functions run. The newest DGL
wheel for Linux is 2.1.0, which needs torch 2.0-2.2.1 and numpy 1.x; ``scripts/dgl-env.sh``
builds such an environment.
"""

from __future__ import annotations

import numpy as np
import torch

from loaders.convert.dgl import (
    INSTALL_HINT,
    DGLNotInstalledError,
    require_dgl,
    to_blocks,
    to_dgl,
)
from loaders import dgl_negative as negative_sampler
from loaders.dgl_link import (
    EdgePredictionSampler,
    as_edge_prediction_sampler,
    edge_prediction_loader,
    is_edge_prediction_sampler,
    reverse_edge_ids,
)
from loaders.errors import LoaderArgumentError
from loaders.loader import NeighborLoader
from loaders.loader.args import fanouts
from loaders.sample.relational import HomogeneousGraph
from loaders.sample.sampler import MiniBatch, NeighborSampler

__all__ = ["DataLoader", "to_dgl", "to_blocks", "require_dgl", "DGLNotInstalledError",
           "NodeCollator", "INSTALL_HINT", "as_edge_prediction_sampler",
           "EdgePredictionSampler", "negative_sampler", "reverse_edge_ids"]


def DataLoader(graph, indices, graph_sampler, device=None, **kwargs):  # noqa: N802 - DGL's name
    """DGL's ``DataLoader(graph, indices, graph_sampler, ...)`` over a store.

    ``graph`` is a store or a :class:`loaders.datasets.views.StoreGraph`; ``graph_sampler`` a
    ``dgl.dataloading.NeighborSampler`` (or ``MultiLayerFullNeighborSampler``) or its fanouts,
    input layer first as in DGL. Yields ``(input_nodes, output_nodes, blocks)`` as DGL does:
    this is :class:`loaders.NeighborLoader` with ``output="dgl"`` and DGL's argument order, so
    every keyword of docs/compat.md's DGL table applies. ``batch_size`` defaults to 1, as in
    DGL; ``device`` to the graph view's device (DGL's default is the graph's device).

    With an edge-prediction sampler (:func:`as_edge_prediction_sampler`, or DGL's own)
    ``indices`` are seed edge ids (``{etype: eids}`` on a typed store) and batches are
    ``(input_nodes, pair_graph, neg_pair_graph, blocks)`` (no ``neg_pair_graph`` without a
    negative sampler), as DGL's; see :mod:`loaders.dgl_link`.
    """
    if device is None:
        device = getattr(graph, "device", "cpu")
    kwargs.setdefault("batch_size", 1)
    if is_edge_prediction_sampler(graph_sampler):
        return edge_prediction_loader(graph, indices, graph_sampler, device=device, **kwargs)
    return NeighborLoader(graph, graph_sampler, indices, output="dgl", device=device, **kwargs)


class NodeCollator:
    """DGL's ``dgl.dataloading.NodeCollator(g, idx, graph_sampler)`` over a store's relational
    view, for scripts that feed a PyTorch ``DataLoader`` with ``collate_fn=collator.collate``
    (DGL's MAG240M RGAT example subclasses it).

    ``g`` is a :class:`loaders.sample.relational.HomogeneousGraph` (it stands for the script's
    homogeneous ``graph.dgl``), ``idx`` homogeneous ids of one node type and ``graph_sampler``
    a ``dgl.dataloading.NeighborSampler`` (or its fanouts, input layer first). :meth:`collate`
    returns ``(input_nodes, output_nodes, blocks)`` in homogeneous ids, the blocks carrying
    ``dgl.NTYPE``, ``dgl.ETYPE`` and ``edata["etype"]`` (no features: the script adds them).
    Picklable, for ``DataLoader`` worker processes; each batch's draws come from torch's
    generator (seeded per worker by PyTorch). Each fanout caps the in-edges drawn per node
    over all its relations together, as DGL's sampler on ``graph.dgl`` draws them
    (``fanout_per="node"``).
    """

    def __init__(self, g, idx, graph_sampler, **kwargs):
        if not isinstance(g, HomogeneousGraph):
            raise LoaderArgumentError("Expected loaders.HomogeneousGraph(store) as "
                                      f"the graph (it stands for graph.dgl). Got "
                                      f"{type(g).__name__} instead.")
        self.g = g
        self.seed_type, _ = g.seeds(idx)
        self.dataset = torch.as_tensor(np.asarray(idx), dtype=torch.int64)
        nn, replace = fanouts(graph_sampler, output="dgl")
        self.sampler = NeighborSampler(g.store, nn, replace=replace, fanout_per="node")

    def collate(self, items):
        """``(input_nodes, output_nodes, blocks)`` of the seeds ``items`` (homogeneous ids)."""
        ids = torch.stack([torch.as_tensor(i) for i in items]) if isinstance(items, list) \
            else torch.as_tensor(items)
        ntype, local = self.g.seeds(ids.reshape(-1))
        batch = int(torch.randint(1 << 62, ()))
        sub = self.sampler.sample(local, ntype, seed=0, epoch=0, batch=batch)
        mb = MiniBatch(sub, {}, None, torch.device("cpu"), {})
        return to_dgl(self.g.view.apply(mb))
