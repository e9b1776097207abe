"""Numba kernels of the read path against plain NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from featurestore.rows import kernels as K
from featurestore.format.shard import ShardLayout
from featurestore.gather import LocalRows


def coalesce_reference(rows):
    if rows.size == 0:
        return [], [], []
    breaks = np.nonzero(np.diff(rows) != 1)[0] + 1
    pos = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [rows.size]))
    return rows[pos].tolist(), (ends - pos).tolist(), pos.tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 200), max_size=120))
def test_coalesce_runs_matches_numpy(values):
    rows = np.unique(np.array(values, np.int64))
    starts, lengths, pos = K.coalesce_runs(rows)
    assert (starts.tolist(), lengths.tolist(), pos.tolist()) == coalesce_reference(rows)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-2**40, 2**40), min_size=1, max_size=50))
def test_id_range(values):
    a = np.array(values, np.int64)
    assert K.id_range(a) == (a.min(), a.max())


@pytest.mark.parametrize("row_bytes", [1, 2, 6, 12, 1536])
@pytest.mark.parametrize("ids_dtype", [np.int64, np.int32, np.uint32])
def test_gather_rows_any_width(row_bytes, ids_dtype):
    rng = np.random.default_rng(0)
    src = rng.integers(0, 255, (300, row_bytes), dtype=np.uint8)
    ids = rng.integers(0, 300, 1000).astype(ids_dtype)
    for kernel in (K.gather_rows, K.gather_rows_serial):
        out = np.zeros((1000, row_bytes), np.uint8)
        kernel(src.ctypes.data, row_bytes, ids, out.ctypes.data)
        np.testing.assert_array_equal(out, src[ids])
    out = np.zeros((1000, row_bytes), np.uint8)
    K.copy_rows(src, ids, out)
    np.testing.assert_array_equal(out, src[ids])


def test_pread_and_residency(tmp_path):
    """pread of coalesced runs equals slicing; rows just read are reported resident."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4096, 96)).astype(np.float32)
    lay = ShardLayout(X.shape, np.dtype("<f4"), 512)
    path = tmp_path / "shard"
    with open(path, "wb") as f:
        f.write(X.tobytes())
        f.write(bytes(lay.data_bytes - X.nbytes))
        f.write(lay.index_blob())
    rows = LocalRows(str(path), lay, io_threads=4)
    ids = np.sort(rng.choice(4096, 900, replace=False))
    out = np.empty((900, 96), np.float32)
    assert rows.gather(ids, out, "pread") == "pread"
    np.testing.assert_array_equal(out, X[ids])
    rows.gather(np.arange(4096), np.empty_like(X), "mmap")
    assert rows.resident_share(ids) == 1.0
    rows.close()
