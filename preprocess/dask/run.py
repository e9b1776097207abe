"""Dask for the preprocessing jobs (``--dask ADDRESS`` or ``--dask local:N``), imported lazily.

A job given a ``distributed.Client`` runs the work of a step that scales with the data as
Dask tasks, and keeps its order, manifest and single store writer in the driver:

* the destination ranges of each CSC conversion (:func:`preprocess.steps.csc.coo_to_csc`): the
  driver reads the histogram (and spills the input once when there are many ranges), each
  task sorts one range in its own memory budget and leaves its slice of ``indices`` in the
  job's scratch directory, and the driver appends the slices in range order;
* the row blocks of a feature matrix (:mod:`preprocess.dask.features`);
* the degree counts and the renumbering of the edges of a spec job
  (:mod:`preprocess.dask.renumber`).

The store is byte for byte the single-process one. The scratch directory (inside a local
store, or ``--scratch DIR``) must be storage every worker sees: the same machine, or a shared
file system; :func:`check_shared_scratch` refuses a remote store without one.
"""

from __future__ import annotations

import contextlib
import logging
import os

from preprocess.errors import DaskNotInstalledError, PreprocessError

__all__ = ["dask_client", "check_shared_scratch"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def dask_client(address: str | None):
    """A ``distributed.Client`` for ``address`` (None: yield None, run in this process).

    ``local:N`` starts a ``LocalCluster`` of N single-threaded worker processes (closed on
    exit); anything else is a scheduler address (``tcp://host:8786``).
    """
    if not address:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError as e:
        raise DaskNotInstalledError(
            "Expected dask and distributed for --dask. Install them: "
            "pip install 'dask[distributed]' (or this package's [dask] extra).") from e
    cluster = None
    if address.startswith("local:"):
        try:
            n = int(address.split(":", 1)[1])
        except ValueError:
            n = 0
        if n < 1:
            raise PreprocessError(f"Expected --dask local:N with N >= 1 workers. "
                                  f"Got {address!r}.")
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(address)
    log.info("dask: %s", client)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def check_shared_scratch(store, scratch_dir, client, dry_run: bool = False) -> None:
    """Refuse a Dask run of a remote store without ``--scratch``: the tasks leave their files
    in the job's scratch directory, which every worker must see (the system's temp directory
    of the driver is not shared). Called before the job opens the store, so a refusal
    leaves the store as it was."""
    from featurestore.remote.location import Location

    if client is None or scratch_dir is not None or dry_run or Location(os.fspath(store)).is_local:
        return
    raise PreprocessError(
        f"Expected --scratch DIR (scratch_dir=) on storage every Dask worker sees for the "
        f"remote store {store}: the workers write their CSC slices and feature rows there. "
        "Nothing was written.")
