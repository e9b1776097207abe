"""The graph of an open store: each edge type's CSC, read once and validated once.

Validation (``indptr[0] == 0``, never decreasing, ``indptr[-1] == len(indices)``, source ids in
range) is skipped when the writer's record of it (root attribute ``topology_checks``, made at
commit by :func:`~featurestore.format.integrity.topology_records`) still describes the files:
same generation, counts, sizes and modification times.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from featurestore.format import names as fmt
from featurestore.format.integrity import check_csc, native
from featurestore.format.names import EdgeType
from featurestore.format.schema import EdgeTypeSchema, StoreSchema
from featurestore.remote.location import Location
from featurestore.rows import RowReader

__all__ = ["Topology"]


class Topology:
    """The CSCs of one store, by edge type.

    Parameters
    ----------
    loc, meta
        The store's location and schema.
    vector
        Reads a whole 1-D array of the store, by key.
    opened
        The row reader of a key once it is open (else ``None``), whose file is compared
        with the writer's record.
    """

    def __init__(self, loc: Location, meta: StoreSchema, vector: Callable[[str], np.ndarray],
                 opened: Callable[[str], RowReader | None]):
        self.loc, self.meta = loc, meta
        self._vector, self._opened = vector, opened
        self._csc: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}

    def get(self, e: EdgeTypeSchema) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)`` of edge type ``e``, in native byte order; validated on first
        use unless recorded. Not thread-safe: the store calls it under its lock."""
        et = e.etype
        got = self._csc.get(et)
        if got is not None:
            return got
        kp, ki = fmt.edge_key(et, "indptr"), fmt.edge_key(et, "indices")
        indptr, indices = self._vector(kp), self._vector(ki)
        if not self._recorded(e, kp, ki):
            check_csc(indptr, indices, self.meta.node_types[et.src].num_nodes,
                      f"{self.loc.path(f'edges/{et.key()}')} (edge type {tuple(et)})")
        got = self._csc[et] = (native(indptr), native(indices))
        return got

    def clear(self) -> None:
        """Forget the loaded CSCs (the store is closing)."""
        self._csc.clear()

    def _recorded(self, e: EdgeTypeSchema, kp: str, ki: str) -> bool:
        """Whether the writer's record of a validated CSC still describes the files."""
        rec = self.meta.extra.get("topology_checks")
        generation = self.meta.generation
        if not isinstance(rec, dict) or not self.loc.is_local or generation is None:
            return False
        r = rec.get(e.etype.key())
        try:
            if (r["generation"] != generation or r["num_edges"] != e.num_edges
                    or r["num_src"] != self.meta.node_types[e.src].num_nodes):
                return False
            for part, key in (("indptr", kp), ("indices", ki)):
                rows = self._opened(key)
                if rows is None or not rows.is_local:
                    return False
                st = os.stat(rows.path)
                if [st.st_size, st.st_mtime_ns] != r[part]:
                    return False
        except (KeyError, TypeError, OSError):
            return False
        return True
