"""The training step of ``featurestore demo``: a few mini-batches of a heterogeneous GraphSAGE
through the loader.

The demo (:mod:`preprocess.synth.demo`) sits below ``loaders`` and finds :func:`train_steps`
as an entry point (``pyproject.toml``, group ``featurestore.demo_train``).
"""

from __future__ import annotations

import time

import numpy as np


def train_steps(store_path: str, *, seed: int = 0, batches: int = 20, batch_size: int = 512,
                fanouts=(10, 5), hidden: int = 64) -> list:
    """Train ``batches`` mini-batches on ``paper`` labels; return the demo's step records.

    Each record is a dict of the fields of :class:`preprocess.synth.demo.DemoStep`
    (``name``, ``seconds``, ``amount``, ``unit``, ``detail``).
    """
    import torch
    from torch_geometric.nn import SAGEConv, to_hetero

    import featurestore as fs
    from loaders import NeighborLoader

    torch.manual_seed(seed)
    store = fs.open_store(store_path)
    classes = int(np.max(store.labels("paper"))) + 1
    loader = NeighborLoader(store, list(fanouts), ("paper", "train"), batch_size=batch_size,
                            shuffle=True, seed=seed, output="pyg", device="cpu")

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = SAGEConv((-1, -1), hidden)
            self.c2 = SAGEConv((-1, -1), classes)

        def forward(self, x, edge_index):
            return self.c2(self.c1(x, edge_index).relu(), edge_index)

    first = next(iter(loader))
    meta = (first.node_types, first.edge_types)
    model = to_hetero(SAGE(), meta, aggr="mean")
    with torch.no_grad():  # materialise the lazy layers
        model({t: first[t].x.float() for t in first.node_types}, first.edge_index_dict)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    seen = edges = 0
    losses = []
    wait = 0.0
    t0 = time.perf_counter()
    it = iter(loader)
    for _ in range(min(batches, len(loader))):
        tw = time.perf_counter()
        batch = next(it)
        wait += time.perf_counter() - tw
        x = {t: batch[t].x.float() for t in batch.node_types if "x" in batch[t]}
        out = model(x, batch.edge_index_dict)["paper"][:batch["paper"].batch_size]
        y = batch["paper"].y[:batch["paper"].batch_size]
        loss = torch.nn.functional.cross_entropy(out, y.clamp(min=0), ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        seen += batch["paper"].batch_size
        edges += sum(int(e.shape[1]) for e in batch.edge_index_dict.values())
    dt = time.perf_counter() - t0
    del it
    store.close()
    return [dict(name="train", seconds=dt, amount=seen, unit="seeds",
                 detail=f"{len(losses)} batches of hetero GraphSAGE {list(fanouts)}, "
                        f"{edges / dt:,.0f} sampled edges/s, "
                        f"loss {losses[0]:.2f} -> {losses[-1]:.2f}, "
                        f"{wait / dt:.0%} of the time waiting on data")]
