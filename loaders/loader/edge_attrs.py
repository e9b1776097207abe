"""Edge features (PyG's ``edge_attr``) and per-edge values (``relation``, ``time``) of the
sampled edges, carried into each batch as PyG's loaders slice ``data``'s edge attributes.

A batch's edges are identified by ``e_id`` (their positions in the store's CSC ``indices``),
and the store keeps edge rows in that order, so a feature is one row gather
(:meth:`featurestore.FeatureArray.gather`, the store's fast row path) and a value one fancy
index of the memory-mapped array. Edge rows are read per batch (no cache): a batch holds at
most its sampled edges' rows, which the loader's memory plan charges (:meth:`EdgeAttrs.row_bytes`).
"""

from __future__ import annotations

import numpy as np
import torch

from featurestore.format.names import EdgeType
from loaders.errors import LoaderArgumentError

__all__ = ["EdgeAttrs", "loader_edge_attrs"]


class EdgeAttrs:
    """The edge features and values a loader carries per edge type, and :meth:`rows`.

    Parameters
    ----------
    store
        The store.
    names
        ``"all"`` (every edge feature and value of every edge type) or names; a name no edge
        type has raises :class:`~loaders.errors.LoaderArgumentError`.
    """

    def __init__(self, store, names):
        #: per edge type, ``(name, source, is_feature)``
        self.per_type: dict[EdgeType, list[tuple[str, object, bool]]] = {}
        if not names:
            return
        want = None if names == "all" else [names] if isinstance(names, str) else list(names)
        found = set()
        for et in store.edge_types:
            keep = []
            for name in store.edge_feature_names(et):
                if want is None or name in want:
                    keep.append((name, store.edge_features(et, name), True))
            for name in store.edge_value_names(et):
                if want is None or name in want:
                    keep.append((name, store.edge_values(et, name), False))
            found.update(k[0] for k in keep)
            if keep:
                self.per_type[et] = keep
        missing = sorted(set(want or ()) - found)
        if missing:
            have = {tuple(et): store.edge_feature_names(et) + store.edge_value_names(et)
                    for et in store.edge_types}
            raise LoaderArgumentError(f"Expected edge_attrs among the edge features and values "
                                      f"of {store.url}: {have}. Got {missing} instead.")

    def row_bytes(self) -> int:
        """Bytes a batch reads per sampled edge, at most (the widest edge type's carried
        rows): what the memory plan charges per edge of a batch."""
        widest = 0
        for attrs in self.per_type.values():
            b = 0
            for _, src, _ in attrs:
                b += int(np.prod(src.shape[1:], dtype=np.int64)) * np.dtype(src.dtype).itemsize
            widest = max(widest, b)
        return widest

    def rows(self, edge: dict[EdgeType, np.ndarray]) -> dict[EdgeType, dict[str, torch.Tensor]]:
        """Per edge type, each carried attribute of the edges ``edge[et]`` (in that order)."""
        out = {}
        for et, attrs in self.per_type.items():
            ids = edge.get(et)
            if ids is None:
                continue
            got = {}
            for name, src, is_feature in attrs:
                rows = src.gather(ids) if is_feature else np.ascontiguousarray(src[ids])
                got[name] = torch.from_numpy(rows)
            out[et] = got
        return out


def loader_edge_attrs(store, edge_attrs, homogeneous) -> EdgeAttrs:
    """The edge attributes a loader carries (``edge_attrs=``; by default all of them, as PyG
    slices ``edge_attr``; none in the relational view, which has ``edge_type`` only)."""
    if homogeneous:
        if edge_attrs:
            raise LoaderArgumentError("Expected edge_attrs=None with homogeneous=: the "
                                      "relational view carries x, y, node_type and edge_type "
                                      "only.")
        return EdgeAttrs(store, ())
    return EdgeAttrs(store, "all" if edge_attrs is None else edge_attrs)
