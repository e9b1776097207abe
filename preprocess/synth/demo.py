"""The demo pipeline: synthetic MAG240M -> store -> open -> random feature gathers.

``featurestore demo`` runs :func:`run_demo` and prints :func:`format_report`; callers that add
steps (a training epoch) append :class:`DemoStep` records to ``result.steps``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["run_demo", "DemoStep", "DemoResult", "format_report", "DEFAULT_SCALE"]

log = logging.getLogger(__name__)

#: 122k papers, 0.19 GB of features, 1.7M edges: seconds on a laptop.
DEFAULT_SCALE = 0.001


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
