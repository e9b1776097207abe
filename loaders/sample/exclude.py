"""Seed edges out of message passing: a link batch must not see the edges it is trained on.

:func:`seed_edge_ids` finds the CSC positions (``e_id``) of given ``(src, dst)`` pairs (every
parallel edge, by a scan of each destination's neighbour list: a numba kernel in two passes,
count then fill); :func:`drop_edges` removes those edges from a sampled subgraph after the
draw, per layer, keeping the nodes (DGL's ``exclude=`` removes them from the candidates
before the draw instead, so a node whose only sampled edge was a seed edge stays in our batch
as an isolated node, and fanouts count the excluded edges).
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

from featurestore.format.names import EdgeType
from loaders.sample.sampler import SampledSubgraph

__all__ = ["seed_edge_ids", "drop_edges"]


@numba.njit(nogil=True, cache=True)
def _positions(indptr, indices, src, dst, out):
    """Positions of the edges ``src[i] -> dst[i]``; with ``out`` empty, only their count."""
    n = 0
    fill = out.shape[0] > 0
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        for p in range(indptr[d], indptr[d + 1]):
            if indices[p] == s:
                if fill:
                    out[n] = p
                n += 1
    return n


def seed_edge_ids(indptr: np.ndarray, indices: np.ndarray, src: np.ndarray,
                  dst: np.ndarray) -> np.ndarray:
    """Sorted unique CSC positions of the edges ``src -> dst`` (ids validated by the caller)."""
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    n = _positions(indptr, indices, src, dst, np.empty(0, np.int64))
    out = np.empty(n, np.int64)
    if n:
        _positions(indptr, indices, src, dst, out)
    return np.unique(out)


def drop_edges(sub: SampledSubgraph, et: EdgeType, eids: np.ndarray) -> SampledSubgraph:
    """``sub`` without its sampled edges of type ``et`` whose ``e_id`` is in ``eids``."""
    if eids.shape[0] == 0 or sub.edge[et].shape[0] == 0:
        return sub
    keep = ~np.isin(sub.edge[et], eids, assume_unique=False)
    if keep.all():
        return sub
    bounds = np.cumsum([0] + list(sub.num_sampled_edges[et]))
    per_layer = [int(keep[bounds[i]:bounds[i + 1]].sum()) for i in range(len(bounds) - 1)]
    return dataclasses.replace(
        sub, row={**sub.row, et: sub.row[et][keep]}, col={**sub.col, et: sub.col[et][keep]},
        edge={**sub.edge, et: sub.edge[et][keep]},
        num_sampled_edges={**sub.num_sampled_edges, et: per_layer})
