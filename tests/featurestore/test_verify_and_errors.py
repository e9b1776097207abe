"""Opening errors, incomplete stores, and ``featurestore verify`` catching damage."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import zarr

import featurestore as fs
from graph_helpers import random_csc
from featurestore.cli import main as cli_main
from featurestore.verify import verify_store


def small_store(path, n=5000, e=30000, dim=192):
    rng = np.random.default_rng(3)
    w = fs.create_store(path, mode="w")
    w.add_node_type("v", n)
    indptr, indices, _, _ = random_csc(rng, n, n, e)
    w.add_edge_type(("v", "e", "v"), indptr, indices)
    X = rng.standard_normal((n, dim)).astype(np.float16)
    w.add_features("v", "feat", X)
    w.add_split("train", "v", np.arange(10))
    w.commit()
    return X


def test_missing_path(tmp_path):
    with pytest.raises(fs.StoreNotFoundError, match="nope"):
        fs.open_store(tmp_path / "nope")
    with pytest.raises(FileNotFoundError):
        fs.open_store(tmp_path / "nope")


def test_not_a_store(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(fs.NotAStoreError, match="zarr.json"):
        fs.open_store(tmp_path / "plain")
    zarr.open_group(str(tmp_path / "other"), mode="w")  # a zarr group of another format
    with pytest.raises(fs.NotAStoreError, match="format"):
        fs.open_store(tmp_path / "other")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "zarr.json").write_text("{not json")
    with pytest.raises(ValueError, match="zarr.json"):
        fs.open_store(tmp_path / "bad")


def test_incomplete_store_refused_then_resumed(tmp_path):
    path = tmp_path / "s"
    w = fs.create_store(path)
    w.add_node_type("v", 10)
    with pytest.raises(fs.IncompleteStoreError, match="incomplete"):
        fs.open_store(path)
    assert any("incomplete" in p for p in verify_store(path))
    with pytest.raises(fs.StoreExistsError):
        fs.create_store(path)  # mode "w-" refuses to overwrite
    with pytest.raises(fs.StoreLockedError, match="write lock"):
        fs.create_store(path, mode="a")  # w still holds the lock
    w.close()  # the first writer stops (a crash releases the lock the same way)
    w2 = fs.create_store(path, mode="a")  # resume keeps what was written
    assert w2.has_array("nodes/v/orig_id")
    w2.add_features("v", "feat", np.ones((10, 4), np.float32))
    w2.commit()
    assert fs.open_store(path).features("v").gather([9]).tolist() == [[1, 1, 1, 1]]
    with pytest.raises(fs.StoreExistsError, match="complete"):
        fs.create_store(path, mode="a")


def test_writer_rejects_bad_input(tmp_path):
    w = fs.create_store(tmp_path / "s")
    w.add_node_type("v", 4)
    with pytest.raises(fs.SchemaError, match="indptr of length 5"):
        w.add_edge_type(("v", "e", "v"), [0, 1, 2], [0, 1])
    with pytest.raises(fs.SchemaError, match="non-decreasing"):
        w.add_edge_type(("v", "e", "v"), [0, 2, 1, 2, 2], [0, 1])
    with pytest.raises(fs.SchemaError, match=r"source ids in \[0, 4\)"):
        w.add_edge_type(("v", "e", "v"), [0, 1, 2, 2, 2], [0, 4])
    with pytest.raises(fs.UnknownNodeTypeError):
        w.add_edge_type(("v", "e", "u"), [0], [])
    with pytest.raises(fs.SchemaError, match="Expected 4 rows"):
        w.add_features("v", "feat", np.ones((5, 2), np.float32))
    with pytest.raises(fs.SchemaError, match="Expected 4 rows"):
        w.add_features("v", "feat", iter([np.ones((3, 2), np.float32)]))
    with pytest.raises(fs.SchemaError, match="integer labels"):
        w.add_labels("v", np.array([0.5, 1, 2, 3]))
    with pytest.raises(fs.SchemaError, match="split"):
        w.add_split("train", "v", [0, 7])
    with pytest.raises(ValueError, match="name"):
        w.add_node_type("a/b", 3)


def test_verify_sound_store(tmp_path):
    small_store(tmp_path / "s")
    assert verify_store(tmp_path / "s") == []
    assert cli_main(["verify", str(tmp_path / "s")]) == 0


def _shard(path, key):
    return os.path.join(path, key, "c", "0" if key.endswith(("indptr", "indices")) else "0/0")


def test_verify_catches_truncated_chunk_file(tmp_path, capsys):
    path = str(tmp_path / "s")
    small_store(path)
    f = _shard(path, "nodes/v/features/feat")
    with open(f, "r+b") as fh:
        fh.truncate(os.path.getsize(f) // 2)
    problems = verify_store(path)
    assert any("features/feat" in p and "truncated" in p for p in problems), problems
    assert cli_main(["verify", path]) == 1
    assert "truncated" in capsys.readouterr().out
    with pytest.raises(fs.CorruptStoreError, match="truncated"):
        fs.open_store(path).features("v").gather([0])


def _overwrite(path, key, index, value):
    """Overwrite one element of a 1-D int array in place (as a bit flip on disk would)."""
    with open(os.path.join(path, key, "zarr.json")) as f:
        meta = json.load(f)
    dt = np.dtype(meta["data_type"])
    with open(_shard(path, key), "r+b") as fh:
        fh.seek(index * dt.itemsize)
        fh.write(np.array([value], dt).tobytes())


def test_verify_catches_non_monotone_indptr(tmp_path):
    path = str(tmp_path / "s")
    small_store(path)
    _overwrite(path, "edges/v__e__v/indptr", 100, 10**6)
    problems = verify_store(path)
    assert any("indptr decreases at 101" in p for p in problems), problems


def test_verify_catches_out_of_range_index(tmp_path):
    path = str(tmp_path / "s")
    small_store(path)
    _overwrite(path, "edges/v__e__v/indices", 777, 5000)
    problems = verify_store(path)
    assert any("source id 5000 at edge 777" in p for p in problems), problems


def test_verify_catches_missing_array(tmp_path):
    path = str(tmp_path / "s")
    small_store(path)
    os.remove(os.path.join(path, "splits/train/v/zarr.json"))
    assert any("splits/train/v" in p and "missing" in p for p in verify_store(path))


def test_info_cli(tmp_path, capsys):
    small_store(tmp_path / "s")
    assert cli_main(["info", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "5,000 nodes" in out and "30,000 edges" in out and "float16 x [192]" in out
    assert cli_main(["info", "--json", str(tmp_path / "s")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["node_types"]["v"]["num_nodes"] == 5000
    assert info["node_types"]["v"]["features"]["feat"]["bytes"] >= 5000 * 192 * 2


def test_cli_error_exit(tmp_path, capsys):
    assert cli_main(["info", str(tmp_path / "nothing")]) == 2
    assert "Nothing is there" in capsys.readouterr().err
