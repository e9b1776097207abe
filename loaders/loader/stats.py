"""What a loader measured: seconds per stage, the training loop's wait, cache counters."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LoaderStats"]


@dataclass
class LoaderStats:
    """Seconds each stage spent working, and the training loop spent waiting, since reset.

    ``gather`` includes, with a CUDA device, issuing the copies and waiting for staging
    buffers to come free.

    ``wait`` is the time the training loop blocked in ``next()``: the share of a training
    step spent waiting on data is ``wait / (time of the loop)``.

    With a memory budget whose features do not fit (``loader.plan.fits`` false), rows come
    through the feature cache: ``hits`` (rows served by the hot tier), ``misses`` (rows read
    from the store), ``reads`` (I/O requests issued for them, after merging neighbouring rows)
    and ``bytes_read``. ``overflows`` counts batch buffers made past the plan because the
    training loop held every planned one while asking for the next batch; ``past_plan_bytes``
    the largest buffer made past the plan (for a batch with more distinct rows than the plan
    measured, plus its headroom: a buffer of its own, freed with the batch), and
    ``past_plan_batches`` how many batches needed one.

    With a CUDA device, ``h2d_bytes`` counts the feature bytes copied host to device; with a
    GPU tier (``gpu_cache_bytes=``), ``gpu_hits``/``gpu_misses`` count rows it served or
    passed down, and ``gpu_saved_bytes`` the copies its hits saved.
    """

    batches: int = 0
    sample: float = 0.0
    gather: float = 0.0
    wait: float = 0.0
    hits: int = 0
    misses: int = 0
    reads: int = 0
    bytes_read: int = 0
    overflows: int = 0
    past_plan_bytes: int = 0
    past_plan_batches: int = 0
    h2d_bytes: int = 0
    gpu_hits: int = 0
    gpu_misses: int = 0
    gpu_saved_bytes: int = 0

    def reset(self) -> None:
        """Zero every counter and time."""
        self.batches, self.sample, self.gather, self.wait = 0, 0.0, 0.0, 0.0
        self.hits = self.misses = self.reads = self.bytes_read = self.overflows = 0
        self.past_plan_bytes = self.past_plan_batches = 0
        self.h2d_bytes = self.gpu_hits = self.gpu_misses = self.gpu_saved_bytes = 0

    @property
    def gpu_hit_rate(self) -> float:
        """Rows served by the GPU tier over rows looked up in it."""
        return self.gpu_hits / max(self.gpu_hits + self.gpu_misses, 1)

    def per_batch_ms(self) -> dict[str, float]:
        """Milliseconds per batch of each stage and of the loop's wait."""
        n = max(self.batches, 1)
        return {k: round(1e3 * getattr(self, k) / n, 2)
                for k in ("sample", "gather", "wait")}

    @property
    def hit_rate(self) -> float:
        """Rows served by the hot tier over rows gathered through the cache."""
        return self.hits / max(self.hits + self.misses, 1)

    def per_batch(self) -> dict[str, float]:
        """Stage milliseconds and cache counters per batch, and the hit rate."""
        n = max(self.batches, 1)
        out = self.per_batch_ms()
        out.update(hits=round(self.hits / n), misses=round(self.misses / n),
                   reads=round(self.reads / n), mb_read=round(self.bytes_read / n / 1e6, 2),
                   hit_rate=round(self.hit_rate, 4))
        return out
