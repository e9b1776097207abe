"""The storage's own limits: sequential GB/s and random 4 KiB reads at queue depth 1 and 32.

Uses ``fio`` (direct I/O, so the page cache is bypassed) when it is installed, else a
built-in probe: threads issuing ``pread`` on an ``O_DIRECT`` descriptor.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import threading
import time

import numpy as np


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
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(iodepth)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
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
    first = rows * row_bytes // page
    last = (rows * row_bytes + row_bytes - 1) // page
    spans = last - first + 1
    # rows sharing a page: count each page once
    pages = np.unique(np.concatenate([first, last]))
    if np.all(spans <= 2):
        return int(pages.size)
    allp = np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)])
    return int(np.unique(allp).size)
