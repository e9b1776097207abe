"""GraphBolt's dataset objects over a store: ``OnDiskDataset``/``BuiltinDataset`` with
``.graph``, ``.feature``, ``.tasks`` and ``.all_nodes_set``, and the ``ItemSet`` of seeds.

A store stands for GraphBolt's preprocessed dataset directory: its node types and edge types
are the graph, its node features the feature store, its ``train``/``valid``/``test`` splits
with the ``label`` values one node-classification task (``metadata["num_classes"]`` from the
labels). Nothing is read up front but the splits and their labels.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from featurestore import Store, open_store
from featurestore.errors import UnknownSplitError
from loaders.datasets.views import _open as open_dataset
from loaders.errors import LoaderArgumentError
from loaders.graphbolt.feature import FeatureStore
from loaders.sample.seeds import split_name

__all__ = ["ItemSet", "ItemSetDict", "Task", "SamplingGraph", "OnDiskDataset",
           "BuiltinDataset"]


class ItemSet:
    """GraphBolt's ``ItemSet(items, names)``: a count (``ItemSet(n)`` is ``0..n-1``), a tensor,
    or a tuple of tensors of equal length named by ``names`` (``("seed_nodes", "labels")``).

    ``_items`` holds the tuple as GraphBolt's does (its ``node_classification.py`` reads
    ``test_set._items[0]``); ``columns()`` is the public way to get it.
    """

    def __init__(self, items, names=None):
        self._items = items if isinstance(items, tuple) or _is_scalar(items) else (items,)
        if names is not None:
            names = names if isinstance(names, tuple) else (names,)
            count = len(self._items) if isinstance(self._items, tuple) else 1
            if count != len(names):
                raise LoaderArgumentError(f"Expected one name per item ({count}). Got "
                                          f"names={names!r} instead.")
        self._names = names

    @property
    def names(self) -> tuple[str, ...] | None:
        """The names of the items (``("seed_nodes", "labels")``)."""
        return self._names

    def __len__(self) -> int:
        if _is_scalar(self._items):
            return int(self._items)
        return len(self._items[0])

    def __getitem__(self, idx):
        if _is_scalar(self._items):
            return torch.arange(int(self._items))[idx]
        if len(self._items) == 1:
            return self._items[0][idx]
        return tuple(item[idx] for item in self._items)

    def __iter__(self):
        if _is_scalar(self._items):
            yield from torch.arange(int(self._items))
        elif len(self._items) == 1:
            yield from self._items[0]
        else:
            for i in range(len(self)):
                yield tuple(item[i] for item in self._items)

    def columns(self) -> dict[str, torch.Tensor]:
        """The items as int64/whatever tensors keyed by name (a count becomes ``arange``)."""
        return columns(self)

    def __repr__(self) -> str:
        return f"ItemSet(items={self._items!r}, names={self._names!r})"


class ItemSetDict:
    """GraphBolt's ``ItemSetDict({node_type: ItemSet})``: seeds of a typed graph. Its length
    is the number of items, as GraphBolt's; ``keys()``, ``items()`` and ``[node_type]`` reach
    the item sets."""

    def __init__(self, itemsets: dict):
        self.itemsets = dict(itemsets)

    @property
    def names(self) -> tuple[str, ...] | None:
        """The names of the item sets' items (all alike)."""
        return next(iter(self.itemsets.values())).names if self.itemsets else None

    def __len__(self) -> int:
        return sum(len(s) for s in self.itemsets.values())

    def __getitem__(self, key: str):
        return self.itemsets[key]

    def keys(self):
        """The node types."""
        return self.itemsets.keys()

    def items(self):
        """``(node type, ItemSet)`` pairs."""
        return self.itemsets.items()

    def __repr__(self) -> str:
        return f"ItemSetDict({self.itemsets!r})"


def columns(item_set) -> dict[str, torch.Tensor]:
    """``{name: tensor}`` of an :class:`ItemSet` (ours or GraphBolt's), by slicing it whole."""
    names = item_set.names or ("seed_nodes",)
    whole = item_set[0:len(item_set)]
    whole = whole if isinstance(whole, tuple) else (whole,)
    return {name: torch.as_tensor(v) for name, v in zip(names, whole)}


def _is_scalar(x) -> bool:
    return isinstance(x, (int, np.integer)) or (isinstance(x, torch.Tensor) and x.dim() == 0)


class Task:
    """One task of a dataset: ``metadata`` (``name``, ``num_classes``) and its item sets
    (``None`` where the store has no such split)."""

    def __init__(self, metadata: dict, train_set, validation_set, test_set):
        self.metadata = metadata
        self.train_set, self.validation_set, self.test_set = train_set, validation_set, test_set

    def __repr__(self) -> str:
        return f"Task(metadata={self.metadata!r})"


class SamplingGraph:
    """GraphBolt's ``dataset.graph``: the store's topology, sampled by the loaders of
    :mod:`loaders.graphbolt` (``sample_neighbor(graph, fanouts)``). It answers the sizes
    (``total_num_nodes``, ``num_nodes``, ``num_edges``); ``pin_memory_()`` and ``to()`` return
    it unchanged (the loader holds the topology as its memory plan says)."""

    def __init__(self, store: Store):
        self.store = store

    def __repr__(self) -> str:
        return (f"SamplingGraph({self.store.url!r}, total_num_nodes={self.total_num_nodes}, "
                f"total_num_edges={self.total_num_edges})")

    @property
    def total_num_nodes(self) -> int:
        """Nodes of every type."""
        return sum(self.store.num_nodes(nt) for nt in self.store.node_types)

    @property
    def total_num_edges(self) -> int:
        """Edges of every type."""
        return sum(self.store.num_edges(et) for et in self.store.edge_types)

    @property
    def num_nodes(self):
        """An int on a store of one node type, else ``{node type: count}``."""
        nts = self.store.node_types
        counts = {nt: self.store.num_nodes(nt) for nt in nts}
        return counts[nts[0]] if len(nts) == 1 else counts

    @property
    def num_edges(self):
        """An int on a store of one edge type, else ``{"src:rel:dst": count}``."""
        counts = {":".join(et): self.store.num_edges(et) for et in self.store.edge_types}
        return next(iter(counts.values())) if len(counts) == 1 else counts

    def pin_memory_(self) -> SamplingGraph:
        """``self`` (see the class)."""
        return self

    def to(self, device) -> SamplingGraph:  # noqa: ARG002 - GraphBolt's signature
        """``self`` (see the class)."""
        return self


class OnDiskDataset:
    """GraphBolt's ``OnDiskDataset(path).load()`` over a store (a path, URL or open
    :class:`featurestore.Store`): ``graph``, ``feature``, ``tasks``, ``all_nodes_set``,
    ``dataset_name``. GraphBolt's keywords (``include_original_edge_id``,
    ``force_preprocess``, ``auto_cast_to_optimal_dtype``) are accepted: a store needs no
    preprocessing pass. ``load(tasks=...)`` keeps the named tasks.

    The task is ``node_classification`` when the store has labels and a ``train`` split:
    its sets are ``ItemSet((ids, labels), names=("seed_nodes", "labels"))`` of the
    ``train``/``valid``/``test`` splits (an :class:`ItemSetDict` by node type on a typed store).
    """

    def __init__(self, path, include_original_edge_id: bool = False,  # noqa: ARG002
                 force_preprocess: bool | None = None,  # noqa: ARG002 - GraphBolt's keywords
                 auto_cast_to_optimal_dtype: bool = True):  # noqa: ARG002
        self._source = path
        self._store: Store | None = None
        self._tasks: list[Task] | None = None

    def _open(self) -> Store:
        src = self._source
        return src if isinstance(src, Store) else open_store(os.fspath(src))

    def load(self, tasks: list[str] | None = None) -> OnDiskDataset:
        """Open the store and make its tasks; returns ``self``, as GraphBolt's does."""
        self._store = self._open()
        made = node_classification_tasks(self._store)
        self._tasks = made if tasks is None else [
            t for t in made if t.metadata["name"] in tasks]
        return self

    def _loaded(self) -> Store:
        if self._store is None:
            raise LoaderArgumentError("Expected dataset.load() before reading its graph, "
                                      "features or tasks (GraphBolt's order). Got none yet.")
        return self._store

    @property
    def store(self) -> Store:
        """The open store."""
        return self._loaded()

    @property
    def graph(self) -> SamplingGraph:
        """The topology (:class:`SamplingGraph`)."""
        return SamplingGraph(self._loaded())

    @property
    def feature(self) -> FeatureStore:
        """The node features (:class:`~loaders.graphbolt.feature.FeatureStore`), one object
        per dataset, so an ``update`` is seen by every loader over it."""
        if not hasattr(self, "_feature"):
            self._feature = FeatureStore(self._loaded())
        return self._feature

    @property
    def tasks(self) -> list[Task]:
        """The tasks (:class:`Task`)."""
        self._loaded()
        return self._tasks

    @property
    def dataset_name(self) -> str:
        """The store's directory name."""
        return os.path.basename(self._loaded().url.rstrip("/"))

    @property
    def all_nodes_set(self):
        """Every node: ``ItemSet(n, names="seed_nodes")``, or an :class:`ItemSetDict`."""
        store = self._loaded()
        sets = {nt: ItemSet(store.num_nodes(nt), names="seed_nodes") for nt in store.node_types}
        return next(iter(sets.values())) if len(sets) == 1 else ItemSetDict(sets)


class BuiltinDataset(OnDiskDataset):
    """GraphBolt's ``BuiltinDataset(name, root="datasets")``: the store at ``root/name``
    (or ``root`` itself), made once with ``featurestore preprocess`` instead of downloaded."""

    def __init__(self, name: str, root: str = "datasets"):
        super().__init__(os.path.join(root, name))
        self.name, self.root = name, root

    def _open(self) -> Store:
        return open_dataset(self.name, self.root)


def node_classification_tasks(store: Store) -> list[Task]:
    """The store's node-classification task (none without labels or a ``train`` split)."""
    typed = len(store.node_types) > 1
    sets: dict[str, dict[str, ItemSet]] = {}
    for split in ("train", "valid", "test"):
        name = split_name(store, split)
        for nt in store.node_types:
            if name not in store.split_names or "label" not in store.value_names(nt):
                continue
            try:
                ids = np.array(store.split(name, nt), dtype=np.int64)  # writable, own
            except UnknownSplitError:  # the split has no nodes of this type
                continue
            labels = np.asarray(store.labels(nt))[ids]
            sets.setdefault(split, {})[nt] = ItemSet(
                (torch.from_numpy(ids), torch.from_numpy(labels.astype(np.int64))),
                names=("seed_nodes", "labels"))
    if "train" not in sets:
        return []
    ntype = next(iter(sets["train"]))

    def pick(split):
        found = sets.get(split)
        if not found:
            return None
        return ItemSetDict(found) if typed else found[ntype]

    meta = {"name": "node_classification", "num_classes": store.num_classes(ntype)}
    return [Task(meta, pick("train"), pick("valid"), pick("test"))]
