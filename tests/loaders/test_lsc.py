"""OGB-LSC's MAG240M interface over a store, and PyG's legacy NeighborSampler call over the
relational view (what OGB-LSC's rgnn.py trains with), against brute force."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import featurestore as fs
from loaders.datasets.lsc import MAG240MDataset, MAG240MEvaluator, SubmissionShapeError
from loaders.pyg import LegacyNeighborSampler
from loaders.sample.relational import HomogeneousGraph

ORDER = ["paper", "author", "institution"]  # rgnn.py's numbering


@pytest.fixture(scope="module")
def rel_store(tmp_path_factory):
    from loaders.datasets.synthetic import mag_like_store

    path = mag_like_store(tmp_path_factory.mktemp("lsc") / "s", num_papers=500, num_authors=300,
                          num_institutions=20, feat_dim=8, seed=11, derive_features=True)
    with fs.open_store(path) as s:
        yield s


def test_dataset_answers_as_ogb_lsc(rel_store, tmp_path):
    s = rel_store
    ds = MAG240MDataset(s.url)
    assert (ds.num_papers, ds.num_authors, ds.num_institutions) == (500, 300, 20)
    assert ds.num_paper_features == 8 and ds.num_classes == s.num_classes("paper")
    np.testing.assert_array_equal(ds.get_idx_split("train"), s.split("train", "paper"))
    np.testing.assert_array_equal(ds.get_idx_split("test"), s.split("test", "paper"))
    assert list(ds.get_idx_split()) == ["train", "valid", "test-whole", "test-dev",
                                        "test-challenge"]
    lab = np.asarray(s.labels("paper"))
    y = ds.paper_label
    assert np.isnan(y[lab < 0]).all() and (y[lab >= 0] == lab[lab >= 0]).all()
    ei = ds.edge_index("author", "institution")
    indptr, indices = s.csc(("author", "affiliated_with", "institution"))
    pairs = {(int(a), int(i)) for i in range(len(indptr) - 1)
             for a in indices[indptr[i]:indptr[i + 1]]}
    assert set(map(tuple, ei.T.tolist())) == pairs
    assert ds.edge_index("author", "writes", "paper").shape[1] == s.num_edges(
        ("author", "writes", "paper"))
    ev = MAG240MEvaluator()
    assert ev.eval({"y_true": np.array([1, 2, 3]), "y_pred": torch.tensor([1, 0, 3])})["acc"] \
        == pytest.approx(2 / 3)
    with pytest.raises(AssertionError, match=r"shape \(88092,\) for test-dev"):
        ev.save_test_submission({"y_pred": np.array([1, 2])}, str(tmp_path))
    assert not list(tmp_path.iterdir())  # refused before writing
    twin = MAG240MEvaluator({"test-dev": 2, "test-challenge": 3})
    for bad in (np.array([[1, 2]]), np.array([1, 2, 3]), np.array([1.5, 2.0]),
                np.array([1, 40_000])):
        with pytest.raises(SubmissionShapeError):
            twin.save_test_submission({"y_pred": bad}, str(tmp_path))
    twin.save_test_submission({"y_pred": torch.tensor([1, 2])}, str(tmp_path))
    assert np.load(tmp_path / "y_pred_mag240m_test-dev.npz")["y_pred"].tolist() == [1, 2]


def _ogb_split_test(split_dict):
    """OGB-LSC's split_test (ogb/lsc/utils.py), position by position: 'test' becomes
    'test-whole', positions i % 5 < 3 'test-dev', the rest 'test-challenge'."""
    out = {k: v for k, v in split_dict.items() if k != "test"}
    test = list(np.asarray(split_dict["test"]))
    out["test-whole"] = np.array(test)
    out["test-dev"] = np.array([t for i, t in enumerate(test) if i % 5 in (0, 1, 2)])
    out["test-challenge"] = np.array([t for i, t in enumerate(test) if i % 5 in (3, 4)])
    return out


@pytest.fixture(scope="module")
def mag_raw(tmp_path_factory):
    from preprocess.synth.mag240m import MagSynthSpec, synth_mag240m

    root = tmp_path_factory.mktemp("magraw")
    spec = MagSynthSpec(paper=400, author=300, institution=10, writes=800, affiliated_with=200,
                        cites=1500, feat_dim=4, num_classes=5)
    paths = synth_mag240m(root, 0, seed=1, labeled_share=0.6, progress=False, spec=spec)
    return root, paths


def _preprocessed(root, out):
    from preprocess.ogb.mag240m import preprocess_mag240m

    preprocess_mag240m(root, out, progress=False)
    return fs.open_store(out)


def test_test_whole_is_ogb_split_test_of_the_raw_split(mag_raw, tmp_path):
    """Our preprocessor stores test-dev/test-challenge; get_idx_split() rebuilds OGB-LSC's
    whole dictionary from them, test-whole in the raw 'test' order."""
    root, paths = mag_raw
    store = _preprocessed(root, tmp_path / "s")
    assert "test-whole" not in store.split_names and "test" not in store.split_names
    want = _ogb_split_test(torch.load(paths.split_dict, weights_only=False))
    assert len(want["test-whole"]) > 10
    orig = np.asarray(store.orig_ids("paper"))
    ds = MAG240MDataset(store)
    got = ds.get_idx_split()
    assert list(got) == ["train", "valid", "test-whole", "test-dev", "test-challenge"]
    assert list(got) == list(want)  # OGB's key order too
    for k, ids in got.items():
        np.testing.assert_array_equal(orig[ids], want[k])
        np.testing.assert_array_equal(ds.get_idx_split(k), ids)
    np.testing.assert_array_equal(ds.get_idx_split("test"), got["test-dev"])


def test_test_whole_of_a_store_with_a_test_split(rel_store):
    ds = MAG240MDataset(rel_store)
    test = np.asarray(rel_store.split("test", "paper"))
    want = _ogb_split_test({"test": test})
    for k in ("test-whole", "test-dev", "test-challenge"):
        np.testing.assert_array_equal(ds.get_idx_split(k), want[k])
    np.testing.assert_array_equal(ds.get_idx_split("test"), test)  # the store's own split


def test_no_test_whole_when_the_parts_are_not_a_division(mag_raw, tmp_path):
    import shutil

    from loaders.errors import LoaderArgumentError
    from preprocess.ogb.layout import MagPaths

    root, paths = mag_raw
    copy = tmp_path / "raw"
    shutil.copytree(paths.root, copy / os.path.basename(paths.root))
    torch.save({"train": np.arange(4), "valid": np.arange(4, 6), "test-dev": np.array([9, 7]),
                "test-challenge": np.array([8])}, MagPaths.under(copy).split_dict)
    ds = MAG240MDataset(_preprocessed(copy, tmp_path / "s"))
    assert list(ds.get_idx_split()) == ["train", "valid", "test-dev", "test-challenge"]
    with pytest.raises(LoaderArgumentError, match="test-whole"):
        ds.get_idx_split("test-whole")


def test_submission_files_are_ogb_lscs(tmp_path):
    ev = MAG240MEvaluator({"test-whole": 3, "test-dev": 3, "test-challenge": 3})
    assert MAG240MEvaluator().test_sizes == {"test-whole": 146_818, "test-dev": 88_092,
                                             "test-challenge": 58_726}  # OGB-LSC's asserts
    want = {"test-whole": "y_pred_mag240m.npz", "test-dev": "y_pred_mag240m_test-dev.npz",
            "test-challenge": "y_pred_mag240m_test-challenge.npz"}
    for k, (mode, name) in enumerate(want.items()):
        ev.save_test_submission({"y_pred": torch.tensor([k, 2, 300])}, str(tmp_path), mode=mode)
        y = np.load(tmp_path / name)["y_pred"]
        assert y.dtype == np.int16 and y.tolist() == [k, 2, 300]
    with pytest.raises(AssertionError, match="test-whole"):  # OGB-LSC asserts the mode
        ev.save_test_submission({"y_pred": np.zeros(3)}, str(tmp_path), mode="test")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(want.values())


def _brute(s):
    """Homogeneous edges {(src, dst, type)} and features, numbered in ORDER."""
    off = dict(zip(ORDER, np.cumsum([0] + [s.num_nodes(t) for t in ORDER])[:-1].tolist()))
    keys = set()
    for k, et in enumerate(s.edge_types):
        indptr, indices = s.csc(et)
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        keys |= set(zip((np.asarray(indices) + off[et.src]).tolist(),
                        (dst + off[et.dst]).tolist(), [k] * len(dst)))
    x = np.concatenate([s.features(t, "feat").numpy() for t in ORDER])
    return off, keys, x


def test_legacy_sampler_without_torch_sparse_says_what_to_install(rel_store, monkeypatch):
    import sys

    from featurestore.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "torch_sparse", None)  # `import torch_sparse` fails
    with pytest.raises(MissingDependencyError, match="pip install torch-sparse"):
        LegacyNeighborSampler(HomogeneousGraph(rel_store, ORDER), sizes=[2])


def test_legacy_neighbor_sampler_batches(rel_store):
    pytest.importorskip("torch_sparse")
    s = rel_store
    off, keys, x = _brute(s)
    g = HomogeneousGraph(s, ORDER)
    feats = g.x
    assert feats.shape == x.shape and g.num_nodes() == x.shape[0]
    ids = np.random.default_rng(0).integers(0, x.shape[0], 300)
    np.testing.assert_array_equal(feats[torch.from_numpy(ids)], x[ids])
    train = torch.from_numpy(np.asarray(s.split("train", "paper")) + off["paper"])
    seen = []

    def convert(batch_size, n_id, adjs):
        return batch_size, n_id, adjs

    loader = LegacyNeighborSampler(g, node_idx=train, sizes=[4, 3], return_e_id=False,
                                   transform=convert, batch_size=64, shuffle=False,
                                   num_workers=2)
    assert len(loader) == -(-train.numel() // 64)
    for batch_size, n_id, adjs in loader:
        seen.append(n_id[:batch_size])
        assert len(adjs) == 2
        n_src_prev = n_id.numel()
        for adj_t, e_id, size in adjs:  # input layer first: targets are a prefix of sources
            assert e_id is None and size[0] == n_src_prev and adj_t.sparse_sizes() == size[::-1]
            dst, src, et = adj_t.coo()
            got = set(zip(n_id[src].tolist(), n_id[dst].tolist(), et.tolist()))
            assert got and got <= keys
            n_src_prev = size[1]
        assert n_src_prev == batch_size
    assert torch.equal(torch.cat(seen), train)  # seeds first, in order


def test_homogeneous_graph_refuses_mixed_seeds(rel_store):
    from loaders.errors import LoaderArgumentError

    g = HomogeneousGraph(rel_store, ORDER)
    with pytest.raises(LoaderArgumentError, match="one node type"):
        g.seeds([0, 499, 500])  # a paper, a paper, an author
    with pytest.raises(LoaderArgumentError, match="every node type"):
        HomogeneousGraph(rel_store, ["paper", "author"])


def test_review_fixes(rel_store):
    """A mask as seeds is its nonzero ids; negative feature ids raise; one layer gives a bare
    Adj (as PyG's legacy sampler); the evaluator refuses mismatched shapes."""
    from featurestore.errors import IdsOutOfRangeError
    from loaders.errors import LoaderArgumentError

    g = HomogeneousGraph(rel_store, ORDER)
    mask = torch.zeros(g.num_nodes(), dtype=torch.bool)
    mask[[3, 7]] = True
    assert g.seeds(mask)[0] == "paper"
    np.testing.assert_array_equal(g.seeds(mask)[1], [3, 7])
    with pytest.raises(LoaderArgumentError, match="boolean mask"):
        g.seeds(mask[:5])
    for bad in ([-1], [g.num_nodes()], [[0, 1]]):
        with pytest.raises(IdsOutOfRangeError):
            g.x[np.array(bad)]
    with pytest.raises(LoaderArgumentError, match="one shape"):
        MAG240MEvaluator().eval({"y_true": np.array([1, 1, 2]), "y_pred": np.array([1])})
    pytest.importorskip("torch_sparse")
    bs, n_id, adj = next(iter(LegacyNeighborSampler(g, [2], node_idx=mask, batch_size=4)))
    assert bs == 2 and n_id[:2].tolist() == [3, 7] and hasattr(adj, "adj_t")


def test_dataset_root_as_ogb_lays_it_out(rel_store, tmp_path):
    """OGB-LSC takes the parent of mag240m_kddcup2021: a store there opens from either path."""
    import shutil

    shutil.copytree(rel_store.url, tmp_path / "mag240m_kddcup2021")
    by_parent = MAG240MDataset(tmp_path)
    by_store = MAG240MDataset(tmp_path / "mag240m_kddcup2021")
    assert by_parent.root == by_store.root and by_parent.num_papers == 500
    with pytest.raises(fs.FeatureStoreError):
        MAG240MDataset(tmp_path / "nowhere")
