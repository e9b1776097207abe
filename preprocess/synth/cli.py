"""``featurestore synth mag240m|papers100m ROOT --scale S``."""

from __future__ import annotations

import argparse
import time


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "synth", help="write a synthetic OGB-LSC dataset in its official layout",
        description="Write a synthetic twin of MAG240M or ogbn-papers100M, in the exact layout "
                    "of the official download, streamed (a scale larger than RAM works).")
    sub = p.add_subparsers(dest="dataset", metavar="DATASET", required=True)
    for name, helptext in (("mag240m", "ROOT/mag240m_kddcup2021 (meta.pt, split_dict.pt, processed/)"),
                           ("papers100m", "ROOT/ogbn_papers100M (raw/data.npz, raw/node-label.npz, split/time/)")):
        q = sub.add_parser(name, help=helptext, description=f"Write {helptext}.")
        q.add_argument("root", metavar="ROOT", help="directory to write the dataset folder into")
        q.add_argument("--scale", type=float, default=0.001,
                       help="fraction of the true sizes; 1 = full size (default 0.001)")
        q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        q.add_argument("--labeled-share", type=float, default=None,
                       help="share of nodes with a label (default: as in the true data)")
        q.add_argument("--no-progress", action="store_true", help="no progress bars")
        if name == "papers100m":
            q.add_argument("--compress", action="store_true",
                           help="deflate the .npz members like the official files")
        q.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from . import synth_mag240m, synth_papers100m

    kw = dict(seed=args.seed, progress=not args.no_progress)
    if args.labeled_share is not None:
        kw["labeled_share"] = args.labeled_share
    t = time.perf_counter()
    if args.dataset == "mag240m":
        paths = synth_mag240m(args.root, args.scale, **kw)
    else:
        paths = synth_papers100m(args.root, args.scale, compress=args.compress, **kw)
    print(f"wrote {paths.root} in {time.perf_counter() - t:.1f} s")
    return 0
