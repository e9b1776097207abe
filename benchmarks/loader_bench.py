"""``bench loader``: our loader against PyG's ``NeighborLoader`` and DGL's, in RAM and on disk.

On the power-law graph of :func:`benchmarks.workload.synthetic_store` (or ``--on-store``),
fanouts ``[15, 10, 5]``, each part for at most ``--batches`` batches or ``--seconds`` seconds:
``loader`` (ours with the store in the page cache against PyG over ``Data(x, edge_index)``),
``dgl`` (DGL's sampler and DataLoader in ``.venv-dgl``) and ``ooc``: the fp16 x 768 twin (or
``--ooc-store``), ours in a child process under ``memcap`` (``--memcap``, default a quarter of
the features, the store's files evicted first) against PyG with everything in RAM, epoch by
epoch (the first cold): seeds/s, hit rate, reads per batch, the loader's setup and plan. The
memcap tool is ``--memcap-bin``, else ``$FEATURESTORE_MEMCAP``, else ``memcap`` on PATH. The
samplers alone are :mod:`benchmarks.sample_bench`'s.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

import featurestore as fs
from featurestore.device import evict
from benchmarks import sample_bench as sb
from benchmarks.options import opt
from benchmarks.report import MissingDependencyError, machine_info, timed_loop
from benchmarks.workload import (
    files_under,
    memcap_command,
    run_child,
    run_dgl_peer,
    synthetic_store,
)

log = logging.getLogger(__name__)

PARTS = ("loader", "dgl", "ooc")  # the samplers alone: benchmarks.sample_bench


@dataclass(frozen=True)
class LoaderOptions:
    """Loaders: ours vs PyG NeighborLoader and DGL, in RAM and on disk."""

    workdir: str = opt("bench-data", "where the stores are made (reused)")
    on_store: str | None = opt(None, "measure our loader on this store (its 'train' split) "
                               "instead of a synthetic graph; peers are skipped", metavar="PATH")
    seed_type: str | None = opt(None, "node type of the seeds in a heterogeneous --on-store")
    nodes: int = opt(1_110_000, "nodes of the synthetic graph", size="nodes")
    edges: int = opt(16_650_000, "edges of the synthetic graph", size="edges")
    fanouts: tuple[int, ...] = opt((15, 10, 5), "per hop from the seeds")
    batch_size: int = opt(1024, "seeds per batch", size="sample_batch_size")
    batches: int = opt(20, "timed batches per measurement (max)", size="loader_batches")
    seconds: float = opt(10.0, "time limit per measurement", size="loader_seconds")
    parts: str = opt(",".join(PARTS), f"comma-separated among {PARTS}")
    memcap: str | None = opt(None, "memory cap of the out-of-core run (default: a quarter of "
                             "the features; at least 1.5 GiB on the synthetic graph)")
    memcap_bin: str | None = opt(None, "the memcap tool (default: $FEATURESTORE_MEMCAP, PATH)")
    pyg_workers: int = opt(0, "PyG DataLoader worker processes")
    prefetch: int = opt(2, "our loader's batches in flight per stage")
    io_threads: int = opt(128, "reads in flight of our out-of-core gathers")
    ooc_batch_size: int | None = opt(None, "batch size of the out-of-core comparison (both "
                                     "loaders; default --batch-size)")
    ooc_store: str | None = opt(None, "the out-of-core comparison on this homogeneous store "
                                "with a 'train' split instead of the power-law graph",
                                metavar="PATH")
    ooc_epochs: int = opt(2, "epochs of the out-of-core comparison (the first is cold)")
    ooc_cache: str = opt("auto", "our loader's cache policy out of core",
                         choices=("auto", "presample", "degree", "none"))
    ooc_in_flight: int = opt(1, "our loader's batch buffers out of core (1: the timing loop "
                             "drops each batch before asking for the next)")


def warm(store) -> None:
    """Read the feature file once so that it sits in the page cache ("features in RAM")."""
    a = store.features().numpy()
    step = max(1, (64 << 20) // max(1, a.strides[0]))
    for lo in range(0, a.shape[0], step):
        np.asarray(a[lo:lo + step]).max()


def _edges(b) -> int:
    from loaders import MiniBatch

    if isinstance(b, MiniBatch):
        return b.subgraph.num_edges
    if hasattr(b, "edge_index_dict") and not hasattr(b, "edge_index"):
        return sum(int(e.shape[1]) for e in b.edge_index_dict.values())
    return int(b.edge_index.shape[1])


def loop(it, n: int, seconds: float, batch_size: int, warmup: int = 2) -> dict:
    """Take up to ``n`` batches (``seconds``) of the iterator ``it``, holding none of them
    while the next is made (as a lean training loop would); its throughput record."""
    def step(_):
        b = next(it, None)
        return None if b is None else (batch_size, _edges(b))

    return timed_loop(step, n, seconds, warmup)


def bench_our_loader(store, o: LoaderOptions) -> dict:
    """Our loader, PyG ``Data`` output on the CPU, features in the page cache."""
    from loaders import NeighborLoader

    st = o.seed_type
    ld = NeighborLoader(store, num_neighbors=list(o.fanouts),
                        input_nodes=(st, "train") if st else "train", batch_size=o.batch_size,
                        shuffle=True, output="pyg", device="cpu", seed=0, prefetch=o.prefetch,
                        drop_last=True)
    out = loop(iter(ld), o.batches, o.seconds, o.batch_size)
    out["stage_ms_per_batch"] = ld.stats.per_batch_ms()
    return out


def bench_pyg_loader(data, train, o: LoaderOptions, batch_size: int, seed: int = 0,
                     warmup: int = 2) -> dict:
    """PyG's ``NeighborLoader`` over ``data`` (features in RAM)."""
    import torch
    from torch_geometric.loader import NeighborLoader

    torch.manual_seed(seed)
    ld = NeighborLoader(data, num_neighbors=list(o.fanouts), input_nodes=torch.from_numpy(train),
                        batch_size=batch_size, shuffle=True, drop_last=True,
                        num_workers=o.pyg_workers, persistent_workers=o.pyg_workers > 0)
    return loop(iter(ld), o.batches, o.seconds, batch_size, warmup=warmup)


def bench_budgeted_loader(store, o: LoaderOptions, batch_size: int) -> dict:
    """Our loader with the process's memory budget (its cgroup limit), epoch by epoch.

    Raw :class:`~loaders.MiniBatch` output: the same tensors as PyG's ``Data`` without
    importing torch_geometric (~100 MB of anonymous memory). The loop drops each batch before
    asking for the next (``batches_in_flight=1`` plans one batch buffer for that)."""
    from loaders import NeighborLoader
    from loaders.memory.budget import process_anon_bytes

    anon0 = process_anon_bytes()
    t = time.perf_counter()
    ld = NeighborLoader(store, num_neighbors=list(o.fanouts), input_nodes="train",
                        batch_size=batch_size, shuffle=True, output="raw", device="cpu",
                        prefetch=1, drop_last=True,
                        cache=None if o.ooc_cache == "none" else o.ooc_cache,
                        batches_in_flight=o.ooc_in_flight)
    setup = time.perf_counter() - t
    log.info("loader plan (setup %.1f s):\n%s", setup, ld.plan)
    eps = []
    for ep in range(o.ooc_epochs):
        ld.stats.reset()
        r = loop(iter(ld), o.batches, o.seconds, batch_size, warmup=0)
        r.update(epoch=ep, cache=ld.stats.per_batch(), overflows=ld.stats.overflows)
        log.info("epoch %d: %s seeds/s, %s", ep, r["seeds_per_s"], r["cache"])
        eps.append(r)
    return dict(eps[-1], epochs=eps, setup_seconds=round(setup, 2), anon_before_loader=anon0,
                plan=ld.plan.as_dict() if ld.plan else None,
                plan_table=str(ld.plan) if ld.plan else None)


def worker(kind: str, store: str, o: LoaderOptions, batch_size: int) -> dict:
    """One out-of-core measurement in this process (a child, under memcap for ours)."""
    if kind == "ours":
        with fs.open_store(store, io_threads=o.io_threads) as s:
            return bench_budgeted_loader(s, o, batch_size)
    with fs.open_store(store) as s:
        data, train = sb.pyg_data(s), np.asarray(s.split("train"))
    gc.collect()
    eps = []
    for ep in range(o.ooc_epochs):  # epochs as ours: the first includes warm-up
        eps.append(dict(bench_pyg_loader(data, train, o, batch_size, seed=ep, warmup=0), epoch=ep))
    return dict(eps[-1], epochs=eps)


def _in_child(kind: str, store: str, o: LoaderOptions, batch_size: int,
              cap: str | None = None) -> dict:
    try:
        capcmd = memcap_command(cap, o.memcap_bin) if cap else None
    except MissingDependencyError as e:
        return {"error": str(e)}
    out, memcap = run_child(["-m", "benchmarks.loader_bench", kind, store, str(batch_size),
                             json.dumps(asdict(o))], capcmd)
    return dict(out, memcap=memcap) if memcap else out


def _in_ram(rep: dict, path: str, o: LoaderOptions) -> None:
    """Ours and PyG's loader, features in RAM, into ``rep``."""
    with fs.open_store(path) as store:
        log.info("our loader (features in the page cache)")
        if not o.on_store:
            warm(store)
        rep["ours_loader"] = bench_our_loader(store, o)
        if len(store.node_types) != 1 or len(store.edge_types) != 1:
            rep["pyg"] = {"skipped": "the PyG peer runs on homogeneous graphs only"}
        elif sb.pyg_missing():
            rep["pyg"] = {"skipped": sb.pyg_missing()}
        else:
            log.info("PyG NeighborLoader (features in RAM)")
            data = sb.pyg_data(store)
            rep["pyg_loader"] = bench_pyg_loader(data, np.array(store.split("train")), o,
                                                 o.batch_size)
            del data
    gc.collect()


def _out_of_core(rep: dict, o: LoaderOptions) -> None:
    """Ours under memcap against PyG in RAM, fp16 x 768 rows, into ``rep``."""
    p16 = o.ooc_store or synthetic_store(o.workdir, o.nodes, o.edges, "fp16x768")
    with fs.open_store(p16) as s:
        fbytes = s.features().nbytes
        if o.ooc_store:
            rep["ooc_graph"] = {"store": p16, "nodes": s.num_nodes(), "edges": s.num_edges(),
                                "train": int(np.asarray(s.split("train")).shape[0])}
    # a quarter of the features; the synthetic graph's batch buffers need 1.5 GiB (fanouts
    # 15,10,5 x 1024 seeds touch ~250k rows)
    cap = o.memcap or f"{max(64 if o.ooc_store else 1536, fbytes // 4 >> 20)}M"
    for f in files_under(p16):  # cold: features and topology out of the page cache
        evict(f)
    log.info("ours out of core under memcap %s", cap)
    obs = o.ooc_batch_size or o.batch_size
    load = os.getloadavg()
    rep["ooc_ours"] = dict(_in_child("ours", p16, o, obs, cap=cap), cap=cap,
                           feature_bytes=fbytes, batch_size=obs)
    log.info("PyG with the fp16 x 768 features in RAM")
    rep["ooc_pyg"] = dict(_in_child("pyg", p16, o, obs), batch_size=obs)
    rep["ooc_load"] = [round(x, 2) for x in load + os.getloadavg()]


def run(o: LoaderOptions) -> dict:
    """Every part of ``o.parts``; the loader report."""
    from loaders.sample.sampler import NeighborSampler  # noqa: F401  (compile/load kernels first)

    parts = set(o.parts.split(","))
    os.makedirs(o.workdir, exist_ok=True)
    t0 = time.perf_counter()
    rep: dict = {"nodes": o.nodes, "edges": o.edges, "fanouts": list(o.fanouts),
                 "batch_size": o.batch_size, "host": platform.node(), "cpus": os.cpu_count(),
                 "time": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if o.on_store:  # the user's own store: our sampler and loader only (peers need the twin)
        parts -= {"dgl", "ooc"}
        with fs.open_store(o.on_store) as s0:
            rep.update(store=o.on_store, nodes=sum(s0.num_nodes(t) for t in s0.node_types),
                       edges=sum(s0.num_edges(e) for e in s0.edge_types))
    p32 = None
    if parts & {"loader", "dgl"}:
        p32 = o.on_store or synthetic_store(o.workdir, o.nodes, o.edges, "fp32x128")
    if "loader" in parts:
        _in_ram(rep, p32, o)
    if "dgl" in parts:
        log.info("DGL peer")
        rep["dgl"] = run_dgl_peer(p32, o.fanouts, o.batch_size, ("sampler", "loader"),
                                  o.batches, o.seconds)
    if "ooc" in parts:
        _out_of_core(rep, o)
    return {"benchmark": "loader", "machine": machine_info(o.workdir), "options": asdict(o),
            "seconds": time.perf_counter() - t0, "results": rep}


def main(argv=None) -> int:
    """A child: ``KIND STORE BATCH_SIZE OPTIONS_JSON``; prints ``RESULT {json}``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    kind, store, batch_size, options = argv if argv is not None else sys.argv[1:]
    o = replace(LoaderOptions(), **json.loads(options))
    print("RESULT " + json.dumps(worker(kind, store, o, int(batch_size))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
