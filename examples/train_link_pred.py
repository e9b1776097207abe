"""GraphSAGE link prediction (friend recommendation) on a store, fed by our LinkNeighborLoader.

What a PyG ``examples/link_pred/*`` user changes: the ``Data`` becomes a store, PyG's
``LinkNeighborLoader(data, num_neighbors, edge_label_index=..., neg_sampling_ratio=...)``
becomes ours with the same arguments, and batches carry the same fields (``edge_label_index``
in batch-local ids, ``edge_label`` 1 for positives then 0 for negatives).

The demo graph has communities and skewed degrees (a stochastic block model with Zipf-skewed
node weights); 10% of its undirected edges are held out of the store, so validation edges are
never seen by message passing, and the model is scored by AUC on them against as many random
pairs.

    python examples/train_link_pred.py --demo          # builds the demo store, trains briefly
    python examples/train_link_pred.py --store S --pairs valid.npy
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE

import featurestore as fs
from loaders import LinkNeighborLoader

log = logging.getLogger("train_link_pred")


def community_store(path: str, *, nodes: int = 4000, communities: int = 8,
                    degree: int = 12, dim: int = 32, seed: int = 0) -> np.ndarray:
    """Write the demo store (train edges only, both directions) and return the held-out
    validation pairs ``(2, V)``."""
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, communities, nodes)
    weight = rng.zipf(2.2, nodes).clip(1, 50).astype(np.float64)
    m = nodes * degree // 2
    src = rng.choice(nodes, m, p=weight / weight.sum())
    same = rng.random(m) < 0.8  # 80% of the edges inside a community
    members = [np.flatnonzero(comm == c) for c in range(communities)]
    dst = rng.integers(0, nodes, m)
    for c in range(communities):
        at = np.flatnonzero(same & (comm[src] == c))
        dst[at] = members[c][rng.integers(0, members[c].size, at.size)]
    keep = src != dst
    pairs = np.unique(np.sort(np.stack([src[keep], dst[keep]]), axis=0), axis=1)
    held = rng.random(pairs.shape[1]) < 0.1
    train = pairs[:, ~held]
    both = np.concatenate([train, train[::-1]], axis=1)  # undirected: each edge both ways
    order = np.lexsort((both[0], both[1]))
    row, col = both[0][order], both[1][order]
    indptr = np.zeros(nodes + 1, np.int64)
    np.cumsum(np.bincount(col, minlength=nodes), out=indptr[1:])
    cent = rng.standard_normal((communities, dim)).astype(np.float32)
    x = cent[comm] + 2.0 * rng.standard_normal((nodes, dim)).astype(np.float32)
    w = fs.create_store(path, mode="w")
    w.add_node_type("node", nodes)
    w.add_edge_type(("node", "to", "node"), indptr, row.astype(np.int32))
    w.add_features("node", "feat", x)
    w.commit()
    return pairs[:, held]


class LinkModel(torch.nn.Module):
    """GraphSAGE encoder, dot-product decoder."""

    def __init__(self, dim: int, hidden: int, layers: int):
        super().__init__()
        self.enc = GraphSAGE(dim, hidden, num_layers=layers)

    def forward(self, b) -> torch.Tensor:
        h = self.enc(b.x.float(), b.edge_index)
        return (h[b.edge_label_index[0]] * h[b.edge_label_index[1]]).sum(-1)


def auc(score: np.ndarray, label: np.ndarray) -> float:
    """Area under the ROC curve (rank statistic; ties get half)."""
    order = np.argsort(score, kind="stable")
    ranks = np.empty(score.size)
    ranks[order] = np.arange(1, score.size + 1)
    for s in np.unique(score[np.diff(np.sort(score), prepend=np.nan) == 0]):
        ranks[score == s] = ranks[score == s].mean()
    pos = label == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def main(argv=None) -> dict:  # noqa: D103
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store")
    ap.add_argument("--pairs", help=".npy of held-out (2, V) pairs to score")
    ap.add_argument("--demo", action="store_true")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--fanouts", default="10,5")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--max-batches", type=int)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args(argv)
    if a.demo or a.store is None:
        a.store = os.path.join(tempfile.mkdtemp(prefix="link-demo-"), "s")
        valid = community_store(a.store)
    else:
        valid = np.load(a.pairs)
    store = fs.open_store(a.store)
    fan = [int(f) for f in a.fanouts.split(",")]
    train = LinkNeighborLoader(store, fan, None, neg_sampling_ratio=1.0, shuffle=True,
                               batch_size=a.batch_size, output="pyg", device=a.device)
    val = LinkNeighborLoader(store, fan, valid, neg_sampling_ratio=1.0, seed=1,
                             batch_size=a.batch_size, output="pyg", device=a.device)
    model = LinkModel(store.features(None, "feat").shape[1], a.hidden, len(fan)).to(a.device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    for epoch in range(a.epochs):
        model.train()
        total = n = 0
        for k, b in enumerate(train):
            if a.max_batches is not None and k >= a.max_batches:
                break
            loss = F.binary_cross_entropy_with_logits(model(b), b.edge_label)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + float(loss.detach()) * b.edge_label.numel(), n + b.edge_label.numel()
        model.eval()
        scores, labels = [], []
        with torch.no_grad():
            for b in val:
                scores.append(model(b).cpu().numpy())
                labels.append(b.edge_label.cpu().numpy())
        r = {"epoch": epoch, "loss": total / max(n, 1),
             "val_auc": auc(np.concatenate(scores), np.concatenate(labels))}
        print(f"epoch {epoch}: loss {r['loss']:.4f}, validation AUC {r['val_auc']:.3f}")
    return r


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    main()
