"""Data-parallel GraphSAGE (PyTorch DDP) on one shared, read-only store.

Every rank opens the same store (local path, NFS, or an fsspec URL such as ``s3://...``) and
takes a disjoint, equal share of the training seeds each epoch (``NeighborLoader(...,
rank=r, world_size=N)``: all ranks shuffle alike from ``(seed, epoch)`` and each keeps its
own slice); DDP averages the gradients. Rank 0 writes a checkpoint after every epoch
(``DIR/epoch-0003.pt``: model, optimizer, epoch); ``--resume`` continues at the epoch after
the newest one. Dropout is reseeded from ``(seed, epoch, rank)`` at each epoch, so a resumed
run reproduces an uninterrupted one.

    torchrun --nproc-per-node 2 examples/train_ddp.py STORE --epochs 3
    torchrun --nproc-per-node 2 examples/train_ddp.py STORE --epochs 6 --resume
    torchrun --nnodes 4 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        examples/train_ddp.py s3://bucket/mag240m.store --node-type paper

gloo on CPUs, NCCL with CUDA (one GPU per rank: ``LOCAL_RANK``). Without torchrun it runs as
a single process without DDP. A heterogeneous store (MAG240M layout) trains PyG's
``to_hetero`` GraphSAGE on the seeds of ``--node-type``; types without features start from zeros.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import logging
import os
import re
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import featurestore as fs
from loaders import NeighborLoader

log = logging.getLogger("train_ddp")

CKPT_RE = re.compile(r"epoch-(\d+)\.pt$")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store", help="store path or fsspec URL, read by every rank")
    p.add_argument("--storage-options", default=None,
                   help="JSON dict for fsspec (e.g. endpoint_url, key, secret for S3)")
    p.add_argument("--node-type", default=None, help="seed node type (heterogeneous stores)")
    p.add_argument("--epochs", type=int, default=3, help="train up to this epoch count")
    p.add_argument("--fanouts", default="10,10", help="neighbours per hop, seeds' hop first")
    p.add_argument("--batch-size", type=int, default=512, help="seeds per batch per rank")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    p.add_argument("--seed", type=int, default=0, help="model init, shuffling and sampling")
    p.add_argument("--max-batches", type=int, default=None, help="stop each epoch early")
    p.add_argument("--no-eval", action="store_true", help="skip the valid-split accuracy")
    p.add_argument("--checkpoint-dir", default="ddp-checkpoints",
                   help="rank 0 writes DIR/epoch-NNNN.pt after each epoch ('' for none)")
    p.add_argument("--resume", action="store_true",
                   help="continue after the newest checkpoint in --checkpoint-dir")
    p.add_argument("--device", default=None, help="default: cuda:LOCAL_RANK when CUDA, else cpu")
    p.add_argument("--num-threads", type=int, default=None, help="numba threads per rank")
    p.add_argument("--backend", default=None, help="default: nccl with CUDA, else gloo")
    p.add_argument("--json", default=None, help="rank 0 appends one JSON line per epoch here")
    return p.parse_args(argv)


# -- model ---------------------------------------------------------------------------------
def build_model(store, args, ntype: str, num_classes: int) -> torch.nn.Module:
    """GraphSAGE (homogeneous store) or ``to_hetero(SAGE)``; initialised from ``args.seed``."""
    from torch_geometric.nn import GraphSAGE, SAGEConv, to_hetero

    torch.manual_seed(args.seed)
    layers = len(parse_fanouts(args.fanouts))
    if len(store.node_types) == 1:
        dim = store.features(ntype, "feat").shape[1]
        return GraphSAGE(dim, args.hidden, num_layers=layers, out_channels=num_classes,
                         dropout=args.dropout)

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(
                [SAGEConv((-1, -1), args.hidden) for _ in range(layers - 1)]
                + [SAGEConv((-1, -1), num_classes)])
            self.drop = torch.nn.Dropout(args.dropout)  # a module: to_hetero keeps its mode

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < len(self.convs) - 1:
                    x = self.drop(x.relu())
            return x

    meta = (store.node_types, [tuple(et) for et in store.edge_types])
    return SeedLogits(to_hetero(SAGE(), meta, aggr="sum"), ntype)


class SeedLogits(torch.nn.Module):
    """A heterogeneous model's output for the seed type only, so that DDP sees the last
    layer's parameters for the other types as unused (no gradient) rather than waiting."""

    def __init__(self, model: torch.nn.Module, ntype: str):
        super().__init__()
        self.model, self.ntype = model, ntype

    def forward(self, x_dict, edge_index_dict):
        return self.model(x_dict, edge_index_dict)[self.ntype]


def forward(model, batch, ntype: str, hidden: int):
    """Logits of the batch's seeds (``batch_size`` first rows of the seed type)."""
    from torch_geometric.data import HeteroData

    if not isinstance(batch, HeteroData):
        return model(batch.x.float(), batch.edge_index)[: batch.batch_size]
    dev = batch[ntype].x.device if "x" in batch[ntype] else torch.device("cpu")
    x = {t: (batch[t].x.float() if "x" in batch[t] else
             torch.zeros(batch[t].num_nodes, hidden, device=dev)) for t in batch.node_types}
    return model(x, batch.edge_index_dict)[: batch[ntype].batch_size]


def seeds_and_labels(batch, ntype: str):
    from torch_geometric.data import HeteroData

    if isinstance(batch, HeteroData):
        s = batch[ntype]
        return s.n_id[: s.batch_size], s.y[: s.batch_size]
    return batch.n_id[: batch.batch_size], batch.y[: batch.batch_size]  # y: every sampled node's


def parse_fanouts(text: str) -> list[int]:
    return [int(x) for x in str(text).split(",") if x.strip()]


# -- checkpoints ---------------------------------------------------------------------------
def latest_checkpoint(directory: str) -> str | None:
    found = [(int(m.group(1)), p) for p in glob.glob(os.path.join(directory, "epoch-*.pt"))
             if (m := CKPT_RE.search(p))]
    return max(found)[1] if found else None


def save_checkpoint(directory: str, epoch: int, model, opt, args, world_size: int) -> str:
    """Write ``DIR/epoch-NNNN.pt`` atomically (temporary file, then rename)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"epoch-{epoch:04d}.pt")
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "config": {"seed": args.seed, "fanouts": args.fanouts,
                           "batch_size": args.batch_size, "hidden": args.hidden,
                           "world_size": world_size, "store": str(args.store)}}, tmp)
    os.replace(tmp, path)
    return path


# -- training ------------------------------------------------------------------------------
def _setup(args):
    """(rank, world size, device, whether this call started the process group)."""
    cuda = torch.cuda.is_available() and (args.device is None
                                          or str(args.device).startswith("cuda"))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:  # one GPU per rank, chosen before NCCL starts
        device = torch.device(args.device or f"cuda:{local}")
        torch.cuda.set_device(device)
    else:
        device = torch.device(args.device or "cpu")
    started = False
    if not dist.is_initialized() and "MASTER_ADDR" in os.environ:  # launched by torchrun
        dist.init_process_group(args.backend or ("nccl" if cuda else "gloo"),
                                timeout=datetime.timedelta(minutes=10))
        started = True
    rank = dist.get_rank() if dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_initialized() else 1
    return rank, world, device, started


def _all_sum(values: list[float], device) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(t)
    return t.tolist()


def evaluate(model, loader, ntype, hidden, device, max_batches) -> float:
    model.eval()
    right = total = 0
    with torch.no_grad():
        for k, b in enumerate(loader):
            if max_batches is not None and k >= max_batches:
                break
            _, y = seeds_and_labels(b, ntype)
            right += int((forward(model, b, ntype, hidden).argmax(1) == y).sum())
            total += int(y.shape[0])
    model.train()
    r, t = _all_sum([right, total], device)
    return r / max(t, 1)


def train(args, *, record_seeds: bool = False) -> dict:
    """Train on this rank; returns what it did (epochs run, per-epoch seconds and losses,
    the seeds it trained on per epoch when ``record_seeds``, the final parameters)."""
    rank, world, device, started = _setup(args)
    opts = json.loads(args.storage_options) if args.storage_options else None
    store = fs.open_store(args.store, storage_options=opts)
    try:
        return _train(args, store, rank, world, device, record_seeds)
    finally:
        store.close()
        if started:
            dist.destroy_process_group()


def _train(args, store, rank, world, device, record_seeds) -> dict:
    ntype = args.node_type or (store.node_types[0] if len(store.node_types) == 1 else
                               ("paper" if "paper" in store.node_types else None))
    if ntype is None:
        raise SystemExit(f"{store.url} has node types {store.node_types}: give --node-type")
    fanouts = parse_fanouts(args.fanouts)
    labels = store.labels(ntype)
    lab_ids = np.concatenate([np.asarray(store.split(s, ntype)) for s in ("train", "valid")
                              if s in store.split_names])
    num_classes = int(np.asarray(labels[np.unique(lab_ids)]).max()) + 1
    common = dict(batch_size=args.batch_size, output="pyg", device=device, seed=args.seed,
                  num_threads=args.num_threads, rank=rank, world_size=world)
    loader = NeighborLoader(store, fanouts, (ntype, "train"), shuffle=True, drop_last=False,
                            **common)
    valid = None
    if not args.no_eval and "valid" in store.split_names:
        valid = NeighborLoader(store, fanouts, (ntype, "valid"), **common)

    model = build_model(store, args, ntype, num_classes).to(device)
    if len(store.node_types) > 1:  # materialise the lazy layers before DDP sees them
        with torch.no_grad():
            forward(model, next(iter(loader)), ntype, args.hidden)
        loader.set_epoch(0)
    opt = (torch.optim.Adam(model.parameters(), lr=args.lr) if args.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=args.lr))

    start = _resume(args, model, opt, rank, world, device) if args.resume else 0

    # heterogeneous: the last layer's convolutions into other node types reach no loss
    ddp = (DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
               find_unused_parameters=len(store.node_types) > 1)
           if dist.is_initialized() else model)
    if rank == 0:
        log.info("store %s: %d %s seeds in train, %d classes; %d ranks x %d batches of %d "
                 "(%s, %s)", store.url, loader.input_nodes.shape[0], ntype, num_classes, world,
                 len(loader), args.batch_size, device.type,
                 dist.get_backend() if dist.is_initialized() else "single process")
    out = {"rank": rank, "world_size": world, "epochs": [], "seconds": [], "loss": [],
           "accuracy": [], "seeds": {}, "batches": []}
    for epoch in range(start, args.epochs):
        torch.manual_seed(args.seed * 1_000_003 + epoch * 1009 + rank)  # dropout, per rank
        loader.set_epoch(epoch)
        t0 = time.perf_counter()
        nb, n_seeds, loss_sum, seen = _epoch(args, loader, ddp, opt, ntype, record_seeds)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        tot_loss, tot_seeds = _all_sum([loss_sum, n_seeds], device)
        max_dt = _all_max(dt, device)  # the epoch lasts as long as its slowest rank
        acc = (evaluate(model, valid, ntype, args.hidden, device, args.max_batches)
               if valid is not None else float("nan"))
        out["epochs"].append(epoch)
        out["seconds"].append(max_dt)
        out["loss"].append(tot_loss / max(tot_seeds, 1))
        out["accuracy"].append(acc)
        out["batches"].append(nb)
        if record_seeds:
            out["seeds"][epoch] = np.concatenate(seen) if seen else np.empty(0, np.int64)
        if rank == 0:
            msg = (f"epoch {epoch}: {max_dt:.2f} s ({tot_seeds / max_dt:,.0f} seeds/s over "
                   f"{world} ranks, {nb} batches per rank), "
                   f"loss {tot_loss / max(tot_seeds, 1):.4f}, "
                   f"valid accuracy {acc:.4f}")
            print(msg, flush=True)
            if args.checkpoint_dir:
                save_checkpoint(args.checkpoint_dir, epoch, model, opt, args, world)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"epoch": epoch, "world_size": world, "seconds": max_dt,
                                        "seeds": tot_seeds, "loss": out["loss"][-1],
                                        "accuracy": acc, "device": device.type,
                                        "batch_size": args.batch_size,
                                        "fanouts": args.fanouts}) + "\n")
        if dist.is_initialized():
            dist.barrier()  # the checkpoint is whole before any rank goes on
    out["params"] = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
    return out


def _resume(args, model, opt, rank: int, world: int, device) -> int:
    """Load the newest checkpoint of ``--checkpoint-dir``; the epoch to start at."""
    if not args.checkpoint_dir:
        raise SystemExit("--resume needs --checkpoint-dir")
    path = latest_checkpoint(args.checkpoint_dir)
    if path is None:
        log.warning("no checkpoint in %s: starting at epoch 0", args.checkpoint_dir)
        return 0
    ck = torch.load(path, map_location=device, weights_only=True)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    start = int(ck["epoch"]) + 1
    if ck["config"].get("world_size") != world and rank == 0:
        log.warning("checkpoint %s was written with %s ranks, now %d: the seeds' shares per "
                    "rank change", path, ck["config"].get("world_size"), world)
    if rank == 0:
        log.info("resumed from %s: next epoch %d", path, start)
    return start


def _epoch(args, loader, ddp, opt, ntype, record_seeds):
    """One epoch of this rank's batches: (batches, seeds, summed loss, seed ids seen)."""
    seen, n_seeds, loss_sum, nb = [], 0, 0.0, 0
    for b in loader:
        if args.max_batches is not None and nb >= args.max_batches:
            break
        nb += 1
        seeds, y = seeds_and_labels(b, ntype)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(ddp, b, ntype, args.hidden), y)
        loss.backward()  # DDP all-reduces (averages) the gradients here
        opt.step()
        loss_sum += float(loss.detach()) * y.shape[0]
        n_seeds += int(y.shape[0])
        if record_seeds:
            seen.append(seeds.cpu().numpy().copy())
    return nb, n_seeds, loss_sum, seen


def _all_max(x: float, device) -> float:
    t = torch.tensor([x], dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    train(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
