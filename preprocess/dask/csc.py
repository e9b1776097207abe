"""The CSC conversion's Dask variant: its histogram and its range sorts as Dask tasks.

The driver runs :func:`preprocess.steps.csc.coo_to_csc` as without Dask, with
:class:`DaskCscPasses` as its ``passes``:

* the histogram is one task per block of a ``.npy`` edge file (``block_edges`` edges, the
  plan's read block) and one per parquet or CSV file; each checks its ids and counts them per
  destination bucket, and the driver adds the counts in block order (the first bad block's
  error is the single-process one, same edge number). Sources that are not file-backed are
  counted in the driver (their arrays would travel with every task);
* with two or more destination ranges, each range is sorted by a task in its own memory
  budget (:func:`preprocess.steps.csc.sort_range_files`), which leaves its slice of
  ``indices`` and its counts in the job's scratch directory (storage every worker sees); the
  driver appends the slices in range order.

The store is byte for byte the single-process one.
"""

from __future__ import annotations

import os

import numpy as np

import preprocess.steps.csc as csc
from preprocess.progress import bar
from preprocess.sources.base import ArraySource, EdgeSource, ReversedSource, as_int64_ids
from preprocess.steps import kernels as K

__all__ = ["DaskCscPasses", "HIST_TASK_PREFIX"]

#: Dask key prefix of the histogram tasks (tests count them).
HIST_TASK_PREFIX = "csc-histogram"


class DaskCscPasses(csc.CscPasses):
    """:class:`~preprocess.steps.csc.CscPasses` as Dask tasks of ``client`` (a
    ``distributed.Client``); what cannot be cut into tasks runs in this process."""

    def __init__(self, client):
        self.client = client

    def histogram(self, source, plan, hist, drop_self_loops, progress, what):
        """One task per input block (see the module docstring); (edges, bytes read)."""
        tasks = block_tasks(source, plan.block_edges)
        if not tasks:
            return super().histogram(source, plan, hist, drop_self_loops, progress, what)
        return _histogram_dask(self.client, tasks, plan, hist, drop_self_loops, progress, what)

    def sorted_ranges(self, rs, counts, *, scratch, stats, progress, what):
        """One task per destination range when there are two or more."""
        kw = dict(scratch=scratch, stats=stats, progress=progress, what=what)
        if len(rs) <= 1:
            return super().sorted_ranges(rs, counts, **kw)
        return _iter_ranges_dask(self.client, rs, counts, **kw)


def block_tasks(source: EdgeSource, block_edges: int) -> list[tuple] | None:
    """``(part, lo, hi)`` per block of the histogram's Dask tasks (``lo`` None: the whole
    part, a parquet or CSV file); None when a part is not file-backed (its arrays would travel
    with every task)."""
    out = []
    for part in source.parts():
        if not part.inputs():
            return None
        inner = part.inner if isinstance(part, ReversedSource) else part
        if isinstance(inner, ArraySource):
            n = inner.num_edges
            out += [(part, lo, min(n, lo + block_edges)) for lo in range(0, n, block_edges)]
        else:
            out.append((part, None, None))
    return out


def _hist_task(part: EdgeSource, lo, hi, plan: csc.CscPlan, nh: int,
               drop_self_loops: bool) -> tuple[np.ndarray, int, int]:
    """One block's (or part's) histogram in a worker: (counts per bucket, edges, bytes read);
    an id out of range raises the single-process job's error (same edge number)."""
    hist = np.zeros(nh, np.int64)
    if lo is None:
        blocks, at = part.iter_blocks(plan.block_edges), 0
    else:
        inner = part.inner if isinstance(part, ReversedSource) else part
        s = as_int64_ids(inner.src[lo:hi], inner.name, "source", lo)
        d = as_int64_ids(inner.dst[lo:hi], inner.name, "destination", lo)
        blocks, at = iter([(d, s) if inner is not part else (s, d)]), lo
    edges = nbytes = 0
    for s, d in blocks:
        bad = K.histogram_block(s, d, plan.num_src, plan.num_dst, plan.hist_shift, hist,
                                drop_self_loops)
        if bad >= 0:
            csc.raise_out_of_range(part, s, d, bad, at, plan)
        at += s.shape[0]
        edges += s.shape[0]
        nbytes += s.nbytes + d.nbytes
    return hist, edges, nbytes


def _histogram_dask(client, tasks: list[tuple], plan: csc.CscPlan, hist: np.ndarray,
                    drop_self_loops: bool, progress: bool, what: str) -> tuple[int, int]:
    """The histogram pass with one Dask task per input block; the driver adds the counts
    (in block order, so the first bad block's error is the one raised)."""
    tag = os.urandom(4).hex()
    futures = [client.submit(_hist_task, part, lo, hi, plan, hist.shape[0], drop_self_loops,
                             key=f"{HIST_TASK_PREFIX}-{tag}-{i}", pure=False)
               for i, (part, lo, hi) in enumerate(tasks)]
    edges_in = nbytes = 0
    try:
        with bar(len(futures), f"{what}: histogram (dask)", progress, unit="block") as pb:
            for fut in futures:
                h, e, b = fut.result()
                hist += h
                edges_in += e
                nbytes += b
                pb.update(1)
    except BaseException:
        client.cancel(futures)
        raise
    return edges_in, nbytes


def _range_task(rs, r: int, scratch_dir: str, what: str) -> dict:
    """Sort range ``r`` in a worker (:func:`preprocess.steps.csc.sort_range_files`); the
    function's name is the tasks' Dask key."""
    return csc.sort_range_files(rs, r, scratch_dir, what)


def _iter_ranges_dask(client, rs, counts: np.ndarray, *, scratch,
                      stats: dict, progress: bool, what: str):
    """The range sorts as Dask tasks (``client``: a
    ``distributed.Client``); slices come back in range order, so the output is the same."""
    from distributed import as_completed

    scratch_dir = os.path.dirname(scratch.file("indices.bin"))
    futures = [client.submit(_range_task, rs, r, scratch_dir, what, pure=False)
               for r in range(len(rs))]
    with bar(len(rs), f"{what}: ranges (dask)", progress, unit="range") as pb:
        for _ in as_completed(futures):
            pb.update(1)
    for r, fut in enumerate(futures):
        res = fut.result()
        for k in ("bytes_read", "partition_seconds", "finish_seconds"):
            stats[k] += res[k]
        lo, hi = rs.dst_range(r)
        counts[lo + 1:hi + 1] = np.fromfile(res["counts"], dtype=np.int64)
        yield np.fromfile(res["indices"], dtype=rs.plan.index_dtype)
        os.remove(res["indices"])
        os.remove(res["counts"])
