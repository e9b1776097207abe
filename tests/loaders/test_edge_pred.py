"""Edge-prediction batches from seed edge ids (issue 18, DGL's as_edge_prediction_sampler), the
DGL-independent part: raw batches against brute force over the store's edges (pairs, negatives,
exclusions), reverse edge ids, and bad input refused by name. Against DGL itself:
tests/loaders/dgl_tests/test_dgl_edge_pred.py."""

import numpy as np
import pytest

import featurestore as fs
from loaders import NeighborLoader
from loaders.dgl_link import as_edge_prediction_sampler
from loaders.dgl_negative import GlobalUniform, Uniform
from loaders.errors import LoaderArgumentError, UnsupportedArgumentError
from loaders.loader.edge_pred import EdgeNegatives, EdgePredictionLoader
from loaders.sample.exclude import reverse_edge_ids

ET = ("node", "to", "node")


def _coo(store, et=None):
    indptr, indices = store.csc(et)
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    return np.asarray(indices, dtype=np.int64), dst


@pytest.fixture(scope="module")
def sym_store(tmp_path_factory):
    """A symmetric one-type store (every a -> b with its b -> a, some parallel edges)."""
    rng = np.random.default_rng(4)
    n = 400
    s, d = rng.integers(0, n, 1500), rng.integers(0, n, 1500)
    keep = s != d
    s, d = np.concatenate([s[keep], d[keep]]), np.concatenate([d[keep], s[keep]])
    order = np.lexsort((s, d))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(d, minlength=n), out=indptr[1:])
    path = tmp_path_factory.mktemp("sym") / "s"
    w = fs.create_store(path, mode="w")
    w.add_node_type("node", n)
    w.add_edge_type(ET, indptr, s[order].astype(np.int64))
    w.add_features("node", "feat", rng.standard_normal((n, 4)).astype(np.float32))
    w.commit()
    with fs.open_store(path) as st:
        yield st


def _batches(store, eids, **kw):
    kw.setdefault("batch_size", 50)
    return list(EdgePredictionLoader(store, eids, kw.pop("fanouts", [2, 2]), output="raw",
                                     device="cpu", **kw))


def _global(sub, nt, local):
    return sub.node[nt][local]


def test_pairs_map_back_to_seed_edges_and_per_source_negatives(homo_store):
    src, dst = _coo(homo_store)
    eids = np.random.default_rng(0).choice(src.shape[0], 120, replace=False)
    batches = _batches(homo_store, eids, negatives=EdgeNegatives("per_source", 3))
    assert len(batches) == 3
    for k, mb in enumerate(batches):
        sub, link = mb.subgraph, mb.subgraph.link
        want = eids[50 * k: 50 * (k + 1)]
        n = want.shape[0]
        (et, (p, q, e_id, _)), = link["pairs"].items()
        eli = np.concatenate([p, q], axis=1)
        assert tuple(et) == ET and eli.shape == (2, 4 * n) and link["has_neg"]
        np.testing.assert_array_equal(e_id, want)
        np.testing.assert_array_equal(_global(sub, "node", eli[0, :n]), src[want])
        np.testing.assert_array_equal(_global(sub, "node", eli[1, :n]), dst[want])
        # Uniform(k): k negatives per positive, the positive's source repeated
        np.testing.assert_array_equal(_global(sub, "node", eli[0, n:]), np.repeat(src[want], 3))
        # the batch's seeds are its sorted unique endpoints
        ns = sub.num_sampled_nodes["node"][0]
        np.testing.assert_array_equal(sub.node["node"][:ns], np.unique(sub.node["node"][eli]))


def test_global_uniform_negatives_are_not_edges(homo_store):
    src, dst = _coo(homo_store)
    edges = set(zip(src.tolist(), dst.tolist()))
    eids = np.arange(0, 3000, 30)
    for mb in _batches(homo_store, eids, negatives=EdgeNegatives("global", 2)):
        sub = mb.subgraph
        (pos, neg, _, _), = sub.link["pairs"].values()
        n = pos.shape[1]
        ns, nd = _global(sub, "node", neg[0]), _global(sub, "node", neg[1])
        pairs = list(zip(ns.tolist(), nd.tolist()))
        assert len(pairs) == 2 * n and len(set(pairs)) == len(pairs)
        assert not any(p in edges for p in pairs) and not (ns == nd).any()


def _block_eids(mb, et=ET):
    return set(mb.subgraph.edge[et].tolist())


def _in_edges(store, nodes, et=ET):
    indptr, _ = store.csc(et)
    return {e for v in nodes.tolist() for e in range(int(indptr[v]), int(indptr[v + 1]))}


@pytest.mark.parametrize("exclude", [None, "self", "reverse_id"])
def test_exclusion_by_id_against_brute_force(sym_store, exclude):
    """Every neighbour sampled (fanout -1): the sampled edges are exactly the seeds' in-edges
    minus the excluded ones (the seed edges, and their reverses by id)."""
    src, dst = _coo(sym_store)
    # brute-force reverse map: the k-th a->b edge to the k-th b->a edge
    groups = {}
    for e, p in enumerate(zip(src.tolist(), dst.tolist())):
        groups.setdefault(p, []).append(e)
    rev = np.empty(src.shape[0], np.int64)
    for (a, b), es in groups.items():
        rev[es] = groups[(b, a)]
    np.testing.assert_array_equal(reverse_edge_ids(*sym_store.csc()), rev)
    eids = np.random.default_rng(1).choice(src.shape[0], 90, replace=False)
    kw = dict(exclude=exclude, reverse_eids=rev if exclude == "reverse_id" else None)
    for k, mb in enumerate(_batches(sym_store, eids, fanouts=[-1], batch_size=30, **kw)):
        seeds = eids[30 * k: 30 * (k + 1)]
        drop = {"self": set(seeds.tolist()),
                "reverse_id": set(seeds.tolist()) | set(rev[seeds].tolist())}.get(exclude, set())
        nodes = mb.subgraph.node["node"][: mb.subgraph.num_sampled_nodes["node"][0]]
        assert _block_eids(mb) == _in_edges(sym_store, nodes) - drop
        if exclude is None:
            assert set(seeds.tolist()) <= _block_eids(mb)


def test_reverse_types_against_brute_force(hetero_store):
    et, rt = ("author", "writes", "paper"), ("paper", "rev_writes", "author")
    src, dst = _coo(hetero_store, et)
    rs, rd = _coo(hetero_store, rt)
    eids = np.random.default_rng(2).choice(src.shape[0], 40, replace=False)
    for mb in _batches(hetero_store, {et: eids}, fanouts=[-1], batch_size=40,
                       exclude="reverse_types", reverse_etypes={"writes": "rev_writes"}):
        sub = mb.subgraph
        pairs = set(zip(src[eids].tolist(), dst[eids].tolist()))
        rev_drop = {e for e in range(rs.shape[0]) if (rd[e], rs[e]) in pairs}
        assert rev_drop  # the store holds the reverses
        assert not set(sub.edge[et].tolist()) & set(eids.tolist())
        authors = sub.node["author"][: sub.num_sampled_nodes["author"][0]]
        assert set(sub.edge[rt].tolist()) == _in_edges(hetero_store, authors, rt) - rev_drop


def test_batches_mix_seed_edge_types(hetero_store):
    """{etype: eids} of two types: positions run over the types in the dict's order (DGL's),
    each type's pairs map back to its seed edges, and its exclusions leave its edges only."""
    wr, ci = ("author", "writes", "paper"), ("paper", "cites", "paper")
    rng = np.random.default_rng(3)
    ids = {wr: rng.choice(hetero_store.num_edges(wr), 30, replace=False),
           ci: rng.choice(hetero_store.num_edges(ci), 20, replace=False)}
    ends = {et: _coo(hetero_store, et) for et in ids}
    seq = [(wr, e) for e in ids[wr]] + [(ci, e) for e in ids[ci]]
    batches = _batches(hetero_store, {"writes": ids[wr], "cites": ids[ci]}, batch_size=20,
                       fanouts=[-1], exclude="self", negatives=EdgeNegatives("per_source", 2))
    assert len(batches) == 3
    for k, mb in enumerate(batches):
        sub, want = mb.subgraph, seq[20 * k: 20 * (k + 1)]
        assert sorted(map(tuple, sub.link["pairs"])) == sorted({et for et, _ in want})
        for et, (pos, neg, e_id, _) in sub.link["pairs"].items():
            mine = np.array([e for t, e in want if t == tuple(et)])
            np.testing.assert_array_equal(e_id, mine)
            np.testing.assert_array_equal(_global(sub, et[0], pos[0]), ends[tuple(et)][0][mine])
            np.testing.assert_array_equal(_global(sub, et[2], pos[1]), ends[tuple(et)][1][mine])
            np.testing.assert_array_equal(_global(sub, et[0], neg[0]),
                                          np.repeat(ends[tuple(et)][0][mine], 2))
            assert not set(sub.edge[et].tolist()) & set(mine.tolist())
            assert set(mine.tolist()) & _in_edges(hetero_store, _global(
                sub, et[2], pos[1]), et)  # there to be excluded: every neighbour is taken


def test_reverse_edge_ids_refuses_an_asymmetric_type(homo_store):
    with pytest.raises(LoaderArgumentError, match="symmetric"):
        reverse_edge_ids(*homo_store.csc())


def test_bad_arguments_named(sym_store, hetero_store):
    n = sym_store.num_edges()
    eids = np.arange(10)
    with pytest.raises(LoaderArgumentError, match=f"one entry per edge \\({n}\\)"):
        _batches(sym_store, eids, exclude="reverse_id", reverse_eids=np.arange(n - 1))
    with pytest.raises(LoaderArgumentError, match="reverse_eids in \\[0"):
        _batches(sym_store, eids, exclude="reverse_id", reverse_eids=np.full(n, n))
    with pytest.raises(LoaderArgumentError, match="reverse_eids"):
        _batches(sym_store, eids, exclude="reverse_id")
    with pytest.raises(UnsupportedArgumentError, match="exclude"):
        as_edge_prediction_sampler([2], exclude="reverse")
    with pytest.raises(UnsupportedArgumentError, match="negative_sampler"):
        as_edge_prediction_sampler([2], negative_sampler=lambda g, e: (e, e))
    with pytest.raises(LoaderArgumentError, match="k >= 1"):
        Uniform(0)
    with pytest.raises(fs.FeatureStoreError, match="seed edge ids"):
        _batches(sym_store, np.array([n]))
    with pytest.raises(LoaderArgumentError, match="distinct"):
        _batches(hetero_store, {"writes": [0], ("author", "writes", "paper"): [1]})
    with pytest.raises(LoaderArgumentError, match="etype"):
        _batches(hetero_store, [0, 1])
    with pytest.raises(LoaderArgumentError, match="reverse type"):
        _batches(hetero_store, {"writes": [0]}, exclude="reverse_types",
                 reverse_etypes={"writes": "cites"})


def test_edge_sampler_passed_to_neighbor_loader_is_named(sym_store):
    """Issue 21: an edge-prediction sampler given to NeighborLoader names DGL's DataLoader, not
    PyG's argument order."""
    sampler = as_edge_prediction_sampler([2], negative_sampler=GlobalUniform(1))
    with pytest.raises(LoaderArgumentError, match="loaders.dgl.DataLoader") as e:
        NeighborLoader(sym_store, sampler, np.arange(10), device="cpu")
    assert "swap" not in str(e.value) and "order" not in str(e.value)


def test_linkprop_dataset_and_evaluator(tmp_path, sym_store):
    """OGB's DglLinkPropPredDataset/Evaluator stand-ins: the stored edge splits under OGB's
    keys, and ranks counted by hand (ties half)."""
    import torch

    from loaders.datasets.linkprop import DglLinkPropPredDataset, Evaluator

    w = fs.create_store(tmp_path / "ogbl-x", mode="w")
    w.add_node_type("node", 10)
    w.add_edge_type(ET, np.arange(11, dtype=np.int64), np.arange(10, dtype=np.int64))
    w.add_edge_split("valid", ET, src=[1, 2], dst=[3, 4], neg_dst=[[5, 6], [7, 8]])
    w.commit()
    split = DglLinkPropPredDataset("ogbl-x", root=tmp_path).get_edge_split()
    assert list(split) == ["valid"]
    assert split["valid"]["source_node"].tolist() == [1, 2]
    assert split["valid"]["target_node_neg"].tolist() == [[5, 6], [7, 8]]
    pos = torch.tensor([0.5, 0.1, 0.9])
    neg = torch.tensor([[0.7, 0.5, 0.1], [0.2, 0.3, 0.0], [0.1, 0.2, 0.3]])
    out = Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})
    ranks = [1 + 1 + 0.5, 1 + 2, 1.0]  # by hand: higher negatives, ties half
    assert out["mrr_list"].tolist() == pytest.approx([1 / r for r in ranks])
    assert out["hits@1_list"].tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(LoaderArgumentError, match="ogbl-collab"):
        Evaluator("ogbl-collab")


def test_negative_samplers_called_as_dgls(homo_store, hetero_store):
    """sampler(g, eids) as DGL's: Uniform repeats each source k times; GlobalUniform gives
    k * E non-edge pairs; a dict in, a dict out."""
    src, dst = _coo(homo_store)
    edges = set(zip(src.tolist(), dst.tolist()))
    eids = np.array([5, 17, 400])
    s, d = Uniform(3)(homo_store, eids)
    assert s.tolist() == np.repeat(src[eids], 3).tolist() and d.shape == (9,)
    s, d = GlobalUniform(2)(homo_store, eids)
    assert len(s) == 6 and not any(p in edges for p in zip(s.tolist(), d.tolist()))
    et = ("author", "writes", "paper")
    out = Uniform(1)(hetero_store, {"writes": [0, 1]})
    assert list(out) == [et] and int(out[et][1].max()) < hetero_store.num_nodes("paper")


def test_prefetch_labels_on_pair_edges(tmp_path):
    w = fs.create_store(tmp_path / "v", mode="w")
    w.add_node_type("node", 6)
    w.add_edge_type(ET, np.array([0, 1, 2, 3, 4, 5, 6]), np.array([1, 2, 3, 4, 5, 0]))
    w.add_edge_values(ET, "weight", np.arange(6) * 10)
    w.commit()
    with fs.open_store(tmp_path / "v") as st:
        (mb,) = _batches(st, [4, 1, 3], prefetch_labels=["weight"])
        (_, _, e_id, edata), = mb.subgraph.link["pairs"].values()
        assert e_id.tolist() == [4, 1, 3] and edata["weight"].tolist() == [40, 10, 30]
        with pytest.raises(LoaderArgumentError, match="prefetch_labels"):
            _batches(st, [0], prefetch_labels=["label"])
