"""DGL's DataLoader signature and dataset stand-ins over a store (run in .venv-dgl)."""

from __future__ import annotations

import numpy as np
import torch

from dgl_helpers import import_dgl

dgl = import_dgl()

from loaders import NeighborLoader  # noqa: E402
from loaders.datasets.views import AsNodePredDataset, DglNodePropPredDataset  # noqa: E402
from loaders.dgl import DataLoader  # noqa: E402
from loaders.datasets.synthetic import power_law_store  # noqa: E402


def test_dataloader_is_neighborloader_in_dgl_order(tmp_path):
    power_law_store(tmp_path / "s", num_nodes=1500, num_edges=12000, feat_dim=8, num_classes=3,
                    seed=2)
    ds = AsNodePredDataset(DglNodePropPredDataset("ogbn-x", root=tmp_path / "s"))
    g = ds[0]
    sampler = dgl.dataloading.NeighborSampler([3, 5], prefetch_node_feats=["feat"])
    got = DataLoader(g, ds.train_idx, sampler, batch_size=128, shuffle=True, num_workers=2,
                     use_uva=False)
    ref = NeighborLoader(ds.store, [5, 3], ds.train_idx, output="dgl", device="cpu",
                         batch_size=128, shuffle=True, fanout_order="pyg")
    n = 0
    for (i1, o1, b1), (i2, o2, b2) in zip(got, ref):
        assert torch.equal(i1, i2) and torch.equal(o1, o2)
        assert [b.num_edges() for b in b1] == [b.num_edges() for b in b2]
        np.testing.assert_array_equal(b1[0].srcdata["feat"].numpy(),
                                      g.ndata["feat"][i1].numpy())
        n += 1
    assert n == -(-len(ds.train_idx) // 128)
    # DGL's default batch size is 1
    assert DataLoader(g, ds.train_idx[:3], [2]).batch_size == 1


def test_ogb_dgl_dataset_on_a_typed_store_gives_labels_per_node_type(tmp_path):
    """OGB's DglNodePropPredDataset('ogbn-mag')[0] is (heterograph, {'paper': (N, 1)
    labels}): a dict of the labelled node types (read_node_label_hetero), each read_csv(...)
    .values. A homogeneous store still gives one (N, 1) tensor."""
    from loaders.datasets.synthetic import mag_like_store

    path = mag_like_store(tmp_path / "mag", num_papers=120, num_authors=80, num_institutions=6,
                          feat_dim=4, seed=3)
    ds = DglNodePropPredDataset("ogbn-mag", root=path)
    g, labels = ds[0]
    store = ds.store
    labelled = [t for t in store.node_types if "label" in store.value_names(t)]
    assert isinstance(labels, dict) and sorted(labels) == sorted(labelled) == ["paper"]
    want = torch.from_numpy(np.asarray(store.labels("paper")).astype(np.int64))[:, None]
    y = labels["paper"]
    assert tuple(y.shape) == (g.num_nodes("paper"), 1) and y.dtype == torch.int64
    train = ds.get_idx_split()["train"]["paper"]
    assert torch.equal(y[train], want[train]) and torch.equal(y[:, 0], want[:, 0])
    assert torch.equal(y[train].squeeze(1), want[train, 0])
    # the same labels DGL carries when the heterograph holds them as node data
    ref = dgl.heterograph({("paper", "cites", "paper"): ([0], [1])},
                          num_nodes_dict={"paper": store.num_nodes("paper")})
    ref.nodes["paper"].data["label"] = want[:, 0]
    assert torch.equal(ref.nodes["paper"].data["label"][train], y[train].squeeze(1))
    power_law_store(tmp_path / "h", num_nodes=300, num_edges=2000, feat_dim=4, num_classes=3,
                    seed=1)
    _, flat = DglNodePropPredDataset("ogbn-x", root=tmp_path / "h")[0]
    assert tuple(flat.shape) == (300, 1)
