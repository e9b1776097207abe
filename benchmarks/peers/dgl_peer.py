"""DGL peer benchmark: DGL's sampler, DataLoader and GraphBolt on the graph of one of our stores.

Runs in the DGL environment (``.venv-dgl``, built by ``scripts/dgl-env.sh``: dgl 2.1.0 needs
torch <= 2.2.1 and numpy 1.x), as a subprocess of the loader benchmark, and prints one JSON
object on stdout (logs go to stderr)::

    .venv-dgl/bin/python benchmarks/peers/dgl_peer.py STORE --fanouts 15,10,5 \\
        --batch-size 1024 --seeds train --modes sampler,loader,graphbolt,graphbolt-mmap

The graph is read from the store's CSC (``indptr``, ``indices``) and handed to DGL as is, so
DGL's edge ids are positions in the store's CSC. Modes:

``sampler``
    ``dgl.dataloading.NeighborSampler(fanouts).sample(g, seeds)`` alone, batch after batch:
    batches/s and sampled edges/s (the sum of the blocks' edges).
``loader``
    DGL's ``DataLoader`` with that sampler and the features and labels in RAM (``g.ndata``,
    prefetched into the blocks): the whole loader as a training loop would consume it.
``graphbolt``, ``graphbolt-mmap``
    GraphBolt's ``ItemSampler -> sample_neighbor -> fetch_feature -> DataLoader`` with
    ``TorchBasedFeature`` over the features in RAM, or over a memory map of the store's feature
    file (GraphBolt's ``in_memory: false``; its ``DiskBasedFeature`` is not in 2.1.0), also
    building the DGL blocks as training does.
``ours-dgl``
    For reference in the same process and environment: our ``NeighborLoader(output="dgl")``
    (features gathered from the store, on the CPU) with ``--fanouts`` as given.

Fanout order: ``--fanouts`` is given per hop from the seeds, as our ``NeighborLoader`` and PyG
take it (15 neighbours of each seed, then 10, then 5). DGL and GraphBolt list fanouts from the
input layer instead, so they receive the reversed list (``[5, 10, 15]``) and sample the same
neighbourhood sizes; ``--dgl-order`` passes the list unchanged (DGL's
``NeighborSampler([15, 10, 5])`` samples 5 neighbours per seed). Note that DGL draws fresh
neighbours for every node at every layer, while PyG-style sampling (ours) expands each node once,
so DGL's blocks hold more edges for the same fanouts: compare sampled edges/s as well.

Only homogeneous stores (one node type, one edge type) are supported.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import platform
import resource
import sys
import time
import warnings
from dataclasses import dataclass

from benchmarks.options import add_options, given, opt

log = logging.getLogger("dgl_peer")

MODES = ("sampler", "loader", "graphbolt", "graphbolt-mmap", "ours-dgl")


@dataclass(frozen=True)
class PeerOptions:
    """What the DGL peer measures; its fields are the command line's flags."""

    store: str = ""
    fanouts: tuple[int, ...] = opt((15, 10, 5), "per hop from the seeds (PyG's order)")
    dgl_order: bool = opt(False, "pass --fanouts to DGL unchanged (DGL lists fanouts from "
                          "the input layer)")
    batch_size: int = opt(1024, "seeds per batch")
    seeds: str = opt("train", "a split of the store, or frac:F for a random share F of the nodes")
    seeds_npy: str | None = opt(None, "a .npy file of seed ids (overrides --seeds)")
    feature: str = opt("feat", "the feature array")
    modes: str = opt(",".join(MODES), f"comma-separated among {MODES}")
    batches: int = opt(50, "timed batches per mode (at most)")
    seconds: float = opt(30.0, "stop a mode after this long")
    warmup: int = opt(2, "untimed batches first")
    num_workers: int = opt(0, "DataLoader worker processes")
    threads: int | None = opt(None, "torch/OpenMP threads")
    seed: int = opt(0, "seed of the shuffles")
    verbose: bool = opt(False, "debug logging")

    @property
    def mode_list(self) -> list[str]:
        """The modes to run, in order."""
        return [m.strip() for m in self.modes.split(",") if m.strip()]


def parse_args(argv=None) -> PeerOptions:
    """The options of the command line ``STORE [--flags]``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store", help="path of a homogeneous feature store")
    add_options(p, PeerOptions)
    ns = p.parse_args(argv)
    o = PeerOptions(**given(ns, PeerOptions))
    bad = [m for m in o.mode_list if m not in MODES]
    if bad:
        p.error(f"unknown modes {bad}; expected among {MODES}")
    return o


def dgl_fanouts(args) -> list[int]:
    """The fanouts to hand DGL/GraphBolt: ``--fanouts`` reversed (DGL lists them from the input
    layer) unless ``--dgl-order``."""
    return list(args.fanouts) if args.dgl_order else list(reversed(args.fanouts))


def _rss_mib() -> float:
    """Peak resident set size of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _seeds(store, ntype: str, args):
    import numpy as np

    if args.seeds_npy:
        return np.load(args.seeds_npy).astype(np.int64)
    if args.seeds.startswith("frac:"):
        n = store.num_nodes(ntype)
        rng = np.random.default_rng(args.seed)
        return np.sort(rng.choice(n, int(float(args.seeds[5:]) * n), replace=False))
    return np.asarray(store.split(args.seeds, ntype), dtype=np.int64)


def _timed(name: str, batches, args, count_edges, seeds_per_batch) -> dict:
    """Consume ``batches`` (an iterator); time ``args.batches`` of them after the warm-up."""
    from benchmarks.report import timed_loop

    it = iter(batches)

    def step(_):
        item = next(it, None)
        return None if item is None else (seeds_per_batch(item), count_edges(item))

    lp = timed_loop(step, args.batches, args.seconds, args.warmup)
    # cpu_seconds: this process's CPU time (not its workers'); on a loaded machine wall time
    # overstates the cost, CPU time per batch does not
    res = {"mode": name, **{k: lp[k] for k in ("batches", "seconds", "cpu_seconds",
                                               "cpu_ms_per_batch", "batches_per_s",
                                               "seeds_per_s")},
           "sampled_edges_per_batch": lp["edges_per_batch"] if lp["batches"] else None,
           "sampled_edges_per_s": lp["edges_per_s"], "peak_rss_mib": round(_rss_mib(), 1)}
    log.info("%s: %d batches in %.2f s: %.2f batches/s, %.3g sampled edges/s", name,
             lp["batches"], lp["seconds"], lp["batches_per_s"], lp["edges_per_s"])
    return res


def _block_edges(blocks) -> int:
    return int(sum(b.num_edges() for b in blocks))


def _epochs(make_iter):
    """Iterate over epochs without end (the timing loop stops it)."""
    return itertools.chain.from_iterable(map(make_iter, itertools.count()))


def _sampler(ctx) -> dict:
    """DGL's NeighborSampler alone, batch after batch."""
    import dgl
    import torch

    sampler = dgl.dataloading.NeighborSampler(ctx["dgl_fan"])
    gen = torch.Generator().manual_seed(ctx["args"].seed)
    seeds, bs, g = ctx["seeds"], ctx["args"].batch_size, ctx["g"]

    def batches(epoch):
        perm = seeds[torch.randperm(seeds.numel(), generator=gen)]
        for lo in range(0, perm.numel(), bs):
            yield sampler.sample(g, perm[lo:lo + bs])

    return _timed("sampler", _epochs(batches), ctx["args"], lambda b: _block_edges(b[2]),
                  lambda b: b[1].numel())


def _touch(b) -> int:
    """What a training step reads of DGL blocks: input features and output labels."""
    _ = b[2][0].srcdata["feat"], b[2][-1].dstdata["label"]
    return _block_edges(b[2])


def _loader(ctx) -> dict:
    """DGL's DataLoader with that sampler, features and labels in RAM (``g.ndata``)."""
    import dgl
    import numpy as np
    import torch

    args, g, store, ntype = ctx["args"], ctx["g"], ctx["store"], ctx["ntype"]
    t = time.perf_counter()
    g.ndata["feat"] = torch.from_numpy(np.array(ctx["feats"].numpy()))  # into RAM
    g.ndata["label"] = torch.from_numpy(np.asarray(store.labels(ntype), dtype=np.int64))
    ctx["report"]["setup"]["loader_features_to_ram_s"] = round(time.perf_counter() - t, 3)
    sampler = dgl.dataloading.NeighborSampler(ctx["dgl_fan"], prefetch_node_feats=["feat"],
                                              prefetch_labels=["label"])
    dl = dgl.dataloading.DataLoader(g, ctx["seeds"], sampler, batch_size=args.batch_size,
                                    shuffle=True, drop_last=False, num_workers=args.num_workers,
                                    persistent_workers=args.num_workers > 0)
    try:
        return _timed("loader", _epochs(lambda e: iter(dl)), args, _touch, lambda b: b[1].numel())
    finally:
        g.ndata.pop("feat")


def _ours_dgl(ctx) -> dict:
    """Our NeighborLoader(output="dgl") in the same process, for reference."""
    from loaders import NeighborLoader

    args = ctx["args"]
    ld = NeighborLoader(ctx["store"], list(args.fanouts), (ctx["ntype"], ctx["seeds"].numpy()),
                        fanout_order="pyg", batch_size=args.batch_size, shuffle=True,
                        output="dgl", device="cpu", seed=args.seed, feature=args.feature,
                        num_threads=args.threads)
    return _timed("ours-dgl", _epochs(lambda e: iter(ld)), args, _touch, lambda b: b[1].numel())


def _context(args, store) -> dict:
    """The graph of ``store`` as DGL and GraphBolt take it, the seeds and the report's head."""
    import dgl
    import numpy as np
    import torch

    if len(store.node_types) != 1 or len(store.edge_types) != 1:
        raise SystemExit(f"dgl_peer: expected a homogeneous store (one node type, one edge type) "
                         f"at {args.store}. Got {store.node_types} / {store.edge_types}.")
    ntype, etype = store.node_types[0], store.edge_types[0]
    ctx = {"args": args, "store": store, "ntype": ntype, "dgl_fan": dgl_fanouts(args),
           "seeds": torch.from_numpy(_seeds(store, ntype, args)), "g": None,
           "feats": store.features(ntype, args.feature)}
    report = ctx["report"] = {
        "peer": "dgl", "store": os.path.abspath(args.store),
        "versions": {"dgl": dgl.__version__, "torch": torch.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "threads": torch.get_num_threads(), "num_workers": args.num_workers,
        "fanouts_hop_order": list(args.fanouts), "dgl_fanouts": ctx["dgl_fan"],
        "batch_size": args.batch_size, "num_seeds": int(ctx["seeds"].numel()),
        "num_nodes": store.num_nodes(ntype), "num_edges": store.num_edges(etype),
        "feature": {"name": args.feature, "dtype": str(ctx["feats"].dtype),
                    "shape": list(ctx["feats"].shape)}, "setup": {}, "results": []}
    t = time.perf_counter()
    indptr_np, indices_np = store.csc(etype)
    ctx["indptr"] = torch.from_numpy(np.asarray(indptr_np, dtype=np.int64))
    ctx["indices"] = torch.from_numpy(np.asarray(indices_np, dtype=np.int64))
    report["setup"]["read_csc_s"] = round(time.perf_counter() - t, 3)
    report["setup"]["peak_rss_mib_after_csc"] = round(_rss_mib(), 1)
    if any(m in ("sampler", "loader") for m in args.mode_list):
        t = time.perf_counter()
        ctx["g"] = dgl.graph(("csc", (ctx["indptr"], ctx["indices"],
                                      torch.empty(0, dtype=torch.int64))),
                             num_nodes=store.num_nodes(ntype))
        report["setup"]["dgl_graph_s"] = round(time.perf_counter() - t, 3)
    return ctx


def run(args) -> dict:
    """Every mode of ``args.mode_list`` on ``args.store``; the peer's report."""
    import torch

    import dgl  # noqa: F401  (before featurestore, as DGL's environment expects)
    import featurestore as fs

    if args.threads:
        torch.set_num_threads(args.threads)
    modes = {"sampler": _sampler, "loader": _loader, "ours-dgl": _ours_dgl}
    with fs.open_store(args.store) as store:
        ctx = _context(args, store)
        for mode in args.mode_list:
            try:
                res = modes.get(mode, lambda c, m=mode: _graphbolt(m, c))(ctx)
            except Exception as e:  # noqa: BLE001  (one failing mode must not hide the others)
                log.exception("mode %s failed", mode)
                res = {"mode": mode, "error": f"{type(e).__name__}: {e}"}
            ctx["report"]["results"].append(res)
    return ctx["report"]


def _graphbolt(mode: str, ctx) -> dict:
    """GraphBolt's pipeline, features in RAM or memory-mapped from the store's file."""
    import numpy as np
    import torch

    import dgl.graphbolt as gb

    args, feats = ctx["args"], ctx["feats"]
    t = time.perf_counter()
    graph = gb.fused_csc_sampling_graph(ctx["indptr"], ctx["indices"])
    if mode == "graphbolt":
        x = torch.from_numpy(np.array(feats.numpy()))
    else:  # the store's feature file, memory-mapped: GraphBolt's in_memory: false
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns that the read-only map is not writable
            x = torch.from_numpy(feats.numpy())
    fstore = gb.BasicFeatureStore({("node", None, "feat"): gb.TorchBasedFeature(x)})
    ctx["report"]["setup"][f"{mode}_s"] = round(time.perf_counter() - t, 3)
    fan = [torch.LongTensor([f]) for f in ctx["dgl_fan"]]
    item_set = gb.ItemSet(ctx["seeds"], names="seed_nodes")
    dp = gb.ItemSampler(item_set, batch_size=args.batch_size, shuffle=True)
    dp = dp.sample_neighbor(graph, fan)
    dp = dp.fetch_feature(fstore, node_feature_keys=["feat"])
    dl = gb.DataLoader(dp, num_workers=args.num_workers)

    def consume(mb):  # what a training step reads: blocks and the input features
        _ = mb.node_features["feat"]
        return _block_edges(mb.blocks)

    return _timed(mode, _epochs(lambda e: iter(dl)), args, consume,
                  lambda mb: mb.seed_nodes.numel())


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    os.environ.setdefault("DGLBACKEND", "pytorch")
    # numba's on-disk cache (featurestore's kernels) is per numba version: a separate directory
    # keeps this environment's numba from invalidating the main environment's cache mid-benchmark
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(sys.prefix, "numba-cache"))
    report = run(args)
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if all("error" not in r for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
