"""Small stores for the loader tests, written with the store's writer API."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def homo_store_path(tmp_path_factory):
    """3000 nodes, 30k edges, Zipf in-degrees, 16-dim fp32 features with a planted signal."""
    from loaders.datasets.synthetic import power_law_store

    return power_law_store(tmp_path_factory.mktemp("homo") / "s", num_nodes=3000,
                           num_edges=30000, feat_dim=16, num_classes=4, homophily=0.6,
                           train_frac=0.3, seed=1)


@pytest.fixture(scope="session")
def hetero_store_path(tmp_path_factory):
    """A MAG240M-shaped store: paper/author/institution, features on papers only."""
    from loaders.datasets.synthetic import mag_like_store

    return mag_like_store(tmp_path_factory.mktemp("hetero") / "s", num_papers=1500,
                          num_authors=1000, num_institutions=40, feat_dim=16, seed=2)


@pytest.fixture
def homo_store(homo_store_path):
    import featurestore as fs

    with fs.open_store(homo_store_path) as s:
        yield s


@pytest.fixture
def hetero_store(hetero_store_path):
    import featurestore as fs

    with fs.open_store(hetero_store_path) as s:
        yield s


@pytest.fixture(scope="session")
def skewed_graph():
    """An in-memory CSC graph with zero-degree nodes and hubs above Floyd's scan limit."""
    from featurestore.format.names import EdgeType
    from loaders.sample.sampler import CSCGraph

    rng = np.random.default_rng(7)
    n = 600
    deg = rng.integers(0, 12, n)
    deg[rng.choice(n, 30, replace=False)] = 0
    deg[:5] = [300, 150, 90, 70, 65]  # hubs: seeds 0..4 exercise the bitmap path
    indptr = np.concatenate([[0], np.cumsum(deg)])
    indices = rng.integers(0, n, indptr[-1]).astype(np.int32)
    return CSCGraph({"v": n}, {EdgeType("v", "to", "v"): (indptr, indices)})
