"""A relational GAT (DGL) on blocks of the homogeneous view of a MAG240M-shaped store.

``NeighborLoader(..., output="dgl", homogeneous=True)`` yields DGL blocks of one node and edge
type with ``edata["etype"]`` (an index into ``store.edge_types``) and ``dgl.NTYPE``, the
features of every node type in ``blocks[0].srcdata["feat"]`` (cast to fp32 by ``dtype=``)
and the seeds' labels in ``blocks[-1].dstdata["label"]``. Each layer runs one ``GATConv`` per
edge type on that type's edges and adds a skip connection. Run it in the DGL environment:

    python examples/train_dgl_rgat.py --store /data/mag240m.store --epochs 1
    python examples/train_dgl_rgat.py --demo
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile

import dgl
import dgl.nn as dglnn
import torch
import torch.nn.functional as F

import featurestore as fs
from loaders import NeighborLoader

log = logging.getLogger("train_dgl_rgat")


class RGAT(torch.nn.Module):
    """Per layer: a skip plus one multi-head GATConv per edge type."""

    def __init__(self, dim: int, hidden: int, out: int, layers: int, relations: int,
                 heads: int = 4, dropout: float = 0.5):
        super().__init__()
        sizes = [dim] + [hidden] * layers
        self.skips = torch.nn.ModuleList(
            [torch.nn.Linear(sizes[i], hidden) for i in range(layers)])
        self.convs = torch.nn.ModuleList(
            [torch.nn.ModuleList([dglnn.GATConv(sizes[i], hidden // heads, heads,
                                                allow_zero_in_degree=True)
                                  for _ in range(relations)]) for i in range(layers)])
        self.norms = torch.nn.ModuleList([torch.nn.BatchNorm1d(hidden) for _ in range(layers)])
        self.head = torch.nn.Linear(hidden, out)
        self.hidden, self.dropout = hidden, dropout

    def forward(self, blocks, x):
        for block, skip, convs, norm in zip(blocks, self.skips, self.convs, self.norms):
            x_dst = x[: block.num_dst_nodes()]
            out = skip(x_dst)
            graph = dgl.block_to_graph(block)
            for r, conv in enumerate(convs):
                sub = graph.edge_subgraph(graph.edata["etype"] == r, relabel_nodes=False)
                out = out + conv(sub, (x, x_dst)).reshape(-1, self.hidden)
            x = F.dropout(F.elu(norm(out)), p=self.dropout, training=self.training)
        return self.head(x)


def run(model, loader, opt=None, max_batches=None) -> dict:
    """One pass: train when ``opt`` is given, else evaluate; mean loss and accuracy."""
    model.train(opt is not None)
    loss_sum = right = seen = 0.0
    for k, (_, _, blocks) in enumerate(loader):
        if max_batches is not None and k >= max_batches:
            break
        y = blocks[-1].dstdata["label"]
        with torch.set_grad_enabled(opt is not None):
            out = model(blocks, blocks[0].srcdata["feat"])
            loss = F.cross_entropy(out, y)
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            opt.step()
        loss_sum += loss.item() * y.shape[0]
        right += int((out.argmax(1) == y).sum())
        seen += y.shape[0]
    return {"loss": loss_sum / max(seen, 1), "acc": right / max(seen, 1), "seeds": int(seen)}


def main(argv=None) -> dict:
    """Train and evaluate; returns the last epoch's metrics."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", help="a MAG240M-shaped store with features on every node type")
    p.add_argument("--demo", action="store_true", help="build a small store and train")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--fanouts", default="15,25", help="per layer, DGL's order (input first)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-batches", type=int, help="stop each pass early")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    tmp = None
    if args.store is None:
        if not args.demo:
            p.error("give --store PATH, or --demo")
        from loaders.datasets.synthetic import mag_like_store

        tmp = tempfile.TemporaryDirectory(prefix="rgat-demo-")
        args.store = mag_like_store(os.path.join(tmp.name, "store"), num_papers=8000,
                                    num_authors=6000, num_institutions=100, feat_dim=32,
                                    derive_features=True)
        args.epochs, args.batch_size, args.hidden = max(args.epochs, 3), 256, 64
    store = fs.open_store(args.store)
    sampler = dgl.dataloading.NeighborSampler([int(x) for x in args.fanouts.split(",")])
    common = dict(batch_size=args.batch_size, output="dgl", device="cpu", homogeneous=True,
                  dtype=torch.float32)
    train = NeighborLoader(store, sampler, ("paper", "train"), shuffle=True, **common)
    valid = NeighborLoader(store, sampler, ("paper", "valid"), **common)
    model = RGAT(store.features("paper").shape[1], args.hidden, store.num_classes("paper"),
                 len(sampler.fanouts), len(store.edge_types))
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
