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

``--task link`` measures link batches instead (:class:`loaders.LinkNeighborLoader` against
PyG's ``LinkNeighborLoader``): the seed edges are the store's edges into the ``train`` nodes
(its ``train`` edge split when it has one: what ``featurestore plan --task link`` takes),
``--link-fanouts`` from both endpoints, ``--neg-sampling-ratio`` binary negatives per
positive, rates in positive seed edges/s. In RAM the two loaders run ``--trials`` alternating
rounds (medians and their ratio); out of core, ``featurestore plan --task link`` runs first
under the same cap and the report sets ours against its prediction.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import platform
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

import featurestore as fs
from featurestore.device import MIN_PROBE_MIB, evict, probe_device
from featurestore.errors import InvalidArgumentError
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
TASKS = ("node", "link")
#: the least share of the plan's predicted edges/s ours should reach out of core (issue 18)
PLAN_SHARE_TARGET = 0.8


@dataclass(frozen=True)
class LoaderOptions:
    """Loaders: ours vs PyG NeighborLoader (LinkNeighborLoader with --task link) and DGL, in
    RAM and on disk."""

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
    ooc_topology: str = opt("auto", "our loader's topology out of core: auto (the plan's "
                            "choice: a resident copy with bit-packed ids), memory (a plain "
                            "int copy), packed", choices=("auto", "memory", "packed"))
    task: str = opt("node", "node: batches of seed nodes (NeighborLoader); link: batches of "
                    "positive seed edges with binary negatives (LinkNeighborLoader), in edges/s",
                    choices=TASKS)
    link_fanouts: tuple[int, ...] = opt((10, 5), "per hop from both endpoints of each seed "
                                        "edge (--task link)")
    neg_sampling_ratio: float = opt(1.0, "binary negatives per positive edge (--task link)")
    trials: int = opt(3, "alternating rounds of ours and PyG in RAM (--task link)",
                      size="trials")
    sampling: str = opt("uniform", "our loader's sampler: uniform (as PyG's) or labor "
                        "(layer-neighbour sampling: another distribution, fewer rows per "
                        "batch; PyG stays uniform)", choices=("uniform", "labor"))
    read_iops: float | None = opt(None, "the device's random 4 KiB reads/s for the plan's "
                                  "prediction (--task link --parts ooc; default: probed)")

    def check(self) -> None:
        """Refuse arguments no run can take (:class:`InvalidArgumentError` naming them)."""
        if self.task not in TASKS:
            raise InvalidArgumentError(f"Expected task in {TASKS}. Got {self.task!r} instead.")
        if not self.neg_sampling_ratio > 0:
            raise InvalidArgumentError(f"Expected neg_sampling_ratio > 0. Got "
                                       f"{self.neg_sampling_ratio!r} instead.")
        if self.trials < 1 or self.batch_size < 1:
            raise InvalidArgumentError(f"Expected trials >= 1 and batch_size >= 1. Got "
                                       f"trials={self.trials}, batch_size={self.batch_size}.")
        if not self.link_fanouts or any(f == 0 or f < -1 for f in self.link_fanouts):
            raise InvalidArgumentError(f"Expected link_fanouts of positive fanouts (or -1: "
                                       f"all). Got {self.link_fanouts!r} instead.")

    @property
    def hops(self) -> list[int]:
        """The fanouts of the task: ``fanouts``, or ``link_fanouts`` for link batches."""
        return list(self.link_fanouts if self.task == "link" else self.fanouts)


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


def link_pairs(store) -> np.ndarray:
    """The seed edges of ``--task link`` as ``(2, E)`` (int32 where ids fit, as the link
    loader holds them): the store's ``train`` edge split, else its edges into the ``train``
    nodes (``featurestore plan --task link``'s ``--input train``)."""
    from loaders.memory.plan import link_input

    x = link_input(store, "train")
    if isinstance(x, str):
        cols = store.edge_split(x)
        return np.stack([np.asarray(cols["src"], np.int64), np.asarray(cols["dst"], np.int64)])
    return x


def our_loader(store, o: LoaderOptions, inputs, batch_size: int, **kw):
    """Our loader of ``o.task`` (shuffled, last partial batch dropped, CPU) over ``inputs``
    (seed nodes, or the seed edges of :func:`link_pairs`); ``kw``: the loader's other
    arguments."""
    from loaders import LinkNeighborLoader, NeighborLoader

    # dtype=None: rows as stored, as PyG's loader over the same features yields them
    kw = dict(batch_size=batch_size, shuffle=True, drop_last=True, device="cpu",
              sampling=o.sampling, dtype=None, **kw)
    if o.task == "link":
        return LinkNeighborLoader(store, o.hops, inputs,
                                  neg_sampling_ratio=o.neg_sampling_ratio, **kw)
    return NeighborLoader(store, num_neighbors=o.hops, input_nodes=inputs, **kw)


def pyg_loader(data, inputs: np.ndarray, o: LoaderOptions, batch_size: int, seed: int = 0):
    """PyG's ``NeighborLoader`` (or ``LinkNeighborLoader`` for ``--task link``) over ``data``
    (features in RAM), seeded by ``seed``."""
    import torch
    from torch_geometric import loader as pl

    torch.manual_seed(seed)
    kw = dict(num_neighbors=o.hops, batch_size=batch_size, shuffle=True, drop_last=True,
              num_workers=o.pyg_workers, persistent_workers=o.pyg_workers > 0)
    if o.task == "link":
        return pl.LinkNeighborLoader(data, edge_label_index=torch.from_numpy(inputs).long(),
                                     neg_sampling_ratio=o.neg_sampling_ratio, **kw)
    return pl.NeighborLoader(data, input_nodes=torch.from_numpy(inputs), **kw)


def bench_our_loader(store, o: LoaderOptions) -> dict:
    """Our loader, PyG ``Data`` output on the CPU, features in the page cache."""
    st = o.seed_type
    ld = our_loader(store, o, (st, "train") if st else "train", o.batch_size, output="pyg",
                    seed=0, prefetch=o.prefetch)
    out = loop(iter(ld), o.batches, o.seconds, o.batch_size)
    out["stage_ms_per_batch"] = ld.stats.per_batch_ms()
    return out


def bench_pyg_loader(data, train, o: LoaderOptions, batch_size: int, seed: int = 0,
                     warmup: int = 2) -> dict:
    """PyG's loader over ``data`` (features in RAM), one pass of up to ``o.batches``."""
    ld = pyg_loader(data, train, o, batch_size, seed)
    return loop(iter(ld), o.batches, o.seconds, batch_size, warmup=warmup)


def side_by_side(loaders: dict, o: LoaderOptions) -> dict[str, dict]:
    """``o.trials`` rounds in which each of ``loaders`` (name: loader) in turn runs a pass of
    up to ``o.batches`` batches (``o.seconds``; two untimed batches first in the first
    round): per loader the medians over its rounds and every round in ``trials``."""
    runs: dict[str, list] = {k: [] for k in loaders}
    for t in range(o.trials):
        for k, ld in loaders.items():
            runs[k].append(loop(iter(ld), o.batches, o.seconds, o.batch_size,
                                warmup=2 if t == 0 else 0))
    keys = ("batches_per_s", "seeds_per_s", "edges_per_s", "edges_per_batch",
            "cpu_ms_per_batch")
    return {k: dict({x: statistics.median(r[x] for r in rs) for x in keys},
                    batches=rs[-1]["batches"], trials=rs) for k, rs in runs.items()}


def bench_budgeted_loader(store, o: LoaderOptions, batch_size: int) -> dict:
    """Our loader with the process's memory budget (its cgroup limit), epoch by epoch.

    Raw :class:`~loaders.MiniBatch` output: the same tensors as PyG's ``Data`` without
    importing torch_geometric (~100 MB of anonymous memory). The loop drops each batch before
    asking for the next (``batches_in_flight=1`` plans one batch buffer for that)."""
    from loaders.memory.budget import process_anon_bytes

    inputs = link_pairs(store) if o.task == "link" else "train"
    anon0 = process_anon_bytes()
    t = time.perf_counter()
    ld = our_loader(store, o, inputs, batch_size, output="raw", prefetch=1,
                    cache=None if o.ooc_cache == "none" else o.ooc_cache,
                    batches_in_flight=o.ooc_in_flight,
                    topology=None if o.ooc_topology == "auto" else o.ooc_topology)
    del inputs  # the loader holds its own (int32) copy of the seed pairs
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


def plan_prediction(store, o: LoaderOptions, batch_size: int) -> dict:
    """``featurestore plan --task link`` for the out-of-core run (the same seed edges, cap,
    batch buffers and prefetch as :func:`bench_budgeted_loader`'s loader), in this process:
    its predicted edges/s and the bounds behind them."""
    from loaders.memory.plan import plan

    p = plan(store, "train", o.hops, batch_size=batch_size, task="link",
             neg_sampling_ratio=o.neg_sampling_ratio, read_iops=o.read_iops,
             read_iops_source="bench", prefetch=1, batches_in_flight=o.ooc_in_flight,
             sampling=o.sampling)
    return {"edges_per_s": p.edges_per_s_bound, "edges_per_s_io_bound": p.seeds_per_s_io_bound,
            "edges_per_s_sample_bound": p.seeds_per_s_sample_bound, "hit_rate": p.hit_rate,
            "cache_rows": p.cache_rows, "reads_per_batch": p.reads_per_batch,
            "read_iops": p.read_iops, "seed_nodes_per_batch_max": p.seed_nodes_per_batch_max,
            "seed_nodes_per_batch_bound": p.seed_nodes_per_batch_bound, "table": p.table()}


def worker(kind: str, store: str, o: LoaderOptions, batch_size: int) -> dict:
    """One out-of-core measurement in this process (a child, under memcap for ours and the
    plan)."""
    if kind in ("ours", "plan"):
        with fs.open_store(store, io_threads=o.io_threads) as s:
            return (bench_budgeted_loader if kind == "ours" else plan_prediction)(
                s, o, batch_size)
    with fs.open_store(store) as s:
        data = sb.pyg_data(s)
        train = link_pairs(s) if o.task == "link" else np.asarray(s.split("train"))
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


def _pyg_skipped(store) -> str | None:
    if len(store.node_types) != 1 or len(store.edge_types) != 1:
        return "the PyG peer runs on homogeneous graphs only"
    return sb.pyg_missing()


def _in_ram_link(rep: dict, path: str, o: LoaderOptions) -> None:
    """Ours and PyG's link loaders, features in RAM, in alternating rounds, into ``rep``."""
    with fs.open_store(path) as store:
        if not o.on_store:
            warm(store)
        pairs = link_pairs(store)
        rep["link_inputs"] = {"edges": int(pairs.shape[1]), "source": "the edges into the "
                              "'train' nodes, or the 'train' edge split"}
        loaders = {"ours_loader": our_loader(store, o, pairs, o.batch_size, output="pyg",
                                             seed=0, prefetch=o.prefetch)}
        why = _pyg_skipped(store)
        if why:
            rep["pyg"] = {"skipped": why}
        else:
            loaders["pyg_loader"] = pyg_loader(sb.pyg_data(store), pairs, o, o.batch_size)
        log.info("link loaders, features in RAM: %s, %d alternating rounds", list(loaders),
                 o.trials)
        rep.update(side_by_side(loaders, o))
        rep["ours_loader"]["stage_ms_per_batch"] = loaders["ours_loader"].stats.per_batch_ms()
        if "pyg_loader" in rep:
            rep["ours_over_pyg"] = rep["ours_loader"]["seeds_per_s"] / rep["pyg_loader"][
                "seeds_per_s"]
        del loaders
    gc.collect()


def _in_ram(rep: dict, path: str, o: LoaderOptions) -> None:
    """Ours and PyG's loader, features in RAM, into ``rep``."""
    if o.task == "link":
        return _in_ram_link(rep, path, o)
    with fs.open_store(path) as store:
        log.info("our loader (features in the page cache)")
        if not o.on_store:
            warm(store)
        rep["ours_loader"] = bench_our_loader(store, o)
        why = _pyg_skipped(store)
        if why:
            rep["pyg"] = {"skipped": why}
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
        pyg_why = _pyg_skipped(s)
        if o.ooc_store:
            rep["ooc_graph"] = {"store": p16, "nodes": s.num_nodes(), "edges": s.num_edges(),
                                "train": int(np.asarray(s.split("train")).shape[0])}
    # a quarter of the features; the synthetic graph's batch buffers need 1.5 GiB (fanouts
    # 15,10,5 x 1024 seeds touch ~250k rows)
    cap = o.memcap or f"{max(64 if o.ooc_store else 1536, fbytes // 4 >> 20)}M"
    obs = o.ooc_batch_size or o.batch_size
    if o.task == "link":  # the plan's prediction, under the same cap (before the cold start)
        iops = o.read_iops or probe_device(p16, seconds=2.0, size_mib=MIN_PROBE_MIB)[
            "randread_4k_qd32_iops"]
        log.info("featurestore plan --task link under memcap %s", cap)
        rep["ooc_plan"] = dict(_in_child("plan", p16, replace(o, read_iops=float(iops)), obs,
                                         cap=cap),
                               read_iops_from="--read-iops" if o.read_iops else "probe (2 s)")
    for f in files_under(p16):  # cold: features and topology out of the page cache
        evict(f)
    log.info("ours out of core under memcap %s", cap)
    load = os.getloadavg()
    rep["ooc_ours"] = dict(_in_child("ours", p16, o, obs, cap=cap), cap=cap,
                           feature_bytes=fbytes, batch_size=obs)
    log.info("PyG with the fp16 x 768 features in RAM%s",
             f": skipped ({pyg_why})" if pyg_why else "")
    rep["ooc_pyg"] = ({"skipped": pyg_why} if pyg_why
                      else dict(_in_child("pyg", p16, o, obs), batch_size=obs))
    rep["ooc_load"] = [round(x, 2) for x in load + os.getloadavg()]
    rep["ooc_oom_kills"] = sum(oom_kills(rep[k].get("memcap", "")) for k in
                               ("ooc_plan", "ooc_ours") if k in rep)
    if o.task == "link":
        rep["ooc_vs_plan"] = against_plan(rep.get("ooc_ours") or {}, rep.get("ooc_plan") or {})


def oom_kills(memcap_line: str) -> int:
    """The ``oom_kills=N`` of a memcap report line (0 without one)."""
    m = re.search(r"oom_kills=(\d+)", memcap_line or "")
    return int(m.group(1)) if m else 0


def against_plan(ours: dict, plan: dict) -> dict:
    """Ours' last epoch (the second by default) against the plan's predicted edges/s."""
    got, want = ours.get("seeds_per_s"), plan.get("edges_per_s")
    if not got or not want:
        return {"error": "no measurement or no prediction"}
    return {"measured_edges_per_s": got, "predicted_edges_per_s": want,
            "share": got / want, "target": PLAN_SHARE_TARGET,
            "within_target": got >= PLAN_SHARE_TARGET * want}


def run(o: LoaderOptions) -> dict:
    """Every part of ``o.parts``; the loader report."""
    from loaders.sample.sampler import NeighborSampler  # noqa: F401  (compile/load kernels first)

    o.check()
    parts = set(o.parts.split(","))
    os.makedirs(o.workdir, exist_ok=True)
    t0 = time.perf_counter()
    rep: dict = {"task": o.task, "nodes": o.nodes, "edges": o.edges, "fanouts": o.hops,
                 "batch_size": o.batch_size, "host": platform.node(), "cpus": os.cpu_count(),
                 "time": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if o.task == "link":
        rep["neg_sampling_ratio"] = o.neg_sampling_ratio
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
    if "dgl" in parts and o.task == "link":
        rep["dgl"] = {"skipped": "no DGL peer for link batches (--task link)"}
    elif "dgl" in parts:
        log.info("DGL peer")
        rep["dgl"] = run_dgl_peer(p32, o.fanouts, o.batch_size, ("sampler", "loader"),
                                  o.batches, o.seconds)
    if "ooc" in parts:
        _out_of_core(rep, o)
    return {"benchmark": "loader", "task": o.task, "machine": machine_info(o.workdir),
            "options": asdict(o), "seconds": time.perf_counter() - t0, "results": rep}


def main(argv=None) -> int:
    """A child: ``KIND STORE BATCH_SIZE OPTIONS_JSON``; prints ``RESULT {json}``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    kind, store, batch_size, options = argv if argv is not None else sys.argv[1:]
    o = replace(LoaderOptions(), **json.loads(options))
    print("RESULT " + json.dumps(worker(kind, store, o, int(batch_size))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
