"""What memory (and how many cores) this process holds and may use: the one reader of
``/proc`` and the cgroup files for every package (the preprocess jobs' budgets, the loader's,
``featurestore plan``, the loader's thread count).

* :func:`rss_anon`: the process's anonymous resident memory (``RssAnon`` of
  ``/proc/self/status``), what ``../shared/tools/memcap`` reports as ``peak_anon``.
* :func:`cgroup_memory_limit`: the memory limit of the process's own cgroup (v2
  ``memory.max`` or v1 ``memory.limit_in_bytes``, the tightest of it and its ancestors), as in
  a container, a scheduler's job or under ``memcap``.
* :func:`available_memory`: what the process may still use: that limit (else a share of
  physical memory) less what it already holds.
* :func:`available_cpus`: the cores this process may run on: its CPU affinity, capped by
  its cgroup's CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``).
"""

from __future__ import annotations

import math
import os
import re

__all__ = ["rss_anon", "cgroup_memory_limit", "cgroup_mapped_file_bytes", "physical_memory",
           "available_memory", "cgroup_cpu_quota", "available_cpus", "PHYSICAL_SHARE"]

#: share of physical memory a process without a cgroup limit plans for
PHYSICAL_SHARE = 0.8
#: cgroup limits at or above this mean "no limit" (v1 writes ~2**63 at the root)
_NO_LIMIT = 1 << 60


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def rss_anon() -> int:
    """Anonymous memory this process holds now (``RssAnon``), 0 where ``/proc`` is missing."""
    m = re.search(r"^RssAnon:\s+(\d+) kB", _read("/proc/self/status") or "", re.M)
    return int(m.group(1)) * 1024 if m else 0


def _cgroups(proc_cgroup: str):
    """``(v1 controllers, path)`` of each line of ``proc_cgroup``; ``None`` for the
    controllers of the v2 (unified) line, ``0::/path``."""
    for line in (_read(proc_cgroup) or "").splitlines():
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        yield (None if hid == "0" and controllers == "" else controllers.split(",")), path


def _ancestors(base: str, rel: str) -> list[str]:
    """The cgroup directory ``base/rel`` and each of its parents up to ``base``."""
    parts = [p for p in rel.strip("/").split("/") if p]
    return [os.path.join(base, *parts[:k]) for k in range(len(parts), -1, -1)]


def _walk_limits(base: str, rel: str, name: str) -> int | None:
    """The smallest ``name`` limit from the cgroup directory ``base/rel`` up to ``base``."""
    best = None
    for d in _ancestors(base, rel):
        text = _read(os.path.join(d, name))
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
    """The memory limit of this process's cgroup (and its ancestors), or None when unlimited.

    Parameters
    ----------
    proc_cgroup, root
        The process's cgroup file and the cgroup mount (tests point them at a fake tree).
    """
    limits = []
    for controllers, path in _cgroups(proc_cgroup):
        if controllers is not None and "memory" in controllers:  # v1
            for base in (os.path.join(root, "memory"), root):
                if os.path.exists(os.path.join(base, "memory.limit_in_bytes")):
                    lim = _walk_limits(base, path, "memory.limit_in_bytes")
                    if lim is not None:
                        limits.append(lim)
                    break
        elif controllers is None:  # v2
            for base in (root, os.path.join(root, "unified")):
                if os.path.exists(os.path.join(base, "cgroup.controllers")):
                    lim = _walk_limits(base, path, "memory.max")
                    if lim is not None:
                        limits.append(lim)
                    break
    return min(limits) if limits else None


def physical_memory() -> int:
    """Bytes of physical memory of the machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cgroup_mapped_file_bytes(proc_cgroup: str = "/proc/self/cgroup",
                             root: str = "/sys/fs/cgroup") -> int:
    """File pages mapped by the processes of this cgroup and charged to it (code and data of
    the interpreter and its libraries, when they were first read here): the cap must keep
    room for them, or every page fault re-reads them."""
    for controllers, path in _cgroups(proc_cgroup):
        if controllers is not None and "memory" in controllers:
            stat, key = os.path.join(root, "memory", path.lstrip("/"), "memory.stat"), "mapped_file"
        elif controllers is None:
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
        return max(0, lim - rss_anon() - cgroup_mapped_file_bytes())
    return max(0, int(share * phys) - rss_anon())


def _quota(text: str | None, v2: bool, period_text: str | None = None) -> float | None:
    """Cores a cgroup's CPU quota allows (``None``: no quota, or unreadable)."""
    try:
        if v2:  # "max 100000" or "200000 100000"
            quota, _, period = (text or "").partition(" ")
        else:  # cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us
            quota, period = (text or ""), (period_text or "")
        if quota in ("", "max") or int(quota) <= 0 or int(period) <= 0:
            return None
        return int(quota) / int(period)
    except ValueError:
        return None


def cgroup_cpu_quota(proc_cgroup: str = "/proc/self/cgroup",
                     root: str = "/sys/fs/cgroup") -> float | None:
    """Cores the CPU quota of this process's cgroup (and its ancestors: the tightest) allows,
    as a fraction (``1.5``: 150 ms of CPU time per 100 ms), or ``None`` when there is none.

    Parameters
    ----------
    proc_cgroup, root
        The process's cgroup file and the cgroup mount (tests point them at a fake tree).
    """
    found = []
    for controllers, path in _cgroups(proc_cgroup):
        v1 = controllers is not None and "cpu" in controllers
        if not v1 and controllers is not None:
            continue
        bases = ([os.path.join(root, c) for c in ("cpu", "cpu,cpuacct", "cpuacct,cpu")] + [root]
                 if v1 else [root, os.path.join(root, "unified")])
        marker = "cpu.cfs_quota_us" if v1 else "cgroup.controllers"
        base = next((b for b in bases if os.path.exists(os.path.join(b, marker))), None)
        if base is None:
            continue
        for d in _ancestors(base, path):
            q = (_quota(_read(os.path.join(d, "cpu.cfs_quota_us")), False,
                        _read(os.path.join(d, "cpu.cfs_period_us"))) if v1
                 else _quota(_read(os.path.join(d, "cpu.max")), True))
            if q is not None:
                found.append(q)
    return min(found) if found else None


def available_cpus(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int:
    """Cores this process may keep busy: its CPU affinity (``os.sched_getaffinity``, else
    ``os.cpu_count()``), capped by its cgroup's CPU quota rounded up; at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = cgroup_cpu_quota(proc_cgroup, root)
    if quota is not None:
        n = min(n, math.ceil(quota))
    return max(1, n)
