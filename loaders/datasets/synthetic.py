"""Synthetic stores for tests, examples and benchmarks, written through the store's writer API.

:func:`power_law_store` writes a homogeneous graph whose in-degrees follow a Zipf law over a
random node order, with features that carry a planted label signal and edges that prefer
sources of the same class (homophily), so that neighbour aggregation helps a GNN.
:func:`mag_like_store` writes a small heterogeneous graph with MAG240M's node and edge types.
Everything is generated in blocks: memory stays bounded whatever the size.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import numpy as np

import featurestore as fs
from featurestore.format.names import index_dtype

__all__ = ["zipf_degrees", "power_law_store", "mag_like_store"]

log = logging.getLogger(__name__)

#: destinations per generated block of edges.
BLOCK_NODES = 1 << 16


def zipf_degrees(num_nodes: int, num_edges: int, alpha: float = 0.8,
                 rng: np.random.Generator | None = None) -> np.ndarray:
    """In-degrees summing to ``num_edges``: ``d ~ rank**-alpha`` over a random node order."""
    rng = rng or np.random.default_rng(0)
    rank = rng.permutation(num_nodes).astype(np.float64) + 1.0
    w = rank ** -alpha
    w *= num_edges / w.sum()
    deg = np.floor(w).astype(np.int64)
    rest = num_edges - int(deg.sum())
    if rest > 0:
        deg[rng.choice(num_nodes, rest, replace=rest > num_nodes)] += 1
    return deg


def _source_blocks(deg: np.ndarray, labels: np.ndarray | None, homophily: float,
                   num_src: int, seed: int, dtype) -> Iterator[np.ndarray]:
    """Sources of each destination's edges, block by block (uniform, or same-class with
    probability ``homophily``)."""
    if labels is not None and homophily > 0:
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=int(labels.max()) + 1)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for b, lo in enumerate(range(0, deg.shape[0], BLOCK_NODES)):
        rng = np.random.default_rng([seed, 1, b])
        d = deg[lo:lo + BLOCK_NODES]
        m = int(d.sum())
        src = rng.integers(0, num_src, m, dtype=np.int64)
        if labels is not None and homophily > 0 and m:
            dst = np.repeat(np.arange(lo, lo + d.shape[0]), d)
            same = rng.random(m) < homophily
            c = labels[dst[same]]
            src[same] = order[start[c] + (rng.random(same.sum()) * counts[c]).astype(np.int64)]
        yield src.astype(dtype, copy=False)


def _feature_blocks(n: int, dim: int, dtype, labels: np.ndarray | None, centroids, noise: float,
                    seed: int) -> Iterator[np.ndarray]:
    for b, lo in enumerate(range(0, n, BLOCK_NODES)):
        rng = np.random.default_rng([seed, 2, b])
        hi = min(n, lo + BLOCK_NODES)
        x = rng.standard_normal((hi - lo, dim), dtype=np.float32)
        x *= noise
        if labels is not None:
            x += centroids[labels[lo:hi]]
        yield x.astype(dtype, copy=False)


def power_law_store(path: str | os.PathLike, *, num_nodes: int, num_edges: int,
                    feat_dim: int = 128, dtype=np.float32, num_classes: int = 8,
                    noise: float = 1.0, homophily: float = 0.0, train_frac: float = 0.1,
                    alpha: float = 0.8, seed: int = 0, mode: str = "w") -> str:
    """Write a homogeneous power-law graph store (node type ``node``, edge ``node-to-node``).

    Features are ``centroid[label] + noise * N(0, 1)`` (unit-norm random centroids), labels
    uniform over ``num_classes``; with ``homophily`` h, each edge's source is drawn from the
    destination's class with probability h, else uniformly. Splits ``train`` (``train_frac``
    of the nodes), ``valid`` and ``test`` (10% each), disjoint.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, num_nodes).astype(np.int64)
    cent = rng.standard_normal((num_classes, feat_dim)).astype(np.float32)
    cent /= np.linalg.norm(cent, axis=1, keepdims=True)
    deg = zipf_degrees(num_nodes, num_edges, alpha, rng)
    indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(deg, out=indptr[1:])
    w = fs.create_store(path, mode=mode)
    w.add_node_type("node", num_nodes)
    idt = index_dtype(num_nodes)
    w.add_edge_type(("node", "to", "node"), indptr,
                    _source_blocks(deg, labels, homophily, num_nodes, seed, idt))
    w.add_features("node", "feat",
                   _feature_blocks(num_nodes, feat_dim, dtype, labels, cent, noise, seed),
                   dtype=dtype, row_shape=(feat_dim,))
    w.add_labels("node", labels)
    perm = rng.permutation(num_nodes)
    ntr, nva = int(train_frac * num_nodes), int(0.1 * num_nodes)
    w.add_split("train", "node", np.sort(perm[:ntr]))
    w.add_split("valid", "node", np.sort(perm[ntr:ntr + nva]))
    w.add_split("test", "node", np.sort(perm[ntr + nva:ntr + 2 * nva]))
    w.add_provenance("synthetic.power_law_store", num_nodes=num_nodes, num_edges=num_edges,
                     feat_dim=feat_dim, dtype=np.dtype(dtype).name, alpha=alpha,
                     homophily=homophily, noise=noise, seed=seed)
    w.commit()
    log.info("wrote %s: %d nodes, %d edges, %s x %d features", path, num_nodes, num_edges,
             np.dtype(dtype).name, feat_dim)
    return os.fspath(path)


def _csc_from_pairs(src: np.ndarray, dst: np.ndarray, num_dst: int):
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, src[order]


def _mean_rows(x: np.ndarray, dst: np.ndarray, src: np.ndarray, n: int) -> np.ndarray:
    """Row ``i``: the mean of ``x[src[dst == i]]`` (zeros where there is none), in fp32."""
    out = np.zeros((n, x.shape[1]), np.float32)
    np.add.at(out, dst, x[src].astype(np.float32))
    out /= np.maximum(np.bincount(dst, minlength=n), 1)[:, None]
    return out


def mag_like_store(path: str | os.PathLike, *, num_papers: int = 2000, num_authors: int = 1500,
                   num_institutions: int = 50, feat_dim: int = 32, num_classes: int = 5,
                   noise: float = 1.0, homophily: float = 0.8, seed: int = 0,
                   dtype=np.float16, mode: str = "w", derive_features: bool = False) -> str:
    """Write a small store with MAG240M's layout: ``paper``/``author``/``institution``.

    Edge types (CSC, both directions as PyG's MAG240M example uses them): ``paper cites paper``,
    ``author writes paper``, ``paper rev_writes author``, ``author affiliated_with
    institution``, ``institution rev_affiliated_with author``. Only papers have features
    (``feat``), labels (``-1`` outside the splits, as in MAG240M) and ``year``; each author
    writes papers of mostly one class, so authors carry label signal to their papers.
    With ``derive_features``, authors and institutions get features too, as OGB-LSC's R-GNN
    and ``featurestore preprocess mag240m --derive-features mean`` make them: an author's is
    the mean of its papers', an institution's the mean of its authors'.
    """
    rng = np.random.default_rng(seed)
    P, A, NI = num_papers, num_authors, num_institutions
    labels = rng.integers(0, num_classes, P)
    cent = rng.standard_normal((num_classes, feat_dim)).astype(np.float32)
    cent /= np.linalg.norm(cent, axis=1, keepdims=True)
    x = (cent[labels] + noise * rng.standard_normal((P, feat_dim))).astype(dtype)
    # cites: each paper cites ~8 papers, same class with probability `homophily`
    deg = zipf_degrees(P, 8 * P, 0.6, rng)
    c_dst = np.repeat(np.arange(P), deg)
    c_src = rng.integers(0, P, c_dst.shape[0])
    same = rng.random(c_dst.shape[0]) < homophily
    by_class = [np.flatnonzero(labels == c) for c in range(num_classes)]
    for c in range(num_classes):
        sel = same & (labels[c_dst] == c)
        c_src[sel] = rng.choice(by_class[c], sel.sum())
    # writes: each author has a home class and writes ~4 papers, mostly of it
    home = rng.integers(0, num_classes, A)
    w_src = np.repeat(np.arange(A), 4)
    w_dst = rng.integers(0, P, w_src.shape[0])
    same = rng.random(w_src.shape[0]) < homophily
    for c in range(num_classes):
        sel = same & (home[w_src] == c)
        w_dst[sel] = rng.choice(by_class[c], sel.sum())
    aff_src = np.arange(A)
    aff_dst = rng.integers(0, NI, A)
    perm = rng.permutation(P)
    ntr, nva = int(0.6 * P), int(0.2 * P)
    lab = np.full(P, -1, np.int64)
    lab[perm[:ntr + 2 * nva]] = labels[perm[:ntr + 2 * nva]]

    w = fs.create_store(path, mode=mode)
    w.add_node_type("paper", P)
    w.add_node_type("author", A)
    w.add_node_type("institution", NI)
    for (s, r, d), (src, dst, nd) in {
        ("paper", "cites", "paper"): (c_src, c_dst, P),
        ("author", "writes", "paper"): (w_src, w_dst, P),
        ("paper", "rev_writes", "author"): (w_dst, w_src, A),
        ("author", "affiliated_with", "institution"): (aff_src, aff_dst, NI),
        ("institution", "rev_affiliated_with", "author"): (aff_dst, aff_src, A),
    }.items():
        indptr, indices = _csc_from_pairs(np.asarray(src), np.asarray(dst), nd)
        w.add_edge_type((s, r, d), indptr, indices)
    w.add_features("paper", "feat", x)
    if derive_features:
        xa = _mean_rows(x, w_src, w_dst, A)
        w.add_features("author", "feat", xa.astype(dtype))
        w.add_features("institution", "feat", _mean_rows(xa, aff_dst, aff_src, NI).astype(dtype))
    w.add_labels("paper", lab)
    w.add_values("paper", "year", rng.integers(2010, 2020, P).astype(np.int64))
    w.add_split("train", "paper", np.sort(perm[:ntr]))
    w.add_split("valid", "paper", np.sort(perm[ntr:ntr + nva]))
    w.add_split("test", "paper", np.sort(perm[ntr + nva:ntr + 2 * nva]))
    w.add_provenance("synthetic.mag_like_store", num_papers=P, num_authors=A,
                     num_institutions=NI, feat_dim=feat_dim, seed=seed)
    w.commit()
    return os.fspath(path)
