"""Ranking metrics against fixed negatives, checked by sorting each row by hand."""

from __future__ import annotations

import numpy as np
import pytest

from loaders.errors import LoaderArgumentError
from loaders.datasets.ranking import link_ranks, rank_metrics


def _brute(pos, neg):
    """Average of the best and worst position of the positive in a sort of its row."""
    out = []
    for p, ns in zip(pos, neg):
        row = sorted([(-s, 1) for s in ns] + [(-p, 0)])  # ties: positive first (best case)
        best = [k for k, (_, is_neg) in enumerate(row) if not is_neg][0] + 1
        row = sorted([(-s, 0) for s in ns] + [(-p, 1)])  # ties: positive last (worst case)
        worst = [k for k, (_, is_pos) in enumerate(row) if is_pos][0] + 1
        out.append((best + worst) / 2)
    return np.array(out)


def test_ranks_and_metrics_match_sorting():
    rng = np.random.default_rng(0)
    pos = rng.integers(0, 5, 200).astype(np.float32)  # small integers: many ties
    neg = rng.integers(0, 5, (200, 9)).astype(np.float32)
    r = _brute(pos, neg)
    np.testing.assert_allclose(link_ranks(pos, neg).numpy(), r)
    m = rank_metrics(pos, neg)
    assert m["mrr"] == pytest.approx(np.mean(1 / r))
    assert m["hits@3"] == pytest.approx(np.mean(r <= 3))


def test_bad_scores_are_named():
    with pytest.raises(LoaderArgumentError, match="neg_score"):
        link_ranks(np.zeros(3), np.zeros((4, 2)))
    with pytest.raises(LoaderArgumentError, match="finite"):
        link_ranks(np.array([np.nan]), np.zeros((1, 2)))
