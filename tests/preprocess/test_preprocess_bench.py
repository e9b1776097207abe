"""Smoke test of ``python -m benchmarks.preprocess_bench`` at tiny sizes."""

from __future__ import annotations

import json

from benchmarks import preprocess_bench


def test_edges_and_features_bench(tmp_path, capsys):
    out = tmp_path / "e.json"
    assert preprocess_bench.main(["edges", "--edges", "20k", "--nodes", "1k", "--repeat", "1",
                                  "--memory", "32MiB", "--scipy", "--verify", "--workdir",
                                  str(tmp_path), "--json", str(out), "--delete-inputs"]) == 0
    res = json.loads(out.read_text())
    assert res["ours"][0]["edges"] == 20_000 and "speed_ratio" in res and "memory_ratio" in res
    assert "verified" in capsys.readouterr().out
    assert preprocess_bench.main(["features", "--rows", "5k", "--dim", "8", "--repeat", "1",
                                  "--memory", "32MiB", "--permute", "--verify", "--cold",
                                  "--workdir", str(tmp_path), "--delete-inputs"]) == 0
    assert "verified" in capsys.readouterr().out
    assert not any(p.suffix == ".npy" for p in tmp_path.iterdir())
