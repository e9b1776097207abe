"""Smoke runs of every ``featurestore bench`` subcommand on tiny stores, so the benchmark code
cannot rot. Sizes are tiny and timings meaningless; what is checked is that each command runs,
writes its JSON, markdown and charts, and that the numbers in them are consistent."""

from __future__ import annotations

import json
import shutil
import statistics

from pathlib import Path

import numpy as np
import pytest

import featurestore as fs
from featurestore.cli import main as cli_main

PNG = b"\x89PNG\r\n\x1a\n"
try:
    import matplotlib  # noqa: F401  (the bench extra)

    PLOT = ["--plot"]
except ImportError:
    PLOT = []


@pytest.fixture(scope="module")
def feat_store(tmp_path_factory):
    """A 3000 x 24 fp32 feature store with two node types (the second one benchmarked)."""
    path = str(tmp_path_factory.mktemp("fstore") / "s")
    rng = np.random.default_rng(0)
    w = fs.create_store(path, mode="w")
    w.add_node_type("a", 10)
    w.add_node_type("paper", 3000)
    w.add_features("paper", "x", rng.random((3000, 24), dtype=np.float32))
    w.commit()
    return path


@pytest.fixture(scope="module")
def graph_store(tmp_path_factory):
    from loaders.datasets.synthetic import power_law_store

    path = str(tmp_path_factory.mktemp("graph") / "g")
    power_law_store(path, num_nodes=3000, num_edges=30_000, feat_dim=16, num_classes=4,
                    train_frac=0.2, seed=0)
    return path


def _json(path):
    return json.loads(path.read_text())


def _is_png(p):
    """True when ``p`` is a PNG (or, without matplotlib, when no chart was asked for)."""
    return not PLOT or Path(p).read_bytes()[:8] == PNG


def test_device_probe_on_a_directory(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli_main(["bench", "device", str(tmp_path), "--seconds", "0.2", "--size-mib", "4",
                     "--no-fio", "--out", str(out)]) == 0
    rep = _json(out / "device.json")
    (d,) = rep["results"].values()
    assert d["tool"] == "pread-probe" and d["probe_file"] == "(a temporary file)"
    assert d["seq_read_GBps"] > 0 and d["randread_4k_qd32_iops"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fs-device-probe")]
    assert "random 4 KiB IOPS, QD32" in capsys.readouterr().out
    assert rep["machine"]["cpus"] >= 1 and rep["machine"]["numpy"] == np.__version__


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_device_fio(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(np.random.default_rng(0).bytes(5 << 20))
    assert cli_main(["bench", "device", str(tmp_path), "--seconds", "0.2", "--size-mib", "0",
                     "--out", str(tmp_path / "out")]) == 0
    (d,) = _json(tmp_path / "out" / "device.json")["results"].values()
    assert d["tool"] == "fio" and d["probe_file"] == str(big)  # the largest file there
    assert d["randread_4k_qd1_iops"] > 0


def test_device_missing_target(tmp_path):
    assert cli_main(["bench", "device", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2


def test_gather_sweep_on_a_store(feat_store, tmp_path):
    out = tmp_path / "out"
    assert cli_main(["bench", "gather", "--store", feat_store, "--ntype", "paper", "--feature", "x",
                     "--batch-sizes", "100,1000", "--zarr-batch", "100", "--thread-counts", "1,4",
                     "--trials", "2", "--device-seconds", "0", "--out", str(out)] + PLOT) == 0
    rep = _json(out / "gather.json")
    batch = [r for r in rep["results"] if "sweep" not in r]
    got = {(r["batch"], r["cache"], r["method"]) for r in batch}
    want = {(b, c, m) for b in (100, 1000) for c in ("warm", "cold")
            for m in ("featurestore", "np.memmap")} | {(100, c, "zarr oindex") for c in
                                                       ("warm", "cold")}
    assert got == want
    for r in batch:
        assert r["seconds"] == pytest.approx(statistics.median(r["trials"]))
        assert r["rows_per_s"] == pytest.approx(r["batch"] / r["seconds"])
        assert r["GBps"] == pytest.approx(r["batch"] * 96 / r["seconds"] / 1e9)
        assert len(r["trials"]) == (1 if r["method"] == "zarr oindex" else 2)
    threads = sorted(r["io_threads"] for r in rep["results"] if r.get("sweep") == "io_threads")
    assert threads == [1, 4]
    assert (out / "gather.md").read_text().count("| float32 x 24 |") >= len(batch)
    assert _is_png(out / "gather-batch.png") and _is_png(out / "gather-threads.png")


def test_gather_sweep_refuses_compressed(tmp_path):
    path = str(tmp_path / "z")
    import zarr

    w = fs.create_store(path, mode="w")
    w.add_node_type("n", 100)
    w.add_features("n", "feat", np.zeros((100, 4), np.float32),
                   compressors=zarr.codecs.ZstdCodec())
    w.commit()
    assert cli_main(["bench", "gather", "--store", path, "--out", str(tmp_path)]) == 2


def test_sample_ours_and_pyg(graph_store, tmp_path, monkeypatch):
    from benchmarks import workload

    monkeypatch.setattr(workload, "dgl_python", lambda: None)  # as on a machine without DGL
    out = tmp_path / "out"
    assert cli_main(["bench", "sample", "--store", graph_store, "--batch-size", "64",
                     "--batches", "3", "--trials", "2", "--fanouts", "5,3",
                     "--out", str(out)] + PLOT) == 0
    rep = _json(out / "sample.json")
    by = {r["peer"]: r for r in rep["results"]}
    assert by["dgl"]["status"] == "not installed"
    ours = by["featurestore"]
    assert len(ours["trials"]) == 2
    for t in ours["trials"]:
        assert t["seeds"] == 3 * 64
        assert t["seeds_per_s"] == pytest.approx(t["seeds"] / t["seconds"])
    assert ours["batches_per_s"] == pytest.approx(
        statistics.median(t["batches_per_s"] for t in ours["trials"]))
    # with fanouts (5, 3) a batch of 64 seeds samples at most 64*5 + 64*5*3 edges
    assert 0 < ours["edges_per_batch"] <= 64 * 5 + 64 * 5 * 3
    if "pyg" in by and "batches_per_s" in by["pyg"]:
        assert by["pyg"]["ours_over_peer"] == pytest.approx(
            ours["batches_per_s"] / by["pyg"]["batches_per_s"])
        # the same PyG-style sampling: edges per batch agree within sampling noise
        assert by["pyg"]["edges_per_batch"] == pytest.approx(ours["edges_per_batch"], rel=0.2)
    md = (out / "sample.md").read_text()
    assert "not installed" in md and "| featurestore |" in md
    assert _is_png(out / "sample-throughput.png") and _is_png(out / "sample-stages.png")


def test_sample_needs_a_graph(feat_store, tmp_path):
    assert cli_main(["bench", "sample", "--store", feat_store, "--out", str(tmp_path)]) == 2


def test_loader_small(tmp_path):
    out = tmp_path / "out"
    assert cli_main(["bench", "loader", "--workdir", str(tmp_path / "w"), "--nodes", "4000",
                     "--edges", "20000", "--batch-size", "64", "--batches", "2", "--seconds", "5",
                     "--parts", "loader", "--out", str(out)] + PLOT) == 0
    rep = _json(out / "loader.json")
    assert rep["benchmark"] == "loader" and rep["options"]["nodes"] == 4000
    assert rep["results"]["ours_loader"]["batches"] == 2
    assert "ours: loader, features in RAM" in (out / "loader.md").read_text()
    assert _is_png(out / "loader-throughput.png")


def test_preprocess_small(tmp_path):
    out = tmp_path / "out"
    assert cli_main(["bench", "preprocess", "--workdir", str(tmp_path / "w"), "--edges", "20000",
                     "--nodes", "2000", "--trials", "1", "--out", str(out)] + PLOT) == 0
    rep = _json(out / "preprocess.json")
    e = rep["results"]["edges"]
    assert "error" not in e, e
    assert e["edges"] == 20_000 and len(e["ours"]) == 1 and len(e["scipy"]) == 1
    assert e["ours_edges_per_s"] == pytest.approx(20_000 / e["ours"][0]["seconds"])
    assert "COO -> CSC (ours, out of core)" in (out / "preprocess.md").read_text()
    assert _is_png(out / "preprocess-stages.png")


def test_all_quick(tmp_path, monkeypatch):
    from benchmarks import all as ball
    from benchmarks import workload

    monkeypatch.setattr(workload, "dgl_python", lambda: None)
    monkeypatch.setattr(ball.Sizes, "quick", classmethod(lambda cls: cls(
        gather_rows=3000, nodes=3000, edges=20_000, prep_edges=20_000, prep_nodes=2000,
        trials=1, device_seconds=0.0, loader_batches=2, loader_seconds=5.0)))
    out = tmp_path / "out"
    assert cli_main(["bench", "all", "--quick", "--parts", "device,gather,sample,preprocess",
                     "--workdir", str(tmp_path / "w"), "--out", str(out)] + PLOT) == 0
    s = _json(out / "all.json")
    assert set(s["reports"]) == {"device", "gather", "sample", "preprocess"} and not s["errors"]
    peers = {r["peer"] for r in s["peer_ratios"]}
    assert {"np.memmap", "zarr oindex", "scipy tocsc"} <= peers
    md = (out / "report.md").read_text()
    for title in ("## Ours against each peer", "## Device limits", "## Row gathers",
                  "## Neighbour sampling", "## Preprocessing") + (("## Charts",) if PLOT else ()):
        assert title in md
    for c in s["charts"]:
        assert _is_png(out / c) and f"]({c})" in md
    if PLOT:
        assert {"gather-batch.png", "sample-throughput.png",
                "preprocess-stages.png"} <= set(s["charts"])
    short = (out / "summary.md").read_text()
    assert "share of device limit" in short and "| np.memmap |" in short


def test_all_reports_a_failing_part(tmp_path, monkeypatch):
    from benchmarks import device

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(device, "run", boom)
    out = tmp_path / "out"
    assert cli_main(["bench", "all", "--quick", "--parts", "device", "--workdir",
                     str(tmp_path / "w"), "--out", str(out)]) == 1
    assert "disk on fire" in _json(out / "all.json")["errors"]["device"]
    assert "## Device limits: failed" in (out / "report.md").read_text()


def test_loader_and_sampler_on_a_users_heterogeneous_store(tmp_path):
    """``bench loader --on-store`` and ``bench sample --store`` measure ours on any store;
    the peers (homogeneous only) are skipped."""
    from loaders.datasets.synthetic import mag_like_store

    path = str(tmp_path / "mag")
    mag_like_store(path)
    out = tmp_path / "out"
    assert cli_main(["bench", "loader", "--on-store", path, "--seed-type", "paper",
                     "--fanouts", "5,3", "--batch-size", "64", "--batches", "2", "--seconds", "5",
                     "--parts", "loader,dgl,ooc", "--out", str(out)]) == 0
    rep = _json(out / "loader.json")["results"]
    assert rep["store"] == path and rep["ours_loader"]["batches"] == 2
    assert "skipped" in rep["pyg"] and "dgl" not in rep and "ooc_ours" not in rep
    assert cli_main(["bench", "sample", "--store", path, "--seed-type", "paper", "--fanouts",
                     "5,3", "--batch-size", "64", "--batches", "2", "--trials", "1",
                     "--out", str(out)]) == 0
    by = {r["peer"]: r for r in _json(out / "sample.json")["results"]}
    assert by["featurestore"]["trials"][0]["seeds"] == 2 * 64
    assert by["pyg, dgl"]["status"] == "skipped"


def test_bench_partition_and_remote_commands(tmp_path):
    """bench partition and bench remote run from the command line and write their reports."""
    out = tmp_path / "out"
    assert cli_main(["bench", "partition", "--nodes", "3000", "--blocks", "6", "--world-sizes",
                     "2", "--splits", "loader", "--splits", "ldg", "--cache-shares", "0.05",
                     "--batch-size", "128", "--out", str(out)]) == 0
    rep = json.loads((out / "partition.json").read_text())
    assert {r["split"] for r in rep["results"]} == {"loader", "ldg"}
    assert "| 2 | ldg |" in (out / "partition.md").read_text()
    assert cli_main(["bench", "remote", "--workdir", str(tmp_path / "w"), "--nodes", "2000",
                     "--edges", "8000", "--layout", "fp32x128", "--batch", "40", "--trials",
                     "2", "--no-s3", "--no-zarr-baseline", "--latency-ms", "1",
                     "--latency-rows", "300", "--out", str(out)]) == 0
    rep = json.loads((out / "remote.json").read_text())
    assert rep["benchmark"] == "remote" and rep["http"]["rows_per_s"] > 0
    assert rep["http"]["bytes_per_byte_needed"] <= 2.0
    assert "| http |" in (out / "remote.md").read_text()
