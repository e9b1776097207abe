"""``partition`` benchmark: each rank's working set and cache hit rate, locality split vs random.

On a stochastic-block-model twin (``featurestore synth sbm``: 200k nodes in 20 blocks by
default), the train seeds are split over 2 and 4 ranks by:

- ``loader``: what ``NeighborLoader(rank=, world_size=)`` does: every epoch a new random share;
- ``random``: one seeded random split, kept over the epochs;
- ``ldg`` / ``fennel``: :func:`loaders.sample.partition.split_seeds` (streaming, locality-aware);
- ``blocks``: the seeds sorted by their true block, cut in equal shares (the planted optimum,
  which a real graph does not offer).

Each rank samples its own seeds as its loader would (:func:`loaders.memory.trace.epoch_order`
and ``NeighborSampler.sample(seed, epoch, batch)``, fanouts ``[10, 5]``) for ``epochs`` epochs,
no features read. Reported per rank: the distinct rows it touches per epoch and its row reads
(one read = one distinct row of one batch, what the loader gathers), and the hit rate of the
loader's static cache (:mod:`loaders.memory.cache`'s presample policy: the rank's first epoch's
access counts, :func:`~loaders.memory.cache.presample_scores`,
:func:`~loaders.memory.cache.rank_rows`) at
fixed sizes, over the epochs after the first.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass

import numpy as np

from benchmarks.options import opt
from benchmarks.report import md_table

log = logging.getLogger(__name__)

SPLITS = ("loader", "random", "ldg", "fennel", "blocks")


@dataclass(frozen=True)
class PartitionOptions:
    """Options of the ``partition`` benchmark (fields are the command line's flags)."""

    workdir: str | None = opt(None, "where the SBM twin is made (default: a temporary "
                                     "directory, removed after)")
    store: str | None = opt(None, "an existing homogeneous store with a train split instead "
                                   "of the SBM twin (its 'block' values, if any, for 'blocks')")
    nodes: int = opt(200_000, "nodes of the SBM twin")
    blocks: int = opt(20, "blocks of the SBM twin")
    deg_in: float = opt(12.0, "expected degree inside a node's block")
    deg_out: float = opt(3.0, "expected degree outside a node's block")
    train_share: float = opt(0.1, "train seeds as a share of the nodes")
    world_sizes: tuple[int, ...] = opt((2, 4), "ranks")
    splits: tuple[str, ...] = opt(SPLITS, "seed splits to compare")
    fanouts: tuple[int, ...] = opt((10, 5), "per hop from the seeds")
    batch_size: int = opt(1024, "seeds per batch")
    cache_shares: tuple[float, ...] = opt((0.02, 0.05, 0.10),
                                           "static cache sizes per rank, share of the rows")
    epochs: int = opt(2, "epochs sampled per rank: the first presamples the cache")
    passes: int = opt(8, "streaming passes of ldg / fennel")
    seed: int = opt(0, "seed of the splits and the loaders")


# -- the graph -----------------------------------------------------------------------------------
def _twin(o: PartitionOptions, workdir: str) -> str:
    """The SBM twin's store under ``workdir`` (made unless a store of the same spec is there)."""
    from preprocess.jobs.spec_steps import run_spec
    from preprocess.synth.sbm import SbmSpec, synth_sbm

    spec = SbmSpec(o.nodes, o.blocks, o.deg_in, o.deg_out, dim=16, seed=o.seed,
                   train_share=o.train_share)
    root = os.path.join(workdir, f"sbm-n{o.nodes}-b{o.blocks}")
    store = root + ".store"
    meta = os.path.join(root, "meta.json")
    if os.path.exists(store) and os.path.exists(meta):
        with open(meta) as f:
            if json.load(f).get("params") == asdict(spec):
                return store
        shutil.rmtree(store)
    synth_sbm(root, spec, progress=False)
    run_spec(os.path.join(root, "spec.yaml"), store, force=True, progress=False)
    return store


# -- splits ----------------------------------------------------------------------------------------
def _splitter(store, seeds, k, name, o: PartitionOptions, info: dict):
    """``epoch -> list of k seed arrays`` for split ``name``; ``info`` gets its cost."""
    from loaders.sample.partition import edge_cut, partition_nodes, split_seeds

    t0 = time.perf_counter()
    if name == "loader":  # NeighborLoader's rank/world_size share: reshuffled every epoch
        share = seeds.shape[0] // k

        def per_epoch(e):
            pos = np.random.default_rng([o.seed, e]).permutation(seeds.shape[0])
            return [np.sort(seeds[pos[r * share:(r + 1) * share]]) for r in range(k)]
        info["split_seconds"] = 0.0
        return per_epoch
    if name == "blocks":
        blk = np.asarray(store.values(None, "block"))
        order = np.lexsort((seeds, blk[seeds]))
        parts = [np.sort(p) for p in np.array_split(seeds[order], k)]
        part = np.zeros(blk.shape[0], np.int64)
        for r, p in enumerate(np.array_split(np.unique(blk[seeds[order]]), k)):
            part[np.isin(blk, p)] = r
        info["edge_cut"] = edge_cut(store, part)
    else:
        parts = split_seeds(store, seeds, k, name, seed=o.seed, passes=o.passes)
    info["split_seconds"] = time.perf_counter() - t0
    if name in ("ldg", "fennel"):
        info["edge_cut"] = edge_cut(store, partition_nodes(store, seeds, k, name, seed=o.seed,
                                                           passes=o.passes)[1])
    return lambda e: parts


# -- one rank ------------------------------------------------------------------------------
def _rank(sampler, ntype, n, deg, seeds_of_epoch, r, o: PartitionOptions) -> dict:
    """Sample rank ``r``'s epochs; its rows touched, reads and presample-cache hit rates."""
    from loaders.memory.cache import count_rows, presample_scores, rank_rows
    from loaders.memory.trace import epoch_order

    caps = [int(round(s * n)) for s in o.cache_shares]
    hot = None
    touched, reads, hits = [], [], {c: 0 for c in caps}
    measured = 0
    for e in range(o.epochs):
        seeds = seeds_of_epoch(e)[r]
        seen = np.zeros(n, np.bool_)
        counts = np.zeros(n, np.int64)
        nread = 0
        for b, pos in enumerate(epoch_order(seeds.shape[0], o.batch_size, e, o.seed)):
            ids = sampler.sample(seeds[pos], ntype, seed=o.seed, epoch=e, batch=b,
                                 input_id=pos).node[ntype]
            seen[ids] = True
            nread += ids.shape[0]
            if e == 0:
                count_rows(ids, counts)
            else:
                for c in caps:
                    hits[c] += int(np.count_nonzero(hot[c][ids]))
        touched.append(int(np.count_nonzero(seen)))
        reads.append(nread)
        if e == 0:  # the loader's presample policy over this rank's first epoch
            score = presample_scores(counts, deg)
            hot = {}
            for c in caps:
                hot[c] = np.zeros(n, np.bool_)
                hot[c][rank_rows(score, c, deg)] = True
        else:
            measured += nread
    return {"rank": r, "seeds": int(seeds_of_epoch(0)[r].shape[0]), "rows_touched": touched,
            "row_reads": reads,
            "hit_rate": {f"{s:g}": hits[c] / max(measured, 1)
                         for s, c in zip(o.cache_shares, caps)}}


def _summary(ranks: list[dict], n: int, shares) -> dict:
    last = [x["rows_touched"][-1] for x in ranks]
    return {"rows_touched_mean": float(np.mean(last)), "rows_touched_max": int(max(last)),
            "rows_touched_share": float(np.mean(last)) / n,
            "row_reads_mean": float(np.mean([x["row_reads"][-1] for x in ranks])),
            "hit_rate_mean": {f"{s:g}": float(np.mean([x["hit_rate"][f"{s:g}"] for x in ranks]))
                              for s in shares}}


def run(o: PartitionOptions | None = None) -> dict:
    """The ``partition`` report: per world size and split, every rank's working set and hits."""
    import featurestore as fs
    from benchmarks.report import machine_info
    from loaders import NeighborSampler
    from loaders.memory.cache import degree_counts

    o = o or PartitionOptions()
    bad = [s for s in o.splits if s not in SPLITS]
    if bad or o.epochs < 2:
        raise ValueError(f"Expected splits among {SPLITS} and epochs >= 2. Got {o.splits}, "
                         f"epochs={o.epochs} instead.")
    t_all = time.perf_counter()
    tmp = None if (o.workdir or o.store) else tempfile.mkdtemp(prefix="partition-bench-")
    try:
        t0 = time.perf_counter()
        path = o.store or _twin(o, o.workdir or tmp)
        make_s = time.perf_counter() - t0
        with fs.open_store(path) as store:
            ntype = store.resolve_ntype(None)
            n = store.num_nodes(ntype)
            seeds = np.asarray(store.split("train", ntype), np.int64)
            splits = [s for s in o.splits
                      if s != "blocks" or "block" in store.value_names(ntype)]
            sampler = NeighborSampler(store, list(o.fanouts))
            deg = degree_counts(store, ntype)
            results = []
            for k in o.world_sizes:
                for name in splits:
                    info: dict = {"world_size": k, "split": name}
                    per_epoch = _splitter(store, seeds, k, name, o, info)
                    t0 = time.perf_counter()
                    ranks = [_rank(sampler, ntype, n, deg, per_epoch, r, o) for r in range(k)]
                    info["sample_seconds"] = time.perf_counter() - t0
                    info.update(_summary(ranks, n, o.cache_shares), ranks=ranks)
                    results.append(info)
                    log.info("partition: %d ranks, %s: %.0f rows per rank, hit rate %s", k,
                             name, info["rows_touched_mean"], info["hit_rate_mean"])
            graph = {"store": path, "nodes": n, "edges": int(store.csc()[1].shape[0]),
                     "seeds": int(seeds.shape[0]), "make_seconds": make_s}
        return {"benchmark": "partition", "machine": machine_info(os.path.dirname(
                    os.path.abspath(path))), "options": dataclasses.asdict(o), "graph": graph,
                "seconds": time.perf_counter() - t_all, "results": results}
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def markdown(report: dict) -> str:
    """Per world size and split: rows touched per rank, hit rates, edge cut."""
    g, o = report["graph"], report["options"]
    shares = [f"{s:g}" for s in o["cache_shares"]]
    rows = [[r["world_size"], r["split"],
             f"{r['rows_touched_mean']:,.0f} ({100 * r['rows_touched_share']:.0f}%)",
             f"{r['row_reads_mean']:,.0f}", *(f"{r['hit_rate_mean'][s]:.3f}" for s in shares),
             f"{r['edge_cut']:.3f}" if "edge_cut" in r else "-", f"{r['split_seconds']:.2f}"]
            for r in report["results"]]
    return (f"SBM twin: {g['nodes']:,} nodes, {g['edges']:,} CSC edges, {g['seeds']:,} train "
            f"seeds; fanouts {o['fanouts']}, batch {o['batch_size']}; hit rates of epoch 2 with "
            "the static presample cache filled from each rank's epoch 1.\n\n" + md_table(
                ["ranks", "split", "rows touched / rank / epoch", "row reads / rank / epoch",
                 *(f"hit rate, cache {100 * float(s):g}% of rows" for s in shares),
                 "edge cut", "split s"], rows) + "\n")
