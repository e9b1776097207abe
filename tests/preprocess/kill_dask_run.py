"""Run the toy spec job on a threads LocalCluster, SIGKILLing the driver in a Dask task.

    python kill_dask_run.py SPEC STORE WHAT K

WHAT is ``features`` (the K-th feature sub-block: half its bytes reach the shard file, then
the process dies) or ``csc`` (the K-th CSC range sort of a task starts, then the process
dies). The patched functions are the ones the tasks call by module name (a task function
of ``__main__`` would travel by value, with a copy of the counter). The
cluster's workers are threads of this process, so the kill takes the driver, the scheduler
and the workers at once, as a crash of the driver's machine would.
"""

import os
import signal
import sys

import distributed

import preprocess.steps.csc as csc
import preprocess.dask.features as dfeat
from dask_small import small_blocks
from preprocess.jobs.spec_steps import run_spec

spec, store, what, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
small_blocks()
calls = [0]
real_fill, real_sort = dfeat._fill, csc._sort_range


def fill(task, fd, lo, hi, src, perm, state, crc):
    calls[0] += 1
    if calls[0] == k:
        real_fill(task, fd, lo, lo + (hi - lo) // 2, src, perm, state, crc)
        os.kill(os.getpid(), signal.SIGKILL)
    return real_fill(task, fd, lo, hi, src, perm, state, crc)


def sort_range(*a, **kw):
    calls[0] += 1
    if calls[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
    return real_sort(*a, **kw)


if what == "features":
    dfeat._fill = fill
else:
    csc._sort_range = sort_range
    real_plan = csc.plan_csc

    def plan(*a, **kw):
        import dataclasses

        return dataclasses.replace(real_plan(*a, **kw), work_bytes=1000)

    csc.plan_csc = plan

with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                              dashboard_address=None) as cluster, \
        distributed.Client(cluster) as client:
    run_spec(spec, store, budget_bytes=16 << 20, progress=False, dask=client)
print("finished without being killed")
