"""Under numba's ``workqueue`` threading layer (no TBB), which aborts the process on
concurrent parallel regions, two loaders iterated together and concurrent negative draws run
to the end (the lent H200 machine, which had no TBB, aborted in the first such check)."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import sys, threading
import numpy as np, numba
import featurestore as fs
from featurestore.threading_layer import parallel_safe

gate = threading.Barrier(4)  # the first calls of several threads at once: one probe only
def first_call():
    gate.wait()
    assert parallel_safe() is False
ts = [threading.Thread(target=first_call) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
from loaders import NeighborLoader
from loaders.datasets.synthetic import power_law_store
from loaders.sample.negative import uniform_negatives

path = power_law_store(sys.argv[1], num_nodes=20000, num_edges=300000, feat_dim=256,
                       num_classes=4, train_frac=0.5, seed=0)
s = fs.open_store(path)
kw = dict(batch_size=1024, shuffle=True, device="cpu", num_threads=2)
a, b = NeighborLoader(s, [10, 5], "train", **kw), NeighborLoader(s, [10, 5], "train", **kw)
n = 0
for x, y in zip(a, b):  # two gather threads at once, each batch > 4 MiB of rows
    assert x.x["node"].shape[0] * 1024 >= 4 << 20
    assert np.array_equal(x.x["node"].numpy(), y.x["node"].numpy())
    n += 1
def draws():
    for k in range(50):
        uniform_negatives(k, 1 << 17, 10**6)
ts = [threading.Thread(target=draws) for _ in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
print("layer", numba.threading_layer(), "batches", n)
"""


def test_concurrent_loaders_under_workqueue(tmp_path):
    script = tmp_path / "wq.py"
    script.write_text(textwrap.dedent(SCRIPT))
    # an empty numba cache: the first calls of two threads overlap while kernels compile
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", NUMBA_CACHE_DIR=str(tmp_path / "nc"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "s")], capture_output=True,
                       text=True, timeout=600, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "layer workqueue batches 10" in p.stdout, p.stdout
