"""``featurestore demo``: the main job end to end on a small synthetic MAG240M twin.

synth -> preprocess (bounded memory) -> open -> gather -> (one short training epoch through
the loader), printing each step's time and throughput.
"""

from __future__ import annotations

import os
import tempfile


def _cmd_demo(args) -> int:
    from preprocess.synth.demo import format_report, run_demo

    workdir = args.workdir or tempfile.mkdtemp(prefix="featurestore-demo-")
    os.makedirs(workdir, exist_ok=True)
    print(f"demo: synthetic MAG240M at scale {args.scale} in {workdir}")
    res = run_demo(workdir, args.scale, seed=args.seed, progress=not args.quiet)
    if not args.no_train:
        from benchmarks.demo_train import train_steps

        res.steps.extend(train_steps(res.store, seed=args.seed, batches=args.train_batches))
    print(format_report(res))
    print(f"store: {res.store}  (try: featurestore info {res.store})")
    return 0


def register(sub) -> None:
    """Add ``demo`` to the ``featurestore`` command line."""
    from preprocess.synth.demo import DEFAULT_SCALE

    p = sub.add_parser("demo", help="synth -> preprocess -> open -> gather -> train, on a small "
                                    "synthetic MAG240M twin")
    p.add_argument("--workdir", help="where raw data and the store go (default: a new temp dir)")
    p.add_argument("--scale", type=float, default=DEFAULT_SCALE,
                   help="fraction of MAG240M's size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-batches", type=int, default=20,
                   help="mini-batches in the short training epoch")
    p.add_argument("--no-train", action="store_true", help="skip the training epoch")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)
