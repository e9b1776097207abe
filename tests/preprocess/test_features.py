"""Feature chunking: casts, permutations (direct and external), parquet columns, errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import featurestore as fs
from preprocess.errors import BadInputError
from preprocess.steps.features import FeatureSource, write_features, write_values


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 6)).astype(np.float32)
    x[3, 2] = 1e6  # overflows fp16
    np.save(tmp_path / "x.npy", x)
    return x, rng.permutation(1000)


def _writer(tmp_path, n=1000):
    w = fs.create_store(tmp_path / "s")
    w.add_node_type("n", n)
    return w


@pytest.mark.parametrize("budget", [1 << 30, 20_000])  # direct gather / external buckets
def test_cast_and_permute(tmp_path, data, budget):
    x, perm = data
    w = _writer(tmp_path)
    st = write_features(w, "n", "a", FeatureSource.from_npy(tmp_path / "x.npy"),
                        dtype=np.float16, progress=False)
    write_features(w, "n", "b", FeatureSource.from_npy(tmp_path / "x.npy"), dtype=np.float16,
                   perm=perm, budget_bytes=budget, tmpdir=str(tmp_path / "tmp"), progress=False)
    w.commit()
    s = fs.open_store(tmp_path / "s")
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s.features("n", "a").numpy(), x.astype(np.float16))
        np.testing.assert_array_equal(s.features("n", "b").numpy(), x[perm].astype(np.float16))
    assert st["overflow"] == 1 and st["bytes_read"] == x.nbytes
    assert not (tmp_path / "tmp").exists() or not any((tmp_path / "tmp").iterdir())


def test_parquet_columns(tmp_path, data):
    x, perm = data
    pq.write_table(pa.table({
        "fixed": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 6),
        "listed": pa.array([list(r) for r in x]),
        "c0": x[:, 0], "c1": x[:, 1],
    }), tmp_path / "f.parquet", row_group_size=300)
    w = _writer(tmp_path)
    for name, cols in (("fixed", "fixed"), ("listed", "listed"), ("cols", ["c0", "c1"])):
        write_features(w, "n", name, FeatureSource.from_parquet(tmp_path / "f.parquet", cols),
                       perm=perm, budget_bytes=30_000, progress=False)
    w.commit()
    s = fs.open_store(tmp_path / "s")
    np.testing.assert_array_equal(s.features("n", "fixed").numpy(), x[perm])
    np.testing.assert_array_equal(s.features("n", "listed").numpy(), x[perm])
    np.testing.assert_array_equal(s.features("n", "cols").numpy(), x[perm][:, :2])


def test_feature_errors(tmp_path, data):
    x, _ = data
    w = _writer(tmp_path, n=999)
    with pytest.raises(BadInputError, match="Expected 999 feature rows.*x.npy. Got 1000"):
        write_features(w, "n", "a", FeatureSource.from_npy(tmp_path / "x.npy"), progress=False)
    pq.write_table(pa.table({"l": pa.array([[1.0, 2.0], [3.0]] + [[0.0, 0.0]] * 997)}),
                   tmp_path / "ragged.parquet")
    with pytest.raises(BadInputError,
                       match="lists of 2 values in .*ragged.parquet.*Got 1 at row 1"):
        write_features(w, "n", "r", FeatureSource.from_parquet(tmp_path / "ragged.parquet", "l"),
                       progress=False)
    with pytest.raises(BadInputError, match="truncate"):
        w2 = _writer(tmp_path / "b")
        write_features(w2, "n", "i", FeatureSource.from_npy(tmp_path / "x.npy"), dtype=np.int8,
                       progress=False)


def test_values_and_float_labels(tmp_path, data):
    _, perm = data
    lab = np.arange(1000, dtype=np.float64) % 7
    lab[::5] = np.nan
    np.save(tmp_path / "l.npy", lab)
    w = _writer(tmp_path)
    write_values(w, "n", "label", FeatureSource.from_npy(tmp_path / "l.npy"), perm=perm)
    write_values(w, "n", "year", FeatureSource.from_array(np.arange(1000)))
    w.commit()
    s = fs.open_store(tmp_path / "s")
    want = np.where(np.isnan(lab), -1, lab).astype(np.int64)[perm]
    np.testing.assert_array_equal(s.labels("n"), want)
    np.testing.assert_array_equal(s.values("n", "year"), np.arange(1000))
