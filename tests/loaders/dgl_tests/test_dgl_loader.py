"""``NeighborLoader(output="dgl")``: DGL batches from the threaded loader (run in .venv-dgl)."""

from __future__ import annotations

import numpy as np
import pytest

from dgl_helpers import import_dgl

dgl = import_dgl()

import featurestore as fs  # noqa: E402
from loaders import NeighborLoader  # noqa: E402
from loaders.dgl import to_dgl  # noqa: E402
from loaders.datasets.synthetic import mag_like_store, power_law_store  # noqa: E402

FANOUTS = [5, 3]


@pytest.fixture(scope="module", params=["homo", "hetero"])
def store(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(f"dgl-loader-{request.param}") / "s"
    if request.param == "homo":
        power_law_store(path, num_nodes=2000, num_edges=16000, feat_dim=8, num_classes=3, seed=5)
        seeds = ("node", "train")
    else:
        mag_like_store(path, num_papers=800, num_authors=500, num_institutions=20, feat_dim=8,
                       seed=6)
        seeds = ("paper", "train")
    with fs.open_store(path) as s:
        yield s, seeds


def _per_type(v, nt):
    return v[nt] if isinstance(v, dict) else v


def test_dgl_output_equals_to_dgl_of_raw_batches(store):
    """output="dgl" yields to_dgl of the very batches output="raw" yields for the same seed."""
    s, seeds = store
    kw = dict(batch_size=64, shuffle=True, seed=3, device="cpu")
    dgl_batches = list(NeighborLoader(s, FANOUTS, seeds, output="dgl", fanout_order="pyg", **kw))
    raw = list(NeighborLoader(s, FANOUTS, seeds, output="raw", **kw))
    assert len(dgl_batches) == len(raw) == len(NeighborLoader(s, FANOUTS, seeds, **kw))
    for (inp, out, blocks), mb in zip(dgl_batches, raw):
        ref_in, ref_out, ref_blocks = to_dgl(mb)
        nt = mb.subgraph.seed_type
        np.testing.assert_array_equal(_per_type(out, nt).numpy(), mb.subgraph.seeds)
        for t in s.node_types:
            np.testing.assert_array_equal(_per_type(inp, t).numpy(), _per_type(ref_in, t).numpy())
        for b, rb in zip(blocks, ref_blocks):
            for cet in rb.canonical_etypes:
                for got, want in zip(b.edges(etype=cet), rb.edges(etype=cet)):
                    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_batches_kept_by_the_training_loop_are_not_overwritten(store):
    """The loader reuses feature buffers; blocks kept across batches must keep their features."""
    s, seeds = store
    kept = list(NeighborLoader(s, FANOUTS, seeds, batch_size=20, shuffle=True, seed=1,
                               output="dgl", device="cpu", prefetch=3))
    assert len(kept) > 4
    labels_of = {nt: np.asarray(s.labels(nt)) for nt in s.node_types
                 if "label" in s.value_names(nt)}
    for input_nodes, output_nodes, blocks in kept:
        feat = blocks[0].srcdata["feat"]
        for nt in s.node_types:
            if "feat" not in s.feature_names(nt):
                continue
            ids = _per_type(input_nodes, nt).numpy()
            want = np.asarray(s.features(nt, "feat").numpy())[ids]
            np.testing.assert_array_equal(_per_type(feat, nt).numpy(), want)
        seed_type = next(iter(output_nodes)) if isinstance(output_nodes, dict) else s.node_types[0]
        y = _per_type(blocks[-1].dstdata["label"], seed_type).numpy()
        out_ids = _per_type(output_nodes, seed_type).numpy()
        np.testing.assert_array_equal(y, labels_of[seed_type][out_ids])


def test_dgl_fanout_order_and_sampler_object(store):
    """DGL lists fanouts from the input layer: with output="dgl", [3, 5], DGL's
    NeighborSampler([3, 5]) and [5, 3] in PyG's order are the same batches, 5 edges per seed."""
    import torch

    s, seeds = store
    kw = dict(batch_size=64, shuffle=True, seed=2, device="cpu")
    a = list(NeighborLoader(s, [3, 5], seeds, output="dgl", **kw))
    b = list(NeighborLoader(s, dgl.dataloading.NeighborSampler([3, 5]), seeds, output="dgl", **kw))
    c = list(NeighborLoader(s, [5, 3], seeds, output="dgl", fanout_order="pyg", **kw))
    assert len(a) == len(b) == len(c) > 1
    for (_, _, ba), (_, _, bb), (_, _, bc) in zip(a, b, c):
        for other in (bb, bc):
            for k in range(2):
                for et in ba[k].canonical_etypes:
                    assert torch.equal(ba[k].edges[et].data[dgl.EID],
                                       other[k].edges[et].data[dgl.EID])
        last = ba[-1]  # the seeds' layer
        for et in last.canonical_etypes:
            if last.num_edges(et):
                assert int(last.in_degrees(etype=et).max()) <= 5


def test_dtype_casts_the_blocks_features(store):
    """dtype=torch.float32: the blocks' features are the store's rows cast (the hetero store
    is fp16), on every block that carries them."""
    import torch

    s, seeds = store
    for inp, _, blocks in NeighborLoader(s, FANOUTS, seeds, batch_size=64, output="dgl",
                                         device="cpu", dtype=torch.float32):
        for nt in s.node_types:
            if "feat" not in s.feature_names(nt):
                continue
            ids = _per_type(inp, nt).numpy()
            want = np.asarray(s.features(nt, "feat").numpy())[ids].astype(np.float32)
            got = _per_type(blocks[0].srcdata["feat"], nt)
            assert got.dtype == torch.float32
            np.testing.assert_array_equal(got.numpy(), want)


def test_dgl_blocks_get_fp32_features_by_default(store):
    """The default ``dtype="auto"``: a DGL model's layers are float32, so an fp16 store's
    rows reach ``srcdata["feat"]`` as float32 (numpy's cast of the same rows); ``dtype=None``
    keeps the store's dtype."""
    import torch

    s, seeds = store
    kw = dict(batch_size=64, output="dgl", device="cpu")
    for inp, _, blocks in NeighborLoader(s, FANOUTS, seeds, **kw):
        for nt in s.node_types:
            if "feat" not in s.feature_names(nt):
                continue
            want = np.asarray(s.features(nt, "feat").numpy())[_per_type(inp, nt).numpy()]
            got = _per_type(blocks[0].srcdata["feat"], nt)
            assert got.dtype == torch.float32
            np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))
    _, _, blocks = next(iter(NeighborLoader(s, FANOUTS, seeds, dtype=None, **kw)))
    stored = s.features(seeds[0], "feat").dtype
    assert _per_type(blocks[0].srcdata["feat"], seeds[0]).dtype == torch.from_numpy(
        np.empty(0, stored)).dtype
