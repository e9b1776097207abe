"""``featurestore bench device|gather|sample|loader|preprocess|cache|remote|partition|all``.

Each subcommand's flags are the fields of its options dataclass (:mod:`benchmarks.options`).
It runs on a given store (or a synthetic one it makes at ``--scale``, see
:class:`benchmarks.options.Sizes`; flags given override the sizes), prints a markdown table,
writes ``<out>/<name>.json`` (machine, versions, options, every trial) and ``<out>/<name>.md``,
and with ``--plot`` the PNG charts into ``<out>``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from benchmarks import cache_bench, device, gather_bench, loader_bench, partition_bench
from benchmarks import preprocess_bench, remote_bench, sample_bench

DEFAULT_OUT = "bench-results"

#: name: (module, options class); the class's docstring is the subcommand's help
BENCHES = {"device": (device, device.DeviceOptions),
           "gather": (gather_bench, gather_bench.GatherOptions),
           "sample": (sample_bench, sample_bench.SampleOptions),
           "loader": (loader_bench, loader_bench.LoaderOptions),
           "cache": (cache_bench, cache_bench.CacheOptions),
           "remote": (remote_bench, remote_bench.RemoteOptions),
           "preprocess": (preprocess_bench, preprocess_bench.PreprocessOptions),
           "partition": (partition_bench, partition_bench.PartitionOptions)}
#: benchmarks with their own sizes (no --scale / --quick)
UNSIZED = ("device", "remote", "partition")


def _options(name: str, args: argparse.Namespace):
    """The benchmark's module and its options: the sizes at ``--scale``, then the flags given."""
    from benchmarks.options import Sizes, given, sized

    mod, cls = BENCHES[name]
    if not hasattr(args, "scale"):  # not sized (device)
        return mod, cls(**given(args, cls))
    return mod, replace(sized(cls, Sizes.quick() if args.quick else Sizes.at(args.scale)),
                        **given(args, cls))


def _run(args: argparse.Namespace) -> int:
    from benchmarks.all import emit
    from benchmarks.report import write_json

    mod, o = _options(args.bench, args)
    report = mod.run(o)
    emit(report, args.out, args.plot)
    if args.json:
        write_json(report, args.json)
    failed = [r for r in report.get("results", []) if isinstance(r, dict) and "error" in r]
    return 1 if failed else 0  # a store that failed is in the report, and in the exit status


def _all(args: argparse.Namespace) -> int:
    from benchmarks.all import AllOptions, run_all
    from benchmarks.options import given

    return run_all(AllOptions(**given(args, AllOptions)), args.out, plot=args.plot)


def _common(p: argparse.ArgumentParser, sized: bool = True, json: bool = True) -> None:
    p.add_argument("--out", default=DEFAULT_OUT, help="where the JSON, markdown and charts go")
    p.add_argument("--plot", action="store_true", help="also draw PNG charts (needs matplotlib)")
    if json:
        p.add_argument("--json", help="also write the JSON report to this file")
    if sized:
        p.add_argument("--scale", type=float, default=0.01,
                       help="synthetic sizes (1.0 = MAG240M paper rows / papers100M graph); "
                            "the flags given override them")
        p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")


def _help(cls) -> str:
    """The first sentence of the options class's docstring, as argparse prints help."""
    doc = " ".join(cls.__doc__.split()).rstrip(".")
    return (doc[0].lower() + doc[1:] if doc[1].islower() else doc).replace("%", "%%")


def register(sub) -> None:
    """Add ``bench`` and its subcommands to the ``featurestore`` command line."""
    from benchmarks.all import AllOptions
    from benchmarks.options import add_options

    bench = sub.add_parser("bench", help="throughput benchmarks (storage, gathers, sampling, "
                           "loaders, preprocessing) against peers",
                           description="Throughput benchmarks. Each prints a markdown table and "
                           "writes JSON (machine, versions, options, every trial), markdown and, "
                           "with --plot, PNG charts into --out.")
    bsub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name, (_, cls) in BENCHES.items():
        p = bsub.add_parser(name, help=_help(cls))
        add_options(p, cls)
        _common(p, sized=name not in UNSIZED)
        p.set_defaults(func=_run)
    p = bsub.add_parser("all", help=_help(AllOptions))
    add_options(p, AllOptions)
    _common(p, sized=False, json=False)
    p.set_defaults(func=_all)
