"""A DGL GraphSAGE (``dgl.nn.SAGEConv``, unchanged) learns through ``NeighborLoader(output="dgl")``.

The store is a synthetic power-law graph with a planted signal: a node's features are its class
centroid plus Gaussian noise strong enough that its own features alone classify it poorly, and
80% of its in-edges come from nodes of its class. Chance is 1/4 (4 balanced classes). The best
classifier on a node's own features (nearest class mean, the Bayes rule for isotropic noise) is
computed from the store as a baseline: the GNN must beat chance by 0.4 (accuracy >= 0.65; it
reaches ~0.77 here) and that own-features baseline (~0.43) by 0.15, which it can only do by
aggregating neighbours through the blocks, i.e. if the blocks are the right graph with the
right features in the right rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dgl_helpers import import_dgl

dgl = import_dgl()

import dgl.nn as dglnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import featurestore as fs  # noqa: E402
from loaders import NeighborLoader  # noqa: E402
from loaders.datasets.synthetic import power_law_store  # noqa: E402

NUM_CLASSES = 4
CHANCE = 1 / NUM_CLASSES
THRESHOLD = CHANCE + 0.4
MARGIN_OVER_OWN_FEATURES = 0.15


class SAGE(torch.nn.Module):
    """DGL's GraphSAGE from its mini-batch examples."""

    def __init__(self, in_dim, hidden, out_dim, num_layers=2):
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.layers = torch.nn.ModuleList(dglnn.SAGEConv(a, b, "mean")
                                          for a, b in zip(dims, dims[1:]))

    def forward(self, blocks, x):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            x = layer(block, x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


def own_feature_accuracy(store) -> float:
    """Accuracy on ``test`` of the nearest class mean (means from ``train``) on own features."""
    x = np.asarray(store.features("node", "feat").numpy(), dtype=np.float64)
    y = np.asarray(store.labels("node"))
    tr, te = np.asarray(store.split("train")), np.asarray(store.split("test"))
    mu = np.stack([x[tr][y[tr] == c].mean(0) for c in range(NUM_CLASSES)])
    pred = np.argmin(((x[te][:, None, :] - mu[None]) ** 2).sum(-1), axis=1)
    return float((pred == y[te]).mean())


@pytest.fixture(scope="module")
def signal_store(tmp_path_factory):
    path = power_law_store(tmp_path_factory.mktemp("dgl-train") / "s", num_nodes=3000,
                           num_edges=30000, feat_dim=16, num_classes=NUM_CLASSES, noise=1.5,
                           homophily=0.8, train_frac=0.5, seed=3)
    with fs.open_store(path) as s:
        yield s


def evaluate(model, batches) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for _, output_nodes, blocks in batches:
            pred = model(blocks, blocks[0].srcdata["feat"]).argmax(1)
            correct += int((pred == blocks[-1].dstdata["label"]).sum())
            total += len(output_nodes)
    return correct / total


def test_dgl_graphsage_learns_the_planted_signal(signal_store):
    store = signal_store
    torch.manual_seed(0)
    model = SAGE(16, 64, NUM_CLASSES)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    train = NeighborLoader(store, [10, 10], ("node", "train"), batch_size=256, shuffle=True,
                           output="dgl", device="cpu")
    test = NeighborLoader(store, [10, 10], ("node", "test"), batch_size=1000, output="dgl",
                          device="cpu")
    for _epoch in range(8):
        model.train()
        for _, _, blocks in train:
            loss = F.cross_entropy(model(blocks, blocks[0].srcdata["feat"]),
                                   blocks[-1].dstdata["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
    acc = evaluate(model, test)
    baseline = own_feature_accuracy(store)
    print(f"DGL GraphSAGE test accuracy {acc:.3f}; own-features baseline {baseline:.3f}; "
          f"chance {CHANCE:.2f}")
    assert acc >= THRESHOLD, f"accuracy {acc:.3f} < {THRESHOLD:.2f} (chance {CHANCE:.2f})"
    assert acc >= baseline + MARGIN_OVER_OWN_FEATURES, (
        f"accuracy {acc:.3f} does not beat the own-features baseline {baseline:.3f} by "
        f"{MARGIN_OVER_OWN_FEATURES}: the blocks add no neighbour information")
