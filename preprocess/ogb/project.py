"""Project a measured MAG240M run (a synthetic twin at some scale) to the full dataset.

``python -m preprocess.ogb.project STORE`` reads the job manifest of a store written by
``featurestore preprocess mag240m`` and prints, per step, the measured time and rate, the
time at full size at the same rates, and an estimate for a target machine. Each step is
projected by what bounds it:

- ``features:paper``: a sequential copy, scaled by the target's sequential bandwidth;
- ``csc:*``: edge passes, each time proportional to the edges; the full size may need more
  passes for the same memory budget (:func:`preprocess.steps.csc.plan_csc`), and the serial numba
  kernels are assumed no faster per core (``cpu_factor``);
- ``derive:*``: random row reads, scaled by the ratio of random-read IOPS (queue depth 32)
  of the target device to this one's;
- small steps (nodes, labels, splits): linear in the node count.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass

from preprocess.steps.csc import plan_csc

from preprocess.ogb.layout import MAG240M

__all__ = ["Target", "project", "format_projection"]


@dataclass(frozen=True)
class Target:
    """The machine to project to, against the one measured on."""

    name: str = "16-core NVMe machine"
    #: sequential copy rate (read + write), GB/s.
    seq_gbps: float = 2.0
    #: random 4 KiB reads per second at queue depth 32: target / measured device.
    iops_ratio: float = 600e3 / 88e3
    #: speed of one core, target / measured (1 = no gain assumed).
    cpu_factor: float = 1.0
    #: memory budget of the CSC steps at full size.
    csc_budget_bytes: int = 16 << 30


def _full_amount(step: str, stats: dict, meta_scale: float) -> tuple[float, float]:
    """(measured amount, full amount) of the quantity that bounds ``step``."""
    if step.startswith("csc:"):
        e = float(stats.get("edges_in", 0))
        return e, e / meta_scale
    if step.startswith("derive:"):
        e = float(stats.get("edges", 0))
        return e, e / meta_scale
    if step == "features:paper":
        b = float(stats.get("bytes", 0))
        return b, MAG240M["paper"] * 768 * 2
    n = MAG240M["paper"] * meta_scale
    return n, MAG240M["paper"]


def project(manifest: dict, target: Target = Target()) -> list[dict]:
    """One row per step: measured seconds and rate, full-size seconds here and on ``target``."""
    steps = manifest["steps"]
    nodes = steps.get("nodes", {}).get("stats", {})
    scale = float(nodes.get("paper", 0)) / MAG240M["paper"]
    if not scale > 0:
        raise ValueError("Expected a manifest of featurestore preprocess mag240m (a 'nodes' "
                         "step with the paper count).")
    rows = []
    for name, rec in steps.items():
        sec, stats = float(rec["seconds"]), rec.get("stats", {})
        got, full = _full_amount(name, stats, scale)
        here = sec * full / max(got, 1.0)
        if name.startswith("csc:"):
            passes = int(stats.get("passes", 2)) or 2
            src, _, dst = name.split(":", 1)[1].split("__")
            plan = plan_csc(MAG240M[src], MAG240M[dst], int(full), target.csc_budget_bytes)
            p_full = plan.est_passes or passes
            there = here * p_full / passes / target.cpu_factor
        elif name.startswith("derive:"):
            there = here / target.iops_ratio
        elif name == "features:paper":
            there = full / (target.seq_gbps * 1e9)
        else:
            there = here / target.cpu_factor
        rows.append(dict(step=name, seconds=sec, measured=got, full=full,
                         rate=got / sec if sec > 0 else float("inf"),
                         full_seconds_here=here, full_seconds_target=there,
                         peak_anon_bytes=rec.get("peak_anon_bytes", 0)))
    return rows


def format_projection(rows: list[dict], target: Target = Target()) -> str:
    """The rows of :func:`project` as a text table for ``target``."""
    def unit(step):
        if step == "features:paper":
            return "B"
        return "edges" if step.startswith(("csc:", "derive:")) else "nodes"

    out = [("step", "measured s", "rate", "full-size s (rates here)",
            f"full-size s ({target.name}, est.)")]
    for r in rows:
        out.append((r["step"], f"{r['seconds']:.1f}", f"{r['rate'] / 1e6:.2f}M {unit(r['step'])}/s",
                    f"{r['full_seconds_here']:,.0f}", f"{r['full_seconds_target']:,.0f}"))
    tot_here = sum(r["full_seconds_here"] for r in rows)
    tot_there = sum(r["full_seconds_target"] for r in rows)
    out.append(("total", f"{sum(r['seconds'] for r in rows):.1f}", "", f"{tot_here:,.0f}",
                f"{tot_there:,.0f}"))
    w = [max(len(x[i]) for x in out) for i in range(5)]
    return "\n".join("  ".join(c.ljust(k) for c, k in zip(x, w)).rstrip() for x in out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m preprocess.ogb.project", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", help="a store written by featurestore preprocess mag240m")
    p.add_argument("--seq-gbps", type=float, default=Target.seq_gbps)
    p.add_argument("--iops-ratio", type=float, default=Target.iops_ratio)
    p.add_argument("--cpu-factor", type=float, default=Target.cpu_factor)
    p.add_argument("--csc-budget-gib", type=float, default=16)
    a = p.parse_args(argv)
    with open(os.path.join(a.store, ".preprocess", "manifest.json")) as f:
        manifest = json.load(f)
    t = Target(seq_gbps=a.seq_gbps, iops_ratio=a.iops_ratio, cpu_factor=a.cpu_factor,
               csc_budget_bytes=int(a.csc_budget_gib * (1 << 30)))
    print(format_projection(project(manifest, t), t))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
