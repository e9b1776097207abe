"""Reorder a store of 200k nodes whose features (fp32 x 320, 256 MB) are 8x the budget, and
print the anonymous memory each step added above the interpreter's (MiB, JSON), for the
memcap test.

    python reorder_run.py DIR BUDGET_MIB
The source store goes to DIR/src, the reordered one to DIR/dst.
"""

import json
import os
import sys

import numpy as np

import featurestore as fs
from loaders.ranking import presample_ranking
from preprocess.jobs.reorder import run_reorder
from preprocess.steps.memory import anon_bytes

d, budget = sys.argv[1], int(sys.argv[2]) << 20


def build(path, n, e, dim):
    rng = np.random.default_rng(0)
    src = (rng.zipf(1.6, e) * 7919 % n).astype(np.int32)
    dst = rng.integers(0, n, e)
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    w = fs.create_store(path, mode="w")
    w.add_node_type("node", n, orig_ids=np.arange(n) + 1)
    w.add_edge_type(("node", "to", "node"), indptr, src[order])
    del src, dst, order
    step = 8192
    w.add_features("node", "feat", (rng.standard_normal((min(step, n - lo), dim), np.float32)
                                    for lo in range(0, n, step)),
                   dtype=np.float32, row_shape=(dim,))
    w.add_labels("node", rng.integers(0, 9, n))
    w.add_split("train", "node", np.sort(rng.choice(n, 4000, replace=False)))
    w.commit()


# the same job on a small store first: numba compiles (or loads) every kernel there
build(os.path.join(d, "warm-src"), 5000, 50_000, 320)
run_reorder(os.path.join(d, "warm-src"), os.path.join(d, "warm-dst"), hot="10%",
            batch_size=256, budget_bytes=budget, progress=False, ranking=presample_ranking)
build(os.path.join(d, "src"), 200_000, 2_000_000, 320)
base = anon_bytes()
run_reorder(os.path.join(d, "src"), os.path.join(d, "dst"), hot="10%", batch_size=256,
            budget_bytes=budget, progress=False, ranking=presample_ranking)
with open(os.path.join(d, "dst", ".preprocess", "manifest.json")) as f:
    steps = json.load(f)["steps"]
print(json.dumps({k: max(0, v["peak_anon_bytes"] - base) >> 20 for k, v in steps.items()}))
