"""Each numba kernel of preprocess against a plain NumPy twin."""

from __future__ import annotations

import numpy as np
import pytest

from preprocess.steps import kernels as K
from preprocess.steps.renumber import degree_rank


def _edges(seed, n_src=50, n_dst=40, e=2000):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_src, e), rng.integers(0, n_dst, e)


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("shift", [0, 2, 5])
def test_histogram_block(drop, shift):
    s, d = _edges(0, 40, 40)
    hist = np.zeros((40 >> shift) + 1, np.int64)
    assert K.histogram_block(s, d, 40, 40, shift, hist, drop) == -1
    keep = s != d if drop else np.ones(s.shape, bool)
    want = np.bincount(d[keep] >> shift, minlength=hist.shape[0])
    np.testing.assert_array_equal(hist, want)


def test_histogram_block_reports_first_bad_edge():
    s = np.array([0, 1, 5, 2])
    d = np.array([0, -1, 0, 9])
    hist = np.zeros(4, np.int64)
    assert K.histogram_block(s, d, 10, 3, 0, hist, False) == 1
    assert K.histogram_block(s[2:], d[2:], 4, 10, 0, hist, False) == 0


def _partition_reference(s, d, lo, hi, shift):
    sel = (d >= lo) & (d < hi)
    s, d = s[sel], d[sel]
    b = (d - lo) >> shift
    order = np.argsort(b, kind="stable")
    return s[order], ((d - lo) & ((1 << shift) - 1))[order], np.bincount(b, minlength=0)


@pytest.mark.parametrize("shift", [0, 1, 3])
def test_partition_then_finish_matches_lexsort(shift):
    s, d = _edges(1, 30, 64, 3000)
    lo, hi = 8, 57
    ts_ref, td_ref, _ = _partition_reference(s, d, lo, hi, shift)
    nb = -(-(hi - lo) >> shift) if shift else hi - lo
    nb = -(-(hi - lo) // (1 << shift))
    counts_b = np.bincount((d[(d >= lo) & (d < hi)] - lo) >> shift, minlength=nb)
    bstart = np.zeros(nb + 1, np.int64)
    np.cumsum(counts_b, out=bstart[1:])
    n = int(bstart[-1])
    ts = np.empty(n, np.int32)
    td = np.empty(n, np.uint16)
    K.partition_block(s, d, lo, hi, shift, bstart[:-1].copy(), ts, td, False)
    np.testing.assert_array_equal(ts, ts_ref)  # the partition is stable
    np.testing.assert_array_equal(td, td_ref)
    counts = np.zeros(hi - lo, np.int64)
    kept = np.empty(nb, np.int64)
    K.finish_buckets(ts, td, bstart, hi - lo, shift, True, False, counts, kept)
    sel = (d >= lo) & (d < hi)
    order = np.lexsort((s[sel], d[sel]))
    np.testing.assert_array_equal(ts, s[sel][order])
    np.testing.assert_array_equal(counts, np.bincount(d[sel] - lo, minlength=hi - lo))
    np.testing.assert_array_equal(kept, counts_b)


def test_finish_coalesce_and_pack():
    s, d = _edges(2, 6, 16, 500)  # few sources: many duplicates
    shift = 2
    nb = 4
    b = d >> shift
    order = np.argsort(b, kind="stable")
    ts = s[order].astype(np.int64)
    td = (d[order] & 3).astype(np.uint16)
    bstart = np.zeros(nb + 1, np.int64)
    np.cumsum(np.bincount(b, minlength=nb), out=bstart[1:])
    counts = np.zeros(16, np.int64)
    kept = np.empty(nb, np.int64)
    K.finish_buckets(ts, td, bstart, 16, shift, True, True, counts, kept)
    m = K.pack_buckets(ts, bstart, kept)
    pairs = np.unique(np.stack([d, s]), axis=1)  # sorted by (dst, src), distinct
    np.testing.assert_array_equal(ts[:m], pairs[1])
    np.testing.assert_array_equal(counts, np.bincount(pairs[0], minlength=16))


def test_plan_ranges_respects_limit():
    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 50, 200)
    sizes[17] = 500  # a bucket over the limit gets a range of its own
    cum = np.zeros(201, np.int64)
    np.cumsum(sizes, out=cum[1:])
    b = K.plan_ranges(cum, 6, 600)
    assert b[0] == 0 and b[-1] == 200 and np.all(np.diff(b) > 0)
    for lo, hi in zip(b[:-1], b[1:]):
        cost = (cum[hi] - cum[lo]) * 6
        assert cost <= 600 or hi - lo == 1
        if hi < 200:  # greedy: the next bucket would not have fitted
            assert (cum[hi + 1] - cum[lo]) * 6 > 600


def test_write_indptr():
    c = np.array([3, 0, 2], np.int64)
    out = np.empty(3, np.int64)
    assert K.write_indptr(c, 10, out) == 15
    np.testing.assert_array_equal(out, 10 + np.cumsum(c))


def test_degree_rank_is_stable_descending():
    rng = np.random.default_rng(4)
    deg = rng.integers(0, 6, 300)
    rank = degree_rank(deg)
    order = np.argsort(-deg, kind="stable")  # new -> old
    want = np.empty_like(order)
    want[order] = np.arange(order.shape[0])
    np.testing.assert_array_equal(rank, want)


def test_f32_to_f16_matches_numpy_bit_for_bit():
    from preprocess.steps.kernels import f32_to_f16

    rng = np.random.default_rng(7)
    scales = rng.choice(np.array([1e-9, 1e-7, 3e-5, 1e-2, 1, 1e3, 6.5e4, 1e6], np.float32), 200_000)
    vals = np.concatenate([
        rng.standard_normal(200_000).astype(np.float32) * scales,
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, -65520, 6.1e-5,
                  5.96e-8, 2.98e-8, 2.99e-8, 1e-45, 3e38], np.float32),
        np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32),  # all exps
    ])
    out = np.empty(vals.shape, np.float16)
    over = f32_to_f16(vals.view(np.uint32), out.view(np.uint16))
    with np.errstate(all="ignore"):
        want = vals.astype(np.float16)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))  # NaN payloads too
    assert over == int(np.isinf(want).sum() - np.isinf(vals).sum())
