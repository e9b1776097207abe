"""``bench sample``: our numba sampler against PyG's and DGL's on the same graph.

Batches/s, seeds/s and sampled edges/s of ``loaders.NeighborSampler`` over the store's CSC, of
PyG's ``NeighborSampler`` (torch-sparse or pyg-lib) over the same edges and of DGL's (by
``benchmarks/peers/dgl_peer.py`` in ``.venv-dgl``, with GraphBolt's pipeline as a loader peer):
trials of batches of the ``train`` split after untimed warm-up; a peer not installed is a row
saying so. The per-batch stage times (sample, then gather the sampled rows: ours from the store,
PyG's from a tensor in RAM) feed the stage chart. DGL draws fresh neighbours at every layer, so
its batches hold more edges: compare batches/s (docs/benchmarks.md, Caveats).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

import featurestore as fs

from benchmarks.options import opt
from benchmarks.report import has, machine_info, timed_loop
from benchmarks.workload import run_dgl_peer, seed_batches, synthetic_store

log = logging.getLogger(__name__)

PEERS = ("featurestore", "pyg", "dgl")
DGL_MODES = {"sampler": ("dgl", "dgl.dataloading.NeighborSampler"),
             "graphbolt": ("dgl-graphbolt", "GraphBolt sample_neighbor + fetch_feature (features "
                           "in RAM; a whole loader, not comparable with samplers alone)")}


@dataclass(frozen=True)
class SampleOptions:
    """Neighbour sampling: ours vs PyG (torch-sparse/pyg-lib) and DGL."""

    workdir: str = opt("bench-data", "where the synthetic graph is made")
    store: str | None = opt(None, "a store (default: a synthetic power-law graph); the peers "
                            "run on homogeneous ones")
    seed_type: str | None = opt(None, "node type of the seeds in a heterogeneous --store")
    nodes: int = opt(1_110_000, "nodes of the synthetic graph", size="nodes")
    edges: int = opt(16_650_000, "edges of the synthetic graph", size="edges")
    fanouts: tuple[int, ...] = opt((15, 10, 5), "per hop from the seeds")
    batch_size: int = opt(1024, "seeds per batch", size="sample_batch_size")
    batches: int = opt(10, "timed batches per trial", size="sample_batches")
    trials: int = opt(3, "trials per sampler", size="trials")
    warmup: int = opt(2, "untimed batches first")
    peers: str = opt(",".join(PEERS), "comma-separated samplers to time")
    topology: str = opt("mmap", "comma-separated topologies of ours, each timed: mmap, "
                        "memory (a resident int copy), packed (resident, bit-packed ids)")


def measure(sample, gather, batches: list[np.ndarray], n: int, trials: int, warmup: int,
            seconds: float = math.inf) -> dict:
    """Time ``trials`` rounds of up to ``n`` batches (``seconds``); ``sample(k, seeds) ->
    (edges, nodes)``; ``gather(nodes)``, when given, is the next stage, timed apart."""
    stage_sample: list[float] = []
    pos = [0]  # every trial samples batches of its own

    def step(_):
        k = pos[0]
        pos[0] += 1
        s0 = time.perf_counter()
        e, _ = sample(k, batches[k % len(batches)])
        stage_sample.append(time.perf_counter() - s0)
        return batches[k % len(batches)].shape[0], e

    per_trial = [timed_loop(step, n, seconds, warmup=warmup if i == 0 else 0)
                 for i in range(trials)]
    stage_gather = []
    for j in range(warmup, warmup + min(n, 20) if gather is not None else 0):
        _, nodes = sample(j, batches[j % len(batches)])
        g0 = time.perf_counter()
        gather(nodes)
        stage_gather.append(time.perf_counter() - g0)
    med = {key: statistics.median(t[key] for t in per_trial)
           for key in ("batches_per_s", "seeds_per_s", "edges_per_s")}
    stages = {"sample": 1e3 * statistics.median(stage_sample[warmup:] or stage_sample)}
    if stage_gather:
        stages["gather features"] = 1e3 * statistics.median(stage_gather)
    return {**med, "batches": per_trial[-1]["batches"],
            "edges_per_batch": statistics.median(t["edges_per_batch"] for t in per_trial),
            "trials": per_trial, "stage_ms": stages}


def bench_ours(store, fanouts, batches, n, trials, warmup, seconds=math.inf,
               ntype: str | None = None, topology: str = "mmap") -> dict:
    """Our numba sampler over the ``topology`` asked; the gather stage reads the sampled
    nodes' rows from the store."""
    import numba

    from loaders import NeighborSampler
    from loaders.sample.sampler import CSCGraph

    t0 = time.perf_counter()
    graph = CSCGraph.from_store(store, topology)
    setup = time.perf_counter() - t0
    s = NeighborSampler(graph, list(fanouts))
    gather = store.features().gather if len(store.node_types) == 1 else None

    def sample(k, seeds):
        sub = s.sample(seeds, ntype, seed=0, batch=k)
        return sub.num_edges, next(iter(sub.node.values()))

    out = measure(sample, gather, batches, n, trials, warmup, seconds)
    out.update(peer="featurestore", impl=f"loaders.NeighborSampler (numba, "
               f"{numba.get_num_threads()} threads, topology {topology})", topology=topology,
               topology_bytes=int(sum(p.nbytes + i.nbytes for p, i in graph.csc.values())),
               setup_s=setup)
    return out


def pyg_data(store, with_x: bool = True):
    """The store's graph as PyG's ``Data(edge_index)`` (with ``x`` and ``y`` in RAM)."""
    import torch
    from torch_geometric.data import Data

    indptr, indices = store.csc()
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    d = Data(edge_index=torch.from_numpy(np.stack([np.asarray(indices, np.int64), dst])),
             num_nodes=store.num_nodes())
    del dst
    if with_x:
        d.x = torch.from_numpy(np.array(store.features().numpy()))
        try:
            d.y = torch.from_numpy(np.array(store.labels()))
        except (fs.FeatureStoreError, KeyError):
            pass
    return d


def bench_pyg(data, fanouts, batches, n, trials, warmup, seconds=math.inf) -> dict:
    """PyG's NeighborSampler over ``data``; the gather stage is ``x[n_id]`` in RAM."""
    import torch
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    sampler = NeighborSampler(data, num_neighbors=list(fanouts))

    def sample(k, seeds):
        o = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=torch.from_numpy(seeds)))
        return int(o.row.numel()), o.node

    gather = (lambda nodes: data.x.index_select(0, nodes)) if data.x is not None else None
    out = measure(sample, gather, batches, n, trials, warmup, seconds)
    backend = "pyg-lib" if has("pyg_lib") else "torch-sparse"
    out.update(peer="pyg", backend=backend, impl=f"torch_geometric.sampler.NeighborSampler "
               f"({backend}, {torch.get_num_threads()} torch threads)")
    return out


def pyg_missing() -> str | None:
    """Why PyG's sampler cannot run here, or None."""
    if has("torch_geometric") and (has("torch_sparse") or has("pyg_lib")):
        return None
    return "needs torch_geometric with torch-sparse or pyg-lib"


def bench_dgl(path: str, o: SampleOptions, modes=("sampler", "graphbolt")) -> list[dict]:
    """DGL's sampler (and GraphBolt's pipeline) in DGL's own environment: one process, one
    trial of ``batches * trials`` batches per mode (a process start costs seconds)."""
    rep = run_dgl_peer(path, o.fanouts, o.batch_size, modes, o.batches * o.trials, warmup=o.warmup)
    if "results" not in rep:
        return [{"peer": "dgl", "status": "not installed" if "skipped" in rep else "error",
                 "why": rep.get("skipped") or rep.get("error")}]
    runs, out = {r["mode"]: r for r in rep["results"]}, []
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
                    "dgl_fanouts": rep.get("dgl_fanouts"), "whole_loader": mode != "sampler"})
    return out


def run(o: SampleOptions) -> dict:
    """Sample with every peer on ``o.store`` (or the synthetic graph); a report dict."""
    path = o.store or synthetic_store(o.workdir, o.nodes, o.edges)
    peers = o.peers.split(",")
    with fs.open_store(path) as store:
        hetero = len(store.node_types) != 1 or len(store.edge_types) != 1
        seeds = seed_batches(store, o.batch_size, o.warmup + o.batches * o.trials,
                             ntype=o.seed_type)
        args = (o.fanouts, seeds, o.batches, o.trials, o.warmup)
        results = []
        if "featurestore" in peers:
            for topo in o.topology.split(","):
                log.info("sample: ours (%s topology)", topo)
                results.append(bench_ours(store, *args, ntype=o.seed_type, topology=topo))
        if hetero:  # the peers' samplers here take one node and edge type
            peers = [p for p in peers if p == "featurestore"]
            results.append({"peer": "pyg, dgl", "status": "skipped",
                            "why": "the peers run on homogeneous graphs only"})
        if "pyg" in peers and pyg_missing():
            results.append({"peer": "pyg", "status": "not installed", "why": pyg_missing()})
        elif "pyg" in peers:
            log.info("sample: PyG")
            t = time.perf_counter()
            data = pyg_data(store)
            setup = time.perf_counter() - t
            results.append(dict(bench_pyg(data, *args), setup_s=setup))
            del data
        opts = {"store": os.path.abspath(path), "seed_type": o.seed_type,
                "num_nodes": sum(store.num_nodes(t) for t in store.node_types),
                "num_edges": sum(store.num_edges(e) for e in store.edge_types),
                "fanouts": list(o.fanouts),
                "batch_size": o.batch_size, "batches_per_trial": o.batches, "trials": o.trials,
                "warmup_batches": o.warmup}
    if "dgl" in peers:
        log.info("sample: DGL")
        results += bench_dgl(path, o)
    ours = next((r for r in results if r["peer"] == "featurestore"), None)
    for r in results:
        if ours and r.get("batches_per_s") and not r.get("whole_loader") \
                and r["peer"] != "featurestore":
            r["ours_over_peer"] = ours["batches_per_s"] / r["batches_per_s"]
    return {"benchmark": "sample", "machine": machine_info(path), "options": opts,
            "results": results}
