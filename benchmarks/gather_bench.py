"""Random row gathers: this store against ``np.memmap`` fancy indexing and zarr-python.

For each row layout (MAG240M's fp16 x 768, papers100M's fp32 x 128) and batch (dense: 100k
ids, sparse: 30k ids, of 4M rows by default), gathers the same ids, warm (page cache
filled) and cold (every mapping closed and the file's pages evicted before each trial), by
three read paths on the same file: ``Store.features().gather``, ``np.memmap(...)[ids]`` and
zarr's ``get_orthogonal_selection``. Medians of ``trials`` after a warm-up; the cold gather
is set against the device's own random-read limit for the pages the ids touch.

    python -m benchmarks.gather_bench --workdir /data/bench --rows 4000000
    featurestore bench gather --workdir /data/bench
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import statistics
import sys
import time

import numpy as np

import featurestore as fs
from benchmarks.device import device_limits, evict, pages_touched

log = logging.getLogger(__name__)

LAYOUTS = {"fp16x768": (np.float16, 768), "fp32x128": (np.float32, 128)}


def make_store(workdir: str, layout: str, rows: int, seed: int = 0) -> str:
    """A one-feature store of random rows (reused when it already exists)."""
    dtype, dim = LAYOUTS[layout]
    path = os.path.join(workdir, f"gather-{layout}-{rows}")
    try:
        s = fs.open_store(path)
        ok = s.features().shape == (rows, dim)
        s.close()
        if ok:
            return path
    except fs.FeatureStoreError:
        pass
    log.info("writing %s: %d x %d %s", path, rows, dim, np.dtype(dtype).name)
    rng = np.random.default_rng(seed)
    block = max(1, (64 << 20) // (dim * 4))
    w = fs.create_store(path, mode="w")
    w.add_node_type("n", rows)
    w.add_features("n", "feat", (rng.random((min(block, rows - lo), dim), dtype=np.float32)
                                 for lo in range(0, rows, block)), dtype=dtype, row_shape=(dim,))
    w.commit()
    return path


def _shard_file(path: str) -> str:
    return os.path.join(path, "nodes", "n", "features", "feat", "c", "0", "0")


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _median_trials(fn, trials: int, cold: bool, file: str, setup=None, teardown=None):
    times = []
    for _ in range(trials):
        state = None
        if cold:
            gc.collect()
            evict(file)
        if setup is not None:
            state = setup()
        times.append(_time(lambda: fn(state)))
        if teardown is not None:
            teardown(state)
    return statistics.median(times), times


def bench_case(path: str, batch: int, trials: int, io_threads: int, zarr_on: bool,
               iops_qd32: float | None, seed: int = 1) -> list[dict]:
    import zarr

    store = fs.open_store(path, io_threads=io_threads)
    F = store.features()
    rows, row_bytes, dtype, shape = F.shape[0], F.row_bytes, F.dtype, F.shape
    store.close()
    file = _shard_file(path)
    rng = np.random.default_rng(seed)
    ids = rng.choice(rows, batch, replace=False)  # a training batch: unsorted, in random order
    pages = pages_touched(ids, row_bytes)
    gb = batch * row_bytes / 1e9

    # the three read paths, each opened fresh in setup() so that cold trials are honest
    def ours_setup():
        return fs.open_store(path, io_threads=io_threads)

    def ours(s):
        s.features().gather(ids)

    def ours_close(s):
        s.close()

    def mm_setup():
        return np.memmap(file, dtype=dtype, mode="r", shape=shape)

    def mm(m):
        np.asarray(m[ids])

    def z_setup():
        return zarr.open_array(os.path.join(path, "nodes/n/features/feat"), mode="r")

    def zr(z):
        z.get_orthogonal_selection((ids, slice(None)))

    # correctness first: all three agree
    s = ours_setup()
    ref = mm_setup()[ids]
    assert np.array_equal(s.features().gather(ids), ref)
    if zarr_on:
        assert np.array_equal(z_setup().get_orthogonal_selection((ids, slice(None))), ref)
    s.close()
    del ref

    methods = [("featurestore", ours_setup, ours, ours_close), ("np.memmap", mm_setup, mm, None)]
    if zarr_on:
        methods.append(("zarr oindex", z_setup, zr, None))
    out = []
    for cache in ("warm", "cold"):
        for name, setup, fn, teardown in methods:
            # zarr takes a minute per multi-GB gather: one trial (still the same ids, same run)
            n = trials if name != "zarr oindex" else 1
            if cache == "warm":  # fill the page cache and keep one reader open, as training does
                st = setup()
                if name != "zarr oindex":  # zarr's pages are warm from the correctness check
                    for _ in range(3):  # page tables and the allocator's free lists settle too
                        fn(st)
                    n = max(n, 7)
                t, all_t = _median_trials(lambda _: fn(st), n, False, file)
                if teardown:
                    teardown(st)
            else:
                t, all_t = _median_trials(fn, n, True, file, setup, teardown)
            rec = {"layout": f"{np.dtype(dtype).name} x {shape[1]}", "rows": rows,
                   "batch": batch, "density": batch / rows, "cache": cache, "method": name,
                   "seconds": t, "trials": all_t, "rows_per_s": batch / t, "GBps": gb / t,
                   "pages_touched": pages}
            if cache == "cold" and iops_qd32:
                rec["device_limit_s"] = pages / iops_qd32
                rec["share_of_device_limit"] = rec["device_limit_s"] / t
            out.append(rec)
            log.info("%s %s batch=%d %-12s %.4f s", rec["layout"], cache, batch, name, t)
    for rec in out:  # ratios against the peers measured in the same run
        mine = [r for r in out if r["cache"] == rec["cache"] and r["method"] == "featurestore"][0]
        rec["speedup_of_featurestore"] = rec["seconds"] / mine["seconds"]
    return out


def run(workdir: str, rows: int = 4_000_000, trials: int = 3, io_threads: int = 32,
        batches=(("dense", 100_000), ("sparse", 30_000)), layouts=tuple(LAYOUTS),
        zarr_on: bool = True, device_seconds: float = 5.0) -> dict:
    os.makedirs(workdir, exist_ok=True)
    results, devices = [], {}
    for layout in layouts:
        path = make_store(workdir, layout, rows)
        file = _shard_file(path)
        if device_seconds > 0 and os.path.getsize(file) >= 64 << 20:
            devices[layout] = device_limits(file, seconds=device_seconds)
        iops = devices.get(layout, {}).get("randread_4k_qd32_iops")
        for label, batch in batches:
            for rec in bench_case(path, min(batch, rows), trials, io_threads, zarr_on, iops):
                rec["batch_kind"] = label
                results.append(rec)
    return {"benchmark": "gather", "machine": _machine(), "options": {
        "rows": rows, "trials": trials, "io_threads": io_threads, "workdir": workdir},
        "device": devices, "results": results}


def _machine() -> dict:
    import numba
    import zarr

    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "numpy": np.__version__, "numba": numba.__version__,
            "zarr": zarr.__version__, "featurestore": fs.__version__,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def table(report: dict) -> str:
    """A markdown table of a report."""
    lines = ["| row layout | batch | cache | read path | median s | rows/s | GB/s | "
             "featurestore speed-up | share of device limit |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        share = f"{r['share_of_device_limit']:.0%}" if "share_of_device_limit" in r else ""
        lines.append(
            f"| {r['layout']} | {r['batch']:,} of {r['rows'] / 1e6:g}M | {r['cache']} | "
            f"{r['method']} | {r['seconds']:.4f} | {r['rows_per_s']:,.0f} | {r['GBps']:.2f} | "
            f"{r['speedup_of_featurestore']:.1f}x | {share} |")
    for layout, d in report["device"].items():
        lines.append(f"\nDevice ({d['tool']}, on the {layout} file): sequential "
                     f"{d['seq_read_GBps']:.2f} GB/s, random 4 KiB "
                     f"{d['randread_4k_qd1_iops']:,.0f} IOPS at QD1, "
                     f"{d['randread_4k_qd32_iops']:,.0f} IOPS at QD32.")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", default="bench-data", help="where the feature stores are made")
    p.add_argument("--rows", type=float, default=4e6, help="rows per feature array")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--io-threads", type=int, default=32)
    p.add_argument("--no-zarr", action="store_true", help="skip zarr's get_orthogonal_selection")
    p.add_argument("--device-seconds", type=float, default=5.0,
                   help="seconds per device probe (0: skip)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    p.add_argument("--json", help="write the report as JSON here")


def main_args(args) -> int:
    rows, batches, trials = int(args.rows), (("dense", 100_000), ("sparse", 30_000)), args.trials
    if args.quick:
        rows, batches, trials = 20_000, (("dense", 2_000), ("sparse", 300)), 1
    report = run(args.workdir, rows=rows, trials=trials, io_threads=args.io_threads,
                 batches=batches, zarr_on=not args.no_zarr,
                 device_seconds=0 if args.quick else args.device_seconds)
    print(table(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    return main_args(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
