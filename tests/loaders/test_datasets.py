"""The PyG/DGL/OGB dataset stand-ins answer what the store holds (numpy brute force)."""

import numpy as np
import pytest
import torch

import featurestore as fs
from loaders import NeighborLoader
from loaders.datasets.views import (SPLITS, AsNodePredDataset, DglNodePropPredDataset, LazyRows,
                              PygNodePropPredDataset, StoreData, StoreGraph, as_store)
from loaders.errors import LoaderArgumentError


def test_pyg_dataset_homogeneous(homo_store_path):
    ds = PygNodePropPredDataset("ogbn-synthetic", root=homo_store_path)
    store = ds.store
    data = ds[0]
    assert isinstance(data, StoreData) and as_store(data) is store
    feats = store.features()
    assert ds.num_features == feats.shape[1]
    assert ds.num_classes == int(store.labels().max()) + 1
    split = ds.get_idx_split()
    for key in ("train", "valid", "test"):
        assert split[key].dtype == torch.int64
        np.testing.assert_array_equal(split[key].numpy(), store.split(key))
    assert data.num_nodes == store.num_nodes()
    assert tuple(data.x.shape) == feats.shape and data.x.size(-1) == feats.shape[1]
    ids = np.random.default_rng(0).integers(0, store.num_nodes(), 50)
    np.testing.assert_array_equal(data.x[torch.from_numpy(ids)].numpy(), feats.gather(ids))
    np.testing.assert_array_equal(data.y[ids].numpy(), np.asarray(store.labels())[ids, None])
    mask = np.zeros(store.num_nodes(), bool)
    mask[store.split("train")] = True
    np.testing.assert_array_equal(data.train_mask.numpy(), mask)
    np.testing.assert_array_equal(data.x[data.train_mask].numpy(),
                                  feats.gather(np.flatnonzero(mask)))
    assert data.to("cpu", "x", "y") is data


def test_views_refuse_writes(homo_store_path):
    data = PygNodePropPredDataset(root=homo_store_path)[0]
    with pytest.raises(LoaderArgumentError, match="read-only store"):
        data.edge_index = None
    with pytest.raises(AttributeError, match="nope"):
        _ = data.nope


def test_homogeneous_view_has_the_whole_edge_index(homo_store_path, monkeypatch):
    """``data.edge_index`` of a homogeneous store: every edge once, as scipy reads the CSC
    arrays (column j holds the sources of node j), int64 and (2, E) as PyG's; refused with a
    named error past a quarter of the memory the process may use."""
    import scipy.sparse as sp

    from featurestore import sysmem
    from loaders.errors import LoaderMemoryError

    data = PygNodePropPredDataset(root=homo_store_path)[0]
    store = fs.open_store(homo_store_path)
    indptr, indices = (np.asarray(a) for a in store.csc(store.edge_types[0]))
    n = store.num_nodes()
    coo = sp.csc_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(n, n)).tocoo()
    ei = data.edge_index
    assert ei.dtype == torch.int64 and tuple(ei.shape) == (2, indices.shape[0])
    got = sorted(zip(ei[0].tolist(), ei[1].tolist()))
    assert got == sorted(zip(coo.row.tolist(), coo.col.tolist()))
    assert not store.edge_feature_names(store.edge_types[0]) and data.edge_attr is None
    monkeypatch.setattr(sysmem, "available_memory", lambda *a: 16 * indices.shape[0])
    with pytest.raises(LoaderMemoryError, match="quarter"):
        _ = data.edge_index


def test_hetero_view(hetero_store_path):
    store = fs.open_store(hetero_store_path)
    data = StoreData(store)
    assert data.metadata() == store.metadata()
    paper = data["paper"]
    assert paper.num_nodes == store.num_nodes("paper")
    np.testing.assert_array_equal(paper.year[np.arange(5)].numpy(),
                                  np.asarray(store.values("paper", "year"))[:5])
    assert "year" in paper.keys()
    del paper.year
    assert "year" not in paper.keys()
    for et in store.edge_types:
        assert data[tuple(et)].num_edges == store.num_edges(et)
    with pytest.raises(AttributeError, match="data\\[node_type\\]"):
        _ = data.x


def test_dgl_stand_ins(homo_store_path):
    ds = AsNodePredDataset(DglNodePropPredDataset("ogbn-synthetic", root=homo_store_path))
    store = ds.store
    np.testing.assert_array_equal(ds.val_idx.numpy(), store.split("valid"))
    g = ds[0]
    assert isinstance(g, StoreGraph) and g.num_nodes() == store.num_nodes()
    feat = g.ndata["feat"]
    assert isinstance(feat, LazyRows) and feat.shape[1] == store.features().shape[1]
    ids = torch.arange(0, store.num_nodes(), 7)
    np.testing.assert_array_equal(feat.to("cpu")[ids].numpy(),
                                  store.features().gather(ids.numpy()))
    np.testing.assert_array_equal(g.ndata["label"][ids].numpy(),
                                  np.asarray(store.labels())[ids.numpy()])
    graph, labels = DglNodePropPredDataset(root=homo_store_path)[0]
    assert len(labels) == store.num_nodes()
    with pytest.raises(KeyError, match="nope"):
        g.ndata["nope"]


def test_missing_store_names_the_paths(tmp_path):
    with pytest.raises(fs.errors.NotAStoreError, match="ogbn-x"):
        PygNodePropPredDataset("ogbn-x", root=tmp_path)


def test_loader_takes_the_view(homo_store_path):
    ds = PygNodePropPredDataset(root=homo_store_path)
    train = ds.get_idx_split()["train"]
    ours = NeighborLoader(ds[0], [5, 5], train, batch_size=64, device="cpu")
    ref = NeighborLoader(ds.store, [5, 5], train, batch_size=64, device="cpu", output="pyg")
    for a, b in zip(ours, ref):
        assert type(a).__name__ == "Data"
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.x, b.x)


def test_ogb_mag_needs_features_on_every_type(tmp_path, hetero_store_path):
    from loaders.datasets.views import OGB_MAG
    from loaders.datasets.synthetic import mag_like_store

    with pytest.raises(LoaderArgumentError, match="author"):
        OGB_MAG(hetero_store_path, preprocess="metapath2vec")
    assert OGB_MAG(hetero_store_path)[0].metadata() == fs.open_store(hetero_store_path).metadata()
    path = mag_like_store(tmp_path / "mag", num_papers=300, num_authors=200, num_institutions=10,
                          feat_dim=4, derive_features=True)
    data = OGB_MAG(tmp_path, preprocess="metapath2vec")[0]   # found at root/mag
    store = fs.open_store(path)
    for t in store.node_types:
        np.testing.assert_array_equal(data[t].x[np.arange(3)].numpy(),
                                      store.features(t).gather(np.arange(3)))


def test_mag240m_pyg_hetero_data(hetero_store_path):
    from loaders.datasets.lsc import MAG240MDataset

    store = fs.open_store(hetero_store_path)
    data = MAG240MDataset(hetero_store_path).to_pyg_hetero_data()
    assert data.metadata() == store.metadata() and data.num_classes == store.num_classes()
    ids = np.array([5, 1, 5])
    np.testing.assert_array_equal(data["paper"].x[ids].numpy(),
                                  store.features("paper").gather(ids))
    train = data["paper"].train_mask.nonzero(as_tuple=False).view(-1)
    np.testing.assert_array_equal(train.numpy(), store.split("train", "paper"))


def test_lazy_rows_to_device_and_dtype(homo_store_path):
    store = fs.open_store(homo_store_path)
    x = StoreData(store).x
    ids = np.array([4, 2, 9])
    want = store.features().gather(ids)
    for view in (x.to(torch.float64), x.to("cpu", torch.float64), x.to(dtype=torch.float64),
                 x.float().to(torch.float64)):
        got = view[ids]
        assert view.dtype == torch.float64 and got.dtype == torch.float64
        np.testing.assert_array_equal(got.numpy(), want.astype(np.float64))
    assert x.float()[ids].dtype == torch.float32 and x.to("cpu").dtype == x.dtype


def test_dgl_labels_are_a_column_as_ogb(homo_store_path):
    store = fs.open_store(homo_store_path)
    _, labels = DglNodePropPredDataset(root=homo_store_path)[0]
    want = np.asarray(store.labels())
    assert tuple(labels.shape) == (store.num_nodes(), 1) and labels.dim() == 2
    np.testing.assert_array_equal(labels[np.array([3, 1])].numpy(), want[[3, 1], None])
    np.testing.assert_array_equal(labels[:, 0].numpy(), want)
    assert int(labels[5, 0]) == want[5]


def test_typed_store_splits_nest_by_node_type_as_ogb(hetero_store_path):
    """OGB's ogbn-mag gives get_idx_split()['train']['paper']; a typed store does too."""
    ds = PygNodePropPredDataset(root=hetero_store_path)
    store = ds.store
    split = ds.get_idx_split()
    assert set(split) == {"train", "valid", "test"}
    for key, per_type in split.items():
        stored = next(n for n in (key, "val", "test-dev") if n in store.split_names)
        assert set(per_type) == set(store.meta.splits[stored])
        for nt, ids in per_type.items():
            assert ids.dtype == torch.int64
            np.testing.assert_array_equal(ids.numpy(), store.split(stored, nt))


def test_split_masks_only_on_the_node_types_the_split_has(hetero_store_path):
    """PyG's OGB_MAG: data['paper'] has train_mask, data['author'] has none."""
    store = fs.open_store(hetero_store_path)
    data = StoreData(store)
    for t in store.node_types:
        view = data[t]
        for mask, _, names in SPLITS.values():
            stored = next((n for n in names if n in store.split_names), None)
            has = stored is not None and t in store.meta.splits[stored]
            assert (mask in view.keys()) == has == (mask in view) == hasattr(view, mask)
            if has:
                want = np.zeros(store.num_nodes(t), bool)
                want[np.asarray(store.split(stored, t))] = True
                np.testing.assert_array_equal(getattr(view, mask).numpy(), want)
    assert "train_mask" in data["paper"] and "train_mask" not in data["author"]
    with pytest.raises(AttributeError, match="train_mask"):
        _ = data["author"].train_mask


def test_lazy_rows_index_as_torch(homo_store_path):
    """Negative ids, Ellipsis and mixed keys give what the same key gives the full tensor."""
    store = fs.open_store(homo_store_path)
    n = store.num_nodes()
    x = StoreData(store).x
    full = torch.from_numpy(np.array(store.features().numpy()))
    keys = [-1, 0, n - 1, -n, torch.tensor([-1, 0, -n]), np.array([-2, 3]), [-1, -1],
            torch.tensor([[1, -2], [-3, 4]]), (Ellipsis, 0), Ellipsis, (-1, Ellipsis),
            (torch.tensor([-1, 2]), -1), (slice(None, 4), Ellipsis, 1), (), (-2, 1),
            (slice(-5, None), slice(1, 3)), torch.tensor([-1], dtype=torch.int32)]
    for key in keys:
        assert torch.equal(x[key], full[key]), key
    for bad in (n, -n - 1, torch.tensor([0, -n - 1]), np.array([n])):
        with pytest.raises(fs.errors.IdsOutOfRangeError):
            x[bad]
        with pytest.raises(IndexError):  # torch raises IndexError too
            full[torch.as_tensor(bad)]


def test_lazy_rows_masks_as_torch(homo_store_path):
    """Issue 23 item 4: a torch.uint8 (or numpy uint8) index is a mask to torch, not ids 0/1
    (``data.x[mask.byte()]`` gave copies of rows 0 and 1); every mask and id type answers as
    torch answers on the resident tensor."""
    import warnings

    store = fs.open_store(homo_store_path)
    n = store.num_nodes()
    x = StoreData(store).x
    full = torch.from_numpy(np.array(store.features().numpy()))
    mask = torch.from_numpy(np.random.default_rng(0).random(n) < 0.3)
    keys = [mask, mask.byte(), mask.numpy(), mask.numpy().astype(np.uint8), mask.tolist(),
            torch.flatnonzero(mask) if hasattr(torch, "flatnonzero") else mask.nonzero()[:, 0],
            mask.nonzero()[:, 0].tolist(), slice(3, 40, 7), 5]
    for key in keys:
        with warnings.catch_warnings():  # torch's own deprecation of uint8 masks
            warnings.simplefilter("ignore")
            want = full[key]
        got = x[key]
        assert got.shape == want.shape and torch.equal(got, want), type(key)
    with pytest.raises(LoaderArgumentError):
        x[mask.byte()[:-1]]  # a mask of the wrong length, as torch refuses it


def test_ogb_pyg_y_is_a_column_and_squeezes(homo_store_path, hetero_store_path):
    """OGB's PygNodePropPredDataset: data.y is (N, 1) (read_csv(...).values); scripts write
    data.y.squeeze(1), data.y[idx] against out.argmax(-1, keepdim=True). PyG's OGB_MAG and a
    bare StoreData keep y as (N,)."""
    from loaders.datasets.views import OGB_MAG

    store = fs.open_store(homo_store_path)
    want = torch.from_numpy(np.asarray(store.labels()).astype(np.int64))
    ogb = torch.from_numpy(np.asarray(store.labels()).astype(np.int64)[:, None])  # OGB's y
    ds = PygNodePropPredDataset(root=homo_store_path)
    y = ds[0].y
    assert y.shape == ogb.shape and y.dim() == 2 and len(y) == store.num_nodes()
    idx = ds.get_idx_split()["train"][:7]
    assert torch.equal(y[idx], ogb[idx]) and torch.equal(y[idx].squeeze(1), ogb[idx].squeeze(1))
    for view in (y.squeeze(1), y.squeeze(-1), y.squeeze(), y.view(-1), y.reshape(-1),
                 y.flatten()):
        assert view.shape == want.shape
        assert torch.equal(view[idx], want[idx]) and torch.equal(view[:], want)
    assert y.squeeze(1).unsqueeze(1).shape == ogb.shape
    np.testing.assert_array_equal(y.numpy(), ogb.numpy())
    assert torch.equal(y.to(torch.float64)[idx], ogb[idx].double())
    with pytest.raises(LoaderArgumentError, match="node dimension"):
        StoreData(store).x.view(-1)
    with pytest.raises(IndexError):
        StoreData(store).y.squeeze(1)  # torch: (N,) has no dimension 1
    assert StoreData(store).y.shape == want.shape
    assert OGB_MAG(hetero_store_path)[0]["paper"].y.dim() == 1
    paper = PygNodePropPredDataset(root=hetero_store_path)[0]["paper"]
    assert tuple(paper.y.shape) == (paper.num_nodes, 1)


def test_loader_batches_keep_y_flat_from_the_ogb_view(homo_store_path):
    ds = PygNodePropPredDataset(root=homo_store_path)
    train = ds.get_idx_split()["train"][:64]
    b = next(iter(NeighborLoader(ds[0], [3], train, batch_size=32, device="cpu")))
    labels = torch.from_numpy(np.asarray(ds.store.labels()).astype(np.int64))
    assert b.y.dim() == 1 and torch.equal(b.y[:b.batch_size], labels[b.n_id[:b.batch_size]])


def test_planetoid_over_a_store_written_from_pyg_data(tmp_path):
    """PyG's Planetoid(root, name) over the store planetoid_store wrote from a PyG Data: the
    features row-normalised (NormalizeFeatures), the edges, labels and masks as given."""
    T = pytest.importorskip("torch_geometric.transforms")
    from torch_geometric.data import Data

    from loaders.datasets import Planetoid
    from loaders.datasets.planetoid import planetoid_store

    rng = np.random.default_rng(0)
    n = 40
    x = torch.from_numpy(rng.integers(0, 3, (n, 6)).astype(np.float32))
    x[5] = 0  # a row without words stays zero
    ei = torch.from_numpy(rng.integers(0, n, (2, 90)))
    ei = torch.unique(torch.cat([ei, ei.flip(0)], 1), dim=1)
    masks = {m: torch.from_numpy(rng.random(n) < 0.3) for m in ("train_mask", "val_mask",
                                                                 "test_mask")}
    y = torch.from_numpy(rng.integers(0, 3, n))
    planetoid_store(tmp_path / "Cora", Data(x=x, edge_index=ei, y=y, **masks))
    ds = Planetoid(tmp_path, "Cora", transform=T.NormalizeFeatures())  # as written
    data = ds[0]
    want = T.NormalizeFeatures()(Data(x=x.clone())).x
    torch.testing.assert_close(data.x[:], want)
    assert data.num_node_features == 6 and ds.num_classes == int(y.max()) + 1
    assert torch.equal(data.y[:], y)
    for m, mask in masks.items():
        assert torch.equal(getattr(data, m), mask)
    indptr, indices = ds.store.csc()
    dst = np.repeat(np.arange(n), np.diff(indptr))
    assert sorted(zip(np.asarray(indices).tolist(), dst.tolist())) == \
        sorted(zip(*ei.tolist()))
    with pytest.raises(LoaderArgumentError, match="transform"):
        Planetoid(tmp_path, "Cora", transform=T.ToUndirected())
    with pytest.raises(LoaderArgumentError, match="split"):
        Planetoid(tmp_path, "Cora", split="full")
    planetoid_store(tmp_path / "raw", Data(x=x, edge_index=ei, y=y, **masks), normalize=False)
    with pytest.raises(LoaderArgumentError, match="NormalizeFeatures"):
        Planetoid(tmp_path / "raw", "Cora", transform=T.NormalizeFeatures())


def test_planetoid_twin_has_cora_layout(tmp_path):
    from loaders.datasets.planetoid import planetoid_store

    with fs.open_store(planetoid_store(tmp_path / "c", num_nodes=500, num_edges=1200,
                                       num_features=50, num_classes=5)) as s:
        indptr, indices = s.csc()
        src, dst = np.asarray(indices), np.repeat(np.arange(500), np.diff(indptr))
        pairs = set(zip(src.tolist(), dst.tolist()))
        assert len(pairs) == src.shape[0] == 2 * 1200  # both ways, no duplicates
        assert all((v, u) in pairs for u, v in pairs) and not (src == dst).any()
        y = np.asarray(s.labels())
        train = np.asarray(s.split("train"))
        assert (np.bincount(y[train], minlength=5) == 20).all()  # 20 per class
        splits = [set(np.asarray(s.split(k)).tolist()) for k in ("train", "valid", "test")]
        assert not (splits[0] & splits[1] or splits[0] & splits[2] or splits[1] & splits[2])
        x = s.features().gather(np.arange(500))
        np.testing.assert_allclose(x.sum(1), 1.0, rtol=1e-5)


def test_in_memory_only_api_is_named(hetero_store_path, homo_store_path):
    """PyG loaders that need an in-memory HeteroData (HGTLoader calls ``data.edge_items()``)
    are told so, not to "read data[node_type].edge_items"."""
    for path in (hetero_store_path, homo_store_path):
        data = StoreData(fs.open_store(path))
        for name in ("edge_items", "node_stores", "collect"):
            with pytest.raises(AttributeError, match="in-memory Data/HeteroData.*NeighborLoader"):
                getattr(data, name)


def test_reddit_stand_in_answers_as_pygs_reddit(tmp_path):
    """PyG's reddit.py over the Reddit stand-in: y is (N,) as PyG's, so the script's accuracy
    of a perfect prediction is 1.0; OGB's stand-in gives OGB's (N, 1) column, on which the
    same expression broadcasts (as on OGB's own object), which is why the stand-ins are
    named per dataset (issue 21 item 2)."""
    from loaders.datasets import PygNodePropPredDataset, Reddit
    from loaders.datasets.planetoid import REDDIT_TWIN, reddit_store

    path = reddit_store(tmp_path / "Reddit", num_nodes=600, num_edges=3000)
    dataset = Reddit(tmp_path / "Reddit")
    data = dataset[0]
    n = 600
    assert dataset.num_classes == REDDIT_TWIN["num_classes"] == 41
    assert data.num_features == dataset.num_features == 602
    y = data.y[:]
    assert y.shape == (n,) and y.dtype == torch.long
    np.testing.assert_array_equal(y.numpy(), np.asarray(fs.open_store(path).labels()))
    x = data.x[:]
    assert x.shape == (n, 602) and not torch.allclose(x.sum(1), torch.ones(n))  # as written
    # reddit.py: NeighborLoader(data, input_nodes=data.train_mask, ...) and its accuracy
    loader = NeighborLoader(data, input_nodes=data.train_mask, num_neighbors=[25, 10],
                            shuffle=True, batch_size=64)
    batch = next(iter(loader))
    torch.testing.assert_close(batch.x, x[batch.n_id])
    assert torch.equal(batch.y, y[batch.n_id])
    y_hat = y.clone()  # a perfect prediction
    accs = [int((y_hat[mask] == data.y[mask]).sum()) / int(mask.sum())
            for mask in (data.train_mask, data.val_mask, data.test_mask)]
    assert accs == [1.0, 1.0, 1.0]
    ogb = PygNodePropPredDataset("ogbn-reddit", tmp_path / "Reddit")[0]
    mask = data.train_mask
    assert ogb.y[:].shape == (n, 1)
    assert int((y_hat[mask] == ogb.y[mask]).sum()) / int(mask.sum()) > 1  # OGB's broadcast
    with pytest.raises(LoaderArgumentError, match="transform"):
        Reddit(tmp_path / "Reddit", transform=lambda d: d)
