"""Derived features, out of core: each node's features = the mean of its neighbours'.

This is what the OGB-LSC MAG240M baseline builds into ``full_feat.npy`` (author = mean of
their papers, institution = mean of their authors) with 256 GB of RAM; here it is one
streaming pass over a CSC edge type of the store. Destinations are taken in blocks (a
bounded fp32 accumulator), their neighbours' rows gathered from the store in bounded edge
chunks (sorted, coalesced, concurrent reads: :meth:`FeatureArray.gather`), summed by a numba
kernel and divided by the degree. A node without neighbours gets zeros.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numba as nb
import numpy as np

log = logging.getLogger(__name__)

__all__ = ["mean_blocks", "mean_reference", "plan_mean"]


@nb.njit(nogil=True, parallel=True, cache=True)
def _segment_sum(indptr, d0, d1, e0, rows, acc):
    """``acc[d - d0] += rows[e - e0]`` for every edge ``e`` of destinations ``d0..d1-1``
    that falls inside the chunk ``[e0, e0 + len(rows))``. Each destination owns one row of
    ``acc``, so the parallel loop has no races."""
    e1 = e0 + rows.shape[0]
    dim = rows.shape[1]
    for k in nb.prange(d1 - d0):
        lo = max(indptr[d0 + k], e0)
        hi = min(indptr[d0 + k + 1], e1)
        for e in range(lo, hi):
            r = e - e0
            for j in range(dim):
                acc[k, j] += rows[r, j]


@nb.njit(nogil=True, parallel=True, cache=True)
def _divide(acc, indptr, d0, out):
    for k in nb.prange(acc.shape[0]):
        deg = indptr[d0 + k + 1] - indptr[d0 + k]
        inv = np.float32(1.0) / np.float32(deg) if deg > 0 else np.float32(0.0)
        for j in range(acc.shape[1]):
            out[k, j] = acc[k, j] * inv


def plan_mean(dim: int, budget_bytes: int) -> tuple[int, int]:
    """``(dst_block, edge_chunk)``: destinations per accumulator block, edges per gather."""
    dst_block = max(1024, (budget_bytes // 4) // (dim * 4 * 2))  # acc fp32 + the fp16/32 out
    edge_chunk = max(1024, (budget_bytes // 4) // (dim * (4 + 2 + 2)))  # fp16 rows + fp32 copy
    return int(dst_block), int(edge_chunk)


def mean_blocks(indptr: np.ndarray, indices: np.ndarray, source, *, out_dtype=np.float16,
                budget_bytes: int = 256 << 20, progress: bool = True) -> Iterator[np.ndarray]:
    """Yield, block by block in destination order, the mean of each destination's sources.

    Parameters
    ----------
    indptr, indices
        A CSC edge type (``s.csc(etype)``): the sources of destination ``d`` are
        ``indices[indptr[d]:indptr[d+1]]``. Memory maps are fine.
    source
        The sources' features: a :class:`featurestore.FeatureArray` (rows read with its
        ``gather``) or any 2-D array.
    out_dtype
        Dtype of the yielded blocks (the sums are kept in fp32).
    budget_bytes
        Memory for the accumulator and the gathered rows together.
    """
    from tqdm.auto import tqdm

    num_dst = indptr.shape[0] - 1
    dim = int(source.shape[1])
    dst_block, edge_chunk = plan_mean(dim, budget_bytes)
    gather = source.gather if hasattr(source, "gather") else (lambda ids: np.asarray(source)[ids])
    acc = np.empty((min(dst_block, max(num_dst, 1)), dim), np.float32)
    pb = tqdm(total=int(indptr[-1]) if num_dst else 0, unit="edge", unit_scale=True,
              desc="mean features", disable=not progress, leave=False)
    try:
        for d0 in range(0, num_dst, dst_block):
            d1 = min(num_dst, d0 + dst_block)
            a = acc[:d1 - d0]
            a.fill(0)
            lo, hi = int(indptr[d0]), int(indptr[d1])
            for e0 in range(lo, hi, edge_chunk):
                e1 = min(hi, e0 + edge_chunk)
                rows = gather(np.asarray(indices[e0:e1]))
                _segment_sum(indptr, d0, d1, e0, rows.astype(np.float32, copy=False), a)
                pb.update(e1 - e0)
            out = np.empty((d1 - d0, dim), np.float32)
            _divide(a, indptr, d0, out)
            yield out.astype(out_dtype, copy=False)
    finally:
        pb.close()


def mean_reference(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray,
                   out_dtype=np.float16) -> np.ndarray:
    """The plain NumPy answer (whole arrays in RAM), for tests."""
    num_dst = indptr.shape[0] - 1
    deg = np.diff(indptr)
    dst = np.repeat(np.arange(num_dst), deg)
    acc = np.zeros((num_dst, x.shape[1]), np.float64)
    np.add.at(acc, dst, np.asarray(x, np.float64)[np.asarray(indices)])
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(deg[:, None] > 0, acc / np.maximum(deg, 1)[:, None], 0.0)
    return out.astype(out_dtype)
