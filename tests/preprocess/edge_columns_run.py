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

d, n, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) << 20
et = ("n", "to", "n")
src = from_npy(os.path.join(d, "e.npy"))
tmp = os.path.join(d, "tmp")
w = fs.create_store(os.path.join(d, "s"), mode="w")
w.add_node_type("n", n)
out = {}


def phase(name, fn):
    t = time.perf_counter()
    with PeakMemory() as mem:
        r = fn()
    out[name] = {"seconds": round(time.perf_counter() - t, 3), "added_mib": mem.added >> 20}
    return r


phase("csc", lambda: build_csc(w, et, src, num_src=n, num_dst=n, budget_bytes=budget,
                               tmpdir=tmp, progress=False))
order = phase("order", lambda: ec.edge_order(w, et, src, os.path.join(tmp, "order.npy"),
                                             budget_bytes=budget, tmpdir=tmp, progress=False))
for name in ("attr", "rel"):
    phase(name, lambda name=name: ec.write_edge_column(
        w, et, name, os.path.join(d, f"{name}.npy"), order, budget_bytes=budget, tmpdir=tmp,
        progress=False))
w.commit()
print(json.dumps(out))
