"""Loader benchmark: our sampler and loader against PyG's (and DGL's) on a power-law graph.

The workload of issue 5: a 2M-node, 40M-edge graph with Zipf-skewed in-degrees (written
through the store's writer by :func:`loaders.synthetic.power_law_store`), fp32 x 128
features, fanouts ``[15, 10, 5]``, batches of 1024 seeds drawn from 10% of the nodes.
Measured in one run, each for at most ``--batches`` batches or ``--seconds`` seconds:

``sampler``      our numba sampler alone, and PyG's (torch-sparse/pyg-lib) on the same CSC;
``loader``       whole loaders with features in RAM: ours (store in the page cache, PyG
                 ``Data`` output, CPU) and PyG's ``NeighborLoader`` over ``Data(x, edge_index)``;
``dgl``          DGL's sampler and DataLoader, by ``benchmarks/peers/dgl_peer.py`` in the DGL
                 environment (``.venv-dgl``), when it exists;
``ooc``          out of core: the same graph with fp16 x 768 features (3 GB), or the store
                 given by ``--ooc-store`` (e.g. ``bench-data/rmat22.store`` from ``featurestore
                 synth rmat``), ours in a process under ``memcap`` (a quarter of the features'
                 size, page cache included, the store's files evicted first) against PyG with
                 everything in RAM, both at ``--ooc-batch-size`` (default ``--batch-size``).
                 Ours runs with its default memory budget (the cgroup's limit): it plans the
                 budget (``loader.plan``), holds the topology resident, fills a hot tier of
                 rows by presampling and reads the misses with ``O_DIRECT``. Reported per
                 epoch (``--ooc-epochs``, the first one cold): seeds/s, hit rate, reads and
                 MB read per batch; the loader's setup (plan, presample, cache fill) apart.

    python -m benchmarks.loader_bench --workdir /work/bigdata/loaders
    featurestore bench loader --workdir ... --quick         # a small smoke run
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import subprocess
import sys
import time

import numpy as np

import featurestore as fs

log = logging.getLogger(__name__)

PARTS = ("sampler", "loader", "dgl", "ooc")
MEMCAP = "/work/shared/tools/memcap"


# -- data ----------------------------------------------------------------------------------
def make_store(workdir: str, nodes: int, edges: int, layout: str, seed: int = 0) -> str:
    """The benchmark graph with ``fp32x128`` or ``fp16x768`` features (reused if present)."""
    from loaders.synthetic import power_law_store

    dtype, dim = {"fp32x128": (np.float32, 128), "fp16x768": (np.float16, 768)}[layout]
    path = os.path.join(workdir, f"pl-{nodes}-{edges}-{layout}")
    try:
        with fs.open_store(path) as s:
            if s.num_edges() == edges and s.features().shape == (nodes, dim):
                return path
    except fs.FeatureStoreError:
        pass
    log.info("writing %s", path)
    t = time.perf_counter()
    power_law_store(path, num_nodes=nodes, num_edges=edges, feat_dim=dim, dtype=dtype,
                    num_classes=64, train_frac=0.1, seed=seed, mode="w")
    log.info("wrote %s in %.0f s", path, time.perf_counter() - t)
    return path


def warm(store) -> None:
    """Read the feature file once so that it sits in the page cache ("features in RAM")."""
    a = store.features().numpy()
    step = max(1, (64 << 20) // max(1, a.strides[0]))
    for lo in range(0, a.shape[0], step):
        np.asarray(a[lo:lo + step]).max()


def _batches(ids: np.ndarray, batch_size: int, seed: int) -> list[np.ndarray]:
    perm = np.random.default_rng(seed).permutation(ids)
    return [perm[i:i + batch_size] for i in range(0, len(perm) - batch_size + 1, batch_size)]


def _timed(step, n: int, seconds: float, warmup: int = 2) -> dict:
    """Call ``step(k)`` (returns sampled edges) for up to ``n`` batches or ``seconds``."""
    for k in range(warmup):
        step(k)
    edges, t0, c0, k = 0, time.perf_counter(), time.process_time(), 0
    while k < n and time.perf_counter() - t0 < seconds:
        edges += step(warmup + k)
        k += 1
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"batches": k, "seconds": round(dt, 3), "batches_per_s": round(k / dt, 2),
            "cpu_seconds": round(cpu, 3), "cpu_ms_per_batch": round(1e3 * cpu / max(k, 1), 1),
            "edges_per_batch": int(edges / max(k, 1)), "edges_per_s": round(edges / dt)}


def _pyg_data(store, with_x: bool = True):
    import torch
    from torch_geometric.data import Data

    indptr, indices = store.csc()
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    ei = torch.from_numpy(np.stack([np.asarray(indices, np.int64), dst]))
    del dst
    d = Data(edge_index=ei, num_nodes=store.num_nodes())
    if with_x:
        d.x = torch.from_numpy(np.array(store.features().numpy()))
        d.y = torch.from_numpy(np.array(store.labels()))
    return d


# -- parts ---------------------------------------------------------------------------------
def bench_our_sampler(store, fanouts, batch_size, n, seconds, seed=0, seed_type=None) -> dict:
    from loaders import NeighborSampler

    s = NeighborSampler(store, fanouts)
    bs = _batches(np.asarray(store.split("train", seed_type)), batch_size, seed)
    return _timed(lambda k: s.sample(bs[k % len(bs)], seed_type, seed=seed, batch=k).num_edges,
                  n, seconds)


def bench_pyg_sampler(data, train, fanouts, batch_size, n, seconds, seed=0) -> dict:
    import torch
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    s = NeighborSampler(data, num_neighbors=fanouts)
    bs = _batches(train, batch_size, seed)

    def step(k):
        b = torch.from_numpy(bs[k % len(bs)])
        return s.sample_from_nodes(NodeSamplerInput(input_id=None, node=b)).row.numel()

    out = _timed(step, n, seconds)
    out["backend"] = "pyg-lib" if _has("pyg_lib") else "torch-sparse"
    return out


def bench_our_loader(store, fanouts, batch_size, n, seconds, output="pyg", device="cpu",
                     seed=0, prefetch=2, topology="mmap", staging_bytes=64 << 20,
                     seed_type=None) -> dict:
    from loaders import NeighborLoader

    ld = NeighborLoader(store, num_neighbors=fanouts,
                        input_nodes=(seed_type, "train") if seed_type else "train",
                        batch_size=batch_size, shuffle=True, output=output, device=device,
                        seed=seed, prefetch=prefetch, drop_last=True, topology=topology,
                        staging_bytes=staging_bytes)
    out = _loop(iter(ld), n, seconds, batch_size, lambda b: _edges(b))
    out["stage_ms_per_batch"] = ld.stats.per_batch_ms()
    return out


def bench_pyg_loader(data, train, fanouts, batch_size, n, seconds, num_workers=0, seed=0,
                     warmup=2) -> dict:
    import torch
    from torch_geometric.loader import NeighborLoader

    torch.manual_seed(seed)
    ld = NeighborLoader(data, num_neighbors=fanouts, input_nodes=torch.from_numpy(train),
                        batch_size=batch_size, shuffle=True, drop_last=True,
                        num_workers=num_workers, persistent_workers=num_workers > 0)
    return _loop(iter(ld), n, seconds, batch_size, lambda b: int(b.edge_index.shape[1]),
                 warmup=warmup)


def _edges(b) -> int:
    from loaders import MiniBatch

    if isinstance(b, MiniBatch):
        return b.subgraph.num_edges
    if hasattr(b, "edge_index_dict") and not hasattr(b, "edge_index"):
        return sum(int(e.shape[1]) for e in b.edge_index_dict.values())
    return int(b.edge_index.shape[1])


def _loop(it, n, seconds, batch_size, edges_of, warmup=2) -> dict:
    for _ in range(warmup):
        next(it)
    edges, k, t0, c0 = 0, 0, time.perf_counter(), time.process_time()
    while True:
        b = next(it, None)
        if b is None:
            break
        edges += edges_of(b)
        del b  # hold no batch while the next is made, as a lean training loop would
        k += 1
        if k >= n or time.perf_counter() - t0 >= seconds:
            break
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    del it
    return {"batches": k, "seconds": round(dt, 3), "batches_per_s": round(k / dt, 2),
            "cpu_seconds": round(cpu, 3), "cpu_ms_per_batch": round(1e3 * cpu / max(k, 1), 1),
            "seeds_per_s": round(k * batch_size / dt), "edges_per_batch": int(edges / max(k, 1))}


def _has(mod: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(mod) is not None


# -- subprocess workers (out of core, memory caps) -----------------------------------------
def bench_budgeted_loader(store, fanouts, batch_size, n, seconds, epochs=2, prefetch=1,
                          cache="auto", batches_in_flight=1, memory=None) -> dict:
    """Our loader with a memory budget (default: the process's cgroup limit), epoch by epoch.

    Raw :class:`~loaders.MiniBatch` output: the same tensors as PyG's ``Data`` without
    importing torch_geometric (~100 MB of anonymous memory). The loop drops each batch before
    asking for the next (``batches_in_flight=1`` plans one batch buffer for that)."""
    from loaders import NeighborLoader
    from loaders.budget import process_anon_bytes

    anon0 = process_anon_bytes()
    t = time.perf_counter()
    ld = NeighborLoader(store, num_neighbors=fanouts, input_nodes="train",
                        batch_size=batch_size, shuffle=True, output="raw", device="cpu",
                        prefetch=prefetch, drop_last=True, cache=cache, memory=memory,
                        batches_in_flight=batches_in_flight)
    setup = time.perf_counter() - t
    log.info("loader plan (setup %.1f s):\n%s", setup, ld.plan)
    eps = []
    for ep in range(epochs):
        ld.stats.reset()
        r = _loop(iter(ld), n, seconds, batch_size, lambda b: _edges(b), warmup=0)
        r.update(epoch=ep, cache=ld.stats.per_batch(), overflows=ld.stats.overflows)
        log.info("epoch %d: %s seeds/s, %s", ep, r["seeds_per_s"], r["cache"])
        eps.append(r)
    out = dict(eps[-1])
    out.update(epochs=eps, setup_seconds=round(setup, 2), anon_before_loader=anon0,
               plan=ld.plan.as_dict() if ld.plan else None,
               plan_table=str(ld.plan) if ld.plan else None)
    return out


def worker(args) -> int:
    """Run one measurement in this process and print its JSON (used under memcap)."""
    fanouts = [int(x) for x in args.fanouts.split(",")]
    if args.worker == "ours":
        store = fs.open_store(args.store, io_threads=args.io_threads)
        out = bench_budgeted_loader(store, fanouts, args.batch_size, args.batches, args.seconds,
                                    epochs=args.ooc_epochs, prefetch=args.prefetch,
                                    cache=None if args.ooc_cache == "none" else args.ooc_cache,
                                    batches_in_flight=args.ooc_in_flight)
    elif args.worker == "pyg":
        store = fs.open_store(args.store)
        data = _pyg_data(store)
        train = np.asarray(store.split("train"))
        store.close()
        gc.collect()
        eps = []
        for ep in range(args.ooc_epochs):  # epochs as ours: the first includes warm-up
            eps.append(bench_pyg_loader(data, train, fanouts, args.batch_size, args.batches,
                                        args.seconds, num_workers=args.pyg_workers,
                                        seed=ep, warmup=0))
            eps[-1]["epoch"] = ep
        out = dict(eps[-1], epochs=eps)
    else:
        raise ValueError(f"Expected --worker ours or pyg. Got {args.worker!r} instead.")
    print("RESULT " + json.dumps(out), flush=True)
    return 0


def _run_worker(kind: str, store: str, args, cap: str | None = None,
                batch_size: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.loader_bench", "--worker", kind, "--store", store,
           "--fanouts", args.fanouts, "--batch-size", str(batch_size or args.batch_size),
           "--batches", str(args.batches), "--seconds", str(args.seconds),
           "--pyg-workers", str(args.pyg_workers), "--prefetch", "1",
           "--io-threads", str(args.io_threads), "--ooc-epochs", str(args.ooc_epochs),
           "--ooc-cache", args.ooc_cache, "--ooc-in-flight", str(args.ooc_in_flight)]
    if cap:
        if not os.path.exists(MEMCAP):
            return {"error": f"{MEMCAP} not found"}
        cmd = [MEMCAP, cap, "--"] + cmd
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out: dict = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            out = json.loads(line[7:])
    for line in p.stderr.splitlines():
        if line.startswith("memcap:"):
            out["memcap"] = line
    if p.returncode != 0:
        out["error"] = f"rc={p.returncode}: {p.stderr.strip()[-800:]}"
    return out


def _dgl(store: str, args) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    py = os.path.join(root, ".venv-dgl", "bin", "python")
    script = os.path.join(root, "benchmarks", "peers", "dgl_peer.py")
    if not (os.path.exists(py) and os.path.exists(script)):
        return {"skipped": "no .venv-dgl (scripts/dgl-env.sh builds it)"}
    cmd = [py, script, store, "--fanouts", args.fanouts, "--batch-size", str(args.batch_size),
           "--modes", "sampler,loader", "--batches", str(args.batches),
           "--seconds", str(args.seconds)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-800:]}
    return json.loads(p.stdout)


# -- the run -------------------------------------------------------------------------------
def run(args) -> dict:
    from loaders.sampler import NeighborSampler  # noqa: F401  (compile/load kernels first)

    fanouts = [int(x) for x in args.fanouts.split(",")]
    parts = set(args.parts.split(","))
    os.makedirs(args.workdir, exist_ok=True)
    rep: dict = {"nodes": args.nodes, "edges": args.edges, "fanouts": fanouts,
                 "batch_size": args.batch_size, "host": platform.node(),
                 "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    n, sec, bsz = args.batches, args.seconds, args.batch_size
    user = getattr(args, "on_store", None)
    if user:  # the user's own store: our sampler and loader only (peers need the synthetic twin)
        parts -= {"dgl", "ooc"}
        with fs.open_store(user) as s0:
            rep.update(store=user, nodes=sum(s0.num_nodes(t) for t in s0.node_types),
                       edges=sum(s0.num_edges(e) for e in s0.edge_types))
    p32 = None
    if parts & {"sampler", "loader", "dgl"}:
        p32 = user or make_store(args.workdir, args.nodes, args.edges, "fp32x128")
    if parts & {"sampler", "loader"}:
        store = fs.open_store(p32)
        st = getattr(args, "seed_type", None)
        homogeneous = len(store.node_types) == 1 and len(store.edge_types) == 1
        train = np.asarray(store.split("train", st))
        if "sampler" in parts:
            log.info("our sampler")
            rep["ours_sampler"] = bench_our_sampler(store, fanouts, bsz, n, sec, seed_type=st)
        if "loader" in parts:
            log.info("our loader (features in the page cache)")
            if not user:
                warm(store)
            rep["ours_loader"] = bench_our_loader(store, fanouts, bsz, n, sec, seed_type=st)
        if not homogeneous:
            rep["pyg"] = {"skipped": "the PyG peer runs on homogeneous graphs only"}
        elif _has("torch_geometric") and (_has("torch_sparse") or _has("pyg_lib")):
            data = _pyg_data(store, with_x="loader" in parts)
            if "sampler" in parts:
                log.info("PyG sampler")
                rep["pyg_sampler"] = bench_pyg_sampler(data, train, fanouts, bsz, n, sec)
            if "loader" in parts:
                log.info("PyG NeighborLoader (features in RAM)")
                rep["pyg_loader"] = bench_pyg_loader(data, train, fanouts, bsz, n, sec)
            del data
        else:
            rep["pyg"] = {"skipped": "needs torch_geometric with torch-sparse or pyg-lib"}
        store.close()
        gc.collect()
    if "dgl" in parts:
        log.info("DGL peer")
        rep["dgl"] = _dgl(p32, args)
    if "ooc" in parts:
        p16 = getattr(args, "ooc_store", None) or make_store(args.workdir, args.nodes,
                                                             args.edges, "fp16x768")
        if getattr(args, "ooc_store", None):
            with fs.open_store(p16) as s:
                rep["ooc_graph"] = {"store": p16, "nodes": s.num_nodes(),
                                    "edges": s.num_edges(),
                                    "train": int(np.asarray(s.split("train")).shape[0])}
        with fs.open_store(p16) as s:
            fbytes = s.features().nbytes
        cap = args.memcap or f"{max(64, fbytes // 4 >> 20)}M"
        from benchmarks.device import evict

        for f in _files(p16):  # cold: features and topology out of the page cache
            evict(f)
        log.info("ours out of core under memcap %s", cap)
        obs = args.ooc_batch_size or args.batch_size
        rep["ooc_ours"] = _run_worker("ours", p16, args, cap=cap, batch_size=obs)
        rep["ooc_ours"].update(cap=cap, feature_bytes=fbytes, batch_size=obs)
        rep["ooc_load"] = os.getloadavg()
        log.info("PyG with the fp16 x 768 features in RAM")
        rep["ooc_pyg"] = _run_worker("pyg", p16, args, batch_size=obs)
        rep["ooc_pyg"]["batch_size"] = obs
        rep["ooc_load"] = [round(x, 2) for x in rep["ooc_load"] + os.getloadavg()]
    return rep


def _files(root: str):
    for d, _, names in os.walk(root):
        for nm in names:
            yield os.path.join(d, nm)


def table(rep: dict) -> str:
    only_ooc = rep.get("ooc_graph") and not any(
        k in rep for k in ("ours_sampler", "ours_loader", "pyg_loader", "dgl"))
    lines = [f"graph: {rep['nodes']:,} nodes, {rep['edges']:,} edges; " if not only_ooc else ""]
    lines[0] += (f"fanouts {rep['fanouts']}, batch {rep['batch_size']}; {rep['cpus']} CPUs; "
                 f"{rep['time']}")
    if rep.get("ooc_graph"):
        g = rep["ooc_graph"]
        lines.append(f"out of core on {g['store']}: {g['nodes']:,} nodes, {g['edges']:,} edges, "
                     f"{g['train']:,} train seeds; load average {rep.get('ooc_load')}")
    rows = [("ours_sampler", "our sampler alone"), ("pyg_sampler", "PyG sampler alone"),
            ("ours_loader", "our loader, features in RAM"), ("pyg_loader", "PyG loader, features in RAM"),
            ("ooc_ours", "our loader, fp16x768 under memcap"), ("ooc_pyg", "PyG loader, fp16x768 in RAM")]
    for key, name in rows:
        r = rep.get(key)
        if not r:
            continue
        if "error" in r:
            lines.append(f"  {name:40s} error: {r['error'][-300:]}")
            continue
        extra = f", {r['edges_per_s'] / 1e6:.1f}M edges/s" if "edges_per_s" in r else ""
        seeds = f", {r['seeds_per_s']:,} seeds/s" if "seeds_per_s" in r else ""
        if "batch_size" in r:
            name = f"{name} (batch {r['batch_size']})"
        cpu = f", {r['cpu_ms_per_batch']:.0f} CPU ms/batch" if "cpu_ms_per_batch" in r else ""
        lines.append(f"  {name:40s} {r['batches_per_s']:7.2f} batches/s{seeds}{extra} "
                     f"({r['edges_per_batch']:,} edges/batch, {r['batches']} batches{cpu})")
        if "stage_ms_per_batch" in r:
            lines.append(f"  {'':40s} stage busy ms/batch: {r['stage_ms_per_batch']}")
        if "memcap" in r:
            lines.append(f"  {'':40s} {r['memcap']}")
        for e in r.get("epochs") or []:
            c = e.get("cache") or {}
            extra = (f", hit rate {c['hit_rate']:.1%}, {c['misses']:,} misses, {c['reads']:,} "
                     f"reads, {c['mb_read']:.0f} MB read per batch" if c.get("hits") or c.get("misses")
                     else ", features served by the page cache (they fit the budget)")
            lines.append(f"  {'':40s} epoch {e.get('epoch', '?')}: {e['seeds_per_s']:,} seeds/s "
                         f"({e['batches']} batches){extra}")
        if r.get("setup_seconds") is not None:
            lines.append(f"  {'':40s} setup (plan, presample, cache fill): "
                         f"{r['setup_seconds']:.1f} s")
        if r.get("plan_table"):
            lines += [f"  {'':40s} | {ln}" for ln in r["plan_table"].splitlines()]
    dgl = rep.get("dgl") or {}
    for r in dgl.get("results", []):
        if "batches_per_s" in r:
            cpu = (f", {1e3 * r['cpu_seconds'] / max(r['batches'], 1):.0f} CPU ms/batch"
                   if r.get("cpu_seconds") else "")
            lines.append(f"  {'DGL ' + str(r.get('mode')):40s} {r['batches_per_s']:7.2f} batches/s, "
                         f"{r.get('seeds_per_s', 0):,.0f} seeds/s "
                         f"({r.get('sampled_edges_per_batch', 0):,.0f} edges/batch, "
                         f"{r['batches']} batches{cpu})")
        else:
            lines.append(f"  DGL {r.get('mode')}: {json.dumps(r)[:300]}")
    if "skipped" in dgl or "error" in dgl:
        lines.append(f"  DGL: {dgl.get('skipped') or dgl.get('error')}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default="bench-data", help="where the stores are made (reused)")
    p.add_argument("--on-store", metavar="PATH", help="measure our sampler and loader on this "
                   "store (its 'train' split) instead of a synthetic graph; peers are skipped")
    p.add_argument("--seed-type", help="node type of the seeds in a heterogeneous --on-store")
    p.add_argument("--nodes", type=float, default=2e6)
    p.add_argument("--edges", type=float, default=4e7)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=50, help="timed batches per measurement (max)")
    p.add_argument("--seconds", type=float, default=30.0, help="time limit per measurement")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated among {PARTS}")
    p.add_argument("--memcap", help="memory cap of the out-of-core run (default: features / 4)")
    p.add_argument("--pyg-workers", type=int, default=0, help="PyG DataLoader worker processes")
    p.add_argument("--prefetch", type=int, default=2, help="our loader's batches in flight per stage")
    p.add_argument("--io-threads", type=int, default=128,
                   help="reads in flight of our out-of-core gathers (open_store(io_threads=))")
    p.add_argument("--ooc-batch-size", type=int, default=None,
                   help="batch size of the out-of-core comparison (both loaders; default "
                        "--batch-size)")
    p.add_argument("--ooc-store", metavar="PATH",
                   help="the out-of-core comparison on this homogeneous store with a 'train' "
                        "split (e.g. bench-data/rmat22.store) instead of the power-law graph")
    p.add_argument("--ooc-epochs", type=int, default=2,
                   help="epochs of the out-of-core comparison (the first is cold)")
    p.add_argument("--ooc-cache", default="auto", choices=("auto", "presample", "degree", "none"),
                   help="our loader's cache policy out of core")
    p.add_argument("--ooc-in-flight", type=int, default=1,
                   help="our loader's batch buffers out of core (1: the timing loop drops "
                        "each batch before asking for the next)")
    p.add_argument("--quick", action="store_true", help="tiny graph, a few batches: a smoke run")
    p.add_argument("--json", help="write the report as JSON here")


def main_args(args) -> int:
    args.nodes, args.edges = int(args.nodes), int(args.edges)
    if args.quick:
        args.nodes, args.edges, args.batches, args.seconds = 20_000, 200_000, 5, 10.0
        args.batch_size = min(args.batch_size, 256)
    rep = run(args)
    print(table(rep))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=2)
    return 0


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    return main_args(args)


if __name__ == "__main__":
    sys.exit(main())
