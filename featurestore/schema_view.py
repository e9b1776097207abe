"""What a store holds (its node and edge types, counts and array names), answered from its
:class:`~featurestore.format.schema.StoreSchema` without reading any data."""

from __future__ import annotations

from collections.abc import Sequence

from featurestore.errors import UnknownEdgeTypeError, UnknownNodeTypeError
from featurestore.format.names import EdgeType
from featurestore.format.schema import EdgeTypeSchema, StoreSchema

__all__ = ["SchemaView"]


class SchemaView:
    """The schema questions of :class:`~featurestore.Store`: a base class whose subclass sets
    :attr:`meta` (the parsed root schema) and :attr:`url`."""

    meta: StoreSchema
    url: str

    @property
    def complete(self) -> bool:
        """Whether the writer committed the store (always true unless ``allow_incomplete``)."""
        return self.meta.complete

    @property
    def node_types(self) -> list[str]:
        """The node types, sorted."""
        return sorted(self.meta.node_types)

    @property
    def edge_types(self) -> list[EdgeType]:
        """The edge types (:class:`~featurestore.EdgeType` ``(src, rel, dst)``), schema order."""
        return [e.etype for e in self.meta.edge_types]

    @property
    def split_names(self) -> list[str]:
        """The names of the splits (``train``, ``valid``, ...), sorted."""
        return sorted(self.meta.splits)

    def resolve_ntype(self, ntype: str | None = None) -> str:
        """Return the node type `ntype` names; None means the only node type of the store.

        Raises `UnknownNodeTypeError` for an unknown name, or for None on a store with
        several node types.
        """
        nts = self.meta.node_types
        if ntype is None:
            if len(nts) != 1:
                raise UnknownNodeTypeError(f"Expected a node type for {self.url}, which has "
                                           f"{sorted(nts)}. Got None instead.")
            return next(iter(nts))
        if not isinstance(ntype, str) or ntype not in nts:
            raise UnknownNodeTypeError(f"Expected a node type of {self.url}: {sorted(nts)}. "
                                       f"Got {ntype!r} instead.")
        return ntype

    def _etype(self, etype: Sequence[str] | str | None) -> tuple[EdgeType, EdgeTypeSchema]:
        ets = self.meta.edge_types
        if etype is None:
            if len(ets) != 1:
                raise UnknownEdgeTypeError(
                    f"Expected an edge type for {self.url}, which has "
                    f"{[tuple(e.etype) for e in ets]}. Got None.")
            e = ets[0]
        else:
            if isinstance(etype, str):
                found = [e for e in ets if e.rel == etype]
            else:
                t = tuple(etype)
                found = [e for e in ets if tuple(e.etype) == t]
            if len(found) != 1:
                raise UnknownEdgeTypeError(
                    f"Expected an edge type of {self.url}: "
                    f"{[tuple(e.etype) for e in ets]}. Got {etype!r} instead.")
            e = found[0]
        return e.etype, e

    def node_order(self, ntype: str | None = None) -> dict | None:
        """How the ids of a node type were ordered on disk, or None when not recorded.

        ``{"order": "presample", "hot_rows": 419430, ...}`` as ``featurestore preprocess
        reorder`` writes it: ids ``0 .. hot_rows - 1`` are the rows its ranking put hottest,
        hottest first (any prefix of them is that ranking's top rows); see docs/format.md.
        """
        nt = self.resolve_ntype(ntype)
        order = self.meta.extra.get("node_order", {})
        found = order.get(nt) if isinstance(order, dict) else None
        return dict(found) if isinstance(found, dict) else None

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """The node and edge types, as PyG's ``HeteroData.metadata()`` gives them.

        Returns
        -------
        node_types : list of str
            The node types, sorted (as :attr:`node_types`).
        edge_types : list of tuple of str
            The edge types as plain ``(src, rel, dst)`` tuples, in the order of
            :attr:`edge_types`.

        Example::

            model = torch_geometric.nn.to_hetero(model, store.metadata())
        """
        return self.node_types, [tuple(et) for et in self.edge_types]

    def num_nodes(self, ntype: str | None = None) -> int:
        """Return the number of nodes of a node type.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.

        Raises
        ------
        UnknownNodeTypeError
            ``ntype`` is not a node type of the store (or ``None`` with several).
        """
        return self.meta.node_types[self.resolve_ntype(ntype)].num_nodes

    def num_edges(self, etype=None) -> int:
        """Return the number of edges of an edge type.

        Parameters
        ----------
        etype
            ``(src, rel, dst)``, a relation name that names one edge type, or ``None`` for the
            only edge type.

        Raises
        ------
        UnknownEdgeTypeError
            ``etype`` names no edge type, or several.
        """
        return self._etype(etype)[1].num_edges

    def feature_names(self, ntype: str | None = None) -> list[str]:
        """Return the names of a node type's feature arrays (2-D, read by :meth:`features`), sorted.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        """
        return sorted(self.meta.node_types[self.resolve_ntype(ntype)].features)

    def value_names(self, ntype: str | None = None) -> list[str]:
        """Return the names of a node type's per-node value arrays (read by :meth:`values`), sorted.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        """
        return sorted(self.meta.node_types[self.resolve_ntype(ntype)].values)
