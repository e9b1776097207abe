"""Run ``featurestore preprocess edges``, SIGKILLing this process in the middle of the k-th
array block write (K = ``order``: in the edge order step, after its first slots are placed).

    python kill_edges_run.py STORE K EDGES [OPTIONS...]
"""

import os
import signal
import sys

from featurestore.testing.kill import kill_at_write

store, k, edges, opts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
k = int(k) if k != "order" else k
calls = kill_at_write(k)

if k == "order":
    from preprocess.steps import edge_kernels

    real_positions = edge_kernels.key_positions

    def key_positions(*a):
        real_positions(*a)
        os.kill(os.getpid(), signal.SIGKILL)

    edge_kernels.key_positions = key_positions

from featurestore.cli import main  # noqa: E402

main(["preprocess", "edges", edges, store, *opts, "--memory", "16MiB", "--no-progress"])
print("finished without being killed")
