"""The ``featurestore preprocess edges`` job: one edge list to a homogeneous store."""

from __future__ import annotations

import logging

import numpy as np

from .csc import build_csc, plan_csc, reverse_etype
from .edges import EdgeSource, open_edges
from .errors import IdsOutOfRangeInputError
from .idcheck import NO_BOUND, check_input_ids
from .job import Job

__all__ = ["run_edges_job", "max_id"]

log = logging.getLogger(__name__)


def max_id(source: EdgeSource, block_edges: int | None = None) -> int:
    """The largest id of either endpoint (-1 when empty); negative ids raise, naming the file."""
    hi = -1
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
    return hi


def run_edges_job(edges_path, store, *, num_nodes: int | None = None, node_type: str = "node",
                  relation: str = "to", src_col="src", dst_col="dst", header: bool = True,
                  delimiter: str | None = None, coalesce: bool = False,
                  drop_self_loops: bool = False, undirected: bool = False, csr: bool = False,
                  force: bool = False, dry_run: bool = False, budget_bytes: int = 2 << 30,
                  progress: bool = True) -> Job:
    """Convert one edge list (ids already in ``[0, num_nodes)``) into a store; returns the job.

    ``undirected`` adds the reverse of every edge and coalesces (PyG's ``ToUndirected``);
    ``csr`` also stores the out-neighbours as edge type ``rev_<relation>``.
    """
    source = open_edges(edges_path, src_col, dst_col, header=header, delimiter=delimiter)
    options = dict(num_nodes=num_nodes, node_type=node_type, relation=relation,
                   src_col=src_col, dst_col=dst_col, header=header, delimiter=delimiter,
                   coalesce=coalesce or undirected, drop_self_loops=drop_self_loops,
                   undirected=undirected, csr=csr)
    job = Job(store, "edges", source.inputs(), options, force=force, dry_run=dry_run,
              budget_bytes=budget_bytes, progress=progress)
    et = (node_type, relation, node_type)
    n = num_nodes
    if n is None:
        st = job.run_step("scan:num_nodes", lambda: {"num_nodes": max_id(source) + 1},
                          plan={"edges": source.num_edges, "passes": 1})
        n = st.get("num_nodes")
    e = source.num_edges
    plan = plan_csc(n or 0, n or 0, e * (2 if undirected else 1) if e is not None else None,
                    budget_bytes)
    with job.step(f"nodes:{node_type}", plan={"nodes": n}) as st:
        if st.todo:
            job.writer.add_node_type(node_type, n)
    steps = [(et, source)]
    if csr:
        steps.append((reverse_etype(et), source.reversed()))
    for etype, src in steps:
        with job.step(f"csc:{'__'.join(etype)}",
                      plan={"edges": plan.num_edges, "passes": plan.est_passes,
                            "disk_bytes": plan.output_bytes, "memory_bytes": budget_bytes}) as st:
            if st.todo:
                st.stats = build_csc(job.writer, etype, src, num_src=n, num_dst=n,
                                     coalesce=options["coalesce"],
                                     drop_self_loops=drop_self_loops, symmetrize=undirected,
                                     budget_bytes=budget_bytes, tmpdir=job.tmpdir,
                                     progress=progress)
    job.commit()
    return job
