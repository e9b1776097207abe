"""``bench gather``: row gathers by batch size, row size and reads in flight, warm and cold.

The same random, unsorted ids through ``Store.features().gather``, ``np.memmap(...)[ids]`` and,
at one batch size, zarr-python's ``get_orthogonal_selection``: warm keeps the reader open over
the page cache, cold closes every mapping and evicts the file before each trial. Cold gathers
are set against the device's random 4 KiB limit (QD1 and QD32) for the pages the ids touch;
docs/benchmarks.md ("How to read the gather figures against the device") explains the columns.
"""

from __future__ import annotations

import gc
import logging
import os
from dataclasses import asdict, dataclass, replace

import numba
import numpy as np

import featurestore as fs
from featurestore.device import device_limits, evict, pages_touched

from benchmarks.options import opt
from benchmarks.report import Timing, machine_info, timed_trials
from benchmarks.workload import LAYOUTS, synthetic_store

log = logging.getLogger(__name__)

BATCHES = (1_000, 10_000, 30_000, 100_000, 200_000)


@dataclass(frozen=True)
class GatherOptions:
    """Row gathers vs np.memmap and zarr: batch sizes, threads, warm/cold."""

    workdir: str = opt("bench-data", "where the synthetic stores are made")
    rows: int = opt(1_210_000, "rows of each synthetic store", size="gather_rows")
    store: str | None = opt(None, "sweep this local store's feature array instead")
    ntype: str | None = opt(None, "node type of --store (default: its only one)")
    feature: str = opt("feat", "feature name of --store")
    batch_sizes: tuple[int, ...] = opt(BATCHES, "ids per gather", size="gather_batches")
    thread_counts: tuple[int, ...] = opt((1, 4, 16, 32), "reads in flight of the cold sweep",
                                         size="thread_counts")
    thread_batch: int = opt(5_000, "ids per gather of the thread sweep", size="thread_batch")
    trials: int = opt(3, "trials per measurement", size="trials")
    io_threads: int = opt(32, "reads in flight of the batch sweep")
    zarr: bool = opt(True, "time zarr's get_orthogonal_selection at --zarr-batch")
    zarr_batch: int = opt(10_000, "the batch size zarr is timed at", size="zarr_batch")
    device_seconds: float = opt(3.0, "seconds per device probe (0: none)", size="device_seconds")


class GatherTarget:
    """One feature array of a local store: where its shard file is and how its rows look."""

    def __init__(self, path: str, ntype: str | None = None, feature: str = "feat"):
        with fs.open_store(path) as s:
            ntype = s.resolve_ntype(ntype)
            F = s.features(ntype, feature)
            file = getattr(F.reader, "path", None)  # LocalRows: the shard file
            if not (F.reader.is_local and file and os.path.isfile(file)):
                raise fs.FeatureStoreError(
                    f"Expected an uncompressed local feature array for a gather benchmark at "
                    f"{path} ({ntype}/{feature}). Got a {type(F.reader).__name__} read path "
                    f"instead (remote or compressed).")
            self.file = file
            self.shape, self.dtype, self.row_bytes = F.shape, F.dtype, F.row_bytes
        self.path, self.ntype, self.feature = path, ntype, feature
        self.layout = f"{np.dtype(self.dtype).name} x {self.shape[1] if len(self.shape) > 1 else 1}"

    def open(self, io_threads: int = 32):
        """The store, opened afresh."""
        return fs.open_store(self.path, io_threads=io_threads)

    def gather(self, store, ids: np.ndarray, **kw) -> np.ndarray:
        """The rows ``ids`` of the benchmarked array of an open ``store``."""
        return store.features(self.ntype, self.feature).gather(ids, **kw)

    def memmap(self):
        """The shard file as ``np.memmap`` (the first peer)."""
        return np.memmap(self.file, dtype=self.dtype, mode="r", shape=self.shape)

    def zarr_array(self):
        """The array opened by zarr-python (the second peer)."""
        import zarr

        return zarr.open_array(os.path.join(self.path, "nodes", self.ntype, "features",
                                            self.feature), mode="r")

    def evict(self) -> None:
        """Collect dropped mappings and evict the shard file's pages (a cold trial)."""
        gc.collect()
        evict(self.file)


def _methods(t: GatherTarget, ids: np.ndarray, io_threads: int, zarr_on: bool):
    """``(name, setup, gather, teardown)`` of every read path."""
    out = [("featurestore", lambda: t.open(io_threads), lambda s: t.gather(s, ids),
            lambda s: s.close()), ("np.memmap", t.memmap, lambda m: np.asarray(m[ids]), None)]
    if zarr_on:
        out.append(("zarr oindex", t.zarr_array,
                    lambda z: z.get_orthogonal_selection((ids, slice(None))), None))
    return out


def _record(t: GatherTarget, method: str, cache: str, batch: int, timing: Timing,
            pages: int, limits: dict | None, **extra) -> dict:
    sec = timing.median
    rec = {"layout": t.layout, "row_bytes": t.row_bytes, "rows": t.shape[0], "batch": batch,
           "density": batch / t.shape[0], "cache": cache, "method": method, "seconds": sec,
           "p95_seconds": timing.p95, "trials": list(timing.times), "rows_per_s": batch / sec,
           "GBps": batch * t.row_bytes / sec / 1e9, "pages_touched": pages, **extra}
    if cache == "cold" and limits and limits.get("randread_4k_qd32_iops"):
        rec["device_limit_s"] = pages / limits["randread_4k_qd32_iops"]
        rec["share_of_device_limit"] = rec["device_limit_s"] / sec
        # the same pages read sequentially: the bound that dense batches (long coalesced runs
        # of rows) approach, where the random 4 KiB limit is too pessimistic
        if limits.get("seq_read_GBps"):
            rec["device_seq_limit_s"] = pages * 4096 / (limits["seq_read_GBps"] * 1e9)
    return rec


def _check_peers_agree(t: GatherTarget, ids: np.ndarray, io_threads: int, zarr_on: bool) -> None:
    with t.open(io_threads) as s:
        ref = t.gather(s, ids)
    if not np.array_equal(ref, np.asarray(t.memmap()[ids])):
        raise AssertionError(f"np.memmap and featurestore disagree on {t.file}")
    if zarr_on and not np.array_equal(
            ref, t.zarr_array().get_orthogonal_selection((ids, slice(None)))):
        raise AssertionError(f"zarr and featurestore disagree on {t.file}")


def batch_sweep(t: GatherTarget, o: GatherOptions, limits: dict | None = None,
                seed: int = 1) -> list[dict]:
    """Warm and cold gathers of each batch size by every read path (zarr at one size)."""
    out = []
    rng = np.random.default_rng(seed)
    for batch in o.batch_sizes:
        batch = min(int(batch), t.shape[0])
        ids = rng.choice(t.shape[0], batch, replace=False)
        pages = pages_touched(ids, t.row_bytes)
        zarr_on = o.zarr and batch == min(o.zarr_batch, t.shape[0])
        _check_peers_agree(t, ids, o.io_threads, zarr_on)  # correctness first
        recs = []
        for cache in ("warm", "cold"):
            for name, setup, fn, teardown in _methods(t, ids, o.io_threads, zarr_on):
                slow = name == "zarr oindex"  # zarr: seconds to minutes a gather, one trial
                cold = cache == "cold"
                timing = timed_trials(fn, 1 if slow else o.trials, 0 if slow or cold else 1,
                                      setup, teardown, t.evict, fresh=cold)
                recs.append(_record(t, name, cache, batch, timing, pages, limits,
                                    io_threads=o.io_threads))
                log.info("gather %s %s batch=%d %-12s %.4f s", t.layout, cache, batch, name,
                         timing.median)
        for r in recs:  # ratios against the peers measured in the same run
            mine = next(x for x in recs
                        if x["cache"] == r["cache"] and x["method"] == "featurestore")
            r["speedup_of_featurestore"] = r["seconds"] / mine["seconds"]
        out += recs
    return out


def thread_sweep(t: GatherTarget, o: GatherOptions, limits: dict | None = None,
                 seed: int = 2) -> list[dict]:
    """Cold gathers with 1..64 reads in flight; warm gathers with 1..cpus numba threads."""
    batch = min(o.thread_batch, t.shape[0])
    ids = np.random.default_rng(seed).choice(t.shape[0], batch, replace=False)
    pages = pages_touched(ids, t.row_bytes)
    out = []
    for k in o.thread_counts:
        timing = timed_trials(lambda s: t.gather(s, ids, read_path="pread"), o.trials,
                              0, lambda k=k: t.open(k), lambda s: s.close(), t.evict, fresh=True)
        rec = _record(t, "featurestore", "cold", batch, timing, pages, limits, io_threads=k,
                      sweep="io_threads")
        if limits and limits.get("randread_4k_qd1_iops"):
            rec["device_limit_qd1_s"] = pages / limits["randread_4k_qd1_iops"]
        out.append(rec)
        log.info("gather %s cold io_threads=%d %.4f s", t.layout, k, rec["seconds"])
    before = numba.get_num_threads()
    try:
        for k in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(k)
            timing = timed_trials(lambda s: t.gather(s, ids, read_path="mmap"),
                                  o.trials, 1, t.open, lambda s: s.close())
            out.append(_record(t, "featurestore", "warm", batch, timing, pages, limits,
                               numba_threads=k, sweep="numba_threads"))
    finally:
        numba.set_num_threads(before)
    return out


def run(o: GatherOptions, device: dict | None = None, use_fio: bool | None = None) -> dict:
    """The whole sweep; a report dict (see :mod:`benchmarks.report`).

    ``device``: limits already measured on the same file system (``bench device``'s result);
    else each target's file is probed for ``o.device_seconds`` per probe (0: no probe).
    """
    if o.store:
        targets = [GatherTarget(o.store, o.ntype, o.feature)]
    else:
        targets = [GatherTarget(synthetic_store(o.workdir, o.rows, o.rows, lay))
                   for lay in LAYOUTS]
    results, devices = [], {}
    for t in targets:
        limits = None
        if device:
            limits = devices[t.layout] = device
        elif o.device_seconds > 0:
            limits = devices[t.layout] = device_limits(t.file, seconds=o.device_seconds,
                                                       use_fio=use_fio)
        results += batch_sweep(t, o, limits)
        if o.thread_counts:
            results += thread_sweep(t, o, limits)
    opts = asdict(replace(o, workdir=os.path.abspath(o.workdir)))
    opts.update(stores=[t.path for t in targets], batches=list(o.batch_sizes),
                zarr_batch=o.zarr_batch if o.zarr else None,
                warmup="1 untimed gather before warm trials; cold trials evict first")
    return {"benchmark": "gather", "machine": machine_info(targets[0].path),
            "options": opts, "device": devices, "results": results}
