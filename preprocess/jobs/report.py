"""What a job prints: the table of its steps after a run, and its plan for ``--dry-run``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from preprocess.steps.memory import format_size

__all__ = ["summary_table", "plan_table"]


def summary_table(steps: Sequence, seconds: float, budget_bytes: int) -> str:
    """A table of the steps (:class:`~preprocess.jobs.job.Step`): status, seconds, edges/s,
    GB/s, peak anonymous memory; then the total time and the budget."""
    rows = [("step", "status", "seconds", "edges/s", "GB/s", "peak mem")]
    for st in steps:
        s = st.stats or {}
        eps = s.get("edges_per_s")
        gbs = s.get("gb_per_s")
        rows.append((st.name, st.status, f"{st.seconds:.1f}",
                     f"{eps / 1e6:.2f}M" if eps else "",
                     f"{gbs:.2f}" if gbs else "",
                     format_size(st.peak_anon_bytes) if st.peak_anon_bytes else ""))
    return _table(rows) + f"\ntotal {seconds:.1f} s (budget {format_size(budget_bytes)})"


def plan_table(steps: Sequence, done: Callable[[str], bool], free: int | None,
               budget_bytes: int) -> str:
    """Each step with its declared plan (``done(name)``: finished before), then the disk the
    steps still to run need against ``free`` (None: unknown) and the memory budget."""
    rows = [("step", "status", "plan")]
    for st in steps:
        info = ", ".join(f"{k}={_fmt(k, v)}" for k, v in st.plan.items())
        rows.append((st.name, "done" if done(st.name) else "todo", info))
    need = sum(int(st.plan.get("disk_bytes", 0)) for st in steps if not done(st.name))
    tail = (f"\ndisk needed ~{format_size(need)}"
            + (f", free {format_size(free)}" if free is not None else "")
            + f"; memory budget {format_size(budget_bytes)}")
    return _table(rows) + tail


def _fmt(key: str, v) -> str:
    if isinstance(v, int) and key.endswith("bytes"):
        return format_size(v)
    return str(v)


def _table(rows: list[tuple]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
