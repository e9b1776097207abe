"""The ``featurestore`` console script: one entry point, one subcommand per job.

Each package contributes its subcommands through a ``register(subparsers)`` function in its
own ``cli`` module, imported here by name so that ``featurestore`` itself stays free of the
layers above it (docs/design.md).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

#: modules with a ``register(subparsers)`` function, in the order their commands are listed.
COMMAND_MODULES = [
    "featurestore.commands",
    "preprocess.cli",
    "preprocess.synth.cli",
    "benchmarks.cli",
    "benchmarks.plan_cli",
    "benchmarks.demo",
]


def build_parser() -> argparse.ArgumentParser:
    """Return the ``featurestore`` argument parser (every package's commands registered)."""
    from featurestore import __version__

    p = argparse.ArgumentParser(
        prog="featurestore",
        description="Out-of-core graph feature store: preprocess, inspect, verify, benchmark.")
    p.add_argument("--version", action="version", version=f"featurestore {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # the package has no commands yet
                continue
            raise
        mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the ``featurestore`` command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    from featurestore.errors import FeatureStoreError

    try:
        rc = args.func(args)
    except FeatureStoreError as e:
        print(f"featurestore {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
