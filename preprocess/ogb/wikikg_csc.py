"""Triples to CSC with each edge's relation id in CSC edge order, in a memory budget.

:func:`csc_with_relation` is a stand-in for the general edge-column step (carrying any
per-edge column through the COO -> CSC conversion, ``preprocess/steps/edge_columns.py``, not
there yet when this was written): swap it for that step when it lands. It needs no new sort:
the relation rides in the low digits of the source id, ``key = source * R + relation``,
through the existing bounded external sort (:func:`preprocess.steps.csc.coo_to_csc`), which
orders each destination's edges by key, i.e. by (source, relation). Splitting the sorted keys
(``divmod(key, R)``) gives the store's ``indices`` and the ``relation`` values in the same
order. The keys are int64 (10 bytes per edge in the sort instead of 6), nothing else changes.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from featurestore.format import names as fmt
from featurestore.format.names import EdgeType
from preprocess.sources.base import EdgeSource
from preprocess.steps.csc import coo_to_csc

__all__ = ["TripleKeys", "csc_with_relation", "RELATION_DTYPE"]

#: dtype of the stored per-edge relation ids (torch embeddings take int32 indices).
RELATION_DTYPE = np.dtype(np.int32)


class TripleKeys(EdgeSource):
    """The edges of an ``(E, 3)`` triple array as ``(h * R + r, t)``, or ``(t * R + r, h)``
    when ``reverse``: the relation joined to the source id."""

    def __init__(self, hrt: np.ndarray, path: str, num_relations: int, reverse: bool = False):
        self.hrt, self.name, self.num_relations = hrt, path, int(num_relations)
        self.reverse = reverse
        self.num_edges = int(hrt.shape[0])

    def __reduce__(self):
        return (_reopen, (self.name, self.num_relations, self.reverse))

    def iter_raw(self, block_edges: int):
        """Blocks of ``(key, destination)``, read as row blocks of the triples."""
        s, d = (2, 0) if self.reverse else (0, 2)
        for lo in range(0, self.num_edges, block_edges):
            b = np.asarray(self.hrt[lo:lo + block_edges], np.int64)
            yield b[:, s] * self.num_relations + b[:, 1], np.ascontiguousarray(b[:, d])

    def inputs(self) -> list[str]:
        """The triple file."""
        return [self.name]


def _reopen(path: str, num_relations: int, reverse: bool) -> TripleKeys:
    return TripleKeys(np.load(path, mmap_mode="r"), path, num_relations, reverse)


def csc_with_relation(writer, etype, hrt: np.ndarray, path: str, *, num_entities: int,
                      num_relations: int, reverse: bool, tmpdir=None,
                      budget_bytes: int = 1 << 30, progress: bool = True) -> dict:
    """Write ``etype`` (h -> t, or t -> h when ``reverse``) from triples ``hrt`` (ids checked
    before) with its per-edge ``relation`` values in CSC edge order; every triple is an edge
    (not coalesced), each destination's edges ordered by (source, relation).

    Returns :func:`~preprocess.steps.csc.coo_to_csc`'s statistics.
    """
    et = EdgeType(*etype)
    r = int(num_relations)
    idt = fmt.index_dtype(num_entities)
    if tmpdir is not None:
        os.makedirs(tmpdir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="relation-", dir=tmpdir)
    rel_path = os.path.join(work, "relation.npy")
    step = int(np.clip(budget_bytes // 64, 1 << 16, 1 << 23))  # ~32 bytes per edge at once
    state = {}

    def indptr_out(indptr):
        state["indptr"] = indptr

    def indices_out(blocks, n, dtype):
        rel = np.lib.format.open_memmap(rel_path, mode="w+", dtype=RELATION_DTYPE,
                                        shape=(n,))

        def sources():
            at = 0
            for keys in blocks:  # split in pieces of the budget (the blocks are 64 MiB)
                for lo in range(0, keys.shape[0], step):
                    src, rid = np.divmod(np.asarray(keys[lo:lo + step], np.int64), r)
                    rel[at:at + rid.shape[0]] = rid
                    at += rid.shape[0]
                    yield src.astype(idt)

        writer.add_edge_type(et, state["indptr"], sources(), indices_dtype=idt, validate=False)
        rel.flush()

    try:
        stats = coo_to_csc(TripleKeys(hrt, path, r, reverse), num_src=num_entities * r,
                           num_dst=num_entities, indptr_out=indptr_out,
                           indices_out=indices_out, coalesce=False, sort_neighbors=True,
                           budget_bytes=budget_bytes, tmpdir=tmpdir, progress=progress,
                           what=et.key())
        writer.add_edge_values(et, "relation", np.load(rel_path, mmap_mode="r"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return stats
