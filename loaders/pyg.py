"""PyG side: batches as ``Data``/``HeteroData``, and the store and sampler behind PyG's own
``FeatureStore``, ``GraphStore`` and ``BaseSampler`` interfaces.

* :func:`to_pyg` converts a :class:`~loaders.sample.sampler.MiniBatch` into what PyG's
  ``NeighborLoader`` yields (it lives in :mod:`loaders.convert.pyg`, below the loader, which
  calls it for ``output="pyg"``; it is re-exported here).
* :func:`remote_backend` returns ``(feature_store, graph_store)`` over a store, and
  :class:`NeighborSampler` is a PyG ``BaseSampler``, so
  ``torch_geometric.loader.NodeLoader((fs, gs), node_sampler=NeighborSampler(store, ...),
  input_nodes=...)`` runs on the store with our sampler.
* :class:`LegacyNeighborSampler`: PyG's legacy ``NeighborSampler`` call, built on
  :class:`loaders.NeighborLoader` (this module sits above the loader).

Only this module and :mod:`loaders.convert.pyg` import torch_geometric (docs/design.md,
"Layers").
"""

from __future__ import annotations


import numpy as np
import torch
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr
from torch_geometric.sampler import (
    BaseSampler,
    HeteroSamplerOutput,
    NodeSamplerInput,
    SamplerOutput,
)

from featurestore import check_ids
from featurestore.errors import MissingDependencyError
from featurestore.format.names import EdgeType
from featurestore.remote import forksafe
from loaders.convert.pyg import to_pyg
from loaders.convert.pyg import to_tensor as _t
from loaders.errors import LoaderArgumentError, UnsupportedArgumentError
from loaders.loader import NeighborLoader
from loaders.loader.link import NegativeSampling, sample_link_batch
from loaders.memory.cast import resolve_dtype
from loaders.sample.negative import cumulative_weights
from loaders.sample.relational import HomogeneousGraph
from loaders.sample.sampler import NeighborSampler as _CoreSampler

#: the virtual attribute listed for node types without features or labels.
ID = "n_id"

__all__ = ["to_pyg", "remote_backend", "StoreFeatureStore", "StoreGraphStore", "NeighborSampler",
           "LegacyNeighborSampler", "Adj"]


# -- PyG's remote backend interfaces -------------------------------------------------------
class StoreFeatureStore(FeatureStore):
    """PyG ``FeatureStore`` over a store (read-only).

    Attribute names: ``x`` is the store feature ``feature`` (default ``feat``), ``y`` the
    labels; any other name is a store feature, then a per-node value array, of that name.
    A node type with neither ``x`` nor ``y`` (MAG240M's authors) lists ``n_id``, its global ids,
    because PyG's own ``NeighborSampler`` learns the node types of a remote backend from the
    attributes it lists.

    With ``homogeneous=True`` (the default for a store of one node type and one edge type)
    attributes have ``group_name=None``, as PyG's own ``NeighborSampler`` and ``NodeLoader``
    expect of a homogeneous graph (they then yield ``Data``); the node type's name is still
    accepted as a group name.

    ``dtype`` is the loader's ``dtype=`` for store features: ``"auto"`` (default) gives fp16
    features as float32, as a PyG model takes them; ``None`` the store's dtype.
    """

    read_only = True

    def __init__(self, store, feature: str = "feat", homogeneous: bool | None = None,
                 dtype="auto"):
        super().__init__()
        self.store, self.feature, self.dtype = store, feature, dtype
        self.homogeneous = _homogeneous(store) if homogeneous is None else bool(homogeneous)
        # a dtype no feature can be cast to fails here, not in a worker's first batch
        resolve_dtype(dtype, np.float16, f"the features of {store.url}")

    def _cast(self, feat, group: str, name: str):
        """The numpy dtype rows of ``feat`` are cast to, or ``None``."""
        return resolve_dtype(self.dtype, feat.dtype, f"feature {name!r} of {group!r} in "
                                                     f"{self.store.url}", "pyg")

    def _group(self, group: str | None) -> str:
        s = self.store
        return group if group is not None else (
            s.node_types[0] if self.homogeneous else s.resolve_ntype(None))

    def _array(self, group: str | None, name: str):
        """``(feature, None, cast dtype)`` or ``(None, values, None)`` of an attribute."""
        s = self.store
        group = self._group(group)
        if name == "x":
            name = self.feature
        elif name == "y":
            return None, s.labels(group), None
        if name in s.feature_names(group):
            f = s.features(group, name)
            return f, None, self._cast(f, group, name)
        return None, s.values(group, name), None

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        if attr.attr_name == ID:
            return self._ids(attr)
        feat, vec, cast = self._array(attr.group_name, attr.attr_name)
        idx = attr.index
        if isinstance(idx, torch.Tensor):
            idx = idx.numpy()
        if idx is None or isinstance(idx, slice):
            whole = feat.numpy() if feat is not None else vec
            return torch.from_numpy(np.array(whole[idx if idx is not None else slice(None)],
                                             dtype=cast))
        if feat is not None:
            rows = feat.gather(np.asarray(idx))
            return torch.from_numpy(rows if cast is None else rows.astype(cast))
        return torch.from_numpy(np.asarray(vec[np.asarray(idx)]))

    def _ids(self, attr: TensorAttr) -> torch.Tensor:
        """The virtual attribute ``n_id``: the global ids themselves."""
        idx = attr.index
        if idx is None or isinstance(idx, slice):
            every = torch.arange(self.store.num_nodes(self._group(attr.group_name)))
            return every if idx is None else every[idx]
        return torch.as_tensor(np.asarray(idx), dtype=torch.long).clone()

    def _get_tensor_size(self, attr: TensorAttr):
        if attr.attr_name == ID:
            return (self.store.num_nodes(self._group(attr.group_name)),)
        feat, vec, _ = self._array(attr.group_name, attr.attr_name)
        return tuple(feat.shape) if feat is not None else tuple(vec.shape)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """Every attribute PyG may ask for: ``x``, ``y`` or ``n_id`` per node type."""
        s, out = self.store, []
        for t in s.node_types:
            g = None if self.homogeneous else t
            if self.feature in s.feature_names(t):
                out.append(TensorAttr(g, "x"))
            if "label" in s.value_names(t):
                out.append(TensorAttr(g, "y"))
            if not out or out[-1].group_name != g:  # PyG finds node types by their attributes
                out.append(TensorAttr(g, ID))
        return out

    def _put_tensor(self, tensor, attr) -> bool:
        raise PermissionError(f"The store {self.store.url} is read-only: write features with "
                              "featurestore.create_store instead.")

    def _remove_tensor(self, attr) -> bool:
        raise PermissionError(f"The store {self.store.url} is read-only.")


class StoreGraphStore(GraphStore):
    """PyG ``GraphStore`` over a store's CSC topology (read-only).

    With ``homogeneous=True`` (the default for a store of one node type and one edge type)
    the edge type is reported as ``None``, PyG's convention for a homogeneous graph; the
    store's edge type is still accepted.
    """

    read_only = True

    def __init__(self, store, homogeneous: bool | None = None):
        super().__init__()
        self.store = store
        self.homogeneous = _homogeneous(store) if homogeneous is None else bool(homogeneous)

    def _attrs(self):
        s = self.store
        return {tuple(et): EdgeAttr(None if self.homogeneous else tuple(et), "csc",
                                    is_sorted=False,
                                    size=(s.num_nodes(et.src), s.num_nodes(et.dst)))
                for et in s.edge_types}

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        """One CSC edge attribute per edge type."""
        return list(self._attrs().values())

    def _get_edge_index(self, edge_attr: EdgeAttr):
        if str(edge_attr.layout.value if hasattr(edge_attr.layout, "value")
               else edge_attr.layout) != "csc":
            return None  # PyG converts from the CSC layout it finds in get_all_edge_attrs
        et = edge_attr.edge_type
        indptr, indices = self.store.csc(None if et is None else et)
        # copies: the store's arrays are read-only memory maps
        return (torch.from_numpy(np.array(indices, dtype=np.int64)),
                torch.from_numpy(np.array(indptr, dtype=np.int64)))

    def coo(self, edge_types=None, store: bool = False):
        """PyG's ``coo``. On a homogeneous graph, when asked for named edge types (PyG's
        ``LinkLoader`` asks ``coo([None])`` for ``edge_label_index=(None, None)``: every edge
        as a seed, as ``data.edge_index`` on an in-memory ``Data``) the answer is per type, as
        on a typed graph, instead of PyG's bare tuple, which it cannot read back."""
        out = super().coo(edge_types, store)
        if not self.homogeneous or edge_types is None:
            return out
        for et in edge_types:
            if et is not None:
                raise LoaderArgumentError(
                    f"Expected edge type None on the homogeneous remote backend of "
                    f"{self.store.url} (edge_label_index=(None, None) for every edge). Got "
                    f"{et!r} instead: pass remote_backend(store, homogeneous=False) to keep "
                    f"the types.")
        return tuple({None: part} for part in out)

    def _put_edge_index(self, edge_index, edge_attr) -> bool:
        raise PermissionError(f"The store {self.store.url} is read-only.")

    def _remove_edge_index(self, edge_attr) -> bool:
        raise PermissionError(f"The store {self.store.url} is read-only.")


def _homogeneous(store) -> bool:
    return len(store.node_types) == 1 and len(store.edge_types) == 1


def remote_backend(store, feature: str = "feat", homogeneous: bool | None = None,
                   dtype="auto") -> tuple[StoreFeatureStore, StoreGraphStore]:
    """``(feature_store, graph_store)`` for PyG loaders that take a remote backend.

    A store of one node type and one edge type is presented as a homogeneous graph (group
    and edge type ``None``), so PyG's own ``NeighborLoader``/``NeighborSampler`` take plain
    ``input_nodes`` and yield ``Data``; pass ``homogeneous=False`` to keep the types.
    ``dtype`` as the loader's: fp16 features come as float32 unless ``dtype=None``.
    """
    return (StoreFeatureStore(store, feature, homogeneous, dtype),
            StoreGraphStore(store, homogeneous))


class NeighborSampler(BaseSampler):
    """Our numba sampler as a PyG ``BaseSampler`` (node-level tasks).

    Randomness comes from ``(seed, epoch, n)``, ``n`` being the index of the batch since
    :meth:`set_epoch`. In a ``DataLoader`` worker process (``NodeLoader(num_workers=W)``),
    worker ``w`` sees batches ``w, w + W, w + 2W, ...`` (PyTorch's round-robin), so its
    ``k``-th call is batch ``k * W + w``: the draws are the same whatever ``num_workers``.
    Picklable (for ``spawn``): the store reopens itself in the worker. ``set_epoch`` in the
    parent reaches workers started after it (not ``persistent_workers``). Call it before each
    epoch with worker processes: workers start from the parent's copy every epoch, so without
    it every epoch repeats the same draws (in one process the draws go on across epochs).

    ``disjoint=True``: one tree per seed, as PyG's own sampler with pyg-lib (the output's
    ``batch`` gives each node's seed index, which ``NodeLoader`` puts in ``data.batch``);
    node batches only (:meth:`sample_from_edges` refuses it).

    Temporal sampling is not supported: a ``NodeLoader`` given ``input_time`` raises
    :class:`~loaders.errors.UnsupportedArgumentError` at the first batch.
    """

    def __init__(self, store, num_neighbors, *, replace: bool = False, seed: int = 0,
                 num_threads: int | None = None, disjoint: bool = False):
        self.core = _CoreSampler(store, num_neighbors, replace=replace, num_threads=num_threads,
                                 disjoint=disjoint)
        self.seed, self.epoch = seed, 0
        self._calls = 0
        self._lock = forksafe.Lock()  # pickles as a new lock; a forked worker's is unlocked
        g = self.core.graph
        self.homogeneous = len(g.node_types) == 1 and len(g.edge_types) == 1

    @property
    def disjoint(self) -> bool:
        """One tree per seed (PyG's ``disjoint``)."""
        return self.core.disjoint

    def set_epoch(self, epoch: int) -> None:
        """Make the next batches those of ``epoch`` (call before each epoch)."""
        with self._lock:
            self.epoch, self._calls = int(epoch), 0

    def _next_batch(self) -> int:
        with self._lock:
            k = self._calls
            self._calls += 1
        info = torch.utils.data.get_worker_info()
        return k if info is None else k * info.num_workers + info.id

    def sample_from_nodes(self, index: NodeSamplerInput,
                          **kwargs) -> SamplerOutput | HeteroSamplerOutput:
        """Sample around ``index.node`` (PyG's ``BaseSampler`` call)."""
        if index.time is not None:
            raise UnsupportedArgumentError(
                "Expected no input_time: loaders.pyg.NeighborSampler does not sample "
                "temporally (every neighbour may be newer than its seed). Got input_time for "
                f"{index.node.numel()} seeds instead. Drop input_time (and time_attr), or use "
                "PyG's own NeighborSampler with time_attr for temporal sampling.")
        k = self._next_batch()
        seed_type = index.input_type or self.core.graph.node_types[0]
        sub = self.core.sample(index.node.numpy(), seed_type, seed=self.seed, epoch=self.epoch,
                               batch=k)
        return self._output(sub, (index.input_id, index.time))

    def _output(self, sub, meta) -> SamplerOutput | HeteroSamplerOutput:
        """PyG's sampler output of ``sub`` with ``meta``."""
        if self.homogeneous:
            (t,), (et,) = sub.node.keys(), sub.row.keys()
            return SamplerOutput(node=_t(sub.node[t]), row=_t(sub.row[et]), col=_t(sub.col[et]),
                                 edge=_t(sub.edge[et]),
                                 batch=None if sub.batch is None else _t(sub.batch[t]),
                                 num_sampled_nodes=sub.num_sampled_nodes[t],
                                 num_sampled_edges=sub.num_sampled_edges[et], metadata=meta)
        key = tuple
        return HeteroSamplerOutput(
            node={t: _t(v) for t, v in sub.node.items()},
            row={key(et): _t(v) for et, v in sub.row.items()},
            col={key(et): _t(v) for et, v in sub.col.items()},
            edge={key(et): _t(v) for et, v in sub.edge.items()},
            batch=None if sub.batch is None else {t: _t(v) for t, v in sub.batch.items()},
            num_sampled_nodes=dict(sub.num_sampled_nodes),
            num_sampled_edges={key(et): v for et, v in sub.num_sampled_edges.items()},
            metadata=meta)

    def sample_from_edges(self, index, neg_sampling=None) -> SamplerOutput | HeteroSamplerOutput:
        """Sample around seed edges ``(index.row, index.col)`` with PyG's negatives (PyG's
        ``BaseSampler`` call, made by its ``LinkLoader``/``LinkNeighborLoader``): metadata
        ``(input_id, edge_label_index, edge_label, time)`` or, for triplets,
        ``(input_id, src_index, dst_pos_index, dst_neg_index, time)``, as PyG's own sampler."""
        if index.time is not None:
            raise UnsupportedArgumentError(
                "Expected no edge_label_time: loaders.pyg.NeighborSampler does not sample "
                "temporally. Got times for the seed edges instead.")
        if self.core.disjoint:
            raise UnsupportedArgumentError(
                "Expected a loaders.pyg.NeighborSampler with disjoint=False for link batches. "
                "Got disjoint=True instead: per-seed trees are supported for node batches.")
        g = self.core.graph
        et = EdgeType(*index.input_type) if index.input_type is not None else g.edge_types[0]
        neg = NegativeSampling.parse(neg_sampling, None)
        cdf = None
        if neg is not None and neg.weight is not None:
            cdf = cumulative_weights(np.asarray(neg.weight.detach().cpu().numpy()
                                                if hasattr(neg.weight, "detach")
                                                else neg.weight))
        src = check_ids(index.row.numpy(), g.num_nodes[et.src], "seed edge sources")
        dst = check_ids(index.col.numpy(), g.num_nodes[et.dst], "seed edge destinations")
        label = None if index.label is None else index.label.numpy()
        sub = sample_link_batch(self.core, et, np.asarray(src, np.int64),
                                np.asarray(dst, np.int64), label, neg, cdf,
                                (g.num_nodes[et.src], g.num_nodes[et.dst]),
                                index.input_id.numpy(), seed=self.seed, epoch=self.epoch,
                                batch=self._next_batch())
        link = sub.link
        if "edge_label_index" in link:
            lab = link.get("edge_label")
            meta = (index.input_id, _t(link["edge_label_index"]),
                    None if lab is None else _t(lab), None)
        else:
            meta = (index.input_id, _t(link["src_index"]), _t(link["dst_pos_index"]),
                    _t(link["dst_neg_index"]), None)
        return self._output(sub, meta)

    @property
    def edge_permutation(self):
        """``None``: edge ids are positions in the store's CSC already."""
        return None


# -- PyG 1.x/2.0's NeighborSampler call, over the relational view -----------------------------
class Adj(tuple):
    """``(adj_t, e_id, size)`` of one layer, as PyG's legacy ``NeighborSampler`` yields it."""

    __slots__ = ()

    def __new__(cls, adj_t, e_id, size):
        """The triple ``(adj_t, e_id, size)``."""
        return super().__new__(cls, (adj_t, e_id, size))

    adj_t = property(lambda self: self[0])
    e_id = property(lambda self: self[1])
    size = property(lambda self: self[2])

    def to(self, *args, **kwargs) -> Adj:
        """The adjacency (and edge ids) on another device."""
        e_id = self.e_id.to(*args, **kwargs) if self.e_id is not None else None
        return Adj(self.adj_t.to(*args, **kwargs), e_id, self.size)


class LegacyNeighborSampler:
    """PyG's legacy ``torch_geometric.loader.NeighborSampler(adj_t, sizes, node_idx=...)`` over
    a store's relational view (OGB-LSC's R-GNN trains with it).

    ``edge_index`` is a :class:`loaders.sample.relational.HomogeneousGraph` (it stands for the
    script's ``full_adj_t``); ``node_idx`` holds homogeneous ids of one node type. Each batch
    is ``transform(batch_size, n_id, adjs)`` (or that tuple): ``n_id`` the homogeneous ids,
    seeds first, and ``adjs`` one ``Adj(adj_t, e_id, size)`` per layer, input layer first;
    ``adj_t`` is a ``torch_sparse.SparseTensor`` of shape ``(targets, sources)`` whose values
    are the edge types (indices into ``store.edge_types``), ``size`` is ``(sources, targets)``.
    Batches come from :class:`loaders.NeighborLoader` (sampling and ``transform`` on its
    threads); ``num_workers`` sets how many batches each stage prepares ahead.

    One difference from PyG's sampler over ``full_adj_t``: ``sizes`` caps the neighbours
    drawn per node **per relation** (the store is sampled by edge type), so a node with
    in-edges of ``r`` relations gets up to ``r * size`` neighbours, where PyG's cap is
    ``size`` in all.
    """

    def __init__(self, edge_index, sizes, node_idx=None, num_nodes=None,
                 return_e_id: bool = True, transform=None, *, batch_size: int = 1,
                 shuffle: bool = False, drop_last: bool = False, num_workers: int = 0,
                 seed: int = 0, **kwargs):
        try:  # adjs are SparseTensors with edge-type values, as PyG's legacy sampler gives
            import torch_sparse  # noqa: F401
        except ImportError as e:
            raise MissingDependencyError(
                "Expected torch_sparse for LegacyNeighborSampler (its batches hold "
                "torch_sparse.SparseTensor adjacencies, as PyG's legacy NeighborSampler's do). "
                "It is not installed: pip install torch-sparse (prebuilt wheels: "
                "`make bench-peers`), or use NeighborLoader(..., homogeneous=True).") from e
        if not isinstance(edge_index, HomogeneousGraph):
            raise LoaderArgumentError(
                "Expected loaders.HomogeneousGraph(store, node_types) as the graph "
                f"(it stands for full_adj_t). Got {type(edge_index).__name__} instead.")
        g = edge_index
        seeds = g.seeds(node_idx if node_idx is not None else np.arange(g.num_nodes()))
        self.graph, self.return_e_id, self.transform = g, return_e_id, transform
        kwargs.pop("pin_memory", None)
        kwargs.pop("persistent_workers", None)
        self.loader = NeighborLoader(
            g.store, [int(s) for s in sizes], seeds, batch_size=batch_size, shuffle=shuffle,
            drop_last=drop_last, seed=seed, output="raw", homogeneous=g.node_types,
            feature=None, labels=False, device="cpu", prefetch=max(2, int(num_workers)),
            transform=self._convert, **kwargs)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        return iter(self.loader)

    def _convert(self, hb):
        sub = hb.subgraph
        (t,), (et,) = sub.node.keys(), sub.row.keys()
        n_id = torch.from_numpy(sub.node[t])
        row, col = torch.from_numpy(sub.row[et]), torch.from_numpy(sub.col[et])
        eid = torch.from_numpy(sub.edge[et])
        cn = np.cumsum(sub.num_sampled_nodes[t])
        ce = np.concatenate([[0], np.cumsum(sub.num_sampled_edges[et])])
        adjs = []
        for depth in range(len(ce) - 1, 0, -1):  # the input layer first
            m, n_src, n_dst = int(ce[depth]), int(cn[depth]), int(cn[depth - 1])
            adjs.append(Adj(_adj_t(col[:m], row[:m], hb.edge_type[:m], n_dst, n_src),
                            eid[:m] if self.return_e_id else None, (n_src, n_dst)))
        # one layer: a bare Adj, as PyG's legacy NeighborSampler gives it
        out = (sub.batch_size, n_id, adjs[0] if len(adjs) == 1 else adjs)
        return self.transform(*out) if self.transform is not None else out


def _adj_t(dst, src, value, n_dst: int, n_src: int):
    """A ``torch_sparse.SparseTensor`` (targets x sources) with the edge types as values."""
    from torch_sparse import SparseTensor

    return SparseTensor(row=dst, col=src, value=value, sparse_sizes=(n_dst, n_src))
