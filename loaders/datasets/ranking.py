"""Ranking metrics of link prediction against fixed negatives, as OGB's link evaluators
(``ogbl-citation2``, ``ogbl-wikikg2``) compute them.

Each positive pair is scored against its own negatives (a store's edge split ``neg_dst``
column, ``store.edge_split("test")["neg_dst"]``). Ties count half, as OGB counts them: the
rank is ``1 + (#negatives scoring higher) + (#negatives scoring equal) / 2``.
"""

from __future__ import annotations

import torch

from loaders.errors import LoaderArgumentError

__all__ = ["link_ranks", "rank_metrics"]


def link_ranks(pos_score, neg_score) -> torch.Tensor:
    """The rank (1 = best, ties counted half) of each positive among its negatives.

    Parameters
    ----------
    pos_score
        ``(n,)`` scores of the positive pairs.
    neg_score
        ``(n, k)`` scores of each pair's ``k`` negatives.
    """
    pos = torch.as_tensor(pos_score)
    neg = torch.as_tensor(neg_score)
    if pos.ndim != 1 or neg.ndim != 2 or neg.shape[0] != pos.shape[0]:
        raise LoaderArgumentError(f"Expected pos_score (n,) and neg_score (n, k). Got shapes "
                                  f"{tuple(pos.shape)} and {tuple(neg.shape)} instead.")
    if not (torch.isfinite(pos).all() and torch.isfinite(neg).all()):
        raise LoaderArgumentError("Expected finite scores. Got NaN or infinite scores.")
    p = pos.view(-1, 1)
    optimistic = (neg > p).sum(1)
    pessimistic = (neg >= p).sum(1)
    return 0.5 * (optimistic + pessimistic).to(torch.float64) + 1


def rank_metrics(pos_score, neg_score, ks=(1, 3, 10)) -> dict[str, float]:
    """``{"mrr": ..., "hits@1": ..., ...}`` averaged over the positives (see :func:`link_ranks`)."""
    r = link_ranks(pos_score, neg_score)
    out = {"mrr": float((1.0 / r).mean()) if r.numel() else float("nan")}
    for k in ks:
        out[f"hits@{k}"] = float((r <= k).to(torch.float64).mean()) if r.numel() else float("nan")
    return out
