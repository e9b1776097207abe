"""Edge-level data in the store: edge features and per-edge values in CSC edge order, edge
splits as named columns; checked on write, in the schema, by ``verify`` and by ``replicate``."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import featurestore as fs
import featurestore.remote.replicate as rp
from featurestore.errors import (CorruptStoreError, SchemaError, UnknownEdgeTypeError,
                                 UnknownFeatureError, UnknownSplitError, UnsafePathError)
from featurestore.verify import verify_report
from graph_helpers import random_csc

N, M = 400, 300
ET = ("u", "buys", "item")


def build(path, rng, *, commit=True):
    """A bipartite store with edge features, values and an edge split; returns what went in."""
    indptr, indices = random_csc(rng, N, M, 3000)[:2]
    w = fs.create_store(path, mode="w")
    w.add_node_type("u", N)
    w.add_node_type("item", M)
    w.add_edge_type(ET, indptr, indices)
    e = int(indptr[-1])
    attr = rng.standard_normal((e, 6)).astype(np.float32)
    when = rng.integers(0, 10**9, e)
    w.add_edge_features(ET, "edge_attr", attr)
    w.add_edge_values(ET, "time", when)
    pairs = {"src": rng.integers(0, N, 50), "dst": rng.integers(0, M, 50),
             "neg_dst": rng.integers(0, M, (50, 4)), "label": rng.random(50).astype(np.float32)}
    w.add_edge_split("valid", ET, **pairs)
    w.add_edge_split("test", ET, src=pairs["src"][:7])  # queries without answers
    if commit:
        w.commit()
    return indptr, indices, attr, when, pairs


def test_round_trip_by_edge_id(tmp_path):
    rng = np.random.default_rng(0)
    indptr, indices, attr, when, pairs = build(tmp_path / "s.store", rng)
    s = fs.open_store(tmp_path / "s.store")
    assert s.edge_feature_names(ET) == ["edge_attr"] and s.edge_value_names("buys") == ["time"]
    assert s.edge_split_names == ["test", "valid"]
    e_id = rng.integers(0, attr.shape[0], 500)
    np.testing.assert_array_equal(s.edge_features(ET).gather(e_id), attr[e_id])
    np.testing.assert_array_equal(s.edge_features(ET, "edge_attr")[10:20], attr[10:20])
    np.testing.assert_array_equal(s.edge_values(ET, "time"), when)
    got = s.edge_split("valid")
    assert sorted(got) == ["dst", "label", "neg_dst", "src"]
    for k, v in pairs.items():
        np.testing.assert_array_equal(got[k], v)
    assert list(s.edge_split("test", ET)) == ["src"]
    assert s.edge_split_types("valid") == [fs.EdgeType(*ET)]
    # the row of e_id is the edge at that position of the CSC: brute force over one node
    v = 17
    lo, hi = indptr[v], indptr[v + 1]
    np.testing.assert_array_equal(s.edge_features(ET).gather(np.arange(lo, hi)), attr[lo:hi])
    assert verify_report(tmp_path / "s.store", data=True).problems == []


def test_reader_errors_name_what_exists(tmp_path):
    build(tmp_path / "s.store", np.random.default_rng(1))
    s = fs.open_store(tmp_path / "s.store")
    with pytest.raises(UnknownFeatureError, match="edge_attr"):
        s.edge_features(ET, "weight")
    with pytest.raises(UnknownSplitError, match="test.*valid"):
        s.edge_split("train")
    with pytest.raises(UnknownEdgeTypeError):
        s.edge_features(("u", "rates", "item"))


def test_stores_without_edge_data_keep_their_bytes(tmp_path):
    rng = np.random.default_rng(2)
    w = fs.create_store(tmp_path / "s.store")
    w.add_node_type("n", 10)
    w.add_edge_type(("n", "r", "n"), *random_csc(rng, 10, 10, 30)[:2])
    w.commit()
    attrs = json.loads((tmp_path / "s.store" / "zarr.json").read_text())["attributes"]
    assert "edge_splits" not in attrs["schema"]
    assert set(attrs["schema"]["edge_types"][0]) == {"src", "rel", "dst", "num_edges", "layout",
                                                     "indices_dtype"}
    assert fs.open_store(tmp_path / "s.store").edge_split_names == []


@pytest.mark.parametrize("bad, match", [
    (dict(edge_attr=np.zeros((5, 2), np.float32)), "Expected .* rows|rows"),
    (dict(split=dict(dst=np.array([1]))), "'src' column"),
    (dict(split=dict(src=np.array([N]))), r"'u' ids in \[0, 400\).*Got 400 at row 0"),
    (dict(split=dict(src=np.array([0, 1]), dst=np.array([1, M]))), "Got 300 at row 1"),
    (dict(split=dict(src=np.array([0, 1]), neg_dst=np.array([[0, 1], [2, -1]]))),
     "Got -1 at row 1"),
    (dict(split=dict(src=np.array([0, 1]), dst=np.array([1]))), "Expected 2 rows"),
    (dict(split=dict(src=np.array([0.5]))), "integer node ids"),
    (dict(split=dict(src=np.array([0]), **{"../x": np.array([1])})), "'/'"),
])
def test_bad_edge_data_is_refused_before_it_is_recorded(tmp_path, bad, match):
    rng = np.random.default_rng(3)
    w = fs.create_store(tmp_path / "s.store")
    w.add_node_type("u", N)
    w.add_node_type("item", M)
    w.add_edge_type(ET, *random_csc(rng, N, M, 100)[:2])
    with pytest.raises((SchemaError, UnsafePathError), match=match):
        if "edge_attr" in bad:
            w.add_edge_features(ET, "edge_attr", bad["edge_attr"])
        else:
            w.add_edge_split("train", ET, **bad["split"])
    assert w.meta.edge_splits == {} and w.meta.edge_types[0].features == {}
    w.close()


def test_edge_data_of_an_edge_type_not_added(tmp_path):
    w = fs.create_store(tmp_path / "s.store")
    w.add_node_type("n", 3)
    with pytest.raises(UnknownEdgeTypeError, match="add_edge_type first"):
        w.add_edge_values(("n", "r", "n"), "time", np.arange(3))
    w.close()


def _edit_root(path, edit):
    f = path / "zarr.json"
    root = json.loads(f.read_text())
    edit(root["attributes"]["schema"])
    f.write_text(json.dumps(root))


@pytest.mark.parametrize("edit, err, match", [
    (lambda s: s["edge_splits"]["valid"].update({"u__rates__item": {"count": 1, "columns": {}}}),
     CorruptStoreError, "edge type key"),
    (lambda s: s["edge_splits"]["valid"]["u__buys__item"]["columns"].pop("src"),
     CorruptStoreError, "'src' is missing"),
    (lambda s: s["edge_splits"]["valid"]["u__buys__item"]["columns"]["dst"].update(
        dtype="int32"), CorruptStoreError, "int64"),
    (lambda s: s["edge_splits"]["valid"]["u__buys__item"]["columns"].update(
        {"../../x": {"dtype": "int64", "shape": []}}), UnsafePathError, "outside"),
    (lambda s: s["edge_types"][0]["features"]["edge_attr"].update(dtype="object"),
     CorruptStoreError, "dtype"),
])
def test_edited_edge_metadata_is_named(tmp_path, edit, err, match):
    build(tmp_path / "s.store", np.random.default_rng(4))
    _edit_root(tmp_path / "s.store", edit)
    with pytest.raises(err, match=match):
        fs.open_store(tmp_path / "s.store")


def test_verify_finds_edge_split_ids_out_of_range(tmp_path):
    build(tmp_path / "s.store", np.random.default_rng(5))
    d = tmp_path / "s.store" / "edge_splits" / "valid" / "u__buys__item" / "dst"
    shard = [os.path.join(r, n) for r, _, ns in os.walk(d) for n in ns if n != "zarr.json"]
    assert len(shard) == 1
    with open(shard[0], "r+b") as f:  # row 3 of the uncompressed shard
        f.seek(3 * 8)
        f.write(np.int64(M + 5).tobytes())
    problems = verify_report(tmp_path / "s.store").problems
    assert any("valid/u__buys__item/dst: id 305 at position 3" in p for p in problems), problems


def test_replicate_copies_edge_data(server, tmp_path):
    root, url, _ = server
    build(os.path.join(root, "edges.store"), np.random.default_rng(6))
    rp.replicate(f"{url}/edges.store", tmp_path / "r", progress=False)
    a, b = fs.open_store(os.path.join(root, "edges.store")), fs.open_store(tmp_path / "r")
    np.testing.assert_array_equal(a.edge_features(ET)[:], b.edge_features(ET)[:])
    np.testing.assert_array_equal(a.edge_split("valid")["neg_dst"],
                                  b.edge_split("valid")["neg_dst"])
    assert verify_report(tmp_path / "r", data=True).problems == []
