"""Distinct input nodes per batch and sampling time of layer-neighbour sampling (LABOR)
against uniform sampling, GraphBolt's and ours, on one homogeneous store (issue 19 item 5).

Run in the DGL environment (``.venv-dgl``; it imports the package too)::

    DGLBACKEND=pytorch .venv-dgl/bin/python -m benchmarks.peers.labor_peer \\
        bench-data/rmat22.store --fanouts 15,10,5 --batch-size 1024 --batches 20

GraphBolt: ``ItemSampler -> sample_neighbor | sample_layer_neighbor -> DataLoader`` (no
features), its input layer's ``num_src_nodes()``; ours: ``NeighborSampler(sampling=...)`` over
a resident topology, the batch's nodes. Seeds: the store's ``train`` split, 1024 at random per
batch. Prints one line per sampler and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store")
    p.add_argument("--fanouts", default="15,10,5", help="per hop from the seeds")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=20)
    a = p.parse_args(argv)
    import dgl.graphbolt as gb
    import torch

    import featurestore as fs
    from loaders.sample.sampler import NeighborSampler

    fan = [int(x) for x in a.fanouts.split(",")]
    out = {}
    with fs.open_store(a.store) as s:
        ip, ix = s.csc()
        graph = gb.fused_csc_sampling_graph(torch.from_numpy(np.asarray(ip, np.int64)),
                                            torch.from_numpy(np.asarray(ix, np.int64)))
        train = np.asarray(s.split("train"), np.int64)
        for name in ("sample_neighbor", "sample_layer_neighbor"):
            dp = gb.ItemSampler(gb.ItemSet(torch.from_numpy(train), names="seed_nodes"),
                                batch_size=a.batch_size, shuffle=True)
            dp = getattr(dp, name)(graph, [torch.LongTensor([f]) for f in reversed(fan)])
            it = iter(gb.DataLoader(dp, num_workers=0))
            t, rows = time.perf_counter(), []
            for _ in range(a.batches):
                rows.append(next(it).blocks[0].num_src_nodes())
            out[f"graphbolt {name}"] = (float(np.mean(rows)),
                                        (time.perf_counter() - t) / a.batches * 1e3)
        del graph
        for name in ("uniform", "labor"):
            smp = NeighborSampler(s, fan, topology="memory", sampling=name)
            smp.sample(train[:a.batch_size], s.node_types[0])  # compiled before timing
            rows, ts = [], []
            for b in range(a.batches):
                seeds = np.random.default_rng(b).choice(train, a.batch_size, replace=False)
                t = time.perf_counter()
                sub = smp.sample(seeds, s.node_types[0], seed=0, batch=b)
                ts.append(time.perf_counter() - t)
                rows.append(sub.node[s.node_types[0]].shape[0])
            out[f"ours {name}"] = (float(np.mean(rows)), float(np.mean(ts)) * 1e3)
    for k, (rows, ms) in out.items():
        print(f"{k:34s} distinct input nodes/batch {rows:11,.0f}  ms/batch {ms:7.1f}")
    print(json.dumps({k: {"distinct_rows": r, "ms_per_batch": m} for k, (r, m) in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
