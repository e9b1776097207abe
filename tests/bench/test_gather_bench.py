"""The gather benchmark on tiny stores, so the benchmark code cannot rot."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.device import pages_touched
from featurestore.cli import main as cli_main


def test_pages_touched_brute_force():
    rng = np.random.default_rng(0)
    for row_bytes in (512, 1536, 6000, 10000):
        ids = rng.integers(0, 5000, 300)
        pages = set()
        for r in np.unique(ids):
            pages.update(range(r * row_bytes // 4096, (r * row_bytes + row_bytes - 1) // 4096 + 1))
        assert pages_touched(ids, row_bytes) == len(pages)


def test_bench_gather_quick(tmp_path, capsys):
    """``--quick``: both synthetic layouts, every read path warm and cold, zarr at one batch."""
    out = tmp_path / "report.json"
    assert cli_main(["bench", "gather", "--quick", "--workdir", str(tmp_path / "w"),
                     "--out", str(tmp_path / "o"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    batch = [r for r in report["results"] if "sweep" not in r]
    got = {(r["layout"], r["cache"], r["batch"], r["method"]) for r in batch}
    layouts = {"float16 x 768", "float32 x 128"}
    want = {(lay, c, b, m) for lay in layouts for c in ("warm", "cold") for b in (1000, 3000)
            for m in ("featurestore", "np.memmap")}
    want |= {(lay, c, 1000, "zarr oindex") for lay in layouts for c in ("warm", "cold")}
    assert got == want
    for r in report["results"]:
        assert r["seconds"] > 0 and r["p95_seconds"] >= r["seconds"]
        assert r["rows_per_s"] == r["batch"] / r["seconds"]
    assert {r["io_threads"] for r in report["results"] if r.get("sweep") == "io_threads"} == {1, 8}
    assert "| featurestore |" in capsys.readouterr().out
