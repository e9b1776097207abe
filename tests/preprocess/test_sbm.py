"""``featurestore synth sbm``: the block structure against the model's expectation (from p_in and
p_out, counted pair by pair with NumPy), block-correlated labels and features, determinism
whatever the block size, and the spec ingested into a store with the same edges."""

from __future__ import annotations

import numpy as np
import pytest

from pp_helpers import csc_of, reference_csc
from preprocess.errors import BadInputError
from preprocess.synth.sbm import SPEC_NAME, SbmSpec, sbm_blocks, sbm_edges, synth_sbm


def expected_intra_share(n, b, p_in, p_out):
    """Edges inside blocks over all edges, from the pair counts of equal blocks."""
    sizes = np.full(b, n // b) + (np.arange(b) < n % b)
    inside = p_in * float((sizes * (sizes - 1) / 2).sum())
    across = p_out * float((np.sum(sizes) ** 2 - np.sum(sizes ** 2)) / 2)
    return inside / (inside + across)


def test_edges_follow_the_block_model():
    n, b, p_in, p_out = 6000, 6, 0.01, 0.0008
    spec = SbmSpec.from_probabilities(n, b, p_in, p_out)
    s, d, inside = sbm_edges(spec, 0, spec.num_edges)
    blk = sbm_blocks(spec)
    assert np.bincount(blk).tolist() == [n // b] * b          # equal blocks
    same = blk[s] == blk[d]
    assert inside == int(same.sum())
    m = s.shape[0]
    want = expected_intra_share(n, b, p_in, p_out)
    assert abs(same.mean() - want) < 5 * np.sqrt(want * (1 - want) / m)
    assert not np.any(s == d)
    # edges per node: d_in + d_out from the probabilities (both ends counted)
    assert abs(2 * m / n - (p_in * (n / b - 1) + p_out * (n - n / b))) < 0.01
    # every block pair gets its share: inside ~ m q / b per block, across ~ uniform over pairs
    pair = np.minimum(blk[s], blk[d]) * b + np.maximum(blk[s], blk[d])
    counts = np.bincount(pair, minlength=b * b).reshape(b, b)
    diag = np.diag(counts)
    assert np.all(np.abs(diag - diag.mean()) < 5 * np.sqrt(diag.mean()))
    off = counts[np.triu_indices(b, 1)]
    assert np.all(np.abs(off - off.mean()) < 5 * np.sqrt(off.mean()))
    # uniform within a block: no node of a block is favoured (degrees near Poisson)
    deg = np.bincount(np.concatenate([s, d]), minlength=n)
    assert deg.var() / deg.mean() < 1.3


def test_blocks_are_pure_functions_of_their_position():
    spec = SbmSpec(3000, 5, 6.0, 2.0, seed=3)
    s, d, k = sbm_edges(spec, 0, spec.num_edges)
    s1, d1, k1 = sbm_edges(spec, 0, 1234)
    s2, d2, k2 = sbm_edges(spec, 1234, spec.num_edges)
    np.testing.assert_array_equal(s, np.concatenate([s1, s2]))
    np.testing.assert_array_equal(d, np.concatenate([d1, d2]))
    assert k == k1 + k2
    other = sbm_edges(SbmSpec(3000, 5, 6.0, 2.0, seed=4), 0, 100)[0]
    assert not np.array_equal(other, s[:100])


def test_spec_checks():
    with pytest.raises(BadInputError, match="blocks"):
        SbmSpec(10, 6)
    with pytest.raises(BadInputError, match="p_in"):
        SbmSpec.from_probabilities(100, 2, 1.5, 0.1)
    with pytest.raises(BadInputError, match="single block"):
        SbmSpec(100, 1, 3.0, 1.0)


@pytest.fixture(scope="module")
def sbm_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sbm")
    synth_sbm(root, SbmSpec(3000, 6, 8.0, 2.0, dim=8, dtype="float32", seed=2,
                            label_noise=0.2), progress=False)
    return root


def test_labels_and_features_carry_the_blocks(sbm_dir):
    blk, lab = np.load(sbm_dir / "block.npy"), np.load(sbm_dir / "label.npy")
    x = np.load(sbm_dir / "feat.npy")
    agree = (lab == blk % 6).mean()  # 1 - noise + noise / classes
    assert abs(agree - (0.8 + 0.2 / 6)) < 5 * np.sqrt(0.17 * 0.83 / 3000)
    assert set(np.unique(lab)) == set(range(6))
    # features: centroid of the label plus unit noise -> nearest class mean recovers the label
    means = np.stack([x[lab == c].mean(0) for c in range(6)])
    near = np.argmin(((x[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (near == lab).mean() > 0.6
    tr = np.load(sbm_dir / "train.npy")
    assert abs(tr.size / 3000 - 0.1) < 0.03 and np.all(np.diff(tr) > 0)
    va, te = np.load(sbm_dir / "valid.npy"), np.load(sbm_dir / "test.npy")
    assert not (set(tr) & set(va)) and not (set(tr) & set(te)) and not (set(va) & set(te))


def test_spec_ingests_into_a_store_with_the_same_graph(sbm_dir, tmp_path):
    import featurestore as fs
    from preprocess.jobs.spec_steps import run_spec

    run_spec(sbm_dir / SPEC_NAME, tmp_path / "s.store", progress=False)
    e = np.load(sbm_dir / "edges.npy")
    with fs.open_store(tmp_path / "s.store") as s:
        indptr, indices = csc_of(s)
        ref_ptr, ref_ind = reference_csc(e[0], e[1], 3000, 3000, coalesce=True,
                                         drop_self_loops=True, symmetrize=True)
        np.testing.assert_array_equal(indptr, ref_ptr)
        np.testing.assert_array_equal(indices, ref_ind)
        blk = np.asarray(s.values("node", "block"))
        np.testing.assert_array_equal(blk, np.load(sbm_dir / "block.npy"))
        dst = np.repeat(np.arange(3000), np.diff(indptr))
        share = (blk[indices] == blk[dst]).mean()
        assert abs(share - 0.8) < 0.02  # duplicates coalesced: still the model's share
        np.testing.assert_array_equal(np.asarray(s.split("train", "node")),
                                      np.load(sbm_dir / "train.npy"))


def test_cli(tmp_path, capsys):
    from featurestore.cli import main

    root = tmp_path / "ds"
    assert main(["synth", "sbm", str(root), "--nodes", "1000", "--blocks", "4", "--p-in",
                 "0.02", "--p-out", "0.002", "--dim", "4", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "1,000 nodes in 4 blocks" in out and "spec.yaml" in out
    assert (root / SPEC_NAME).exists() and np.load(root / "feat.npy").shape == (1000, 4)
    assert main(["synth", "sbm", str(root), "--p-in", "0.1"]) == 2
    assert "--p-out" in capsys.readouterr().err
