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
from preprocess.errors import IdsOutOfRangeInputError
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


def edges_steps(options: dict, num_edges: int | None) -> list[StepDef]:
    """The steps of the edge-list job, in the order they run, with their plans."""
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
    return steps


def run_edges_job(edges_path, store, *, num_nodes: int | None = None, node_type: str = "node",
                  relation: str = "to", src_col="src", dst_col="dst", header: bool = True,
                  delimiter: str | None = None, coalesce: bool = False,
                  drop_self_loops: bool = False, undirected: bool = False, csr: bool = False,
                  force: bool = False, dry_run: bool = False, budget_bytes: int = 2 << 30,
                  progress: bool = True, dask=None, scratch_dir=None) -> Job:
    """Convert one edge list (ids already in ``[0, num_nodes)``) into a store; returns the job.

    ``undirected`` adds the reverse of every edge and coalesces (PyG's ``ToUndirected``);
    ``csr`` also stores the out-neighbours as edge type ``rev_<relation>``. ``dask`` (a
    ``distributed.Client``) sorts the CSC ranges as Dask tasks (same store); ``scratch_dir``
    see :class:`~preprocess.jobs.job.Job` (required with ``dask`` for a remote store).
    """
    source = open_edges(input_location(edges_path, urls=dask is not None), src_col, dst_col,
                        header=header, delimiter=delimiter)
    options = dict(num_nodes=num_nodes, node_type=node_type, relation=relation,
                   src_col=src_col, dst_col=dst_col, header=header, delimiter=delimiter,
                   coalesce=coalesce or undirected, drop_self_loops=drop_self_loops,
                   undirected=undirected, csr=csr)
    check_shared_scratch(store, scratch_dir, dask, dry_run)  # before the store is opened
    job = Job(store, "edges", source.inputs(), options, force=force, dry_run=dry_run,
              budget_bytes=budget_bytes, progress=progress, scratch_dir=scratch_dir)
    ctx = EdgesContext(job, source=source, options=options, budget_bytes=budget_bytes,
                       progress=progress, dask=dask)
    job.run_steps(edges_steps(options, source.num_edges), ctx)
    job.commit()
    return job
