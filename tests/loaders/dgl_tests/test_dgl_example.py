"""``examples/train_dgl.py`` runs end to end on small stores (run in .venv-dgl)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from dgl_helpers import import_dgl

dgl = import_dgl()

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_dgl.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_dgl_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("kind", ["homo", "hetero"])
def test_train_dgl_example(kind, tmp_path):
    from loaders.datasets.synthetic import mag_like_store, power_law_store

    store = tmp_path / "s"
    if kind == "homo":
        power_law_store(store, num_nodes=3000, num_edges=24000, feat_dim=8, num_classes=3,
                        noise=0.5, homophily=0.8, train_frac=0.3, seed=2)
        chance = 1 / 3
    else:
        mag_like_store(store, num_papers=1500, num_authors=800, num_institutions=10,
                       feat_dim=8, num_classes=3, seed=2)
        chance = 1 / 3
    out = tmp_path / "metrics.json"
    rc = _example().main([str(store), "--epochs", "2", "--fanouts", "5,3", "--batch-size", "128",
                          "--hidden", "32", "--lr", "0.01", "--device", "cpu", "--json", str(out)])
    assert rc == 0
    m = json.loads(out.read_text())
    assert len(m["epochs"]) == 2 and m["epochs"][-1]["seeds_per_s"] > 0
    # a smoke test, not the accuracy test (test_dgl_train.py): just clearly above chance
    assert m["valid"]["acc"] > chance + 0.1


def test_train_dgl_rgat_example(tmp_path):
    """examples/train_dgl_rgat.py: an RGAT on blocks with edata["etype"] learns above chance."""
    from loaders.datasets.synthetic import mag_like_store

    store = mag_like_store(tmp_path / "s", num_papers=1500, num_authors=800, num_institutions=10,
                           feat_dim=8, num_classes=3, seed=2, derive_features=True)
    spec = importlib.util.spec_from_file_location("train_dgl_rgat_example",
                                                  EXAMPLE.parent / "train_dgl_rgat.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.main(["--store", store, "--epochs", "3", "--max-batches", "3", "--batch-size", "128",
                  "--hidden", "16", "--lr", "0.02", "--fanouts", "2,4"])
    assert r["epoch"] == 2 and r["train"]["seeds"] == 3 * 128
    assert r["valid"]["acc"] > 0.4  # chance: 1/3
