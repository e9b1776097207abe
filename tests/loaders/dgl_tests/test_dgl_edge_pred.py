"""DGL edge prediction over a store (issue 18) against DGL's own ``as_edge_prediction_sampler``
and ``DataLoader`` on a DGL graph built from the store's CSC (run in .venv-dgl): the tuples,
pair graphs mapped back to the seed edges, negatives, blocks' destination nodes, and
exclusion, which with every neighbour taken must leave exactly DGL's edges."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dgl_helpers import csc_of, hetero_store, import_dgl

dgl = import_dgl()

import featurestore as fs  # noqa: E402
from loaders import LinkNeighborLoader  # noqa: E402
from loaders.dgl import (DataLoader, as_edge_prediction_sampler, negative_sampler,  # noqa: E402
                         reverse_edge_ids)

DL = dgl.dataloading
ET = ("node", "to", "node")
# DGL's own DataLoader (the reference) warns about CPU affinity on every iteration
pytestmark = pytest.mark.filterwarnings("ignore:Dataloader CPU affinity opt")


@pytest.fixture(scope="module")
def sym(tmp_path_factory):
    """A symmetric one-type store and the DGL graph of its CSC (edge ids = CSC positions)."""
    rng = np.random.default_rng(3)
    n = 300
    s, d = rng.integers(0, n, 1200), rng.integers(0, n, 1200)
    keep = s != d
    s, d = np.concatenate([s[keep], d[keep]]), np.concatenate([d[keep], s[keep]])
    indptr, indices = csc_of(s, d, n)
    path = tmp_path_factory.mktemp("dgl-ep") / "s"
    w = fs.create_store(path, mode="w")
    w.add_node_type("node", n)
    w.add_edge_type(ET, indptr, indices)
    w.add_features("node", "feat", rng.standard_normal((n, 4)).astype(np.float32))
    w.commit()
    with fs.open_store(path) as st:
        yield st, dgl.graph(_coo(indptr, indices), num_nodes=n)


def _coo(indptr, indices):
    """The CSC's edges in CSC order: DGL edge id = CSC position. (A graph made with
    ``("csc", ...)`` numbers its edges the same, but DGL 2.1's edge_subgraph of it gives
    ``edata[dgl.EID]`` sorted while the edges keep the seeds' order.)"""
    indptr = np.asarray(indptr, np.int64)
    dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    return torch.from_numpy(np.asarray(indices, np.int64)), torch.from_numpy(dst)


def _global(graph, ntype=None):
    """``(src, dst)`` global ids of a pair graph's edges (of its only edge type, or ``ntype``
    edge type)."""
    s, d = graph.edges(etype=ntype) if ntype else graph.edges()
    st, _, dt = graph.to_canonical_etype(ntype) if ntype else graph.canonical_etypes[0]
    nid = graph.ndata[dgl.NID]
    ns, nd = (nid[st], nid[dt]) if isinstance(nid, dict) else (nid, nid)
    return ns[s].numpy(), nd[d].numpy()


def _pair(batch, neg):
    return (batch[0], batch[1], batch[2], batch[3]) if neg else (batch[0], batch[1], None, batch[2])


@pytest.mark.parametrize("neg", [None, "uniform", "global"])
def test_against_dgl(sym, neg):
    store, g = sym
    eids = torch.from_numpy(np.random.default_rng(0).choice(g.num_edges(), 150, replace=False))
    k = 2
    neg_dgl = {None: None, "uniform": DL.negative_sampler.Uniform(k),
               "global": DL.negative_sampler.GlobalUniform(k)}[neg]
    dgl_sampler = DL.as_edge_prediction_sampler(DL.NeighborSampler([3, 2]), exclude="self",
                                                negative_sampler=neg_dgl)
    theirs = list(DL.DataLoader(g, eids.clone(), dgl_sampler, batch_size=64))
    # DGL's own sampler object, and ours: the same batches (same draws)
    ours = list(DataLoader(store, eids, dgl_sampler, batch_size=64, device="cpu", seed=5))
    ours_b = list(DataLoader(store, eids, as_edge_prediction_sampler(
        [3, 2], exclude="self", negative_sampler={None: None, "uniform": negative_sampler.Uniform(
            k), "global": negative_sampler.GlobalUniform(k)}[neg]), batch_size=64, device="cpu",
        seed=5))
    assert len(ours) == len(theirs) == len(ours_b) == 3
    for i, (a, b, c) in enumerate(zip(ours, theirs, ours_b)):
        assert len(a) == len(b) == len(c) == (4 if neg else 3)
        inp, pg, ng, blocks = _pair(a, neg)
        _, tpg, tng, tblocks = _pair(b, neg)
        seeds = eids[64 * i: 64 * (i + 1)]
        want = [x.numpy() for x in g.find_edges(seeds)]
        for graph in (pg, tpg):  # both map back to the seed edges, in order
            got = _global(graph)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        # (DGL 2.1's own edata[EID] comes out sorted with exclude=, out of step with its edges)
        np.testing.assert_array_equal(pg.edata[dgl.EID].numpy(), seeds.numpy())
        assert pg.num_nodes() == blocks[-1].num_dst_nodes() and len(blocks) == len(tblocks)
        np.testing.assert_array_equal(blocks[-1].dstdata[dgl.NID].numpy(),
                                      pg.ndata[dgl.NID].numpy())
        np.testing.assert_array_equal(inp.numpy(), blocks[0].srcdata[dgl.NID].numpy())
        assert blocks[0].srcdata["feat"].shape == (blocks[0].num_src_nodes(), 4)
        if neg is None:  # the same node set as DGL's compacted pair graph
            assert set(pg.ndata[dgl.NID].tolist()) == set(tpg.ndata[dgl.NID].tolist())
            continue
        assert ng.num_nodes() == pg.num_nodes()
        np.testing.assert_array_equal(ng.ndata[dgl.NID].numpy(), pg.ndata[dgl.NID].numpy())
        assert ng.num_edges() == tng.num_edges() == k * len(seeds)
        nsrc, ndst = _global(ng)
        assert set(pg.ndata[dgl.NID].tolist()) == set(want[0]) | set(want[1]) | set(nsrc) | set(
            ndst)
        if neg == "uniform":
            np.testing.assert_array_equal(nsrc, np.repeat(want[0], k))
            np.testing.assert_array_equal(_global(tng)[0], np.repeat(want[0], k))
        else:
            assert not g.has_edges_between(torch.from_numpy(nsrc), torch.from_numpy(ndst)).any()
            assert not (nsrc == ndst).any()
        for x, y in zip(_global(ng), _global(c[2])):  # DGL's sampler object = ours
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("exclude", [None, "self", "reverse_id"])
def test_exclusion_equals_dgl_with_every_neighbour(sym, exclude):
    """One layer of every neighbour, no negatives: the pair nodes are the same, so the block's
    edges must be DGL's exactly: the seeds' in-edges minus the excluded ones."""
    store, g = sym
    rev = reverse_edge_ids(store)
    # DGL's reverse mapping of the same graph: the reverse edge's endpoints swap
    s, d = g.find_edges(rev)
    src, dst = g.edges()
    assert torch.equal(s, dst) and torch.equal(d, src)
    eids = torch.from_numpy(np.random.default_rng(1).choice(g.num_edges(), 100, replace=False))
    kw = dict(exclude=exclude, reverse_eids=rev if exclude == "reverse_id" else None)
    theirs = DL.DataLoader(g, eids.clone(), DL.as_edge_prediction_sampler(
        DL.MultiLayerFullNeighborSampler(1), **kw), batch_size=25)
    ours = DataLoader(store, eids, as_edge_prediction_sampler(
        DL.MultiLayerFullNeighborSampler(1), **kw), batch_size=25, device="cpu")
    for i, ((_, pg, blocks), (_, tpg, tblocks)) in enumerate(zip(ours, theirs)):
        seeds = eids[25 * i: 25 * (i + 1)]
        got = set(blocks[0].edata[dgl.EID].tolist())
        assert got == set(tblocks[0].edata[dgl.EID].tolist())
        # brute force over the global edge ids
        nodes = set(pg.ndata[dgl.NID].tolist())
        assert nodes == set(tpg.ndata[dgl.NID].tolist())
        drop = set() if exclude is None else set(seeds.tolist())
        if exclude == "reverse_id":
            drop |= set(rev[seeds].tolist())
        want = {e for e in range(g.num_edges()) if int(dst[e]) in nodes} - drop
        assert got == want
        assert (exclude is None) == bool(set(seeds.tolist()) & got)


def test_hetero_against_dgl(tmp_path):
    rng = np.random.default_rng(7)
    store = hetero_store(tmp_path / "h", rng)
    g = dgl.heterograph({tuple(et): _coo(*store.csc(et)) for et in store.edge_types},
                        num_nodes_dict={nt: store.num_nodes(nt) for nt in store.node_types})
    et, rt = ("author", "writes", "paper"), ("paper", "rev_writes", "author")
    eids = torch.from_numpy(rng.choice(g.num_edges(et), 60, replace=False))
    mk = lambda ns: DL.as_edge_prediction_sampler(  # noqa: E731
        DL.NeighborSampler([2, 2]), exclude="reverse_types",
        reverse_etypes={"writes": "rev_writes", "rev_writes": "writes"}, negative_sampler=ns)
    ours = list(DataLoader(store, {"writes": eids}, mk(negative_sampler.Uniform(3)),
                           batch_size=30, device="cpu"))
    theirs = list(DL.DataLoader(g, {"writes": eids.clone()}, mk(DL.negative_sampler.Uniform(3)),
                                batch_size=30))
    assert len(ours) == len(theirs) == 2
    rs, rd = (x.numpy() for x in g.edges(etype=rt))
    for i, ((inp, pg, ng, blocks), (_, tpg, tng, _)) in enumerate(zip(ours, theirs)):
        seeds = eids[30 * i: 30 * (i + 1)]
        want = [x.numpy() for x in g.find_edges(seeds, etype=et)]
        assert sorted(pg.canonical_etypes) == sorted(tpg.canonical_etypes)
        assert sorted(pg.ntypes) == sorted(tpg.ntypes)
        for graph in (pg, tpg):
            got = _global(graph, et)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            assert graph.num_edges(("paper", "cites", "paper")) == 0
        np.testing.assert_array_equal(pg.edges[et].data[dgl.EID].numpy(), seeds.numpy())
        assert ng.num_edges(et) == tng.num_edges(et) == 3 * len(seeds)
        np.testing.assert_array_equal(_global(ng, et)[0], np.repeat(want[0], 3))
        for nt in pg.ntypes:
            assert pg.num_nodes(nt) == blocks[-1].num_dst_nodes(nt)
            np.testing.assert_array_equal(blocks[-1].dstnodes[nt].data[dgl.NID].numpy(),
                                          pg.nodes[nt].data[dgl.NID].numpy())
        assert set(inp) == set(store.node_types)
        # reverse_types: the seeds, and every reverse-endpoint edge of rev_writes, are absent
        pairs = set(zip(want[0].tolist(), want[1].tolist()))
        rev_drop = {e for e in range(rs.shape[0]) if (int(rd[e]), int(rs[e])) in pairs}
        for b in blocks:
            assert not set(b.edges[et].data[dgl.EID].tolist()) & set(seeds.tolist())
            assert not set(b.edges[rt].data[dgl.EID].tolist()) & rev_drop


@pytest.mark.parametrize("mode", ["none", "binary", "triplet"])
def test_link_neighbor_loader_dgl_output(sym, mode):
    """LinkNeighborLoader(output="dgl"): DGL's tuples from PyG-style pairs."""
    store, g = sym
    src, dst = (x.numpy() for x in g.edges())
    pick = np.random.default_rng(2).choice(g.num_edges(), 80, replace=False)
    pairs = np.stack([src[pick], dst[pick]])
    kw = {"none": {}, "binary": {"neg_sampling_ratio": 2.0},
          "triplet": {"neg_sampling": "triplet", "neg_sampling_ratio": 2}}[mode]
    ld = LinkNeighborLoader(store, [2, 3], pairs, batch_size=40, output="dgl", device="cpu", **kw)
    for i, b in enumerate(ld):
        assert len(b) == (3 if mode == "none" else 4)
        pg, blocks = b[1], b[-1]
        got = _global(pg)
        np.testing.assert_array_equal(np.stack(got), pairs[:, 40 * i: 40 * (i + 1)])
        np.testing.assert_array_equal(blocks[-1].dstdata[dgl.NID].numpy(),
                                      pg.ndata[dgl.NID].numpy())
        if mode != "none":
            assert b[2].num_edges() == 80
        if mode == "triplet":
            np.testing.assert_array_equal(_global(b[2])[0], np.repeat(got[0], 2))


def test_mixed_edge_types_against_dgl(tmp_path):
    """{etype: eids} of two types: batches cut across the types as DGL's do, the same pairs
    per type in each batch."""
    rng = np.random.default_rng(8)
    store = hetero_store(tmp_path / "h", rng)
    g = dgl.heterograph({tuple(et): _coo(*store.csc(et)) for et in store.edge_types},
                        num_nodes_dict={nt: store.num_nodes(nt) for nt in store.node_types})
    wr, ci = ("author", "writes", "paper"), ("paper", "cites", "paper")
    seeds = {wr: torch.from_numpy(rng.choice(g.num_edges(wr), 50, replace=False)),
             ci: torch.from_numpy(rng.choice(g.num_edges(ci), 30, replace=False))}
    mk = lambda: DL.as_edge_prediction_sampler(  # noqa: E731
        DL.NeighborSampler([2, 2]), exclude="self", negative_sampler=DL.negative_sampler.Uniform(1))
    ours = list(DataLoader(store, seeds, mk(), batch_size=32, device="cpu"))
    theirs = list(DL.DataLoader(g, {k: v.clone() for k, v in seeds.items()}, mk(),
                                batch_size=32))
    assert len(ours) == len(theirs) == 3
    for (_, pg, ng, blocks), (_, tpg, tng, _) in zip(ours, theirs):
        for et in (wr, ci):
            assert pg.num_edges(et) == tpg.num_edges(et) and ng.num_edges(et) == tng.num_edges(et)
            if pg.num_edges(et):
                for a, b in zip(_global(pg, et), _global(tpg, et)):
                    np.testing.assert_array_equal(a, b)
                np.testing.assert_array_equal(_global(ng, et)[0], _global(pg, et)[0])
                eid = pg.edges[et].data[dgl.EID]
                assert not set(eid.tolist()) & set(blocks[0].edges[et].data[dgl.EID].tolist())
        for nt in pg.ntypes:
            np.testing.assert_array_equal(blocks[-1].dstnodes[nt].data[dgl.NID].numpy(),
                                          pg.nodes[nt].data[dgl.NID].numpy())


def test_prefetch_labels_on_pair_graph(tmp_path):
    w = fs.create_store(tmp_path / "v", mode="w")
    w.add_node_type("node", 6)
    w.add_edge_type(ET, np.array([0, 1, 2, 3, 4, 5, 6]), np.array([1, 2, 3, 4, 5, 0]))
    w.add_edge_values(ET, "weight", np.arange(6) * 10)
    w.commit()
    with fs.open_store(tmp_path / "v") as st:
        sampler = as_edge_prediction_sampler([1], prefetch_labels=["weight"])
        (_, pg, _), = DataLoader(st, torch.tensor([4, 1, 3]), sampler, batch_size=3,
                                 device="cpu")
    assert pg.edata[dgl.EID].tolist() == [4, 1, 3] and pg.edata["weight"].tolist() == [40, 10, 30]
