"""Round-trip checks shared by the OGB tests."""

from __future__ import annotations

import gzip

import numpy as np

from preprocess.synth import MagSynthSpec, PapersSynthSpec

#: a MAG240M twin small enough for a test, with several blocks of every kind of file.
MAG_SPEC = MagSynthSpec(paper=3000, author=3500, institution=40, writes=9000,
                        affiliated_with=2500, cites=20000, feat_dim=16)
PAPERS_SPEC = PapersSynthSpec(nodes=2500, edges=15000, feat_dim=8)


def csc_pairs(store, etype):
    """The store's edges of ``etype`` as original ``(src, dst)`` ids, as int64 codes."""
    indptr, indices = store.csc(etype)
    s, _, d = etype
    dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(np.asarray(indptr)))
    src_o = np.asarray(store.orig_ids(s))[np.asarray(indices)]
    dst_o = np.asarray(store.orig_ids(d))[dst]
    return src_o.astype(np.int64), dst_o.astype(np.int64)


def codes(src, dst, n_dst):
    return np.asarray(src, np.int64) * np.int64(n_dst) + np.asarray(dst, np.int64)


def assert_same_edges(store, etype, raw_src, raw_dst, n_dst):
    """The store holds exactly the distinct raw edges (no duplicates, nothing else)."""
    s, d = csc_pairs(store, etype)
    got = codes(s, d, n_dst)
    assert np.unique(got).shape[0] == got.shape[0], f"{etype}: duplicate edges in the store"
    want = np.unique(codes(raw_src, raw_dst, n_dst))
    np.testing.assert_array_equal(np.sort(got), want)


def by_orig(store, ntype, arr_store):
    """Reorder a per-node store array into original-id order."""
    orig = np.asarray(store.orig_ids(ntype))
    out = np.empty_like(np.asarray(arr_store))
    out[orig] = np.asarray(arr_store)
    assert np.array_equal(np.sort(orig), np.arange(orig.shape[0])), "orig_ids not a permutation"
    return out


def read_csv_gz(path):
    with gzip.open(path, "rt") as f:
        text = f.read().split()
    return np.array([int(t) for t in text], np.int64)
