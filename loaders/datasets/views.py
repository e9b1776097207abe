"""The dataset objects PyG, DGL and OGB scripts start from, over a store.

A PyG or DGL script opens its data with ``PygNodePropPredDataset(name, root)``,
``AsNodePredDataset(DglNodePropPredDataset(name))`` and so on, then reads ``data.x``,
``data['paper'].train_mask``, ``g.ndata['feat']``, ``dataset.num_classes`` ... These classes
answer the same calls from a store, so a script keeps those lines and changes its imports::

    from loaders.datasets.views import PygNodePropPredDataset     # was: from ogb.nodeproppred ...
    dataset = PygNodePropPredDataset("ogbn-papers100M", root="papers.store")
    data = dataset[0]                                       # a StoreData view, not in memory
    loader = loaders.NeighborLoader(data, [10, 10], dataset.get_idx_split()["train"])

Nothing is read into memory up front. Node features and value arrays (``x``, ``feat``, ``y``,
``label``, ``year``) are :class:`LazyRows`: their shape is known, and indexing them gathers the
rows from the store. Split masks (``train_mask``...) are built from the split ids on first
use (one byte per node). Topology is the store's CSC: ``edge_index`` is made from it only when
asked (:attr:`StoreData.edge_index`, homogeneous stores, bounded), and setting attributes
(``data.edge_index = to_undirected(...)``) is refused with a message, since a store is
read-only. OGB-LSC's ``MAG240MDataset`` is in :mod:`loaders.datasets.lsc`.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from featurestore import Store, open_store
from featurestore.errors import IdsOutOfRangeError, NotAStoreError, StoreNotFoundError
from loaders.errors import LoaderArgumentError
from loaders.sample.seeds import SPLITS, as_store, split_name

__all__ = ["LazyRows", "NodeView", "StoreData", "StoreGraph", "PygNodePropPredDataset",
           "DglNodePropPredDataset", "AsNodePredDataset", "OGB_MAG", "as_store"]


_FEATURE_ALIASES = {"x": "feat"}
#: methods of PyG's in-memory ``Data``/``HeteroData`` that loaders needing the whole graph in
#: memory (``HGTLoader``, ``ClusterLoader`` ...) call: named as such, not as a missing key
_IN_MEMORY_API = frozenset({"edge_items", "node_items", "edge_stores", "node_stores", "stores",
                            "collect", "to_dict", "to_homogeneous", "subgraph",
                            "edge_index_dict", "edge_attrs", "node_attrs"})
_VALUE_ALIASES = {"y": "label"}


def _open(name: str | None, root: str | os.PathLike) -> Store:
    """The store at ``root``, else at ``root/<name>`` (``-`` as ``_``), as OGB lays out roots."""
    tried = [os.fspath(root)]
    if name:
        tried += [os.path.join(root, name), os.path.join(root, name.replace("-", "_"))]
    for path in tried:
        try:
            return open_store(path)
        except (NotAStoreError, StoreNotFoundError):
            continue
    raise NotAStoreError(f"Expected a featurestore store for dataset {name!r} at one of {tried} "
                         "(make one with `featurestore preprocess`). None of them is a store.")


def _torch_ids(ids) -> torch.Tensor:
    return torch.from_numpy(np.array(ids, dtype=np.int64))


def _index(key, n: int, what: str = "rows") -> np.ndarray:
    """Row ids of ``key`` (int, slice, ids, boolean or uint8 mask; torch or numpy) over ``n`` rows.

    Negative ids count from the end, as torch's; an id outside ``[-n, n)`` raises
    :class:`IdsOutOfRangeError` naming ``what``.
    """
    if isinstance(key, torch.Tensor):
        key = key.detach().cpu().numpy()
    if isinstance(key, slice):
        return np.arange(n, dtype=np.int64)[key]
    key = np.asarray(key)
    if key.dtype == np.uint8 and key.ndim == 1:  # torch reads a uint8 index as a mask
        key = key.astype(np.bool_)
    if key.dtype == np.bool_:
        if key.shape != (n,):
            raise LoaderArgumentError(f"Expected a boolean mask of {n} entries. Got shape "
                                      f"{key.shape} instead.")
        return np.flatnonzero(key)
    if key.dtype.kind == "i" and key.size and key.min() < 0:
        low = int(key.min())
        if low < -n:
            raise IdsOutOfRangeError(f"Expected ids in [{-n}, {n}) for {what}. Got {low} "
                                     f"at position {int(np.argmin(key.reshape(-1)))}.")
        key = np.where(key < 0, key + n, key)
    return key


def _expand_ellipsis(key: tuple, ndim: int) -> tuple:
    """``key`` with its ``...`` replaced by the full slices it stands for, as torch reads it."""
    at = [i for i, k in enumerate(key) if k is Ellipsis]
    if not at:
        return key
    if len(at) > 1:
        raise LoaderArgumentError(f"Expected at most one Ellipsis in an index. Got {key!r}.")
    used = sum(k is not None for k in key) - 1
    fill = (slice(None),) * max(ndim - used, 0)
    return key[:at[0]] + fill + key[at[0] + 1:]


class LazyRows:
    """A node feature or value array of a store that reads rows when indexed.

    It answers ``shape``, ``size()``, ``dim()``, ``dtype``, ``len()`` and ``device`` like a
    tensor. ``rows[ids]`` (ids, a boolean mask, a slice or an int, negative ones counting
    from the end; torch or numpy; ``rows[ids, 0]`` and ``rows[..., 0]`` too) gathers those
    rows into a tensor on ``device``. ``to(device)`` returns a view that puts gathered rows
    there, and ``squeeze(dim)``, ``unsqueeze(dim)``, ``view(...)`` and ``reshape(...)``
    (those that keep the node dimension first) a view that shapes them; none of these reads
    anything. :meth:`numpy` reads the whole array, explicitly.
    """

    def __init__(self, source, name: str, device="cpu", dtype: torch.dtype | None = None,
                 column: bool = False, row_shape: tuple | None = None):
        self._source = source  # a FeatureArray or a 1-D numpy vector (memory-mapped)
        self.name = name
        self.device = torch.device(device)
        self._cast = dtype  # a torch dtype the gathered rows are cast to, or None
        src_row = tuple(source.shape[1:])
        if row_shape is None:  # column: a 1-D vector seen as (N, 1), as OGB gives labels
            row_shape = src_row + ((1,) if column else ())
        row_shape = tuple(int(d) for d in row_shape)
        if int(np.prod(row_shape)) != int(np.prod(src_row)):
            raise LoaderArgumentError(f"Expected a row shape of {int(np.prod(src_row))} "
                                      f"entries for {name}. Got {row_shape}.")
        self._row_shape = row_shape

    @property
    def shape(self) -> torch.Size:
        """The array's shape: ``(num_nodes,)`` or ``(num_nodes, dim, ...)``."""
        return torch.Size((self._source.shape[0],) + self._row_shape)

    @property
    def dtype(self) -> torch.dtype:
        """The torch dtype the rows come in."""
        if self._cast is not None:
            return self._cast
        return torch.from_numpy(np.empty(0, self._source.dtype.newbyteorder("="))).dtype

    def size(self, dim: int | None = None):
        """``shape``, or its entry ``dim``, as ``torch.Tensor.size``."""
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    ndim = property(dim)

    def __len__(self) -> int:
        return self._source.shape[0]

    def __repr__(self) -> str:
        return f"LazyRows({self.name!r}, shape={tuple(self.shape)}, dtype={self.dtype})"

    def __getitem__(self, key) -> torch.Tensor:
        if key is Ellipsis:
            key = (Ellipsis,)
        if isinstance(key, tuple):  # rows first, then the rest of the key on the tensor
            key = _expand_ellipsis(key, self.dim())
            if not key:
                return self[slice(None)]
            rows = self[key[0]]
            lead = () if isinstance(key[0], (int, np.integer)) else (slice(None),)
            return rows[lead + key[1:]]
        scalar = isinstance(key, (int, np.integer))
        ids = _index(key, len(self), self.name)
        if hasattr(self._source, "gather"):
            rows = self._source.gather(ids.reshape(-1))
        else:
            from featurestore import check_ids

            rows = np.asarray(self._source[check_ids(ids.reshape(-1), len(self), self.name)])
        out = torch.from_numpy(np.ascontiguousarray(rows).reshape(ids.shape + self._row_shape))
        if self.device.type != "cpu" or self._cast is not None:
            out = out.to(self.device, self._cast)
        return out[()] if scalar else out

    def _shaped(self, shape, how: str) -> LazyRows:
        """A view of ``shape`` (computed on a meta tensor); the node dimension must stay."""
        shape = tuple(shape)
        if not shape or shape[0] != len(self):
            raise LoaderArgumentError(
                f"Expected {how} to keep the node dimension ({len(self)}) first for "
                f"{self.name}, which is read lazily. Got shape {shape}: read the rows first "
                f"({self.name.split('.')[-1]}[:].{how}).")
        return LazyRows(self._source, self.name, self.device, self._cast, row_shape=shape[1:])

    def _meta(self) -> torch.Tensor:
        return torch.empty(self.shape, device="meta")

    def squeeze(self, dim=None) -> LazyRows:
        """A view without the size-1 dimension(s) ``dim``, as ``Tensor.squeeze``."""
        meta = self._meta()
        out = meta.squeeze() if dim is None else meta.squeeze(dim)
        return self._shaped(out.shape, "squeeze(...)")

    def unsqueeze(self, dim: int) -> LazyRows:
        """A view with a size-1 dimension at ``dim`` (not 0), as ``Tensor.unsqueeze``."""
        return self._shaped(self._meta().unsqueeze(dim).shape, "unsqueeze(...)")

    def view(self, *shape) -> LazyRows:
        """A view of ``shape`` that keeps the node dimension first (``y.view(-1)`` of an
        ``(N, 1)`` column), as ``Tensor.view``."""
        return self._shaped(self._meta().reshape(*shape).shape, "view(...)")

    reshape = view

    def flatten(self) -> LazyRows:
        """A 1-D view (an ``(N, 1)`` column as ``(N,)``), as ``Tensor.flatten``."""
        return self.view(-1)

    def to(self, *args, **kwargs) -> LazyRows:
        """A view whose gathered rows go to a device and/or dtype, as ``Tensor.to`` takes
        them (``to("cuda")``, ``to(torch.float32)``, ``to(device, dtype)``); nothing is read
        now."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        for a in args:
            if isinstance(a, torch.dtype):
                dtype = a
            elif a is not None:
                device = a
        return LazyRows(self._source, self.name, self.device if device is None else device,
                        self._cast if dtype is None else dtype, row_shape=self._row_shape)

    def float(self) -> LazyRows:
        """A view whose gathered rows are ``float32``."""
        return self.to(torch.float32)

    def cpu(self) -> LazyRows:
        """A view whose gathered rows stay on the CPU."""
        return self.to("cpu")

    def numpy(self) -> np.ndarray:
        """The whole array, read from the store (a read-only memory map when local)."""
        arr = self._source.numpy() if hasattr(self._source, "numpy") else self._source
        return arr.reshape(tuple(self.shape))


class NodeView:
    """The attributes of one node type: ``x``, ``y``, value arrays, split masks, ``num_nodes``.

    ``x`` is the ``feat`` feature and ``y`` the ``label`` values; other features and value
    arrays answer under their own names; a split mask only on the node types the split has.
    Deleting an attribute (``del data['paper'].year``) hides it from this view only.
    ``label_column=True`` gives ``y`` as an ``(N, 1)`` column, as OGB's datasets do.
    """

    def __init__(self, store: Store, ntype: str, device="cpu", label_column: bool = False):
        object.__setattr__(self, "_store", store)
        object.__setattr__(self, "_node_type", ntype)
        object.__setattr__(self, "_device", device)
        object.__setattr__(self, "_label_column", label_column)
        object.__setattr__(self, "_hidden", set())
        object.__setattr__(self, "_masks", {})

    @property
    def num_nodes(self) -> int:
        """The node type's number of nodes."""
        return self._store.num_nodes(self._node_type)

    @property
    def num_features(self) -> int:
        """The width of ``x`` (0 when the node type has no ``feat`` feature)."""
        if "feat" not in self._store.feature_names(self._node_type):
            return 0
        return int(np.prod(self._store.features(self._node_type).shape[1:]))

    def keys(self) -> list[str]:
        """The attribute names this view answers (hidden ones left out)."""
        st, t = self._store, self._node_type
        names = [("x" if f == "feat" else f) for f in st.feature_names(t)]
        names += [("y" if v == "label" else v) for v in st.value_names(t)]
        names += [mask for key, (mask, _, _) in SPLITS.items()
                  if t in st.meta.splits.get(split_name(st, key), ())]
        return [n for n in names if n not in self._hidden]

    def __contains__(self, name: str) -> bool:
        return name in self.keys()

    def mask(self, split: str) -> torch.Tensor:
        """The boolean mask of split ``split`` (``train``, ``valid``, ``test``) over the nodes."""
        if split not in self._masks:
            ids = split_ids(self._store, split, self._node_type)
            m = torch.zeros(self.num_nodes, dtype=torch.bool)
            m[_torch_ids(ids)] = True
            self._masks[split] = m
        return self._masks[split]

    def __getattr__(self, name: str):
        if name.startswith("__") or name in self._hidden:
            raise AttributeError(name)
        st, t = self._store, self._node_type
        feat = _FEATURE_ALIASES.get(name, name)
        if feat in st.feature_names(t):
            return LazyRows(st.features(t, feat), f"{t}.{name}", self._device)
        value = _VALUE_ALIASES.get(name, name)
        if value in st.value_names(t):
            column = self._label_column and value == "label"
            return LazyRows(st.values(t, value), f"{t}.{name}", self._device, column=column)
        for key, (mask, _, _) in SPLITS.items():
            if name == mask and t in st.meta.splits.get(split_name(st, key), ()):
                return self.mask(key)
        if name == "edge_index":
            raise AttributeError(
                f"{st.url} keeps its topology as CSC per edge type: edge_index is not "
                "materialised. NeighborLoader samples from the CSC; PyG's own loaders take "
                "loaders.pyg.remote_backend(store).")
        raise AttributeError(f"Expected an attribute of node type {t!r} of {st.url}: "
                             f"{self.keys()}. Got {name!r} instead.")

    def __setattr__(self, name: str, value) -> None:
        raise LoaderArgumentError(
            f"Expected no assignment to {name!r}: {self._store.url} is a read-only store. "
            "Transform the data when you preprocess it (to_undirected: add the reverse edge "
            "types to the spec) or per batch with NeighborLoader(transform=...).")

    def __delattr__(self, name: str) -> None:
        if name not in self.keys():
            raise AttributeError(name)
        self._hidden.add(name)

    def __repr__(self) -> str:
        return f"NodeView({self._node_type!r}, num_nodes={self.num_nodes}, keys={self.keys()})"


def split_ids(store: Store, split: str, ntype: str | None = None) -> np.ndarray:
    """Store ids of ``split`` (``train``/``valid``/``test``, or any store split name)."""
    return store.split(split_name(store, split), ntype)  # UnknownSplitError names the splits


class _Typed:
    """What :class:`StoreData` and :class:`StoreGraph` share: the store and its types."""

    def __init__(self, store: Store, device="cpu"):
        object.__setattr__(self, "__featurestore__", store)
        object.__setattr__(self, "device", torch.device(device))

    def __setattr__(self, name: str, value) -> None:
        raise LoaderArgumentError(
            f"Expected no assignment to {name!r}: {self.store.url} is a read-only store. "
            "Transform the data when you preprocess it (to_undirected: add the reverse edge "
            "types to the spec) or per batch with NeighborLoader(transform=...).")

    @property
    def store(self) -> Store:
        """The store this view reads."""
        return self.__featurestore__

    @property
    def node_types(self) -> list[str]:
        """The store's node types."""
        return self.store.node_types

    @property
    def edge_types(self) -> list[tuple[str, str, str]]:
        """The store's edge types, ``(src, rel, dst)``."""
        return [tuple(et) for et in self.store.edge_types]

    @property
    def is_homogeneous(self) -> bool:
        """One node type and one edge type."""
        return len(self.node_types) == 1 and len(self.edge_types) == 1

    @property
    def num_classes(self) -> int:
        """The number of classes of the labelled node type (``Store.num_classes``)."""
        return self.store.num_classes()

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """``(node_types, edge_types)``, as PyG's ``HeteroData.metadata()``."""
        return self.store.metadata()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store.url!r})"


class StoreData(_Typed):
    """A PyG ``Data``/``HeteroData``-like view of a store, for ``NeighborLoader(data, ...)``.

    Homogeneous stores answer ``data.x``, ``data.y``, ``data.train_mask``, ``data.num_nodes``
    ...; stores of several types answer ``data['paper'].x`` and ``data[edge_type].num_edges``.
    ``to(device, ...)`` returns the view itself: batches go where the loader's ``device=``
    says. A loader given this view yields PyG batches (``output="pyg"``) by default.
    ``label_column=True`` gives ``y`` as an ``(N, 1)`` column, as OGB's
    ``PygNodePropPredDataset`` does (the loader's batches keep ``y`` as ``(B,)``).
    """

    default_output = "pyg"

    def __init__(self, store: Store, device="cpu", label_column: bool = False):
        super().__init__(store, device)
        object.__setattr__(self, "label_column", label_column)
        object.__setattr__(self, "deleted", frozenset())

    def _node_view(self, ntype: str) -> NodeView:
        return NodeView(self.store, ntype, self.device, self.label_column)

    def __delattr__(self, name: str) -> None:
        """Hide ``name`` (``x``, ``y``, a mask or value) from this view, as ``del data.x`` on
        PyG's ``Data``: a loader over the view then leaves it out of its batches (PyG's
        layer-wise inference deletes ``subgraph_loader.data.x``). The store is unchanged."""
        have = self._node_view(self.node_types[0]).keys() if self.is_homogeneous else []
        if name not in have or name in self.deleted:
            raise AttributeError(f"Expected an attribute of the view of {self.store.url} to "
                                 f"delete {sorted(set(have) - self.deleted)}. Got {name!r}.")
        object.__setattr__(self, "deleted", self.deleted | {name})  # a copy.copy keeps its own

    def __setattr__(self, name: str, value) -> None:
        """Accept what PyG's inference idiom assigns and the view already is (``num_nodes``,
        ``n_id = torch.arange(num_nodes)``: batches carry ``n_id``); refuse the rest."""
        if self.is_homogeneous and name in ("num_nodes", "n_id"):
            n = self.num_nodes
            same = int(value) == n if name == "num_nodes" else torch.equal(
                torch.as_tensor(value).reshape(-1).cpu(), torch.arange(n))
            if same:
                return
        super().__setattr__(name, value)

    def __getitem__(self, key):
        if isinstance(key, tuple):
            return _EdgeView(self.store, key)
        return self._node_view(self.store.resolve_ntype(key))

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("label_column", "deleted"):
            raise AttributeError(name)
        if name in self.deleted:
            raise AttributeError(f"{name!r} was deleted from this view of {self.store.url}.")
        if name in _IN_MEMORY_API:
            raise AttributeError(
                f"{name} is a method of PyG's in-memory Data/HeteroData; this view streams "
                f"{self.store.url} and is not one. PyG loaders that need the whole graph in "
                f"memory (HGTLoader, ClusterLoader, ...) do not take it: sample with "
                f"loaders.NeighborLoader(view, ...), or PyG's NeighborLoader over "
                f"loaders.pyg.remote_backend(store).")
        if name in ("edge_index", "edge_attr"):  # the properties' own errors land here
            raise AttributeError(f"{self.store.url} has edge types {self.store.edge_types}: "
                                 f"no whole-graph {name}; read data[edge_type]")
        if self.is_homogeneous:
            return getattr(self._node_view(self.node_types[0]), name)
        raise AttributeError(f"{self.store.url} has node types {self.node_types}: read "
                             f"data[node_type].{name}")

    @property
    def edge_index(self) -> torch.Tensor:
        """A homogeneous store's whole ``(2, E)`` int64 ``edge_index`` (sources first, CSC
        order), for PyG's full-graph code (``RandomLinkSplit``, full-batch tests): made on each
        access, 16 bytes an edge (32 while made), refused past a quarter of the memory this
        process may use."""
        st = self.store
        if not self.is_homogeneous:
            raise AttributeError(f"{st.url} has node types {self.node_types}: read "
                                 "data[edge_type] (no whole-graph edge_index)")
        from featurestore.sysmem import available_memory

        if len(st.edge_types) != 1:
            raise AttributeError(f"{st.url} has edge types {st.edge_types}: read "
                                 "data[edge_type] (no whole-graph edge_index)")
        indptr, indices = st.csc(st.edge_types[0])
        # the (2, E) output, an int64 copy of the sources and the destinations' repeat
        need, room = 32 * int(indices.shape[0]), int(available_memory()) // 4
        if need > room:
            from loaders.errors import LoaderMemoryError

            raise LoaderMemoryError(
                f"Expected edge_index of {st.url} to fit a quarter of the memory this process "
                f"may use ({room:,} bytes): its {indices.shape[0]:,} edges take {need:,}. "
                "Sample with loaders.NeighborLoader, or PyG's loaders over "
                "loaders.pyg.remote_backend(store).", need * 4)
        counts = np.diff(np.asarray(indptr, np.int64))
        out = torch.empty((2, indices.shape[0]), dtype=torch.int64)
        out[0] = torch.from_numpy(np.asarray(indices, np.int64))
        out[1] = torch.from_numpy(np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts))
        return out

    @property
    def edge_attr(self) -> LazyRows | None:
        """A homogeneous store's edge feature (its only one, or ``edge_attr``) in
        :attr:`edge_index`'s order, read when indexed as ``x`` is; ``None`` without one."""
        st = self.store
        if not self.is_homogeneous or len(st.edge_types) != 1:
            raise AttributeError(f"{st.url} has edge types {st.edge_types}: read "
                                 "data[edge_type] (no whole-graph edge_attr)")
        names = st.edge_feature_names(st.edge_types[0])
        if not names:
            return None  # as PyG's Data without edge features
        if len(names) > 1 and "edge_attr" not in names:
            raise LoaderArgumentError(f"Expected one edge feature of {st.url} for edge_attr, or "
                                      f"one named 'edge_attr'. Got {names}: read "
                                      "store.edge_features(etype, name).")
        return LazyRows(st.edge_features(st.edge_types[0], "edge_attr" if len(names) > 1
                                         else names[0]), "edge_attr", self.device)

    @property
    def num_features(self) -> int:
        """The width of ``x`` of the labelled (or only) node type."""
        return self._node_view(self._target()).num_features

    @property
    def num_node_features(self) -> int:
        """PyG's ``data.num_node_features``: :attr:`num_features`."""
        return self.num_features

    def _target(self) -> str:
        if len(self.node_types) == 1:
            return self.node_types[0]
        labelled = [t for t in self.node_types if "label" in self.store.value_names(t)]
        return labelled[0] if len(labelled) == 1 else self.store.resolve_ntype(None)

    def to(self, *args, **kwargs) -> StoreData:
        """The view itself: batches go where the loader's ``device=`` says."""
        return self

    def cpu(self) -> StoreData:
        """The view itself."""
        return self

    def cuda(self, *args, **kwargs) -> StoreData:
        """The view itself: pass ``device="cuda"`` to the loader."""
        return self


class _EdgeView:
    def __init__(self, store: Store, etype):
        self._store, self._etype = store, tuple(etype)

    @property
    def num_edges(self) -> int:
        return self._store.num_edges(self._etype)


class _NodeSpace:
    """``g.nodes[ntype].data`` of a :class:`StoreGraph`."""

    def __init__(self, graph: StoreGraph, ntype: str | None):
        self.data = _NodeData(graph, ntype)


class _NodeData:
    """``g.ndata``: node features, ``label``, value arrays and ``*_mask`` by name."""

    def __init__(self, graph: StoreGraph, ntype: str | None):
        self._view = NodeView(graph.store, graph.store.resolve_ntype(ntype), graph.device)

    def __getitem__(self, name: str):
        try:
            return getattr(self._view, name)
        except AttributeError as e:
            raise KeyError(str(e)) from None

    def __contains__(self, name: str) -> bool:
        return name in self.keys()

    def keys(self) -> list[str]:
        return [{"x": "feat", "y": "label"}.get(k, k) for k in self._view.keys()]

    def __setitem__(self, name, value) -> None:
        setattr(self._view, name, value)


class StoreGraph(_Typed):
    """A DGL ``DGLGraph``-like view of a store: ``ndata``, ``num_nodes()``, ``device``...

    ``g.ndata['feat']`` (and ``g.nodes['paper'].data['feat']``) is a :class:`LazyRows`;
    ``g.to(device)`` returns a view whose gathered rows go to ``device``. A loader given this
    view yields DGL blocks (``output="dgl"``) by default.
    """

    default_output = "dgl"
    idtype = torch.int64

    @property
    def ndata(self) -> _NodeData:
        """Node data of the only node type (``g.nodes[ntype].data`` for several)."""
        return _NodeData(self, None)

    @property
    def nodes(self) -> dict:
        """``g.nodes[ntype].data``."""
        return {t: _NodeSpace(self, t) for t in self.node_types}

    @property
    def ntypes(self) -> list[str]:
        """The node types."""
        return self.node_types

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        """The edge types, ``(src, rel, dst)``."""
        return self.edge_types

    @property
    def etypes(self) -> list[str]:
        """The relation names of the edge types."""
        return [et[1] for et in self.edge_types]

    def num_nodes(self, ntype: str | None = None) -> int:
        """The number of nodes (of ``ntype``; all types when ``None`` on a typed store)."""
        if ntype is None and len(self.node_types) > 1:
            return sum(self.store.num_nodes(t) for t in self.node_types)
        return self.store.num_nodes(ntype)

    def num_edges(self, etype=None) -> int:
        """The number of edges (of ``etype``; all types when ``None`` on a typed store)."""
        if etype is None and len(self.edge_types) > 1:
            return sum(self.store.num_edges(et) for et in self.edge_types)
        return self.store.num_edges(etype)

    def to(self, device, *args, **kwargs) -> StoreGraph:
        """A view whose gathered node data go to ``device`` (nothing is read now)."""
        return StoreGraph(self.store, device)


class _Dataset:
    """What the dataset stand-ins share: one store, one graph, OGB's split dictionary."""

    view = StoreData

    def __init__(self, name: str | None = None, root: str | os.PathLike = "dataset", **kwargs):
        for key in ("transform", "pre_transform", "meta_dict"):
            if kwargs.pop(key, None) is not None:
                raise LoaderArgumentError(
                    f"Expected {key}=None: the dataset is a preprocessed store. Transform "
                    "batches with NeighborLoader(transform=...).")
        if kwargs:
            raise LoaderArgumentError(f"Unexpected arguments {sorted(kwargs)} for "
                                      f"{type(self).__name__}(name, root).")
        self.name = name
        self.__featurestore__ = root if isinstance(root, Store) else _open(name, root)

    @property
    def store(self) -> Store:
        """The store this dataset reads."""
        return self.__featurestore__

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int):
        if i not in (0, -1):
            raise IndexError(f"{type(self).__name__} holds one graph. Got index {i}.")
        return self.view(self.store)

    @property
    def num_classes(self) -> int:
        """The number of classes of the labelled node type."""
        return self.store.num_classes()

    @property
    def num_features(self) -> int:
        """The width of the labelled node type's ``feat``."""
        return StoreData(self.store).num_features

    def get_idx_split(self) -> dict:
        """``{'train', 'valid', 'test'}`` -> store ids (int64 tensors), as OGB's datasets.

        On a store of several node types each split is, as OGB gives it for ``ogbn-mag``, a
        dictionary of the node types it has: ``get_idx_split()['train']['paper']``.
        """
        store = self.store
        if len(store.node_types) == 1:
            return {k: _torch_ids(split_ids(store, k)) for k in SPLITS}
        out = {}
        for k in SPLITS:
            name = split_name(store, k)
            types = store.meta.splits.get(name)
            if types is None:
                store.split(name)  # raises UnknownSplitError naming the store's splits
            out[k] = {nt: _torch_ids(store.split(name, nt)) for nt in types}
        return out


class PygNodePropPredDataset(_Dataset):
    """OGB's ``PygNodePropPredDataset(name, root)`` over the store at ``root`` (or ``root/name``).

    ``dataset[0]`` is a :class:`StoreData` view whose ``y`` is an ``(N, 1)`` column, as OGB's
    (``data.y.squeeze(1)`` and ``data.y[idx]`` work as there); ``get_idx_split()``,
    ``num_classes`` and ``num_features`` are OGB's.
    """

    def __getitem__(self, i: int) -> StoreData:
        return StoreData(super().__getitem__(i).store, label_column=True)


class OGB_MAG(_Dataset):  # noqa: N801 - PyG's name
    """PyG's ``OGB_MAG(root, preprocess=...)`` over the store at ``root`` (or ``root/mag``).

    ``preprocess`` (``'metapath2vec'``, ``'TransE'``) says that every node type has features:
    the store must hold a ``feat`` for each (``featurestore preprocess mag240m
    --derive-features`` makes them), else :class:`LoaderArgumentError` names the types
    without. ``dataset[0]`` is a :class:`StoreData` view.
    """

    def __init__(self, root: str | os.PathLike, preprocess: str | None = None, **kwargs):
        super().__init__("mag", root, **kwargs)
        if preprocess is not None:
            bare = [t for t in self.store.node_types if "feat" not in self.store.feature_names(t)]
            if bare:
                raise LoaderArgumentError(
                    f"Expected a 'feat' feature for every node type of {self.store.url} "
                    f"(preprocess={preprocess!r}). Node types {bare} have none: derive them "
                    "when you preprocess (--derive-features), or pass preprocess=None.")


class DglNodePropPredDataset(_Dataset):
    """OGB's ``DglNodePropPredDataset(name, root)`` over the store at ``root`` (or ``root/name``).

    ``dataset[0]`` is ``(graph, labels)``: a :class:`StoreGraph` and the labels as
    :class:`LazyRows` of shape ``(N, 1)``, as OGB returns them (``labels[:, 0]`` works). On a
    store of several node types ``labels`` is, as OGB gives it for ``ogbn-mag``, a dictionary
    ``{node_type: (N, 1) labels}`` of the node types that have labels.
    """

    def __getitem__(self, i: int):
        store = super().__getitem__(i).store
        g = StoreGraph(store)
        if len(store.node_types) == 1:
            return g, NodeView(store, store.node_types[0], label_column=True).y
        return g, {t: NodeView(store, t, label_column=True).y for t in store.node_types
                   if "label" in store.value_names(t)}


class AsNodePredDataset:
    """DGL's ``AsNodePredDataset(dataset)``: ``train_idx``, ``val_idx``, ``test_idx``, ``[0]``.

    Takes a dataset of this module (or a store); ``dataset[0]`` is a :class:`StoreGraph`.
    """

    def __init__(self, dataset, split_ratio=None, target_ntype: str | None = None, **kwargs):
        if split_ratio is not None:
            raise LoaderArgumentError("Expected split_ratio=None: the store's splits are used.")
        self.__featurestore__ = as_store(dataset)
        self.target_ntype = target_ntype
        for key, (_, idx, _) in SPLITS.items():
            setattr(self, idx, _torch_ids(split_ids(self.store, key, target_ntype)))

    @property
    def store(self) -> Store:
        """The store this dataset reads."""
        return self.__featurestore__

    @property
    def num_classes(self) -> int:
        """The number of classes of the labelled node type."""
        return self.store.num_classes(self.target_ntype)

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> StoreGraph:
        if i not in (0, -1):
            raise IndexError(f"AsNodePredDataset holds one graph. Got index {i}.")
        return StoreGraph(self.store)
