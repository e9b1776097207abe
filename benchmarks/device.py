"""``bench device``: the storage's own limits, sequential GB/s and random 4 KiB reads at queue
depth 1 and 32, as a benchmark report.

The probe itself (fio, else ``pread`` on ``O_DIRECT``) is :mod:`featurestore.device`, which
``featurestore plan`` uses too; its names stay importable from here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from featurestore.device import MIN_PROBE_MIB, device_limits, evict, pages_touched, probe_device

from benchmarks.options import opt

__all__ = ["DeviceOptions", "run", "MIN_PROBE_MIB", "device_limits", "evict", "pages_touched"]


@dataclass(frozen=True)
class DeviceOptions:
    """The storage's sequential and random 4 KiB read limits (fio or pread)."""

    target: str = opt(".", "a file, a store or a directory on the device to probe",
                      positional=True)
    seconds: float = opt(5.0, "seconds per probe")
    size_mib: int = opt(1024, "size of the temporary probe file when no file that large is there")
    fio: bool = opt(True, "use fio when installed (else the built-in pread probe)")


def run(o: DeviceOptions) -> dict:
    """The device's limits under ``o.target``: the ``device`` report.

    A store or directory is probed through its largest file when that holds at least
    ``size_mib`` MiB, else through a temporary file of that size written there (then removed);
    reads bypass the page cache (``O_DIRECT``), so the file's own cached pages do not count.
    """
    from benchmarks.report import machine_info

    d = probe_device(o.target, seconds=o.seconds, size_mib=o.size_mib, fio=o.fio)
    seconds, size_mib = d.pop("seconds"), d.pop("size_mib")
    return {"benchmark": "device", "machine": machine_info(os.path.dirname(d["path"])),
            "options": {"target": o.target, "seconds": seconds, "size_mib": size_mib,
                        "tool": d["tool"]}, "results": {os.path.abspath(o.target): d}}
