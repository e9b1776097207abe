"""The storage device's own limits: sequential GB/s and random 4 KiB reads at queue depth 1 and 32.

Uses ``fio`` (direct I/O, so the page cache is bypassed) when it is installed, else a
built-in probe: threads issuing ``pread`` on an ``O_DIRECT`` descriptor. :func:`probe_device`
probes a file, a store or any directory; ``featurestore plan`` uses it for the random-read
bound and ``featurestore bench device`` reports it. :func:`evict` drops a file's pages from
the page cache, for cold measurements.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from featurestore.errors import StoreNotFoundError

__all__ = ["MIN_PROBE_MIB", "device_limits", "probe_device", "evict", "pages_touched"]

#: smallest file the device is probed through (1 MiB sequential reads need room).
MIN_PROBE_MIB = 4


def _fio(path: str, rw: str, bs: str, iodepth: int, seconds: float, size: int) -> dict:
    cmd = ["fio", "--name=probe", f"--filename={path}", "--readonly", f"--rw={rw}", f"--bs={bs}",
           "--direct=1", "--ioengine=libaio", f"--iodepth={iodepth}", f"--runtime={seconds}",
           "--time_based", f"--size={size}", "--output-format=json", "--numjobs=1"]
    res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r = res["jobs"][0]["read"]
    return {"iops": r["iops"], "bytes_per_s": r["bw_bytes"], "tool": "fio"}


def _probe(path: str, rw: str, bs: int, iodepth: int, seconds: float, size: int) -> dict:
    """Threaded pread on O_DIRECT: ``iodepth`` threads each with one read in flight."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    blocks = max(1, size // bs)
    counts = [0] * iodepth
    stop = time.perf_counter() + seconds

    def worker(k):
        buf = mmap.mmap(-1, bs)  # page-aligned, as O_DIRECT requires
        rng = np.random.default_rng(k)
        pos = k * (blocks // iodepth)
        while time.perf_counter() < stop:
            if rw == "randread":
                offs = rng.integers(0, blocks, 256) * bs
            else:
                offs = ((pos + np.arange(256)) % blocks) * bs
                pos += 256
            for off in offs.tolist():
                os.preadv(fd, [buf], off)
            counts[k] += 256
        buf.close()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(iodepth) as ex:
        list(ex.map(worker, range(iodepth)))
    dt = time.perf_counter() - t0
    os.close(fd)
    n = sum(counts)
    return {"iops": n / dt, "bytes_per_s": n * bs / dt, "tool": "pread-probe"}


def device_limits(path: str, seconds: float = 5.0, use_fio: bool | None = None) -> dict:
    """Measure the device under ``path`` (an existing file of at least 64 MiB, read only).

    Returns ``{"seq_read_GBps", "randread_4k_qd1_iops", "randread_4k_qd32_iops", "tool"}``.
    """
    size = os.path.getsize(path) // 4096 * 4096
    if use_fio is None:
        use_fio = shutil.which("fio") is not None
    run = _fio if use_fio else _probe
    seq = run(path, "read", "1M" if use_fio else 1 << 20, 8 if use_fio else 2, seconds, size)
    qd1 = run(path, "randread", "4k" if use_fio else 4096, 1, seconds, size)
    qd32 = run(path, "randread", "4k" if use_fio else 4096, 32, seconds, size)
    return {"path": path, "tool": seq["tool"], "seq_read_GBps": seq["bytes_per_s"] / 1e9,
            "randread_4k_qd1_iops": qd1["iops"], "randread_4k_qd32_iops": qd32["iops"]}


def evict(path: str) -> None:
    """Drop a file's pages from the page cache (only pages no live mapping holds)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def pages_touched(ids: np.ndarray, row_bytes: int, page: int = 4096) -> int:
    """Distinct pages that rows ``ids`` of an array at offset 0 span."""
    rows = np.unique(ids).astype(np.int64)
    first, last = rows * row_bytes // page, (rows * row_bytes + row_bytes - 1) // page
    # sorted rows of one size: each row's span starts past the pages its predecessor counted
    prev = np.concatenate([[-1], last[:-1]])
    return int(np.maximum(0, last - np.maximum(first, prev + 1) + 1).sum())


def _probe_file(target: str, size_mib: int) -> tuple[str, str | None]:
    """The largest file under ``target`` of ``size_mib`` MiB, else a temporary one written
    there; ``(path, the temporary file or None)``."""
    if os.path.isfile(target):
        if os.path.getsize(target) >= MIN_PROBE_MIB << 20:
            return target, None
        target = os.path.dirname(os.path.abspath(target))  # too small: probe beside it
    if not os.path.isdir(target):
        raise StoreNotFoundError(f"Expected a file, store or directory to probe at {target}. "
                                 f"It does not exist.")
    sizes = ((os.path.getsize(p), p) for d, _, names in os.walk(target)
             for p in (os.path.join(d, n) for n in names) if os.path.isfile(p))
    size, best = max(sizes, default=(-1, None))
    if best is not None and size >= size_mib << 20:
        return best, None
    fd, tmp = tempfile.mkstemp(prefix=".fs-device-probe-", dir=target)
    block = os.urandom(1 << 20)
    with os.fdopen(fd, "wb") as f:
        for _ in range(size_mib):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    return tmp, tmp


def probe_device(target: str, seconds: float = 5.0, size_mib: int = 1024,
                 fio: bool = True) -> dict:
    """The device's limits under ``target``: :func:`device_limits` of a file found or made there.

    A store or directory is probed through its largest file when that holds at least
    ``size_mib`` MiB, else through a temporary file of that size written there (then removed);
    reads bypass the page cache (``O_DIRECT``), so the file's own cached pages do not count.

    Returns
    -------
    dict
        :func:`device_limits`' keys and ``target``, ``probe_file``, ``probe_file_bytes``,
        ``seconds`` (whole seconds with fio) and ``size_mib`` (at least :data:`MIN_PROBE_MIB`).
    """
    size_mib = max(size_mib, MIN_PROBE_MIB)
    use_fio = fio and shutil.which("fio") is not None
    seconds = max(1, round(seconds)) if use_fio else seconds  # fio takes whole seconds
    probe, tmp = _probe_file(target, size_mib)
    try:
        d = device_limits(probe, seconds=seconds, use_fio=use_fio)
    finally:
        if tmp:
            os.remove(tmp)
    d["target"] = os.path.abspath(target)
    d["probe_file"] = "(a temporary file)" if tmp else probe
    d["probe_file_bytes"] = size_mib << 20 if tmp else os.path.getsize(probe)
    d["seconds"], d["size_mib"] = seconds, size_mib
    return d
