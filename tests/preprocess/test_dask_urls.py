"""Inputs on fsspec URLs under Dask: a remote ``.npy`` read by byte range (header in the driver,
blocks in the tasks) gives the store of the single-process job on the local file, byte for byte."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle

import fsspec
import numpy as np
import pytest

import preprocess.steps.csc as csc
from preprocess.sources import from_npy, open_edges
from preprocess.jobs.edges import run_edges_job
from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.sources.remote import open_remote_npy

from pp_helpers import store_snapshot

distributed = pytest.importorskip("distributed")
KW = dict(budget_bytes=16 << 20, progress=False)


def _npy_bytes(a) -> bytes:
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


@pytest.fixture
def mem():
    m = fsspec.filesystem("memory")
    yield m
    m.rm("/urls", recursive=True)


@pytest.mark.parametrize("dtype", ["<i4", ">i8", "<u2"])
def test_remote_array_reads_like_the_memory_map(mem, dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1000, size=(2, 1001)).astype(dtype)
    f = rng.standard_normal((300, 3, 2)).astype("<f4")
    mem.pipe("/urls/e.npy", _npy_bytes(a))
    mem.pipe("/urls/f.npy", _npy_bytes(f))
    r = open_remote_npy("memory://urls/e.npy")
    assert r.shape == a.shape and np.dtype(r.dtype) == a.dtype
    for lo, hi in [(0, 1001), (5, 17), (1000, 1001), (7, 7)]:
        np.testing.assert_array_equal(r.row(1)[lo:hi], a[1, lo:hi])
        np.testing.assert_array_equal(r.col(1)[lo % 2:hi % 3], a[lo % 2:hi % 3, 1])
    rf = open_remote_npy("memory://urls/f.npy")
    idx = rng.integers(0, 300, size=500)
    idx[:50] = np.arange(100, 150)  # adjacent rows merge into one range
    np.testing.assert_array_equal(rf.take_rows(idx), f[idx])
    np.testing.assert_array_equal(rf[290:400], f[290:])
    assert pickle.loads(pickle.dumps(r.row(1))) == r.row(1)  # names and numbers only
    src = from_npy("memory://urls/e.npy").reversed()
    again = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(src))))  # as Dask re-sends it
    assert len(pickle.dumps(again)) < 1000  # the header, not 8 kB of ids
    (s, d), = again.iter_blocks()
    np.testing.assert_array_equal(s, a[1])
    np.testing.assert_array_equal(d, a[0])


def test_remote_npy_errors_name_the_url(mem):
    mem.pipe("/urls/t.npy", _npy_bytes(np.arange(100, dtype=np.int64).reshape(2, 50))[:200])
    mem.pipe("/urls/not.npy", b"hello world, not an npy file at all")
    mem.pipe("/urls/fortran.npy", _npy_bytes(np.asfortranarray(np.ones((2, 5), np.int64))))
    mem.pipe("/urls/three.npy", _npy_bytes(np.ones((3, 5), np.int64)))
    with pytest.raises(BadInputError, match=r"memory://urls/t.npy.*truncated"):
        list(from_npy("memory://urls/t.npy").iter_blocks())
    with pytest.raises(BadInputError, match=r"readable .npy edge list in memory://urls/not"):
        from_npy("memory://urls/not.npy")
    with pytest.raises(BadInputError, match="Fortran order"):
        from_npy("memory://urls/fortran.npy")
    with pytest.raises(BadInputError, match=r"shape \[2, E\] or \[E, 2\].*\(3, 5\)"):
        from_npy("memory://urls/three.npy")
    with pytest.raises(InputNotFoundError, match="memory://urls/none.npy"):
        from_npy("memory://urls/none.npy")
    with pytest.raises(InputNotFoundError, match="Expected a .npy edge list for the URL"):
        open_edges("memory://urls/e.parquet")


def _small_ranges(monkeypatch, work_bytes=4000):
    real = csc.plan_csc
    monkeypatch.setattr(csc, "plan_csc", lambda *a, **kw: dataclasses.replace(
        real(*a, **kw), work_bytes=work_bytes))


@pytest.fixture
def s3(monkeypatch):
    """moto's S3 server on loopback, credentials and endpoint in the AWS variables (what the
    driver and every worker read); yields an s3fs file system with the bucket ``dask-urls``."""
    s3fs = pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    from featurestore.testing.loopback import serve_s3

    opts, stop = serve_s3("dask-urls", key="k", secret="s")
    try:
        for k, v in {"AWS_ENDPOINT_URL": opts["endpoint_url"], "AWS_ACCESS_KEY_ID": "k",
                     "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
        s3fs.S3FileSystem.clear_instance_cache()
        fs = s3fs.S3FileSystem(**opts)
        yield fs
        fs.rm("dask-urls", recursive=True)
    finally:
        stop()


def _snapshot(store) -> dict:
    """:func:`store_snapshot` with what names the inputs (the provenance's input records:
    where each was read from, its mtime; the options, which hold the spec's text; the spec's
    path) moved out under ``inputs`` (paths only) and ``options``, to compare apart."""
    snap = store_snapshot(store)
    attrs = json.loads(snap["zarr.json"])
    paths = [r["path"] for p in attrs["provenance"] for r in p.pop("inputs")]
    options = json.dumps([p.pop("options") for p in attrs["provenance"]], sort_keys=True)
    for p in attrs["provenance"]:
        p.pop("spec", None)
    snap["zarr.json"] = json.dumps(attrs, sort_keys=True)
    return {"store": snap, "inputs": paths, "options": options}


@pytest.mark.parametrize("layout,processes", [("2e", False), ("e2", True)],
                         ids=["2e-threads", "e2-2-processes"])
def test_edges_from_s3_on_dask_equal_the_local_job(s3, tmp_path, monkeypatch, layout,
                                                   processes):
    """A [2, E] or [E, 2] .npy on moto's S3, converted under Dask (a cluster of threads, or
    two worker processes that find the endpoint in the environment they inherit; the
    destination ranges as tasks, each reading its blocks by byte range), equals the
    single-process store of the same file read locally, byte for byte; the single-process
    job refuses the URL."""
    _small_ranges(monkeypatch)
    rng = np.random.default_rng(1)
    e = rng.integers(0, 500, size=(2, 6000)).astype(np.int32)
    e = e if layout == "2e" else np.ascontiguousarray(e.T)
    np.save(tmp_path / "e.npy", e)
    s3.pipe("dask-urls/e.npy", _npy_bytes(e))
    url = "s3://dask-urls/e.npy"
    opts = dict(num_nodes=500, csr=True, **KW)
    run_edges_job(tmp_path / "e.npy", tmp_path / "serial", **opts)
    with pytest.raises(InputNotFoundError, match="Got a s3:// URL"):
        run_edges_job(url, tmp_path / "refused", **opts)
    with distributed.LocalCluster(n_workers=1 + processes, threads_per_worker=2 - processes,
                                  processes=processes, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as ts:
            run_edges_job(url, tmp_path / "dask", dask=client, **opts)
        if not processes:  # the command line, on the same cluster by its address
            import argparse

            from preprocess import cli

            parser = argparse.ArgumentParser()
            cli.register(parser.add_subparsers(dest="command"))
            args = parser.parse_args(["preprocess", "edges", url, str(tmp_path / "cli"),
                                      "--num-nodes", "500", "--csr", "--memory", "16MiB",
                                      "--dask", cluster.scheduler_address, "--no-progress"])
            assert args.func(args) == 0
            assert _snapshot(tmp_path / "cli") == _snapshot(tmp_path / "dask")
    assert len([t for t in ts.data if t["key"].startswith("_range_task")]) > 3
    got, want = _snapshot(tmp_path / "dask"), _snapshot(tmp_path / "serial")
    assert got["store"] == want["store"]  # every file byte for byte
    # the provenance names where each read its input
    assert got["inputs"] == [url] and want["inputs"] == [str(tmp_path / "e.npy")]
    assert got["options"] == want["options"]
    m = json.loads((tmp_path / "dask" / ".preprocess" / "manifest.json").read_text())
    assert [r["path"] for r in m["inputs"]] == [url]
    assert m["inputs"][0]["size"] == s3.size("dask-urls/e.npy")


def test_spec_with_npy_edges_and_features_on_s3(s3, tmp_path, monkeypatch):
    """The toy spec with its .npy edge lists (cites2, venue) and feature matrix on S3, run
    under Dask (degree counts, renumbering and 25 feature tasks reading by byte range, the
    rows in degree order fetched as merged ranges) equals the local single-process store;
    the single-process job and a URL for an id file are refused."""
    from dask_small import small_blocks

    from preprocess.dask.features import TASK_PREFIX
    from preprocess.errors import SpecError
    from preprocess.jobs.spec_steps import run_spec

    from pp_helpers import make_toy_dataset

    small_blocks(monkeypatch.setattr)
    spec, _ = make_toy_dataset(tmp_path / "d", reorder="degree")
    text = (tmp_path / "d" / "spec.yaml").read_text()
    for f in ("cites2.npy", "venue.npy", "feat.npy"):
        s3.put(str(tmp_path / "d" / f), f"dask-urls/{f}")
        text = text.replace(f" {f}", f" s3://dask-urls/{f}").replace(f"[cites.parquet, {f}]",
                                                                     f"[cites.parquet, s3://dask-urls/{f}]")
    remote = tmp_path / "d" / "remote.yaml"
    remote.write_text(text.replace("name: toy", "name: toy"))
    assert text.count("s3://") == 3
    run_spec(spec, tmp_path / "serial", **KW)
    with pytest.raises(InputNotFoundError, match="Got a s3:// URL"):
        run_spec(remote, tmp_path / "refused", **KW)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as ts:
            run_spec(remote, tmp_path / "dask", dask=client, **KW)
        bad = tmp_path / "d" / "bad.yaml"
        bad.write_text(text.replace("ids: paper_ids.npy", "ids: s3://dask-urls/feat.npy"))
        with pytest.raises(InputNotFoundError, match="Got a s3:// URL"):
            run_spec(bad, tmp_path / "bad", dask=client, **KW)
        bad.write_text(text.replace("path: writes.csv", "path: s3://dask-urls/writes.csv"))
        with pytest.raises(SpecError, match="Expected a .npy file for the URL"):
            run_spec(bad, tmp_path / "bad", dask=client, **KW)
    assert len([t for t in ts.data if t["key"].startswith(TASK_PREFIX)]) == 25
    got, want = _snapshot(tmp_path / "dask"), _snapshot(tmp_path / "serial")
    assert got["store"] == want["store"]
    assert got["options"].replace("s3://dask-urls/", "") == want["options"]
    assert [p for p in got["inputs"] if "://" in p] == [
        f"s3://dask-urls/{f}" for f in ("feat.npy", "cites2.npy", "venue.npy")]


def test_remote_input_records_see_a_rewrite(tmp_path):
    """An HTTP input rewritten with the same size records differently (its Last-Modified),
    so a resumed job refuses the changed input; an ETag is recorded where one is given."""
    import os

    from featurestore.testing.loopback import serve_http
    from preprocess.sources.remote import remote_input_record

    np.save(tmp_path / "edges.npy", np.arange(20).reshape(2, 10))
    url, stop = serve_http(tmp_path)
    try:
        r1 = remote_input_record(f"{url}/edges.npy")
        np.save(tmp_path / "edges.npy", np.arange(20)[::-1].reshape(2, 10))
        os.utime(tmp_path / "edges.npy", (1e9, 1e9))
        r2 = remote_input_record(f"{url}/edges.npy")
    finally:
        stop()
    assert r1["size"] == r2["size"] and r1["mtime_ns"] > 0
    assert r2["mtime_ns"] == 1_000_000_000 * 10**9


def test_s3_input_records_carry_the_etag(s3):
    from preprocess.sources.remote import remote_input_record

    s3.pipe("dask-urls/etag/a.bin", b"one")
    r1 = remote_input_record("s3://dask-urls/etag/a.bin")
    s3.pipe("dask-urls/etag/a.bin", b"two")
    s3.invalidate_cache()
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # the record's own client: no listing cache
    r2 = remote_input_record("s3://dask-urls/etag/a.bin")
    assert r1["etag"] and r1["etag"] != r2["etag"]
