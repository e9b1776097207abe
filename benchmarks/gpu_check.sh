#!/usr/bin/env bash
# GPU check for the loader (run when a GPU machine is lent; under 5 minutes).
#
#   benchmarks/gpu_check.sh [WORKDIR]          (PYTHON=... to pick the interpreter)
#
# 1. host-to-device copy GB/s from pinned and from pageable memory;
# 2. correctness of the CUDA path: batches on the GPU equal the CPU loader's batches (same
#    seed), with the default staging ring and with a tiny one (many chunks per batch);
# 3. loader seeds/s with device="cuda" (no model), fp32 x 128 and fp16 x 768 rows;
# 4. a PyG GraphSAGE training loop on the GPU: seeds/s and the share of each step spent
#    waiting on data (LoaderStats.wait / loop time), plus peak host RSS.
# Prints one JSON line per check; exits non-zero if a correctness check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
WORK="${1:-$(mktemp -d /tmp/gpu-check.XXXXXX)}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec timeout 290 "$PY" - "$WORK" <<'PYEOF'
import json, os, resource, sys, time
import numpy as np
import torch

work = sys.argv[1]
if not torch.cuda.is_available():
    print(json.dumps({"error": "torch.cuda.is_available() is False", "torch": torch.__version__}))
    sys.exit(2)
dev = torch.device("cuda")
print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                  "cpus": os.cpu_count()}), flush=True)


def h2d(pinned, mb=512, reps=5):
    x = torch.empty(mb << 20, dtype=torch.uint8, pin_memory=pinned)
    y = torch.empty(mb << 20, dtype=torch.uint8, device=dev)
    y.copy_(x, non_blocking=pinned); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        y.copy_(x, non_blocking=pinned)
    torch.cuda.synchronize()
    return round(reps * (mb << 20) / (time.perf_counter() - t) / 1e9, 2)


print(json.dumps({"check": "h2d", "pinned_GBps": h2d(True), "pageable_GBps": h2d(False)}),
      flush=True)

import featurestore as fs
from loaders import NeighborLoader
from loaders.datasets.synthetic import power_law_store

stores = {}
for layout, (dt, dim) in {"fp32x128": (np.float32, 128), "fp16x768": (np.float16, 768)}.items():
    t = time.perf_counter()
    stores[layout] = power_law_store(os.path.join(work, layout), num_nodes=500_000,
                                     num_edges=10_000_000, feat_dim=dim, dtype=dt,
                                     num_classes=16, homophily=0.5, train_frac=0.2, seed=0)
    print(json.dumps({"built": layout, "seconds": round(time.perf_counter() - t, 1)}), flush=True)

# correctness: GPU batches == CPU batches
s = fs.open_store(stores["fp16x768"])
ok = True
for staging in (64 << 20, 100_000):
    g = NeighborLoader(s, [10, 5], "train", batch_size=512, shuffle=True, seed=1, device="cuda",
                       output="pyg", staging_bytes=staging)
    c = NeighborLoader(s, [10, 5], "train", batch_size=512, shuffle=True, seed=1, device="cpu",
                       output="pyg")
    for k, (a, b) in enumerate(zip(g, c)):
        same = (a.x.is_cuda and torch.equal(a.x.cpu(), b.x) and torch.equal(a.y.cpu(), b.y)
                and torch.equal(a.edge_index.cpu(), b.edge_index))
        ok &= bool(same)
        if k == 4:
            break
    print(json.dumps({"check": "gpu_equals_cpu", "staging_bytes": staging, "ok": ok}), flush=True)
s.close()

# loader alone
for layout, path in stores.items():
    s = fs.open_store(path)
    ld = NeighborLoader(s, [15, 10, 5], "train", batch_size=1024, shuffle=True, device="cuda",
                        output="pyg")
    it = iter(ld)
    next(it); next(it)
    torch.cuda.synchronize()
    t, n = time.perf_counter(), 0
    for b in it:
        n += 1
        if n >= 30 or time.perf_counter() - t > 40:
            break
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
    del it
    print(json.dumps({"check": "loader_cuda", "layout": layout, "batches": n,
                      "batches_per_s": round(n / dt, 2), "seeds_per_s": round(1024 * n / dt),
                      "stage_ms_per_batch": ld.stats.per_batch_ms()}), flush=True)
    s.close()

# training loop: share of the step waiting on data
from torch_geometric.nn import GraphSAGE

s = fs.open_store(stores["fp32x128"])
ld = NeighborLoader(s, [15, 10, 5], "train", batch_size=1024, shuffle=True, device="cuda",
                    output="pyg")
model = GraphSAGE(128, 256, num_layers=3, out_channels=16).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):  # epoch 0 warms up (CUDA context, kernels)
    ld.stats.reset()
    torch.cuda.synchronize()
    t, n = time.perf_counter(), 0
    for b in ld:
        opt.zero_grad()
        out = model(b.x, b.edge_index)[: b.batch_size]
        loss = torch.nn.functional.cross_entropy(out, b.y)
        loss.backward()
        opt.step()
        n += 1
        if n >= 40:
            break
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
print(json.dumps({"check": "train_cuda", "batches": n, "seeds_per_s": round(1024 * n / dt),
                  "wait_share": round(ld.stats.wait / dt, 3),
                  "stage_ms_per_batch": ld.stats.per_batch_ms(),
                  "peak_rss_GiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}),
      flush=True)
sys.exit(0 if ok else 1)
PYEOF
