"""``benchmarks/peers/dgl_peer.py`` runs every mode and counts what it samples (.venv-dgl)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from dgl_helpers import import_dgl

dgl = import_dgl()

import featurestore as fs  # noqa: E402
from loaders.datasets.synthetic import power_law_store  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "peers" / "dgl_peer.py"


def test_dgl_peer_all_modes_sample_the_store_graph(tmp_path):
    path = power_law_store(tmp_path / "s", num_nodes=3000, num_edges=20000, feat_dim=8,
                           train_frac=0.1, seed=4)
    with fs.open_store(path) as s:
        indptr, _ = s.csc()
        train = np.asarray(s.split("train"))
        full = int((np.asarray(indptr)[train + 1] - np.asarray(indptr)[train]).sum())
    # one layer, all neighbours, one batch holding every seed: each mode must sample exactly
    # the in-edges of the seeds
    cmd = [sys.executable, str(SCRIPT), path, "--fanouts", "-1", "--batch-size", str(train.size),
           "--warmup", "0", "--batches", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(p.stdout)
    assert rep["num_seeds"] == train.size and rep["num_edges"] == 20000
    modes = {r["mode"]: r for r in rep["results"]}
    assert set(modes) == {"sampler", "loader", "graphbolt", "graphbolt-mmap", "ours-dgl"}
    for mode, r in modes.items():
        assert r["batches"] == 1, (mode, r)
        assert r["sampled_edges_per_batch"] == full, (mode, r)
        assert r["seeds_per_s"] > 0


def test_fanouts_are_reversed_for_dgl_unless_asked():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dgl_peer", SCRIPT)
    peer = importlib.util.module_from_spec(spec)
    sys.modules["dgl_peer"] = peer  # its option dataclass resolves its module by name
    spec.loader.exec_module(peer)
    # ours/PyG: 15 neighbours per seed first; DGL lists fanouts from the input layer
    assert peer.dgl_fanouts(peer.parse_args(["s", "--fanouts", "15,10,5"])) == [5, 10, 15]
    args = peer.parse_args(["s", "--fanouts", "15,10,5", "--dgl-order"])
    assert peer.dgl_fanouts(args) == [15, 10, 5]
