"""Corrupted stores (issue 10): every damage gives a named error that names the file or key.

Each test builds a small store with the writer, damages it with one specific edit (as a bit
flip, a bad edit or a hostile writer would), and checks the error class a reader raises, the
message, and what ``featurestore verify`` (``--data``) reports. The expectations are written
out by hand (the byte offsets follow the format: row ``r`` at ``r * row_bytes``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from pathlib import Path

import numpy as np
import pytest
import zarr

import featurestore as fs
from featurestore import topology as reader_mod
from featurestore.format.shard import MISSING
from featurestore.cli import main as cli_main
from featurestore.verify import verify_report, verify_store
from loaders.sample.sampler import CSCGraph, NeighborSampler

NA, NB, DIM = 300, 200, 16
ET = ("a", "r", "b")


def make_store(path):
    """Node types a (300, float32 features, labels) and b (200, zstd features); a -> b edges."""
    rng = np.random.default_rng(0)
    deg = rng.integers(0, 6, NB)
    indptr = np.concatenate(([0], np.cumsum(deg))).astype(np.int64)
    indices = rng.integers(0, NA, int(indptr[-1])).astype(np.int64)
    xa = rng.standard_normal((NA, DIM)).astype(np.float32)
    xb = rng.standard_normal((NB, 8)).astype(np.float32)
    w = fs.create_store(path, mode="w")
    w.add_node_type("a", NA)
    w.add_node_type("b", NB)
    w.add_edge_type(ET, indptr, indices)
    w.add_features("a", "feat", xa)
    w.add_features("b", "feat", xb, compressors=[zarr.codecs.ZstdCodec()])
    w.add_labels("a", rng.integers(-1, 5, NA))
    w.add_split("train", "a", np.arange(0, NA, 3))
    w.commit()
    return dict(indptr=indptr, indices=indices, xa=xa, xb=xb)


@pytest.fixture
def store(tmp_path):
    path = str(tmp_path / "s.store")
    data = make_store(path)
    return path, data


def _root(path):
    return os.path.join(path, "zarr.json")


def edit_root(path, fn):
    meta = json.loads(Path(_root(path)).read_text())
    fn(meta["attributes"])
    with open(_root(path), "w") as f:
        json.dump(meta, f)


def edit_array_meta(path, key, fn):
    p = os.path.join(path, key, "zarr.json")
    meta = json.loads(Path(p).read_text())
    fn(meta)
    with open(p, "w") as f:
        json.dump(meta, f)


def shard(path, key):
    return os.path.join(path, key, "c", "0" if key.startswith(("edges", "splits")) or
                        key.endswith(("orig_id", "label")) else "0/0")


def poke(file, offset, raw: bytes):
    """Overwrite bytes in place, as a bit flip or a stray write would. File clocks are coarse
    (a few ms), so the test moves mtime on as any later moment would show it."""
    st = os.stat(file)
    with open(file, "r+b") as f:
        f.seek(offset)
        f.write(raw)
    os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def put(path, key, index, value):
    """Overwrite element ``index`` of the 1-D array ``key``."""
    dt = np.dtype(json.loads(Path(os.path.join(path, key, "zarr.json")).read_text())["data_type"])
    poke(shard(path, key), index * dt.itemsize, np.array([value], dt).tobytes())


# -- 4 / 13: the root schema -----------------------------------------------------------
@pytest.mark.parametrize("edit,where", [
    (lambda a: a["schema"]["node_types"]["a"].pop("num_nodes"), "num_nodes"),
    (lambda a: a.pop("schema"), "schema"),
    (lambda a: a.update(complete="false"), "complete"),
    (lambda a: a["schema"]["node_types"]["a"].update(num_nodes="300"), "num_nodes"),
    (lambda a: a["schema"]["node_types"]["a"].update(num_nodes=-1), "num_nodes"),
    (lambda a: a["schema"].update(edge_types={}), "edge_types"),
    (lambda a: a["schema"]["edge_types"][0].update(dst="nope"), "dst"),
    (lambda a: a["schema"]["edge_types"][0].update(indices_dtype="float32"), "indices_dtype"),
    (lambda a: a["schema"]["node_types"]["a"]["features"]["feat"].update(dtype="banana"),
     "dtype"),
    (lambda a: a["schema"]["node_types"]["a"]["features"]["feat"].update(shape=16), "shape"),
    (lambda a: a["schema"]["splits"]["train"].update(a=2.5), "train"),
])
def test_root_schema_errors_are_named(store, edit, where):
    path, _ = store
    edit_root(path, edit)
    with pytest.raises(fs.CorruptStoreError) as e:
        fs.open_store(path)
    assert "zarr.json" in str(e.value) and where in str(e.value)
    problems = verify_store(path)
    assert problems and where in problems[0]


def test_complete_false_string_is_not_complete(store):
    path, _ = store
    edit_root(path, lambda a: a.update(complete="false"))
    with pytest.raises(fs.CorruptStoreError, match="complete.*true or false"):
        fs.open_store(path)


@pytest.mark.parametrize("edit,what", [
    (lambda a: a["schema"]["node_types"]["a"].update(num_nodes=10**6), "shape"),
    (lambda a: a["schema"]["node_types"]["a"]["features"]["feat"].update(dtype="float64"),
     "data_type"),
    (lambda a: a["schema"]["node_types"]["a"]["features"]["feat"].update(shape=[32]), "shape"),
])
def test_schema_disagreeing_with_arrays(store, edit, what):
    """Raising num_nodes, changing a feature's dtype or row shape in the root zarr.json:
    refused at first use of the array, never a gather past the mapping."""
    path, _ = store
    edit_root(path, edit)
    s = fs.open_store(path)  # opening stays cheap: arrays are checked on first use
    with pytest.raises(fs.CorruptStoreError) as e:
        s.features("a").gather([0, 1])
    msg = str(e.value)
    assert what in msg and os.path.join("nodes/a/features/feat", "zarr.json") in msg
    problems = verify_store(path)
    assert any("nodes/a/features/feat" in p and what in p for p in problems), problems


def test_array_metadata_not_json_or_not_v1(store):
    path, _ = store
    key = "nodes/a/features/feat"
    file = os.path.join(path, key, "zarr.json")
    good = Path(file).read_text()
    Path(file).write_text("{not json")
    with pytest.raises(fs.CorruptStoreError, match="not valid JSON") as e:
        fs.open_store(path).features("a")
    assert file in str(e.value)
    assert any(key in p and "JSON" in p for p in verify_store(path))
    Path(file).write_text(good)
    edit_array_meta(path, key, lambda m: m.update(codecs=[{"name": "bytes", "configuration":
                                                           {"endian": "little"}}]))
    with pytest.raises(fs.CorruptStoreError, match="v1 layout"):
        fs.open_store(path).features("a")
    assert any(key in p and "v1 layout" in p for p in verify_store(path))
    Path(file).write_text(good)
    edit_array_meta(path, key, lambda m: m["codecs"][0]["configuration"]["codecs"][0]
                    ["configuration"].update(endian="big"))
    with pytest.raises(fs.CorruptStoreError, match="big-endian"):
        fs.open_store(path).features("a")
    Path(file).write_text(good)
    edit_array_meta(path, key, lambda m: m.update(shape=[NA]))
    with pytest.raises(fs.CorruptStoreError, match="shape"):
        fs.open_store(path).features("a")


def test_schema_round_trip(store):
    from featurestore.format.schema import StoreSchema

    path, _ = store
    attrs = json.loads(Path(_root(path)).read_text())["attributes"]
    sch = StoreSchema.from_attrs(attrs, path)
    assert sch.to_attrs()["schema"] == attrs["schema"]
    assert sch.validate() == sch
    assert sch.node_types["a"].features["feat"].dtype == np.float32
    assert sch.edge_types[0].indices_dtype == np.int32
    with pytest.raises(TypeError):
        sch.node_types["a"] = None  # frozen


# -- 10: keys confined to the store ------------------------------------------------------
def test_node_type_reaching_outside_is_refused(tmp_path, store):
    path, _ = store
    other = str(tmp_path / "other.store")
    make_store(other)
    evil = "../../other.store/nodes/a"
    edit_root(path, lambda a: a["schema"]["node_types"].update(
        {evil: a["schema"]["node_types"]["a"]}))
    with pytest.raises(fs.UnsafePathError, match="outside the store"):
        fs.open_store(path)
    problems = verify_store(path)
    assert problems and "../../other.store" in problems[0]


def test_symlinked_array_outside_is_refused(tmp_path, store):
    path, _ = store
    other = str(tmp_path / "other.store")
    make_store(other)
    key = os.path.join(path, "nodes/a/features/feat")
    os.rename(key, key + ".old")
    os.symlink(os.path.join(other, "nodes/a/features/feat"), key)
    with pytest.raises(fs.UnsafePathError, match="outside"):
        fs.open_store(path).features("a")
    assert any("outside" in p for p in verify_store(path))


# -- 5: topology validated before the kernels see it ------------------------------------
@pytest.mark.parametrize("part,index,value,what", [
    ("indices", 7, NA, "source id 300 at edge 7"),
    ("indices", 3, -5, "source id -5 at edge 3"),
    ("indptr", 10, -3, "indptr decreases at entry 10"),
    ("indptr", 50, 10**6, "indptr decreases at entry 51"),
    ("indptr", NB, 10**6, "indptr[-1] is 1000000"),
    ("indptr", 0, 1, "indptr[0] is 1"),
])
def test_corrupt_topology_named_error(store, part, index, value, what):
    path, _ = store
    key = f"edges/a__r__b/{part}"
    put(path, key, index, value)
    s = fs.open_store(path)
    with pytest.raises(fs.CorruptStoreError, match="edges/a__r__b") as e:
        s.csc(ET)
    assert what in str(e.value)
    with pytest.raises(fs.CorruptStoreError):
        NeighborSampler(s, [5, 5])
    assert verify_store(path)


def test_sampler_never_sees_bad_topology_in_a_subprocess(store):
    """The loader on a store with a source id past the end: an error, not a signal."""
    path, _ = store
    put(path, "edges/a__r__b/indices", 0, 10**8)
    code = ("import featurestore as fs, sys, numpy as np\nfrom loaders import NeighborLoader\n"
            f"s = fs.open_store({path!r})\n"
            "try:\n"
            "    next(iter(NeighborLoader(s, num_neighbors=[5, 5],\n"
            "                             input_nodes=('b', np.arange(200)),\n"
            "                             batch_size=64, device='cpu')))\n"
            "except fs.CorruptStoreError as e:\n"
            "    print('named:', e); sys.exit(3)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                           os.path.abspath(__file__)))))
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "source id 100000000" in r.stdout


def test_cscgraph_from_arrays_is_validated():
    indptr = np.array([0, 2, 3])
    with pytest.raises(fs.CorruptStoreError, match="source id 9"):
        CSCGraph({"v": 3}, {fs.EdgeType("v", "e", "v"): (np.array([0, 1, 2, 3]),
                                                          np.array([0, 9, 1]))})
    with pytest.raises(fs.CorruptStoreError, match="indptr"):
        CSCGraph({"v": 2}, {fs.EdgeType("v", "e", "v"): (indptr, np.array([0, 1]))})
    g = CSCGraph({"v": 2}, {fs.EdgeType("v", "e", "v"): (indptr.astype(">i8"),
                                                         np.array([0, 1, 1], ">i4"))})
    p, i = g.csc[fs.EdgeType("v", "e", "v")]
    assert p.dtype.isnative and i.dtype.isnative and p.tolist() == [0, 2, 3]
    sub = NeighborSampler(g, [-1]).sample(np.array([1, 0], ">i8"), "v")
    assert sub.node["v"][:2].tolist() == [1, 0]


def test_write_time_record_skips_the_pass_until_files_change(store, monkeypatch):
    path, data = store
    calls = []
    real = reader_mod.check_csc
    monkeypatch.setattr(reader_mod, "check_csc", lambda *a: (calls.append(a), real(*a)))
    s = fs.open_store(path)
    indptr, indices = s.csc(ET)
    assert calls == []  # the writer's record matched: no pass
    np.testing.assert_array_equal(indptr, data["indptr"])
    np.testing.assert_array_equal(indices, data["indices"])
    edit_root(path, lambda a: a.pop("topology_checks"))
    fs.open_store(path).csc(ET)
    assert len(calls) == 1  # no record: validated at open
    put(path, "edges/a__r__b/indices", 0, int(data["indices"][0]))  # same value, new mtime
    make_store(path)
    s = fs.open_store(path)
    put(path, "edges/a__r__b/indices", 0, int(data["indices"][0]))
    s.csc(ET)
    assert len(calls) == 2  # file changed since the record: validated again


# -- 6: generations ----------------------------------------------------------------------
def test_rewrite_under_an_open_reader_is_detected(store):
    path, _ = store
    s = fs.open_store(path)
    s.check_generation()
    s.csc(ET)
    gen = s.generation
    assert isinstance(gen, str) and len(gen) == 32
    w = fs.create_store(path, mode="w")  # rewritten: other sizes
    w.add_node_type("a", 10)
    w.add_features("a", "feat", np.ones((10, DIM), np.float32))
    w.commit()
    for use in (s.check_generation, lambda: s.csc(ET), lambda: s.features("a"),
                lambda: s.labels("a")):
        with pytest.raises(fs.StoreChangedError, match="rewritten"):
            use()
    assert fs.open_store(path).generation != gen


# -- 8: compressed arrays ----------------------------------------------------------------
def test_compressed_missing_shard_raises(store):
    path, data = store
    key = "nodes/b/features/feat"
    s = fs.open_store(path)
    np.testing.assert_array_equal(s.features("b").gather([3, 1]), data["xb"][[3, 1]])
    os.remove(shard(path, key))
    with pytest.raises(fs.CorruptStoreError, match="missing") as e:
        fs.open_store(path).features("b")
    assert os.path.join(key, "c/0/0") in str(e.value)
    assert any(key in p and "missing" in p for p in verify_store(path))


def _compressed_index(path, key):
    f = shard(path, key)
    raw = Path(f).read_bytes()
    meta = json.loads(Path(os.path.join(path, key, "zarr.json")).read_text())
    conf = meta["codecs"][0]["configuration"]
    n = meta["chunk_grid"]["configuration"]["chunk_shape"][0] // conf["chunk_shape"][0]
    return f, raw, n


def test_compressed_flipped_byte_raises(store):
    path, _ = store
    key = "nodes/b/features/feat"
    f, raw, n = _compressed_index(path, key)
    idx = np.frombuffer(raw[-(16 * n + 4):-4], "<u8").reshape(n, 2)
    off = int(idx[0, 0]) + int(idx[0, 1]) // 2
    poke(f, off, bytes([raw[off] ^ 0x40]))
    with pytest.raises(fs.CorruptStoreError, match=key):
        fs.open_store(path).features("b").gather([0])
    assert any(key in p and "decode" in p for p in verify_store(path))


def test_compressed_inner_chunk_missing_from_index(store):
    import google_crc32c

    path, _ = store
    key = "nodes/b/features/feat"
    f, raw, n = _compressed_index(path, key)
    idx = np.frombuffer(raw[-(16 * n + 4):-4], "<u8").reshape(n, 2).copy()
    idx[0] = MISSING
    blob = idx.tobytes()
    poke(f, len(raw) - (16 * n + 4), blob + google_crc32c.value(blob).to_bytes(4, "little"))
    assert any(key in p and "missing from the shard index" in p for p in verify_store(path))


# -- 9: checksums of uncompressed data ---------------------------------------------------
def test_verify_data_sees_flipped_bytes(store, capsys):
    path, data = store
    key = "nodes/a/features/feat"
    meta = json.loads(Path(os.path.join(path, key, "zarr.json")).read_text())
    rec = meta["attributes"]["checksum"]
    assert rec["algorithm"] == "crc32" and len(rec["values"]) == 1
    assert cli_main(["verify", "--data", path]) == 0
    row_bytes = DIM * 4
    poke(shard(path, key), 123 * row_bytes + 5, b"\x99")
    assert verify_store(path) == []  # metadata, sizes and index are intact ...
    problems = verify_store(path, data=True)  # ... the bytes are not
    assert len(problems) == 1 and key in problems[0] and "checksum" in problems[0]
    assert f"rows 0..{NA - 1}" in problems[0]
    assert cli_main(["verify", "--data", path]) == 1
    assert "checksum" in capsys.readouterr().out


def test_verify_data_checks_topology_bytes_and_notes_missing_records(store):
    path, data = store
    key = "edges/a__r__b/indices"
    v = int(data["indices"][4])
    put(path, key, 4, (v + 1) % NA)  # still a valid id: only the checksum can tell
    problems = verify_store(path, data=True)
    assert any(key in p and "checksum" in p for p in problems), problems
    edit_array_meta(path, key, lambda m: m["attributes"].pop("checksum"))
    rep = verify_report(path, data=True)
    assert rep.problems == [] and any(key in n and "no checksums" in n for n in rep.notes)


# -- 13: closed stores, big-endian ids ---------------------------------------------------
def test_use_after_close_is_a_named_error(store):
    path, data = store
    s = fs.open_store(path)
    fa, fb = s.features("a"), s.features("b")
    s.close()
    for use in (lambda: fa.gather([1]), lambda: fb.gather([1]), fa.numpy, lambda: s.csc(ET),
                lambda: s.features("a"), lambda: s.labels("a"), s.check_generation):
        with pytest.raises(fs.ClosedStoreError, match="closed"):
            use()


def test_close_during_gathers(store):
    path, data = store
    s = fs.open_store(path)
    fa = s.features("a")
    errors, done = [], []
    ids = np.random.default_rng(1).integers(0, NA, 4096)

    def loop(read_path):
        try:
            for _ in range(100000):
                out = fa.gather(ids, read_path=read_path)
                assert np.array_equal(out, data["xa"][ids])
                done.append(1)
        except fs.ClosedStoreError:
            return
        except BaseException as e:  # noqa: BLE001 - any other error fails the test
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(p,)) for p in ("mmap", "pread", "auto")]
    for t in threads:
        t.start()
    while len(done) < 20:
        threading.Event().wait(0.005)
    s.close()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_big_endian_ids(store):
    path, data = store
    s = fs.open_store(path)
    ids = np.array([5, 0, 299, 5], ">i8")
    np.testing.assert_array_equal(s.features("a").gather(ids), data["xa"][[5, 0, 299, 5]])
    np.testing.assert_array_equal(s.features("b").gather(ids.astype(">i4")[:3] % NB),
                                  data["xb"][[5, 0, 99]])
    sub = NeighborSampler(s, [3]).sample(np.array([1, 2], ">i4"), "b")
    assert sub.node["b"][:2].tolist() == [1, 2]


def test_commit_refuses_a_bad_csc_written_without_validation(tmp_path):
    w = fs.create_store(tmp_path / "s")
    w.add_node_type("v", 4)
    w.add_edge_type(("v", "e", "v"), [0, 1, 2, 2, 3], [0, 9, 1], validate=False)
    with pytest.raises(fs.CorruptStoreError, match="source id 9 at edge 1"):
        w.commit()
    with pytest.raises(fs.IncompleteStoreError):
        fs.open_store(tmp_path / "s")
