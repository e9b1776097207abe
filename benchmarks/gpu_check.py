"""GPU check of the loader on a CUDA machine: one JSON line per check (``benchmarks/gpu_check.sh``).

    python -m benchmarks.gpu_check WORKDIR [--parts h2d,eq,loader,train,peer,ooc] [--nodes N]

* ``h2d``: host-to-device GB/s from pinned and from pageable memory;
* ``eq``: batches on the GPU equal the CPU loader's (same seed), with the default staging
  ring, a tiny one (many chunks per batch), and the GPU cache tier;
* ``loader``: seeds/s with ``device="cuda"`` (no model), without and with the GPU tier, its
  hit rate and the host-to-device feature bytes per batch;
* ``train``: GraphSAGE [15, 10, 5] x 1024 on the GPU: seeds/s and the share of the loop spent
  waiting on the next batch (the GPU's idle share), features in RAM, with and without the tier;
* ``peer``: the same model and fanouts fed by PyG's own ``NeighborLoader`` (features in RAM,
  ``batch.to("cuda")``), when torch-sparse or pyg-lib is importable;
* ``ooc``: ours out of core: a child process with ``memory=`` a quarter of the feature bytes
  (under ``memcap`` when ``FEATURESTORE_MEMCAP`` names it and it can make a cgroup).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch

FANOUTS = [15, 10, 5]
BATCH = 1024
PARTS = ("h2d", "eq", "loader", "train", "peer", "ooc")
#: the device checked; ``GPU_CHECK_DEVICE=cpu`` runs the script's logic on a CPU (a smoke test)
DEV = os.environ.get("GPU_CHECK_DEVICE", "cuda")


def _sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def emit(**kw) -> dict:
    """Print one JSON line (and append it to ``$GPU_CHECK_LOG`` when set)."""
    line = json.dumps(kw)
    print(line, flush=True)
    if os.environ.get("GPU_CHECK_LOG"):
        with open(os.environ["GPU_CHECK_LOG"], "a") as f:
            f.write(line + "\n")
    return kw


def h2d(pinned: bool, mb: int = 512, reps: int = 5) -> float:
    """GB/s of ``reps`` copies of ``mb`` MiB to the GPU."""
    x = torch.empty(mb << 20, dtype=torch.uint8, pin_memory=pinned)
    y = torch.empty(mb << 20, dtype=torch.uint8, device=DEV)
    y.copy_(x, non_blocking=pinned)
    _sync()
    t = time.perf_counter()
    for _ in range(reps):
        y.copy_(x, non_blocking=pinned)
    _sync()
    return round(reps * (mb << 20) / (time.perf_counter() - t) / 1e9, 2)


def build_stores(work: str, nodes: int, edges: int) -> dict[str, str]:
    """The two synthetic stores of the check (fp32 x 128 and fp16 x 768)."""
    from loaders.datasets.synthetic import power_law_store

    out = {}
    for layout, (dt, dim) in {"fp32x128": (np.float32, 128), "fp16x768": (np.float16, 768)}.items():
        path = os.path.join(work, layout)
        t = time.perf_counter()
        if not os.path.exists(os.path.join(path, "zarr.json")):
            power_law_store(path, num_nodes=nodes, num_edges=edges, feat_dim=dim, dtype=dt,
                            num_classes=16, homophily=0.5, train_frac=0.2, seed=0)
        out[layout] = path
        emit(built=layout, seconds=round(time.perf_counter() - t, 1))
    return out


def check_equal(path: str, gpu_cache_bytes: int) -> bool:
    """GPU batches equal CPU batches: default staging, tiny staging, GPU tier."""
    import featurestore as fs
    from loaders import NeighborLoader

    s = fs.open_store(path)
    ok = True
    for staging, tier in ((64 << 20, 0), (100_000, 0), (64 << 20, gpu_cache_bytes),
                          (100_000, gpu_cache_bytes)):
        g = NeighborLoader(s, [10, 5], "train", batch_size=512, shuffle=True, seed=1,
                           device=DEV, output="pyg", staging_bytes=staging,
                           gpu_cache_bytes=tier)
        g._chunked = DEV != "cuda"  # the smoke test's CPU run of the device path
        c = NeighborLoader(s, [10, 5], "train", batch_size=512, shuffle=True, seed=1,
                           device="cpu", output="pyg")
        same = True
        for k, (a, b) in enumerate(zip(g, c)):
            same &= bool(a.x.device.type == DEV and torch.equal(a.x.cpu(), b.x)
                         and torch.equal(a.y.cpu(), b.y)
                         and torch.equal(a.edge_index.cpu(), b.edge_index))
            if k == 5:
                break
        ok &= same
        emit(check="gpu_equals_cpu", staging_bytes=staging, gpu_cache_bytes=tier, ok=same,
             gpu_hits=g.stats.gpu_hits, gpu_misses=g.stats.gpu_misses)
    s.close()
    return ok


def loader_rate(path: str, layout: str, gpu_cache_bytes: int, batches: int = 30) -> None:
    """Loader alone on the GPU: seeds/s, GPU tier hits, H2D feature bytes per batch."""
    import featurestore as fs
    from loaders import NeighborLoader

    s = fs.open_store(path)
    ld = NeighborLoader(s, FANOUTS, "train", batch_size=BATCH, shuffle=True, device=DEV,
                        output="pyg", gpu_cache_bytes=gpu_cache_bytes)
    it = iter(ld)
    next(it)
    next(it)
    _sync()
    ld.stats.reset()
    t, n = time.perf_counter(), 0
    for _ in it:
        n += 1
        if n >= batches or time.perf_counter() - t > 40:
            break
    _sync()
    dt = time.perf_counter() - t
    del it
    st = ld.stats
    emit(check="loader_cuda", layout=layout, gpu_cache_bytes=gpu_cache_bytes, batches=n,
         seeds_per_s=round(BATCH * n / dt), gpu_hit_rate=round(st.gpu_hit_rate, 3),
         h2d_MiB_per_batch=round(st.h2d_bytes / max(1, n) / 2**20, 1),
         gpu_saved_MiB_per_batch=round(st.gpu_saved_bytes / max(1, n) / 2**20, 1),
         stage_ms_per_batch=st.per_batch_ms())
    s.close()


def _model(dim: int):
    from torch_geometric.nn import GraphSAGE

    return GraphSAGE(dim, 256, num_layers=len(FANOUTS), out_channels=16).to(DEV)


def train_loop(batches, dim: int, steps: int = 40, warm: int = 5) -> dict:
    """Train GraphSAGE on ``batches`` (an iterable of PyG batches on or for the GPU): seeds/s
    and the share of the loop spent waiting for the next batch (the GPU is idle then: each
    step synchronises)."""
    model = _model(dim)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it = iter(batches)
    wait = n = 0
    t0 = None
    while n < steps + warm:
        a = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            it = iter(batches)
            continue
        b = b.to(DEV, non_blocking=True)
        got = time.perf_counter()
        if n == warm:
            _sync()
            t0, wait = time.perf_counter(), 0.0
        elif n > warm:
            wait += got - a
        opt.zero_grad()
        out = model(b.x.float(), b.edge_index)[: b.batch_size]
        loss = torch.nn.functional.cross_entropy(out, b.y[: b.batch_size].long())
        loss.backward()
        opt.step()
        _sync()
        n += 1
    dt = time.perf_counter() - t0
    return {"seeds_per_s": round(BATCH * steps / dt), "wait_share": round(wait / dt, 3),
            "steps": steps}


def train_ours(path: str, gpu_cache_bytes: int, memory=None) -> dict:
    """Our loader feeding the training loop."""
    import featurestore as fs
    from loaders import NeighborLoader

    s = fs.open_store(path)
    dim = s.features(None, "feat").shape[1]
    ld = NeighborLoader(s, FANOUTS, "train", batch_size=BATCH, shuffle=True, device=DEV,
                        output="pyg", gpu_cache_bytes=gpu_cache_bytes, memory=memory)
    r = train_loop(ld, dim)
    r.update(gpu_hit_rate=round(ld.stats.gpu_hit_rate, 3),
             peak_rss_GiB=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2))
    return r


def train_peer(path: str, workers: int) -> dict:
    """PyG's own NeighborLoader over the store's graph with its features in RAM."""
    import featurestore as fs
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader as PygLoader

    s = fs.open_store(path)
    indptr, indices = s.csc()
    n = s.num_nodes()
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    f = s.features(None, "feat")
    x = torch.from_numpy(f.gather(np.arange(n)))
    y = torch.from_numpy(np.asarray(s.labels(None)).astype(np.int64))
    ei = torch.from_numpy(np.stack([np.asarray(indices, dtype=np.int64), dst]))
    data = Data(x=x, y=y, edge_index=ei, num_nodes=n)
    train = torch.from_numpy(np.asarray(s.split("train")).astype(np.int64))
    ld = PygLoader(data, FANOUTS, input_nodes=train, batch_size=BATCH, shuffle=True,
                   num_workers=workers, persistent_workers=workers > 0, pin_memory=True)
    r = train_loop(ld, x.shape[1])
    r.update(workers=workers)
    return r


def run_ooc(path: str, memcap: str | None) -> None:
    """Ours out of core, in a child (memory budget a quarter of the feature bytes)."""
    import featurestore as fs

    s = fs.open_store(path)
    fbytes = int(np.prod(s.features(None, "feat").shape)) * 2
    s.close()
    budget = fbytes // 4
    child = [sys.executable, "-m", "benchmarks.gpu_check", "--child-ooc", path, str(budget)]
    cmd = child
    if memcap:
        probe = subprocess.run([sys.executable, memcap, "64M", "--", "true"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            cmd = [sys.executable, memcap, str(budget + (600 << 20)), "--", *child]
        else:
            emit(check="ooc_memcap", ok=False, why=probe.stderr.strip()[-300:])
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            emit(**json.loads(line))
    emit(check="ooc_run", rc=p.returncode, seconds=round(time.perf_counter() - t, 1),
         feature_bytes=fbytes, memory=budget, memcap=" ".join(cmd[:3]) if cmd is not child
         else None, stderr_tail=p.stderr.strip()[-600:])


def main(argv=None) -> int:  # noqa: D103
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", nargs="?")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--nodes", type=int, default=500_000)
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--peer-workers", type=int, default=8)
    ap.add_argument("--child-ooc", nargs=2, metavar=("STORE", "MEMORY"))
    a = ap.parse_args(argv)
    if a.child_ooc:
        r = train_ours(a.child_ooc[0], 0, memory=int(a.child_ooc[1]))
        emit(check="train_cuda_ooc", **r)
        return 0
    if DEV == "cuda" and not torch.cuda.is_available():
        emit(error="torch.cuda.is_available() is False", torch=torch.__version__)
        return 2
    parts = set(a.parts.split(","))
    emit(gpu=torch.cuda.get_device_name(0) if DEV == "cuda" else DEV, torch=torch.__version__,
         cpus=os.cpu_count(), date=datetime.date.today().isoformat())
    if "h2d" in parts:
        emit(check="h2d", pinned_GBps=h2d(True), pageable_GBps=h2d(False))
    stores = build_stores(a.work, a.nodes, a.edges)
    big = stores["fp16x768"]
    quarter = a.nodes * 768 * 2 // 4
    ok = True
    steps = [
        ("eq", lambda: check_equal(big, quarter)),
        ("loader", lambda: [loader_rate(p, lay, g) for lay, p in stores.items()
                            for g in (0, quarter)]),
        ("train", lambda: [emit(check="train_cuda", loader="ours", layout="fp16x768",
                                gpu_cache_bytes=g, **train_ours(big, g)) for g in (0, quarter)]),
        ("peer", lambda: emit(check="train_cuda", loader="pyg", layout="fp16x768",
                              **train_peer(big, a.peer_workers))),
        ("ooc", lambda: run_ooc(big, os.environ.get("FEATURESTORE_MEMCAP"))),
    ]
    for name, fn in steps:
        if name not in parts:
            continue
        try:
            r = fn()
            ok &= r is not False
        except Exception as e:  # one broken part must not hide the others' figures
            emit(check=name, error=f"{type(e).__name__}: {e}"[:800])
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
