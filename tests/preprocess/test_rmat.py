"""``featurestore synth rmat``: R-MAT's quadrant law and skew against NumPy references, block and
thread-count determinism, scrambled ids, a clustered split, and the spec ingested into a store
whose CSC equals a scipy build of the same edges."""

from __future__ import annotations

import json
import os

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from pp_helpers import csc_of, reference_csc
from preprocess.synth.rmat import (RMAT_ABCD, SPEC_NAME, _scramble, RmatSpec, clustered_ball,
                                   node_labels, rmat_edges, rmat_features, synth_rmat)

A, B, C, D = RMAT_ABCD


def numpy_rmat(rng, scale, m, abcd=RMAT_ABCD):
    """Independent reference: one quadrant per level from ``rng.choice`` (no hashing, no
    thresholds), raw ids."""
    q = rng.choice(4, size=(m, scale), p=abcd)
    w = 1 << np.arange(scale - 1, -1, -1)
    return (q >> 1) @ w, (q & 1) @ w


def quadrant_freqs(u, v, scale):
    """Per level, the share of edges in quadrants a, b, c, d (row bit, column bit)."""
    out = np.empty((scale, 4))
    for lev in range(scale):
        bit = scale - 1 - lev
        q = 2 * ((u >> bit) & 1) + ((v >> bit) & 1)
        out[lev] = np.bincount(q, minlength=4) / len(q)
    return out


def test_quadrant_probabilities_match_rmat_and_a_numpy_reference():
    scale, m = 6, 200_000
    u, v = rmat_edges(3, scale, 0, m)  # raw ids: no scramble
    ours = quadrant_freqs(u, v, scale)
    ref = quadrant_freqs(*numpy_rmat(np.random.default_rng(0), scale, m), scale)
    p = np.array(RMAT_ABCD)
    tol = 5 * np.sqrt(p * (1 - p) / m)  # 5 sigma of a binomial share
    assert np.all(np.abs(ours - p) < tol), ours
    assert np.all(np.abs(ref - p) < tol)
    assert np.all(np.abs(ours - ref) < 1.5 * tol)
    # levels are independent: the joint law of the top two levels is the Kronecker product
    cell = 4 * (2 * (u >> 5 & 1) + (v >> 5 & 1)) + 2 * (u >> 4 & 1) + (v >> 4 & 1)
    joint = np.bincount(cell, minlength=16) / m
    expect = np.kron(p, p)
    assert np.all(np.abs(joint - expect) < 5 * np.sqrt(expect * (1 - expect) / m) + 1e-4)


def test_degree_skew_is_what_rmat_predicts():
    scale, ef = 14, 16
    n, m = 1 << scale, ef << scale
    s, d = rmat_edges(1, scale, 0, m)
    keep = s != d
    ours = np.bincount(np.concatenate([s[keep], d[keep]]), minlength=n)
    rs, rd = numpy_rmat(np.random.default_rng(1), scale, m)
    keep = rs != rd
    ref = np.bincount(np.concatenate([rs[keep], rd[keep]]), minlength=n)

    def top1(deg):
        return np.sort(deg)[::-1][:n // 100].sum() / deg.sum()

    assert top1(ours) > 0.3  # uniform sources would give ~0.02
    assert abs(top1(ours) - top1(ref)) < 0.03
    assert abs(np.count_nonzero(ours) - np.count_nonzero(ref)) < 0.02 * n
    # the heaviest node of R-MAT is raw id 0 (all quadrant bits 0)
    assert ours.argmax() == 0 and ref.argmax() == 0


def test_blocks_are_pure_functions_of_their_position():
    full_s, full_d = rmat_edges(7, 10, 0, 5000)
    s, d = rmat_edges(7, 10, 1234, 4321)
    np.testing.assert_array_equal(s, full_s[1234:4321])
    np.testing.assert_array_equal(d, full_d[1234:4321])
    f = rmat_features(7, 0, 300, 33, 5)
    np.testing.assert_array_equal(rmat_features(7, 100, 250, 33, 5), f[100:250])
    f32 = rmat_features(7, 0, 300, 33, 5, dtype=np.float32)
    np.testing.assert_array_equal(f, f32.astype(np.float16))  # the numba cast is NumPy's
    assert abs(float(f32.std()) - np.sqrt(1 + 1)) < 0.1  # unit noise + unit-variance centroid
    lab = node_labels(7, 0, 300, 5)
    assert set(np.unique(lab)) == set(range(5))
    # features carry the class: rows are nearer their own centroid than any other
    cent = np.stack([f32[lab == k].mean(0) for k in range(5)])
    dist = ((f32[:, None, :] - cent[None]) ** 2).sum(-1)
    assert (dist.argmin(1) == lab).mean() > 0.9


@pytest.fixture(scope="module")
def rmat_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("rmat") / "ds"
    synth_rmat(root, 12, 8, dim=16, seed=5, progress=False)
    return root


def _adjacency(root):
    e = np.load(root / "edges.npy")
    n = np.load(root / "label.npy").shape[0]
    s, d = e[0].astype(np.int64), e[1].astype(np.int64)
    keep = s != d
    a = sp.coo_matrix((np.ones(keep.sum(), np.int8), (s[keep], d[keep])), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(np.int8).tocsr()
    return a


def test_dataset_files(rmat_dir):
    spec = RmatSpec(12, 8, dim=16, seed=5)
    e = np.load(rmat_dir / "edges.npy")
    assert e.shape == (2, 8 << 12) and e.dtype == np.int32
    feat = np.load(rmat_dir / "feat.npy")
    assert feat.shape == (4096, 16) and feat.dtype == np.float16
    np.testing.assert_array_equal(feat, rmat_features(5, 0, 4096, 16, 16))
    meta = json.loads((rmat_dir / "meta.json").read_text())
    deg = np.asarray(_adjacency(rmat_dir).sum(1)).ravel()  # distinct neighbours
    assert meta["connected_nodes"] == np.count_nonzero(deg)
    # ids scrambled: the edges are the raw R-MAT edges through the seed's permutation
    perm = _scramble(spec)
    s, d = rmat_edges(5, 12, 0, 8 << 12)
    np.testing.assert_array_equal(e[0], perm[s])
    np.testing.assert_array_equal(e[1], perm[d])
    assert sorted(perm.tolist()) == list(range(4096)) and perm[0] != 0
    # ... so the degree does not follow the id (raw: id 0 is the top hub, high ids are empty)
    ids = np.arange(4096)
    assert abs(np.corrcoef(ids, deg)[0, 1]) < 0.05
    assert deg[:2048].sum() < 0.6 * deg.sum()
    splits = {k: np.load(rmat_dir / f"{k}.npy") for k in ("train", "valid", "test")}
    t = splits["train"]
    assert t.size == round(0.01 * meta["connected_nodes"]) == meta["splits"]["train"]
    assert splits["valid"].size == splits["test"].size == t.size // 4
    allids = np.concatenate(list(splits.values()))
    assert np.unique(allids).size == allids.size and np.all(deg[allids] > 0)
    assert all(np.all(np.diff(v) > 0) for v in splits.values())


def test_train_split_is_clustered(rmat14):
    """The train nodes' neighbourhoods overlap far more than a uniform sample's, and they hold
    far more edges among themselves."""
    root = rmat14
    a = _adjacency(root)
    deg = np.asarray(a.sum(1)).ravel()
    train = np.load(root / "train.npy")
    connected = np.flatnonzero(deg > 0)

    def stats(ids):
        rows = a[ids]
        union = np.count_nonzero(np.asarray(rows.sum(0)).ravel())
        inside = a[ids][:, ids].nnz
        return union / rows.nnz, inside  # distinct neighbours per neighbour slot, inner edges

    rng = np.random.default_rng(0)
    uni = [stats(np.sort(rng.choice(connected, train.size, replace=False))) for _ in range(5)]
    u_ratio, u_inside = np.mean([x[0] for x in uni]), np.mean([x[1] for x in uni])
    t_ratio, t_inside = stats(train)
    assert t_ratio < 0.7 * u_ratio, (t_ratio, u_ratio)
    assert t_inside > 3 * u_inside + 10, (t_inside, u_inside)
    # ... without being a set of hubs: the typical member's degree is the graph's typical one
    assert np.median(deg[train]) < 3 * np.median(deg[connected])


@pytest.fixture(scope="module")
def rmat14(tmp_path_factory):
    root = tmp_path_factory.mktemp("rmat14") / "ds"
    synth_rmat(root, 14, 16, dim=8, seed=2, progress=False)
    return root


def test_ball_is_deterministic_and_stops_at_the_size(rmat14):
    e = np.load(rmat14 / "edges.npy", mmap_mode="r")
    keep = e[0] != e[1]
    deg = np.bincount(np.concatenate([e[0][keep], e[1][keep]]), minlength=1 << 14)
    b1, st = clustered_ball(e[0], e[1], deg, 100, 9)
    assert b1.size == 100 and np.unique(b1).size == 100 and st["roots"] >= 8
    assert np.all(deg[b1] > 0)
    np.testing.assert_array_equal(clustered_ball(e[0], e[1], deg, 100, 9)[0], b1)


def test_output_does_not_depend_on_thread_count(tmp_path):
    before = numba.get_num_threads()
    out = {}
    try:
        for k in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(k)
            root = tmp_path / f"t{k}"
            synth_rmat(root, 11, 8, dim=24, seed=3, progress=False)
            out[k] = {f: (root / f).read_bytes() for f in sorted(os.listdir(root))
                      if f != "meta.json"}
    finally:
        numba.set_num_threads(before)
    first, *rest = out.values()
    assert all(r == first for r in rest)
    assert set(first) == {"edges.npy", "feat.npy", "label.npy", "train.npy", "valid.npy",
                          "test.npy", SPEC_NAME}


def test_spec_ingests_into_the_expected_store(rmat_dir, tmp_path):
    import featurestore as fs
    from preprocess.jobs.spec_steps import run_spec

    run_spec(rmat_dir / SPEC_NAME, tmp_path / "s.store", progress=False)
    s = fs.open_store(tmp_path / "s.store")
    e = np.load(rmat_dir / "edges.npy")
    indptr, indices = csc_of(s, ("node", "to", "node"))
    ref_ptr, ref_ind = reference_csc(e[0], e[1], 4096, 4096, coalesce=True,
                                     drop_self_loops=True, symmetrize=True)
    np.testing.assert_array_equal(indptr, ref_ptr)
    np.testing.assert_array_equal(indices, ref_ind)
    feats = s.features("node", "feat")
    np.testing.assert_array_equal(feats.gather(np.arange(4096)), np.load(rmat_dir / "feat.npy"))
    for k in ("train", "valid", "test"):
        np.testing.assert_array_equal(np.sort(np.asarray(s.split(k, "node"))),
                                      np.load(rmat_dir / f"{k}.npy"))
    s.close()


def test_cli_end_to_end(tmp_path, capsys):
    from featurestore.cli import main

    root, store = tmp_path / "ds", tmp_path / "ds.store"
    assert main(["synth", "rmat", str(root), "--scale", "9", "--edge-factor", "4", "--dim", "8",
                 "--dtype", "float32", "--seed", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "512 nodes" in out and "2,048 edges drawn" in out
    assert main(["preprocess", "spec", str(root / SPEC_NAME), str(store), "--no-progress"]) == 0
    import featurestore as fs

    s = fs.open_store(store)
    assert s.features("node", "feat").dtype == np.float32
    assert s.num_nodes("node") == 512
    s.close()
    assert main(["synth", "rmat", str(root), "--scale", "0"]) == 2
    assert "Expected an integer scale" in capsys.readouterr().err
