"""``featurestore demo``: the main job end to end on a small synthetic MAG240M twin.

synth -> preprocess (bounded memory) -> open -> gather (:func:`run_demo`) -> one short
training epoch through the loader, printing each step's time and throughput
(:func:`format_report`). Callers that add steps append :class:`DemoStep` records to
``result.steps``. The training step sits above this package: it is found as an entry point of
the group :data:`TRAIN_GROUP` (``pyproject.toml``), a function
``train_steps(store_path, *, seed, batches)`` returning a list of dicts of
:class:`DemoStep`'s fields.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import entry_points

import numpy as np

__all__ = ["run_demo", "DemoStep", "DemoResult", "format_report", "register", "DEFAULT_SCALE",
           "TRAIN_GROUP"]

log = logging.getLogger(__name__)

#: 122k papers, 0.19 GB of features, 1.7M edges: seconds on a laptop.
DEFAULT_SCALE = 0.001
#: the entry-point group of the demo's training step
TRAIN_GROUP = "featurestore.demo_train"


@dataclass(frozen=True)
class DemoStep:
    """One step of the demo: what it did, how long, how fast (``unit=""``: no throughput)."""

    name: str
    seconds: float
    amount: float
    unit: str
    detail: str = ""

    @property
    def rate(self) -> float:
        """Amount per second."""
        return self.amount / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class DemoResult:
    """The store the demo built and its steps."""

    root: str
    store: str
    steps: list[DemoStep] = field(default_factory=list)


def run_demo(workdir: str | os.PathLike, scale: float = DEFAULT_SCALE, *, seed: int = 0,
             batches: int = 50, batch_size: int = 1024, memory: int = 1 << 30,
             derive_features: bool = True, progress: bool = False) -> DemoResult:
    """Synthesise MAG240M at ``scale`` in ``workdir``, preprocess it, open it, gather rows.

    Parameters
    ----------
    workdir
        Where the raw data (``workdir/raw``) and the store (``workdir/store``) go; an
        existing store there is replaced.
    scale
        Fraction of MAG240M's size.
    batches, batch_size
        Random paper-feature gathers timed at the end.
    memory
        Memory budget of the preprocessing job.
    derive_features
        Also build author and institution features (means), as the OGB baseline does.
    """
    from preprocess.ogb.mag240m import preprocess_mag240m
    import featurestore as fs

    from preprocess.synth.mag240m import MagSynthSpec, synth_mag240m

    workdir = os.fspath(workdir)
    raw, store = os.path.join(workdir, "raw"), os.path.join(workdir, "store")
    spec = MagSynthSpec.at_scale(scale)
    res = DemoResult(raw, store)
    raw_bytes = spec.feature_bytes + spec.num_edges * 16 + spec.paper * 16

    t = time.perf_counter()
    synth_mag240m(raw, scale, seed=seed, progress=progress)
    res.steps.append(DemoStep("synth", time.perf_counter() - t, raw_bytes / 1e6, "MB",
                              f"{spec.paper:,} papers, {spec.num_edges:,} edges"))

    t = time.perf_counter()
    job = preprocess_mag240m(raw, store, derive_features="mean" if derive_features else None,
                             budget_bytes=memory, force=True, progress=progress)
    dt = time.perf_counter() - t
    peak = max((st.peak_anon_bytes for st in job.steps), default=0)
    res.steps.append(DemoStep("preprocess", dt, spec.num_edges / 1e6, "M edges",
                              f"peak {peak / 2**20:.0f} MiB anonymous memory"))

    t = time.perf_counter()
    s = fs.open_store(store)
    indptr, indices = s.csc(("paper", "cites", "paper"))
    feats = s.features("paper", "feat")
    res.steps.append(DemoStep("open", time.perf_counter() - t, len(s.edge_types), "",
                              f"{len(s.edge_types)} edge types, {int(indptr[-1]):,} citation "
                              "edges memory-mapped"))

    rng = np.random.default_rng(seed)
    out = np.empty((batch_size,) + feats.shape[1:], feats.dtype)
    ids = [rng.integers(0, feats.shape[0], batch_size) for _ in range(batches)]
    feats.gather(ids[0][:8], out=out[:8])  # first call loads the compiled kernels
    t = time.perf_counter()
    for b in ids:
        feats.gather(b, out=out)
    dt = time.perf_counter() - t
    res.steps.append(DemoStep("gather", dt, batches * batch_size * feats.row_bytes / 1e6, "MB",
                              f"{batches} batches of {batch_size} random paper rows "
                              f"({batches * batch_size / dt:,.0f} rows/s)"))
    s.close()
    return res


def format_report(res: DemoResult) -> str:
    """A table: step, seconds, throughput, detail."""
    rows = [("step", "seconds", "throughput", "detail")]
    for st in res.steps:
        rate = f"{st.rate:,.1f} {st.unit}/s" if st.unit else ""  # no unit: not a throughput
        rows.append((st.name, f"{st.seconds:.2f}", rate, st.detail))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(k) for c, k in zip(r, w)).rstrip() for r in rows)


def _train_steps(store: str, *, seed: int, batches: int) -> list[DemoStep]:
    """The training step's records, from the entry point of :data:`TRAIN_GROUP`."""
    found = list(entry_points(group=TRAIN_GROUP))
    if not found:
        log.warning("no training step registered (entry-point group %s): skipped", TRAIN_GROUP)
        return []
    return [DemoStep(**rec) for ep in found
            for rec in ep.load()(store, seed=seed, batches=batches)]


def _cmd_demo(args) -> int:
    workdir = args.workdir or tempfile.mkdtemp(prefix="featurestore-demo-")
    os.makedirs(workdir, exist_ok=True)
    print(f"demo: synthetic MAG240M at scale {args.scale} in {workdir}")
    res = run_demo(workdir, args.scale, seed=args.seed, progress=not args.quiet)
    if not args.no_train:
        res.steps.extend(_train_steps(res.store, seed=args.seed, batches=args.train_batches))
    print(format_report(res))
    print(f"store: {res.store}  (try: featurestore info {res.store})")
    return 0


def register(sub) -> None:
    """Add ``demo`` to the ``featurestore`` command line."""
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
