"""DGL's DataLoader signature and dataset stand-ins over a store (run in .venv-dgl)."""

from __future__ import annotations

import numpy as np
import torch

from dgl_helpers import import_dgl

dgl = import_dgl()

from loaders import NeighborLoader  # noqa: E402
from loaders.datasets import AsNodePredDataset, DglNodePropPredDataset  # noqa: E402
from loaders.dgl import DataLoader  # noqa: E402
from loaders.synthetic import power_law_store  # noqa: E402


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
