"""Seed edges out of message passing: a link batch must not see the edges it is trained on.

:func:`seed_edge_ids` finds the CSC positions (``e_id``) of given ``(src, dst)`` pairs (every
parallel edge, by a scan of each destination's neighbour list: a numba kernel in two passes,
count then fill); :func:`drop_edges` removes those edges from a sampled subgraph after the
draw, per layer, keeping the nodes (DGL's ``exclude=`` removes them from the candidates
before the draw instead, so a node whose only sampled edge was a seed edge stays in our batch
as an isolated node, and fanouts count the excluded edges).

DGL's ``exclude="reverse_id"`` names edges by id: :func:`check_reverse_eids` validates a
``reverse_eids`` map (one entry per edge, in the store's CSC edge numbering: edge ``e`` is
``indices[e]``) and :func:`exclude_reverse_id` gives the seed edges and their reverses;
:func:`edge_endpoints` turns edge ids back into ``(src, dst)``; :func:`reverse_edge_ids` builds
``reverse_eids`` of a symmetric edge type (what DGL's ``to_bidirected`` with a reverse
mapping returns).
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

from featurestore.format.names import EdgeType
from loaders.errors import LoaderArgumentError
from loaders.sample.packed import kernel_ids, nbr
from loaders.sample.sampler import SampledSubgraph

__all__ = ["seed_edge_ids", "drop_edges", "edge_endpoints", "check_reverse_eids",
           "exclude_reverse_id", "reverse_edge_ids"]


@numba.njit(nogil=True, cache=True)
def _positions(indptr, indices, src, dst, out):
    """Positions of the edges ``src[i] -> dst[i]``; with ``out`` empty, only their count."""
    n = 0
    fill = out.shape[0] > 0
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        for p in range(indptr[d], indptr[d + 1]):
            if nbr(indices, p) == s:
                if fill:
                    out[n] = p
                n += 1
    return n


def seed_edge_ids(indptr: np.ndarray, indices: np.ndarray, src: np.ndarray,
                  dst: np.ndarray) -> np.ndarray:
    """Sorted unique CSC positions of the edges ``src -> dst`` (ids validated by the caller)."""
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    indices = kernel_ids(indices)
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


def edge_endpoints(indptr: np.ndarray, indices: np.ndarray,
                   eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of the edges at CSC positions ``eids`` (validated by the caller)."""
    eids = np.asarray(eids, dtype=np.int64)
    dst = np.searchsorted(np.asarray(indptr), eids, side="right") - 1
    return np.asarray(indices)[eids].astype(np.int64), dst.astype(np.int64)


def check_reverse_eids(reverse_eids, num_edges: int, what: str = "reverse_eids") -> np.ndarray:
    """``reverse_eids`` (array or tensor: the id of each edge's reverse edge, CSC numbering)
    as int64, or :class:`~loaders.errors.LoaderArgumentError` naming what is wrong."""
    if reverse_eids is None:
        raise LoaderArgumentError(f"Expected {what} (the reverse edge id of every edge) with "
                                  f"exclude='reverse_id'. Got None instead.")
    if hasattr(reverse_eids, "detach"):
        reverse_eids = reverse_eids.detach().cpu().numpy()
    r = np.asarray(reverse_eids)
    if r.ndim != 1 or r.dtype.kind not in "iu":
        raise LoaderArgumentError(f"Expected {what} as a 1-D integer array. Got shape "
                                  f"{r.shape}, dtype {r.dtype} instead.")
    if r.shape[0] != num_edges:
        raise LoaderArgumentError(f"Expected {what} with one entry per edge ({num_edges}). "
                                  f"Got {r.shape[0]} entries instead.")
    if r.size and (int(r.min()) < 0 or int(r.max()) >= num_edges):
        bad = int(r.min()) if int(r.min()) < 0 else int(r.max())
        raise LoaderArgumentError(f"Expected {what} in [0, {num_edges}) (edge ids in the "
                                  f"store's CSC numbering). Got {bad} instead.")
    return r.astype(np.int64, copy=False)


def exclude_reverse_id(eids: np.ndarray, reverse_eids: np.ndarray) -> np.ndarray:
    """The edges ``eids`` and their reverses ``reverse_eids[eids]``, sorted and unique."""
    return np.unique(np.concatenate([eids, reverse_eids[eids]]))


def reverse_edge_ids(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The id of each edge's reverse edge in a symmetric CSC (``a -> b`` to a ``b -> a``; the
    ``k``-th parallel ``a -> b`` edge to the ``k``-th ``b -> a``), or
    :class:`~loaders.errors.LoaderArgumentError` naming an edge without a reverse."""
    src = np.asarray(indices, dtype=np.int64)
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    e = np.arange(src.shape[0], dtype=np.int64)
    fwd = np.lexsort((e, dst, src))  # by (src, dst): groups a -> b in (a, b) order
    rev = np.lexsort((e, src, dst))  # by (dst, src): the b -> a edges in the same order
    bad = np.flatnonzero((src[fwd] != dst[rev]) | (dst[fwd] != src[rev]))
    if bad.size:
        i = fwd[bad[0]]
        raise LoaderArgumentError(f"Expected a symmetric edge type (every edge a -> b with a "
                                  f"b -> a) for reverse edge ids. Got edges a -> b and "
                                  f"b -> a that do not pair up, first near edge {int(i)} "
                                  f"({int(src[i])} -> {int(dst[i])}).")
    out = np.empty_like(e)
    out[fwd] = rev
    return out
