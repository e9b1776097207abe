"""The ``featurestore preprocess edges`` job: one edge list to a homogeneous store."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from preprocess.jobs.variants import build_csc
from preprocess.steps.csc import plan_csc, reverse_etype
from preprocess.dask.run import check_shared_scratch
from preprocess.sources.base import EdgeSource
from preprocess.sources.dispatch import open_edges
from preprocess.errors import EdgeColumnError, IdsOutOfRangeInputError
from preprocess.jobs.edge_data import (EdgeColumnRef, check_column_options,
                                       check_column_rows, edge_column_steps, source_of)
from preprocess.steps.idcheck import NO_BOUND, check_input_ids
from preprocess.jobs.job import Job, StepContext, StepDef
from preprocess.jobs.paths import input_location

__all__ = ["run_edges_job", "edges_steps", "EdgesContext", "max_id", "scan_ids"]

log = logging.getLogger(__name__)


def max_id(source: EdgeSource, block_edges: int | None = None) -> int:
    """The largest id of either endpoint (-1 when empty); negative ids raise, naming the file."""
    return scan_ids(source, block_edges)[0]


def scan_ids(source: EdgeSource, block_edges: int | None = None) -> tuple[int, int]:
    """``(largest id of either endpoint or -1, number of edges)`` in one pass; negative ids
    raise, naming the file."""
    hi, edges = -1, 0
    for part in source.parts():
        at = 0
        for s, d in part.iter_blocks(block_edges):
            for col, what in ((s, "source"), (d, "destination")):
                if col.size:
                    try:
                        check_input_ids(col, NO_BOUND, part.name, what)
                    except IdsOutOfRangeInputError as e:
                        raise IdsOutOfRangeInputError(
                            f"Expected non-negative {what} ids in {part.name}. Got "
                            f"{int(np.min(col))} in the block at edge {at}.") from e
                    hi = max(hi, int(np.max(col)))
            at += s.shape[0]
        edges += at
    return hi, edges


@dataclass
class EdgesContext(StepContext):
    """What the edge-list job's steps share: the source, the node count, the options."""

    source: EdgeSource = None
    options: dict = field(default_factory=dict)
    budget_bytes: int = 2 << 30
    progress: bool = True
    dask: Any = None  # a distributed.Client: CSC ranges as Dask tasks
    columns: list = field(default_factory=list)  # EdgeColumnRef: per-edge columns to carry

    @property
    def num_edges(self) -> int | None:
        """The input's edge count: from its header, or what the scan counted."""
        e = self.source.num_edges
        return e if e is not None else self.stats.get("scan:num_nodes", {}).get("edges")

    @property
    def num_nodes(self) -> int | None:
        """The node count: given, or what the scan found."""
        n = self.options["num_nodes"]
        return n if n is not None else self.stats.get("scan:num_nodes", {}).get("num_nodes")


def _add_nodes(ctx: EdgesContext) -> None:
    ctx.job.writer.add_node_type(ctx.options["node_type"], ctx.num_nodes)


def _scan(ctx: EdgesContext) -> dict:
    """The node count (largest id + 1) and the edge count, in one pass over the edges (it also
    runs in a dry run, so that the plans that follow count real sizes)."""
    hi, edges = scan_ids(ctx.source)
    return {"num_nodes": hi + 1, "edges": edges}


def _csc_plan(ctx: EdgesContext) -> dict:
    n, e, undirected = ctx.num_nodes, ctx.source.num_edges, ctx.options["undirected"]
    if e is None:  # a CSV or parquet source: what the scan counted, when it ran
        e = ctx.stats.get("scan:num_nodes", {}).get("edges")
    plan = plan_csc(n or 0, n or 0, e * (2 if undirected else 1) if e is not None else None,
                    ctx.budget_bytes)
    return {"edges": plan.num_edges, "passes": plan.est_passes,
            "disk_bytes": plan.output_bytes, "memory_bytes": ctx.budget_bytes}


def _csc(ctx: EdgesContext, etype: tuple, reverse: bool) -> dict:
    o, n = ctx.options, ctx.num_nodes
    src = ctx.source.reversed() if reverse else ctx.source
    return build_csc(ctx.job.writer, etype, src, num_src=n, num_dst=n, coalesce=o["coalesce"],
                     drop_self_loops=o["drop_self_loops"], symmetrize=o["undirected"],
                     budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir,
                     progress=ctx.progress, dask=ctx.dask)


def edges_steps(options: dict, num_edges: int | None,
                columns: list[EdgeColumnRef] = ()) -> list[StepDef]:
    """The steps of the edge-list job, in the order they run, with their plans (``columns``:
    per-edge columns carried into each edge type, see :mod:`preprocess.jobs.edge_data`)."""
    nt = options["node_type"]
    et = (nt, options["relation"], nt)
    steps = []
    if options["num_nodes"] is None:
        steps.append(StepDef("scan:num_nodes", _scan, {"edges": num_edges, "passes": 1},
                             read_only=True))
    steps.append(StepDef(f"nodes:{nt}", _add_nodes, lambda ctx: {"nodes": ctx.num_nodes}))
    for etype, rev in [(et, False)] + ([(reverse_etype(et), True)] if options["csr"] else []):
        steps.append(StepDef(f"csc:{'__'.join(etype)}", partial(_csc, etype=etype, reverse=rev),
                             _csc_plan))
        steps += edge_column_steps(etype, columns, source_of(lambda ctx: ctx.source, rev),
                                   lambda ctx: ctx.num_edges,
                                   drop_self_loops=options["drop_self_loops"],
                                   symmetrize=options["undirected"])
    return steps


def edge_column_refs(edges_path: str, edge_feature=None, edge_values=None, *,
                     header: bool = True, delimiter: str | None = None,
                     edge_feature_dtype: str | None = None) -> list[EdgeColumnRef]:
    """The per-edge columns of the edge-list job: ``edge_feature`` (column names of the edge
    file, stacked as the matrix ``edge_attr``, or a ``.npy`` file ``[E, F]``) and
    ``edge_values`` (name -> a column of the edge file, or a 1-D ``.npy`` file)."""
    def ref(name, kind, spec, dtype=None):
        if isinstance(spec, str) and spec.lower().endswith(".npy"):
            return EdgeColumnRef(name, kind, (spec,), None, dtype=dtype)
        if str(edges_path).lower().endswith(".npy"):
            raise EdgeColumnError(f"Expected a .npy file for the edge {kind} {name!r} of the "
                                  f".npy edge list {edges_path} (it has no named columns). "
                                  f"Got {spec!r}.")
        cols = list(spec) if kind == "features" else spec
        return EdgeColumnRef(name, kind, (str(edges_path),), cols, header, delimiter, dtype)

    refs = []
    if edge_feature:
        if isinstance(edge_feature, str) and not edge_feature.lower().endswith(".npy"):
            edge_feature = [c for c in edge_feature.split(",") if c]
        refs.append(ref("edge_attr", "features", edge_feature, edge_feature_dtype))
    for name, spec in (edge_values or {}).items():
        refs.append(ref(name, "values", spec))
    return refs


def run_edges_job(edges_path, store, *, num_nodes: int | None = None, node_type: str = "node",
                  relation: str = "to", src_col="src", dst_col="dst", header: bool = True,
                  delimiter: str | None = None, coalesce: bool = False,
                  drop_self_loops: bool = False, undirected: bool = False, csr: bool = False,
                  force: bool = False, dry_run: bool = False, budget_bytes: int = 2 << 30,
                  progress: bool = True, dask=None, scratch_dir=None, edge_feature=None,
                  edge_values: dict | None = None,
                  edge_feature_dtype: str | None = None) -> Job:
    """Convert one edge list (ids already in ``[0, num_nodes)``) into a store; returns the job.

    ``undirected`` adds the reverse of every edge and coalesces (PyG's ``ToUndirected``);
    with edge columns it does not coalesce (each edge and its reverse keep the input row).
    ``edge_feature`` / ``edge_values`` carry per-edge columns (see :func:`edge_column_refs`)
    into CSC edge order; ``coalesce`` with them raises
    :class:`~preprocess.errors.EdgeColumnError`.
    ``csr`` also stores the out-neighbours as edge type ``rev_<relation>``. ``dask`` (a
    ``distributed.Client``) sorts the CSC ranges as Dask tasks (same store); ``scratch_dir``
    see :class:`~preprocess.jobs.job.Job` (required with ``dask`` for a remote store).
    """
    source = open_edges(input_location(edges_path, urls=dask is not None), src_col, dst_col,
                        header=header, delimiter=delimiter)
    columns = edge_column_refs(edges_path, edge_feature, edge_values, header=header,
                               delimiter=delimiter, edge_feature_dtype=edge_feature_dtype)
    if columns:
        check_column_options(f"preprocess edges {edges_path}", coalesce=coalesce)
        check_column_rows(columns, source.num_edges, f"preprocess edges {edges_path}")
    options = dict(num_nodes=num_nodes, node_type=node_type, relation=relation,
                   src_col=src_col, dst_col=dst_col, header=header, delimiter=delimiter,
                   coalesce=coalesce or (undirected and not columns),
                   drop_self_loops=drop_self_loops, undirected=undirected, csr=csr)
    if columns:  # the manifest of a store without edge columns stays as it was
        options.update(edge_feature=edge_feature, edge_values=edge_values,
                       edge_feature_dtype=edge_feature_dtype)
    inputs = list(dict.fromkeys(source.inputs() + [p for r in columns for p in r.paths]))
    check_shared_scratch(store, scratch_dir, dask, dry_run)  # before the store is opened
    job = Job(store, "edges", inputs, options, force=force, dry_run=dry_run,
              budget_bytes=budget_bytes, progress=progress, scratch_dir=scratch_dir)
    ctx = EdgesContext(job, source=source, options=options, budget_bytes=budget_bytes,
                       progress=progress, dask=dask, columns=columns)
    job.run_steps(edges_steps(options, source.num_edges, columns), ctx)
    job.commit()
    return job
