"""The reader's edge-level data: edge features, per-edge values and edge splits.

Edge features and values have one row per edge of their edge type, in CSC edge order: row
``i`` is the edge at position ``i`` of :meth:`~featurestore.Store.csc`'s ``indices``, which
is the ``e_id`` the samplers return, so ``store.edge_features(et).gather(batch.e_id)`` reads
a batch's edge rows through the same fast row path as node features. Edge splits are pairs of
one edge type as named columns (``src``, ``dst``, ``neg_dst``, ``relation`` ...).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from featurestore.array import FeatureArray
from featurestore.errors import UnknownEdgeTypeError, UnknownFeatureError, UnknownSplitError
from featurestore.format import names as fmt
from featurestore.format.names import EdgeType

__all__ = ["EdgeData"]


class EdgeData:
    """Edge-level reads of :class:`~featurestore.Store` (a base class: the store provides
    ``meta``, ``url``, ``_etype``, ``row_reader``, ``_vector`` and the read gate)."""

    def edge_feature_names(self, etype: Sequence[str] | str | None = None) -> list[str]:
        """Return the names of an edge type's feature arrays, sorted (``None``: the only
        edge type; a relation name alone when it is unique)."""
        return sorted(self._etype(etype)[1].features)

    def edge_value_names(self, etype: Sequence[str] | str | None = None) -> list[str]:
        """Return the names of an edge type's per-edge value arrays, sorted."""
        return sorted(self._etype(etype)[1].values)

    @property
    def edge_split_names(self) -> list[str]:
        """The names of the edge splits (``train``, ``valid``, ...), sorted."""
        return sorted(self.meta.edge_splits)

    def edge_split_types(self, name: str) -> list[EdgeType]:
        """The edge types with pairs in edge split ``name``."""
        return list(self._edge_split(name))

    def edge_features(self, etype: Sequence[str] | str | None = None,
                      name: str | None = None) -> FeatureArray:
        """Return an edge type's feature array (PyG's ``edge_attr``), rows by edge id.

        Parameters
        ----------
        etype
            The edge type; ``None`` means the only one.
        name
            The feature's name; ``None`` means the edge type's only feature.

        Raises
        ------
        UnknownEdgeTypeError, UnknownFeatureError
            No such edge type, or no such feature of it (or several, and no ``name``).
        """
        et, e = self._etype(etype)
        name = _one(name, e.features, f"an edge feature of {tuple(et)} in {self.url}")
        self.gate.check_open(f"edge feature {et.key()}/{name}")
        self._recheck_generation()
        key = fmt.edge_feature_key(et, name)
        rows = self.row_reader(key)
        spec = self._opener.specs[key]
        return FeatureArray(f"{self.url}/{key}", rows, spec.shape, spec.dtype, self.read_path,
                            store=self)

    def edge_values(self, etype: Sequence[str] | str | None, name: str | None = None
                    ) -> np.ndarray:
        """Return a per-edge 1-D array (a relation id, a timestamp) in CSC edge order,
        memory-mapped when local; ``name`` ``None``: the edge type's only value array."""
        et, e = self._etype(etype)
        name = _one(name, e.values, f"a per-edge value array of {tuple(et)} in {self.url}")
        return self._vector(fmt.edge_values_key(et, name))

    def edge_split(self, name: str, etype: Sequence[str] | str | None = None
                   ) -> dict[str, np.ndarray]:
        """Return the pairs of edge split ``name`` as ``{column: array}`` (``src`` and, as
        written, ``dst``, ``neg_dst``, ``label``, ``relation`` ...), memory-mapped when local.

        Raises
        ------
        UnknownSplitError
            No such edge split, or it has no pairs of ``etype`` (``None``: its only type).
        """
        per = self._edge_split(name)
        if etype is None:
            if len(per) != 1:
                raise UnknownSplitError(f"Expected an edge type for edge split {name!r} of "
                                        f"{self.url}, which has {[tuple(t) for t in per]}. "
                                        f"Got None instead.")
            et = next(iter(per))
        else:
            try:
                et = self._etype(etype)[0]
            except UnknownEdgeTypeError as err:
                raise UnknownSplitError(str(err)) from None
            if et not in per:
                raise UnknownSplitError(f"Expected an edge type in {[tuple(t) for t in per]} "
                                        f"for edge split {name!r} of {self.url}. Got "
                                        f"{tuple(et)} instead.")
        return {col: self._vector(fmt.edge_split_key(name, et, col)) for col in per[et].columns}

    def _edge_split(self, name: str):
        splits = self.meta.edge_splits
        if name not in splits:
            raise UnknownSplitError(f"Expected an edge split of {self.url}: {sorted(splits)}. "
                                    f"Got {name!r} instead.")
        return splits[name]


def _one(name, names, what: str) -> str:
    if name is None:
        if len(names) != 1:
            raise UnknownFeatureError(f"Expected a name for {what}: {sorted(names)}. Got "
                                      "None instead.")
        return next(iter(names))
    if name not in names:
        raise UnknownFeatureError(f"Expected {what}: {sorted(names)}. Got {name!r} instead.")
    return name
