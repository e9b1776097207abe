"""Neighbour sampling alone: our numba sampler against PyG's and DGL's on the same graph.

Seeds/s, sampled edges/s and batches/s of ``loaders.NeighborSampler`` over the store's
memory-mapped CSC, of PyG's ``torch_geometric.sampler.NeighborSampler`` (torch-sparse or
pyg-lib, whichever is installed) over the same edges, and of DGL's ``NeighborSampler`` (by
``benchmarks/peers/dgl_peer.py`` in ``.venv-dgl``, when that environment exists; GraphBolt's
sample-and-fetch pipeline is timed in the same DGL process, as a loader peer). Each trial
samples ``batches`` batches of ``batch_size`` seeds drawn from the store's ``train`` split
(fanouts per hop from the seeds); medians over trials, after untimed warm-up batches. Peers that
are not installed are reported as such, not as failures.

The per-batch stage times (sampling, then gathering the sampled nodes' feature rows from the
page cache) give the "time per pipeline stage" chart: ours through ``Store.features().gather``,
PyG's through ``x[n_id]`` on a tensor in RAM.

DGL counts edges differently: it draws fresh neighbours for every node at every layer, while
PyG-style samplers (ours, PyG's) expand each node once, so DGL's batches hold more edges for the
same fanouts. Compare batches/s and seeds/s across all three, sampled edges/s with care.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import statistics
import subprocess
import time

import numpy as np

import featurestore as fs

from .report import machine_info

log = logging.getLogger(__name__)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = ("featurestore", "pyg", "dgl")


def has(mod: str) -> bool:
    """Whether ``mod`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False


def make_graph_store(workdir: str, nodes: int, edges: int, seed: int = 0) -> str:
    """A power-law graph with fp32 x 128 features (reused when present).

    Same path and parameters as :func:`benchmarks.loader_bench.make_store`, so that the loader
    benchmark reuses it.
    """
    from loaders.synthetic import power_law_store

    path = os.path.join(workdir, f"pl-{nodes}-{edges}-fp32x128")
    try:
        with fs.open_store(path) as s:
            if s.num_edges() == edges and s.features().shape == (nodes, 128):
                return path
    except fs.FeatureStoreError:
        pass
    log.info("writing %s: %d nodes, %d edges", path, nodes, edges)
    t = time.perf_counter()
    os.makedirs(workdir, exist_ok=True)
    power_law_store(path, num_nodes=nodes, num_edges=edges, feat_dim=128, dtype=np.float32,
                    num_classes=64, train_frac=0.1, seed=seed, mode="w")
    log.info("wrote %s in %.1f s", path, time.perf_counter() - t)
    return path


def _seed_batches(store, batch_size: int, count: int, seed: int) -> list[np.ndarray]:
    try:
        pool = np.asarray(store.split("train"), dtype=np.int64)
    except (fs.FeatureStoreError, KeyError):
        pool = np.arange(store.num_nodes(), dtype=np.int64)
    rng = np.random.default_rng(seed)
    need = batch_size * count
    perm = np.concatenate([rng.permutation(pool) for _ in range(-(-need // max(1, pool.size)))])
    return [perm[i * batch_size:(i + 1) * batch_size] for i in range(count)]


def _trials(sample, gather, batches: list[np.ndarray], n: int, trials: int, warmup: int) -> dict:
    """Time ``trials`` rounds of ``n`` batches; ``sample(k, seeds) -> (edges, nodes)``."""
    for k in range(warmup):
        _, nodes = sample(k, batches[k])
        if gather is not None:
            gather(nodes)
    per_trial, stage_sample, stage_gather = [], [], []
    k = warmup
    for _ in range(trials):
        edges = seeds = 0
        t0 = time.perf_counter()
        for _ in range(n):
            s0 = time.perf_counter()
            e, nodes = sample(k, batches[k])
            s1 = time.perf_counter()
            stage_sample.append(s1 - s0)
            edges += e
            seeds += batches[k].shape[0]
            k += 1
        dt = time.perf_counter() - t0
        per_trial.append({"seconds": dt, "batches": n, "seeds": seeds, "edges": edges,
                          "batches_per_s": n / dt, "seeds_per_s": seeds / dt,
                          "edges_per_s": edges / dt})
    if gather is not None:  # the next stage, timed apart on the same batches
        for j in range(warmup, warmup + min(n, 20)):
            _, nodes = sample(j, batches[j])
            g0 = time.perf_counter()
            gather(nodes)
            stage_gather.append(time.perf_counter() - g0)
    med = {key: statistics.median(t[key] for t in per_trial)
           for key in ("batches_per_s", "seeds_per_s", "edges_per_s")}
    return {**med, "edges_per_batch": statistics.median(t["edges"] / t["batches"] for t in per_trial),
            "trials": per_trial,
            "stage_ms": {"sample": 1e3 * statistics.median(stage_sample),
                         **({"gather features": 1e3 * statistics.median(stage_gather)}
                            if stage_gather else {})}}


def bench_ours(store, fanouts, batches, n, trials, warmup) -> dict:
    """Our numba sampler; the gather stage reads the sampled nodes' rows from the store."""
    import numba

    from loaders import NeighborSampler

    s = NeighborSampler(store, fanouts)
    F = store.features()

    def sample(k, seeds):
        sub = s.sample(seeds, seed=0, batch=k)
        return sub.num_edges, next(iter(sub.node.values()))

    out = _trials(sample, F.gather, batches, n, trials, warmup)
    out.update(peer="featurestore", impl=f"loaders.NeighborSampler (numba, "
               f"{numba.get_num_threads()} threads)")
    return out


def bench_pyg(store, fanouts, batches, n, trials, warmup) -> dict:
    """PyG's NeighborSampler over ``Data(edge_index)``; features in RAM as a tensor."""
    import torch
    from torch_geometric.data import Data
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    t = time.perf_counter()
    indptr, indices = store.csc()
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    data = Data(edge_index=torch.from_numpy(np.stack([np.asarray(indices, np.int64), dst])),
                num_nodes=store.num_nodes())
    del dst
    x = torch.from_numpy(np.array(store.features().numpy()))
    sampler = NeighborSampler(data, num_neighbors=list(fanouts))
    setup = time.perf_counter() - t

    def sample(k, seeds):
        o = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.from_numpy(seeds)))
        return int(o.row.numel()), o.node

    out = _trials(sample, lambda nodes: x.index_select(0, nodes), batches, n, trials, warmup)
    backend = "pyg-lib" if has("pyg_lib") else "torch-sparse"
    out.update(peer="pyg", impl=f"torch_geometric.sampler.NeighborSampler ({backend}, "
               f"{torch.get_num_threads()} torch threads)", setup_s=setup)
    return out


def dgl_python() -> str | None:
    """The DGL environment's interpreter, when it exists."""
    py = os.path.join(ROOT, ".venv-dgl", "bin", "python")
    return py if os.path.exists(py) else None


DGL_MODES = {
    "sampler": ("dgl", "dgl.dataloading.NeighborSampler"),
    "graphbolt": ("dgl-graphbolt", "GraphBolt sample_neighbor + fetch_feature (features in RAM; "
                  "a whole loader, not comparable with samplers alone)"),
}


def bench_dgl(path, fanouts, batch_size, n, trials, warmup, modes=("sampler", "graphbolt"),
              timeout: float = 900) -> list[dict]:
    """DGL's sampler (and GraphBolt's pipeline) in DGL's own environment: one process, one
    trial of ``n * trials`` batches per mode (a process start costs seconds)."""
    py = dgl_python()
    if py is None:
        return [{"peer": "dgl", "status": "not installed",
                 "why": "no .venv-dgl (scripts/dgl-env.sh builds it)"}]
    cmd = [py, os.path.join(ROOT, "benchmarks", "peers", "dgl_peer.py"), path,
           "--fanouts", ",".join(map(str, fanouts)), "--batch-size", str(batch_size),
           "--modes", ",".join(modes), "--batches", str(n * trials), "--seconds", "1e9",
           "--warmup", str(warmup)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        rep = json.loads(p.stdout)
        runs = {r["mode"]: r for r in rep["results"]}
    except subprocess.TimeoutExpired:
        return [{"peer": "dgl", "status": "error", "why": f"timed out after {timeout:.0f} s"}]
    except (json.JSONDecodeError, KeyError, TypeError):
        return [{"peer": "dgl", "status": "error",
                 "why": f"rc={p.returncode}: {p.stderr.strip()[-600:]}"}]
    out = []
    for mode in modes:
        peer, impl = DGL_MODES.get(mode, (f"dgl-{mode}", mode))
        r = runs.get(mode, {"error": "no result"})
        if "error" in r:
            out.append({"peer": peer, "status": "error", "why": r["error"]})
            continue
        out.append({"peer": peer, "impl": f"{impl} (dgl {rep['versions']['dgl']}, torch "
                    f"{rep['versions']['torch']}, {rep['threads']} threads)",
                    "batches_per_s": r["batches_per_s"], "seeds_per_s": r["seeds_per_s"],
                    "edges_per_s": r["sampled_edges_per_s"],
                    "edges_per_batch": r["sampled_edges_per_batch"],
                    "trials": [{"seconds": r["seconds"], "batches": r["batches"],
                                "cpu_seconds": r.get("cpu_seconds")}],
                    "note": "one process, one trial of all batches; DGL samples fresh neighbours "
                            "per layer (more edges per batch)",
                    "dgl_fanouts": rep.get("dgl_fanouts"),
                    "whole_loader": mode != "sampler"})
    return out


def run(path: str, fanouts=(15, 10, 5), batch_size: int = 1024, batches: int = 20,
        trials: int = 3, warmup: int = 2, peers=PEERS, seed: int = 0) -> dict:
    """Sample with every peer on the store at ``path``; a report dict."""
    fanouts = [int(f) for f in fanouts]
    store = fs.open_store(path)
    if len(store.node_types) != 1 or len(store.edge_types) != 1:
        raise fs.FeatureStoreError(f"Expected a homogeneous store (one node type, one edge type) "
                                   f"at {path}. Got {store.node_types} / {store.edge_types} instead.")
    seeds = _seed_batches(store, batch_size, warmup + batches * trials, seed)
    results = []
    if "featurestore" in peers:
        log.info("sample: ours")
        results.append(bench_ours(store, fanouts, seeds, batches, trials, warmup))
    if "pyg" in peers:
        if has("torch_geometric") and (has("torch_sparse") or has("pyg_lib")):
            log.info("sample: PyG")
            results.append(bench_pyg(store, fanouts, seeds, batches, trials, warmup))
        else:
            results.append({"peer": "pyg", "status": "not installed",
                            "why": "needs torch_geometric with torch-sparse or pyg-lib"})
    opts = {"store": os.path.abspath(path), "num_nodes": store.num_nodes(),
            "num_edges": store.num_edges(), "fanouts": fanouts, "batch_size": batch_size,
            "batches_per_trial": batches, "trials": trials, "warmup_batches": warmup}
    store.close()
    if "dgl" in peers:
        log.info("sample: DGL")
        results += bench_dgl(path, fanouts, batch_size, batches, trials, warmup)
    ours = next((r for r in results if r["peer"] == "featurestore"), None)
    for r in results:
        if ours and r.get("batches_per_s") and not r.get("whole_loader"):
            r["ours_over_peer"] = ours["batches_per_s"] / r["batches_per_s"]
    return {"benchmark": "sample", "machine": machine_info(path), "options": opts,
            "results": results}


def table(report: dict) -> str:
    """A markdown table of a sample report."""
    from .report import fmt_rate, md_table

    rows = []
    for r in report["results"]:
        if "batches_per_s" not in r:
            rows.append([r["peer"], r.get("status", ""), None, None, None, None, None,
                         r.get("why", "")])
            continue
        st = r.get("stage_ms", {})
        rows.append([r["peer"], f"{r['batches_per_s']:.1f}", fmt_rate(r["seeds_per_s"]),
                     fmt_rate(r["edges_per_s"]), f"{r['edges_per_batch']:,.0f}",
                     f"{st['sample']:.1f}" if "sample" in st else None,
                     f"{r['ours_over_peer']:.2f}x" if "ours_over_peer" in r else None,
                     r.get("impl", "")])
    o = report["options"]
    head = (f"Sampling: {o['num_nodes']:,} nodes, {o['num_edges']:,} edges, fanouts "
            f"{o['fanouts']}, {o['batch_size']} seeds a batch; median of {o['trials']} trials "
            f"of {o['batches_per_trial']} batches.\n\n")
    return head + md_table(["sampler", "batches/s", "seeds/s", "sampled edges/s", "edges/batch",
                            "ms/batch", "ours / peer (batches/s)", "implementation"], rows)
