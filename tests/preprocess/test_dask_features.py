"""Feature blocks as Dask tasks, shared scratch, file:// and remote stores, kill and resume:
each store equals the single-process one byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import fsspec
import numpy as np
import pytest

import featurestore as fs
from preprocess.dask.features import TASK_PREFIX
from preprocess.dask.renumber import TASK_PREFIX as MAP_PREFIX
from preprocess.errors import PreprocessError
from preprocess.jobs.spec_steps import run_spec

from dask_small import small_blocks
from pp_helpers import make_toy_dataset, store_snapshot

distributed = pytest.importorskip("distributed")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KW = dict(budget_bytes=16 << 20, progress=False)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    spec, raw = make_toy_dataset(tmp_path_factory.mktemp("toy") / "d", reorder="degree")
    return spec, raw


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.fixture
def small(monkeypatch):
    small_blocks(monkeypatch.setattr)


def _feature_tasks(ts) -> int:
    return len([t for t in ts.data if t["key"].startswith(TASK_PREFIX)])


def test_feature_blocks_as_tasks_give_the_same_store(toy, tmp_path, client, small):
    spec, raw = toy
    run_spec(spec, tmp_path / "serial", **KW)
    with distributed.get_task_stream(client) as ts:
        job = run_spec(spec, tmp_path / "dask", dask=client, **KW)
    # paper/feat: 400 rows in 16-row checksum blocks, one task each (author/emb is parquet:
    # written by the driver)
    assert _feature_tasks(ts) == 25
    assert job.manifest["steps"]["features:paper/feat"]["stats"]["tasks"] == 25
    # renumbering: one task per edge file here (cites.parquet, cites2.npy, writes.csv,
    # venue.npy), each mapping through the id maps and ranks reopened on the worker
    assert len([t for t in ts.data if t["key"].startswith(MAP_PREFIX)]) == 4
    assert store_snapshot(tmp_path / "dask") == store_snapshot(tmp_path / "serial")
    meta = json.loads((tmp_path / "dask" / "nodes" / "paper" / "features" / "feat" /
                       "zarr.json").read_text())
    assert len(meta["attributes"]["checksum"]["values"]) == 25
    # the rows themselves, against NumPy: row i of the store is the paper whose orig id it has
    s = fs.open_store(tmp_path / "dask")
    orig = np.asarray(s.orig_ids("paper"))
    pos = {int(p): i for i, p in enumerate(raw["pid"])}
    want = raw["feat"][[pos[int(o)] for o in orig]].astype(np.float16)
    np.testing.assert_array_equal(np.asarray(s.features("paper", "feat")[:]), want)


def test_file_urls_for_inputs_and_store(toy, tmp_path, client, small):
    spec, _ = toy
    run_spec(spec, tmp_path / "serial", **KW)
    run_spec("file://" + spec, "file://" + str(tmp_path / "dask"), dask=client, **KW)
    assert store_snapshot(tmp_path / "dask") == store_snapshot(tmp_path / "serial")


def _memory_snapshot(url: str, **storage_options) -> dict:
    """:func:`store_snapshot` of a store at an fsspec URL."""
    mfs, root = fsspec.core.url_to_fs(url, **storage_options)
    out = {}
    for p in mfs.find(root):
        rel = p[len(root):].lstrip("/")
        if rel.startswith(".preprocess") or rel.endswith(".featurestore.lock"):
            continue
        data = mfs.cat_file(p)
        if rel == "zarr.json":
            attrs = json.loads(data)["attributes"]
            for pr in attrs.get("provenance", []):
                pr.pop("time", None)
            attrs.pop("generation", None)
            attrs.pop("topology_checks", None)  # local stores only (empty when remote)
            data = json.dumps(attrs, sort_keys=True).encode()
        out[rel] = data
    return out


def test_remote_store_needs_a_shared_scratch(toy, tmp_path, client, small, monkeypatch):
    import preprocess.dask.features as dfeat

    monkeypatch.setattr(dfeat, "REMOTE_TASK_BYTES", 256)
    spec, _ = toy
    url = f"memory://dask-features/{tmp_path.name}"
    with pytest.raises(PreprocessError, match="--scratch DIR"):
        run_spec(spec, url + "/refused", dask=client, **KW)
    run_spec(spec, url + "/serial", **KW)
    with distributed.get_task_stream(client) as ts:
        run_spec(spec, url + "/dask", dask=client, scratch_dir=tmp_path / "scratch", **KW)
    assert _feature_tasks(ts) == 25
    assert _memory_snapshot(url + "/dask") == _memory_snapshot(url + "/serial")
    assert os.listdir(tmp_path / "scratch") == []  # the job's folder is gone after commit


def test_failed_feature_task_leaves_no_scratch_file(toy, tmp_path, client, small,
                                                   monkeypatch):
    """Review of 2026-11-30 (stop 15): a remote store's Dask feature scratch file was named
    after the array only and stayed behind when a task failed. Now it has a name of its own
    and goes with the failure."""
    import preprocess.dask.features as dfeat

    monkeypatch.setattr(dfeat, "REMOTE_TASK_BYTES", 256)
    real = dfeat._rows_task

    def fail_block_3(task, b):
        if b == 3:
            raise OSError("simulated task failure")
        return real(task, b)

    spec, _ = toy
    url = f"memory://dask-features-fail/{tmp_path.name}"
    scratch = tmp_path / "scratch"
    monkeypatch.setattr(dfeat, "_rows_task", fail_block_3)
    with pytest.raises(OSError, match="simulated task failure"):
        run_spec(spec, url + "/dask", dask=client, scratch_dir=scratch, **KW)
    left = [f for _, _, fs_ in os.walk(scratch) for f in fs_ if f.startswith("features-")]
    assert left == []


@pytest.mark.parametrize("what,k", [("features", 7), ("csc", 5)])
def test_driver_killed_in_a_dask_step_resumes_to_the_same_store(toy, tmp_path, client,
                                                                small, what, k):
    spec, _ = toy
    run_spec(spec, tmp_path / "clean", **KW)
    store = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE,
                                                       os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, os.path.join(HERE, "kill_dask_run.py"), spec,
                        str(store), what, str(k)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == -9, p.stdout[-2000:] + p.stderr[-2000:]
    with pytest.raises(fs.IncompleteStoreError):
        fs.open_store(store)
    man = json.loads((store / ".preprocess" / "manifest.json").read_text())
    step = "features:paper/feat" if what == "features" else "csc:paper__cites__paper"
    assert step not in man["steps"]  # killed inside that step
    job = run_spec(spec, store, dask=client, **KW)
    assert job.resumed
    assert store_snapshot(store) == store_snapshot(tmp_path / "clean")


def test_mag240m_twin_on_dask(tmp_path, client, small):
    from preprocess.ogb.mag240m import preprocess_mag240m
    from preprocess.synth import MagSynthSpec, synth_mag240m

    spec = MagSynthSpec(paper=3000, author=3500, institution=40, writes=9000,
                        affiliated_with=2500, cites=20000, feat_dim=16)
    synth_mag240m(tmp_path / "raw", 0, seed=3, labeled_share=0.3, progress=False, spec=spec)
    preprocess_mag240m(tmp_path / "raw", tmp_path / "serial", **KW)
    with distributed.get_task_stream(client) as ts:
        job = preprocess_mag240m(tmp_path / "raw", tmp_path / "dask", dask=client, **KW)
    assert _feature_tasks(ts) == job.manifest["steps"]["features:paper"]["stats"]["tasks"] \
        == -(-3000 // 16)
    assert store_snapshot(tmp_path / "dask") == store_snapshot(tmp_path / "serial")


def test_renumbering_blocks_and_a_bad_id_on_dask(tmp_path, client, monkeypatch):
    import preprocess.dask.renumber as dren
    from preprocess.errors import BadInputError

    spec, raw = make_toy_dataset(tmp_path / "d", reorder="degree")
    run_spec(spec, tmp_path / "serial", **KW)
    real = dren.materialize_edges_dask
    monkeypatch.setattr(dren, "materialize_edges_dask",
                        lambda *a, **kw: real(*a, **{**kw, "block_edges": 100}))
    with distributed.get_task_stream(client) as ts:
        run_spec(spec, tmp_path / "dask", dask=client, **KW)
    # cites2.npy (1500 edges) and venue.npy (300) in 100-edge blocks, the others whole
    assert len([t for t in ts.data if t["key"].startswith(MAP_PREFIX)]) == 15 + 3 + 2
    # degree counts (4M-edge blocks, one per file and side): paper from cites (undirected:
    # both sides of its 2 files) and writes.csv (destination); author from writes.csv
    # (source, the type is reversed); venue from venue.npy (destination)
    from preprocess.dask.renumber import DEGREE_PREFIX

    assert len([t for t in ts.data if t["key"].startswith(DEGREE_PREFIX)]) == 4 + 1 + 1 + 1
    assert store_snapshot(tmp_path / "dask") == store_snapshot(tmp_path / "serial")
    cites2 = np.load(tmp_path / "d" / "cites2.npy")
    cites2[1, 1234] = 7  # not a paper id
    np.save(tmp_path / "d" / "cites2.npy", cites2)
    with pytest.raises(BadInputError, match=r"cites2.npy.*Got 7 \(row 1234\)"):
        run_spec(spec, tmp_path / "bad", dask=client, **KW)


def test_s3_store_on_dask_through_moto(toy, tmp_path, client, small, monkeypatch):
    """An s3:// store (moto's server on loopback, credentials in the AWS variables) written
    under Dask with a shared scratch equals the single-process local store."""
    s3fs = pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    import preprocess.dask.features as dfeat
    from featurestore.testing.loopback import serve_s3

    monkeypatch.setattr(dfeat, "REMOTE_TASK_BYTES", 256)
    opts, stop = serve_s3(key="k", secret="s")
    try:
        for k, v in {"AWS_ENDPOINT_URL": opts["endpoint_url"], "AWS_ACCESS_KEY_ID": "k",
                     "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
        s3fs.S3FileSystem.clear_instance_cache()
        s3 = s3fs.S3FileSystem(**opts)
        s3.mkdir("dask-preprocess")  # moto's buckets are per process: a name of its own
        spec, _ = toy
        run_spec(spec, tmp_path / "serial", **KW)
        with distributed.get_task_stream(client) as ts:
            run_spec(spec, "s3://dask-preprocess/toy", dask=client,
                     scratch_dir=tmp_path / "scratch", **KW)
        assert _feature_tasks(ts) == 25
        got = _memory_snapshot("s3://dask-preprocess/toy", **opts)
        assert got == store_snapshot(tmp_path / "serial")
        s3.rm("dask-preprocess", recursive=True)
    finally:
        stop()


def test_a_resumed_job_keeps_its_scratch_directory(toy, tmp_path):
    from preprocess.errors import ManifestMismatchError
    from preprocess.jobs.job import Job

    spec, _ = toy
    store, scratch = tmp_path / "store", tmp_path / "scratch"
    job = Job(store, "t", [spec], {}, progress=False, scratch_dir=scratch)
    job.run_step("nodes", lambda: job.writer.add_node_type("n", 3))
    assert job.workdir.startswith(str(scratch))
    job.close()
    again = Job(store, "t", [spec], {}, progress=False)  # no --scratch: the recorded one
    assert again.scratch_dir == str(scratch) and again.tmpdir.startswith(str(scratch))
    again.close()
    with pytest.raises(ManifestMismatchError, match="same --scratch"):
        Job(store, "t", [spec], {}, progress=False, scratch_dir=tmp_path / "other")


def test_mapped_array_by_name(tmp_path):
    from preprocess.dask.features import MappedArray

    a = np.arange(60, dtype=np.float32).reshape(20, 3)
    np.save(tmp_path / "c.npy", a)
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    m = np.load(tmp_path / "c.npy", mmap_mode="r")
    np.testing.assert_array_equal(MappedArray.of(m).open(), a)
    assert MappedArray.of(m[5:]) is None  # a slice: its offset attribute is the parent's
    assert MappedArray.of(np.load(tmp_path / "f.npy", mmap_mode="r")) is None
    assert MappedArray.of(a) is None
