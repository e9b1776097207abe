"""Run ``featurestore preprocess edges``, SIGKILLing this process in the middle of the k-th
array block write (K = ``order``: in the edge order step, after its first slots are placed).

    python kill_edges_run.py STORE K EDGES [OPTIONS...]
"""

import os
import signal
import sys

from featurestore.format import shard as _shard

store, k, edges, opts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
k = int(k) if k != "order" else k
calls = [0]
real_write = _shard.ShardWriter.write


def write(self, block):
    calls[0] += 1
    if calls[0] == k:
        real_write(self, block[: max(0, len(block) // 2)])  # half the rows reach the file
        os.kill(os.getpid(), signal.SIGKILL)
    real_write(self, block)


_shard.ShardWriter.write = write

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
