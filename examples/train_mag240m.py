"""Heterogeneous GraphSAGE (PyG) on a store with MAG240M's layout, fed by our loader.

Trains on the papers of the ``train`` split and reports accuracy on ``valid`` and the
throughput of the training loop (seeds/s) with the share of it spent waiting on data.
Node types without features (authors, institutions in MAG240M) start from zeros and get
their representation from their neighbours in the first layer.

    python examples/train_mag240m.py --store /data/mag240m.store --epochs 1 --device cuda
    python examples/train_mag240m.py --demo      # builds a small MAG-shaped store, trains briefly
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv, to_hetero

import featurestore as fs
from loaders import NeighborLoader

log = logging.getLogger("train_mag240m")


class SAGE(torch.nn.Module):
    def __init__(self, hidden: int, out: int, layers: int, dropout: float = 0.5):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            [SAGEConv((-1, -1), hidden) for _ in range(layers - 1)] + [SAGEConv((-1, -1), out)])
        self.dropout = dropout

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(x.relu(), p=self.dropout, training=self.training)
        return x


def inputs(batch, dim: int) -> dict[str, torch.Tensor]:
    """Features per node type: the store's (cast to fp32 on the device) or zeros."""
    return {t: (batch[t].x.float() if "x" in batch[t] else
                torch.zeros(batch[t].num_nodes, dim, device=batch["paper"].x.device))
            for t in batch.node_types}


def evaluate(model, loader, dim: int, max_batches: int | None) -> float:
    model.eval()
    right = total = 0
    with torch.no_grad():
        for k, b in enumerate(loader):
            if max_batches is not None and k >= max_batches:
                break
            bs = b["paper"].batch_size
            out = model(inputs(b, dim), b.edge_index_dict)["paper"][:bs]
            right += int((out.argmax(1) == b["paper"].y[:bs]).sum())  # y[:batch_size]: the seeds
            total += bs
    model.train()
    return right / max(total, 1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", help="a store with paper/author/institution (MAG240M layout)")
    p.add_argument("--demo", action="store_true", help="build a small MAG-shaped store and train")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--fanouts", default="25,15", help="per hop, for every edge type")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--max-batches", type=int, help="stop each epoch (and the evaluation) early")
    p.add_argument("--num-threads", type=int)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    tmp = None
    if args.store is None:
        if not args.demo:
            p.error("give --store PATH, or --demo")
        from loaders.datasets.synthetic import mag_like_store

        tmp = tempfile.TemporaryDirectory(prefix="mag-demo-")
        args.store = mag_like_store(os.path.join(tmp.name, "store"), num_papers=20000,
                                    num_authors=15000, num_institutions=200, feat_dim=64)
        args.hidden = min(args.hidden, 64)
        args.epochs = max(args.epochs, 3)
        args.batch_size = min(args.batch_size, 512)
    store = fs.open_store(args.store)
    fanouts = [int(x) for x in args.fanouts.split(",")]
    labels = store.labels("paper")
    num_classes = int(labels.max()) + 1
    dim = store.features("paper", "feat").shape[1]
    torch.manual_seed(args.seed)
    meta = (store.node_types, [tuple(et) for et in store.edge_types])
    model = to_hetero(SAGE(args.hidden, num_classes, len(fanouts)), meta, aggr="sum")
    model = model.to(args.device)
    common = dict(batch_size=args.batch_size, output="pyg",
                  device=args.device, num_threads=args.num_threads, seed=args.seed)
    train = NeighborLoader(store, fanouts, ("paper", "train"), shuffle=True, **common)
    valid = NeighborLoader(store, fanouts, ("paper", "valid"), **common)
    with torch.no_grad():  # initialise the lazy layers
        b = next(iter(train))
        model(inputs(b, dim), b.edge_index_dict)
    del b
    train.set_epoch(0)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    log.info("store %s: %s; %d classes; %d training papers, %d batches per epoch",
             store.url, {t: store.num_nodes(t) for t in store.node_types}, num_classes,
             train.input_nodes.shape[0], len(train))

    for epoch in range(args.epochs):
        train.stats.reset()
        t0, seeds, loss_sum = time.perf_counter(), 0, 0.0
        for k, b in enumerate(train):
            if args.max_batches is not None and k >= args.max_batches:
                break
            bs = b["paper"].batch_size
            opt.zero_grad()
            out = model(inputs(b, dim), b.edge_index_dict)["paper"][:bs]
            loss = F.cross_entropy(out, b["paper"].y[:bs])
            loss.backward()
            opt.step()
            loss_sum += float(loss.detach()) * bs
            seeds += bs
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        acc = evaluate(model, valid, dim, args.max_batches)
        st = train.stats
        print(f"epoch {epoch}: loss {loss_sum / max(seeds, 1):.4f}, valid accuracy {acc:.4f}, "
              f"{seeds / dt:,.0f} seeds/s ({st.batches / dt:.2f} batches/s), "
              f"waiting on data {100 * st.wait / dt:.0f}% of the loop; "
              f"stage ms/batch {st.per_batch_ms()}")
    store.close()
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
