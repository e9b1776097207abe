"""Homogeneous GraphSAGE (PyG) on a papers100M-like store, fed by our loader.

What a PyG ``examples/ogbn_train.py`` user changes: the dataset becomes a store and PyG's
``NeighborLoader(data, num_neighbors, input_nodes=...)`` becomes ours with the same arguments
(``store`` for ``data``; a split name or ids for ``input_nodes``). Batches are ``Data`` with
``x``, ``edge_index``, ``y`` (every node's label, as PyG's; the seeds' are ``y[:batch_size]``),
``batch_size``, ``n_id`` and the per-hop counts ``num_sampled_nodes``/``num_sampled_edges``
that ``trim_to_layer`` uses.

    python examples/train_graphsage.py --store /data/papers100m.store --epochs 3 --device cuda
    python examples/train_graphsage.py --demo     # a small power-law store, trains briefly
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE

import featurestore as fs
from loaders import NeighborLoader

log = logging.getLogger("train_graphsage")


def run_epoch(model, loader, opt=None, max_batches: int | None = None) -> dict:
    """One pass: trains when ``opt`` is given, else evaluates. Accuracy and seeds/s."""
    model.train(opt is not None)
    right = total = 0
    loss_sum = 0.0
    t0 = time.perf_counter()
    with torch.set_grad_enabled(opt is not None):
        for k, b in enumerate(loader):
            if max_batches is not None and k >= max_batches:
                break
            out = model(b.x.float(), b.edge_index, num_sampled_nodes_per_hop=b.num_sampled_nodes,
                        num_sampled_edges_per_hop=b.num_sampled_edges)[:b.batch_size]
            y = b.y[:b.batch_size]
            loss = F.cross_entropy(out, y)
            if opt is not None:
                opt.zero_grad()
                loss.backward()
                opt.step()
            loss_sum += float(loss.detach()) * b.batch_size
            right += int((out.argmax(1) == y).sum())
            total += b.batch_size
    dt = time.perf_counter() - t0
    return {"loss": loss_sum / max(total, 1), "acc": right / max(total, 1),
            "seeds_per_s": total / dt if dt else 0.0, "seeds": total}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", help="a store of one node type with feat, label and splits")
    p.add_argument("--demo", action="store_true", help="build a small power-law store and train")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--fanouts", default="15,10,5", help="per hop from the seeds (PyG's order)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--max-batches", type=int, help="stop each epoch (and the evaluation) early")
    p.add_argument("--num-threads", type=int, help="loader (numba) threads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    tmp = None
    if args.store is None:
        if not args.demo:
            p.error("give --store PATH, or --demo")
        from loaders.datasets.synthetic import power_law_store

        tmp = tempfile.TemporaryDirectory(prefix="graphsage-demo-")
        args.store = power_law_store(os.path.join(tmp.name, "store"), num_nodes=50000,
                                     num_edges=500000, feat_dim=64, num_classes=8,
                                     homophily=0.6, train_frac=0.3)
        args.hidden = min(args.hidden, 64)
    torch.manual_seed(args.seed)
    store = fs.open_store(args.store)
    fanouts = [int(x) for x in args.fanouts.split(",")]
    num_classes = int(store.labels().max()) + 1
    model = GraphSAGE(store.features(None, "feat").shape[1], args.hidden, num_layers=len(fanouts),
                      out_channels=num_classes).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    # PyG: NeighborLoader(data, num_neighbors=fanouts, input_nodes=split_idx["train"], ...)
    kw = dict(batch_size=args.batch_size, output="pyg", device=args.device, seed=args.seed,
              num_threads=args.num_threads)
    train = NeighborLoader(store, fanouts, "train", shuffle=True, **kw)
    valid = NeighborLoader(store, fanouts, "valid", **kw)
    result = {}
    for epoch in range(args.epochs):
        tr = run_epoch(model, train, opt, args.max_batches)
        va = run_epoch(model, valid, None, args.max_batches)
        log.info("epoch %d: loss %.4f, train acc %.3f, valid acc %.3f, %.0f seeds/s (train)",
                 epoch, tr["loss"], tr["acc"], va["acc"], tr["seeds_per_s"])
        result = {"epoch": epoch, "train": tr, "valid": va}
    store.close()
    if tmp is not None:
        tmp.cleanup()
    return result


if __name__ == "__main__":
    main()
