"""Memory budgets and measurement.

A budget is what a job may hold in anonymous memory (NumPy buffers, numba scratch); file
pages reached through memory maps are page cache, which the kernel reclaims, and are not
counted. :class:`PeakMemory` samples the process's anonymous resident memory (``RssAnon``,
:func:`featurestore.sysmem.rss_anon`), the figure ``../shared/tools/memcap`` reports as
``peak_anon``. Sizes are read by :func:`featurestore.units.parse_size` (re-exported here): every
unit is binary, ``"2GB" == "2GiB"``.
"""

from __future__ import annotations

import os
import threading

from featurestore.sysmem import rss_anon as anon_bytes
from featurestore.units import format_size, parse_size

__all__ = ["parse_size", "format_size", "PeakMemory", "anon_bytes", "free_disk_bytes"]


def free_disk_bytes(path: str | os.PathLike) -> int:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent)."""
    p = os.path.abspath(os.fspath(path))
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


class PeakMemory:
    """Samples ``RssAnon`` every ``interval`` seconds in a thread; ``peak`` is the largest seen.

    Use as a context manager around the work to measure. ``peak`` counts from the start of
    the process's current anonymous memory, so subtract :attr:`start` for what the work added.
    """

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.start = anon_bytes()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            v = anon_bytes()
            if v > self.peak:
                self.peak = v

    def __enter__(self) -> PeakMemory:
        self.start = anon_bytes()
        self.peak = self.start
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, anon_bytes())

    @property
    def added(self) -> int:
        """Peak anonymous memory above the level at entry."""
        return max(0, self.peak - self.start)
