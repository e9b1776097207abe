"""WikiKG90Mv2Evaluator against ogb's own code (reimplemented here from ogb/lsc/wikikg90mv2.py)
and against a brute-force rank; TripleView against NumPy indexing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from loaders.datasets.lsc import EvaluatorInputError, WikiKG90Mv2Evaluator
from loaders.datasets.lsc_wikikg import TripleView


def ogb_eval(t_pred_top10, t):
    """ogb 1.3.6 WikiKG90Mv2Evaluator.eval, line for line (torch)."""
    t_pred_top10, t = torch.from_numpy(t_pred_top10), torch.from_numpy(t)
    assert t_pred_top10.shape[1] == 10 and len(t_pred_top10) == len(t)
    for i in range(len(t_pred_top10)):
        row = t_pred_top10[i][t_pred_top10[i] >= 0]
        if len(torch.unique(row)) != len(row):
            return 0
    tmp = torch.nonzero(t.view(-1, 1) == t_pred_top10, as_tuple=False)
    rr = torch.zeros(len(t)).to(tmp.device)
    rr[tmp[:, 0]] = 1. / (tmp[:, 1].float() + 1.)
    return float(rr.mean().item())


def brute_force_mrr(pred, t):
    total = 0.0
    for row, true in zip(pred.tolist(), t.tolist()):
        total += 1.0 / (row.index(true) + 1) if true in row else 0.0
    return total / len(t)


def queries(n, num_entities, seed, hit_share=0.6):
    """Distinct top-10 rows; the true tail at a random rank in ``hit_share`` of them."""
    rng = np.random.default_rng(seed)
    pred = np.argsort(rng.random((n, num_entities)), axis=1)[:, :10].astype(np.int64)
    t = rng.integers(0, num_entities, n)
    hit = rng.random(n) < hit_share
    pos = rng.integers(0, 10, n)
    pred[hit] = np.where(pred[hit] == t[hit, None], pred[hit, pos[hit], None], pred[hit])
    pred[np.flatnonzero(hit), pos[hit]] = t[hit]
    return pred, t


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mrr_equals_ogbs_formula_and_brute_force(seed):
    pred, t = queries(3000, 200, seed)
    assert not any(len(set(r)) < 10 for r in pred.tolist())
    got = WikiKG90Mv2Evaluator().eval({"h,r->t": {"t_pred_top10": pred, "t": t}})["mrr"]
    assert got == ogb_eval(pred, t)
    assert got == pytest.approx(brute_force_mrr(pred, t), rel=1e-6)
    assert 0.1 < got < 0.9
    # torch inputs and -1 padding (ogb ignores negative entries in the duplicate check)
    pred2 = pred.copy()
    pred2[::7, 8:] = -1
    got2 = WikiKG90Mv2Evaluator().eval({"h,r->t": {"t_pred_top10": torch.from_numpy(pred2),
                                                   "t": torch.from_numpy(t)}})["mrr"]
    assert got2 == ogb_eval(pred2, t)


def test_duplicated_prediction_sets_mrr_to_zero(capsys):
    pred, t = queries(50, 100, 3, hit_share=1.0)
    pred[17, 3] = pred[17, 5]
    out = WikiKG90Mv2Evaluator().eval({"h,r->t": {"t_pred_top10": pred, "t": t}})
    assert out == {"mrr": 0} and ogb_eval(pred, t) == 0
    assert "duplicated" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [
    {},
    {"h,r->t": {"t": np.zeros(3, np.int64)}},
    {"h,r->t": {"t_pred_top10": np.zeros((3, 9), np.int64), "t": np.zeros(3, np.int64)}},
    {"h,r->t": {"t_pred_top10": np.zeros((3, 10), np.int64), "t": np.zeros(4, np.int64)}},
])
def test_eval_refuses_what_ogb_asserts(bad):
    with pytest.raises(AssertionError):
        WikiKG90Mv2Evaluator().eval(bad)


def test_save_test_submission_writes_ogbs_files(tmp_path):
    ev = WikiKG90Mv2Evaluator()
    for mode, n in (("test-dev", 15000), ("test-challenge", 10000)):
        pred, _ = queries(n, 40, 4)
        path = ev.save_test_submission({"h,r->t": {"t_pred_top10": torch.from_numpy(pred)}},
                                       str(tmp_path / "out"), mode)
        assert path == str(tmp_path / "out" / f"t_pred_wikikg90m-v2_{mode}.npz")
        with np.load(path) as z:
            assert list(z) == ["t_pred_top10"]
            assert z["t_pred_top10"].dtype == np.int32
            np.testing.assert_array_equal(z["t_pred_top10"], pred)
    pred, _ = queries(15000, 40, 5)
    with pytest.raises(EvaluatorInputError, match="shape"):
        ev.save_test_submission({"h,r->t": {"t_pred_top10": pred}}, str(tmp_path), "test-challenge")
    with pytest.raises(AssertionError, match="mode"):
        ev.save_test_submission({"h,r->t": {"t_pred_top10": pred}}, str(tmp_path), "valid")
    pred[3, 0] = pred[3, 1]
    with pytest.raises(AssertionError, match="duplicated"):
        ev.save_test_submission({"h,r->t": {"t_pred_top10": pred}}, str(tmp_path), "test-dev")
    small = WikiKG90Mv2Evaluator(test_sizes={"test-dev": 7, "test-challenge": 5})
    small.save_test_submission({"h,r->t": {"t_pred_top10": queries(7, 40, 6)[0]}},
                               str(tmp_path / "s"), "test-dev")


def test_triple_view_indexes_like_the_stacked_array():
    rng = np.random.default_rng(0)
    cols = [rng.integers(0, 1000, 500) for _ in range(3)]
    want = np.stack(cols, axis=1)
    v = TripleView(*cols)
    assert v.shape == want.shape and len(v) == 500
    ids = rng.integers(0, 500, 40)
    for key in (ids, slice(10, 90, 3), (ids, 1), (slice(None), 2), (ids, slice(0, 2)),
                (slice(5, 9), [2, 0]), 7):
        np.testing.assert_array_equal(v[key], want[key])
    np.testing.assert_array_equal(np.asarray(v), want)
