"""Edge features and per-edge values reach each batch by ``e_id``: every sampled edge carries
the row of its own endpoints (the features encode them, an independent check)."""

from __future__ import annotations

import numpy as np
import pytest

import featurestore as fs
import loaders
from graph_helpers import random_csc
from loaders.errors import LoaderArgumentError

N = 300


def _store(path, hetero=False):
    rng = np.random.default_rng(0)
    w = fs.create_store(path)
    w.add_node_type("n", N)
    w.add_features("n", "feat", rng.standard_normal((N, 4)).astype(np.float32))
    ets = [("n", "r", "n")] + ([("n", "s", "n")] if hetero else [])
    for k, et in enumerate(ets):
        indptr, indices = random_csc(rng, N, N, 4000)[:2]
        w.add_edge_type(et, indptr, indices)
        dst = np.repeat(np.arange(N), np.diff(indptr))
        # each edge's row: (its source, its destination, its edge type) as floats
        w.add_edge_features(et, "edge_attr", np.stack(
            [indices, dst, np.full_like(dst, k)], 1).astype(np.float32))
        w.add_edge_values(et, "time", (indices.astype(np.int64) * 1000 + dst))
    w.add_split("train", "n", np.arange(100))
    w.commit()
    return fs.open_store(path)


def _check(n_id, edge_index, attr, time):
    src, dst = n_id[edge_index[0]], n_id[edge_index[1]]
    np.testing.assert_array_equal(attr[:, 0].long(), src)
    np.testing.assert_array_equal(attr[:, 1].long(), dst)
    np.testing.assert_array_equal(time, src * 1000 + dst)


def test_node_batches_carry_edge_rows(tmp_path):
    pytest.importorskip("torch_geometric")
    store = _store(tmp_path / "s.store")
    loader = loaders.NeighborLoader(store, [5, 3], "train", batch_size=32, output="pyg",
                                    device="cpu")
    for b in loader:
        assert b.edge_attr.shape == (b.edge_index.shape[1], 3)
        _check(b.n_id, b.edge_index, b.edge_attr, b.time)


def test_hetero_and_link_batches_carry_edge_rows(tmp_path):
    pytest.importorskip("torch_geometric")
    store = _store(tmp_path / "s.store", hetero=True)
    loader = loaders.LinkNeighborLoader(store, [4, 2], (("n", "r", "n"), None), batch_size=64,
                                        neg_sampling_ratio=1.0, output="pyg", device="cpu")
    b = next(iter(loader))
    for k, et in enumerate([("n", "r", "n"), ("n", "s", "n")]):
        e = b[et]
        _check(b["n"].n_id, e.edge_index, e.edge_attr, e.time)
        assert (e.edge_attr[:, 2] == k).all()


def test_raw_batches_and_a_chosen_subset(tmp_path):
    store = _store(tmp_path / "s.store")
    et = store.edge_types[0]
    loader = loaders.NeighborLoader(store, [5], "train", batch_size=50, edge_attrs=["time"],
                                    device="cpu")
    mb = next(iter(loader))
    assert list(mb.edge_attrs[et]) == ["time"]
    sub = mb.subgraph
    np.testing.assert_array_equal(mb.edge_attrs[et]["time"].numpy(),
                                  store.edge_values(et, "time")[sub.edge[et]])
    none = loaders.NeighborLoader(store, [5], "train", batch_size=50, edge_attrs=(),
                                  device="cpu")
    assert next(iter(none)).edge_attrs == {}


def test_unknown_edge_attr_and_relational_view_refused(tmp_path):
    store = _store(tmp_path / "s.store")
    with pytest.raises(LoaderArgumentError, match="edge_attr.*time.*Got \\['weight'\\]"):
        loaders.NeighborLoader(store, [5], "train", edge_attrs=["weight"], device="cpu")
    with pytest.raises(LoaderArgumentError, match="homogeneous"):
        loaders.NeighborLoader(store, [5], "train", edge_attrs="all", homogeneous=True,
                               device="cpu")


def test_link_loader_takes_a_stored_edge_split(tmp_path):
    pytest.importorskip("torch_geometric")
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, N, 40), rng.integers(0, N, 40)
    label = rng.integers(0, 3, 40)
    path = tmp_path / "t.store"
    wr = fs.create_store(path)
    wr.add_node_type("n", N)
    indptr, indices = random_csc(rng, N, N, 2000)[:2]
    wr.add_edge_type(("n", "r", "n"), indptr, indices)
    wr.add_edge_split("train", ("n", "r", "n"), src=src, dst=dst, label=label)
    wr.add_edge_split("test", ("n", "r", "n"), src=src)
    wr.commit()
    t = fs.open_store(path)
    for eli in ("train", ("r", "train"), (("n", "r", "n"), "train")):
        loader = loaders.LinkNeighborLoader(t, [3], eli, batch_size=40, output="pyg",
                                            device="cpu")
        b = next(iter(loader))
        got = b.n_id[b.edge_label_index]
        np.testing.assert_array_equal(got[0], src[b.input_id])
        np.testing.assert_array_equal(got[1], dst[b.input_id])
        np.testing.assert_array_equal(b.edge_label, label[b.input_id])
    with pytest.raises(LoaderArgumentError, match="'dst' column"):
        loaders.LinkNeighborLoader(t, [3], "test", device="cpu")
    with pytest.raises(LoaderArgumentError, match="edge split"):
        loaders.LinkNeighborLoader(t, [3], "valid", device="cpu")


def test_edge_rows_are_in_the_memory_plan(tmp_path):
    """The plan charges each batch's edge rows: 3 fp32 + 1 int64 = 20 bytes per sampled edge,
    times the edges it measured; a loader carrying none charges nothing."""
    store = _store(tmp_path / "s.store")
    kw = dict(batch_size=32, output="raw", device="cpu", memory="200MiB", cache="degree")
    with_rows = loaders.NeighborLoader(store, [5, 3], "train", **kw)
    assert with_rows.gatherer.edge_attrs.row_bytes() == 3 * 4 + 8
    # the features fit: the plan is the one on the bound, whose edges bound any batch's
    plan = with_rows.plan
    edges = max(int(sum(v.shape[0] for v in mb.subgraph.edge.values())) for mb in with_rows)
    assert plan.edge_bytes >= edges * 20 and plan.edge_bytes % 20 == 0
    assert plan.buffer_bytes == (plan.batch_bytes * plan.batches_in_flight
                                 + plan.edge_bytes * max(1, plan.batches_in_flight))
    none = loaders.NeighborLoader(store, [5, 3], "train", edge_attrs=[], **kw)
    assert none.plan.edge_bytes == 0


def test_view_edge_attr_follows_edge_index(tmp_path):
    """``StoreData.edge_attr`` (PyG's full-graph ``data.edge_attr``): row ``e`` belongs to
    column ``e`` of ``data.edge_index`` (the rows encode their endpoints)."""
    import torch

    from loaders.datasets.views import StoreData

    data = StoreData(_store(tmp_path / "s"))
    ei, attr = data.edge_index, data.edge_attr
    assert attr.shape == (ei.shape[1], 3)
    rows = attr[torch.arange(ei.shape[1])]
    np.testing.assert_array_equal(rows[:, 0].long(), ei[0])
    np.testing.assert_array_equal(rows[:, 1].long(), ei[1])
    with pytest.raises(AttributeError, match="edge types.*data\\[edge_type\\]"):
        _ = StoreData(_store(tmp_path / "h", hetero=True)).edge_attr
