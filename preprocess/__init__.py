"""Out-of-core preprocessing: raw edge lists and features to a store, in a memory budget.

* :mod:`preprocess.sources`: edge and feature sources (``.npy``, parquet, CSV, arrays, URLs)
  streamed in blocks, one module per format;
* :mod:`preprocess.steps.csc`: COO to CSC by an external bucketed counting sort (:func:`build_csc`);
* :mod:`preprocess.dask`: the Dask variants of the steps, chosen per job by
  :mod:`preprocess.jobs.variants` (:func:`build_csc` and :func:`coo_to_csc` here take ``dask=``);
* :mod:`preprocess.jobs.job`: resumable jobs (manifest, declared steps, ``--force``, ``--dry-run``);
* :mod:`preprocess.jobs.spec` / :mod:`preprocess.jobs.spec_steps`: dataset spec files, parsed / run;
* :mod:`preprocess.cli`: the ``featurestore preprocess ...`` commands.
"""

from preprocess.jobs.variants import build_csc, coo_to_csc
from preprocess.sources import (EdgeSource, concat, from_arrays, from_csv, from_npy,
                                from_npy_pair, from_parquet, open_edges)
from preprocess.steps.csc import plan_csc, reverse_etype
from preprocess.errors import *  # noqa: F401,F403
from preprocess.errors import __all__ as _errors_all
from preprocess.jobs.job import Job, Step, StepContext, StepDef
from preprocess.steps.memory import PeakMemory, parse_size


from featurestore.moved import alias_modules as _alias_modules  # noqa: E402

# the 0.1 layout's module paths, importable until 0.3 (README, "Layout")
_alias_modules("preprocess", {
    "csc": "preprocess.steps.csc", "dask_features": "preprocess.dask.features",
    "dask_renumber": "preprocess.dask.renumber", "dask_run": "preprocess.dask.run",
    "diskmap": "preprocess.steps.diskmap", "edges": "preprocess.sources",
    "edges_job": "preprocess.jobs.edges", "features": "preprocess.steps.features",
    "idcheck": "preprocess.steps.idcheck", "job": "preprocess.jobs.job",
    "memory": "preprocess.steps.memory", "paths": "preprocess.jobs.paths",
    "remote": "preprocess.sources.remote", "renumber": "preprocess.steps.renumber",
    "spec": "preprocess.jobs.spec", "spec_run": "preprocess.jobs.spec_steps",
})

__all__ = ["EdgeSource", "from_arrays", "from_npy", "from_npy_pair", "from_parquet", "from_csv",
           "concat", "open_edges", "build_csc", "coo_to_csc", "plan_csc", "reverse_etype", "Job",
           "Step", "StepDef", "StepContext", "PeakMemory", "parse_size", *_errors_all]
