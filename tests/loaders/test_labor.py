"""Layer-neighbour sampling (LABOR-0, issue 19 item 5) against a plain-Python twin of the whole
sample, its inclusion probabilities against the promise ``min(1, k / degree)``, and fewer
distinct nodes per batch than uniform sampling on a graph whose nodes share neighbours."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import featurestore as fs
from featurestore.format.names import EdgeType
from graph_helpers import random_csc
from loaders import NeighborLoader
from loaders.errors import LoaderArgumentError
from loaders.sample.labor import labor_keep_py
from loaders.sample.rng import batch_key, layer_key
from loaders.sample.sampler import CSCGraph, NeighborSampler

ET = EdgeType("v", "e", "v")


def _graph(n=400, e=12_000, seed=0):
    indptr, indices, _, _ = random_csc(np.random.default_rng(seed), n, n, e)
    return CSCGraph({"v": n}, {ET: (indptr, indices)}), indptr, indices


def _twin(indptr, indices, seeds, fanouts, key, layer_dependency):
    """The whole LABOR sample in plain Python: nodes in the order met, edges per layer."""
    nodes, local = list(seeds), {int(v): i for i, v in enumerate(seeds)}
    lo, rows, cols, eids = 0, [], [], []
    for layer, k in enumerate(fanouts):
        start = len(nodes)
        lk = layer_key(key, 0 if layer_dependency else layer, 0)
        for i in range(lo, start):
            v = nodes[i]
            s0, d = int(indptr[v]), int(indptr[v + 1] - indptr[v])
            for j in labor_keep_py(lk, indices[s0:s0 + d], d, k):
                t = int(indices[s0 + j])
                if t not in local:
                    local[t] = len(nodes)
                    nodes.append(t)
                rows.append(local[t])
                cols.append(i)
                eids.append(s0 + j)
        lo = start
    return np.array(nodes), np.array(rows), np.array(cols), np.array(eids)


@pytest.mark.parametrize("layer_dependency", [False, True])
@pytest.mark.parametrize("fanouts", [[5, 3], [-1, 2], [40, 40]])
def test_sample_equals_its_python_twin(fanouts, layer_dependency):
    g, indptr, indices = _graph()
    s = NeighborSampler(g, fanouts, sampling="labor", layer_dependency=layer_dependency)
    seeds = np.random.default_rng(1).choice(400, 64, replace=False)
    sub = s.sample(seeds, "v", seed=3, epoch=1, batch=7)
    nodes, rows, cols, eids = _twin(indptr, indices, seeds, fanouts, batch_key(3, 1, 7),
                                    layer_dependency)
    np.testing.assert_array_equal(sub.node["v"], nodes)
    np.testing.assert_array_equal(sub.row[ET], rows)
    np.testing.assert_array_equal(sub.col[ET], cols)
    np.testing.assert_array_equal(sub.edge[ET], eids)
    # every sampled edge is an edge of the graph, from its source to its destination
    np.testing.assert_array_equal(indices[sub.edge[ET]], sub.node["v"][sub.row[ET]])


def test_inclusion_probability_is_k_over_degree():
    """Each in-edge of a destination of degree d is kept with probability k/d: over 3000
    batch keys, per-edge counts fit Binomial(3000, k/d) (chi-square over the 60 edges), and the
    kept count per destination averages k."""
    from scipy import stats

    d, k, trials = 60, 6, 3000
    indptr = np.concatenate([[0], np.full(d + 1, d)])  # node 0 has in-edges from 1..d
    indices = np.arange(1, d + 1)
    g = CSCGraph({"v": d + 1}, {ET: (indptr, indices)})
    s = NeighborSampler(g, [k], sampling="labor")
    kept = np.zeros(d, np.int64)
    sizes = []
    for b in range(trials):
        sub = s.sample(np.array([0]), "v", seed=5, batch=b)
        kept[sub.edge[ET]] += 1
        sizes.append(sub.edge[ET].shape[0])
    p = k / d
    chi2 = float((((kept - trials * p) ** 2) / (trials * p * (1 - p))).sum())
    assert stats.chi2.sf(chi2, d) > 1e-3, (chi2, kept)
    assert abs(np.mean(sizes) - k) < 4 * np.sqrt(d * p * (1 - p) / trials)


def test_fewer_distinct_nodes_than_uniform():
    """Destinations sharing one pool of sources: LABOR keeps the same ones for all of them."""
    n_dst, pool, deg = 500, 300, 100
    rng = np.random.default_rng(2)
    indices = np.concatenate([np.sort(rng.choice(pool, deg, replace=False)) + n_dst
                              for _ in range(n_dst)])
    indptr = np.arange(0, n_dst * deg + 1, deg)
    indptr = np.concatenate([indptr, np.full(pool, indptr[-1])])
    g = CSCGraph({"v": n_dst + pool}, {ET: (indptr, indices)})
    seeds = np.arange(256)
    uni = NeighborSampler(g, [10]).sample(seeds, "v", seed=1)
    lab = NeighborSampler(g, [10], sampling="labor").sample(seeds, "v", seed=1)
    assert lab.node["v"].shape[0] - 256 < 0.5 * (uni.node["v"].shape[0] - 256)
    assert abs(lab.edge[ET].shape[0] / 256 - 10) < 1.5  # still ~10 per node


def test_loader_batches_and_bad_arguments(tmp_path):
    from loaders.datasets.synthetic import power_law_store

    path = power_law_store(tmp_path / "s", num_nodes=3000, num_edges=40_000, feat_dim=8,
                           seed=4)
    with fs.open_store(path) as store:
        F = store.features().numpy()
        indices = np.asarray(store.csc()[1])
        kw = dict(batch_size=64, shuffle=True, device="cpu", output="raw", sampling="labor")
        a = [mb for _, mb in zip(range(3), NeighborLoader(store, [8, 4], "train", **kw))]
        b = [mb for _, mb in zip(range(3), NeighborLoader(store, [8, 4], "train", **kw))]
        for x, y in zip(a, b):
            ids = x.subgraph.node["node"]
            assert torch.equal(x.x["node"], torch.from_numpy(F[ids]))
            assert np.array_equal(ids, y.subgraph.node["node"])  # reproducible
            et = next(iter(x.subgraph.edge))
            np.testing.assert_array_equal(indices[x.subgraph.edge[et]],
                                          ids[x.subgraph.row[et]])
        for bad, match in ((dict(sampling="layer"), "'uniform' or 'labor'"),
                           (dict(sampling="labor", replace=True), "replace=False"),
                           (dict(layer_dependency=True), "sampling='labor'")):
            with pytest.raises(LoaderArgumentError, match=match):
                NeighborLoader(store, [8, 4], "train", device="cpu", **bad)
