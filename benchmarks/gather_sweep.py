"""Gather sweeps: rows/s and GB/s against batch size, row size and thread count, warm and cold.

``featurestore bench gather --sweep`` (and ``bench all``) run this on the synthetic stores of
:mod:`benchmarks.gather_bench` or on any local store (``--store``, ``--ntype``, ``--feature``).
For each batch size (1k to 200k ids, random and unsorted, as a training batch asks them), it
times the same ids through ``Store.features().gather`` and ``np.memmap(...)[ids]`` (and once,
at one batch size, zarr-python's ``get_orthogonal_selection``), warm (page cache filled, the
reader kept open) and cold (every mapping closed and the file's pages evicted before each
trial). A cold gather is set against the device's random 4 KiB read limit at queue depth 32 for
the pages the ids touch (``share_of_device_limit`` = limit time / measured time; above 100% when
dense batches coalesce into long runs that the device serves faster than random 4 KiB reads, so
the time to read the same pages sequentially is given as well). The thread
sweep times the cold gather with 1 to 64 reads in flight (``io_threads``) against the device's
limits at queue depth 1 and 32, and the warm gather with 1..cpus numba threads.
"""

from __future__ import annotations

import gc
import logging
import os
import statistics
import time

import numba
import numpy as np

import featurestore as fs
from featurestore.gather import LocalRows

from .device import device_limits, evict, pages_touched
from .report import machine_info

log = logging.getLogger(__name__)

BATCHES = (1_000, 10_000, 30_000, 100_000, 200_000)
IO_THREADS = (1, 4, 16, 32, 64)


class GatherTarget:
    """One feature array of a local store: where its shard file is and how its rows look."""

    def __init__(self, path: str, ntype: str | None = None, feature: str = "feat"):
        with fs.open_store(path) as s:
            ntype = s.resolve_ntype(ntype)
            F = s.features(ntype, feature)
            if not isinstance(F.reader, LocalRows):
                raise fs.FeatureStoreError(
                    f"Expected an uncompressed local feature array for a gather benchmark at "
                    f"{path} ({ntype}/{feature}). Got a {type(F.reader).__name__} read path "
                    f"instead (remote or compressed).")
            self.file = F.reader.path
            self.shape, self.dtype, self.row_bytes = F.shape, F.dtype, F.row_bytes
        self.path, self.ntype, self.feature = path, ntype, feature
        self.layout = f"{np.dtype(self.dtype).name} x {self.shape[1] if len(self.shape) > 1 else 1}"

    def open(self, io_threads: int = 32):
        return fs.open_store(self.path, io_threads=io_threads)

    def features(self, store):
        return store.features(self.ntype, self.feature)

    def memmap(self):
        return np.memmap(self.file, dtype=self.dtype, mode="r", shape=self.shape)

    def zarr_array(self):
        import zarr

        return zarr.open_array(os.path.join(self.path, "nodes", self.ntype, "features",
                                            self.feature), mode="r")


def _cold(t: GatherTarget, setup, fn, teardown, trials: int) -> list[float]:
    """Each trial: close everything, evict the file, open afresh, time one gather."""
    times = []
    for _ in range(trials):
        gc.collect()
        evict(t.file)
        st = setup()
        t0 = time.perf_counter()
        fn(st)
        times.append(time.perf_counter() - t0)
        if teardown:
            teardown(st)
        del st
    return times


def _warm(setup, fn, teardown, trials: int, warmup: int = 1) -> list[float]:
    """Open once, gather ``warmup`` times untimed (fills the page cache), then time ``trials``."""
    st = setup()
    for _ in range(warmup):
        fn(st)
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        fn(st)
        times.append(time.perf_counter() - t0)
    if teardown:
        teardown(st)
    return times


def _methods(t: GatherTarget, ids: np.ndarray, io_threads: int, zarr_on: bool):
    def ours(s):
        t.features(s).gather(ids)

    out = [("featurestore", lambda: t.open(io_threads), ours, lambda s: s.close()),
           ("np.memmap", t.memmap, lambda m: np.asarray(m[ids]), None)]
    if zarr_on:
        out.append(("zarr oindex", t.zarr_array,
                    lambda z: z.get_orthogonal_selection((ids, slice(None))), None))
    return out


def _record(t: GatherTarget, method: str, cache: str, batch: int, times: list[float],
            pages: int, limits: dict | None, **extra) -> dict:
    sec = statistics.median(times)
    rec = {"layout": t.layout, "row_bytes": t.row_bytes, "rows": t.shape[0], "batch": batch,
           "density": batch / t.shape[0], "cache": cache, "method": method, "seconds": sec,
           "trials": times, "rows_per_s": batch / sec, "GBps": batch * t.row_bytes / sec / 1e9,
           "pages_touched": pages, **extra}
    if cache == "cold" and limits and limits.get("randread_4k_qd32_iops"):
        rec["device_limit_s"] = pages / limits["randread_4k_qd32_iops"]
        rec["share_of_device_limit"] = rec["device_limit_s"] / sec
        # the same pages read sequentially: the bound that dense batches (long coalesced runs
        # of rows) approach, where the random 4 KiB limit is too pessimistic
        if limits.get("seq_read_GBps"):
            rec["device_seq_limit_s"] = pages * 4096 / (limits["seq_read_GBps"] * 1e9)
    return rec


def batch_sweep(t: GatherTarget, batches=BATCHES, trials: int = 3, io_threads: int = 32,
                zarr_batch: int | None = 10_000, limits: dict | None = None,
                seed: int = 1) -> list[dict]:
    """Warm and cold gathers of each batch size by every read path (zarr at ``zarr_batch``)."""
    out = []
    rng = np.random.default_rng(seed)
    for batch in batches:
        batch = min(int(batch), t.shape[0])
        ids = rng.choice(t.shape[0], batch, replace=False)
        pages = pages_touched(ids, t.row_bytes)
        zarr_on = zarr_batch is not None and batch == min(zarr_batch, t.shape[0])
        # correctness first: every read path returns the same rows
        with t.open(io_threads) as s:
            ref = t.features(s).gather(ids)
        if not np.array_equal(ref, np.asarray(t.memmap()[ids])):
            raise AssertionError(f"np.memmap and featurestore disagree on {t.file}")
        if zarr_on and not np.array_equal(
                ref, t.zarr_array().get_orthogonal_selection((ids, slice(None)))):
            raise AssertionError(f"zarr and featurestore disagree on {t.file}")
        del ref
        recs = []
        for cache in ("warm", "cold"):
            for name, setup, fn, teardown in _methods(t, ids, io_threads, zarr_on):
                n = 1 if name == "zarr oindex" else trials  # zarr: seconds to minutes a gather
                times = (_warm(setup, fn, teardown, n, warmup=0 if name == "zarr oindex" else 1)
                         if cache == "warm" else _cold(t, setup, fn, teardown, n))
                recs.append(_record(t, name, cache, batch, times, pages, limits,
                                    io_threads=io_threads))
                log.info("gather %s %s batch=%d %-12s %.4f s", t.layout, cache, batch, name,
                         recs[-1]["seconds"])
        for r in recs:  # ratios against the peers measured in the same run
            mine = next(x for x in recs if x["cache"] == r["cache"] and x["method"] == "featurestore")
            r["speedup_of_featurestore"] = r["seconds"] / mine["seconds"]
        out += recs
    return out


def thread_sweep(t: GatherTarget, batch: int = 30_000, io_threads=IO_THREADS, trials: int = 3,
                 limits: dict | None = None, seed: int = 2) -> list[dict]:
    """Cold gathers with 1..64 reads in flight; warm gathers with 1..cpus numba threads."""
    rng = np.random.default_rng(seed)
    batch = min(batch, t.shape[0])
    ids = rng.choice(t.shape[0], batch, replace=False)
    pages = pages_touched(ids, t.row_bytes)
    out = []
    for k in io_threads:
        times = _cold(t, lambda: t.open(k), lambda s: t.features(s).gather(ids, read_path="pread"),
                      lambda s: s.close(), trials)
        rec = _record(t, "featurestore", "cold", batch, times, pages, limits, io_threads=k,
                      sweep="io_threads")
        if limits and limits.get("randread_4k_qd1_iops"):
            rec["device_limit_qd1_s"] = pages / limits["randread_4k_qd1_iops"]
        out.append(rec)
        log.info("gather %s cold io_threads=%d %.4f s", t.layout, k, rec["seconds"])
    before = numba.get_num_threads()
    try:
        for k in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(k)
            times = _warm(lambda: t.open(), lambda s: t.features(s).gather(ids, read_path="mmap"),
                          lambda s: s.close(), trials)
            out.append(_record(t, "featurestore", "warm", batch, times, pages, limits,
                               numba_threads=k, sweep="numba_threads"))
    finally:
        numba.set_num_threads(before)
    return out


def run(targets: list[GatherTarget], batches=BATCHES, trials: int = 3, io_threads: int = 32,
        thread_counts=IO_THREADS, thread_batch: int = 30_000, zarr_batch: int | None = 10_000,
        device_seconds: float = 3.0, use_fio: bool | None = None,
        device: dict | None = None) -> dict:
    """The whole sweep over ``targets``; a report dict (see :mod:`benchmarks.report`).

    ``device``: limits already measured on the same file system (``bench device``'s result);
    else each target's file is probed for ``device_seconds`` per probe (0: no probe).
    """
    results, devices = [], {}
    for t in targets:
        limits = None
        if device:
            limits = devices[t.layout] = device
        elif device_seconds > 0:
            limits = devices[t.layout] = device_limits(t.file, seconds=device_seconds,
                                                       use_fio=use_fio)
        results += batch_sweep(t, batches, trials, io_threads, zarr_batch, limits)
        if thread_counts:
            results += thread_sweep(t, thread_batch, thread_counts, trials, limits)
    return {"benchmark": "gather", "machine": machine_info(targets[0].path if targets else None),
            "options": {"stores": [t.path for t in targets], "batches": list(batches),
                        "trials": trials, "io_threads": io_threads,
                        "thread_counts": list(thread_counts or ()), "thread_batch": thread_batch,
                        "zarr_batch": zarr_batch, "device_seconds": device_seconds,
                        "warmup": "1 untimed gather before warm trials; cold trials evict first"},
            "device": devices, "results": results}
