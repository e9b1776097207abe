"""Benchmark options as frozen dataclasses, their command-line flags, and the sizes at a scale.

Each benchmark states its options once, as a dataclass whose fields are made with :func:`opt`
(default, help text and, with ``size=``, the :class:`Sizes` attribute it takes at a scale, see
:func:`sized`); :func:`add_options` turns the fields into ``argparse`` flags
(``batch_size`` -> ``--batch-size``, a ``bool`` that defaults to true -> ``--no-NAME``, a tuple
of numbers -> comma-separated, a tuple of strings -> a repeatable flag) and :func:`given`
collects the flags a user gave, to be laid over the options at a scale with
``dataclasses.replace``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass, field

from featurestore.errors import InvalidArgumentError

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9}


def opt(default, help: str, **extra):
    """A dataclass field with a default and the help text of its flag."""
    return field(default=default, metadata={"help": help, **extra})


def count(text: str) -> int:
    """``"100M"`` -> 100_000_000, ``"4e6"`` -> 4_000_000 (decimal suffixes K, M, G/B)."""
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?(?:e\d+)?)\s*([KMGB]?)\s*", str(text), re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"Expected a count such as 400M or 4e6. Got {text!r}.")
    return int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])


def _numbers(kind):
    def parse(text: str) -> tuple:
        return tuple(kind(x) for x in text.split(",") if x.strip())
    return parse


_TYPES = {"int": count, "float": float, "str": str, "tuple[int, ...]": _numbers(count),
          "tuple[float, ...]": _numbers(float)}


def add_options(p: argparse.ArgumentParser, cls, skip: tuple[str, ...] = ()) -> None:
    """Add a flag for every field of the dataclass ``cls`` (but ``skip``); defaults suppressed."""
    for f in dataclasses.fields(cls):
        if f.name in skip or "help" not in f.metadata:
            continue
        flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
        kind = f.type.replace(" | None", "")
        shown = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
        quiet = f.default in (None, ()) or f.default is False
        kw = {"dest": f.name, "default": argparse.SUPPRESS, "help": (f.metadata["help"] + (
            "" if quiet else f" (default: {shown})")).replace("%", "%%")}
        if f.metadata.get("positional"):
            p.add_argument(f.name, nargs="?", default=argparse.SUPPRESS, help=kw["help"])
        elif kind == "bool":
            if f.default:
                flag = "--no-" + f.name.replace("_", "-")
            p.add_argument(flag, action="store_false" if f.default else "store_true", **kw)
        elif kind == "tuple[str, ...]":
            p.add_argument(flag, action="append", **kw)
        else:
            p.add_argument(flag, type=f.metadata.get("type", _TYPES[kind]),
                           metavar=f.metadata.get("metavar"),
                           choices=f.metadata.get("choices"), **kw)


def sized(cls, sz: Sizes, **kw):
    """``cls`` with every field whose ``size`` names an attribute of ``sz`` set from it, then
    ``kw``."""
    return cls(**{f.name: getattr(sz, f.metadata["size"]) for f in dataclasses.fields(cls)
                  if "size" in f.metadata} | kw)


def given(ns: argparse.Namespace, cls) -> dict:
    """The fields of ``cls`` that the command line set."""
    return {f.name: tuple(getattr(ns, f.name)) if f.type == "tuple[str, ...]"
            else getattr(ns, f.name) for f in dataclasses.fields(cls) if hasattr(ns, f.name)}


@dataclass(frozen=True)
class Sizes:
    """Synthetic sizes and run lengths at a scale (1.0 = MAG240M paper rows / papers100M graph)."""

    gather_rows: int
    nodes: int
    edges: int
    prep_edges: int
    prep_nodes: int
    trials: int = 3
    device_seconds: float = 3.0
    probe_mib: int = 1024
    gather_batches: tuple = (1_000, 10_000, 30_000, 100_000, 200_000)
    zarr_batch: int = 10_000
    thread_counts: tuple = (1, 4, 16, 32)
    thread_batch: int = 5_000
    sample_batch_size: int = 1024
    sample_batches: int = 10
    loader_batches: int = 20
    loader_seconds: float = 15.0
    cache_batches: int | None = 20

    @classmethod
    def at(cls, scale: float) -> Sizes:
        """The sizes at ``scale`` (0.01 runs in minutes on two cores)."""
        if not scale > 0:
            raise InvalidArgumentError(f"Expected a scale > 0. Got {scale} instead.")
        nodes = max(20_000, round(1.11e8 * scale))
        big = scale > 0.05
        return cls(gather_rows=max(20_000, round(1.21e8 * scale)), nodes=nodes, edges=15 * nodes,
                   prep_edges=max(200_000, round(1.6e9 * scale)), prep_nodes=nodes,
                   device_seconds=10.0 if big else 3.0,
                   thread_counts=(1, 4, 16, 32, 64) if big else (1, 4, 16, 32),
                   thread_batch=30_000 if big else 5_000, sample_batches=20 if big else 10,
                   loader_batches=50 if big else 20, loader_seconds=30.0 if big else 10.0,
                   cache_batches=100 if big else 20)

    @classmethod
    def quick(cls) -> Sizes:
        """Tiny sizes for smoke tests: seconds, not minutes."""
        return cls(gather_rows=20_000, nodes=20_000, edges=200_000, prep_edges=100_000,
                   prep_nodes=10_000, trials=1, device_seconds=0.0, probe_mib=64,
                   gather_batches=(1_000, 3_000), zarr_batch=1_000, thread_counts=(1, 8),
                   thread_batch=2_000, sample_batch_size=256, sample_batches=3,
                   loader_batches=3, loader_seconds=5.0, cache_batches=4)
