"""The out-of-core mean (numba kernel, blocked) against the plain NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

from preprocess.ogb.derive import mean_blocks, mean_reference, plan_mean


def _csc(rng, num_dst, num_src, e, hub=True):
    dst = rng.integers(0, num_dst, e)
    if hub:
        dst[: e // 3] = 5  # one destination with a third of the edges: spans edge chunks
    dst[dst == 7] = 8  # destination 7 has no edges
    src = rng.integers(0, num_src, e)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_dst + 1, np.int64)
    np.add.at(indptr, dst + 1, 1)
    return np.cumsum(indptr), src[order].astype(np.int32)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_blocked_mean_matches_reference(dtype):
    rng = np.random.default_rng(0)
    num_dst, num_src, dim = 5000, 700, 24
    indptr, indices = _csc(rng, num_dst, num_src, 20000)
    x = rng.standard_normal((num_src, dim)).astype(dtype)
    budget = 1 << 20  # forces several destination blocks and edge chunks
    d_block, e_chunk = plan_mean(dim, budget)
    assert d_block < num_dst and e_chunk < indptr[6] - indptr[5]
    blocks = list(mean_blocks(indptr, indices, x, out_dtype=np.float32, budget_bytes=budget,
                              progress=False))
    assert len(blocks) > 1
    got = np.concatenate(blocks)
    want = mean_reference(indptr, indices, x, out_dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert not got[7].any()


def test_empty_graph_and_no_destinations():
    x = np.ones((3, 4), np.float16)
    got = np.concatenate(list(mean_blocks(np.zeros(4, np.int64), np.zeros(0, np.int32), x,
                                          progress=False)))
    assert got.shape == (3, 4) and not got.any()
    assert list(mean_blocks(np.zeros(1, np.int64), np.zeros(0, np.int32), x,
                            progress=False)) == []
