"""Run the WikiKG90Mv2 ingest, SIGKILLing this process in the middle of the k-th array write.

    python kill_wiki.py ROOT STORE K
"""

import os
import signal
import sys

from featurestore.format import shard as _shard

root, store, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = [0]
real_write = _shard.ShardWriter.write


def write(self, block):
    calls[0] += 1
    if calls[0] == k:
        real_write(self, block[: max(0, len(block) // 2)])  # half the rows reach the file
        os.kill(os.getpid(), signal.SIGKILL)
    real_write(self, block)


_shard.ShardWriter.write = write

from preprocess.ogb.wikikg90mv2 import preprocess_wikikg90mv2  # noqa: E402

preprocess_wikikg90mv2(root, store, budget_bytes=16 << 20, progress=False)
print(f"finished without being killed ({calls[0]} writes)")
