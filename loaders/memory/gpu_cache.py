"""The GPU tier of the feature cache: the hottest rows resident in device memory.

It sits above the host tiers (:mod:`loaders.memory.cache`) and has the same lookup: a position
per id, ``-1`` for a miss. A batch's rows are split on the host by one numba pass over a
position map (``int32``, one entry per node, host memory); the hits are copied device to
device out of the resident rows, the misses are filled from the host tiers and copied to the
device as before, so the bytes crossing the host-to-device link shrink by the hit share.
Batches are the same rows in the same order with or without the tier.

Which rows: the first ``K`` of the loader's own ranking (presampled access counts, degree
breaking ties), ``K = gpu_cache_bytes // row_bytes``. The tier works on any torch device; on a
CPU it is only a test double of the CUDA path.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import numba
import numpy as np
import torch

__all__ = ["GpuTier", "GpuTierStats", "gpu_tier_rows"]


@numba.njit(nogil=True, cache=True)
def _split(ids, pos, hit_at, hit_slot, miss_at):
    """Positions of the hits and their slots, positions of the misses; returns their counts."""
    nh = 0
    nm = 0
    for i in range(ids.shape[0]):
        p = pos[ids[i]]
        if p >= 0:
            hit_at[nh] = i
            hit_slot[nh] = p
            nh += 1
        else:
            miss_at[nm] = i
            nm += 1
    return nh, nm


def gpu_tier_rows(gpu_cache_bytes: int, row_bytes: int, num_rows: int) -> int:
    """Rows a budget of ``gpu_cache_bytes`` holds (0 when the budget is 0)."""
    if gpu_cache_bytes < 0:
        raise ValueError(f"Expected gpu_cache_bytes >= 0. Got {gpu_cache_bytes} instead.")
    return int(min(num_rows, gpu_cache_bytes // max(1, row_bytes)))


@dataclass
class GpuTierStats:
    """Hits and misses of the GPU tier, and the host-to-device bytes the hits saved."""

    hits: int = 0
    misses: int = 0
    saved_bytes: int = 0

    def reset(self) -> None:
        """Zero the counters."""
        self.hits = self.misses = self.saved_bytes = 0

    @property
    def hit_rate(self) -> float:
        """Hits over lookups (0.0 before any)."""
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


class GpuTier:
    """Rows ``rows`` (store ids, hottest first) of one feature, resident on ``device``.

    Parameters
    ----------
    num_rows
        Rows of the feature (the position map has one entry each).
    rows
        Store ids to hold, in slot order; unique, in ``[0, num_rows)``.
    fill
        ``fill(ids, out)`` writes the rows ``ids`` into the host tensor ``out`` (the loader's
        host gather, cache included): the tier is filled through it once, in chunks.
    row_shape, dtype
        Shape of one row and the torch dtype the rows are held in (hits are cast to the
        batch's dtype, on the device, as they are copied out).
    device
        Where the rows live (``"cuda"``; any torch device works).
    chunk_rows
        Rows per host staging chunk while filling.
    """

    def __init__(self, num_rows: int, rows: np.ndarray, fill: Callable, row_shape: tuple,
                 dtype: torch.dtype, device, *, chunk_rows: int = 1 << 16):
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= num_rows):
            raise IndexError(f"Expected GPU tier rows in [0, {num_rows}). Got "
                             f"[{rows.min()}, {rows.max()}] instead.")
        self.device = torch.device(device)
        self.row_shape = tuple(row_shape)
        self.pos = np.full(num_rows, -1, dtype=np.int32)
        self.pos[rows] = np.arange(rows.size, dtype=np.int32)
        if np.count_nonzero(self.pos >= 0) != rows.size:
            raise ValueError("Expected unique GPU tier rows. Got repeated ids instead.")
        self.data = torch.empty((rows.size,) + self.row_shape, dtype=dtype, device=self.device)
        self.row_bytes = int(self.data[:1].nbytes) if rows.size else 0
        self.stats = GpuTierStats()
        pin = self.device.type == "cuda"
        step = max(1, int(chunk_rows))
        host = torch.empty((min(step, max(1, rows.size)),) + self.row_shape, dtype=dtype,
                           pin_memory=pin)
        for lo in range(0, rows.size, step):
            hi = min(rows.size, lo + step)
            buf = host[:hi - lo]
            fill(rows[lo:hi], buf)
            self.data[lo:hi].copy_(buf)  # synchronous: the staging chunk is reused next
        self._scratch = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.data.shape[0])

    @property
    def nbytes(self) -> int:
        """Device bytes of the resident rows."""
        return int(self.data.nbytes)

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Slot of each id in the tier, ``-1`` for a miss (the host tiers' interface)."""
        return self.pos[np.asarray(ids, dtype=np.int64)]

    def split(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(hit_at, hit_slot, miss_at)``: batch positions of the hits, their slots, and the
        batch positions of the misses (ids must be validated, in range)."""
        n = ids.shape[0]
        if self._scratch.shape[0] < 3 * n:
            self._scratch = np.empty(3 * n, dtype=np.int64)
        s = self._scratch
        nh, nm = _split(ids, self.pos, s[:n], s[n:2 * n], s[2 * n:3 * n])
        self.stats.hits += nh
        self.stats.misses += nm
        self.stats.saved_bytes += nh * self.row_bytes
        return s[:nh].copy(), s[n:n + nh].copy(), s[2 * n:2 * n + nm].copy()

    def gather(self, ids: np.ndarray, out: torch.Tensor, fill_misses: Callable) -> None:
        """Rows ``ids`` into the device tensor ``out``: hits from the tier, misses through
        ``fill_misses(miss_ids, miss_out)`` (a device tensor of their rows, filled as the loader
        fills a batch), then scattered to their positions."""
        hit_at, hit_slot, miss_at = self.split(ids)
        dev = out.device
        if miss_at.size == ids.shape[0]:  # nothing resident: the plain path, no scatter
            fill_misses(ids, out)
            return
        if miss_at.size:
            miss = torch.empty((miss_at.size,) + self.row_shape, dtype=out.dtype, device=dev)
            fill_misses(ids[miss_at], miss)
            out.index_copy_(0, torch.from_numpy(miss_at).to(dev, non_blocking=True), miss)
        if hit_at.size:
            slot = torch.from_numpy(hit_slot).to(dev, non_blocking=True)
            out.index_copy_(0, torch.from_numpy(hit_at).to(dev, non_blocking=True),
                            self.data.index_select(0, slot).to(out.dtype))

    def close(self) -> None:
        """Release the device memory."""
        self.data = self.data[:0]
