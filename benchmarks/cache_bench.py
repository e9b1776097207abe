"""``featurestore bench cache``: feature-cache policies replayed on recorded row accesses.

For each store, :func:`loaders.cache_policies.record_trace` samples a few epochs exactly as
``NeighborLoader(shuffle=True)`` would (no feature is read) and records the distinct rows of
the feature-bearing node type each batch reads; :func:`loaders.cache_policies.replay` then
replays every policy at budgets of 1, 2, 5, 10 and 20% of the rows: degree-static,
presample-static (ranked by the first epoch's access counts, ties by degree), SIEVE, CLOCK,
LRU, Belady with a lookahead window, Belady over the whole trace (the offline optimum), and
the per-epoch optimal static cache (the upper bound of any static cache). Hit rates are of the
epochs after the first (row reads served / row reads; a row read = one distinct row in one
batch); the dynamic policies are warmed by the first epoch.

The report holds the hit-rate table per store, the facts of each trace (rows, reads per batch,
rows touched per epoch) and the time each step took; ``--plot`` draws ``cache-hit-rate.png``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import numpy as np

import featurestore as fs

from .report import machine_info

log = logging.getLogger(__name__)

BUDGETS = (0.01, 0.02, 0.05, 0.10, 0.20)
LABELS = {"degree-static": "degree static", "presample-static": "presample static",
          "sieve": "SIEVE", "clock": "CLOCK", "lru": "LRU",
          "belady-window": "Belady, {w}-batch lookahead", "belady": "Belady (offline optimum)",
          "optimal-static": "optimal static (per epoch)"}


@dataclass(frozen=True)
class Target:
    """A store to replay on: ``input`` as ``TYPE:SPLIT`` or ``SPLIT``; ``ntype`` the cached
    node type (default: the one with features)."""

    store: str
    input: str = "train"
    ntype: str | None = None
    label: str | None = None


def run_one(t: Target, fanouts=(15, 10, 5), batch_size: int = 1024, epochs: int = 3,
            budgets=BUDGETS, window: int = 4, seed: int = 0,
            max_batches: int | None = None) -> dict:
    """Record and replay on one store; the store's entry of the report."""
    from loaders import cache_policies as cp
    from loaders.plan import parse_input

    with fs.open_store(t.store) as s:
        inp = parse_input(s, t.input)
        t0 = time.perf_counter()
        trace = cp.record_trace(s, inp, list(fanouts), batch_size=batch_size, epochs=epochs,
                                ntype=t.ntype, seed=seed, max_batches=max_batches)
        rec = time.perf_counter() - t0
        t0 = time.perf_counter()
        deg = cp.row_degree(s, trace.ntype)
        deg_s = time.perf_counter() - t0
        row_bytes = int(s.features(trace.ntype).row_bytes)
        n = trace.num_rows
        caps = [int(round(b * n)) for b in budgets]
        t0 = time.perf_counter()
        res = cp.replay(trace, caps, degree=deg, window=window)
        rep_s = time.perf_counter() - t0
        touched = [int(np.count_nonzero(trace.counts(e))) for e in range(trace.num_epochs)]
        sizes = trace.batch_sizes()
        table = []
        for p in cp.POLICIES:
            for b, k in zip(budgets, caps):
                hr = res.hit_rate(p, k)
                opt = res.hit_rate("optimal-static", k)
                table.append({"policy": p, "budget": b, "capacity_rows": k,
                              "cache_bytes": k * row_bytes, "hit_rate": hr,
                              "of_optimal_static": hr / opt if opt else None})
        return {"store": os.path.abspath(t.store), "label": t.label or os.path.basename(
                    os.path.normpath(t.store)),
                "input": f"{inp[0]}:{inp[1]}" if isinstance(inp[1], str) else inp[0],
                "ntype": trace.ntype, "num_rows": n, "row_bytes": row_bytes,
                "num_inputs": trace.meta["num_inputs"], "epochs": trace.num_epochs,
                "batches_per_epoch": int(trace.epoch_ptr[1]),
                "whole_epochs": max_batches is None
                or trace.meta["num_inputs"] <= max_batches * batch_size,
                "reads_per_batch": float(sizes.mean()) if sizes.size else 0.0,
                "reads_per_batch_max": int(sizes.max()) if sizes.size else 0,
                "row_reads": int(trace.ids.shape[0]),
                "rows_touched_per_epoch": touched,
                "record_seconds": rec, "degree_seconds": deg_s, "replay_seconds": rep_s,
                "replay": res.as_dict(), "table": table}


def run(targets, fanouts=(15, 10, 5), batch_size: int = 1024, epochs: int = 3,
        budgets=BUDGETS, window: int = 4, seed: int = 0, max_batches: int | None = None) -> dict:
    """The ``cache`` report over ``targets`` (one failing store is recorded, not fatal)."""
    t0 = time.perf_counter()
    results = []
    for t in targets:
        try:
            results.append(run_one(t, fanouts, batch_size, epochs, budgets, window, seed,
                                   max_batches))
        except fs.FeatureStoreError as e:
            log.error("bench cache: %s: %s", t.store, e)
            results.append({"store": t.store, "label": t.label or t.store,
                            "error": f"{type(e).__name__}: {e}"})
    first = targets[0].store if targets else "."
    return {"benchmark": "cache", "machine": machine_info(os.path.dirname(
                os.path.abspath(first))),
            "options": {"fanouts": list(fanouts), "batch_size": batch_size, "epochs": epochs,
                        "budgets": list(budgets), "window_batches": window, "seed": seed,
                        "max_batches": max_batches,
                        "targets": [t.__dict__ for t in targets]},
            "seconds": time.perf_counter() - t0, "results": results}


# -- rendering ---------------------------------------------------------------------------------
def _label(policy: str, window: int) -> str:
    return LABELS[policy].format(w=window)


def markdown(report: dict) -> str:
    from .report import md_table

    o = report["options"]
    out = []
    for r in report["results"]:
        if "error" in r:
            out += [f"**{r['label']}**: failed: {r['error']}", ""]
            continue
        budgets = sorted({row["budget"] for row in r["table"]})
        out.append(
            f"**{r['label']}** ({r['input']}, {r['num_inputs']:,} seeds; cache of "
            f"`{r['ntype']}` rows: {r['num_rows']:,} x {r['row_bytes']} B): fanouts "
            f"{o['fanouts']}, batch {o['batch_size']}, {r['epochs']} epochs of "
            f"{r['batches_per_epoch']} batches" + ("" if r.get("whole_epochs", True)
                                                   else " (the first batches of each epoch)")
            + f"; {r['reads_per_batch']:,.0f} distinct rows per batch; rows touched per epoch "
            + ", ".join(f"{x / r['num_rows']:.1%}" for x in r["rows_touched_per_epoch"])
            + ". Hit rate (row reads served) over "
            + (f"epochs 2-{r['epochs']}" if r["epochs"] > 2 else "epoch 2")
            + "; the first epoch presamples (static) or warms (dynamic policies).")
        out.append("")
        head = ["policy"] + [f"{b:.0%} ({r['num_rows'] * b * r['row_bytes'] / 2**30:.2f} GiB)"
                             if r['num_rows'] * b * r['row_bytes'] >= 2**28 else f"{b:.0%}"
                             for b in budgets]
        rows = []
        for p in dict.fromkeys(row["policy"] for row in r["table"]):
            cells = {row["budget"]: row for row in r["table"] if row["policy"] == p}
            rows.append([_label(p, o["window_batches"])]
                        + [f"{cells[b]['hit_rate']:.1%}" for b in budgets])
        pre = {row["budget"]: row for row in r["table"] if row["policy"] == "presample-static"}
        if pre:
            rows.append(["presample static / optimal static"]
                        + [f"{pre[b]['of_optimal_static']:.0%}" if pre[b]["of_optimal_static"]
                           else None for b in budgets])
        out += [md_table(head, rows), ""]
        out.append(f"Sampling {r['record_seconds']:.1f} s, degrees {r['degree_seconds']:.1f} s, "
                   f"replays {r['replay_seconds']:.1f} s ({r['row_reads']:,} row reads).")
        out.append("")
    return "\n".join(out).rstrip()


def plots(report: dict, outdir: str) -> list[str]:
    from .report import plot_lines

    o = report["options"]
    panels = []
    for r in report["results"]:
        if "error" in r:
            continue
        series = []
        for p in dict.fromkeys(row["policy"] for row in r["table"]):
            pts = sorted((row["budget"] * 100, row["hit_rate"]) for row in r["table"]
                         if row["policy"] == p)
            style = "k--" if p == "optimal-static" else (":" if p == "belady" else "-o")
            series.append({"label": _label(p, o["window_batches"]), "x": [x for x, _ in pts],
                           "y": [y for _, y in pts], "style": style})
        panels.append({"title": f"{r['label']}: {r['num_rows']:,} {r['ntype']} rows, "
                                f"{r['reads_per_batch']:,.0f} reads/batch", "series": series})
    if not panels:
        return []
    return [plot_lines(os.path.join(outdir, "cache-hit-rate.png"), panels,
                       "cache size (% of the rows)", "hit rate (row reads served)",
                       f"Cache policies, fanouts {o['fanouts']}, batch {o['batch_size']}",
                       logx=True, logy=False)]
