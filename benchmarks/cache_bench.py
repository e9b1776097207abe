"""``bench cache``: feature-cache policies replayed on the row reads of sampled epochs.

:func:`loaders.memory.trace.record_trace` samples epochs exactly as ``NeighborLoader(shuffle=
True)`` would (no feature read) and :func:`benchmarks.cache_sim.replay` replays every policy
at 1-20% of the rows, against Belady and the per-epoch optimal static cache; hit rates are of
the epochs after the first (docs/benchmarks.md, "Feature-cache policies").
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

import featurestore as fs
from featurestore.errors import InvalidArgumentError

from benchmarks.options import opt
from benchmarks.report import machine_info
from benchmarks.workload import synthetic_store

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class CacheOptions:
    """Feature-cache policies (static, SIEVE, CLOCK, LRU, Belady) replayed on sampled epochs:
    hit rate at 1-20% of the rows."""

    workdir: str = opt("bench-data", "where the synthetic graph is made")
    stores: tuple[str, ...] = opt((), "a store (repeat for several; default: the synthetic "
                                  "graph)", metavar="PATH", flag="--store")
    inputs: tuple[str, ...] = opt((), "seeds as TYPE:SPLIT or SPLIT (one for all stores, or "
                                  "one per store; default train)", flag="--input")
    nodes: int = opt(1_110_000, "nodes of the synthetic graph", size="nodes")
    edges: int = opt(16_650_000, "edges of the synthetic graph", size="edges")
    fanouts: tuple[int, ...] = opt((15, 10, 5), "per hop from the seeds")
    batch_size: int = opt(1024, "seeds per batch", size="sample_batch_size")
    epochs: int = opt(3, "epochs sampled: the first presamples / warms, the others are measured")
    budgets: tuple[float, ...] = opt((1, 2, 5, 10, 20), "cache sizes, % of the rows")
    window: int = opt(4, "Belady's lookahead in batches")
    max_batches: int | None = opt(None, "sample only the first N batches of an epoch",
                                  size="cache_batches")
    seed: int = opt(0, "the loader's seed (order and draws)")


@dataclass(frozen=True)
class Target:
    """A store to replay on: ``input`` as ``TYPE:SPLIT`` or ``SPLIT``; ``ntype`` the cached
    node type (default: the one with features)."""

    store: str
    input: str = "train"
    ntype: str | None = None
    label: str | None = None


def _timed(fn, *args, **kw):
    t = time.perf_counter()
    return fn(*args, **kw), time.perf_counter() - t


def run_one(t: Target, o: CacheOptions) -> dict:
    """Record and replay on one store; the store's entry of the report."""
    from benchmarks import cache_sim as sim
    from loaders.memory import trace as cp
    from loaders.memory.plan import parse_input

    with fs.open_store(t.store) as s:
        inp = parse_input(s, t.input)
        trace, rec = _timed(cp.record_trace, s, inp, list(o.fanouts), batch_size=o.batch_size,
                            epochs=o.epochs, ntype=t.ntype, seed=o.seed, max_batches=o.max_batches)
        deg, deg_s = _timed(cp.row_degree, s, trace.ntype)
        row_bytes = int(s.features(trace.ntype).row_bytes)
    n, budgets = trace.num_rows, [b / 100 for b in o.budgets]
    caps = [int(round(b * n)) for b in budgets]
    res, rep_s = _timed(sim.replay, trace, caps, degree=deg, window=o.window)
    table = []
    for p in sim.REPLAY_POLICIES:
        for b, k in zip(budgets, caps):
            hr, best = res.hit_rate(p, k), res.hit_rate("optimal-static", k)
            table.append({"policy": p, "budget": b, "capacity_rows": k,
                          "cache_bytes": k * row_bytes, "hit_rate": hr,
                          "of_optimal_static": hr / best if best else None})
    sizes = trace.batch_sizes()
    return {"store": os.path.abspath(t.store),
            "label": t.label or os.path.basename(os.path.normpath(t.store)),
            "input": f"{inp[0]}:{inp[1]}" if isinstance(inp[1], str) else inp[0],
            "ntype": trace.ntype, "num_rows": n, "row_bytes": row_bytes,
            "num_inputs": trace.meta["num_inputs"], "epochs": trace.num_epochs,
            "batches_per_epoch": int(trace.epoch_ptr[1]),
            "whole_epochs": o.max_batches is None
            or trace.meta["num_inputs"] <= o.max_batches * o.batch_size,
            "reads_per_batch": float(sizes.mean()) if sizes.size else 0.0,
            "reads_per_batch_max": int(sizes.max()) if sizes.size else 0,
            "row_reads": int(trace.ids.shape[0]),
            "rows_touched_per_epoch": [int(np.count_nonzero(trace.counts(e)))
                                       for e in range(trace.num_epochs)],
            "record_seconds": rec, "degree_seconds": deg_s, "replay_seconds": rep_s,
            "replay": res.as_dict(), "table": table}


def run(o: CacheOptions) -> dict:
    """The ``cache`` report over ``o.stores`` (one failing store is recorded, not fatal)."""
    stores = list(o.stores or [synthetic_store(o.workdir, o.nodes, o.edges)])
    inputs = list(o.inputs or ["train"]) * (len(stores) if len(o.inputs) <= 1 else 1)
    if len(inputs) != len(stores):
        raise InvalidArgumentError(f"Expected one --input for all stores or one per store. "
                                   f"Got {len(o.inputs)} for {len(stores)} stores instead.")
    targets = [Target(s, i) for s, i in zip(stores, inputs)]
    t0 = time.perf_counter()
    results = []
    for t in targets:
        try:
            results.append(run_one(t, o))
        except fs.FeatureStoreError as e:
            log.error("bench cache: %s: %s", t.store, e)
            results.append({"store": t.store, "label": t.label or t.store,
                            "error": f"{type(e).__name__}: {e}"})
    return {"benchmark": "cache",
            "machine": machine_info(os.path.dirname(os.path.abspath(targets[0].store))),
            "options": {"fanouts": list(o.fanouts), "batch_size": o.batch_size,
                        "epochs": o.epochs, "budgets": [b / 100 for b in o.budgets],
                        "window_batches": o.window, "seed": o.seed,
                        "max_batches": o.max_batches, "targets": [asdict(t) for t in targets]},
            "seconds": time.perf_counter() - t0, "results": results}
