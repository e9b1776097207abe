"""Host buffer pool and staging ring."""

from __future__ import annotations

import torch

from loaders.loader.buffers import BufferPool, StagingRing


def test_pool_reuses_only_free_buffers_and_drops_outgrown_ones():
    pool = BufferPool(torch.float32, (3,), pin=False, max_buffers=4)
    a = pool.take(2000)
    a.fill_(1.0)
    b = pool.take(2000)  # a is held: a second buffer
    assert a.data_ptr() != b.data_ptr() and pool.allocations == 2
    b.fill_(2.0)  # free buffers holding different values must not be compared by value
    del b
    c = pool.take(1500)  # b's buffer is free and big enough: reused
    assert pool.allocations == 2
    del c
    d = pool.take(10_000)  # outgrows every free buffer: they are dropped, a new one made
    assert pool.allocations == 3 and len(pool._bufs) == 2  # a's (held) and d's
    assert torch.all(a == 1.0)  # the held batch was never touched
    del d


def test_staging_ring_views_and_growth():
    ring = StagingRing(1000, pin=False)
    x = ring.next(10, torch.float16, (4,))
    assert x.shape == (10, 4) and x.dtype == torch.float16
    y = ring.next(10, torch.float16, (4,))
    assert x.data_ptr() != y.data_ptr()  # two slots in turn
    z = ring.next(1, torch.float32, (1000,))  # one row larger than a chunk: buffers grow
    assert z.shape == (1, 1000)


def test_a_batch_past_the_planned_rows_gets_a_buffer_of_its_own():
    """With planned rows, a larger batch gets a buffer made for it alone: the pool keeps its
    planned buffers at their size (a grown one would stay past the plan) and reuses them."""
    import torch

    from loaders.loader.buffers import BufferPool

    pool = BufferPool(torch.float32, (4,), pin=False, max_buffers=1, rows=10)
    a = pool.take(8)
    base = a.untyped_storage().data_ptr()
    assert a.untyped_storage().nbytes() == 10 * 4 * 4
    del a
    big = pool.take(25)  # past the plan
    assert big.shape == (25, 4) and big.untyped_storage().data_ptr() != base
    del big
    again = pool.take(9)  # the planned buffer, not a grown one
    assert again.untyped_storage().data_ptr() == base
    assert again.untyped_storage().nbytes() == 10 * 4 * 4
    assert [b.shape[0] for b in pool._bufs] == [10]
