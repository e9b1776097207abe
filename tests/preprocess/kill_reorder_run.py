"""Run the reorder job (degree order), SIGKILLing this process in the middle of the k-th
array write.

    python kill_reorder_run.py SRC DST K
"""

import os
import signal
import sys

from featurestore.format import shard as _shard

src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = [0]
real_write = _shard.ShardWriter.write


def write(self, block):
    calls[0] += 1
    if calls[0] == k:
        real_write(self, block[: max(0, len(block) // 2)])  # half the rows reach the file
        os.kill(os.getpid(), signal.SIGKILL)
    real_write(self, block)


_shard.ShardWriter.write = write

from loaders.ranking import degree_ranking  # noqa: E402
from preprocess.jobs.reorder import run_reorder  # noqa: E402

run_reorder(src, dst, order="degree", hot=200, budget_bytes=16 << 20, progress=False,
            ranking=degree_ranking)
print("finished without being killed")
