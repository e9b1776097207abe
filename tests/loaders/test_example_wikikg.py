"""examples/train_wikikg90m.py on a tiny WikiKG90Mv2 twin, from features alone and with
LinkNeighborLoader batches: it learns (validation MRR by ogb's formula far above a random
ranking's) and writes ogb's test-dev submission file."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("neighbors", [0, 4], ids=["features", "link-neighbor-loader"])
def test_wikikg_example_beats_random_ranking(tmp_path, neighbors):
    r = load("train_wikikg90m").main(["--demo", "--steps", "80", "--batch-size", "256",
                                      "--negatives", "256", "--dim", "32",
                                      "--neighbors", str(neighbors),
                                      "--eval-queries", "600", "--device", "cpu",
                                      "--save-test", str(tmp_path / "sub")])
    assert r["queries"] == 600 and math.isfinite(r["loss"])
    # 3000 entities: a random top 10 scores about 0.001
    assert r["random_mrr"] < 0.005 and r["expected_random_mrr"] < 0.001
    assert r["mrr"] > 10 * max(r["random_mrr"], r["expected_random_mrr"])
    with np.load(tmp_path / "sub" / "t_pred_wikikg90m-v2_test-dev.npz") as z:
        assert z["t_pred_top10"].shape == (300, 10) and z["t_pred_top10"].dtype == np.int32
