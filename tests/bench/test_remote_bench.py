"""benchmarks.remote_bench at a tiny size: every target reports, remote reads fetch about the
rows' bytes, the chunk reader fetches whole chunks, and round trips match requests/concurrency."""

from __future__ import annotations

import pytest

pytest.importorskip("aiohttp")


def test_remote_bench_reports_every_target(tmp_path):
    from benchmarks.remote_bench import run

    r = run(workdir=str(tmp_path), nodes=3000, edges=12000, batch=30, trials=2,
            latency_rows=600, latency_ms=2.0, io_threads=16, s3=False)
    assert r["row_bytes"] == 1536
    for target in ("local", "http", "http_zarr_chunks"):
        assert r[target]["rows_per_s"] > 0, target
    assert 1.0 <= r["http"]["bytes_per_byte_needed"] <= 2.0
    assert r["http_zarr_chunks"]["bytes_per_byte_needed"] > 10
    lat = r["latency"]
    assert lat["requests"] == lat["rows"] == 600
    ideal = lat["requests_over_concurrency"]
    assert ideal <= lat["round_trips"] <= ideal + 3
    assert "s3" not in r
