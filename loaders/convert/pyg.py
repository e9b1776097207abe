"""Batches as PyG ``Data``/``HeteroData``: what PyG's ``NeighborLoader`` yields.

:func:`to_pyg` converts a :class:`~loaders.sample.sampler.MiniBatch` into ``Data`` (one node
and edge type) or ``HeteroData`` with ``x``, ``y``, ``edge_index``, ``n_id``, ``e_id``,
``batch_size``, ``input_id``, ``num_sampled_nodes`` and ``num_sampled_edges``, so
``trim_to_layer`` works; a disjoint batch also ``batch`` (each node's seed index, as PyG).
As in PyG, ``y`` holds the label of every sampled node of each node type that has labels
(``MiniBatch.y_all``), so the seeds' labels are ``y[:batch_size]``.

This module imports torch_geometric; :mod:`loaders.convert` imports it only when a loader
asks for ``output="pyg"``. The PyG-facing shims over the loader are in :mod:`loaders.pyg`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

from loaders.sample.relational import HomogeneousBatch
from loaders.sample.sampler import MiniBatch, SampledSubgraph

__all__ = ["to_pyg", "to_tensor", "is_homogeneous", "add_link_fields"]


def to_tensor(a: np.ndarray, device=None) -> torch.Tensor:
    """``a`` as a tensor (on ``device``), copied when it is read-only (a memory map)."""
    a = np.ascontiguousarray(a)
    if not a.flags.writeable:  # memory maps, store splits: torch warns on (must not write) them
        a = a.copy()
    t = torch.from_numpy(a)
    return t if device is None else t.to(device)


def _edge_index(sub: SampledSubgraph, et, device) -> torch.Tensor:
    return to_tensor(np.stack([sub.row[et], sub.col[et]]), device)


def is_homogeneous(sub: SampledSubgraph) -> bool:
    """Whether ``sub`` has one node type and one edge type (PyG then yields ``Data``)."""
    return len(sub.node) == 1 and len(sub.row) == 1


def to_pyg(mb: MiniBatch) -> Data | HeteroData:
    """A PyG ``Data`` (one node and edge type) or ``HeteroData`` from a mini-batch."""
    sub, dev = mb.subgraph, mb.device
    if is_homogeneous(sub):
        (t,), (et,) = sub.node.keys(), sub.row.keys()
        d = Data(edge_index=_edge_index(sub, et, dev), n_id=to_tensor(sub.node[t], dev),
                 e_id=to_tensor(sub.edge[et], dev), input_id=to_tensor(sub.input_id, dev),
                 batch_size=sub.batch_size, num_sampled_nodes=list(sub.num_sampled_nodes[t]),
                 num_sampled_edges=list(sub.num_sampled_edges[et]))
        d.num_nodes = int(sub.node[t].shape[0])
        if t in mb.x:
            d.x = mb.x[t]
        y = mb.y_all.get(t, mb.y)  # a MiniBatch made without y_all: the seeds' only
        if y is not None:
            d.y = y
        for name, v in mb.attrs.get(t, {}).items():
            d[name] = v
        for name, v in mb.edge_attrs.get(et, {}).items():
            d[name] = v
        if isinstance(mb, HomogeneousBatch):  # the relational view: types per node and edge
            d.node_type, d.edge_type = mb.node_type, mb.edge_type
        if sub.batch is not None:  # disjoint: each node's seed index
            d.batch = to_tensor(sub.batch[t], dev)
        return d
    h = HeteroData()
    for t, ids in sub.node.items():
        h[t].n_id = to_tensor(ids, dev)
        h[t].num_nodes = int(ids.shape[0])
        h[t].num_sampled_nodes = list(sub.num_sampled_nodes[t])
        if sub.batch is not None:
            h[t].batch = to_tensor(sub.batch[t], dev)
        if t in mb.x:
            h[t].x = mb.x[t]
        if t in mb.y_all:
            h[t].y = mb.y_all[t]
        for name, v in mb.attrs.get(t, {}).items():
            h[t][name] = v
    for et in sub.row:
        key = tuple(et)
        h[key].edge_index = _edge_index(sub, et, dev)
        h[key].e_id = to_tensor(sub.edge[et], dev)
        h[key].num_sampled_edges = list(sub.num_sampled_edges[et])
        for name, v in mb.edge_attrs.get(et, {}).items():
            h[key][name] = v
    s = h[sub.seed_type]
    s.batch_size = sub.batch_size
    s.input_id = to_tensor(sub.input_id, dev)
    if sub.seed_type not in mb.y_all and mb.y is not None:
        s.y = mb.y  # a MiniBatch made without y_all: the seeds' only
    return h


def add_link_fields(data: Data | HeteroData, link: dict, device=None) -> Data | HeteroData:
    """A link batch's fields where PyG's ``LinkNeighborLoader`` puts them: ``input_id``,
    ``edge_label_index`` and ``edge_label`` on the edge type (on ``Data`` itself for one type),
    or ``src_index`` on the source type and ``dst_pos_index``/``dst_neg_index`` on the
    destination type; no ``batch_size`` (PyG's link batches have none)."""
    et = link["edge_type"]
    hetero = isinstance(data, HeteroData)
    src, dst, edge = ((data[et.src], data[et.dst], data[tuple(et)]) if hetero
                      else (data, data, data))
    for store in {id(s): s for s in (src, dst, data if not hetero else src)}.values():
        for name in ("batch_size", "input_id"):
            if name in store:
                del store[name]
    edge.input_id = to_tensor(link["input_id"], device)
    if "edge_label_index" in link:
        edge.edge_label_index = to_tensor(link["edge_label_index"], device)
        if "edge_label" in link:
            edge.edge_label = to_tensor(link["edge_label"], device)
    else:
        src.src_index = to_tensor(link["src_index"], device)
        dst.dst_pos_index = to_tensor(link["dst_pos_index"], device)
        dst.dst_neg_index = to_tensor(link["dst_neg_index"], device)
    return data
