"""The PyG examples run end to end for a few batches on the small test stores."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_homogeneous_graphsage_example(homo_store_path):
    r = load("train_graphsage").main(["--store", str(homo_store_path), "--epochs", "2",
                                      "--max-batches", "3", "--batch-size", "128",
                                      "--hidden", "16", "--fanouts", "5,3", "--device", "cpu"])
    assert r["epoch"] == 1 and r["train"]["seeds"] == 3 * 128
    assert math.isfinite(r["train"]["loss"]) and 0 <= r["valid"]["acc"] <= 1


def test_heterogeneous_to_hetero_example(hetero_store_path, capsys):
    rc = load("train_mag240m").main(["--store", str(hetero_store_path), "--epochs", "1",
                                     "--max-batches", "2", "--batch-size", "64", "--hidden", "16",
                                     "--fanouts", "4,3", "--device", "cpu"])
    assert rc == 0 and "valid accuracy" in capsys.readouterr().out
