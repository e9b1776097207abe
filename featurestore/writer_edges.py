"""The writer's edge-level steps: edge features, per-edge values and edge splits.

Edge features and values are stored in the CSC edge order of their edge type: row ``i``
belongs to the edge at position ``i`` of ``indices`` (the ``e_id`` a sampler returns), so a
sampled edge gathers its features through the same row path and cache as a node does.
Data given in input (COO) order is put in that order by the preprocessing jobs
(:mod:`preprocess.steps.edge_columns`). An edge split holds pairs of one edge type as named
columns: ``src`` always, ``dst`` for pairs with an answer, ``neg_dst`` for fixed negatives per
pair, and any other column (``label``, ``relation``, ``time``); ``docs/format.md`` has the
layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from featurestore.errors import SchemaError, UnknownEdgeTypeError
from featurestore.format import names as fmt
from featurestore.format.blocks import iter_blocks, row_blocks
from featurestore.format.names import EdgeType
from featurestore.format.schema import (EDGE_ID_COLUMNS, EdgeSplitSchema, EdgeTypeSchema,
                                        FeatureSchema, ValueSchema)
from featurestore.rows.validate import first_out_of_range

__all__ = ["EdgeDataSteps"]



class EdgeDataSteps:
    """Steps of :class:`~featurestore.writer.StoreWriter` that add edge-level data."""

    def _edge_type(self, etype: Sequence[str]) -> EdgeTypeSchema:
        et = EdgeType(*etype)
        try:
            return self._meta.edge_type(et)
        except KeyError:
            raise UnknownEdgeTypeError(
                f"Expected an edge type added to {self.url} "
                f"({[tuple(e.etype) for e in self._meta.edge_types]}). Got {tuple(et)} "
                f"instead: add_edge_type first.") from None

    def add_edge_features(self, etype: Sequence[str], name: str, data, *, dtype=None,
                          compressors=None, row_shape: Sequence[int] | None = None) -> None:
        """Add an edge feature matrix (PyG's ``edge_attr``): one row per edge of ``etype``,
        in CSC edge order (row ``i`` is the edge at position ``i`` of ``indices``).

        ``data``, ``dtype``, ``compressors`` and ``row_shape`` as for
        :meth:`~featurestore.writer.StoreWriter.add_features`; a row count other than the
        edge type's edge count raises ``SchemaError``.
        """
        fmt.check_name("feature", name)
        e = self._edge_type(etype)
        blocks, dtype, row_shape = row_blocks(data, dtype, row_shape,
                                              f"edge feature {e.etype.key()}/{name}")
        self._write(fmt.edge_feature_key(e.etype, name), (e.num_edges,) + row_shape, dtype,
                    blocks, compressors=compressors)
        f = FeatureSchema(name, dtype, row_shape, compressors is not None)
        self._record(self._meta.with_edge_type(self._edge_type(etype).with_feature(f)))

    def add_edge_values(self, etype: Sequence[str], name: str, data) -> None:
        """Add a per-edge 1-D array (a relation id, a timestamp, a weight) of ``etype``, in CSC
        edge order; ``data`` an array or an iterator of 1-D blocks."""
        fmt.check_name("value", name)
        e = self._edge_type(etype)
        blocks, dtype, _ = row_blocks(data, None, (), f"edge values {e.etype.key()}/{name}")

        def check(b, at):
            if b.ndim != 1:
                raise SchemaError(f"Expected 1-D values for {e.etype.key()}/{name}. Got shape "
                                  f"{b.shape} at edge {at}.")

        self._write(fmt.edge_values_key(e.etype, name), (e.num_edges,), dtype, blocks,
                    check=check)
        v = ValueSchema(name, dtype)
        self._record(self._meta.with_edge_type(self._edge_type(etype).with_value(v)))

    def add_edge_split(self, name: str, etype: Sequence[str], **columns) -> None:
        """Add the pairs of ``etype`` in edge split ``name`` (``train``, ``valid``, ...).

        ``columns``: ``src`` (required) and ``dst`` store ids, ``neg_dst`` (``(n, k)`` fixed
        negative destinations per pair), and any other per-pair column (``label``,
        ``relation``, ...): arrays with the same first dimension. Id columns are stored as
        int64 and checked against the node counts (``SchemaError`` naming the column and
        position of the first bad id).
        """
        fmt.check_name("split", name)
        e = self._edge_type(etype)
        if "src" not in columns:
            raise SchemaError(f"Expected a 'src' column for edge split {name!r} of "
                              f"{tuple(e.etype)}. Got columns {sorted(columns)}.")
        arrays = {}
        n = None
        for col, data in columns.items():
            fmt.check_name("column", col)
            a = data.detach().cpu().numpy() if hasattr(data, "detach") else np.asarray(data)
            where = f"column {col!r} of edge split {name!r} ({tuple(e.etype)})"
            if a.ndim == 0 or a.dtype.kind not in "fiub":
                raise SchemaError(f"Expected a numeric array with one row per pair as {where}. "
                                  f"Got {a.dtype} of shape {a.shape} instead.")
            if n is None:
                n = a.shape[0]
            if a.shape[0] != n:
                raise SchemaError(f"Expected {n} rows (as 'src') in {where}. Got {a.shape[0]}.")
            if col in EDGE_ID_COLUMNS:
                if a.dtype.kind not in "iu" or (col != "neg_dst" and a.ndim != 1):
                    shape = "" if col == "neg_dst" else " (1-D)"
                    raise SchemaError(f"Expected integer node ids{shape} as {where}. Got "
                                      f"{a.dtype} of shape {a.shape}.")
                a = a.astype(np.int64, copy=False)
                end = getattr(e, EDGE_ID_COLUMNS[col])
                num = self._ntype(end).num_nodes
                flat = a.reshape(-1)
                bad = first_out_of_range(flat, num)
                if bad >= 0:
                    raise SchemaError(f"Expected {end!r} ids in [0, {num}) in {where}. Got "
                                      f"{int(flat[bad])} at row {bad // max(1, flat.size // n)}.")
            arrays[col] = a
        cols = {}
        for col, a in arrays.items():
            self._write(fmt.edge_split_key(name, e.etype, col), a.shape, a.dtype, iter_blocks(a))
            cols[col] = FeatureSchema(col, a.dtype, a.shape[1:])
        self._record(self._meta.with_edge_split(name, e.etype, EdgeSplitSchema(n, cols)))
