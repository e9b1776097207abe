"""The relational view: a batch of a store with several node and edge types as one homogeneous
graph with a type value per node and per edge, as the relational baselines use it (OGB-LSC's
R-GNN on MAG240M, DGL's MAG240M RGAT; PyG's ``HeteroData.to_homogeneous()``, DGL's
``dgl.to_homogeneous``).

Numbering, as PyG's ``to_homogeneous()``: node ``i`` of type ``t`` has global id
``node_offset[t] + i``, the offsets accumulating ``num_nodes`` in ``store.node_types`` order;
edge types are numbered in ``store.edge_types`` order (``edge_type``), and an edge's global id
is ``edge_offset[k] + e_id``. Inside a batch the nodes are ordered by hop, then by node type
(store order), then as sampled: the seeds come first (``x[:batch_size]``), and the nodes of
hops ``0..h`` are a prefix, so PyG's ``trim_to_layer`` and DGL's blocks work as on a
homogeneous store. Edges are ordered by layer, then by edge type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from featurestore.errors import IdsOutOfRangeError
from featurestore.format.names import EdgeType

from loaders.errors import LoaderArgumentError
from loaders.sample.sampler import MiniBatch, SampledSubgraph

__all__ = ["HomogeneousView", "HomogeneousBatch", "HomogeneousGraph", "HomogeneousFeatures",
           "NTYPE", "ETYPE"]

#: the node and edge type names of the homogeneous batch (DGL's defaults for one type).
NTYPE, ETYPE = "_N", EdgeType("_N", "_E", "_N")


@dataclass
class HomogeneousBatch(MiniBatch):
    """A :class:`~loaders.sample.sampler.MiniBatch` of one node type ``_N`` and one edge type, with
    ``node_type`` (index into ``store.node_types``) per node and ``edge_type`` (index into
    ``store.edge_types``) per edge, both int64 on ``device``. ``subgraph.node["_N"]`` holds
    the global homogeneous ids (``n_id``) and ``subgraph.edge[...]`` global edge ids."""

    node_type: torch.Tensor | None = None
    edge_type: torch.Tensor | None = None
    node_types: tuple = field(default=())
    edge_types: tuple = field(default=())


def _exclusive_cumsum(a: np.ndarray) -> np.ndarray:
    out = np.zeros(a.size, np.int64)
    np.cumsum(a.reshape(-1)[:-1], out=out[1:])
    return out.reshape(a.shape)


def _positions(counts: np.ndarray) -> list[np.ndarray]:
    """Per column ``j`` of ``counts`` (groups x kinds, rows in output order): where each item of
    kind ``j``, stored group after group, lands in the group-major, kind-minor order."""
    base = _exclusive_cumsum(counts)  # start of (group g, kind j) in the output
    within = np.zeros_like(counts)
    np.cumsum(counts[:-1], axis=0, out=within[1:])  # start of group g among kind j's items
    return [np.repeat(base[:, j] - within[:, j], counts[:, j]) + np.arange(counts[:, j].sum())
            for j in range(counts.shape[1])]


@dataclass(frozen=True)
class HomogeneousView:
    """The offsets of a store's homogeneous numbering, and :meth:`apply` to batches."""

    node_types: tuple[str, ...]
    edge_types: tuple[EdgeType, ...]
    node_offset: dict
    edge_offset: dict

    @classmethod
    def from_store(cls, store, features: dict | None = None,
                   node_types=None) -> HomogeneousView:
        """The view of ``store``; ``features`` (per node type, what the loader gathers) must
        cover every node type with one row shape, or :class:`LoaderArgumentError` says why.
        ``node_types``: the order of the numbering (default ``store.node_types``; OGB-LSC's
        R-GNN numbers ``["paper", "author", "institution"]``)."""
        nts, ets = _node_order(store, node_types), tuple(store.edge_types)
        if features is not None and features:
            missing = [t for t in nts if t not in features]
            if missing:
                raise LoaderArgumentError(
                    f"Expected the feature on every node type of {store.url} for "
                    f"homogeneous=True (x concatenates them). Node types {missing} have none: "
                    f"derive them (featurestore preprocess mag240m --derive-features mean), "
                    f"or use the heterogeneous batches (homogeneous=False).")
            shapes = {t: tuple(f.shape[1:]) for t, f in features.items()}
            if len(set(shapes.values())) > 1:
                raise LoaderArgumentError(
                    f"Expected one feature width on every node type of {store.url} for "
                    f"homogeneous=True (x concatenates them). Got row shapes {shapes} instead.")
        nn = np.array([store.num_nodes(t) for t in nts], np.int64)
        ne = np.array([store.num_edges(et) for et in ets], np.int64)
        return cls(nts, ets, dict(zip(nts, _exclusive_cumsum(nn).tolist())),
                   dict(zip(ets, _exclusive_cumsum(ne).tolist())))

    def _node_counts(self, sub: SampledSubgraph) -> np.ndarray:
        """Nodes per hop (rows) and node type (columns, in the view's order)."""
        hops = 1 + max(len(v) for v in sub.num_sampled_edges.values())
        return np.array([_pad(sub.num_sampled_nodes.get(t, []), hops)
                         for t in self.node_types], np.int64).reshape(-1, hops).T

    def blocks(self, sub: SampledSubgraph) -> tuple[list[tuple[str, int, int, int]], int]:
        """``([(ntype, lo, hi, at), ...], n)``: rows ``lo:hi`` of ``sub.node[ntype]`` go to
        rows ``at:at + hi - lo`` of the homogeneous batch of ``n`` nodes (one block per hop
        and node type), so a loader gathers features straight into their places."""
        cn = self._node_counts(sub)
        base = _exclusive_cumsum(cn)
        within = np.zeros_like(cn)
        np.cumsum(cn[:-1], axis=0, out=within[1:])
        out = [(t, int(within[h, k]), int(within[h, k] + cn[h, k]), int(base[h, k]))
               for h in range(cn.shape[0]) for k, t in enumerate(self.node_types) if cn[h, k]]
        return out, int(cn.sum())

    def apply(self, mb: MiniBatch) -> HomogeneousBatch:
        """``mb`` as one homogeneous graph. Features gathered by a loader in the view's
        layout (``mb.x["_N"]``, see :meth:`blocks`) are taken as they are; per-type ones are
        scattered into one ``x``."""
        sub, dev = mb.subgraph, mb.device
        cn = self._node_counts(sub)
        hops = cn.shape[0]
        node_pos = _positions(cn)
        n = int(cn.sum())
        n_id = np.empty(n, np.int64)
        ntype = np.empty(n, np.int64)
        empty = np.zeros(0, np.int64)
        for k, t in enumerate(self.node_types):
            n_id[node_pos[k]] = self.node_offset[t] + sub.node.get(t, empty)
            ntype[node_pos[k]] = k
        layers = hops - 1
        ce = np.array([_pad(sub.num_sampled_edges.get(et, []), layers)
                       for et in self.edge_types]).reshape(len(self.edge_types), layers).T
        edge_pos = _positions(ce) if layers else [empty] * len(self.edge_types)
        m = int(ce.sum())
        row, col, eid, etype = (np.empty(m, np.int64) for _ in range(4))
        where = dict(zip(self.node_types, node_pos))
        for k, et in enumerate(self.edge_types):
            p = edge_pos[k]
            row[p] = where[et.src][sub.row.get(et, empty)]
            col[p] = where[et.dst][sub.col.get(et, empty)]
            eid[p] = self.edge_offset[et] + sub.edge.get(et, empty)
            etype[p] = k
        hsub = SampledSubgraph(
            seed_type=NTYPE, node={NTYPE: n_id}, row={ETYPE: row}, col={ETYPE: col},
            edge={ETYPE: eid}, num_sampled_nodes={NTYPE: cn.sum(axis=1).tolist()},
            num_sampled_edges={ETYPE: ce.sum(axis=1).tolist()}, batch_size=sub.batch_size,
            input_id=sub.input_id, batch=None if sub.batch is None else {NTYPE: _place(
                sub.batch, where, n)})
        x = mb.x[NTYPE] if NTYPE in mb.x else _scatter(mb.x, where, n, dev)
        y_all = _scatter(mb.y_all, where, n, dev, fill=-1)
        return HomogeneousBatch(
            hsub, {NTYPE: x} if x is not None else {},
            None if y_all is None else y_all[: sub.batch_size], dev,
            {NTYPE: y_all} if y_all is not None else {},
            node_type=torch.from_numpy(ntype).to(dev), edge_type=torch.from_numpy(etype).to(dev),
            node_types=self.node_types, edge_types=self.edge_types)


def _node_order(store, node_types) -> tuple[str, ...]:
    """``node_types`` checked to be an order of the store's node types (default: the store's)."""
    have = tuple(store.node_types)
    if node_types is None or node_types is True:
        return have
    order = tuple(node_types) if not isinstance(node_types, str) else (node_types,)
    if sorted(order) != sorted(have):
        raise LoaderArgumentError(f"Expected homogeneous= True or an order of every node type "
                                  f"of {store.url} ({list(have)}). Got {node_types!r} instead.")
    return order


class HomogeneousFeatures:
    """A store's features of every node type as one ``(N, ...)`` array in the homogeneous
    numbering, read on indexing (``feats[ids]`` gathers the rows: numpy, the store's dtype).
    Stands where a script memory-maps OGB-LSC's ``full_feat.npy``."""

    def __init__(self, graph: HomogeneousGraph, name: str = "feat"):
        self.graph = graph
        self.arrays = [graph.store.features(t, name) for t in graph.node_types]
        shapes = {tuple(a.shape[1:]) for a in self.arrays}
        dtypes = {a.dtype for a in self.arrays}
        if len(shapes) != 1 or len(dtypes) != 1:
            raise LoaderArgumentError(
                f"Expected feature {name!r} of one shape and dtype on every node type of "
                f"{graph.store.url}. Got {[(a.shape, str(a.dtype)) for a in self.arrays]}.")
        self.shape = (graph.num_nodes(),) + shapes.pop()
        self.dtype = dtypes.pop()

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, ids) -> np.ndarray:
        """Rows ``ids`` (homogeneous ids: an integer array, tensor or list)."""
        ids = np.asarray(ids.cpu().numpy() if isinstance(ids, torch.Tensor) else ids, np.int64)
        if ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() >= len(self))):
            raise IdsOutOfRangeError(
                f"Expected 1-D homogeneous ids in [0, {len(self)}) for the features of "
                f"{self.graph.store.url}. Got shape {ids.shape}"
                + (f", ids in [{ids.min()}, {ids.max()}]" if ids.size else "") + " instead.")
        off = self.graph.offsets
        kind = np.searchsorted(off, ids, side="right") - 1
        out = np.empty((ids.shape[0],) + self.shape[1:], self.dtype)
        for k, a in enumerate(self.arrays):
            sel = np.flatnonzero(kind == k)
            if sel.size:
                out[sel] = a.gather(ids[sel] - off[k])
        return out


class HomogeneousGraph:
    """A store seen as one homogeneous graph (node types numbered in ``node_types`` order):
    what the relational baselines' ``full_adj_t``/``graph.dgl`` stand for. Give it to
    :class:`loaders.pyg.LegacyNeighborSampler` or :class:`loaders.dgl.NodeCollator`; ``x`` is
    the features as a :class:`HomogeneousFeatures`."""

    def __init__(self, store, node_types=None, feature: str = "feat"):
        self.store = store
        self.view = HomogeneousView.from_store(store, None, node_types)
        self.node_types = self.view.node_types
        self.offsets = np.array([self.view.node_offset[t] for t in self.node_types], np.int64)
        self._feature = feature

    def __repr__(self) -> str:
        return f"HomogeneousGraph({self.store.url!r}, node_types={list(self.node_types)})"

    def num_nodes(self) -> int:
        """Nodes of every type."""
        return int(sum(self.store.num_nodes(t) for t in self.node_types))

    @property
    def x(self) -> HomogeneousFeatures:
        """The features of every node, indexed by homogeneous id."""
        return HomogeneousFeatures(self, self._feature)

    def formats(self, *args) -> HomogeneousGraph:
        """DGL's ``g.formats(...)``: the store is CSC already; returns this graph."""
        return self

    def seeds(self, ids) -> tuple[str, np.ndarray]:
        """``(node type, store ids)`` of homogeneous ids (or a boolean mask over all nodes, as
        PyG takes ``node_idx``) that are all of one node type."""
        ids = np.asarray(ids.cpu().numpy() if isinstance(ids, torch.Tensor) else ids)
        if ids.dtype == np.bool_:
            if ids.shape != (self.num_nodes(),):
                raise LoaderArgumentError(
                    f"Expected a boolean mask of {self.num_nodes()} entries (one per node of "
                    f"the homogeneous graph). Got shape {ids.shape} instead.")
            ids = np.flatnonzero(ids)
        ids = ids.astype(np.int64, copy=False)
        kind = np.searchsorted(self.offsets, ids, side="right") - 1
        if ids.size == 0 or kind.min() != kind.max() or ids.min() < 0 or \
                ids.max() >= self.num_nodes():
            raise LoaderArgumentError(
                f"Expected seeds of one node type, as homogeneous ids in [0, "
                f"{self.num_nodes()}) with {dict(zip(self.node_types, self.offsets.tolist()))} "
                f"as the first id of each type. Got ids in [{ids.min() if ids.size else '-'}, "
                f"{ids.max() if ids.size else '-'}] instead.")
        k = int(kind[0])
        return self.node_types[k], ids - self.offsets[k]


def _place(per_type: dict, where: dict, n: int) -> np.ndarray:
    """One int64 array of ``n`` with each type's values at their homogeneous positions."""
    out = np.empty(n, np.int64)
    for t, pos in where.items():
        out[pos] = per_type.get(t, np.zeros(0, np.int64))
    return out


def _scatter(per_type: dict, where: dict, n: int, device, fill=None):
    """One ``(n, ...)`` tensor with each type's rows at their homogeneous positions."""
    if not per_type:
        return None
    first = next(iter(per_type.values()))
    if fill is None:
        out = torch.empty((n,) + tuple(first.shape[1:]), dtype=first.dtype, device=device)
    else:
        out = torch.full((n,) + tuple(first.shape[1:]), fill, dtype=first.dtype, device=device)
    for t, v in per_type.items():
        out[torch.from_numpy(where[t]).to(device)] = v.to(out.dtype)
    return out


def _pad(counts, n: int) -> list[int]:
    c = [int(v) for v in counts][:n]
    return c + [0] * (n - len(c))
