"""``featurestore preprocess JOB ...``: the preprocessing jobs on the command line.

One ``preprocess`` command with a sub-command per job. Jobs of other modules (the OGB-LSC
jobs) add theirs through :func:`add_preprocess_command`: each entry point of the group
:data:`PREPROCESS_COMMAND_GROUP` (``pyproject.toml``) names a
``register_preprocess(add_command)`` function, loaded and called when the parser is built::

    [project.entry-points."featurestore.preprocess"]
    ogb = "preprocess.ogb.cli:register_preprocess"

and in that module::

    def register_preprocess(add_command):
        p = add_command("mag240m", "MAG240M (OGB-LSC) to a store")
        p.add_argument("root")
        p.set_defaults(func=run)      # run(args) -> int; job_kwargs(args) gives Job options

Every job command has the shared options ``--memory``, ``--force``, ``--dry-run`` and
``--no-progress`` (see :func:`add_job_arguments`).
"""

from __future__ import annotations

import argparse
import logging
from importlib.metadata import entry_points

from featurestore.argtypes import fanout_list, positive_int

from preprocess.steps.memory import parse_size

__all__ = ["register", "add_preprocess_command", "add_job_arguments", "add_dask_argument",
           "job_kwargs",
           "PREPROCESS_COMMAND_GROUP"]

log = logging.getLogger(__name__)

#: the entry-point group of ``register_preprocess(add_command)`` functions adding jobs.
PREPROCESS_COMMAND_GROUP = "featurestore.preprocess"

DEFAULT_MEMORY = "2GiB"

_jobs: argparse._SubParsersAction | None = None


def add_job_arguments(p: argparse.ArgumentParser) -> None:
    """The options every job takes: memory budget, force, dry run, progress bars."""
    g = p.add_argument_group("job options")
    g.add_argument("--memory", default=DEFAULT_MEMORY, metavar="SIZE",
                   help="memory budget of the job's buffers, e.g. 512MiB, 2GiB "
                        f"(default {DEFAULT_MEMORY}); the interpreter adds ~0.2 GiB")
    g.add_argument("--force", action="store_true",
                   help="start over, replacing a finished or partial store")
    g.add_argument("--dry-run", action="store_true",
                   help="print the plan (steps, sizes, disk, memory) and write nothing")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_dask_argument(p: argparse.ArgumentParser) -> None:
    """``--dask ADDRESS`` / ``--dask local:N`` (CSC ranges and feature blocks as Dask tasks)
    and ``--scratch DIR`` (the job's scratch and work files)."""
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="run the CSC ranges and feature blocks as Dask tasks: a scheduler "
                        "address, or local:N for N local worker processes (needs "
                        "dask[distributed]; inputs, scratch and a local store must be on "
                        "storage every worker sees)")
    p.add_argument("--scratch", default=None, metavar="DIR",
                   help="scratch and work files go under DIR (default: inside a local store); "
                        "required with --dask for a remote store, on storage every worker sees")


def job_kwargs(args: argparse.Namespace) -> dict:
    """Keyword arguments of :class:`preprocess.jobs.job.Job` from the shared options."""
    try:
        budget = parse_size(args.memory)
    except ValueError as e:
        raise SystemExit(f"featurestore preprocess: error: --memory: {e}") from e
    return dict(force=args.force, dry_run=args.dry_run, budget_bytes=budget,
                progress=not args.no_progress)


def add_preprocess_command(name: str, help: str, description: str | None = None,
                           job_options: bool = True) -> argparse.ArgumentParser:
    """Add ``featurestore preprocess NAME`` and return its parser (call ``set_defaults(func=)``)."""
    if _jobs is None:
        raise RuntimeError("Expected preprocess.cli.register() to have run first.")
    p = _jobs.add_parser(name, help=help, description=description or help,
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    if job_options:
        add_job_arguments(p)
    return p


def register(subparsers) -> None:
    """Add the ``preprocess`` command and its jobs to the ``featurestore`` parser."""
    global _jobs
    p = subparsers.add_parser(
        "preprocess", help="turn raw graph data into a store (out of core, resumable)",
        description="Preprocessing jobs: raw edge lists, features and labels to a store, in a "
                    "memory budget, resumable after a crash (re-run the same command).")
    _jobs = p.add_subparsers(dest="job", metavar="JOB", required=True)

    q = add_preprocess_command(
        "spec", "a dataset described by a spec file (YAML) to a store",
        "Build a store from a dataset spec file (node types, edge files per relation, "
        "features, labels, splits); see docs/preprocess.md for the format.")
    q.add_argument("spec", metavar="SPEC", help="the dataset spec file (YAML)")
    q.add_argument("store", metavar="STORE", help="where the store goes (directory or URL)")
    q.add_argument("--reorder", choices=["none", "degree"], default=None,
                   help="renumber nodes by in-degree, highest first (overrides the spec)")
    add_dask_argument(q)
    q.set_defaults(func=_run_spec)

    q = add_preprocess_command(
        "edges", "one edge list (npy, parquet, CSV) to a homogeneous store",
        "Convert one edge list with ids in [0, N) to a store with one node type and one edge "
        "type, as CSC.")
    q.add_argument("edges", metavar="EDGES",
                   help="edge file: .npy [2, E], .parquet or .csv (with --dask, a .npy may be "
                        "an fsspec URL: s3://...)")
    q.add_argument("store", metavar="STORE", help="where the store goes (directory or URL)")
    q.add_argument("--num-nodes", type=int, default=None,
                   help="node count (default: largest id + 1, one more pass over the input)")
    q.add_argument("--node-type", default="node")
    q.add_argument("--relation", default="to")
    q.add_argument("--src-col", default="src", help="source column (parquet/CSV; an index for "
                                                    "CSV without header)")
    q.add_argument("--dst-col", default="dst")
    q.add_argument("--no-header", action="store_true", help="the CSV has no header row")
    q.add_argument("--delimiter", default=None, help="CSV delimiter (default: , or tab for .tsv)")
    q.add_argument("--coalesce", action="store_true", help="remove duplicate edges")
    q.add_argument("--drop-self-loops", action="store_true")
    q.add_argument("--undirected", action="store_true",
                   help="add the reverse of every edge and coalesce (PyG's ToUndirected); "
                        "with --edge-feature/--edge-value, without coalescing (the reverse "
                        "edge carries the edge's row)")
    q.add_argument("--csr", action="store_true",
                   help="also store the CSR (out-neighbours) as edge type rev_RELATION")
    q.add_argument("--edge-feature", metavar="COL[,COL...]|FILE.npy", default=None,
                   help="carry these columns of the edge file (or an [E, F] .npy) into the "
                        "store as the edge feature matrix edge_attr, in CSC edge order")
    q.add_argument("--edge-feature-dtype", default=None,
                   help="cast edge_attr to this dtype (e.g. float16)")
    q.add_argument("--edge-value", metavar="NAME=COL|NAME=FILE.npy", action="append",
                   type=_name_eq_col,
                   default=[], help="carry a column of the edge file (or a 1-D .npy) into the "
                                    "store as per-edge values NAME (repeatable)")
    add_dask_argument(q)
    q.set_defaults(func=_run_edges)

    _add_reorder(add_preprocess_command)

    for ep in entry_points(group=PREPROCESS_COMMAND_GROUP):
        ep.load()(add_preprocess_command)


def _add_reorder(add_command) -> None:
    q = add_command(
        "reorder", "a store renumbered hot-first, the rest in a locality order, to a new store",
        "Write SRC renumbered to a new store DST: the rows the ranking puts hottest first "
        "(an id prefix, hottest first), the others breadth first from them, so that a "
        "batch's misses share disk blocks. Features, labels, values, splits, orig_id and "
        "the edges follow; SRC is only read. See docs/preprocess.md.")
    q.add_argument("src", metavar="SRC", help="the store to reorder (only read)")
    q.add_argument("dst", metavar="DST", help="where the reordered store goes (a new store)")
    q.add_argument("--order", choices=["presample", "degree", "bfs"], default="presample",
                   help="hot prefix ranked by a presample pass (the loader's static cache "
                        "ranking), by degree, or none (bfs: breadth first only)")
    q.add_argument("--node-type", default=None,
                   help="the node type renumbered (default: the one with the most feature "
                        "bytes)")
    q.add_argument("--hot", default="25%",
                   help="rows in the hot prefix, hottest first: a count or a share (25%%); "
                        "about the rows an epoch touches (featurestore plan shows them)")
    q.add_argument("--fanouts", type=fanout_list, default="15,10,5",
                   help="presample: fanouts per layer")
    q.add_argument("--batch-size", type=positive_int, default=1024,
                   help="presample: seeds per batch")
    q.add_argument("--input", default="train",
                   help="presample: the split whose nodes are the seeds, or 'all'")
    q.add_argument("--epochs", type=positive_int, default=1, help="presample: epochs of batches")
    q.add_argument("--seed", type=int, default=0, help="presample: the loader's seed")
    q.add_argument("--expand-max-degree", type=positive_int, default=None, metavar="D",
                   help="the breadth-first order places nodes of in-degree above D without "
                        "expanding them (default: every node expanded)")
    q.add_argument("--scratch", default=None, metavar="DIR",
                   help="scratch and work files go under DIR (default: inside DST)")
    q.set_defaults(func=_run_reorder)


def _run_reorder(args) -> int:
    from preprocess.jobs.reorder import run_reorder

    fanouts = [int(f) for f in args.fanouts.split(",") if f.strip()]
    job = run_reorder(args.src, args.dst, order=args.order, ntype=args.node_type,
                      hot=args.hot, fanouts=fanouts, batch_size=args.batch_size,
                      input=None if args.input == "all" else args.input, epochs=args.epochs,
                      seed=args.seed, expand_max_degree=args.expand_max_degree,
                      scratch_dir=args.scratch, **job_kwargs(args))
    print(job.plan_text() if args.dry_run else job.summary())
    return 0


def _run_spec(args) -> int:
    from preprocess.dask.run import dask_client
    from preprocess.jobs.spec_steps import run_spec

    kw = job_kwargs(args)
    with dask_client(args.dask) as client:
        job = run_spec(args.spec, args.store, reorder=args.reorder, dask=client,
                       scratch_dir=args.scratch, **kw)
    print(job.plan_text() if args.dry_run else job.summary())
    return 0


def _name_eq_col(item: str) -> tuple[str, str]:
    """``NAME=COL`` of ``--edge-value`` (an argparse type: a usage error otherwise)."""
    import argparse

    name, sep, spec = item.partition("=")
    if not sep or not name or not spec:
        raise argparse.ArgumentTypeError(f"expected NAME=COL or NAME=FILE.npy, got {item!r}")
    return name, spec


def _run_edges(args) -> int:
    from preprocess.dask.run import dask_client
    from preprocess.jobs.edges import run_edges_job

    def col(c):
        return int(c) if args.no_header and str(c).isdigit() else c

    values = {name: spec if spec.lower().endswith(".npy") else col(spec)
              for name, spec in args.edge_value}
    feature = args.edge_feature
    if feature and not feature.lower().endswith(".npy"):
        feature = [col(c) for c in feature.split(",") if c]
    kw = job_kwargs(args)
    with dask_client(args.dask) as client:
        job = run_edges_job(
            args.edges, args.store, num_nodes=args.num_nodes, node_type=args.node_type,
            relation=args.relation, src_col=col(args.src_col), dst_col=col(args.dst_col),
            header=not args.no_header, delimiter=args.delimiter, coalesce=args.coalesce,
            drop_self_loops=args.drop_self_loops, undirected=args.undirected, csr=args.csr,
            dask=client, scratch_dir=args.scratch, edge_feature=feature or None,
            edge_values=values or None, edge_feature_dtype=args.edge_feature_dtype, **kw)
    print(job.plan_text() if args.dry_run else job.summary())
    return 0

