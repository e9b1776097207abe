"""Remote row gathers: local disk vs an HTTP server vs an S3 server, rows/s and bytes.

One synthetic store (:func:`benchmarks.workload.synthetic_store`, MAG240M's fp16 x 768 rows by
default) is read three ways: from the local disk (``LocalRows``, warm page cache), from a
loopback HTTP server with Range support and from moto's S3 server on loopback (both
``RangeRows``: row byte ranges, coalesced, ``io_threads`` requests in flight). For each:
rows/s of sparse batches (``batch`` random ids, 1% of the rows by default), the bytes fetched
per byte the rows needed, and requests per batch. The chunk reader that remote arrays used
before (zarr inner chunks of ~1 MiB, ``ZarrRows``) is measured on the HTTP server for the
same batches, its bytes counted by the server. A latency-injected run (``latency_ms`` per
request, :class:`featurestore.testing.loopback.LatencyFileSystem`) counts the round trips of a
``latency_rows``-row sparse gather against requests / concurrency.

Loopback servers measure the protocol and the client's work, not a network: the figures
bound what a real object store can give from one process (requests/s, not bandwidth). moto
reads the whole object for every range request (``key.value``), so its S3 target runs on a
smaller copy of the store (``s3_nodes``) with the same share of rows per batch.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass

import fsspec
import numpy as np

import featurestore as fs
from featurestore.rows import RangeRows, ZarrRows
from featurestore.testing.loopback import LatencyFileSystem, serve_http, serve_s3

from benchmarks.options import opt
from benchmarks.report import has, machine_info, md_table, timed_trials
from benchmarks.workload import LAYOUTS, synthetic_store

log = logging.getLogger(__name__)

__all__ = ["RemoteOptions", "run", "markdown"]

FEATURE_KEY = "nodes/node/features/feat"


@dataclass(frozen=True)
class RemoteOptions:
    """Options of :func:`run` (each field is a ``--flag`` of ``featurestore bench remote``)."""

    workdir: str = opt("bench-data/remote", "directory of the synthetic store")
    nodes: int = opt(50_000, "nodes of the synthetic store")
    edges: int = opt(200_000, "edges of the synthetic store")
    layout: str = opt("fp16x768", "feature layout", choices=tuple(LAYOUTS))
    batch: int = opt(500, "random ids per gather (500 of 50k: a 1% sparse batch)")
    trials: int = opt(5, "timed gathers per target (after one untimed)")
    io_threads: int = opt(32, "requests in flight of a remote gather")
    latency_ms: float = opt(20.0, "latency injected per request in the round-trip run")
    latency_rows: int = opt(10_000, "rows of the latency-injected sparse gather")
    s3: bool = opt(True, "include moto's S3 server (needs s3fs and moto[server])")
    s3_nodes: int = opt(5_000, "nodes of the store copied to S3 (moto reads a whole object "
                               "for every range request: keep it small)")
    zarr_baseline: bool = opt(True, "also time the zarr chunk reader on the HTTP server")


def _batches(n: int, k: int, count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.choice(n, k, replace=False) for _ in range(count)]


def _measure(F, batches: list[np.ndarray], warmup: int = 1) -> dict:
    """Rows/s of gathers of ``batches`` (one per trial) and the reader's byte counts."""
    it = iter(batches)
    out = np.empty((len(batches[0]),) + F.shape[1:], F.dtype)
    before = F.reader.stats()
    t = timed_trials(lambda _: F.gather(next(it), out=out), len(batches) - warmup, warmup)
    after = F.reader.stats()
    rec = {"median_ms": round(1e3 * t.median, 2), "p95_ms": round(1e3 * t.p95, 2),
           "rows_per_s": round(len(batches[0]) / t.median)}
    if "bytes_fetched" in after:
        fetched = after["bytes_fetched"] - before["bytes_fetched"]
        needed = after["bytes_needed"] - before["bytes_needed"]
        rec.update(bytes_per_byte_needed=round(fetched / needed, 3),
                   requests_per_batch=round((after["requests"] - before["requests"])
                                            / len(batches), 1))
    return rec


def _zarr_baseline(url: str, key: str, batches, counts: dict, io_threads: int) -> dict:
    """The chunk reader on the HTTP server (no decoded-chunk cache), bytes counted there."""
    import zarr

    from featurestore.remote.location import Location

    z = zarr.open_array(store=Location(url).zarr_store(read_only=True), path=key, mode="r")
    rows = ZarrRows(z, cache_bytes=0, io_threads=io_threads, name=f"{url}/{key}")
    rb = rows.row_bytes
    out = np.empty((len(batches[0]),) + rows.shape[1:], rows.dtype)
    counts.clear()
    t = timed_trials(lambda ids: rows.gather(ids, out), 1, 0, setup=lambda: batches[0])
    rows.close()
    needed = np.unique(batches[0]).size * rb
    return {"median_ms": round(1e3 * t.median, 2), "rows_per_s": round(len(batches[0]) / t.median),
            "bytes_per_byte_needed": round(counts.get("bytes", 0) / needed, 1),
            "requests_per_batch": counts.get("requests", 0)}


def _latency_run(path: str, key: str, o: RemoteOptions) -> dict:
    """A sparse gather of ``latency_rows`` rows (every third row) with injected latency."""
    with fs.open_store(path) as s:
        s.features()
        lay = s.row_reader(key).layout
        file = s.row_reader(key).path
    slow = LatencyFileSystem(fsspec.filesystem("file"), latency_s=o.latency_ms / 1e3)
    r = RangeRows(slow, file, lay, concurrency=o.io_threads)
    n = min(o.latency_rows, lay.shape[0] // 3)
    ids = np.random.default_rng(1).permutation(np.arange(n) * 3)
    out = np.empty((n,) + lay.shape[1:], lay.dtype)
    t = time.perf_counter()
    r.gather(ids, out)
    dt = time.perf_counter() - t
    r.close()
    ideal = -(-slow.requests // o.io_threads)
    return {"rows": n, "latency_ms": o.latency_ms, "concurrency": o.io_threads,
            "requests": slow.requests, "round_trips": slow.round_trips,
            "requests_over_concurrency": ideal, "seconds": round(dt, 2),
            "rows_per_s": round(n / dt)}


def _s3_target(o: RemoteOptions) -> dict:
    """A ``s3_nodes`` store copied to moto's S3 server on loopback, then gathered from (the
    same share of rows per batch as the other targets)."""
    import s3fs

    opts, stop = serve_s3("bench", key="bench", secret="bench")
    try:
        s3 = s3fs.S3FileSystem(**opts)
        path = synthetic_store(o.workdir, o.s3_nodes, 4 * o.s3_nodes, o.layout)
        k = max(1, round(o.batch * o.s3_nodes / o.nodes))
        batches = _batches(o.s3_nodes, k, o.trials + 1)
        t = time.perf_counter()
        s3.put(path, "bench/store", recursive=True)
        log.info("copied the store to S3 in %.1f s", time.perf_counter() - t)
        with fs.open_store("s3://bench/store", storage_options=opts,
                           io_threads=o.io_threads) as st:
            F = st.features()
            assert isinstance(F.reader, RangeRows)
            return {"nodes": o.s3_nodes, "batch": k, **_measure(F, batches)}
    finally:
        stop()


def run(options: RemoteOptions | None = None, **overrides) -> dict:
    """Measure local vs HTTP vs S3-server gathers; return the JSON record.

    Parameters
    ----------
    options
        The options (defaults when ``None``).
    **overrides
        Fields of :class:`RemoteOptions` to replace.

    Returns
    -------
    dict
        ``options``, ``row_bytes``, and per target (``local``, ``http``,
        ``http_zarr_chunks``; ``s3`` on a ``s3_nodes`` store) ``rows_per_s``, ``median_ms``,
        ``p95_ms``, ``bytes_per_byte_needed`` and ``requests_per_batch``; ``latency``: the
        round trips of the latency-injected gather against requests / concurrency.
    """
    o = options or RemoteOptions()
    if overrides:
        o = RemoteOptions(**{**asdict(o), **overrides})
    path = synthetic_store(o.workdir, o.nodes, o.edges, o.layout)
    batches = _batches(o.nodes, o.batch, o.trials + 1)
    res: dict = {"benchmark": "remote", "machine": machine_info(os.path.abspath(o.workdir)),
                 "options": asdict(o)}
    with fs.open_store(path, io_threads=o.io_threads) as s:
        F = s.features()
        res["row_bytes"] = F.row_bytes
        res["local"] = _measure(F, batches)
    served = os.path.join(o.workdir, "served")
    os.makedirs(served, exist_ok=True)
    link = os.path.join(served, "store")
    if not os.path.islink(link):
        if os.path.exists(link):
            shutil.rmtree(link)
        os.symlink(os.path.abspath(path), link)
    counts: dict = {}
    url, stop = serve_http(served, counts)
    try:
        with fs.open_store(f"{url}/store", io_threads=o.io_threads) as s:
            res["http"] = _measure(s.features(), batches)
        if o.zarr_baseline:
            res["http_zarr_chunks"] = _zarr_baseline(f"{url}/store", FEATURE_KEY, batches,
                                                     counts, o.io_threads)
    finally:
        stop()
    if o.s3 and has("s3fs") and has("moto"):
        res["s3"] = _s3_target(o)
    res["latency"] = _latency_run(path, FEATURE_KEY, o)
    return res


def markdown(report: dict) -> str:
    """Local vs HTTP vs S3-server gathers, and the latency-injected round trips."""
    o, lat = report["options"], report["latency"]
    rows = [[t, f"{r['rows_per_s']:,}", r["median_ms"], r["p95_ms"],
             f"{r['bytes_per_byte_needed']:.2f}x" if "bytes_per_byte_needed" in r else "-",
             r.get("requests_per_batch", "-")]
            for t, r in ((t, report[t]) for t in ("local", "http", "http_zarr_chunks", "s3")
                         if t in report)]
    return (f"{o['batch']} random rows of {o['nodes']:,} per gather ({report['row_bytes']} B "
            f"rows), {o['io_threads']} requests in flight.\n\n" + md_table(
                ["target", "rows/s", "median ms", "p95 ms", "bytes fetched / needed",
                 "requests / gather"], rows) +
            f"\n\n{lat['rows']:,} sparse rows at {lat['latency_ms']:g} ms per request: "
            f"{lat['requests']} requests in {lat['round_trips']} round trips (requests / "
            f"concurrency = {lat['requests_over_concurrency']}), {lat['seconds']} s.\n")


if __name__ == "__main__":  # a quick look: python -m benchmarks.remote_bench
    import json

    logging.basicConfig(level=logging.INFO)
    print(json.dumps(run(), indent=1))
