"""Run the toy spec job, SIGKILLing this process in the middle of the k-th array write.

    python kill_run.py SPEC STORE K
"""

import os
import signal
import sys

from featurestore.format import shard as _shard

spec, store, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = [0]
real_write = _shard.ShardWriter.write


def write(self, block):
    calls[0] += 1
    if calls[0] == k:
        real_write(self, block[: max(0, len(block) // 2)])  # half the rows reach the file
        os.kill(os.getpid(), signal.SIGKILL)
    real_write(self, block)


_shard.ShardWriter.write = write

from preprocess.jobs.spec_steps import run_spec  # noqa: E402

run_spec(spec, store, budget_bytes=16 << 20, progress=False)
print("finished without being killed")
