"""Run the toy spec job, SIGKILLing this process in the middle of the k-th array write.

    python kill_run.py SPEC STORE K
"""

import sys

from featurestore.testing.kill import kill_at_write

spec, store, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = kill_at_write(k)

from preprocess.jobs.spec_steps import run_spec  # noqa: E402

run_spec(spec, store, budget_bytes=16 << 20, progress=False)
print("finished without being killed")
