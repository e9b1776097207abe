"""PyG's and DGL's ways of calling a loader: argument order, fanout order, their keywords."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from featurestore.errors import FeatureStoreError
from loaders import LoaderArgumentError, NeighborLoader, UnsupportedArgumentError
from loaders import _compat


def batches(ld):
    return [(b.subgraph.node, b.subgraph.row, b.subgraph.col) for b in ld]


def same_batches(a, b) -> bool:
    for (na, ra, ca), (nb, rb, cb) in zip(a, b, strict=True):
        if any(not np.array_equal(na[t], nb[t]) for t in na):
            return False
        if any(not (np.array_equal(ra[e], rb[e]) and np.array_equal(ca[e], cb[e])) for e in ra):
            return False
    return True


# -- 2. PyG's argument order ----------------------------------------------------------------
def test_pyg_argument_order(homo_store):
    train = np.asarray(homo_store.split("train"))
    ld = NeighborLoader(homo_store, [5, 5], train, batch_size=100, device="cpu")
    assert ld.sampler.fanouts.num_layers == 2
    assert set(ld.sampler.fanouts.per_etype.values()) == {(5, 5)}
    assert np.array_equal(ld.input_nodes, train)
    kw = NeighborLoader(homo_store, num_neighbors=[5, 5], input_nodes=train, device="cpu")
    assert np.array_equal(kw.input_nodes, train)
    everyone = NeighborLoader(homo_store, [2], batch_size=1000, device="cpu")  # PyG: all nodes
    assert np.array_equal(everyone.input_nodes, np.arange(homo_store.num_nodes()))


@pytest.mark.parametrize("old", [
    lambda s: ("train", [5, 5]),
    lambda s: (("node", "train"), [5, 5]),
    lambda s: (np.asarray(s.split("train")), [5, 5]),
    lambda s: (torch.arange(100), [5, 5]),
    lambda s: (list(range(40)), [5, 5]),   # a plain list of ids: more layers than plausible
])
def test_old_argument_order_is_refused(homo_store, old):
    with pytest.raises(LoaderArgumentError, match=r"NeighborLoader\(store, num_neighbors, "
                                                  r"input_nodes\)") as e:
        NeighborLoader(homo_store, *old(homo_store), device="cpu")
    assert isinstance(e.value, ValueError) and isinstance(e.value, FeatureStoreError)


# -- 3. DGL's fanout order ------------------------------------------------------------------
class FakeDGLSampler:
    """What loaders read of a ``dgl.dataloading.NeighborSampler`` (DGL may be absent here)."""

    def __init__(self, fanouts, replace=False, edge_dir="in", prob=None, mask=None):
        self.fanouts, self.replace, self.edge_dir = fanouts, replace, edge_dir
        self.prob, self.mask = prob, mask

    def sample_blocks(self, g, seeds, exclude_eids=None):  # pragma: no cover - never called
        raise AssertionError


def test_fanout_order_rule():
    f = _compat.fanouts
    assert f([15, 25], output="pyg") == ([15, 25], False)
    assert f([15, 25], output="raw") == ([15, 25], False)
    assert f([15, 25], output="dgl") == ([25, 15], False)          # DGL: input layer first
    assert f([15, 25], output="dgl", fanout_order="pyg") == ([15, 25], False)
    assert f([15, 25], output="pyg", fanout_order="dgl") == ([25, 15], False)
    assert f({"cites": [15, 25]}, output="dgl") == ({"cites": [25, 15]}, False)
    # a DGL sampler object is read in DGL's order whatever the output, and gives replace
    assert f(FakeDGLSampler([15, 25], replace=True), output="pyg") == ([25, 15], True)
    # DGL's per-layer dicts
    layers = [{("a", "r", "b"): 5, "s": 1}, {("a", "r", "b"): 3}]
    assert f(layers, output="dgl") == ({("a", "r", "b"): [3, 5], "s": [0, 1]}, False)
    with pytest.raises(LoaderArgumentError, match="edge_dir='in'"):
        f(FakeDGLSampler([5], edge_dir="out"))
    with pytest.raises(LoaderArgumentError, match="without prob"):
        f(FakeDGLSampler([5], prob="w"))
    with pytest.raises(LoaderArgumentError, match="fanout_order"):
        f([5], fanout_order="input-first")
    with pytest.raises(LoaderArgumentError, match="Got 'pyg'"):
        f(FakeDGLSampler([5]), fanout_order="pyg")


def test_dgl_order_samples_like_the_reversed_pyg_list(homo_store):
    """``[2, 7]`` in DGL's order is ``[7, 2]`` in PyG's: the same batches, draw for draw, and
    at most 7 sampled in-edges per seed."""
    kw = dict(batch_size=128, shuffle=True, seed=3, device="cpu")
    dgl_order = NeighborLoader(homo_store, [2, 7], "train", fanout_order="dgl", **kw)
    sampler = NeighborLoader(homo_store, FakeDGLSampler([2, 7]), "train", **kw)
    pyg_order = NeighborLoader(homo_store, [7, 2], "train", **kw)
    a, b, c = batches(dgl_order), batches(sampler), batches(pyg_order)
    assert same_batches(a, c) and same_batches(b, c)
    assert not same_batches(batches(NeighborLoader(homo_store, [2, 7], "train", **kw)), c)
    for mb in NeighborLoader(homo_store, [2, 7], "train", fanout_order="dgl", **kw):
        sub = mb.subgraph
        (et,) = sub.row
        first = sub.col[et][: sub.num_sampled_edges[et][0]]  # layer 1: edges into the seeds
        assert np.all(first < sub.batch_size)
        assert np.bincount(first, minlength=sub.batch_size).max() == 7


# -- 5. PyG's and DGL's loader keywords -----------------------------------------------------
REFUSED = {
    "disjoint": (True, "disjoint=False"),
    "subgraph_type": ("induced", "directional"), "directed": (False, "directed=True"),
    "time_attr": ("year", "temporal"), "input_time": (torch.zeros(3), "temporal"),
    "weight_attr": ("w", "uniform"), "custom_cls": (dict, "transform="),
    "use_ddp": (True, "rank= and world_size="),
    "collate_fn": (lambda x: x, "transform="), "multiprocessing_context": ("spawn", "num_threads="),
    "neighbor_sampler": (object(), "num_neighbors"), "gpu_cache": ({"node": 10}, "cache="),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_peer_keywords_refused_with_our_equivalent(homo_store, name):
    value, hint = REFUSED[name]
    with pytest.raises(UnsupportedArgumentError, match=name) as e:
        NeighborLoader(homo_store, [2], "train", device="cpu", **{name: value})
    assert hint in str(e.value)
    assert isinstance(e.value, TypeError) and isinstance(e.value, FeatureStoreError)


def test_unknown_keyword_is_named(homo_store):
    with pytest.raises(UnsupportedArgumentError, match="'num_neighbours'.*docs/compat.md"):
        NeighborLoader(homo_store, [2], "train", num_neighbours=[2])


def test_peer_keywords_honoured(homo_store):
    """PyG's no-op values pass, and give the same batches as without them."""
    kw = dict(batch_size=256, shuffle=True, seed=1, device="cpu")
    ref = batches(NeighborLoader(homo_store, [3, 2], "train", **kw))
    got = batches(NeighborLoader(
        homo_store, [3, 2], "train", num_workers=0, persistent_workers=False, pin_memory=True,
        prefetch_factor=None, disjoint=False, subgraph_type="directional", directed=True,
        filter_per_worker=True, time_attr=None, weight_attr=None, custom_cls=None,
        input_time=None, is_sorted=False, use_uva=False, use_ddp=False, timeout=0, **kw))
    assert same_batches(ref, got)


def test_workers_become_threads(homo_store):
    """PyTorch's num_workers / prefetch_factor are honoured as threads and prefetch: the same
    batches as num_threads= / prefetch=, so PyG's and DGL's loader calls run unchanged."""
    kw = dict(batch_size=256, shuffle=True, seed=1, device="cpu")
    ref = NeighborLoader(homo_store, [3, 2], "train", num_threads=2, prefetch=4, **kw)
    got = NeighborLoader(homo_store, [3, 2], "train", num_workers=2, persistent_workers=True,
                         prefetch_factor=4, use_uva=True, **kw)
    assert (got.num_threads, got.prefetch) == (2, 4)
    assert same_batches(batches(ref), batches(got))
    for bad in (dict(num_workers=-1), dict(num_workers=1.5), dict(prefetch_factor=0)):
        with pytest.raises(LoaderArgumentError, match=next(iter(bad))):
            NeighborLoader(homo_store, [3, 2], "train", **bad)


def test_transform_runs_on_each_batch(homo_store):
    seen = []

    def tag(batch):
        batch.tagged = len(seen)
        seen.append(batch.subgraph.batch_size)
        return batch

    ld = NeighborLoader(homo_store, [2], "train", batch_size=300, device="cpu", transform=tag)
    got = list(ld)
    assert [b.tagged for b in got] == list(range(len(ld))) and sum(seen) == len(ld.input_nodes)
    with pytest.raises(LoaderArgumentError, match="callable"):
        NeighborLoader(homo_store, [2], "train", transform="normalize")


def test_dgl_dict_of_seeds(hetero_store):
    ids = np.asarray(hetero_store.split("valid", "paper"))
    a = NeighborLoader(hetero_store, [2], {"paper": ids}, device="cpu")
    assert a.seed_type == "paper" and np.array_equal(a.input_nodes, ids)
    with pytest.raises(LoaderArgumentError, match="one node type"):
        NeighborLoader(hetero_store, [2], {"paper": ids, "author": ids[:3]}, device="cpu")
