"""Build a store with edge columns from files, printing each phase's seconds and the
anonymous memory it added (for the memcap test, and a quick measurement).

    python edge_columns_run.py DIR NUM_NODES BUDGET_MIB
DIR holds e.npy ([2, E]), attr.npy ([E, F]) and rel.npy ([E]); the store goes to DIR/s.
"""

import json
import os
import sys
import time

import featurestore as fs
from preprocess import build_csc, from_npy
from preprocess.steps import edge_columns as ec
from preprocess.steps.memory import PeakMemory

import numpy as np

d, n, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) << 20
et = ("n", "to", "n")


def run(d, n, budget, out, step_budget=None):
    """The job's steps on the files in ``d``, each timed and measured into ``out``
    (``step_budget``: the order and column steps' budget, default ``budget``)."""
    step_budget = step_budget or budget
    src = from_npy(os.path.join(d, "e.npy"))
    tmp = os.path.join(d, "tmp")
    w = fs.create_store(os.path.join(d, "s"), mode="w")
    w.add_node_type("n", n)

    def phase(name, fn):
        t = time.perf_counter()
        with PeakMemory() as mem:
            r = fn()
        out[name] = {"seconds": round(time.perf_counter() - t, 3), "added_mib": mem.added >> 20}
        return r

    phase("csc", lambda: build_csc(w, et, src, num_src=n, num_dst=n, budget_bytes=budget,
                                   tmpdir=tmp, progress=False))
    order = phase("order", lambda: ec.edge_order(w, et, src, os.path.join(tmp, "order.npy"),
                                                 budget_bytes=step_budget, tmpdir=tmp,
                                                 progress=False))
    for name in ("attr", "rel"):
        phase(name, lambda name=name: ec.write_edge_column(
            w, et, name, os.path.join(d, f"{name}.npy"), order, budget_bytes=step_budget,
            tmpdir=tmp, progress=False))
    w.commit()


# the same steps on 1.2M edges of the same dtypes first, the order and column steps at the
# 16 MiB minimum (several sort ranges and buckets, the parallel kernels): numba compiles
# every kernel there (from a cold cache LLVM takes ~50 MiB for a moment; the budget bounds
# the data, not that)
warm = os.path.join(d, "warm")
os.makedirs(warm, exist_ok=True)
rng = np.random.default_rng(1)
m = 1_200_000
np.save(os.path.join(warm, "e.npy"), rng.integers(0, 300_000, (2, m)).astype(np.int32))
np.save(os.path.join(warm, "attr.npy"),
        rng.standard_normal((m, 8)).astype(np.load(os.path.join(d, "attr.npy"),
                                                   mmap_mode="r").dtype))
np.save(os.path.join(warm, "rel.npy"), rng.integers(0, 9, m).astype(
    np.load(os.path.join(d, "rel.npy"), mmap_mode="r").dtype))
run(warm, 300_000, budget, {}, step_budget=16 << 20)
out = {}
run(d, n, budget, out)
print(json.dumps(out))
