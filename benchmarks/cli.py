"""``featurestore bench ...`` and ``featurestore demo``."""

from __future__ import annotations

import argparse


def _gather(args) -> int:
    from . import gather_bench

    return gather_bench.main_args(args)


def _device(args) -> int:
    from .device import device_limits

    d = device_limits(args.file, seconds=args.seconds)
    print(f"{d['tool']}: sequential {d['seq_read_GBps']:.2f} GB/s; random 4 KiB: "
          f"{d['randread_4k_qd1_iops']:,.0f} IOPS at QD1, {d['randread_4k_qd32_iops']:,.0f} at QD32")
    return 0


def register(sub) -> None:
    bench = sub.add_parser("bench", help="throughput benchmarks (storage, gathers, loaders)")
    bsub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    from . import gather_bench

    p = bsub.add_parser("gather", help="random row gathers vs np.memmap and zarr, warm and cold",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    gather_bench.add_arguments(p)
    p.set_defaults(func=_gather)
    p = bsub.add_parser("device", help="the storage's sequential and random-read limits")
    p.add_argument("file", help="an existing file of at least 64 MiB on the device to probe")
    p.add_argument("--seconds", type=float, default=5.0)
    p.set_defaults(func=_device)
