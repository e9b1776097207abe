"""Per-node values (``year``, ...) and split masks (``train_mask``, ...) of the sampled nodes,
carried into each batch as PyG's ``NeighborLoader`` slices every node attribute of ``data``.

A value is a fancy index of the store's value array by the batch's node ids; a mask is a
bit test in a bitmap of the split built once per loader (one bit per node of the type: 15 MB
for MAG240M's 121M papers; far faster per batch than a binary search in the split's ids,
docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np
import torch

from loaders.errors import LoaderArgumentError
from loaders.sample.seeds import SPLITS, split_name

__all__ = ["NodeAttrs", "available_attrs", "loader_attrs"]


def _mask_splits(store, ntype: str) -> dict[str, str]:
    """``{mask name: stored split name}`` of the splits that hold nodes of ``ntype`` (the
    masks a :class:`~loaders.datasets.views.NodeView` of the type answers)."""
    out = {}
    for key, (mask, _, _) in SPLITS.items():
        name = split_name(store, key)
        if ntype in store.meta.splits.get(name, ()):
            out[mask] = name
    return out


def available_attrs(store, ntype: str) -> list[str]:
    """What a batch can carry for ``ntype``: its value arrays but ``label`` (that is ``y``),
    then the masks of the splits that hold nodes of the type."""
    return [v for v in store.value_names(ntype) if v != "label"] + list(_mask_splits(store, ntype))


def _bitmap(ids: np.ndarray, n: int) -> np.ndarray:
    """One bit per node of ``n`` (little-endian within a byte), set for ``ids``."""
    bits = np.zeros((n + 7) // 8, np.uint8)
    ids = np.asarray(ids, np.int64)
    np.bitwise_or.at(bits, ids >> 3, (1 << (ids & 7)).astype(np.uint8))
    return bits


class NodeAttrs:
    """The attributes a loader carries per node type, and :meth:`rows` to read a batch's.

    Parameters
    ----------
    store
        The store.
    attrs
        ``"all"`` (every name :func:`available_attrs` lists, per type), or names; a name no
        node type has raises :class:`~loaders.errors.LoaderArgumentError`.
    """

    def __init__(self, store, attrs):
        self.per_type: dict[str, list[tuple[str, np.ndarray, bool]]] = {}
        if not attrs:
            return
        names = None if attrs == "all" else [attrs] if isinstance(attrs, str) else list(attrs)
        found = set()
        for t in store.node_types:
            masks = _mask_splits(store, t)
            keep = []
            for name in available_attrs(store, t):
                if names is not None and name not in names:
                    continue
                found.add(name)
                if name in masks:
                    keep.append((name, _bitmap(np.asarray(store.split(masks[name], t)),
                                               store.num_nodes(t)), True))
                else:
                    keep.append((name, store.values(t, name), False))
            if keep:
                self.per_type[t] = keep
        missing = sorted(set(names or ()) - found)
        if missing:
            have = {t: available_attrs(store, t) for t in store.node_types}
            raise LoaderArgumentError(f"Expected attrs among the node values and split masks "
                                      f"of {store.url}: {have}. Got {missing} instead.")

    def rows(self, node: dict[str, np.ndarray]) -> dict[str, dict[str, torch.Tensor]]:
        """Per node type, each attribute of the nodes ``node[t]`` (in that order)."""
        out = {}
        for t, attrs in self.per_type.items():
            ids = node[t]
            got = {}
            for name, data, is_mask in attrs:
                if is_mask:
                    bits = (data[ids >> 3] >> (ids & 7).astype(np.uint8)) & np.uint8(1)
                    got[name] = torch.from_numpy(bits.astype(np.bool_))
                else:
                    got[name] = torch.from_numpy(np.ascontiguousarray(data[ids]))
            out[t] = got
        return out


def loader_attrs(store, attrs, homogeneous, pyg_default: bool) -> NodeAttrs:
    """The node values and masks a loader carries (``attrs=``; by default all of them from a
    PyG view, as PyG slices ``data``'s node attributes)."""
    if attrs and homogeneous:
        raise LoaderArgumentError("Expected attrs=None with homogeneous=: the relational "
                                  "view carries x, y, node_type and edge_type only.")
    if attrs is None:
        attrs = "all" if pyg_default and not homogeneous else ()
    return NodeAttrs(store, attrs)
