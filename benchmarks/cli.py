"""``featurestore bench device|gather|sample|loader|preprocess|cache|all``.

Each subcommand runs on a given store (or a synthetic one it makes at ``--scale``, see
:class:`benchmarks.all.Sizes`), prints a markdown table, writes ``<out>/<name>.json``
(machine, versions, options, every trial) and ``<out>/<name>.md``, and with ``--plot`` the PNG
charts into ``<out>``.
"""

from __future__ import annotations

import argparse
import os

DEFAULT_OUT = "bench-results"
DEFAULT_WORKDIR = "bench-data"


def _outputs(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    p.add_argument("--out", default=DEFAULT_OUT, help="where the JSON, markdown and charts go")
    p.add_argument("--plot", action="store_true", help="also draw PNG charts (needs matplotlib)")
    if json_flag:
        p.add_argument("--json", help="also write the JSON report to this file")


def _emit(report: dict, args, name: str | None = None) -> int:
    from .all import emit
    from .report import write_json

    emit(report, args.out, args.plot, name)
    if getattr(args, "json", None):
        write_json(report, args.json)
    return 0


def _sizes(args):
    from .all import Sizes

    return Sizes.quick() if getattr(args, "quick", False) else Sizes.at(args.scale or 0.01)


# -- device ----------------------------------------------------------------------------------
def _device(args) -> int:
    from .all import run_device

    rep = run_device(args.target, seconds=args.seconds, size_mib=args.size_mib,
                     use_fio=False if args.no_fio else None)
    return _emit(rep, args)


# -- gather ----------------------------------------------------------------------------------
def _gather(args) -> int:
    sweep = args.sweep or args.store or args.scale or args.plot or args.batch_sizes
    if not sweep:  # the fixed dense/sparse comparison of benchmarks.gather_bench
        from . import gather_bench

        return gather_bench.main_args(args)
    from .all import run_gather

    sz = _sizes(args)
    rows = sz.gather_rows if (args.scale or args.quick) else int(args.rows)
    batches = _ints(args.batch_sizes) or (sz.gather_batches if args.quick or args.scale else None)
    rep = run_gather(args.workdir, rows, store=args.store, ntype=args.ntype, feature=args.feature,
                     batches=batches, threads=_ints(args.thread_counts) or sz.thread_counts,
                     trials=sz.trials if args.quick else args.trials,
                     device_seconds=sz.device_seconds if args.quick else args.device_seconds,
                     zarr_batch=None if args.no_zarr else (
                         min(_ints(args.batch_sizes)) if args.batch_sizes else sz.zarr_batch),
                     thread_batch=sz.thread_batch)
    return _emit(rep, args)


def _ints(text: str | None):
    if not text:
        return None
    return tuple(int(float(x)) for x in text.split(",") if x.strip())


# -- sample ----------------------------------------------------------------------------------
def _sample(args) -> int:
    from .all import run_sample

    sz = _sizes(args)
    rep = run_sample(args.workdir, sz.nodes, sz.edges, store=args.store,
                     fanouts=_ints(args.fanouts),
                     batch_size=sz.sample_batch_size if args.quick else args.batch_size,
                     batches=sz.sample_batches if args.quick else args.batches,
                     trials=1 if args.quick else args.trials, peers=tuple(args.peers.split(",")))
    return _emit(rep, args)


# -- loader ----------------------------------------------------------------------------------
def _loader(args) -> int:
    from .all import ooc_memcap, run_loader

    if args.scale and not args.quick:
        sz = _sizes(args)
        args.nodes, args.edges = sz.nodes, sz.edges
        args.batches, args.seconds = sz.loader_batches, sz.loader_seconds
        args.memcap = args.memcap or ooc_memcap(sz.nodes)
    if args.quick:
        args.nodes, args.edges, args.batches, args.seconds = 20_000, 200_000, 5, 10.0
        args.batch_size = min(args.batch_size, 256)
    return _emit(run_loader(args), args)


# -- cache -----------------------------------------------------------------------------------
def _cache(args) -> int:
    from .all import run_cache

    sz = _sizes(args)
    budgets = tuple(float(x) / 100 for x in args.budgets.split(",") if x.strip())
    rep = run_cache(args.workdir, sz.nodes, sz.edges, stores=args.store, inputs=args.input,
                    fanouts=_ints(args.fanouts),
                    batch_size=sz.sample_batch_size if args.quick else args.batch_size,
                    epochs=2 if args.quick else args.epochs, budgets=budgets, window=args.window,
                    max_batches=sz.cache_batches if args.quick else args.max_batches,
                    seed=args.seed)
    return _emit(rep, args)


# -- preprocess ------------------------------------------------------------------------------
def _preprocess(args) -> int:
    from .all import PreprocessOptions, run_preprocess
    from preprocess.memory import parse_size

    sz = _sizes(args)
    edges = int(args.edges) if args.edges else sz.prep_edges
    nodes = int(args.nodes) if args.nodes else sz.prep_nodes
    o = PreprocessOptions(workdir=os.path.join(args.workdir, "preprocess"), edges=edges,
                          nodes=nodes, repeat=1 if args.quick else args.trials,
                          memory=parse_size(args.memory) if args.memory
                          else max(64 << 20, edges * 16 // 4),
                          memcap=args.memcap, scipy=not args.no_scipy,
                          feature_rows=int(args.feature_rows) if args.feature_rows else None)
    return _emit(run_preprocess(o), args)


# -- all -------------------------------------------------------------------------------------
def _all(args) -> int:
    from .all import run_all

    return run_all(args.scale, args.workdir, args.out, plot=args.plot,
                   parts=tuple(p.strip() for p in args.parts.split(",") if p.strip()),
                   quick=args.quick, trials=args.trials)


def register(sub) -> None:
    from .all import PARTS

    bench = sub.add_parser("bench", help="throughput benchmarks (storage, gathers, sampling, "
                           "loaders, preprocessing) against peers",
                           description="Throughput benchmarks. Each prints a markdown table and "
                           "writes JSON (machine, versions, options, every trial), markdown and, "
                           "with --plot, PNG charts into --out.")
    bsub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    fmt = argparse.ArgumentDefaultsHelpFormatter

    p = bsub.add_parser("device", formatter_class=fmt,
                        help="the storage's sequential and random 4 KiB read limits (fio or pread)")
    p.add_argument("target", nargs="?", default=".",
                   help="a file, a store or a directory on the device to probe")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per probe")
    p.add_argument("--size-mib", type=int, default=1024,
                   help="size of the temporary probe file when no file that large is there")
    p.add_argument("--no-fio", action="store_true", help="use the built-in pread probe")
    _outputs(p)
    p.set_defaults(func=_device)

    from . import gather_bench

    p = bsub.add_parser("gather", formatter_class=fmt,
                        help="row gathers vs np.memmap and zarr: batch sizes, threads, warm/cold")
    gather_bench.add_arguments(p)  # --workdir --rows --trials --io-threads --no-zarr ... --json
    p.add_argument("--sweep", action="store_true",
                   help="sweep batch sizes and thread counts (implied by the options below)")
    p.add_argument("--store", help="sweep this store's feature array instead of synthetic ones")
    p.add_argument("--ntype", help="node type of --store (default: its only one)")
    p.add_argument("--feature", default="feat", help="feature name of --store")
    p.add_argument("--scale", type=float, help="synthetic rows at this scale (1.0 = 121M rows)")
    p.add_argument("--batch-sizes", help="comma-separated ids per gather (default 1k..200k)")
    p.add_argument("--thread-counts", help="comma-separated io_threads (default 1,4,16,32,64)")
    p.add_argument("--out", default=DEFAULT_OUT, help="where the JSON, markdown and charts go")
    p.add_argument("--plot", action="store_true", help="also draw PNG charts")
    p.set_defaults(func=_gather)

    p = bsub.add_parser("sample", formatter_class=fmt,
                        help="neighbour sampling: ours vs PyG (torch-sparse/pyg-lib) and DGL")
    p.add_argument("--store", help="a homogeneous store (default: a synthetic power-law graph)")
    p.add_argument("--scale", type=float, default=0.01, help="synthetic graph size (1.0 = 111M nodes)")
    p.add_argument("--workdir", default=DEFAULT_WORKDIR, help="where synthetic stores are made")
    p.add_argument("--fanouts", default="15,10,5", help="per hop from the seeds")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=10, help="timed batches per trial")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--peers", default="featurestore,pyg,dgl")
    p.add_argument("--quick", action="store_true", help="tiny graph: a smoke run")
    _outputs(p)
    p.set_defaults(func=_sample)

    try:
        from . import loader_bench
    except ImportError as e:  # the loader benchmark is optional (needs the loaders package)
        p = bsub.add_parser("loader", help=f"(not available: {e})")
        p.set_defaults(func=lambda a, e=e: _unavailable("loader", e))
    else:
        p = bsub.add_parser("loader", formatter_class=fmt,
                            help="loaders: ours vs PyG NeighborLoader and DGL, in RAM and on disk")
        loader_bench.add_arguments(p)
        p.add_argument("--scale", type=float, help="graph size (1.0 = 111M nodes); overrides "
                       "--nodes/--edges/--batches/--seconds")
        p.add_argument("--out", default=DEFAULT_OUT, help="where the JSON, markdown and charts go")
        p.add_argument("--plot", action="store_true", help="also draw PNG charts")
        p.set_defaults(func=_loader)

    p = bsub.add_parser("cache", formatter_class=fmt,
                        help="feature-cache policies (static, SIEVE, CLOCK, LRU, Belady) replayed "
                        "on sampled epochs: hit rate at 1-20%% of the rows")
    p.add_argument("--store", action="append",
                   help="a store (repeat for several; default: the synthetic graph of --scale)")
    p.add_argument("--input", action="append",
                   help="seeds as TYPE:SPLIT or SPLIT (one for all stores, or one per --store)")
    p.add_argument("--fanouts", default="15,10,5", help="per hop from the seeds")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--epochs", type=int, default=3,
                   help="epochs sampled: the first presamples / warms, the others are measured")
    p.add_argument("--budgets", default="1,2,5,10,20", help="cache sizes, %% of the rows")
    p.add_argument("--window", type=int, default=4, help="Belady's lookahead in batches")
    p.add_argument("--max-batches", type=int, help="sample only the first N batches of an epoch")
    p.add_argument("--seed", type=int, default=0, help="the loader's seed (order and draws)")
    p.add_argument("--scale", type=float, default=0.01,
                   help="synthetic graph size when no --store (1.0 = 111M nodes)")
    p.add_argument("--workdir", default=DEFAULT_WORKDIR, help="where synthetic stores are made")
    p.add_argument("--quick", action="store_true", help="tiny graph: a smoke run")
    _outputs(p)
    p.set_defaults(func=_cache)

    p = bsub.add_parser("preprocess", formatter_class=fmt,
                        help="COO to CSC (vs scipy) and feature chunking: edges/s, GB/s, memory")
    p.add_argument("--scale", type=float, default=0.01, help="edges = 1.6B x scale")
    p.add_argument("--edges", type=float, help="edges (overrides --scale)")
    p.add_argument("--nodes", type=float, help="nodes (overrides --scale)")
    p.add_argument("--feature-rows", type=float, help="also convert this many fp32 x 128 rows")
    p.add_argument("--memory", help="the job's memory budget (default: a quarter of the COO)")
    p.add_argument("--memcap", help="run ours under ../shared/tools/memcap SIZE")
    p.add_argument("--no-scipy", action="store_true", help="skip scipy's in-memory tocsc")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--workdir", default=DEFAULT_WORKDIR)
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    _outputs(p)
    p.set_defaults(func=_preprocess)

    p = bsub.add_parser("all", formatter_class=fmt,
                        help="every benchmark at one scale: all.json, report.md, charts")
    p.add_argument("--scale", type=float, default=0.01,
                   help="1.0 = MAG240M paper rows / papers100M graph; 0.01 runs in minutes")
    p.add_argument("--workdir", default=DEFAULT_WORKDIR, help="where synthetic data is made")
    p.add_argument("--out", default=DEFAULT_OUT, help="where all.json, report.md and charts go")
    p.add_argument("--plot", action="store_true", help="also draw PNG charts")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated among {PARTS}")
    p.add_argument("--trials", type=int, help="trials per measurement (default 3)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of every part")
    p.set_defaults(func=_all)


def _unavailable(name: str, e: Exception) -> int:
    import sys

    print(f"featurestore bench {name}: not available: {e}", file=sys.stderr)
    return 2
