"""Edge sources: every format, blocks, and clear errors naming the file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from preprocess import (concat, from_arrays, from_csv, from_npy, from_npy_pair, from_parquet,
                        open_edges)
from preprocess.errors import BadInputError, InputNotFoundError


def _all(source, block=None):
    parts = list(source.iter_blocks(block))
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    s, d = zip(*parts)
    for a in s + d:
        assert a.dtype == np.int64
    return np.concatenate(s), np.concatenate(d)


S = np.array([0, 5, 2, 9, 9, 1, 3], np.int64)
D = np.array([1, 1, 4, 0, 9, 2, 8], np.int64)


def test_npy_layouts_and_pair(tmp_path):
    np.save(tmp_path / "e2.npy", np.stack([S, D]).astype(np.int32))
    np.save(tmp_path / "ee.npy", np.stack([S, D], axis=1))
    np.save(tmp_path / "s.npy", S)
    np.save(tmp_path / "d.npy", D.astype(np.uint16))
    for src in (from_npy(tmp_path / "e2.npy"), from_npy(tmp_path / "ee.npy"),
                from_npy_pair(tmp_path / "s.npy", tmp_path / "d.npy")):
        assert src.num_edges == 7
        for block in (1, 3, None):
            s, d = _all(src, block)
            np.testing.assert_array_equal(s, S)
            np.testing.assert_array_equal(d, D)
        s, d = _all(src.reversed())
        np.testing.assert_array_equal(s, D)


def test_parquet_csv_and_concat(tmp_path):
    pq.write_table(pa.table({"a": S, "b": D, "x": D}), tmp_path / "e.parquet", row_group_size=3)
    pcsv.write_csv(pa.table({"a": S, "b": D}), tmp_path / "e.csv")
    with open(tmp_path / "e.tsv", "w") as f:
        f.write("".join(f"{a}\t{b}\n" for a, b in zip(S, D)))
    srcs = [from_parquet(tmp_path / "e.parquet", "a", "b"), from_csv(tmp_path / "e.csv", "a", "b"),
            open_edges(tmp_path / "e.tsv", 0, 1, header=False)]
    assert srcs[0].num_edges == 7 and srcs[1].num_edges is None
    assert srcs[1].count_edges() == 7
    for src in srcs:
        s, d = _all(src, 2)
        np.testing.assert_array_equal(s, S)
        np.testing.assert_array_equal(d, D)
    c = concat(srcs[0], from_arrays(D, S))
    assert c.num_edges == 14 and len(c.parts()) == 2
    s, d = _all(c)
    np.testing.assert_array_equal(s, np.concatenate([S, D]))
    assert [p.name for p in c.reversed().parts()] == [p.name for p in c.parts()]


def test_missing_file():
    with pytest.raises(InputNotFoundError, match="nope.npy"):
        from_npy("/nonexistent/nope.npy")
    with pytest.raises(FileNotFoundError):  # the built-in class catches it too
        from_parquet("/nonexistent/x.parquet")


def test_truncated_npy_names_the_file(tmp_path):
    np.save(tmp_path / "e.npy", np.stack([S, D]))
    raw = (tmp_path / "e.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-20])
    with pytest.raises(BadInputError, match="t.npy.*truncated"):
        from_npy(tmp_path / "t.npy")
    (tmp_path / "junk.npy").write_bytes(b"not an npy file at all")
    with pytest.raises(BadInputError, match="junk.npy"):
        from_npy(tmp_path / "junk.npy")


def test_bad_shapes_and_lengths(tmp_path):
    np.save(tmp_path / "three.npy", np.zeros((3, 5), np.int64))
    with pytest.raises(BadInputError, match=r"three.npy. Got shape \(3, 5\)"):
        from_npy(tmp_path / "three.npy")
    np.save(tmp_path / "s.npy", S)
    np.save(tmp_path / "d.npy", D[:5])
    with pytest.raises(BadInputError, match="as many source as destination ids.*7 and 5"):
        from_npy_pair(tmp_path / "s.npy", tmp_path / "d.npy")


@pytest.mark.parametrize("values,msg", [
    (np.array([0.0, np.nan, 2.0]), "Got NaN at edge 1"),
    (np.array([0.0, 1.5, 2.0]), "Got 1.5 at edge 1"),
    (np.array([0.0, 1.0, 2.0]), "integer dtype"),
    (np.array(["a", "b", "c"]), "dtype <U1"),
])
def test_wrong_dtypes(tmp_path, values, msg):
    np.save(tmp_path / "s.npy", values)
    np.save(tmp_path / "d.npy", np.arange(3))
    with pytest.raises(BadInputError, match=f"s.npy.*{msg}|{msg}"):
        _all(from_npy_pair(tmp_path / "s.npy", tmp_path / "d.npy"))


def test_nulls_and_strings_in_parquet(tmp_path):
    pq.write_table(pa.table({"src": pa.array([0, None, 2]), "dst": [1, 2, 3]}),
                   tmp_path / "n.parquet")
    with pytest.raises(BadInputError, match="n.parquet. Got 1 null"):
        _all(from_parquet(tmp_path / "n.parquet"))
    pq.write_table(pa.table({"src": ["a", "b"], "dst": ["c", "d"]}), tmp_path / "s.parquet")
    with pytest.raises(BadInputError, match="s.parquet. Got string.*renumbering"):
        _all(from_parquet(tmp_path / "s.parquet"))
    with pytest.raises(BadInputError, match="column 'nope'"):
        from_parquet(tmp_path / "s.parquet", "nope", "dst")


def test_ragged_csv(tmp_path):
    (tmp_path / "r.csv").write_text("src,dst\n0,1\n2\n")
    with pytest.raises(BadInputError, match="r.csv"):
        _all(from_csv(tmp_path / "r.csv", "src", "dst"))


def test_truncated_parquet_names_the_file(tmp_path):
    pq.write_table(pa.table({"src": S, "dst": D}), tmp_path / "e.parquet")
    raw = (tmp_path / "e.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BadInputError, match="t.parquet"):
        from_parquet(tmp_path / "t.parquet")


def test_parquet_directory(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    pq.write_table(pa.table({"src": S[:3], "dst": D[:3]}), tmp_path / "d" / "a.parquet")
    pq.write_table(pa.table({"src": S[3:], "dst": D[3:]}), tmp_path / "d" / "sub" / "b.parquet")
    src = open_edges(tmp_path / "d")
    assert src.num_edges == 7 and len(src.parts()) == 2
    s, d = _all(src)
    np.testing.assert_array_equal(s, S)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputNotFoundError, match="empty"):
        from_parquet(tmp_path / "empty")
