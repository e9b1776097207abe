"""Crash tests for jobs: SIGKILL the process in the middle of its k-th array block write.

A test runs a small script in a child process that calls :func:`kill_at_write` before the
job, then checks that the half-written store refuses to open and that a rerun resumes to the
store an uninterrupted run writes.
"""

from __future__ import annotations

import os
import signal

__all__ = ["kill_at_write"]


def kill_at_write(k) -> list[int]:
    """Make the ``k``-th :meth:`ShardWriter.write` of this process write half its rows, then
    SIGKILL the process. Returns the running count of writes (``[n]``); a ``k`` that is not
    an int never kills."""
    from featurestore.format import shard

    calls = [0]
    real_write = shard.ShardWriter.write

    def write(self, block):
        calls[0] += 1
        if calls[0] == k:
            real_write(self, block[: max(0, len(block) // 2)])  # half the rows reach the file
            os.kill(os.getpid(), signal.SIGKILL)
        real_write(self, block)

    shard.ShardWriter.write = write
    return calls
