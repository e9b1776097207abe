"""Smoke run of the gather benchmark on a tiny store, so the benchmark code cannot rot."""

from __future__ import annotations

import json

from featurestore.cli import main as cli_main
from benchmarks.device import pages_touched

import numpy as np


def test_pages_touched_brute_force():
    rng = np.random.default_rng(0)
    for row_bytes in (512, 1536, 6000, 10000):
        ids = rng.integers(0, 5000, 300)
        pages = set()
        for r in np.unique(ids):
            pages.update(range(r * row_bytes // 4096, (r * row_bytes + row_bytes - 1) // 4096 + 1))
        assert pages_touched(ids, row_bytes) == len(pages)


def test_bench_gather_quick(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert cli_main(["bench", "gather", "--quick", "--workdir", str(tmp_path / "w"),
                     "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    methods = {(r["layout"], r["cache"], r["batch_kind"], r["method"]) for r in report["results"]}
    assert len(methods) == 2 * 2 * 2 * 3  # layouts x caches x batches x read paths
    assert all(r["seconds"] > 0 for r in report["results"])
    assert "| featurestore |" in capsys.readouterr().out
