"""Out-of-core preprocessing: raw edge lists and features to a store, in a memory budget.

* :mod:`preprocess.edges`: edge sources (``.npy``, parquet, CSV, arrays) streamed in blocks;
* :mod:`preprocess.csc`: COO to CSC by an external bucketed counting sort (:func:`build_csc`);
* :mod:`preprocess.job`: resumable jobs (manifest, declared steps, ``--force``, ``--dry-run``);
* :mod:`preprocess.spec` / :mod:`preprocess.spec_run`: dataset spec files, parsed / run;
* :mod:`preprocess.cli`: the ``featurestore preprocess ...`` commands.
"""

from .csc import build_csc, coo_to_csc, plan_csc, reverse_etype
from .edges import (EdgeSource, concat, from_arrays, from_csv, from_npy, from_npy_pair,
                    from_parquet, open_edges)
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .job import Job, Step, StepContext, StepDef
from .memory import PeakMemory, parse_size

__all__ = ["EdgeSource", "from_arrays", "from_npy", "from_npy_pair", "from_parquet", "from_csv",
           "concat", "open_edges", "build_csc", "coo_to_csc", "plan_csc", "reverse_etype", "Job",
           "Step", "StepDef", "StepContext", "PeakMemory", "parse_size", *_errors_all]
