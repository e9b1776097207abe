"""``featurestore plan``: a front end to :func:`loaders.memory.plan.plan` with a device probe.

The probe (:func:`featurestore.device.probe_device`) measures the store's device; the plan is
the loader's own memory model. Added to the ``featurestore`` command line as an entry point
(``pyproject.toml``, group ``featurestore.commands``).
"""

from __future__ import annotations

import argparse
import json
import sys

from featurestore import open_store
from featurestore.argtypes import (auto_or_positive_int, fanout_list, nonnegative_float,
                                  positive_float, positive_int)

__all__ = ["register"]


def _cmd_plan(args) -> int:
    from loaders.memory.budget import parse_size  # as NeighborLoader(memory=) reads sizes: GB = GiB
    from loaders.memory.plan import parse_input, plan

    fanouts = [int(x) for x in args.fanouts.split(",") if x.strip()]
    memory = parse_size(args.memory) if args.memory else None
    with open_store(args.store) as s:
        inp = args.input if args.task == "link" else parse_input(s, args.input)
        iops, src = args.read_iops, "--read-iops"
        bps = args.read_gbps * 1e9 if args.read_gbps else None
        if iops is None and not args.no_probe:
            iops, probed, src = _probe_iops(args.store, args.probe_seconds)
            bps = bps or probed
        p = plan(s, inp, fanouts, batch_size=args.batch_size, memory=memory, read_iops=iops,
                 read_bps=bps,
                 read_iops_source=src, batches=args.batches, prefetch=args.prefetch,
                 batches_in_flight=args.batches_in_flight, device=args.device,
                 train_s=args.train_ms / 1e3, loop=args.loop,
                 staging_bytes=parse_size(args.staging_bytes),
                 seed=args.seed, feature=args.feature, ntype=args.ntype, task=args.task,
                 neg_sampling_ratio=args.neg_sampling_ratio, sampling=args.sampling,
                 output=args.output, dtype=None if args.dtype == "store" else args.dtype,
                 interpreter_bytes=parse_size(args.interpreter) if args.interpreter else None)
    if args.json:
        json.dump(p.as_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(p.table())
    return 0


def _probe_iops(store: str, seconds: float) -> tuple[float | None, float | None, str]:
    """Random 4 KiB reads/s at queue depth 32 and the sequential rate (bytes/s) on the
    store's device, read through the store's largest file with the page cache bypassed
    (nothing is written)."""
    import os

    from featurestore.device import MIN_PROBE_MIB, probe_device

    best, size = None, -1
    for d, _, names in os.walk(store):
        for n in names:
            p = os.path.join(d, n)
            s = os.path.getsize(p) if os.path.isfile(p) else -1
            if s > size:
                best, size = p, s
    if best is None or size < MIN_PROBE_MIB << 20:
        sys.stderr.write(f"{store}: no file of {MIN_PROBE_MIB} MiB to probe the device "
                         "through; pass --read-iops for the device bound\n")
        return None, None, "none"
    d = probe_device(best, seconds=seconds, size_mib=MIN_PROBE_MIB)
    sys.stderr.write(f"measured {d['randread_4k_qd32_iops']:,.0f} random 4 KiB reads/s at "
                     f"queue depth 32 and {d['seq_read_GBps']:.2f} GB/s sequential "
                     f"({d['tool']}, {seconds:g} s per probe); pass --read-iops and "
                     "--read-gbps to skip the probe\n")
    return (float(d["randread_4k_qd32_iops"]), float(d["seq_read_GBps"]) * 1e9,
            f"measured ({d['tool']}, QD32)")


def register(sub) -> None:
    """Add ``plan`` to the ``featurestore`` parser."""
    p = sub.add_parser(
        "plan", help="capacity plan of a loader on a store: rows and bytes per batch, memory, "
        "cache hit rate, reads per batch and the seeds/s (link: edges/s) bound",
        description="Samples batches as NeighborLoader(shuffle=True) would (no feature read) "
        "and prints what the loader needs and achieves: distinct rows and bytes per batch, rows "
        "touched per epoch, the memory plan, the static cache's hit rate at --memory, reads per "
        "batch after the cache and the seeds/s bound at the device's random-read rate.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("store", help="store path")
    p.add_argument("--task", choices=("node", "link"), default="node",
                   help="node: NeighborLoader batches of seed nodes; link: LinkNeighborLoader "
                   "batches of positive seed edges with binary negatives (rates in edges/s)")
    p.add_argument("--input", default="train", help="seeds: TYPE:SPLIT, or SPLIT; with --task "
                   "link an edge split ([REL:]SPLIT), else the edges into node split SPLIT, or "
                   "'all' (every edge)")
    p.add_argument("--neg-sampling-ratio", type=positive_float, default=1.0,
                   help="binary negatives per positive edge (--task link)")
    p.add_argument("--fanouts", default="15,10,5", type=fanout_list,
                   help="per hop from the seeds")
    p.add_argument("--batch-size", type=positive_int, default=1024)
    p.add_argument("--sampling", choices=("uniform", "labor"), default="uniform",
                   help="the loader's sampling= (labor: layer-neighbour sampling)")
    p.add_argument("--memory", help="memory the loader's process may use (e.g. 16GiB; "
                   "default: the cgroup limit, else the memory available)")
    p.add_argument("--read-iops", type=float,
                   help="the device's random 4 KiB reads/s at queue depth 32 (default: probe it "
                   "for --probe-seconds; `featurestore bench device` measures it too)")
    p.add_argument("--read-gbps", type=float, default=None,
                   help="the device's sequential read rate in GB/s (O_DIRECT): each read's "
                   "bytes cost this on top of the read (default: probed with --read-iops)")
    p.add_argument("--probe-seconds", type=float, default=2.0, help="seconds per device probe")
    p.add_argument("--no-probe", action="store_true", help="no device probe: no I/O bound")
    p.add_argument("--batches", type=int, help="batches sampled per epoch (default: the "
                   "whole epoch up to 64 batches, else 64)")
    p.add_argument("--prefetch", type=int, default=2, help="the loader's prefetch")
    p.add_argument("--batches-in-flight", type=auto_or_positive_int, default="auto",
                   help="the loader's batches_in_flight (feature buffers on the CPU); auto: "
                   "the layout with the most predicted seeds/s at --memory (with --device "
                   "cuda: the staging buffer size)")
    p.add_argument("--train-ms", type=nonnegative_float, default=0.0,
                   help="the training step's milliseconds per batch, which a gather overlaps "
                   "with two or more batch buffers (0: the loader's own rate)")
    p.add_argument("--loop", choices=("holds", "drops"), default="holds",
                   help="what the training loop does with a batch when it asks for the next: "
                   "holds it (for batch in loader: ...), so one batch buffer cannot serve it; "
                   "or drops it first (del batch)")
    p.add_argument("--staging-bytes", default="64MiB",
                   help="each pinned staging buffer with --device cuda (the loader's "
                   "staging_bytes; also compared: 16, 64 and 256 MiB)")
    p.add_argument("--device", default="cpu",
                   help="where batches go: cpu, or cuda (pinned staging, no CPU batch buffers)")
    p.add_argument("--output", choices=("raw", "pyg", "dgl"), default="raw",
                   help="the loader's output= (with --dtype auto, fp16 rows are float32 in "
                   "pyg and dgl batches: twice the CPU batch buffers)")
    p.add_argument("--dtype", choices=("auto", "store", "float16", "float32", "float64"),
                   default="auto", help="the loader's dtype= for the batch buffers "
                   "(store: dtype=None, the store's)")
    p.add_argument("--interpreter",
                   help="memory counted for the interpreter (default: what this process holds "
                        "after importing loaders and torch, as a training process would)")
    p.add_argument("--ntype", help="node type whose rows are cached (default: the featured one)")
    p.add_argument("--feature", default="feat")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_plan)
