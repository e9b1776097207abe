"""The loader's memory budget: what the process may use, and a plan of every byte in it.

:func:`available_memory` is the memory limit of the process's own cgroup (v2 ``memory.max``
or v1 ``memory.limit_in_bytes``, the tightest of it and its ancestors) when there is one, as
in a container, a scheduler's job or under ``memcap``; else a share of physical memory. What
the process already holds (``RssAnon``: the interpreter, torch, numba) is taken off.

:func:`plan_loader` spends a budget: the topology (copied into the process when the
features do not fit, so feature reads cannot evict it), the batch buffers times the batches
in flight, the sampler's working memory, the reader's scratch, a safety margin, and whatever
is left for the feature cache. When the features fit whole, no cache is planned: the page
cache serves them, as it does without a budget.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from loaders.errors import LoaderArgumentError

__all__ = ["parse_size", "cgroup_memory_limit", "process_anon_bytes", "available_memory",
           "LoaderPlan", "plan_loader", "format_bytes", "limit_allocator_slack",
           "resident_indptr_dtype"]

#: share of physical memory a process without a cgroup limit plans for
PHYSICAL_SHARE = 0.8
#: the plan keeps this share of the budget (at least MARGIN_MIN) unspent: allocator slack,
#: the interpreter's growth, the pages of mapped code and libraries
MARGIN_SHARE = 0.03
MARGIN_MIN = 32 << 20
#: a batch buffer holds this many times the most distinct rows seen in the sampled batches
ROWS_HEADROOM = 1.05
_NO_LIMIT = 1 << 60

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DEC = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_size(size) -> int:
    """Bytes of ``size``: an int, or text like ``"1.5GiB"``, ``"512M"``, ``"2G"``, ``"3GB"``.

    ``K/M/G/T``, ``KiB/MiB/GiB/TiB``: powers of 1024; ``KB/MB/GB/TB``: powers of 1000.
    """
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        if size < 0:
            raise LoaderArgumentError(f"Expected a memory size >= 0. Got {size!r} instead.")
        return int(size)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)(i?)([bB]?)\s*", str(size))
    if not m:
        raise LoaderArgumentError(f"Expected a memory size such as 1.5GiB, 512M or 2000000000. "
                         f"Got {size!r} instead.")
    num, unit, i, b = m.groups()
    unit = unit.lower()
    mult = _DEC[unit] if (unit and b and not i) else _UNITS[unit]
    return int(float(num) * mult)


def format_bytes(n: float) -> str:
    """Bytes as text with a binary unit (``1.5 GiB``)."""
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= k:
            return f"{n / k:.2f} {unit}"
    return f"{int(n)} B"


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _walk_limits(base: str, rel: str, name: str) -> int | None:
    """The smallest ``name`` limit from the cgroup directory ``base/rel`` up to ``base``."""
    best = None
    parts = [p for p in rel.strip("/").split("/") if p]
    for k in range(len(parts), -1, -1):
        text = _read(os.path.join(base, *parts[:k], name))
        if text is None or text == "max":
            continue
        try:
            v = int(text)
        except ValueError:
            continue
        if v < _NO_LIMIT:
            best = v if best is None else min(best, v)
    return best


def cgroup_memory_limit(proc_cgroup: str = "/proc/self/cgroup",
                        root: str = "/sys/fs/cgroup") -> int | None:
    """The memory limit of this process's cgroup (and its ancestors), or None when unlimited."""
    text = _read(proc_cgroup)
    if not text:
        return None
    limits = []
    for line in text.splitlines():
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):  # v1
            for base in (os.path.join(root, "memory"), root):
                if os.path.exists(os.path.join(base, "memory.limit_in_bytes")):
                    lim = _walk_limits(base, path, "memory.limit_in_bytes")
                    if lim is not None:
                        limits.append(lim)
                    break
        elif hid == "0" and controllers == "":  # v2
            for base in (root, os.path.join(root, "unified")):
                if os.path.exists(os.path.join(base, "cgroup.controllers")):
                    lim = _walk_limits(base, path, "memory.max")
                    if lim is not None:
                        limits.append(lim)
                    break
    return min(limits) if limits else None


def _status_kb(key: str) -> int:
    text = _read("/proc/self/status") or ""
    m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else 0


def process_anon_bytes() -> int:
    """Anonymous memory this process holds now (``RssAnon``)."""
    return _status_kb("RssAnon")


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cgroup_mapped_file_bytes(proc_cgroup: str = "/proc/self/cgroup",
                             root: str = "/sys/fs/cgroup") -> int:
    """File pages mapped by the processes of this cgroup and charged to it (code and data of
    the interpreter and its libraries, when they were first read here): the cap must keep
    room for them, or every page fault re-reads them."""
    text = _read(proc_cgroup) or ""
    for line in text.splitlines():
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            stat, key = os.path.join(root, "memory", path.lstrip("/"), "memory.stat"), "mapped_file"
        elif hid == "0" and controllers == "":
            stat, key = os.path.join(root, path.lstrip("/"), "memory.stat"), "file_mapped"
        else:
            continue
        m = re.search(rf"^{key} (\d+)$", _read(stat) or "", re.M)
        if m:
            return int(m.group(1))
    return 0


def available_memory(share: float = PHYSICAL_SHARE) -> int:
    """Bytes this process may still use: its cgroup's limit (else ``share`` of physical
    memory) less what it already holds (anonymous memory, and the mapped file pages charged
    to its cgroup)."""
    phys = physical_memory()
    lim = cgroup_memory_limit()
    if lim is not None and lim < phys:
        return max(0, lim - process_anon_bytes() - cgroup_mapped_file_bytes())
    return max(0, int(share * phys) - process_anon_bytes())


_SLACK_LIMITED = False


def limit_allocator_slack(mmap_threshold: int = 1 << 20, arenas: int = 2) -> bool:
    """Keep glibc's allocator from holding freed memory (process-wide, once).

    glibc raises its mmap threshold each time a large block is freed, after which blocks of
    that size come from per-thread arenas and stay there when freed: a loader that allocates
    and frees ~100 MB of id arrays per batch on a dozen threads then grew by ~10 MB per
    epoch here, until a capped process had no page cache left. A fixed threshold (blocks from
    1 MiB up are mapped and unmapped) and two arenas keep it flat. No-op off glibc."""
    global _SLACK_LIMITED
    if _SLACK_LIMITED:
        return True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(-3, int(mmap_threshold)) == 1  # M_MMAP_THRESHOLD
        libc.mallopt(-8, int(arenas))  # M_ARENA_MAX
    except (OSError, AttributeError):
        return False
    _SLACK_LIMITED = ok
    return ok


@dataclass
class LoaderPlan:
    """Where a :class:`~loaders.NeighborLoader`'s memory goes (bytes unless said otherwise).

    ``print(loader.plan)`` shows it as a table; :meth:`as_dict` as JSON-ready data.
    """

    budget: int
    budget_source: str
    feature_bytes: int
    topology: str  # "memory" (resident copy) or "mmap"
    topology_bytes: int
    batch_rows: dict[str, int]
    batch_bytes: int
    batches_in_flight: int
    sampler_bytes: int
    reader_bytes: int
    margin: int
    cache_rows: dict[str, int] = field(default_factory=dict)
    cache_bytes: int = 0
    cache_policy: str | None = None
    read_path: str = "auto"
    fits: bool = True
    sampled_batches: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the planned batch buffers."""
        return self.batch_bytes * self.batches_in_flight

    @property
    def planned_bytes(self) -> int:
        """Every byte the plan holds (the resident topology, not a memory-mapped one)."""
        topo = self.topology_bytes if self.topology == "memory" else 0
        return (topo + self.buffer_bytes + self.sampler_bytes + self.reader_bytes
                + self.cache_bytes + self.margin)

    def as_dict(self) -> dict:
        """The plan as a JSON-ready dict."""
        d = asdict(self)
        d.update(buffer_bytes=self.buffer_bytes, planned_bytes=self.planned_bytes)
        return d

    def table(self) -> str:
        """The plan as a text table (what ``print(loader.plan)`` shows)."""
        f = format_bytes
        topo = "resident copy" if self.topology == "memory" else "memory-mapped (page cache)"
        rows = [
            ("budget", f(self.budget), self.budget_source),
            ("features on disk", f(self.feature_bytes),
             "fit: served by the page cache" if self.fits else "do not fit: cached + read"),
            ("topology", f(self.topology_bytes), topo),
            ("batch buffers", f(self.buffer_bytes),
             f"{self.batches_in_flight} x {f(self.batch_bytes)} "
             f"({', '.join(f'{t}: {n:,} rows' for t, n in self.batch_rows.items())})"),
            ("sampler", f(self.sampler_bytes), "subgraphs in flight, id maps"),
            ("reader scratch", f(self.reader_bytes), f"read path {self.read_path}"),
            ("feature cache", f(self.cache_bytes),
             (f"{self.cache_policy}: " + ", ".join(f"{t}: {n:,} rows"
                                                   for t, n in self.cache_rows.items()))
             if self.cache_rows else "none"),
            ("safety margin", f(self.margin), ""),
            ("planned total", f(self.planned_bytes), ""),
        ]
        w = max(len(r[0]) for r in rows)
        lines = [f"{a:<{w}}  {b:>11}  {c}".rstrip() for a, b, c in rows]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def plan_loader(*, budget: int, budget_source: str, feature_row_bytes: dict[str, int],
                feature_rows: dict[str, int], topology_bytes: int, batch_rows: dict[str, int],
                edges_per_batch: int, num_nodes: dict[str, int], batches_in_flight: int = 2,
                subgraphs_in_flight: int = 4, io_threads: int = 32, scratch_bytes: int = 0,
                topology: str | None = None, cache: str | None = "presample",
                sampled_batches: int = 0,
                batch_row_bytes: dict[str, int] | None = None) -> LoaderPlan:
    """Spend ``budget`` bytes (see the module doc). All arithmetic is here, on plain numbers:

    * batch bytes = sum over types of ``ceil(ROWS_HEADROOM * batch_rows[t]) * row_bytes[t]``,
      ``row_bytes`` being ``batch_row_bytes`` when batches hold another dtype than the store
      (the loader's ``dtype=``: an fp16 store's rows are twice as wide in an fp32 batch);
    * sampler = ``subgraphs_in_flight * (edges * 40 + rows * 8)`` (sampled edges as
      ``row, col, edge`` int64 plus the PyG/DGL edge tensors; node ids) plus the sampling
      thread's dense id maps (``4 * num_nodes`` per type);
    * reader = ``scratch_bytes`` (the reader threads' aligned scratch);
    * margin = ``max(MARGIN_MIN, MARGIN_SHARE * budget)``;
    * features fit when ``feature bytes + topology + the rest <= budget`` (then no cache and
      the topology as asked, memory-mapped by default); else the topology is resident
      (unless ``topology="mmap"`` is asked) and the cache gets what is left, split across
      types in proportion to their batch bytes.
    """
    batch_rows = {t: int(math.ceil(ROWS_HEADROOM * n)) for t, n in batch_rows.items()}
    brb = batch_row_bytes or feature_row_bytes
    batch_bytes = sum(n * brb[t] for t, n in batch_rows.items())
    rows_total = sum(batch_rows.values())
    sampler = (subgraphs_in_flight * (edges_per_batch * 40 + rows_total * 8)
               + 4 * sum(num_nodes.values()))
    margin = max(MARGIN_MIN, int(MARGIN_SHARE * budget))
    feature_bytes = sum(feature_row_bytes[t] * feature_rows[t] for t in feature_row_bytes)
    base = batch_bytes * batches_in_flight + sampler + scratch_bytes + margin
    plan = LoaderPlan(budget=budget, budget_source=budget_source, feature_bytes=feature_bytes,
                      topology=topology or "mmap", topology_bytes=topology_bytes,
                      batch_rows=batch_rows, batch_bytes=batch_bytes,
                      batches_in_flight=batches_in_flight, sampler_bytes=sampler,
                      reader_bytes=scratch_bytes, margin=margin, sampled_batches=sampled_batches)
    if feature_bytes + topology_bytes + base <= budget or cache is None:
        plan.fits = feature_bytes + topology_bytes + base <= budget
        if not plan.fits:
            plan.notes.append("the features do not fit and cache=None: every row is read "
                              "from the store")
            plan.read_path = "direct"
            plan.topology = topology or "memory"
        return plan
    plan.fits = False
    plan.topology = topology or "memory"
    plan.read_path = "direct"
    plan.cache_policy = cache
    left = budget - base - (topology_bytes if plan.topology == "memory" else 0)
    if left <= 0:
        plan.notes.append(f"over budget by {format_bytes(-left)} before any cache: lower "
                          "batch_size or fanouts, or raise the memory budget")
        return plan
    share = {t: batch_rows[t] * feature_row_bytes[t] for t in batch_rows if t in feature_row_bytes}
    tot = sum(share.values()) or 1
    for t, b in share.items():
        pos_map = 4 * feature_rows[t]  # the int32 position map
        n = max(0, (left * b // tot - pos_map) // feature_row_bytes[t])
        n = int(min(n, feature_rows[t]))
        if n:
            plan.cache_rows[t] = n
            plan.cache_bytes += n * feature_row_bytes[t] + pos_map
    return plan


def resident_indptr_dtype(indptr) -> np.dtype:
    """The dtype the loader holds a resident CSC ``indptr`` in: int32 when every offset fits
    (half the bytes), else its own."""
    fits = indptr.shape[0] == 0 or int(indptr[-1]) < 2**31 - 1
    return np.dtype(np.int32) if fits and indptr.dtype.itemsize > 4 else indptr.dtype
