"""Smoke test of the preprocessing benchmark (``featurestore bench preprocess``) at tiny sizes."""

from __future__ import annotations

from benchmarks.preprocess_bench import PreprocessOptions, run


def test_edges_and_features_bench(tmp_path):
    o = PreprocessOptions(workdir=str(tmp_path), edges=20_000, nodes=1_000, repeat=1,
                          memory=32 << 20, verify=True, delete_inputs=True, feature_rows=5_000,
                          feature_dim=8, permute=True, cold=True)
    res = run(o)["results"]
    e, f = res["edges"], res["features"]
    assert e["ours"][0]["edges"] == 20_000 and "speed_ratio" in e and "memory_ratio" in e
    assert e["verified_edges"] > 0  # 500 random destinations match a scan of the input
    assert e["ours_edges_per_s"] == 20_000 / e["ours"][0]["seconds"]
    assert f["rows"] == 5_000 and f["verified_rows"] == 2000 and len(f["runs"]) == 1
    assert not any(p.suffix == ".npy" for p in tmp_path.iterdir())
