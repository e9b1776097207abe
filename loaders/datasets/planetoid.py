"""PyG's ``Planetoid`` datasets (Cora, CiteSeer, PubMed) over a store, and the store itself.

A PyG script keeps ``dataset = Planetoid(path, 'Cora')`` and ``data = dataset[0]`` and gets a
:class:`~loaders.datasets.views.StoreData` view (``data.x``, ``data.y``, ``data.train_mask``,
``data.num_node_features`` ...). The store is made once by :func:`planetoid_store`: from PyG's
own ``Planetoid(...)[0]`` (``x``, ``edge_index``, ``y`` and the public split's masks), with
``x`` row-normalised as PyG's ``T.NormalizeFeatures()`` does (a store is read-only, so the
transform is applied when it is written), or, without data, as a synthetic twin at Cora's
sizes (a homophilous graph with class-biased bag-of-words features) for tests and demos::

    from torch_geometric.datasets import Planetoid as PygPlanetoid
    planetoid_store("data/Cora", PygPlanetoid("/tmp/pyg", "Cora")[0])
"""

from __future__ import annotations

import os

import numpy as np

import featurestore as fs
from featurestore.format.names import index_dtype
from loaders.datasets.views import _Dataset
from loaders.errors import LoaderArgumentError

__all__ = ["Planetoid", "planetoid_store", "CORA", "Reddit", "reddit_store", "REDDIT_TWIN"]

#: Cora's sizes: nodes, undirected edges, bag-of-words width, classes
CORA = {"num_nodes": 2708, "num_edges": 5278, "num_features": 1433, "num_classes": 7}


class Planetoid(_Dataset):
    """PyG's ``Planetoid(root, name, split='public')`` over the store at ``root`` (or
    ``root/name``), as :func:`planetoid_store` writes it. ``dataset[0]`` is a
    :class:`~loaders.datasets.views.StoreData` view. ``transform=T.NormalizeFeatures()`` is
    taken as what it is, the transform the store was written with (``normalize=True``); any
    other transform, or a split other than the store's, is refused."""

    def __init__(self, root: str | os.PathLike, name: str, split: str = "public",
                 transform=None, **kwargs):
        if split != "public":
            raise LoaderArgumentError(f"Expected split='public' (the store's train/valid/test "
                                      f"splits). Got split={split!r} instead.")
        super().__init__(name, root, **kwargs)
        done = any(p.get("normalized") for p in self.store.provenance
                   if p.get("step") == "datasets.planetoid_store")
        if transform is not None and not (done and type(transform).__name__ ==
                                          "NormalizeFeatures"):
            raise LoaderArgumentError(
                f"Expected transform=None or NormalizeFeatures() on a store written normalised "
                f"(planetoid_store(normalize=True)). Got {transform!r} on {self.store.url}: "
                "transform batches with NeighborLoader(transform=...).")


class Reddit(_Dataset):
    """PyG's ``Reddit(root)`` (and any PyG in-memory node dataset of one graph with ``x``,
    ``y`` and split masks: ``Flickr``, ``Yelp``-style) over the store at ``root``, as
    :func:`reddit_store` writes it. ``dataset[0]`` is a
    :class:`~loaders.datasets.views.StoreData` view whose ``y`` is ``(N,)``, as PyG's, so
    ``(y_hat[mask] == data.y[mask]).sum()`` counts matches (OGB's stand-in,
    ``PygNodePropPredDataset``, gives OGB's ``(N, 1)`` column, which that expression
    broadcasts: use the stand-in of the dataset the script was written for)."""

    def __init__(self, root: str | os.PathLike, transform=None, pre_transform=None,
                 force_reload: bool = False, **kwargs):
        if force_reload:
            raise LoaderArgumentError("Expected force_reload=False: the dataset is a store, "
                                      "written once by reddit_store().")
        super().__init__(None, root, transform=transform, pre_transform=pre_transform,
                         **kwargs)


#: the synthetic twin :func:`reddit_store` writes without data: Reddit's feature width and
#: classes on a small graph (Reddit itself: 232,965 nodes, 114.6M edges)
REDDIT_TWIN = {"num_nodes": 3000, "num_edges": 30_000, "num_features": 602, "num_classes": 41}


def reddit_store(path: str | os.PathLike, data=None, *, seed: int = 0, mode: str = "w",
                 **sizes) -> str:
    """Write PyG's ``Reddit(...)[0]`` (or another single-graph node dataset with ``x``,
    ``edge_index``, ``y`` and the three masks) as a store at ``path``, features as they are;
    without ``data``, a synthetic twin at :data:`REDDIT_TWIN`'s sizes (``sizes`` overrides
    them). Read it back with :class:`Reddit`."""
    return planetoid_store(path, data, seed=seed, normalize=False, mode=mode,
                           **dict(REDDIT_TWIN, **sizes) if data is None else {})


def _twin(rng, num_nodes: int, num_edges: int, num_features: int, num_classes: int,
          homophily: float = 0.8, words: int = 18):
    """A synthetic Planetoid graph: ``(x, src, dst, y)``, undirected edges one way each."""
    y = rng.integers(0, num_classes, num_nodes)
    band = max(1, num_features // num_classes)  # each class's own words
    own = rng.random((num_nodes, words)) < 0.7
    col = np.where(own, (y[:, None] * band + rng.integers(0, band, (num_nodes, words)))
                   % num_features, rng.integers(0, num_features, (num_nodes, words)))
    x = np.zeros((num_nodes, num_features), np.float32)
    x[np.repeat(np.arange(num_nodes), words), col.ravel()] = 1.0
    order = np.argsort(y, kind="stable")
    counts = np.bincount(y, minlength=num_classes)
    starts = np.cumsum(counts) - counts
    src = rng.integers(0, num_nodes, 2 * num_edges)
    same = order[starts[y[src]] + (rng.random(src.shape[0]) * counts[y[src]]).astype(np.int64)]
    dst = np.where(rng.random(src.shape[0]) < homophily, same,
                   rng.integers(0, num_nodes, src.shape[0]))
    keep = src != dst
    pairs = np.unique(np.sort(np.stack([src[keep], dst[keep]]), axis=0), axis=1)[:, :num_edges]
    return x, pairs[0], pairs[1], y


def _public_split(rng, y: np.ndarray, num_classes: int) -> dict[str, np.ndarray]:
    """Planetoid's public split: 20 nodes per class to train, then 500 to validate and 1000
    to test (fewer on a small graph)."""
    n = y.shape[0]
    perm = rng.permutation(n)
    rank = np.empty(n, np.int64)
    rank[perm[np.argsort(y[perm], kind="stable")]] = np.arange(n)
    first = np.cumsum(np.bincount(y, minlength=num_classes)) - np.bincount(y, minlength=num_classes)
    train = np.flatnonzero(rank - first[y] < 20)
    rest = np.setdiff1d(perm, train, assume_unique=True)
    rest = rest[rng.permutation(rest.shape[0])]
    nv, nt = min(500, rest.shape[0] // 3), min(1000, rest.shape[0] // 3)
    return {"train": train, "valid": np.sort(rest[:nv]), "test": np.sort(rest[nv:nv + nt])}


def planetoid_store(path: str | os.PathLike, data=None, *, seed: int = 0,
                    normalize: bool = True, mode: str = "w", **sizes) -> str:
    """Write a Planetoid dataset as a store at ``path``: PyG's ``data`` (``x``,
    ``edge_index``, ``y``, ``train_mask``/``val_mask``/``test_mask``), or without it a
    synthetic twin at :data:`CORA`'s sizes (``sizes`` overrides them: ``num_nodes``,
    ``num_edges``, ``num_features``, ``num_classes``). Edges are stored both ways (Planetoid's
    graphs are undirected); ``normalize``: rows of ``x`` summing to 1, PyG's
    ``T.NormalizeFeatures()``."""
    rng = np.random.default_rng(seed)
    if data is None:
        sz = dict(CORA, **sizes)
        x, src, dst, y = _twin(rng, sz["num_nodes"], sz["num_edges"], sz["num_features"],
                               sz["num_classes"])
        splits = _public_split(rng, y, sz["num_classes"])
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    else:
        x = data.x.detach().cpu().numpy().astype(np.float32)
        src, dst = data.edge_index.detach().cpu().numpy()
        y = data.y.detach().cpu().numpy()
        splits = {k: np.flatnonzero(getattr(data, m).cpu().numpy())
                  for k, m in (("train", "train_mask"), ("valid", "val_mask"),
                               ("test", "test_mask"))}
    if normalize:
        x = x / np.maximum(x.sum(axis=1, keepdims=True), 1e-12)
    n = x.shape[0]
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    w = fs.create_store(path, mode=mode)
    w.add_node_type("node", n)
    w.add_edge_type(("node", "to", "node"), indptr, src[order].astype(index_dtype(n)))
    w.add_features("node", "feat", x)
    w.add_labels("node", y.astype(np.int64))
    for name, ids in splits.items():
        w.add_split(name, "node", ids)
    w.add_provenance("datasets.planetoid_store", synthetic=data is None, seed=seed,
                     normalized=normalize)
    w.commit()
    return os.fspath(path)
