"""PyG integration: batches that PyG models use unchanged, PyG's NodeLoader over our backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402
from torch_geometric.nn import SAGEConv, GraphSAGE, to_hetero  # noqa: E402

from loaders import NeighborLoader  # noqa: E402
from loaders.errors import LoaderArgumentError  # noqa: E402
from loaders.pyg import NeighborSampler, remote_backend  # noqa: E402


def full_edge_index(store, et) -> torch.Tensor:
    """The whole edge type as PyG's (source, target) edge_index, from the CSC arrays."""
    indptr, indices = store.csc(et)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return torch.from_numpy(np.stack([np.asarray(indices, np.int64), dst]))


def test_homogeneous_batch_equals_full_graph_inference(homo_store):
    """With all neighbours, a 2-layer GraphSAGE on a batch gives the seeds the same output as
    on the whole graph; trim_to_layer must not change it (so nodes and edges are hop-ordered)."""
    torch.manual_seed(0)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4).eval()
    x = torch.from_numpy(np.array(homo_store.features(None, "feat").numpy()))
    et = homo_store.edge_types[0]
    with torch.no_grad():
        full = model(x, full_edge_index(homo_store, et))
    ld = NeighborLoader(homo_store, [-1, -1], "valid", batch_size=40, output="pyg", device="cpu")
    for b in ld:
        assert isinstance(b, Data)
        assert b.x.shape[0] == b.n_id.shape[0] == sum(b.num_sampled_nodes)
        assert b.edge_index.shape[1] == sum(b.num_sampled_edges)
        assert torch.equal(b.n_id[:b.batch_size], torch.from_numpy(
            np.asarray(homo_store.split("valid"))[b.input_id.numpy()]))
        with torch.no_grad():
            out = model(b.x, b.edge_index)[:b.batch_size]
            trimmed = model(b.x, b.edge_index, num_sampled_nodes_per_hop=b.num_sampled_nodes,
                            num_sampled_edges_per_hop=b.num_sampled_edges)[:b.batch_size]
        torch.testing.assert_close(out, full[b.n_id[:b.batch_size]], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(trimmed, out, atol=1e-5, rtol=1e-4)


class HeteroSAGE(torch.nn.Module):
    def __init__(self, hidden=16, out=5):
        super().__init__()
        self.c1 = SAGEConv((-1, -1), hidden)
        self.c2 = SAGEConv((-1, -1), out)

    def forward(self, x, edge_index):
        return self.c2(self.c1(x, edge_index).relu(), edge_index)


def hetero_inputs(store, x_paper: torch.Tensor, n: dict[str, int]):
    x = {t: x_paper if t == "paper" else torch.zeros(n[t], x_paper.shape[1])
         for t in store.node_types}
    return x


def test_heterogeneous_batch_equals_full_graph_inference(hetero_store):
    s = hetero_store
    meta = (s.node_types, [tuple(e) for e in s.edge_types])
    torch.manual_seed(0)
    model = to_hetero(HeteroSAGE(), meta, aggr="sum").eval()
    xp = torch.from_numpy(np.asarray(s.features("paper", "feat").numpy(), np.float32))
    n = {t: s.num_nodes(t) for t in s.node_types}
    with torch.no_grad():
        full = model(hetero_inputs(s, xp, n),
                     {tuple(et): full_edge_index(s, et) for et in s.edge_types})["paper"]
    ld = NeighborLoader(s, [-1, -1], ("paper", "test"), batch_size=64, output="pyg",
                        device="cpu")
    for b in ld:
        assert isinstance(b, HeteroData)
        assert set(b.node_types) == set(s.node_types)
        nb = {t: b[t].num_nodes for t in b.node_types}
        assert all(sum(b[t].num_sampled_nodes) == nb[t] for t in b.node_types)
        assert b["paper"].y.shape[0] == nb["paper"]  # every sampled paper's label, as PyG
        with torch.no_grad():
            out = model(hetero_inputs(s, b["paper"].x.float(), nb), b.edge_index_dict)["paper"]
        bs = b["paper"].batch_size
        torch.testing.assert_close(out[:bs], full[b["paper"].n_id[:bs]], atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("hetero", [False, True])
def test_pyg_nodeloader_over_remote_backend(homo_store, hetero_store, hetero):
    store, ntype = (hetero_store, "paper") if hetero else (homo_store, None)
    fs_, gs_ = remote_backend(store)
    ids = torch.from_numpy(np.array(store.split("train", ntype)))
    sampler = NeighborSampler(store, [4, 3])
    loader = NodeLoader((fs_, gs_), node_sampler=sampler,
                        input_nodes=(ntype, ids) if hetero else ids, batch_size=50, shuffle=True)
    F = store.features(ntype, "feat").numpy()
    labels = np.asarray(store.labels(ntype))
    seen = []
    for b in loader:
        d = b[ntype] if hetero else b
        n_id = d.n_id.numpy()
        assert np.array_equal(d.x.numpy(), np.asarray(F[n_id]))
        assert np.array_equal(d.y.numpy(), labels[n_id])  # PyG gives every node's label
        assert np.array_equal(n_id[:d.batch_size], ids.numpy()[d.input_id.numpy()])
        seen.append(d.input_id)
        for et in store.edge_types:  # every edge exists in the store
            ei = b[tuple(et)].edge_index if hetero else b.edge_index
            if ei.numel() == 0:
                continue
            src_ids = (b[et.src].n_id if hetero else b.n_id)[ei[0]].numpy()
            dst_ids = (b[et.dst].n_id if hetero else b.n_id)[ei[1]].numpy()
            e_id = (b[tuple(et)].e_id if hetero else b.e_id).numpy()
            indptr, indices = store.csc(et)
            assert np.array_equal(np.asarray(indices)[e_id], src_ids)
            assert np.all((indptr[dst_ids] <= e_id) & (e_id < indptr[dst_ids + 1]))
    seen = torch.cat(seen)
    assert torch.equal(seen.sort().values, torch.arange(ids.numel()))


def test_feature_and_graph_store_interfaces(hetero_store):
    fs_, gs_ = remote_backend(hetero_store)
    idx = torch.tensor([5, 1, 5, 0])
    F = hetero_store.features("paper", "feat").numpy()
    assert F.dtype == np.float16
    # fp16 features come as float32 by default (PyG models are float32), as stored with None
    got = fs_["paper", "x", idx]
    assert torch.equal(got, torch.from_numpy(F[idx.numpy()].astype(np.float32)))
    whole = fs_["paper", "x", None]
    assert torch.equal(whole, torch.from_numpy(F.astype(np.float32)))
    kept, _ = remote_backend(hetero_store, dtype=None)
    assert torch.equal(kept["paper", "x", idx], torch.from_numpy(F[idx.numpy()]))
    assert kept["paper", "x", 1:3].dtype == torch.float16
    with pytest.raises(LoaderArgumentError, match="dtype"):
        remote_backend(hetero_store, dtype=torch.int64)
    assert fs_.get_tensor_size(group_name="paper", attr_name="x") == (1500, 16)
    assert torch.equal(fs_["paper", "year", idx],
                       torch.from_numpy(np.asarray(hetero_store.values("paper", "year"))[idx]))
    attrs = {(a.group_name, a.attr_name) for a in fs_.get_all_tensor_attrs()}
    # types without features or labels list their ids, so PyG's sampler sees every node type
    assert attrs == {("paper", "x"), ("paper", "y"), ("author", "n_id"), ("institution", "n_id")}
    assert torch.equal(fs_["author", "n_id", idx], idx)
    assert fs_.get_tensor_size(group_name="institution", attr_name="n_id") == (40,)
    et = ("author", "writes", "paper")
    row, colptr = gs_[et, "csc"]
    indptr, indices = hetero_store.csc(et)
    assert np.array_equal(row.numpy(), indices) and np.array_equal(colptr.numpy(), indptr)
    with pytest.raises(PermissionError, match="read-only"):
        fs_["paper", "x", None] = torch.zeros(1500, 16)


@pytest.mark.skipif(not any(__import__("importlib").util.find_spec(m)
                            for m in ("torch_sparse", "pyg_lib")),
                    reason="PyG's own sampler needs torch-sparse or pyg-lib (../shared/wheels)")
def test_same_computation_graph_as_pygs_neighborloader(homo_store):
    """With all neighbours there is no randomness: PyG's own NeighborLoader on the same graph
    must find the same nodes per hop and the same edges."""
    from torch_geometric.loader import NeighborLoader as PygLoader

    et = homo_store.edge_types[0]
    data = Data(x=torch.from_numpy(np.array(homo_store.features(None, "feat").numpy())),
                edge_index=full_edge_index(homo_store, et), num_nodes=homo_store.num_nodes())
    seeds = torch.from_numpy(np.array(homo_store.split("valid")))
    ours = NeighborLoader(homo_store, [-1, -1], seeds, batch_size=50, output="pyg", device="cpu")
    theirs = PygLoader(data, num_neighbors=[-1, -1], input_nodes=seeds, batch_size=50)
    for a, b in zip(ours, theirs):
        assert a.batch_size == b.batch_size
        assert torch.equal(a.n_id[:a.batch_size], b.n_id[:b.batch_size])
        if "num_sampled_nodes" in b:  # pyg-lib reports hops; torch-sparse does not
            assert a.num_sampled_nodes == list(b.num_sampled_nodes)
            assert a.num_sampled_edges == list(b.num_sampled_edges)
        assert torch.equal(a.n_id.sort().values, b.n_id.sort().values)
        ea = set(map(tuple, a.n_id[a.edge_index].T.tolist()))
        eb = set(map(tuple, b.n_id[b.edge_index].T.tolist()))
        assert ea == eb
        assert torch.equal(a.x, b.x[torch.argsort(b.n_id)][torch.argsort(torch.argsort(a.n_id))])


def test_input_time_is_refused_not_ignored(hetero_store):
    """Temporal sampling is not implemented: NodeLoader's input_time must fail, not be dropped."""
    from loaders.errors import UnsupportedArgumentError

    ids = torch.from_numpy(np.array(hetero_store.split("train", "paper")))
    year = torch.from_numpy(np.asarray(hetero_store.values("paper", "year"))[ids.numpy()])
    loader = NodeLoader(remote_backend(hetero_store),
                        node_sampler=NeighborSampler(hetero_store, [2]),
                        input_nodes=("paper", ids), input_time=year, batch_size=50)
    with pytest.raises(UnsupportedArgumentError, match="input_time"):
        next(iter(loader))


def test_homogeneous_store_is_a_homogeneous_remote_backend(homo_store, hetero_store):
    fs_, gs_ = remote_backend(homo_store)
    assert {(a.group_name, a.attr_name) for a in fs_.get_all_tensor_attrs()} == {(None, "x"),
                                                                                   (None, "y")}
    (attr,) = gs_.get_all_edge_attrs()
    assert attr.edge_type is None and attr.size == (homo_store.num_nodes(),) * 2
    idx = torch.tensor([3, 0, 3])
    want = torch.from_numpy(np.asarray(homo_store.features(None, "feat").numpy())[idx.numpy()])
    assert torch.equal(fs_[None, "x", idx], want)
    assert torch.equal(fs_[homo_store.node_types[0], "x", idx], want)  # the type name works too
    indptr, indices = homo_store.csc()
    row, colptr, _ = gs_.csc()
    assert np.array_equal(row.numpy(), indices) and np.array_equal(colptr.numpy(), indptr)
    typed, _ = remote_backend(homo_store, homogeneous=False)
    assert {a.group_name for a in typed.get_all_tensor_attrs()} == set(homo_store.node_types)
    attrs = remote_backend(hetero_store)[1].get_all_edge_attrs()
    assert all(a.edge_type is not None for a in attrs)


def test_no_tensors_over_read_only_memory(homo_store):
    """Store arrays are read-only memory maps: a tensor over one makes torch warn (once per
    process) and must never be written. What the adapters hand torch is a copy."""
    from loaders.pyg import _t

    fs_, gs_ = remote_backend(homo_store)
    indptr, indices = homo_store.csc()
    row, colptr, _ = gs_.csc()
    assert not np.shares_memory(row.numpy(), indices)
    assert not np.shares_memory(colptr.numpy(), indptr)
    labels = homo_store.labels()  # a read-only map of the store's file
    assert not labels.flags.writeable
    t = _t(labels)
    assert not np.shares_memory(t.numpy(), labels) and np.array_equal(t.numpy(), labels)
    writable = np.arange(4)
    assert np.shares_memory(_t(writable).numpy(), writable)  # no needless copy


@pytest.mark.skipif(not any(__import__("importlib").util.find_spec(m)
                            for m in ("torch_sparse", "pyg_lib")),
                    reason="PyG's own sampler needs torch-sparse or pyg-lib (../shared/wheels)")
@pytest.mark.parametrize("hetero", [False, True])
def test_pygs_own_sampler_over_the_remote_backend(homo_store, hetero_store, hetero):
    """PyG's NeighborLoader on (FeatureStore, GraphStore) of a store: Data (HeteroData) batches
    whose edges and features are the store's."""
    from torch_geometric.loader import NeighborLoader as PygLoader

    store, ntype = (hetero_store, "paper") if hetero else (homo_store, None)
    ids = torch.from_numpy(np.array(store.split("train", ntype)))
    F = np.asarray(store.features(ntype, "feat").numpy())
    loader = PygLoader(remote_backend(store), num_neighbors=[3, 2],
                       input_nodes=("paper", ids) if hetero else ids, batch_size=200)
    for b in loader:
        assert isinstance(b, HeteroData if hetero else Data)
        d = b["paper"] if hetero else b
        n_id = d.n_id.numpy()
        assert np.array_equal(d.x.numpy(), F[n_id])
        assert np.array_equal(n_id[:d.batch_size], ids.numpy()[d.input_id.numpy()])
        for et in store.edge_types:
            ei = b[tuple(et)].edge_index if hetero else b.edge_index
            e_id = (b[tuple(et)].e_id if hetero else b.e_id).numpy()
            src = (b[et.src].n_id if hetero else b.n_id).numpy()[ei[0].numpy()]
            dst = (b[et.dst].n_id if hetero else b.n_id).numpy()[ei[1].numpy()]
            indptr, indices = store.csc(et)
            assert np.array_equal(np.asarray(indices)[e_id], src)
            assert np.all((indptr[dst] <= e_id) & (e_id < indptr[dst + 1]))


def _brute_labels(labels, ids) -> list[int]:
    return [int(labels[i]) for i in ids.tolist()]


@pytest.mark.parametrize("chunked", [False, True])
def test_homogeneous_y_covers_every_sampled_node(homo_store, chunked):
    """PyG's y: one label per sampled node (seeds first), so y[:batch_size] are the seeds'."""
    labels = np.asarray(homo_store.labels())
    ld = NeighborLoader(homo_store, [5, 5], "train", batch_size=64, shuffle=True,
                        output="pyg", device="cpu", staging_bytes=256)
    ld._chunked = chunked  # the device path's gather (chunked, on the CPU)
    n = 0
    for b in ld:
        assert b.y.dtype == torch.int64 and b.y.shape[0] == b.num_nodes
        assert b.y.tolist() == _brute_labels(labels, b.n_id)
        seeds = np.asarray(homo_store.split("train"))[b.input_id.numpy()]
        assert b.y[:b.batch_size].tolist() == _brute_labels(labels, seeds)
        n += 1
    assert n == len(ld)


def two_labelled_store(path):
    """paper and author both labelled (-1 holes), institution without labels or features."""
    import featurestore as fs
    from graph_helpers import random_csc

    rng = np.random.default_rng(5)
    n = {"paper": 400, "author": 300, "institution": 20}
    w = fs.create_store(str(path), mode="w")
    for t, k in n.items():
        w.add_node_type(t, k)
    for (src, rel, dst), m in ((("author", "writes", "paper"), 1500),
                               (("paper", "rev_writes", "author"), 1500),
                               (("paper", "cites", "paper"), 2000),
                               (("institution", "employs", "author"), 300)):
        indptr, indices = random_csc(rng, n[src], n[dst], m)[:2]
        w.add_edge_type((src, rel, dst), indptr, indices)
    w.add_features("paper", "feat", rng.standard_normal((n["paper"], 8)).astype(np.float32))
    w.add_labels("paper", rng.integers(-1, 6, n["paper"]).astype(np.int32))
    w.add_labels("author", rng.integers(-1, 3, n["author"]))
    w.add_split("train", "paper", rng.choice(n["paper"], 150, replace=False))
    w.commit()
    return str(path)


@pytest.mark.parametrize("chunked", [False, True])
def test_heterogeneous_y_on_every_labelled_type(tmp_path, chunked):
    import featurestore as fs

    with fs.open_store(two_labelled_store(tmp_path / "s")) as s:
        labels = {t: np.asarray(s.labels(t)) for t in ("paper", "author")}
        kw = dict(batch_size=32, shuffle=True, device="cpu", staging_bytes=256, seed=3)
        ld = NeighborLoader(s, [4, 4], ("paper", "train"), output="pyg", **kw)
        raw = NeighborLoader(s, [4, 4], ("paper", "train"), output="raw", **kw)
        ld._chunked = raw._chunked = chunked
        for b, mb in zip(ld, raw):
            for t in ("paper", "author"):
                assert b[t].y.shape[0] == b[t].num_nodes
                assert b[t].y.tolist() == _brute_labels(labels[t], b[t].n_id)
                assert torch.equal(mb.y_all[t], b[t].y)
            assert "y" not in b["institution"]
            bs = b["paper"].batch_size
            seeds = np.asarray(s.split("train"))[b["paper"].input_id.numpy()]
            assert b["paper"].y[:bs].tolist() == _brute_labels(labels["paper"], seeds)
            assert torch.equal(mb.y, b["paper"].y[:bs])  # raw y: the seeds' labels, as before
        for mb in NeighborLoader(s, [4], ("paper", "train"), labels=False, output="raw", **kw):
            assert mb.y_all == {} and mb.y is None


@pytest.mark.skipif(not any(__import__("importlib").util.find_spec(m)
                            for m in ("torch_sparse", "pyg_lib")),
                    reason="PyG's own sampler needs torch-sparse or pyg-lib (../shared/wheels)")
def test_pygs_own_link_neighbor_loader_seeds_every_edge(homo_store):
    """PyG's ``LinkNeighborLoader`` over the remote backend with ``edge_label_index=(None,
    None)`` takes every edge as a seed, as ``edge_label_index=None`` on an in-memory ``Data``
    (PyG read our homogeneous ``coo`` answer as a dict and failed with "values expected sparse
    tensor layout"): each batch's seed pairs are the graph's edges ``input_id``, and an epoch
    covers each edge once."""
    from torch_geometric.loader import LinkNeighborLoader

    full = full_edge_index(homo_store, homo_store.edge_types[0])
    F = np.asarray(homo_store.features(None, "feat").numpy())
    loader = LinkNeighborLoader(remote_backend(homo_store), num_neighbors=[3, 2],
                                edge_label_index=(None, None), batch_size=500)
    assert len(loader) == -(-full.shape[1] // 500)
    seen = []
    for b in loader:
        assert isinstance(b, Data)
        assert torch.equal(b.n_id[b.edge_label_index], full[:, b.input_id])
        assert np.array_equal(b.x.numpy(), F[b.n_id.numpy()])
        seen.append(b.input_id)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(full.shape[1]))


@pytest.mark.skipif(not any(__import__("importlib").util.find_spec(m)
                            for m in ("torch_sparse", "pyg_lib")),
                    reason="PyG's own sampler needs torch-sparse or pyg-lib (../shared/wheels)")
def test_pygs_link_loader_edge_type_on_a_homogeneous_backend_is_named(homo_store):
    """The store's own edge type on the homogeneous backend (whose edge type is ``None``)
    fails naming the cause, not in PyG's sampler."""
    from torch_geometric.loader import LinkNeighborLoader

    et = tuple(homo_store.edge_types[0])
    with pytest.raises(LoaderArgumentError, match=r"edge type None.*homogeneous=False"):
        LinkNeighborLoader(remote_backend(homo_store), num_neighbors=[3, 2],
                           edge_label_index=(et, None), batch_size=50)
    # the typed backend takes it, and yields HeteroData
    b = next(iter(LinkNeighborLoader(remote_backend(homo_store, homogeneous=False),
                                     num_neighbors=[3, 2], edge_label_index=(et, None),
                                     batch_size=50)))
    assert isinstance(b, HeteroData) and b[et].edge_label_index.shape == (2, 50)
