"""What every benchmark report shares: the machine, trial statistics, JSON, markdown, charts.

A report is a plain dict, written as JSON::

    {"benchmark": "sample", "machine": machine_info(), "options": {...}, "results": [...]}

Every result row keeps its individual trial times (``"trials"``) beside their median, so that a
reader can judge the spread. Charts are drawn with matplotlib (the ``bench`` extra) on the
non-interactive Agg backend; each has labelled axes with units.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from featurestore.errors import MissingDependencyError

__all__ = ["MissingDependencyError", "Timing", "machine_info", "timed_trials", "timed_loop",
           "has", "md_table", "write_json", "fmt_rate", "plot_lines", "plot_bars", "plot_stacked"]


def _version(mod: str) -> str | None:
    try:
        return importlib.metadata.version(mod)
    except importlib.metadata.PackageNotFoundError:
        return None


def _fio_version() -> str | None:
    if shutil.which("fio") is None:
        return None
    try:
        return subprocess.run(["fio", "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _proc(path: str, prefix: str) -> str | None:
    """The value of the first ``prefix`` line of a /proc file (None without one)."""
    try:
        with open(path) as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith(prefix)), None)
    except OSError:
        return None


def machine_info(path: str | None = None) -> dict:
    """The machine, the versions of every package a benchmark may touch, the load, and the
    file system of the directory ``path`` (the store's) when given."""
    import featurestore as fs

    mem = _proc("/proc/meminfo", "MemTotal:")
    info = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": platform.node(), "platform": platform.platform(),
            "cpu": _proc("/proc/cpuinfo", "model name") or platform.processor(),
            "cpus": os.cpu_count(),
            "mem_total_gib": round(int(mem.split()[0]) / 2**20, 1) if mem else None,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "featurestore": fs.__version__,
            "fio": _fio_version()}
    for mod in ("numpy", "numba", "zarr", "torch", "torch_geometric", "torch_sparse",
                "pyg_lib", "matplotlib"):
        info[mod] = _version(mod.replace("_", "-")) or _version(mod)
    if path is not None and os.path.isdir(path):
        st = os.statvfs(path)
        info.update(fs_free_gib=round(st.f_bavail * st.f_frsize / 2**30, 1),
                    fs_path=os.path.abspath(path))
    return info


@dataclass(frozen=True)
class Timing:
    """The wall times of repeated calls: every trial, their median and 95th percentile."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        """The median trial, seconds."""
        return statistics.median(self.times)

    @property
    def p95(self) -> float:
        """The 95th percentile of the trials, seconds (linear interpolation)."""
        return float(np.percentile(self.times, 95))


def timed_trials(fn: Callable[[Any], object], trials: int, warmup: int = 1,
                 setup: Callable[[], Any] | None = None,
                 teardown: Callable[[Any], object] | None = None,
                 before: Callable[[], object] | None = None, fresh: bool = False) -> Timing:
    """Time ``trials`` calls of ``fn(state)`` after ``warmup`` untimed ones.

    ``setup()`` makes the state (untimed; ``None`` without it) and ``teardown(state)`` ends it:
    once around all calls, or with ``fresh`` around each call, after ``before()`` (a cold
    trial: close everything, evict the pages, open afresh).
    """
    if trials < 1:
        raise ValueError(f"Expected trials >= 1. Got {trials} instead.")
    setup, teardown = setup or (lambda: None), teardown or (lambda st: None)
    st, times = (None if fresh else setup()), []
    try:
        for _ in range(warmup + trials):
            if fresh:
                if before is not None:
                    before()
                st = setup()
            t = time.perf_counter()
            fn(st)
            times.append(time.perf_counter() - t)
            if fresh:
                teardown(st)
                st = None
    finally:
        if not fresh:
            teardown(st)
    return Timing(tuple(times[warmup:]))


def timed_loop(step: Callable[[int], tuple[int, int] | None], limit: int,
               seconds: float = math.inf, warmup: int = 0) -> dict:
    """Call ``step(k)`` ``warmup`` times untimed, then up to ``limit`` times or ``seconds``.

    ``step`` makes one batch and returns its ``(seeds, edges)``, or ``None`` when the source is
    exhausted. Returns the batches timed, wall and CPU seconds, the seeds and edges, and the
    rates.
    """
    for k in range(warmup):
        if step(k) is None:
            break
    seeds = edges = k = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while k < limit and time.perf_counter() - t0 < seconds:
        x = step(warmup + k)
        if x is None:
            break
        seeds, edges, k = seeds + x[0], edges + x[1], k + 1
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"batches": k, "seconds": dt, "cpu_seconds": cpu, "seeds": seeds, "edges": edges,
            "batches_per_s": k / dt, "seeds_per_s": seeds / dt, "edges_per_s": edges / dt,
            "edges_per_batch": edges / max(k, 1), "cpu_ms_per_batch": 1e3 * cpu / max(k, 1)}


def has(mod: str) -> bool:
    """Whether ``mod`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False


def fmt_rate(x: float | None, unit: str = "") -> str:
    """``1234567 -> '1.23M'``: three significant digits with a k/M/G suffix."""
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return ""
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}{unit}"
    return f"{x:.3g}{unit}"


def md_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub markdown table; ``None`` cells print empty."""
    def cell(v):
        return "" if v is None else " ".join(str(v).split()).replace("|", "\\|")

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def write_json(report: dict, path: str) -> str:
    """Write ``report`` to ``path`` atomically (temporary name, then rename)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, default=_jsonable)
        f.write("\n")
    os.replace(tmp, path)
    return path


def _jsonable(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


# -- charts ----------------------------------------------------------------------------------
def _plt():
    try:
        import matplotlib
    except ImportError as e:
        raise MissingDependencyError(
            "Expected matplotlib for the charts (--plot). It is not installed: "
            "pip install 'graph-featurestore[bench]' (or pip install matplotlib).") from e

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_lines(path: str, panels: Sequence[dict], xlabel: str, ylabel: str, title: str,
               logx: bool = True, logy: bool = True, data_xticks: bool = True) -> str:
    """One chart with a panel per entry of ``panels``.

    Each panel is ``{"title": str, "series": [{"label", "x", "y", "style"?}]}``; ``style``
    is a matplotlib format string (``"--"`` for limits). ``data_xticks`` labels the x axis
    at the data's x values (``1k``, ``30k``) instead of powers of ten.
    """
    plt = _plt()
    from matplotlib.ticker import NullLocator

    n = max(1, len(panels))
    fig, axes = plt.subplots(1, n, figsize=(6.2 * n, 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for s in panel["series"]:
            if len(s["x"]) == 0:
                continue
            ax.plot(s["x"], s["y"], s.get("style", "-o"), label=s["label"], markersize=4,
                    linewidth=1.6 if s.get("style", "-o") != "--" else 1.2)
        if logx:
            ax.set_xscale("log")
        if data_xticks:
            xs = sorted({float(x) for s in panel["series"] if s.get("style") != "--"
                         for x in s["x"]})
            if xs:
                ax.set_xticks(xs, [fmt_rate(x) for x in xs])
                ax.xaxis.set_minor_locator(NullLocator())
        if logy:
            ax.set_yscale("log")
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best", framealpha=0.85)
    fig.suptitle(title, fontsize=11)
    return _save(plt, fig, path)


def plot_bars(path: str, labels: Sequence[str], groups: dict[str, Sequence[float | None]],
              ylabel: str, title: str, logy: bool = False) -> str:
    """Grouped bars: one group per label, one bar per key of ``groups`` (None: no bar)."""
    plt = _plt()
    k = max(1, len(groups))
    x = np.arange(len(labels))
    w = 0.8 / k
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(labels) * max(1, k / 2)), 4.6))
    for i, (name, vals) in enumerate(groups.items()):
        v = np.array([np.nan if y is None else y for y in vals], dtype=float)
        bars = ax.bar(x + (i - (k - 1) / 2) * w, np.nan_to_num(v), w, label=name)
        for b, y in zip(bars, v):
            if np.isfinite(y):
                ax.annotate(fmt_rate(y), (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, labels, fontsize=8)
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(textwrap.fill(title, 70), fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    if k > 1:
        ax.legend(fontsize=8)
    return _save(plt, fig, path)


def plot_stacked(path: str, bars: Sequence[tuple[str, dict[str, float]]], xlabel: str,
                 title: str) -> str:
    """Horizontal stacked bars: one ``(label, {stage: time})`` per bar (a missing stage: 0)."""
    plt = _plt()
    labels = [label for label, _ in bars]
    fig, ax = plt.subplots(figsize=(9.0, 1.6 + 0.6 * len(labels)))
    left = np.zeros(len(labels))
    for name in dict.fromkeys(k for _, stages in bars for k in stages):
        v = np.array([stages.get(name, 0.0) for _, stages in bars], dtype=float)
        ax.barh(labels, v, left=left, label=name)
        left += v
    for i, tot in enumerate(left):
        ax.annotate(f"{tot:.3g}", (tot, i), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=11)
    ax.invert_yaxis()
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="stage",
              title_fontsize=8)
    return _save(plt, fig, path)
