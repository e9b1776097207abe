"""The relational view (``homogeneous=True``) against PyG's own ``HeteroData.to_homogeneous()``
of the whole store loaded in memory: every sampled edge exists there with the same type,
features, node types and labels agree, seeds come first and hop prefixes hold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import featurestore as fs
from loaders import NeighborLoader
from loaders.memory.budget import MARGIN_MIN
from graph_helpers import probe_plan, resident_topology_bytes
from loaders.errors import LoaderArgumentError


@pytest.fixture(scope="module")
def rel_store(tmp_path_factory):
    from loaders.datasets.synthetic import mag_like_store

    path = mag_like_store(tmp_path_factory.mktemp("rel") / "s", num_papers=600, num_authors=400,
                          num_institutions=30, feat_dim=8, seed=4, derive_features=True)
    with fs.open_store(path) as s:
        yield s


def _pyg_homogeneous(store):
    """The whole store as PyG's HeteroData, then PyG's own to_homogeneous()."""
    from torch_geometric.data import HeteroData

    h = HeteroData()
    for t in store.node_types:
        h[t].x = torch.from_numpy(store.features(t, "feat").numpy().astype(np.float32))
        h[t].num_nodes = store.num_nodes(t)
    for et in store.edge_types:
        indptr, indices = store.csc(et)
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        h[tuple(et)].edge_index = torch.from_numpy(np.stack([np.asarray(indices, np.int64), dst]))
    assert h.node_types == list(store.node_types)
    assert h.edge_types == [tuple(et) for et in store.edge_types]
    return h.to_homogeneous()


def _labels(store, d):
    y = np.full(d.num_nodes, -1, np.int64)
    off = 0
    for t in store.node_types:
        n = store.num_nodes(t)
        if "label" in store.value_names(t):
            y[off:off + n] = store.labels(t)
        off += n
    return y


@pytest.mark.parametrize("chunked,dtype,budget", [(False, torch.float32, False),
                                                   (True, torch.float32, False),
                                                   (False, None, True), (True, None, True)])
def test_pyg_homogeneous_batches_match_to_homogeneous(rel_store, chunked, dtype, budget):
    """Features land straight in the view's rows (plain, cast, cached, device path)."""
    d = _pyg_homogeneous(rel_store)
    N = d.num_nodes
    key = set(((d.edge_index[0] * N + d.edge_index[1]) * 16 + d.edge_type).tolist())
    ys = _labels(rel_store, d)
    kw = dict(batch_size=50, device="cpu", output="pyg", homogeneous=True, dtype=dtype,
              shuffle=True, staging_bytes=4096)
    if budget:  # the features do not fit: a cache holds part of every type's rows
        probe = probe_plan(rel_store, [4, 3], ("paper", "train"), **kw)
        fbytes = sum(rel_store.features(t).numpy().nbytes for t in rel_store.node_types)
        kw["memory"] = (probe.batch_bytes * 2 + probe.sampler_bytes + probe.reader_bytes
                        + MARGIN_MIN + resident_topology_bytes(rel_store) + fbytes // 2)
    ld = NeighborLoader(rel_store, [4, 3], ("paper", "train"), **kw)
    assert bool(ld.caches) == budget
    ld._chunked = chunked
    seeds = rel_store.split("train", "paper")
    paper = rel_store.node_types.index("paper")
    poff = sum(rel_store.num_nodes(t) for t in rel_store.node_types[:paper])
    nb = 0
    for b in ld:
        nb += 1
        n_id = b.n_id
        assert torch.equal(b.x.float(), d.x[n_id])
        assert b.x.dtype == (torch.float32 if dtype else torch.float16)
        assert torch.equal(b.node_type, d.node_type[n_id])
        assert torch.equal(b.y, torch.from_numpy(ys[n_id.numpy()]))
        src, dst = n_id[b.edge_index[0]], n_id[b.edge_index[1]]
        got = ((src * N + dst) * 16 + b.edge_type).tolist()
        assert len(got) == b.edge_index.shape[1] > 0 and set(got) <= key
        # e_id: the edge's position in PyG's homogeneous edge list (types in store order,
        # each in CSC order, as _pyg_homogeneous built them)
        assert torch.equal(d.edge_index[:, b.e_id], torch.stack([src, dst]))
        assert torch.equal(d.edge_type[b.e_id], b.edge_type)
        # seeds first, then hop prefixes: each layer's edges end in earlier hops
        bs = b.batch_size
        assert torch.equal(n_id[:bs], torch.from_numpy(poff + seeds[b.input_id.numpy()]))
        assert (b.node_type[:bs] == paper).all()
        cn = np.cumsum(b.num_sampled_nodes)
        lo = 0
        for layer, m in enumerate(b.num_sampled_edges):
            assert (b.edge_index[1, lo:lo + m] < cn[layer]).all()
            assert (b.edge_index[0, lo:lo + m] < cn[layer + 1]).all()
            lo += m
        assert sum(b.num_sampled_nodes) == b.num_nodes and lo == b.edge_index.shape[1]
    assert nb == len(ld)
    if budget:
        assert ld.stats.hits > 0 and ld.stats.misses > 0


def test_trim_to_layer_runs_on_the_view(rel_store):
    from torch_geometric.utils import trim_to_layer

    b = next(iter(NeighborLoader(rel_store, [4, 3], ("paper", "train"), batch_size=50,
                                 device="cpu", output="pyg", homogeneous=True,
                                 dtype=torch.float32)))
    x, ei, _ = trim_to_layer(1, b.num_sampled_nodes, b.num_sampled_edges, b.x, b.edge_index)
    assert x.shape[0] == sum(b.num_sampled_nodes[:2]) and ei.shape[1] == b.num_sampled_edges[0]


def test_homogeneous_refusals(rel_store, hetero_store):
    kw = dict(num_neighbors=[2], input_nodes=("paper", "train"), device="cpu",
              homogeneous=True)
    with pytest.raises(LoaderArgumentError, match="author"):  # features on papers only
        NeighborLoader(hetero_store, **kw)


def test_view_fanouts_count_per_node_over_all_relations(rel_store):
    """On the homogeneous view a fanout caps each node's in-edges of every type together (as
    PyG's sampler on to_homogeneous() draws them): per destination, the batch's edges number
    min(fanout, in-degree in the homogeneous graph)."""
    d = _pyg_homogeneous(rel_store)
    deg = np.bincount(d.edge_index[1].numpy(), minlength=d.num_nodes)
    seeds = rel_store.split("train", "paper")[:64]
    loader = NeighborLoader(rel_store, [4, 3], ("paper", seeds), batch_size=64, output="pyg",
                            homogeneous=True, dtype=torch.float32, device="cpu")
    assert loader.sampler.fanout_per == "node"
    b = next(iter(loader))
    n_id, dst = b.n_id.numpy(), b.edge_index[1].numpy()
    hops = np.cumsum(b.num_sampled_nodes)
    for layer, f in enumerate([4, 3]):
        lo, hi = (0 if layer == 0 else hops[layer - 1]), hops[layer]
        e = np.asarray(b.num_sampled_edges)
        mine = dst[e[:layer].sum():e[:layer + 1].sum()]
        got = np.bincount(mine - lo, minlength=hi - lo)
        np.testing.assert_array_equal(got, np.minimum(deg[n_id[lo:hi]], f))
    typed = NeighborLoader(rel_store, [4, 3], ("paper", seeds), batch_size=64, output="pyg",
                           homogeneous=True, fanout_per="edge_type", dtype=torch.float32,
                           device="cpu")
    assert next(iter(typed)).edge_index.shape[1] > b.edge_index.shape[1]  # per type: more
