"""A relational GNN (PyG) on the homogeneous view of a MAG240M-shaped store.

The loader yields each batch as one graph (``homogeneous=True``): ``x`` for every node type
(the store needs features on authors and institutions too: ``featurestore preprocess mag240m
ROOT STORE --derive-features mean``), ``edge_type`` per edge and the seeds first. The model
keeps one convolution per edge type and sums them, with a skip connection per layer: the
relational GNN of the MAG240M baselines, in a few lines.

    python examples/train_rgnn.py --store /data/mag240m.store --epochs 1 --device cuda
    python examples/train_rgnn.py --demo      # a small MAG-shaped store, a few epochs
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile

import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv
from torch_geometric.utils import trim_to_layer

import featurestore as fs
from loaders import NeighborLoader

log = logging.getLogger("train_rgnn")


class RelationalSAGE(torch.nn.Module):
    """Per layer: a skip plus one SAGEConv per edge type, over the edges of that type."""

    def __init__(self, dim: int, hidden: int, out: int, layers: int, relations: int,
                 dropout: float = 0.5):
        super().__init__()
        sizes = [dim] + [hidden] * layers
        self.skips = torch.nn.ModuleList(
            [torch.nn.Linear(sizes[i], sizes[i + 1]) for i in range(layers)])
        self.convs = torch.nn.ModuleList(
            [torch.nn.ModuleList([SAGEConv(sizes[i], sizes[i + 1], root_weight=False)
                                  for _ in range(relations)]) for i in range(layers)])
        self.norms = torch.nn.ModuleList([torch.nn.BatchNorm1d(hidden) for _ in range(layers)])
        self.head = torch.nn.Linear(hidden, out)
        self.dropout = dropout

    def forward(self, x, edge_index, edge_type, num_sampled_nodes, num_sampled_edges):
        for i, (skip, convs, norm) in enumerate(zip(self.skips, self.convs, self.norms)):
            # drop the outermost hop each layer no longer needs (PyG's trim_to_layer)
            x, edge_index, edge_type = trim_to_layer(i, num_sampled_nodes, num_sampled_edges,
                                                     x, edge_index, edge_type)
            out = skip(x)
            for r, conv in enumerate(convs):
                out = out + conv(x, edge_index[:, edge_type == r])
            x = F.dropout(norm(out).relu(), p=self.dropout, training=self.training)
        return self.head(x)


def run(model, loader, opt=None, max_batches=None) -> dict:
    """One pass: train when ``opt`` is given, else evaluate; mean loss and accuracy."""
    model.train(opt is not None)
    loss_sum = right = seen = 0.0
    for k, b in enumerate(loader):
        if max_batches is not None and k >= max_batches:
            break
        bs = b.batch_size
        with torch.set_grad_enabled(opt is not None):
            out = model(b.x, b.edge_index, b.edge_type, b.num_sampled_nodes,
                        b.num_sampled_edges)[:bs]
            loss = F.cross_entropy(out, b.y[:bs])  # y[:batch_size]: the seeds' labels
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            opt.step()
        loss_sum += loss.item() * bs
        right += int((out.argmax(1) == b.y[:bs]).sum())
        seen += bs
    return {"loss": loss_sum / max(seen, 1), "acc": right / max(seen, 1), "seeds": int(seen)}


def main(argv=None) -> dict:
    """Train and evaluate; returns the last epoch's metrics."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", help="a MAG240M-shaped store with features on every node type")
    p.add_argument("--demo", action="store_true", help="build a small store and train")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--fanouts", default="25,15", help="per hop, for every edge type")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--max-batches", type=int, help="stop each pass early")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    tmp = None
    if args.store is None:
        if not args.demo:
            p.error("give --store PATH, or --demo")
        from loaders.datasets.synthetic import mag_like_store

        tmp = tempfile.TemporaryDirectory(prefix="rgnn-demo-")
        args.store = mag_like_store(os.path.join(tmp.name, "store"), num_papers=8000,
                                    num_authors=6000, num_institutions=100, feat_dim=32,
                                    derive_features=True)
        args.epochs, args.batch_size, args.hidden = max(args.epochs, 3), 256, 64
    store = fs.open_store(args.store)
    fanouts = [int(x) for x in args.fanouts.split(",")]
    common = dict(batch_size=args.batch_size, output="pyg", device=args.device,
                  homogeneous=True, dtype=torch.float32)
    train = NeighborLoader(store, fanouts, ("paper", "train"), shuffle=True, **common)
    valid = NeighborLoader(store, fanouts, ("paper", "valid"), **common)
    model = RelationalSAGE(store.features("paper").shape[1], args.hidden,
                           store.num_classes("paper"), len(fanouts),
                           len(store.edge_types)).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    out = {}
    for epoch in range(args.epochs):
        out = {"epoch": epoch, "train": run(model, train, opt, args.max_batches),
               "valid": run(model, valid, None, args.max_batches)}
        log.info("epoch %d: train loss %.3f acc %.3f, valid acc %.3f", epoch,
                 out["train"]["loss"], out["train"]["acc"], out["valid"]["acc"])
    store.close()
    if tmp is not None:
        tmp.cleanup()
    return out


if __name__ == "__main__":
    main()
