"""Run the reorder job (degree order), SIGKILLing this process in the middle of the k-th
array write.

    python kill_reorder_run.py SRC DST K
"""

import sys

from featurestore.testing.kill import kill_at_write

src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = kill_at_write(k)

from loaders.ranking import degree_ranking  # noqa: E402
from preprocess.jobs.reorder import run_reorder  # noqa: E402

run_reorder(src, dst, order="degree", hot=200, budget_bytes=16 << 20, progress=False,
            ranking=degree_ranking)
print("finished without being killed")
