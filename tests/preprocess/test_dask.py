"""Preprocessing on Dask: the CSC ranges (and feature blocks) as tasks give the single-process
store, byte for byte."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

import preprocess.dask.csc as dcsc
import preprocess.jobs.variants as variants
import preprocess.steps.csc as csc
from preprocess.sources import from_npy
from preprocess.jobs.spec_steps import run_spec

from pp_helpers import make_toy_dataset, store_snapshot

distributed = pytest.importorskip("distributed")


def _small_ranges(monkeypatch, work_bytes):
    """Plans with little room per range, so that a small graph has many destination ranges
    (the plan is made by the driver and travels with the tasks)."""
    real = csc.plan_csc

    def plan(*a, **kw):
        return dataclasses.replace(real(*a, **kw), work_bytes=work_bytes)

    monkeypatch.setattr(csc, "plan_csc", plan)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    spec, _ = make_toy_dataset(root / "d", reorder="degree", n_cites=6000)
    return spec


def _manifest_ranges(store):
    import json

    m = json.loads((store / ".preprocess" / "manifest.json").read_text())
    return {k: v["stats"].get("ranges") for k, v in m["steps"].items() if k.startswith("csc:")}


@pytest.mark.parametrize("work_bytes", [1000, 4000], ids=["80-ranges", "19-ranges"])
def test_threads_cluster_gives_the_same_store(toy, tmp_path, monkeypatch, work_bytes):
    _small_ranges(monkeypatch, work_bytes)
    run_spec(toy, tmp_path / "serial", budget_bytes=16 << 20, progress=False)
    ranges = _manifest_ranges(tmp_path / "serial")
    assert max(ranges.values()) > 3  # the test is about many ranges
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as ts:
            run_spec(toy, tmp_path / "dask", budget_bytes=16 << 20, progress=False,
                     dask=client)
    assert _manifest_ranges(tmp_path / "dask") == ranges
    assert len([t for t in ts.data if t["key"].startswith("_range_task")]) == \
        sum(r for r in ranges.values() if r > 1)
    assert store_snapshot(tmp_path / "dask") == store_snapshot(tmp_path / "serial")


def test_two_worker_processes_give_the_same_store(toy, tmp_path, monkeypatch):
    from dask_small import small_blocks

    from preprocess.dask.features import TASK_PREFIX

    _small_ranges(monkeypatch, 1000)
    small_blocks(monkeypatch.setattr)  # in the driver: the layout travels with the tasks
    run_spec(toy, tmp_path / "serial", budget_bytes=16 << 20, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        with distributed.get_task_stream(client) as ts:
            run_spec(toy, tmp_path / "dask", budget_bytes=16 << 20, progress=False,
                     dask=client)
    tasks = [t for t in ts.data if t["key"].startswith("_range_task")]
    # every edge type with more than one range sorted them as tasks
    assert len(tasks) == sum(r for r in _manifest_ranges(tmp_path / "serial").values() if r > 1)
    # paper/feat (400 rows, 16-row blocks) written by the two processes
    feature_tasks = [t for t in ts.data if t["key"].startswith(TASK_PREFIX)]
    assert len(feature_tasks) == 25
    assert len({t["worker"] for t in feature_tasks}) == 2
    assert store_snapshot(tmp_path / "dask") == store_snapshot(tmp_path / "serial")


def test_file_sources_pickle_by_name(tmp_path):
    e = np.arange(2 * 50_000, dtype=np.int64).reshape(2, -1)
    np.save(tmp_path / "e.npy", e)
    src = from_npy(tmp_path / "e.npy").reversed()
    data = pickle.dumps(src)
    assert len(data) < 1000  # the file name, not 800 kB of ids
    s, d = next(pickle.loads(data).iter_blocks())
    np.testing.assert_array_equal(s, e[1])
    np.testing.assert_array_equal(d, e[0])


def test_dask_client_addresses():
    from preprocess.dask.run import dask_client
    from preprocess.errors import PreprocessError

    with pytest.raises(PreprocessError, match="local:N with N >= 1"):
        with dask_client("local:0"):
            pass
    with dask_client(None) as c:
        assert c is None


def test_spec_command_with_a_scheduler_address(toy, tmp_path, capsys, monkeypatch):
    import argparse

    from preprocess import cli

    _small_ranges(monkeypatch, 1000)
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    run_spec(toy, tmp_path / "serial", budget_bytes=16 << 20, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        args = parser.parse_args(["preprocess", "spec", str(toy), str(tmp_path / "dask"),
                                  "--memory", "16MiB", "--dask", cluster.scheduler_address,
                                  "--no-progress"])
        assert args.func(args) == 0
    assert "csc:paper__cites__paper" in capsys.readouterr().out
    assert store_snapshot(tmp_path / "dask") == store_snapshot(tmp_path / "serial")


def _csc_of(source, **kw):
    got = {}

    def indices_out(blocks, n, dtype):
        got["indices"] = np.concatenate([np.array(b) for b in blocks] or [np.empty(0, dtype)])

    stats = variants.coo_to_csc(source, indptr_out=lambda a: got.setdefault("indptr", np.array(a)),
                           indices_out=indices_out, progress=False, budget_bytes=16 << 20, **kw)
    return got["indptr"], got["indices"], stats


def test_histogram_blocks_as_tasks(tmp_path, monkeypatch):
    """The CSC histogram as one Dask task per input block (npy blocks, a reversed npy file,
    a parquet file as one task): the same CSC and counts as the driver's pass, against a
    NumPy reference; an id out of range raises the single-process error (same edge)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from preprocess.sources import concat, from_parquet

    real = csc.plan_csc
    monkeypatch.setattr(csc, "plan_csc", lambda *a, **kw: dataclasses.replace(
        real(*a, **kw), block_edges=700, work_bytes=4000))
    rng = np.random.default_rng(3)
    e1 = rng.integers(0, 300, size=(2, 5000))
    e2 = rng.integers(0, 300, size=(2, 1200)).astype(np.int32)
    e3 = rng.integers(0, 300, size=(2, 900))
    np.save(tmp_path / "e1.npy", e1)
    np.save(tmp_path / "e2.npy", e2)
    pq.write_table(pa.table({"src": e3[0], "dst": e3[1]}), tmp_path / "e3.parquet")
    src = concat(from_npy(tmp_path / "e1.npy"), from_npy(tmp_path / "e2.npy").reversed(),
                 from_parquet(tmp_path / "e3.parquet"))
    s = np.concatenate([e1[0], e2[1], e3[0]])
    d = np.concatenate([e1[1], e2[0], e3[1]])
    want_ptr, want_idx, _ = _csc_of(src, num_src=300, num_dst=300)
    np.testing.assert_array_equal(want_ptr, np.concatenate([[0], np.cumsum(
        np.bincount(d, minlength=300))]))
    np.testing.assert_array_equal(want_idx, s[np.lexsort((s, d))])
    bad = e1.copy()
    bad[1, 3333] = 300
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(csc.IdsOutOfRangeInputError) as single:
        _csc_of(concat(from_npy(tmp_path / "e2.npy"), from_npy(tmp_path / "bad.npy")),
                num_src=300, num_dst=300)
    assert "at edge 3333" in str(single.value)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as ts:
            ptr, idx, stats = _csc_of(src, num_src=300, num_dst=300, dask=client)
        with pytest.raises(csc.IdsOutOfRangeInputError) as tasks:
            _csc_of(concat(from_npy(tmp_path / "e2.npy"), from_npy(tmp_path / "bad.npy")),
                    num_src=300, num_dst=300, dask=client)
    assert str(tasks.value) == str(single.value)
    np.testing.assert_array_equal(ptr, want_ptr)
    np.testing.assert_array_equal(idx, want_idx)
    assert stats["edges_in"] == 7100
    # 8 blocks of e1, 2 of e2 (reversed), the parquet file whole
    assert len([t for t in ts.data if t["key"].startswith(dcsc.HIST_TASK_PREFIX)]) == 8 + 2 + 1


def test_remote_store_without_scratch_is_refused_before_it_is_touched(toy):
    """--dask on a remote store without --scratch is refused before the job opens the store:
    with force=True a finished store stays as it was (it used to be wiped first)."""
    import fsspec

    from preprocess.errors import PreprocessError

    url = "memory://review-dask-nowipe/st"
    run_spec(toy, url, progress=False)
    mem = fsspec.filesystem("memory")
    before = {p: mem.cat_file(p) for p in mem.find("/review-dask-nowipe")}
    with pytest.raises(PreprocessError, match="--scratch"):
        run_spec(toy, url, dask=object(), force=True, progress=False)  # any client: refused
    assert {p: mem.cat_file(p) for p in mem.find("/review-dask-nowipe")} == before
    mem.rm("/review-dask-nowipe", recursive=True)
