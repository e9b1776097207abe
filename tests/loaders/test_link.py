"""LinkNeighborLoader (issue 18): batches against PyG's own LinkNeighborLoader on the same graph
and input edges (seeds, numbering, label conventions, negatives per positive, triplet fields),
and bad input refused with named errors."""

import numpy as np
import pytest
import torch

import featurestore as fs
from loaders import LinkNeighborLoader, NegativeSampling

HAS_PYG_SAMPLER = any(__import__("importlib").util.find_spec(m)
                      for m in ("torch_sparse", "pyg_lib"))
needs_pyg_sampler = pytest.mark.skipif(
    not HAS_PYG_SAMPLER,
    reason="PyG's own sampler needs torch-sparse or pyg-lib (../shared/wheels)")


def _coo(store, et=None):
    indptr, indices = store.csc(et)
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    return np.stack([np.asarray(indices, dtype=np.int64), dst])


def _pairs(store, n, seed=0, et=None):
    ei = _coo(store, et)
    return ei[:, np.random.default_rng(seed).choice(ei.shape[1], n, replace=False)]


def _pyg_loader(store, pairs, **kw):
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader as PygLink

    ei = torch.from_numpy(_coo(store))
    data = Data(edge_index=ei, num_nodes=store.num_nodes())
    return PygLink(data, [3, 2], edge_label_index=torch.from_numpy(pairs), batch_size=64, **kw)


def _check_pairs(b, pairs_at):
    """Positive pairs map back through n_id to the input pairs."""
    n_id, eli = b.n_id.numpy(), b.edge_label_index.numpy()
    np.testing.assert_array_equal(n_id[eli[:, :pairs_at.shape[1]]], pairs_at)


@needs_pyg_sampler
def test_no_negatives_same_seeds_as_pyg(homo_store):
    pairs = _pairs(homo_store, 200)
    ours = LinkNeighborLoader(homo_store, [3, 2], pairs, batch_size=64, output="pyg",
                              device="cpu")
    peer = _pyg_loader(homo_store, pairs)
    assert len(ours) == len(peer)
    assert list(ours.dataset) == list(peer.dataset)  # len(loader.dataset): the seed edges
    for k, (a, b) in enumerate(zip(ours, peer)):
        at = pairs[:, 64 * k: 64 * (k + 1)]
        _check_pairs(a, at)
        _check_pairs(b, at)
        ns = np.unique(at).shape[0]
        assert a.num_sampled_nodes[0] == ns  # the unique endpoints, sorted, first
        assert torch.equal(a.n_id[:ns], b.n_id[:ns])
        assert torch.equal(a.edge_label_index, b.edge_label_index)
        assert torch.equal(a.input_id, b.input_id)
        assert ("edge_label" in a) == ("edge_label" in b) and "batch_size" not in a
        assert a.x.shape[0] == a.n_id.shape[0]
        x = homo_store.features(None, "feat").gather(a.n_id.numpy())
        assert np.array_equal(a.x.numpy(), x)


@needs_pyg_sampler
@pytest.mark.parametrize("ratio,labels", [(1.0, None), (2.0, None), (0.5, "zero-based")])
def test_binary_negatives_as_pyg(homo_store, ratio, labels):
    pairs = _pairs(homo_store, 128, seed=1)
    lab = None if labels is None else torch.from_numpy(np.arange(128) % 2)
    ours = LinkNeighborLoader(homo_store, [3, 2], torch.from_numpy(pairs), edge_label=lab,
                              neg_sampling_ratio=ratio, batch_size=64, output="pyg",
                              device="cpu")
    peer = _pyg_loader(homo_store, pairs, edge_label=lab, neg_sampling_ratio=ratio)
    for k, (a, b) in enumerate(zip(ours, peer)):
        assert a.edge_label_index.shape == b.edge_label_index.shape
        assert a.edge_label.dtype == b.edge_label.dtype
        assert torch.equal(a.edge_label, b.edge_label)  # same positives, then zeros
        _check_pairs(a, pairs[:, 64 * k: 64 * (k + 1)])
        neg = a.n_id[a.edge_label_index[:, 64:]]
        assert neg.shape[1] == int(np.ceil(64 * ratio)) and int(neg.max()) < homo_store.num_nodes()


@needs_pyg_sampler
@pytest.mark.parametrize("amount", [1, 3])
def test_triplet_fields_as_pyg(homo_store, amount):
    from torch_geometric.sampler import NegativeSampling as PygNeg

    pairs = _pairs(homo_store, 64, seed=2)
    ours = LinkNeighborLoader(homo_store, [3, 2], pairs, batch_size=64, output="pyg",
                              device="cpu", neg_sampling=PygNeg("triplet", amount))
    peer = _pyg_loader(homo_store, pairs, neg_sampling=PygNeg("triplet", amount))
    a, b = next(iter(ours)), next(iter(peer))
    for name in ("src_index", "dst_pos_index", "dst_neg_index"):
        assert getattr(a, name).shape == getattr(b, name).shape, name
    assert "edge_label_index" not in a and "edge_label_index" not in b
    np.testing.assert_array_equal(a.n_id[a.src_index].numpy(), pairs[0])
    np.testing.assert_array_equal(a.n_id[a.dst_pos_index].numpy(), pairs[1])


def test_hetero_distinct_types(hetero_store):
    """(author, writes, paper): seeds of both types, fields on the stores PyG puts them on."""
    pytest.importorskip("torch_geometric")
    et = ("author", "writes", "paper")
    pairs = _pairs(hetero_store, 100, seed=3, et=et)
    ld = LinkNeighborLoader(hetero_store, [3, 2], (et, pairs), neg_sampling="binary",
                            batch_size=50, output="pyg", device="cpu")
    for k, b in enumerate(ld):
        eli = b[et].edge_label_index.numpy()
        src, dst = b["author"].n_id.numpy()[eli[0]], b["paper"].n_id.numpy()[eli[1]]
        np.testing.assert_array_equal(np.stack([src, dst])[:, :50], pairs[:, 50 * k: 50 * (k + 1)])
        assert b[et].edge_label.tolist() == [1.0] * 50 + [0.0] * 50
        assert torch.equal(b[et].input_id, torch.arange(50 * k, 50 * (k + 1)))
        # unique seeds first in each type
        ns = b["author"].num_sampled_nodes[0]
        assert ns == len(np.unique(src)) and np.array_equal(b["author"].n_id[:ns].numpy(),
                                                            np.unique(src))


def test_reproducible_and_raw(homo_store):
    pairs = _pairs(homo_store, 64, seed=4)
    kw = dict(batch_size=32, shuffle=True, seed=7, neg_sampling="binary", device="cpu")
    a = [mb.subgraph.link for mb in LinkNeighborLoader(homo_store, [2], pairs, **kw)]
    b = [mb.subgraph.link for mb in LinkNeighborLoader(homo_store, [2], pairs, **kw)]
    for x, y in zip(a, b):
        assert np.array_equal(x["edge_label_index"], y["edge_label_index"])
        assert np.array_equal(x["input_id"], y["input_id"])
    assert sorted(np.concatenate([x["input_id"] for x in a]).tolist()) == list(range(64))


def test_caller_pairs_not_held(homo_store):
    import weakref

    pairs = _pairs(homo_store, 64, seed=4)
    ref = weakref.ref(pairs)
    ld = LinkNeighborLoader(homo_store, [2], pairs, batch_size=32, device="cpu")
    held = ld._pairs.copy()
    del pairs
    assert ref() is None  # the loader keeps its own int32 copy, not the caller's int64 array
    assert ld._pairs.dtype == np.int32
    got = np.concatenate([mb.subgraph.link["input_id"] for mb in ld])
    assert sorted(got.tolist()) == list(range(64)) and np.array_equal(ld._pairs, held)


def test_degree_weighted_negatives_follow_weight(homo_store):
    pairs = _pairs(homo_store, 64, seed=5)
    w = np.zeros(homo_store.num_nodes())
    w[[3, 17]] = 1.0
    ld = LinkNeighborLoader(homo_store, [1], pairs, batch_size=64, device="cpu",
                            neg_sampling=NegativeSampling("binary", 2, w))
    mb = next(iter(ld))
    n_id, eli = mb.subgraph.node["node"], mb.subgraph.link["edge_label_index"]
    assert set(n_id[eli[:, 64:]].ravel().tolist()) <= {3, 17}


@pytest.mark.parametrize("kw,err", [
    (dict(neg_sampling_ratio=0), "amount"),
    (dict(neg_sampling_ratio=-1.0), "amount"),
    (dict(neg_sampling="triplet", edge_label=np.ones(10)), "triplet"),
    (dict(neg_sampling=NegativeSampling("triplet", 1.5)), "integer"),
    (dict(neg_sampling="quad"), "binary"),
    (dict(edge_label=np.ones(3)), "one row per pair"),
])
def test_bad_arguments_named(homo_store, kw, err):
    pairs = _pairs(homo_store, 10, seed=6)
    with pytest.raises(fs.FeatureStoreError, match=err):
        LinkNeighborLoader(homo_store, [2], pairs, device="cpu", **kw)


def test_dgl_output_without_dgl_names_what_to_install(homo_store):
    """output="dgl" is served (tests/loaders/dgl_tests/test_dgl_edge_pred.py); without DGL the
    loader fails when built, saying what to install."""
    from loaders.convert.dgl import DGLNotInstalledError, require_dgl

    try:
        require_dgl()
        pytest.skip("DGL is installed here: output='dgl' is tested in the DGL environment")
    except DGLNotInstalledError:
        pass
    with pytest.raises(DGLNotInstalledError, match="dgl==2.1.0"):
        LinkNeighborLoader(homo_store, [2], _pairs(homo_store, 10, seed=6), device="cpu",
                           output="dgl")


def test_pairs_out_of_range_and_shape(homo_store):
    n = homo_store.num_nodes()
    with pytest.raises(IndexError):
        LinkNeighborLoader(homo_store, [2], np.array([[0, 1], [2, n]]), device="cpu")
    with pytest.raises(fs.FeatureStoreError, match=r"\(2, E\)"):
        LinkNeighborLoader(homo_store, [2], np.array([0, 1, 2]), device="cpu")
    with pytest.raises(fs.FeatureStoreError, match=r"\(2, E\)"):
        LinkNeighborLoader(homo_store, [2], np.array([[0.5, 1.0], [1.0, 2.0]]), device="cpu")


def test_typed_store_needs_edge_type(hetero_store):
    with pytest.raises(fs.FeatureStoreError, match="edge_type"):
        LinkNeighborLoader(hetero_store, [2], np.array([[0], [0]]), device="cpu")


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_pygs_linkloader_with_our_sampler(homo_store, mode):
    """PyG's own LinkLoader over remote_backend(store) with loaders.pyg.NeighborSampler:
    sample_from_edges gives PyG's batch fields; pairs map back to the input edges."""
    pytest.importorskip("torch_geometric")
    from torch_geometric.loader import LinkLoader
    from torch_geometric.sampler import NegativeSampling as PygNeg

    from loaders.pyg import NeighborSampler, remote_backend

    pairs = _pairs(homo_store, 96, seed=8)
    et = tuple(homo_store.edge_types[0])  # PyG asks a (FeatureStore, GraphStore) for a type
    loader = LinkLoader(remote_backend(homo_store),
                        link_sampler=NeighborSampler(homo_store, [3, 2]),
                        edge_label_index=(et, torch.from_numpy(pairs)), batch_size=32,
                        neg_sampling=PygNeg(mode, 2))
    F = homo_store.features(None, "feat").numpy()
    for k, b in enumerate(loader):
        n_id = b.n_id.numpy()
        assert np.array_equal(b.x.numpy(), np.asarray(F[n_id]))
        at = pairs[:, 32 * k: 32 * (k + 1)]
        if mode == "binary":
            np.testing.assert_array_equal(n_id[b.edge_label_index[:, :32].numpy()], at)
            assert b.edge_label.tolist() == [1.0] * 32 + [0.0] * 64
        else:
            np.testing.assert_array_equal(n_id[b.src_index.numpy()], at[0])
            np.testing.assert_array_equal(n_id[b.dst_pos_index.numpy()], at[1])
            assert tuple(b.dst_neg_index.shape) == (32, 2)


def _sampled_pairs(mb, et=("node", "to", "node")):
    sub = mb.subgraph
    n = sub.node[et[0]]
    return set(zip(n[sub.row[et]].tolist(), sub.node[et[2]][sub.col[et]].tolist()))


@pytest.mark.parametrize("exclude", ["self", "reverse"])
def test_seed_edges_excluded(homo_store, exclude):
    """With exclude=, no positive pair (nor, with 'reverse', its reverse) is among a batch's
    sampled edges; without it, taking every neighbour, they all are."""
    from loaders.sample.exclude import seed_edge_ids

    pairs = _pairs(homo_store, 64, seed=9)
    ind, idx = homo_store.csc()
    rev_in_graph = seed_edge_ids(ind, idx, pairs[1], pairs[0]).size > 0
    base = dict(batch_size=32, device="cpu")
    plain = list(LinkNeighborLoader(homo_store, [-1], pairs, **base))
    excl = list(LinkNeighborLoader(homo_store, [-1], pairs, exclude=exclude, **base))
    for k, (a, b) in enumerate(zip(plain, excl)):
        pos = set(zip(*pairs[:, 32 * k: 32 * (k + 1)].tolist()))
        assert pos <= _sampled_pairs(a)            # every neighbour: the seed edges are there
        got = _sampled_pairs(b)
        assert not pos & got
        rev = {(d, s) for s, d in pos}
        if exclude == "reverse":
            assert not rev & got
        elif rev_in_graph:
            assert rev & _sampled_pairs(a) <= got | pos  # 'self' keeps the reverses
        assert np.array_equal(a.subgraph.node["node"], b.subgraph.node["node"])
        sub = b.subgraph
        et = ("node", "to", "node")
        assert sum(sub.num_sampled_edges[et]) == sub.row[et].shape[0]


def test_seed_edge_ids_against_brute_force(homo_store):
    from loaders.sample.exclude import seed_edge_ids

    ind, idx = homo_store.csc()
    ei = _coo(homo_store)
    pairs = np.concatenate([_pairs(homo_store, 50, seed=10), np.array([[0, 1], [5, 7]])], axis=1)
    want = sorted(p for p in range(ei.shape[1])
                  if any((ei[0, p] == s and ei[1, p] == d) for s, d in pairs.T))
    assert seed_edge_ids(ind, idx, pairs[0], pairs[1]).tolist() == want


def test_bad_exclude(homo_store, hetero_store):
    pairs = _pairs(homo_store, 8, seed=11)
    with pytest.raises(fs.FeatureStoreError, match="exclude"):
        LinkNeighborLoader(homo_store, [2], pairs, exclude="everything", device="cpu")
    et = ("paper", "cites", "paper")
    with pytest.raises(fs.FeatureStoreError, match="reverse edge type"):
        LinkNeighborLoader(hetero_store, [2], (et, np.array([[0], [1]])), exclude="reverse",
                           reverse_edge_type=("author", "writes", "paper"), device="cpu")


def test_edge_type_without_destination_nodes_named(tmp_path):
    """An edge type whose destination type has no nodes: named at construction, not a batch
    of out-of-range negatives."""
    w = fs.create_store(tmp_path / "s.store")
    w.add_node_type("user", 5)
    w.add_node_type("item", 0)
    w.add_features("user", "x", np.zeros((5, 2), np.float32))
    w.add_edge_type(("user", "buys", "item"), np.zeros(1, np.int64), np.zeros(0, np.int64))
    w.add_edge_type(("user", "knows", "user"), np.array([0, 1, 2, 3, 4, 5]),
                    np.array([1, 2, 3, 4, 0]))
    w.commit()
    with fs.open_store(tmp_path / "s.store") as s:
        with pytest.raises(fs.FeatureStoreError, match="Expected nodes on both ends.*0 'item'"):
            LinkNeighborLoader(s, {("user", "buys", "item"): [1], ("user", "knows", "user"): [1]},
                               (("user", "buys", "item"), np.zeros((2, 0), np.int64)),
                               neg_sampling_ratio=1.0, device="cpu")


def test_dataset_is_the_range_of_seeds_as_pygs(homo_store):
    """``len(loader.dataset)`` (PyG's scripts size progress bars with it): the seed nodes of a
    NeighborLoader, the seed edges of a LinkNeighborLoader, whatever the rank's share."""
    from loaders import NeighborLoader

    train = np.asarray(homo_store.split("train"))
    for rank in (0, 1):
        ld = NeighborLoader(homo_store, [3, 2], "train", batch_size=64, device="cpu",
                            rank=rank, world_size=2)
        assert ld.dataset == range(train.shape[0])
    pairs = _pairs(homo_store, 200)
    assert LinkNeighborLoader(homo_store, [3, 2], pairs, batch_size=64,
                              device="cpu").dataset == range(200)
