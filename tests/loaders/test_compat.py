"""PyG's and DGL's ways of calling a loader: argument order, fanout order, their keywords."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from featurestore.errors import FeatureStoreError
from loaders import LoaderArgumentError, NeighborLoader, UnsupportedArgumentError
from loaders.loader import args as _compat


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


def test_workers_are_capped_at_the_cores_available(homo_store, monkeypatch):
    """num_workers=16 on 2 cores is 2 sampling threads, not 16 contending for 2 cores;
    num_threads= is taken as given, and the batches are the same whatever the count."""
    kw = dict(batch_size=256, shuffle=True, seed=1, device="cpu")
    cores = len(os.sched_getaffinity(0))
    ld = NeighborLoader(homo_store, [3, 2], "train", num_workers=cores + 14, **kw)
    assert 1 <= ld.num_threads == ld.sampler.num_threads <= cores
    monkeypatch.setattr(_compat, "available_cpus", lambda: 2)  # 2 cores, as a cgroup quota
    ld = NeighborLoader(homo_store, [3, 2], "train", num_workers=16, **kw)
    assert ld.num_threads == ld.sampler.num_threads == 2
    assert NeighborLoader(homo_store, [3, 2], "train", num_workers=1, **kw).num_threads == 1
    assert NeighborLoader(homo_store, [3, 2], "train", num_workers=16, num_threads=3,
                          **kw).num_threads == 3
    ref = NeighborLoader(homo_store, [3, 2], "train", num_threads=1, **kw)
    assert same_batches(batches(ref), batches(ld))


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


def test_mask_seeds_report_node_ids_as_input_id(hetero_store):
    """PyG reports a mask's seeds by node id in input_id (ids given as indices: positions)."""
    n = hetero_store.num_nodes("paper")
    mask = torch.zeros(n, dtype=torch.bool)
    mask[[20, 23, 28, 37, 45]] = True
    ld = NeighborLoader(hetero_store, [2], ("paper", mask), batch_size=5, output="pyg",
                        device="cpu")
    b = next(iter(ld))
    assert b["paper"].input_id.tolist() == [20, 23, 28, 37, 45]
    assert b["paper"].n_id[:5].tolist() == [20, 23, 28, 37, 45]
    ids = torch.tensor([45, 20, 37])
    b = next(iter(NeighborLoader(hetero_store, [2], ("paper", ids), batch_size=3,
                                 output="pyg", device="cpu")))
    assert b["paper"].input_id.tolist() == [0, 1, 2]


def test_node_type_name_and_empty_seeds_as_pyg(hetero_store):
    """"paper" and ("paper", None) are every paper node; no seeds give no batches."""
    n = hetero_store.num_nodes("paper")
    for inputs in ("paper", ("paper", None)):
        ld = NeighborLoader(hetero_store, [2], inputs, batch_size=64, device="cpu")
        assert ld.seed_type == "paper"
        np.testing.assert_array_equal(ld.input_nodes, np.arange(n))
    ld = NeighborLoader(hetero_store, [2], ("paper", torch.empty(0, dtype=torch.int64)),
                        batch_size=8, device="cpu")
    assert len(ld) == 0 and list(ld) == []


def test_batches_carry_node_values_and_masks_as_pyg(hetero_store_path):
    """From a PyG view every node attribute reaches the batch, sliced by n_id, as PyG's loader
    slices data's; from a bare store only the attrs asked for."""
    import featurestore as fs
    from loaders.datasets.views import OGB_MAG
    from loaders.loader.node_attrs import available_attrs

    data = OGB_MAG(hetero_store_path)[0]
    s = data.store
    year = np.asarray(s.values("paper", "year"))
    masks = {}
    for mask, split in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        name = next(n for n in (split, "val", "test-dev") if n in s.split_names)
        m = np.zeros(s.num_nodes("paper"), bool)
        m[s.split(name, "paper")] = True
        masks[mask] = m
    assert available_attrs(s, "paper") == ["year", *masks]
    b = next(iter(NeighborLoader(data, [3, 2], ("paper", "train"), batch_size=32,
                                 device="cpu")))
    n_id = b["paper"].n_id.numpy()
    np.testing.assert_array_equal(b["paper"].year.numpy(), year[n_id])
    for mask, m in masks.items():
        assert b["paper"][mask].dtype == torch.bool
        np.testing.assert_array_equal(b["paper"][mask].numpy(), m[n_id])
    assert "train_mask" not in b["author"]  # the splits hold papers only
    with fs.open_store(hetero_store_path) as store:
        bare = next(iter(NeighborLoader(store, [3], ("paper", "train"), batch_size=8,
                                        output="pyg", device="cpu")))
        assert "year" not in bare["paper"]
        one = next(iter(NeighborLoader(store, [3], ("paper", "train"), batch_size=8,
                                       output="pyg", device="cpu", attrs=["year"])))
        np.testing.assert_array_equal(one["paper"].year.numpy(), year[one["paper"].n_id])
        assert "train_mask" not in one["paper"]
        with pytest.raises(LoaderArgumentError, match="attrs"):
            NeighborLoader(store, [3], ("paper", "train"), attrs=["nope"], device="cpu")


def test_pyg_layerwise_inference_idiom(homo_store_path):
    """PyG's subgraph loader: copy.copy(data), then del loader.data.x/y and the n_id and
    num_nodes assignments; batches then carry n_id but no x or y, and the view given to
    the other loader keeps its x."""
    import copy

    from loaders.datasets.views import PygNodePropPredDataset

    data = PygNodePropPredDataset(root=homo_store_path)[0]
    sub = NeighborLoader(copy.copy(data), [-1], None, batch_size=256, device="cpu")
    del sub.data.x, sub.data.y
    sub.data.num_nodes = data.num_nodes
    sub.data.n_id = torch.arange(data.num_nodes)
    with pytest.raises(LoaderArgumentError):
        sub.data.num_nodes = data.num_nodes + 1
    with pytest.raises(AttributeError):
        _ = sub.data.x
    assert tuple(data.x.shape)[0] == data.num_nodes  # the original view is untouched
    seen = []
    for b in sub:
        assert "x" not in b and "y" not in b
        seen.append(b.n_id[:b.batch_size])
    assert torch.equal(torch.cat(seen), torch.arange(data.num_nodes))
    b = next(iter(NeighborLoader(data, [2], None, batch_size=8, device="cpu")))
    assert "x" in b and "y" in b
