"""MAG240M ingest: a synthetic twin in the official layout round-trips into the store."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import featurestore as fs
from preprocess.errors import ManifestMismatchError
from preprocess.ogb import mag240m as magjob
from preprocess.ogb.derive import mean_reference
from preprocess.ogb.errors import RawDataError, RawFileNotFoundError, UnsafePickleError
from preprocess.ogb.layout import MagPaths
from preprocess.ogb.mag240m import preprocess_mag240m

from ogb_helpers import MAG_SPEC, assert_same_edges, by_orig

RELS = [("author", "writes", "paper"), ("author", "affiliated_with", "institution"),
        ("paper", "cites", "paper")]


def _raw(root):
    p = MagPaths.under(root)
    meta = torch.load(p.meta, weights_only=False)  # test side only: our own file
    split = torch.load(p.split_dict, weights_only=False)
    edges = {r: np.load(p.edge_index(*r)) for r in RELS}
    return p, meta, split, edges


@pytest.fixture(scope="module")
def mag_store(mag_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("magstore") / "store"
    job = preprocess_mag240m(mag_root, out, derive_features="mean", budget_bytes=16 << 20,
                             progress=False)
    assert "derive:author-feat" in job.summary()
    return fs.open_store(out)


def test_schema_is_exactly_toundirected(mag_store, mag_root):
    _, meta, _, _ = _raw(mag_root)
    s = mag_store
    assert s.node_types == ["author", "institution", "paper"]
    for nt in s.node_types:
        assert s.num_nodes(nt) == meta[nt]
    assert sorted(map(tuple, s.edge_types)) == sorted([
        ("author", "writes", "paper"), ("paper", "rev_writes", "author"),
        ("author", "affiliated_with", "institution"),
        ("institution", "rev_affiliated_with", "author"), ("paper", "cites", "paper")])
    assert s.split_names == ["test-challenge", "test-dev", "train", "valid"]
    assert s.feature_names("paper") == ["feat"]
    assert s.value_names("paper") == ["label", "year"]
    assert s.feature_names("author") == ["feat"] and s.feature_names("institution") == ["feat"]


def test_every_edge_round_trips(mag_store, mag_root):
    _, meta, _, edges = _raw(mag_root)
    s = mag_store
    for (a, r, b), e in edges.items():
        if a == b:  # symmetrised: both directions, duplicates removed, self-loops kept
            src = np.concatenate([e[0], e[1]])
            dst = np.concatenate([e[1], e[0]])
            assert np.any(e[0] == e[1]), "the twin should hold self-loops"
            assert_same_edges(s, (a, r, b), src, dst, meta[b])
        else:
            assert_same_edges(s, (a, r, b), e[0], e[1], meta[b])
            assert_same_edges(s, (b, f"rev_{r}", a), e[1], e[0], meta[a])
        assert np.unique(e[0] * meta[b] + e[1]).shape[0] < e.shape[1], "twin has duplicates"


def test_features_labels_years_round_trip(mag_store, mag_root):
    p, meta, _, _ = _raw(mag_root)
    s = mag_store
    feat = np.load(p.paper("node_feat"))
    got = s.features("paper", "feat")
    assert got.dtype == np.float16 and got.shape == feat.shape
    np.testing.assert_array_equal(by_orig(s, "paper", got.numpy()), feat)
    # every row through the gather path too, in a shuffled order
    ids = np.random.default_rng(0).permutation(meta["paper"])
    np.testing.assert_array_equal(got.gather(ids), feat[np.asarray(s.orig_ids("paper"))[ids]])
    raw_lab = np.load(p.paper("node_label"))
    want = np.where(np.isnan(raw_lab), -1, raw_lab).astype(np.int64)
    lab = by_orig(s, "paper", s.labels("paper"))
    assert lab.dtype == np.int64
    np.testing.assert_array_equal(lab, want)
    assert (raw_lab == -1).any() and np.isnan(raw_lab).any() and (raw_lab >= 0).any()
    np.testing.assert_array_equal(by_orig(s, "paper", s.values("paper", "year")),
                                  np.load(p.paper("node_year")))


def test_splits_follow_ogb_rule(mag_store, mag_root):
    _, _, split, _ = _raw(mag_root)
    s = mag_store
    orig = np.asarray(s.orig_ids("paper"))
    test = split["test"]
    idx = np.arange(len(test))
    want = {"train": split["train"], "valid": split["valid"],
            "test-dev": test[idx % 5 < 3], "test-challenge": test[idx % 5 >= 3]}
    for k, v in want.items():
        np.testing.assert_array_equal(orig[np.asarray(s.split(k, "paper"))], v)
    assert len(want["test-dev"]) + len(want["test-challenge"]) == len(test) > 0


def test_derived_mean_features_match_numpy(mag_store, mag_root):
    p, meta, _, edges = _raw(mag_root)
    s = mag_store
    feat = np.load(p.paper("node_feat"))

    def dedup_csc(src, dst, n_dst):
        c = np.unique(dst.astype(np.int64) * (src.max() + 1) + src)
        d, sr = c // (src.max() + 1), c % (src.max() + 1)
        indptr = np.zeros(n_dst + 1, np.int64)
        np.add.at(indptr, d + 1, 1)
        return np.cumsum(indptr), sr

    w = edges[("author", "writes", "paper")]
    ip, ix = dedup_csc(w[1], w[0], meta["author"])  # author <- its papers
    want_author = mean_reference(ip, ix, feat)
    got_author = by_orig(s, "author", s.features("author", "feat").numpy())
    np.testing.assert_allclose(got_author.astype(np.float32), want_author.astype(np.float32),
                               rtol=2e-3, atol=2e-3)
    assert not np.any(got_author[np.diff(ip) == 0]), "authors without papers get zeros"
    a = edges[("author", "affiliated_with", "institution")]
    ip2, ix2 = dedup_csc(a[0], a[1], meta["institution"])
    want_inst = mean_reference(ip2, ix2, got_author)
    got_inst = by_orig(s, "institution", s.features("institution", "feat").numpy())
    np.testing.assert_allclose(got_inst.astype(np.float32), want_inst.astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def test_resume_after_crash_and_manifest_check(mag_root, tmp_path, monkeypatch):
    out = tmp_path / "store"
    real = magjob.build_csc
    calls = []

    def failing(w, etype, *a, **k):
        calls.append(tuple(etype))
        if tuple(etype) == ("paper", "cites", "paper"):
            raise KeyboardInterrupt("simulated crash")
        return real(w, etype, *a, **k)

    monkeypatch.setattr(magjob, "build_csc", failing)
    with pytest.raises(KeyboardInterrupt):
        preprocess_mag240m(mag_root, out, budget_bytes=16 << 20, progress=False)
    with pytest.raises(fs.IncompleteStoreError):
        fs.open_store(out)
    monkeypatch.setattr(magjob, "build_csc", real)
    with pytest.raises(ManifestMismatchError):
        preprocess_mag240m(mag_root, out, derive_features="mean", progress=False)
    job = preprocess_mag240m(mag_root, out, budget_bytes=16 << 20, progress=False)
    status = {st.name: st.status for st in job.steps}
    assert status["features:paper"] == "done before"
    assert status["csc:author__writes__paper"] == "done before"
    assert status["csc:paper__cites__paper"] == "ran"
    s = fs.open_store(out)
    e = np.load(MagPaths.under(mag_root).edge_index("paper", "cites", "paper"))
    assert_same_edges(s, ("paper", "cites", "paper"), np.concatenate([e[0], e[1]]),
                      np.concatenate([e[1], e[0]]), MAG_SPEC.paper)


def test_errors_name_the_file(mag_root, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(MagPaths.under(mag_root).root, root / "mag240m_kddcup2021")
    p = MagPaths.under(root)
    # a label that is no class
    lab = np.load(p.paper("node_label"))
    lab[7] = 10_000
    np.save(p.paper("node_label"), lab)
    with pytest.raises(RawDataError, match="node_label.*node 7"):
        preprocess_mag240m(root, tmp_path / "s1", progress=False)
    # a split_dict that carries another pickled object is refused, nothing executed
    flag = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {flag}",))

    torch.save({"train": np.arange(3), "valid": np.arange(3), "test": np.arange(3),
                "x": Evil()}, p.split_dict)
    with pytest.raises(UnsafePickleError, match="split_dict.pt"):
        magjob.mag_splits(p, MAG_SPEC.paper)
    assert not flag.exists()
    # a missing edge file
    os.remove(p.edge_index("author", "writes", "paper"))
    with pytest.raises(FileNotFoundError, match="author___writes___paper"):
        preprocess_mag240m(root, tmp_path / "s2", progress=False)
    os.remove(p.meta)
    with pytest.raises(RawFileNotFoundError, match="meta.pt"):
        preprocess_mag240m(root, tmp_path / "s3", progress=False)


def test_declared_counts_without_edges_are_refused(mag_root, tmp_path):
    """A meta.pt claiming far more authors than the edges name (issue 10 item 11)."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(MagPaths.under(mag_root).root, root / "mag240m_kddcup2021")
    p = MagPaths.under(root)
    meta = torch.load(p.meta, weights_only=True)
    meta["author"] = int(meta["author"]) * 40
    torch.save(meta, p.meta)
    with pytest.raises(RawDataError, match="meta.pt.*author"):
        preprocess_mag240m(root, tmp_path / "s", progress=False)
    assert not (tmp_path / "s" / "nodes").exists()  # refused before any array was written


def test_split_ids_out_of_range_refused(mag_root, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(MagPaths.under(mag_root).root, root / "mag240m_kddcup2021")
    p = MagPaths.under(root)
    torch.save({"train": np.array([0, MAG_SPEC.paper]), "valid": np.arange(2),
                "test": np.arange(2)}, p.split_dict)
    with pytest.raises(RawDataError, match=r"split_dict.pt"):
        magjob.mag_splits(p, MAG_SPEC.paper)


def test_presplit_test_dev_is_taken_as_is(mag_root, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(MagPaths.under(mag_root).root, root / "mag240m_kddcup2021")
    p = MagPaths.under(root)
    torch.save({"train": np.arange(4), "valid": np.arange(4, 6), "test-dev": np.array([9, 7]),
                "test-challenge": np.array([8])}, p.split_dict)
    sp = magjob.mag_splits(p, MAG_SPEC.paper)
    np.testing.assert_array_equal(sp["test-dev"], [9, 7])
    np.testing.assert_array_equal(sp["test-challenge"], [8])


def test_cli(mag_root, tmp_path, capsys):
    from featurestore.cli import main

    out = tmp_path / "s"
    assert main(["preprocess", "mag240m", str(mag_root), str(out), "--dry-run",
                 "--no-progress"]) == 0
    assert "csc:paper__cites__paper" in capsys.readouterr().out and not out.exists()
    assert main(["preprocess", "mag240m", str(mag_root), str(out), "--memory", "64MiB",
                 "--no-progress"]) == 0
    assert "features:paper" in capsys.readouterr().out
    assert fs.open_store(out).num_nodes("paper") == MAG_SPEC.paper
    # a complete store is not redone; a missing ROOT is a clean error (exit 2)
    assert main(["preprocess", "mag240m", str(mag_root), str(out), "--no-progress"]) == 0
    assert "done before" in capsys.readouterr().out
    assert main(["preprocess", "mag240m", str(tmp_path / "none"), str(tmp_path / "x"),
                 "--no-progress"]) == 2
    assert "meta.pt" in capsys.readouterr().err


def test_split_dict_of_torch_tensors(mag_root, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(MagPaths.under(mag_root).root, root / "mag240m_kddcup2021")
    p = MagPaths.under(root)
    torch.save({"train": torch.arange(4), "valid": torch.tensor([5, 6]),
                "test": torch.arange(10, 20)}, p.split_dict)
    sp = magjob.mag_splits(p, MAG_SPEC.paper)
    np.testing.assert_array_equal(sp["train"], np.arange(4))
    np.testing.assert_array_equal(sp["test-dev"], [10, 11, 12, 15, 16, 17])
    np.testing.assert_array_equal(sp["test-challenge"], [13, 14, 18, 19])
