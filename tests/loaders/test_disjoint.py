"""disjoint=True (one tree per seed, PyG's ``disjoint``): the sampler against an independent
plain-Python model of PyG's semantics and against non-disjoint sampling of the disjoint union
of per-seed copies of the graph; the loaders' ``batch``; what is refused.

PyG's own ``disjoint=True`` needs pyg-lib (with torch-sparse PyG raises), so PyG itself is
compared on the definition: its non-disjoint sampler on the disjoint union of ``B`` copies of
the graph, seed ``b`` in copy ``b``, finds every seed's tree.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from featurestore.format.names import EdgeType
from loaders import LinkNeighborLoader, NeighborLoader
from loaders.errors import LoaderArgumentError, UnsupportedArgumentError
from loaders.sample.reference import choose_py, reference_sample
from loaders.sample.rng import batch_key, layer_key
from loaders.sample.sampler import CSCGraph, Fanouts, NeighborSampler

FANOUTS = [[4, 3], [-1, 2], [15, 10, 5], [-1, -1], [0, 3]]


@pytest.fixture(params=["serial", "parallel"])
def kernel_mode(request, monkeypatch):
    """Both kernel twins (serial, parallel) on these small frontiers."""
    import loaders.sample.kernels as K

    monkeypatch.setattr(K, "PARALLEL_MIN", 1 if request.param == "parallel" else 1 << 62)
    return request.param


def pyg_disjoint(graph: CSCGraph, num_neighbors, seeds, seed_type, *, replace, seed, epoch,
                 batch) -> dict:
    """PyG's disjoint sampling (pyg-lib's ``neighbor_sample`` with ``disjoint=True``), written
    from its definition in plain Python: seed ``i`` is the node ``(i, seeds[i])``; each layer,
    per edge type, every frontier node ``(b, v)`` in order draws its neighbours ``u`` and maps
    ``(b, u)``, appending it when new; edges join local ids. The draws are ours
    (:func:`choose_py`, keyed by frontier position), as PyG's come from its own generator."""
    fan = Fanouts.parse(num_neighbors, graph.edge_types)
    key = batch_key(seed, epoch, batch)
    pairs = {t: [] for t in graph.node_types}
    local = {t: {} for t in graph.node_types}
    for i, s in enumerate(int(x) for x in seeds):
        local[seed_type][(i, s)] = len(pairs[seed_type])
        pairs[seed_type].append((i, s))
    hops = {t: [len(v)] for t, v in pairs.items()}
    edges = {et: [] for et in graph.edge_types}
    begin = {t: 0 for t in graph.node_types}
    for layer in range(fan.num_layers):
        end = {t: len(v) for t, v in pairs.items()}
        for e_idx, et in enumerate(graph.edge_types):
            indptr, indices = graph.csc[et]
            f = fan.per_etype[et][layer]
            k = layer_key(key, layer, e_idx)
            for i, pos in enumerate(range(begin[et.dst], end[et.dst])):
                b, v = pairs[et.dst][pos]
                lo, hi = int(indptr[v]), int(indptr[v + 1])
                for p in (choose_py(hi - lo, f, replace, k, i) if f else []):
                    u = int(indices[lo + p])
                    if (b, u) not in local[et.src]:
                        local[et.src][(b, u)] = len(pairs[et.src])
                        pairs[et.src].append((b, u))
                    edges[et].append((local[et.src][(b, u)], pos, lo + p, layer))
        for t in graph.node_types:
            hops[t].append(len(pairs[t]) - end[t])
            begin[t] = end[t]
    return dict(pairs=pairs, edges=edges, hops=hops)


def assert_matches_model(sub, model, num_layers: int) -> None:
    for t, pairs in model["pairs"].items():
        p = np.array(pairs, np.int64).reshape(-1, 2)
        assert np.array_equal(sub.batch[t], p[:, 0]) and np.array_equal(sub.node[t], p[:, 1])
        assert sub.num_sampled_nodes[t] == model["hops"][t]
    for et, es in model["edges"].items():
        e = np.array(es, np.int64).reshape(-1, 4)
        assert np.array_equal(sub.row[et], e[:, 0]) and np.array_equal(sub.col[et], e[:, 1])
        assert np.array_equal(sub.edge[et], e[:, 2])
        assert sub.num_sampled_edges[et] == np.bincount(e[:, 3], minlength=num_layers).tolist()


def check_trees(g: CSCGraph, sub, fan: Fanouts, replace: bool, seeds) -> None:
    """Per seed, a tree of its own: seeds first with batch 0..B-1, no repeated (seed, node)
    pair, edges real and never between two seeds' nodes, each non-seed node reached by an
    edge of its own tree, and each frontier node's draws as many as its fanout gives."""
    B = len(seeds)
    assert np.array_equal(sub.seeds, seeds)
    assert np.array_equal(sub.batch[sub.seed_type][:B], np.arange(B))
    reached = {t: np.zeros(n.shape[0], bool) for t, n in sub.node.items()}
    reached[sub.seed_type][:B] = True
    for t, nodes in sub.node.items():
        pair = sub.batch[t] * g.num_nodes[t] + nodes
        assert np.unique(pair).shape[0] == pair.shape[0]
        assert sub.batch[t].min(initial=0) >= 0 and sub.batch[t].max(initial=0) < B
    hop_end = {t: np.cumsum(c) for t, c in sub.num_sampled_nodes.items()}
    for et in g.edge_types:
        indptr, indices = g.csc[et]
        row, col, eid = sub.row[et], sub.col[et], sub.edge[et]
        assert np.array_equal(sub.batch[et.src][row], sub.batch[et.dst][col])  # one tree
        dst = sub.node[et.dst][col]
        assert np.all(np.asarray(indices)[eid] == sub.node[et.src][row])
        assert np.all((indptr[dst] <= eid) & (eid < indptr[dst + 1]))
        reached[et.src][row] = True
        lo = 0
        for layer, m in enumerate(sub.num_sampled_edges[et]):
            first = 0 if layer == 0 else hop_end[et.dst][layer - 1]
            front = np.arange(first, hop_end[et.dst][layer])
            d = indptr[sub.node[et.dst][front] + 1] - indptr[sub.node[et.dst][front]]
            f = fan.per_etype[et][layer]
            want = d if f < 0 else (np.where(d > 0, f, 0) if replace else np.minimum(f, d))
            got = np.bincount(col[lo:lo + m] - first, minlength=front.shape[0])
            assert np.array_equal(got, want)
            lo += m
    assert all(r.all() for r in reached.values())


def disjoint_union(g: CSCGraph, B: int) -> CSCGraph:
    """``B`` copies of ``g``: node ``v`` of copy ``b`` is ``b * N + v`` (per node type)."""
    csc = {}
    for et, (indptr, indices) in g.csc.items():
        ns, nd, E = g.num_nodes[et.src], g.num_nodes[et.dst], int(indptr[-1])
        p = np.concatenate([[0]] + [np.asarray(indptr[1:], np.int64) + b * E for b in range(B)])
        i = np.concatenate([np.asarray(indices, np.int64) + b * ns for b in range(B)])
        assert p.shape[0] == B * nd + 1
        csc[et] = (p, i)
    return CSCGraph({t: B * n for t, n in g.num_nodes.items()}, csc)


def hetero_graph(rng) -> CSCGraph:
    from graph_helpers import random_csc

    nn = {"paper": 300, "author": 200}
    ets = [EdgeType("paper", "cites", "paper"), EdgeType("author", "writes", "paper"),
           EdgeType("paper", "rev_writes", "author")]
    csc = {}
    for et, m in zip(ets, (2000, 1200, 1200)):
        indptr, indices, _, _ = random_csc(rng, nn[et.src], nn[et.dst], m)
        csc[et] = (indptr, indices)
    return CSCGraph(nn, csc)


# -- the sampler ------------------------------------------------------------------------------
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fan", FANOUTS)
def test_homogeneous_matches_pyg_model_and_reference(skewed_graph, fan, replace, kernel_mode):
    g = skewed_graph
    rng = np.random.default_rng(1)
    seeds = np.r_[np.arange(5), rng.choice(np.arange(5, 600), 40, replace=False), [7, 7, 0]]
    s = NeighborSampler(g, fan, replace=replace, disjoint=True)
    sub = s.sample(seeds, seed=3, epoch=1, batch=4)
    assert_matches_model(sub, pyg_disjoint(g, fan, seeds, "v", replace=replace, seed=3,
                                           epoch=1, batch=4), len(fan))
    ref = reference_sample(g, fan, seeds, replace=replace, seed=3, epoch=1, batch=4,
                           disjoint=True)
    for f in ("node", "batch"):
        assert np.array_equal(getattr(sub, f)["v"], getattr(ref, f)["v"])
    check_trees(g, sub, s.fanouts, replace, seeds)
    if any(x != 0 for x in fan[:1]):  # shared neighbours are held once per tree
        assert sub.node["v"].shape[0] > np.unique(sub.node["v"]).shape[0]


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fan", [[3, 2], [-1, 2], {"cites": [-1, 1], "writes": [2, 2],
                                                   "rev_writes": [0, 3]}])
def test_heterogeneous_matches_pyg_model(fan, replace, kernel_mode):
    g = hetero_graph(np.random.default_rng(4))
    seeds = np.r_[np.random.default_rng(5).choice(300, 30, replace=False), [11, 11]]
    s = NeighborSampler(g, fan, replace=replace, disjoint=True)
    sub = s.sample(seeds, "paper", seed=9, batch=2)
    assert_matches_model(sub, pyg_disjoint(g, fan, seeds, "paper", replace=replace, seed=9,
                                           epoch=0, batch=2), 2)
    check_trees(g, sub, s.fanouts, replace, seeds)
    assert sub.num_sampled_nodes["author"][1] > 0


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fan", [[4, 3], [-1, 2], [2, 2, 2]])
def test_equals_plain_sampling_of_the_disjoint_union(skewed_graph, fan, replace):
    """The definition: seed ``b``'s tree is what sampling finds from seed ``b`` in its own copy
    of the graph; our non-disjoint sampler on ``B`` copies gives the same batch, ids mapped."""
    g = skewed_graph
    seeds = np.r_[np.arange(3), np.random.default_rng(2).choice(600, 20), [1]]
    B, N, E = len(seeds), 600, int(g.csc[g.edge_types[0]][0][-1])
    sub = NeighborSampler(g, fan, replace=replace, disjoint=True).sample(seeds, seed=1, batch=7)
    u = NeighborSampler(disjoint_union(g, B), fan, replace=replace).sample(
        np.arange(B) * N + seeds, seed=1, batch=7)
    (et,) = g.edge_types
    assert np.array_equal(sub.node["v"], u.node["v"] % N)
    assert np.array_equal(sub.batch["v"], u.node["v"] // N)
    assert np.array_equal(sub.row[et], u.row[et]) and np.array_equal(sub.col[et], u.col[et])
    assert np.array_equal(sub.edge[et], u.edge[et] % E)
    assert sub.num_sampled_nodes == u.num_sampled_nodes
    assert sub.num_sampled_edges == u.num_sampled_edges


def test_heterogeneous_equals_plain_sampling_of_the_disjoint_union():
    g = hetero_graph(np.random.default_rng(6))
    seeds = np.random.default_rng(7).choice(300, 12)
    B, fan = len(seeds), [3, -1]
    sub = NeighborSampler(g, fan, disjoint=True).sample(seeds, "paper", seed=2)
    u = NeighborSampler(disjoint_union(g, B), fan).sample(
        np.arange(B) * 300 + seeds, "paper", seed=2)
    for t, n in g.num_nodes.items():
        assert np.array_equal(sub.node[t], u.node[t] % n)
        assert np.array_equal(sub.batch[t], u.node[t] // n)
    for et in g.edge_types:
        assert np.array_equal(sub.row[et], u.row[et]) and np.array_equal(sub.col[et], u.col[et])
        assert np.array_equal(sub.edge[et], u.edge[et] % int(g.csc[et][0][-1]))


def test_one_seed_is_the_plain_batch(skewed_graph):
    for fan, replace in (([5, 3], False), ([-1, 2], False), ([4, 4], True)):
        a = NeighborSampler(skewed_graph, fan, replace=replace, disjoint=True).sample([3])
        b = NeighborSampler(skewed_graph, fan, replace=replace).sample([3])
        assert np.array_equal(a.node["v"], b.node["v"]) and not a.batch["v"].any()
        (et,) = a.row
        assert all(np.array_equal(getattr(a, f)[et], getattr(b, f)[et])
                   for f in ("row", "col", "edge"))
        assert b.batch is None


def test_parallel_and_serial_kernels_agree(skewed_graph, monkeypatch):
    import loaders.sample.kernels as K

    seeds = np.random.default_rng(3).choice(600, 200)
    out = []
    for par in (1, 1 << 62):
        monkeypatch.setattr(K, "PARALLEL_MIN", par)
        for fpn in ("edge_type", "node"):
            s = NeighborSampler(skewed_graph, [10, 5, 3], replace=True, disjoint=True,
                                num_threads=2, fanout_per=fpn)
            out.append(s.sample(seeds, seed=4, batch=1))
    (et,) = out[0].row
    for o in out[1:]:
        assert np.array_equal(o.node["v"], out[0].node["v"])
        assert np.array_equal(o.batch["v"], out[0].batch["v"])
        assert all(np.array_equal(getattr(o, f)[et], getattr(out[0], f)[et])
                   for f in ("row", "col", "edge"))


def test_pair_keys_twins_agree():
    import loaders.sample.kernels as K

    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 1000, 5000), rng.integers(0, 40, 5000)
    owner = rng.integers(0, 64, 40)
    want = owner[dst] * 1000 + src
    for fn in (K._pairs_par, K._pairs_ser):
        got = src.copy()
        fn(got, dst, owner, np.int64(1000))
        assert np.array_equal(got, want)


def test_disjoint_false_is_unchanged(skewed_graph):
    seeds = np.r_[np.arange(5), [3, 3]]
    a = NeighborSampler(skewed_graph, [5, 3]).sample(seeds, seed=1)
    b = reference_sample(skewed_graph, [5, 3], seeds, seed=1)
    assert a.batch is None and b.batch is None
    assert np.array_equal(a.node["v"], b.node["v"])


def test_sampler_refusals(skewed_graph, hetero_store):
    with pytest.raises(LoaderArgumentError, match="disjoint True or False"):
        NeighborSampler(skewed_graph, [2], disjoint="yes")
    with pytest.raises(LoaderArgumentError, match="sampling='uniform' with disjoint=True"):
        NeighborSampler(skewed_graph, [2], disjoint=True, sampling="labor")
    s = NeighborSampler(hetero_store, [2], disjoint=True)
    with pytest.raises(LoaderArgumentError, match="no more_seeds with disjoint=True"):
        s.sample([1], "paper", more_seeds={"author": [1]})


# -- PyG ---------------------------------------------------------------------------------------
def _pyg_union_data(homo_store, B):
    from torch_geometric.data import Data

    et = homo_store.edge_types[0]
    indptr, indices = homo_store.csc(et)
    N = homo_store.num_nodes()
    dst = np.repeat(np.arange(N), np.diff(indptr))
    src = np.asarray(indices, np.int64)
    ei = np.concatenate([np.stack([src + b * N, dst + b * N]) for b in range(B)], axis=1)
    return Data(edge_index=torch.from_numpy(ei), num_nodes=B * N), N


@pytest.mark.skipif(not any(importlib.util.find_spec(m) for m in ("torch_sparse", "pyg_lib")),
                    reason="PyG's own sampler needs torch-sparse or pyg-lib")
def test_pygs_sampler_on_the_disjoint_union_finds_our_trees(homo_store):
    """With all neighbours there is no randomness: PyG's own NeighborLoader, on ``B`` copies of
    the graph with seed ``b`` in copy ``b``, finds for every seed the nodes (per hop) and edges
    our disjoint batch gives that seed's tree."""
    from torch_geometric.loader import NeighborLoader as PygLoader

    seeds = np.r_[np.asarray(homo_store.split("valid"))[:24], [0, 0]]
    B = len(seeds)
    data, N = _pyg_union_data(homo_store, B)
    ours = next(iter(NeighborLoader(homo_store, [-1, -1], seeds, batch_size=B, output="pyg",
                                    device="cpu", disjoint=True)))
    theirs = next(iter(PygLoader(data, num_neighbors=[-1, -1],
                                 input_nodes=torch.from_numpy(np.arange(B) * N + seeds),
                                 batch_size=B)))
    assert ours.batch.dtype == torch.long
    tn = theirs.n_id
    assert torch.equal(ours.n_id[:B], tn[:B] % N) and torch.equal(ours.batch[:B], tn[:B] // N)
    pairs_ours = set(zip(ours.batch.tolist(), ours.n_id.tolist()))
    pairs_theirs = set(zip((tn // N).tolist(), (tn % N).tolist()))
    assert pairs_ours == pairs_theirs and len(pairs_ours) == ours.num_nodes == tn.numel()

    def edges(b, n, ei):
        return sorted(zip(b[ei[0]].tolist(), n[ei[0]].tolist(), n[ei[1]].tolist()))

    assert edges(ours.batch, ours.n_id, ours.edge_index) == edges(tn // N, tn % N,
                                                                 theirs.edge_index)


def test_pygs_own_disjoint_needs_pyg_lib(homo_store):
    """Why PyG is compared on the disjoint union: its own disjoint mode needs pyg-lib."""
    pytest.importorskip("torch_sparse")
    if importlib.util.find_spec("pyg_lib"):
        pytest.skip("pyg-lib installed: PyG samples disjoint itself")
    from torch_geometric.loader import NeighborLoader as PygLoader

    data, _ = _pyg_union_data(homo_store, 1)
    with pytest.raises(ValueError, match="pyg-lib"):
        next(iter(PygLoader(data, num_neighbors=[2], input_nodes=torch.arange(4), batch_size=4,
                            disjoint=True)))


# -- loaders -----------------------------------------------------------------------------------
def test_loader_batches(homo_store):
    pytest.importorskip("torch_geometric")
    kw = dict(batch_size=200, shuffle=True, seed=5, device="cpu", disjoint=True)
    raw = NeighborLoader(homo_store, [6, 4], "train", **kw)
    pyg = NeighborLoader(homo_store, [6, 4], "train", output="pyg", **kw)
    feat = np.asarray(homo_store.features(None, "feat").numpy())
    for k, (mb, d) in enumerate(zip(raw, pyg)):
        sub = mb.subgraph
        want = raw.sample_batch(0, k, raw.batch_order(0)[k])
        assert np.array_equal(sub.node["node"], want.node["node"])
        assert np.array_equal(sub.batch["node"], want.batch["node"])
        assert isinstance(d.batch, torch.Tensor) and d.batch.dtype == torch.long
        assert torch.equal(d.batch, torch.from_numpy(sub.batch["node"]))
        assert torch.equal(d.n_id, torch.from_numpy(sub.node["node"]))
        assert d.n_id.numel() > d.n_id.unique().numel()  # a node once per tree
        assert np.array_equal(d.x.numpy(), feat[sub.node["node"]])
        b = d.batch
        assert torch.equal(b[d.edge_index[0]], b[d.edge_index[1]])
        assert torch.equal(b[: d.batch_size], torch.arange(d.batch_size))
        assert d.y.shape[0] == d.num_nodes


def test_loader_heterogeneous_and_relational(hetero_store):
    pytest.importorskip("torch_geometric")
    kw = dict(batch_size=64, device="cpu", disjoint=True)
    fan = {"cites": [4, 2], "writes": [3, 2], "rev_writes": [2, 2],
           "affiliated_with": [1, 1], "rev_affiliated_with": [2, 2]}
    h = next(iter(NeighborLoader(hetero_store, fan, ("paper", "train"), output="pyg", **kw)))
    for t in hetero_store.node_types:
        assert h[t].batch.dtype == torch.long and h[t].batch.shape[0] == h[t].num_nodes
    for et in h.edge_types:
        s, _, d = et
        ei = h[et].edge_index
        assert torch.equal(h[s].batch[ei[0]], h[d].batch[ei[1]])
    hom = next(iter(NeighborLoader(hetero_store, [3, 2], ("paper", "train"), output="pyg",
                                   homogeneous=True, feature=None, **kw)))
    assert hom.batch.shape[0] == hom.num_nodes
    assert torch.equal(hom.batch[hom.edge_index[0]], hom.batch[hom.edge_index[1]])
    assert torch.equal(hom.batch[: hom.batch_size], torch.arange(hom.batch_size))


def test_pyg_sampler_facade(homo_store):
    pytest.importorskip("torch_geometric")
    from torch_geometric.loader import NodeLoader
    from loaders.pyg import NeighborSampler as PygFacade, remote_backend

    sampler = PygFacade(homo_store, [3, 2], disjoint=True, seed=1)
    assert sampler.disjoint
    ld = NodeLoader(remote_backend(homo_store), sampler,
                    input_nodes=torch.from_numpy(np.array(homo_store.split("train"))),
                    batch_size=100)
    d = next(iter(ld))
    assert d.batch.dtype == torch.long and d.batch.shape[0] == d.n_id.shape[0]
    assert torch.equal(d.batch[d.edge_index[0]], d.batch[d.edge_index[1]])
    assert torch.equal(d.batch[:100], torch.arange(100))
    from torch_geometric.sampler import EdgeSamplerInput

    with pytest.raises(UnsupportedArgumentError, match="disjoint=False for link batches"):
        sampler.sample_from_edges(EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([1])))


@pytest.mark.parametrize("model_name", ["SGFormer", "Polynormer"])
def test_ogbn_train_models_run_on_batches(homo_store, model_name):
    """PyG's ogbn_train.py default path: NeighborLoader(..., disjoint=True) and
    model(batch.x, batch.edge_index, batch.batch) for PyG's own SGFormer and Polynormer, whose
    global attention groups each seed's tree with to_dense_batch(x, batch.batch)."""
    pyg = pytest.importorskip("torch_geometric")
    from torch_geometric.utils import to_dense_batch

    torch.manual_seed(0)
    if model_name == "SGFormer":
        model = pyg.nn.models.SGFormer(16, 8, 4, trans_num_layers=1, gnn_num_layers=1)
    else:
        model = pyg.nn.models.Polynormer(16, 8, 4, local_layers=1, global_layers=1)
        model._global = True  # ogbn_train.py switches to the global stage after warm-up
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    ld = NeighborLoader(homo_store, [5, 3], "train", batch_size=64, shuffle=True, output="pyg",
                        device="cpu", disjoint=True)
    for k, batch in enumerate(ld):
        # one group per seed: its tree's nodes, the seed first
        b_sorted, order = batch.batch.sort(stable=True)
        dense, mask = to_dense_batch(batch.n_id[order], b_sorted)
        assert dense.shape[0] == batch.batch_size
        assert torch.equal(dense[:, 0], batch.n_id[: batch.batch_size])
        assert torch.equal(mask.sum(1), torch.bincount(batch.batch))
        out = model(batch.x, batch.edge_index, batch.batch)
        assert out.shape == (batch.num_nodes, 4)
        loss = torch.nn.functional.cross_entropy(out[: batch.batch_size],
                                                 batch.y[: batch.batch_size])
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert torch.isfinite(loss)
        if k == 2:
            break


def test_loader_refusals(homo_store):
    with pytest.raises(UnsupportedArgumentError, match="disjoint=False with output='dgl'"):
        NeighborLoader(homo_store, [2], "train", output="dgl", disjoint=True)
    with pytest.raises(UnsupportedArgumentError, match="disjoint=False for link batches"):
        LinkNeighborLoader(homo_store, [2], "train", disjoint=True)
    with pytest.raises(LoaderArgumentError, match="disjoint=True"):
        NeighborLoader(homo_store, [2], "train", sampling="labor", disjoint=True)


# -- the memory plan ---------------------------------------------------------------------------
def test_plan_holds_disjoint_batches(homo_store):
    """Disjoint batches can hold more rows than the graph has nodes: the bound is not capped at
    the node count, and a measured plan measures the disjoint batches."""
    from graph_helpers import probe_plan
    from loaders.memory.budget import ROWS_HEADROOM

    kw = dict(batch_size=256, device="cpu")
    ld = NeighborLoader(homo_store, [10, 10], "train", memory="4GiB", disjoint=True, **kw)
    rows = [mb.subgraph.node["node"].shape[0] for mb in ld]
    assert max(rows) > homo_store.num_nodes()  # more rows than nodes: one per tree
    assert ld.plan.fits and ld.plan.batch_rows["node"] >= max(rows)
    plain = NeighborLoader(homo_store, [10, 10], "train", memory="4GiB", **kw)
    assert plain.plan.batch_rows["node"] <= np.ceil(ROWS_HEADROOM * homo_store.num_nodes())
    measured = probe_plan(homo_store, [10, 10], "train", disjoint=True, **kw)
    picked = np.linspace(0, len(rows) - 1, min(8, len(rows))).astype(int)
    assert measured.batch_rows["node"] == int(np.ceil(ROWS_HEADROOM * max(
        rows[j] for j in set(picked.tolist()))))
    assert measured.batch_rows["node"] > homo_store.num_nodes()
