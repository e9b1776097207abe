"""Train a DGL GraphSAGE on a feature store through ``NeighborLoader(output="dgl")``.

Runs in the DGL environment (``scripts/dgl-env.sh`` builds ``.venv-dgl``: dgl 2.1.0 needs
torch <= 2.2.1 and numpy 1.x)::

    .venv-dgl/bin/python examples/train_dgl.py STORE --epochs 3 --fanouts 5,10,15

``--fanouts`` is in DGL's order (input layer first, as ``dgl.dataloading.NeighborSampler``):
with ``output="dgl"`` the loader reads fanout lists that way (``fanout_order="dgl"``).

The model is DGL's mini-batch GraphSAGE (``dgl.nn.SAGEConv``, mean aggregation); on a
heterogeneous store (MAG240M's paper/author/institution) each layer is a ``HeteroGraphConv``
with one ``SAGEConv`` per relation, and node types without features start from zeros (they
learn from their neighbours, as in the MAG240M R-GraphSAGE baseline). Prints per epoch the loss,
train accuracy, throughput (seeds/s, batches/s) and the share of time the loop waited on the
loader, then the accuracy on ``valid`` (and ``test`` where it has labels).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

os.environ.setdefault("DGLBACKEND", "pytorch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import featurestore as fs  # noqa: E402
from loaders import NeighborLoader  # noqa: E402
from loaders.dgl import require_dgl  # noqa: E402

log = logging.getLogger("train_dgl")


class SAGE(torch.nn.Module):
    """GraphSAGE over DGL blocks; heterogeneous when ``etypes`` is given."""

    def __init__(self, in_dims: dict[str, int], hidden: int, out_dim: int, num_layers: int,
                 etypes=None, dropout: float = 0.2):
        super().__init__()
        import dgl.nn as dglnn

        self.hetero = etypes is not None
        self.in_dims = in_dims
        dims = [max(in_dims.values())] + [hidden] * (num_layers - 1) + [out_dim]
        self.layers = torch.nn.ModuleList()
        for a, b in zip(dims, dims[1:]):
            if self.hetero:
                self.layers.append(dglnn.HeteroGraphConv(
                    {et: dglnn.SAGEConv(a, b, "mean") for _, et, _ in etypes}, aggregate="sum"))
            else:
                self.layers.append(dglnn.SAGEConv(a, b, "mean"))
        self.dropout = torch.nn.Dropout(dropout)

    def inputs(self, block):
        """Input features of ``blocks[0]``'s source nodes (zeros for types without any)."""
        feat = block.srcdata["feat"]
        if not self.hetero:
            return feat.float()
        width = max(self.in_dims.values())
        h = {}
        for nt in block.srctypes:
            x = feat.get(nt) if isinstance(feat, dict) else None
            n = block.num_src_nodes(nt)
            if x is None:
                h[nt] = torch.zeros(n, width, device=block.device)
            else:
                x = x.float()
                h[nt] = F.pad(x, (0, width - x.shape[1])) if x.shape[1] < width else x
        return h

    def forward(self, blocks, seed_type: str):
        h = self.inputs(blocks[0])
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                if self.hetero:
                    h = {nt: self.dropout(F.relu(v)) for nt, v in h.items()}
                    width = next(iter(h.values())).shape[1]
                    for nt in block.dsttypes:  # types that received no messages start from zeros
                        if nt not in h:
                            h[nt] = torch.zeros(block.num_dst_nodes(nt), width, device=block.device)
                else:
                    h = self.dropout(F.relu(h))
        return h[seed_type] if self.hetero else h


def _labels(blocks, seed_type, hetero):
    y = blocks[-1].dstdata["label"]
    return y[seed_type] if hetero else y


def run_epoch(model, loader, seed_type, hetero, opt=None, max_batches=None) -> dict:
    """One pass over ``loader``; trains when ``opt`` is given. Returns loss, accuracy, timings."""
    model.train(opt is not None)
    loss_sum = correct = total = batches = 0
    wait = 0.0
    t0 = time.perf_counter()
    it = iter(loader)
    while True:
        tw = time.perf_counter()
        item = next(it, None)
        wait += time.perf_counter() - tw
        if item is None:
            break
        _, _, blocks = item
        y = _labels(blocks, seed_type, hetero)
        with torch.set_grad_enabled(opt is not None):
            logits = model(blocks, seed_type)
            keep = y >= 0
            loss = F.cross_entropy(logits[keep], y[keep])
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            opt.step()
        loss_sum += float(loss) * int(keep.sum())
        correct += int((logits.argmax(1)[keep] == y[keep]).sum())
        total += int(keep.sum())
        batches += 1
        if max_batches and batches >= max_batches:
            break
    if hasattr(it, "close"):
        it.close()  # stops the loader's threads when we leave early
    dt = time.perf_counter() - t0
    return {"loss": loss_sum / max(total, 1), "acc": correct / max(total, 1), "seeds": total,
            "batches": batches, "seconds": dt, "seeds_per_s": total / dt if dt else 0.0,
            "batches_per_s": batches / dt if dt else 0.0,
            "loader_wait_share": wait / dt if dt else 0.0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("store")
    p.add_argument("--seed-type", help="node type to classify (default: the one with labels)")
    p.add_argument("--fanouts", default="5,10,15",
                   help="DGL's order: input layer first (15 neighbours of each seed here)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-batches", type=int, default=None, help="per epoch, for a short run")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--device", default=None, help="default: cuda when available")
    p.add_argument("--num-threads", type=int, default=None, help="loader (numba) threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the metrics here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    dgl = require_dgl()
    torch.manual_seed(args.seed)

    store = fs.open_store(args.store)
    seed_type = args.seed_type or next(nt for nt in store.node_types
                                       if "label" in store.value_names(nt))
    hetero = len(store.node_types) > 1
    fanouts = [int(f) for f in args.fanouts.split(",")]
    labels = np.asarray(store.labels(seed_type))
    num_classes = int(labels.max()) + 1
    in_dims = {nt: int(np.prod(store.features(nt, "feat").shape[1:])) for nt in store.node_types
               if "feat" in store.feature_names(nt)}
    etypes = [tuple(et) for et in store.edge_types] if hetero else None
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = SAGE(in_dims, args.hidden, num_classes, len(fanouts), etypes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    common = dict(batch_size=args.batch_size, output="dgl", device=device, seed=args.seed,
                  num_threads=args.num_threads)
    train = NeighborLoader(store, fanouts, (seed_type, "train"), shuffle=True, **common)
    print(f"dgl {dgl.__version__}, torch {torch.__version__}, device {device}; store {store.url}: "
          f"{seed_type} {store.num_nodes(seed_type):,} nodes, "
          f"{len(train.input_nodes):,} train seeds, "
          f"{num_classes} classes, fanouts {fanouts}, {len(train)} batches/epoch")
    metrics = {"epochs": []}
    for epoch in range(args.epochs):
        m = run_epoch(model, train, seed_type, hetero, opt, args.max_batches)
        metrics["epochs"].append(m)
        print(f"epoch {epoch}: loss {m['loss']:.4f}, train acc {m['acc']:.4f}, "
              f"{m['seeds_per_s']:,.0f} seeds/s ({m['batches_per_s']:.2f} batches/s), "
              f"waiting on the loader {100 * m['loader_wait_share']:.0f}% of the time")
    for split in ("valid", "test"):
        if split not in store.split_names:
            continue
        ids = np.asarray(store.split(split, seed_type))
        if ids.size == 0 or (labels[ids] < 0).all():
            continue
        ev = NeighborLoader(store, fanouts, (seed_type, split), **common)
        m = run_epoch(model, ev, seed_type, hetero, None, args.max_batches)
        metrics[split] = m
        print(f"{split} accuracy {m['acc']:.4f} on {m['seeds']:,} nodes "
              f"({m['seeds_per_s']:,.0f} seeds/s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(metrics, f, indent=1)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
