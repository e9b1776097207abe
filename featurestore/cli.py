"""The ``featurestore`` console script: one entry point, one subcommand per job.

``featurestore``'s own commands (``info``, ``verify``, ``replicate``) are in
:mod:`featurestore.commands`. The packages above it add theirs as entry points of the group
:data:`COMMAND_GROUP` (``pyproject.toml``): one entry point per command, named as the command,
whose function takes the parser's subparsers and adds that command::

    [project.entry-points."featurestore.commands"]
    plan = "loaders.cli:register"

so ``featurestore`` names no module of the layers above it (docs/design.md). Only the entry
point of the command being run is imported; ``featurestore --help`` imports them all.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from importlib.metadata import EntryPoint, entry_points

from featurestore import commands

__all__ = ["COMMAND_GROUP", "build_parser", "main"]

#: the entry-point group of the commands other packages add
COMMAND_GROUP = "featurestore.commands"
#: the order ``featurestore --help`` lists those commands in (others follow, by name)
LISTED_FIRST = ("preprocess", "synth", "bench", "plan", "demo")
_OWN = ("info", "verify", "replicate")


def _command_entry_points() -> list[EntryPoint]:
    eps = list(entry_points(group=COMMAND_GROUP))
    if not eps:
        raise RuntimeError(
            f"Expected the '{COMMAND_GROUP}' entry points of the graph-featurestore package. "
            "Found none: install the package (pip install -e .) so its metadata is there.")
    rank = {name: i for i, name in enumerate(LISTED_FIRST)}
    return sorted(eps, key=lambda ep: (rank.get(ep.name, len(rank)), ep.name))


def _command_in(argv: list[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Return the ``featurestore`` argument parser.

    Parameters
    ----------
    argv
        The arguments it will parse: when they run a known command, only that command's
        entry point is loaded. ``None``: every command is added.
    """
    from featurestore import __version__

    p = argparse.ArgumentParser(
        prog="featurestore",
        description="Out-of-core graph feature store: preprocess, inspect, verify, benchmark.")
    p.add_argument("--version", action="version", version=f"featurestore {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.register(sub)
    eps = _command_entry_points()
    wanted = _command_in(argv) if argv is not None else None
    if wanted is None and argv is not None and "--version" in argv:
        wanted = "--version"  # no command is run: none is loaded
    elif wanted not in {ep.name for ep in eps} | set(_OWN):
        wanted = None  # no command, or an unknown one: all are added, for the help or error
    for ep in eps:
        if wanted is None or ep.name == wanted:
            ep.load()(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the ``featurestore`` command line; return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
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
