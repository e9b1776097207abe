"""Run the WikiKG90Mv2 ingest, SIGKILLing this process in the middle of the k-th array write.

    python kill_wiki.py ROOT STORE K
"""

import sys

from featurestore.testing.kill import kill_at_write

root, store, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = kill_at_write(k)

from preprocess.ogb.wikikg90mv2 import preprocess_wikikg90mv2  # noqa: E402

preprocess_wikikg90mv2(root, store, budget_bytes=16 << 20, progress=False)
print(f"finished without being killed ({calls[0]} writes)")
