"""Seeds: what a loader starts from, resolved once, and the order of each epoch.

* :func:`as_store`: the store behind what a loader is given (a store, or a view of one: any
  object carrying its store as ``__featurestore__``, as :mod:`loaders.datasets` views do).
* :data:`SPLITS` and :func:`split_name`: PyG's and DGL's split names and the stored names
  they read (``valid`` may be stored as ``val``, ``test`` as ``test-dev``).
* :func:`resolve_input_nodes`: ``(seed node type, seed ids)`` from every form
  :class:`loaders.NeighborLoader` takes as ``input_nodes``.
* :func:`epoch_order`: the positions of each batch's seeds in an epoch (shuffled from
  ``(seed, epoch)``), the one order the loader, the planner and the cache traces follow.
"""

from __future__ import annotations

import numpy as np
import torch

from featurestore import Store
from featurestore.errors import IdsOutOfRangeError, InvalidIdsError
from loaders.errors import LoaderArgumentError

__all__ = ["as_store", "SPLITS", "split_name", "resolve_input_nodes", "is_mask_input",
           "epoch_order", "order_bytes"]

#: PyG's mask name and DGL's index name of each split, and the store split names they read.
SPLITS = {"train": ("train_mask", "train_idx", ("train",)),
          "valid": ("val_mask", "val_idx", ("valid", "val")),
          "test": ("test_mask", "test_idx", ("test", "test-dev", "test_dev"))}


def as_store(data) -> Store:
    """The store behind ``data``: a :class:`Store`, or a view or dataset carrying one."""
    if isinstance(data, Store):
        return data
    store = getattr(data, "__featurestore__", None)
    if isinstance(store, Store):
        return store
    raise LoaderArgumentError(
        "Expected a featurestore Store (open_store(path)) or a view of one (loaders.datasets: "
        f"StoreData, StoreGraph, a dataset's [0]). Got {type(data).__name__} instead. PyG's "
        "Data/HeteroData and DGL graphs live in memory; preprocess them into a store first.")


def split_name(store: Store, split: str) -> str:
    """The store's name of ``split`` (``valid`` may be stored as ``val``, ``test`` as
    ``test-dev``); ``split`` itself when the store has none of them."""
    names = SPLITS[split][2] if split in SPLITS else (split,)
    have = store.split_names
    return next((name for name in names if name in have), names[0])


def resolve_input_nodes(store, input_nodes) -> tuple[str, np.ndarray]:
    """``(seed node type, seed ids)`` from the forms :class:`loaders.NeighborLoader` accepts.

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
    return ntype, _checked_ids(store, ntype, ids)


def _checked_ids(store, ntype: str, ids) -> np.ndarray:
    """``ids`` (indices or a boolean mask of ``ntype``'s nodes) as in-range int64 ids."""
    if isinstance(ids, torch.Tensor):
        ids = ids.numpy()
    ids = np.asarray(ids)
    if ids.dtype == np.bool_ and ids.ndim == 1:  # PyG's boolean mask (data.train_mask)
        n = store.num_nodes(ntype)
        if ids.shape[0] != n:
            raise InvalidIdsError(f"Expected a boolean mask of {n} entries (one per node of "
                                  f"type {ntype!r} of {store.url}). Got {ids.shape[0]} instead.")
        ids = np.flatnonzero(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise InvalidIdsError(f"Expected 1-D integer input nodes for node type {ntype!r} of "
                              f"{store.url}. Got {ids.dtype} of shape {ids.shape} instead.")
    n = store.num_nodes(ntype)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise IdsOutOfRangeError(f"Expected input nodes in [0, {n}) for node type {ntype!r} of "
                                 f"{store.url}. Got ids in [{ids.min()}, {ids.max()}] instead.")
    return ids.astype(np.int64, copy=False)


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


def order_bytes(num_inputs: int) -> int:
    """Bytes of one epoch's order of ``num_inputs`` inputs (:func:`epoch_order`'s positions,
    the whole permutation even on one rank of several)."""
    return int(num_inputs) * (4 if num_inputs < 2**31 else 8)


def epoch_order(num_inputs: int, batch_size: int, epoch: int, seed: int = 0,
                shuffle: bool = True, drop_last: bool = False, *, rank: int = 0,
                world_size: int = 1) -> list[np.ndarray]:
    """Positions in the input nodes of each batch of ``epoch``, as ``NeighborLoader`` orders
    them: shuffled from ``(seed, epoch)`` (alike on every rank), then rank ``rank`` takes its
    contiguous share of ``num_inputs // world_size`` positions. Positions are int32 below
    ``2**31`` inputs (index with them; ``input_id`` is made int64 per batch)."""
    # int32 positions where they fit: a link loader's order over ~10M seed edges is 40 MB,
    # not 80 (the same permutation: numpy's shuffle draws do not depend on the dtype)
    pos = np.arange(num_inputs, dtype=np.int32 if num_inputs < 2**31 else np.int64)
    if shuffle:
        np.random.default_rng([seed, epoch]).shuffle(pos)
    share = num_inputs // world_size
    pos = pos[rank * share:(rank + 1) * share]
    n = share // batch_size if drop_last else -(-share // batch_size)
    return [pos[i:i + batch_size] for i in range(0, n * batch_size, batch_size)]
