"""The jobs' steps for edge-level data: per-edge columns carried into CSC edge order
(:mod:`preprocess.steps.edge_columns`), shared by ``preprocess edges`` and ``preprocess spec``.

For an edge type with columns, a job adds after its ``csc:`` step an ``order:`` step (where
each input edge went, a file in the job's work directory, kept until the job commits) and one
``edge_features:`` or ``edge_values:`` step per column. Each is a job step: a killed job
redoes only the step it was in.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from featurestore.format.names import EdgeType

from preprocess.errors import EdgeColumnError
from preprocess.jobs.job import StepDef
from preprocess.sources.base import EdgeSource
from preprocess.sources.columns import open_columns
from preprocess.sources.features import FeatureSource
from preprocess.steps.edge_columns import EdgeOrder, edge_order, write_edge_column

__all__ = ["EdgeColumnRef", "ConcatRows", "edge_column_steps", "check_column_options",
           "check_column_rows", "order_path", "source_of"]


@dataclass(frozen=True)
class EdgeColumnRef:
    """A per-edge column to carry: its store name and kind (``features``: rows of values,
    ``values``: 1-D), and where its rows are (one file, or ``parts``, one per edge file,
    read one after the other; ``columns`` None for a ``.npy``)."""

    name: str
    kind: str
    paths: tuple[str, ...]
    columns: Any = None
    header: bool = True
    delimiter: str | None = None
    dtype: str | None = None

    def open(self) -> FeatureSource:
        """The rows, in the edges' input order."""
        parts = [open_columns(p, self.columns, header=self.header, delimiter=self.delimiter)
                 for p in self.paths]
        return parts[0] if len(parts) == 1 else ConcatRows(parts)


class ConcatRows(FeatureSource):
    """The rows of several sources of one row shape, one after the other."""

    def __init__(self, parts: Sequence[FeatureSource]):
        self.parts = list(parts)
        self.name = " + ".join(p.name for p in self.parts)
        first = self.parts[0]
        for p in self.parts[1:]:
            if p.row_shape != first.row_shape:
                raise EdgeColumnError(f"Expected rows of shape {first.row_shape} in {p.name}, "
                                      f"as in {first.name}. Got {p.row_shape}.")
        self.row_shape = first.row_shape
        self.dtype = np.result_type(*[p.dtype for p in self.parts])
        self.num_rows = sum(p.num_rows for p in self.parts)

    def iter_blocks(self, rows):
        """Each part's blocks in turn, in the common dtype."""
        for p in self.parts:
            for b in p.iter_blocks(rows):
                yield np.asarray(b).astype(self.dtype, copy=False)

    def inputs(self):
        """Every part's files."""
        return [f for p in self.parts for f in p.inputs()]


def check_column_options(where: str, *, coalesce: bool, sort_neighbors: bool = True) -> None:
    """:class:`EdgeColumnError` for options that leave per-edge columns without a row each."""
    if coalesce:
        raise EdgeColumnError(f"{where}: Expected no coalescing with edge features or values: "
                              "merging duplicate edges would need a rule to merge their rows. "
                              "Drop coalesce (duplicates stay, each with its row), or "
                              "deduplicate the input first.")
    if not sort_neighbors:
        raise EdgeColumnError(f"{where}: Expected sort_neighbors: true with edge features or "
                              "values (their CSC order is the sorted one).")


def check_column_rows(refs: Sequence[EdgeColumnRef], num_edges: int | None, where: str) -> None:
    """:class:`EdgeColumnError` before anything is written when a column's row count (known
    from its header: ``.npy``, parquet) is not the edge count (when known)."""
    if num_edges is None:
        return
    for ref in refs:
        src = ref.open()
        if src.num_rows != num_edges:
            raise EdgeColumnError(f"{where}: Expected {num_edges} rows (one per edge) for the "
                                  f"edge {ref.kind} {ref.name!r} in {src.name}. Got "
                                  f"{src.num_rows}.")
        if ref.kind == "values" and src.row_shape:
            raise EdgeColumnError(f"{where}: Expected a 1-D column for the edge values "
                                  f"{ref.name!r} in {src.name}. Got rows of shape "
                                  f"{src.row_shape}.")


def order_path(job, etype: Sequence[str]) -> str:
    """Where an edge type's order goes (the job's work directory, kept across runs)."""
    return os.path.join(job.workdir, "edge-order", f"{EdgeType(*etype).key()}.npy")


def _order(ctx, etype, source: Callable, drop_self_loops: bool, symmetrize: bool) -> EdgeOrder:
    return edge_order(ctx.job.writer, etype, source(ctx), order_path(ctx.job, etype),
                      drop_self_loops=drop_self_loops, symmetrize=symmetrize,
                      budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir,
                      progress=ctx.progress)


def _order_step(ctx, **kw) -> dict:
    o = _order(ctx, **kw)
    return {"edges": o.edges_in, "edges_out": o.edges_out}


def _column_step(ctx, ref: EdgeColumnRef, etype, **kw) -> dict:
    order = EdgeOrder.load(order_path(ctx.job, etype)) or _order(ctx, etype=etype, **kw)
    return write_edge_column(ctx.job.writer, etype, ref.name, ref.open(), order, kind=ref.kind,
                             dtype=ref.dtype, budget_bytes=ctx.budget_bytes,
                             tmpdir=ctx.job.tmpdir, progress=ctx.progress)


def _column_plan(ctx, ref: EdgeColumnRef, edges: Callable, symmetrize: bool) -> dict:
    src = ref.open()
    dtype = np.dtype(ref.dtype) if ref.dtype else src.dtype
    n = (edges(ctx) or 0) * (2 if symmetrize else 1)
    row = int(np.prod(src.row_shape, dtype=np.int64)) * dtype.itemsize
    return {"rows": n, "disk_bytes": 2 * n * row}  # the store's array and the bucket files


def edge_column_steps(etype: Sequence[str], refs: Sequence[EdgeColumnRef], source: Callable,
                      edges: Callable, *, drop_self_loops: bool,
                      symmetrize: bool) -> list[StepDef]:
    """The ``order:`` step and one step per column of ``etype`` (after its ``csc:`` step).

    ``source(ctx)`` is the :class:`EdgeSource` the CSC was built from (before symmetrizing),
    ``edges(ctx)`` its edge count (None when unknown yet) for the plans.
    """
    if not refs:
        return []
    et = EdgeType(*etype)
    kw = dict(etype=tuple(et), source=source, drop_self_loops=drop_self_loops,
              symmetrize=symmetrize)

    def order_plan(ctx):
        n = (edges(ctx) or 0) * (2 if symmetrize else 1)
        return {"edges": n, "disk_bytes": 32 * n, "memory_bytes": ctx.budget_bytes}

    steps = [StepDef(f"order:{et.key()}", partial(_order_step, **kw), order_plan)]
    for ref in refs:
        steps.append(StepDef(f"edge_{ref.kind}:{et.key()}/{ref.name}",
                             partial(_column_step, ref=ref, **kw),
                             partial(_column_plan, ref=ref, edges=edges,
                                     symmetrize=symmetrize)))
    return steps


def source_of(fn: Callable[[Any], EdgeSource], reverse: bool) -> Callable[[Any], EdgeSource]:
    """``fn(ctx)``, reversed when ``reverse`` (the source of a ``rev_`` edge type)."""
    if not reverse:
        return fn
    return lambda ctx: fn(ctx).reversed()

