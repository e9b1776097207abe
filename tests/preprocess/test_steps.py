"""Declared jobs: StepDef lists run by Job.run_steps, dry runs that call no step, id checks."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import featurestore as fs
from preprocess import Job, PreprocessError, StepContext, StepDef
from preprocess.errors import BadInputError, IdsOutOfRangeInputError, InputNotFoundError
from preprocess.steps.idcheck import check_input_ids
from preprocess.jobs.spec import load_spec
from preprocess.jobs.spec_steps import run_spec, spec_steps

from pp_helpers import make_toy_dataset


def _steps(calls: list, fail_at: str | None = None):
    def make(name):
        def run(ctx):
            calls.append(name)
            if name == fail_at:
                raise RuntimeError("killed")
            if name == "nodes":
                ctx.job.writer.add_node_type("n", 5)
            return {"seen": sorted(ctx.stats)}
        return run

    return [StepDef("scan", make("scan"), {"edge_files": 1}, read_only=True),
            StepDef("nodes", make("nodes"), lambda ctx: {"nodes": 5, "after": len(ctx.stats)}),
            StepDef("last", make("last"), {"disk_bytes": 10})]


def test_run_steps_in_order_then_resume_skips_finished(tmp_path):
    f = tmp_path / "in.npy"
    np.save(f, np.arange(3))
    calls: list = []
    job = Job(tmp_path / "s", "t", [f], progress=False)
    with pytest.raises(RuntimeError, match="killed"):
        job.run_steps(_steps(calls, fail_at="last"), StepContext(job))
    job.close()
    assert calls == ["scan", "nodes", "last"]
    calls.clear()
    job = Job(tmp_path / "s", "t", [f], progress=False)
    stats = job.run_steps(_steps(calls), StepContext(job))
    job.commit()
    assert calls == ["last"]  # the finished steps are not run again
    # each step saw the statistics of the ones before it, finished in this run or before
    assert stats["last"] == {"seen": ["nodes", "scan"]}
    assert stats["nodes"] == {"seen": ["scan"]}
    assert [s.status for s in job.steps] == ["done before", "done before", "ran"]
    assert fs.open_store(tmp_path / "s").num_nodes("n") == 5


def test_dry_run_runs_only_read_only_steps_and_lists_plans(tmp_path):
    f = tmp_path / "in.npy"
    np.save(f, np.arange(3))
    calls: list = []
    job = Job(tmp_path / "s", "t", [f], dry_run=True, progress=False)
    job.run_steps(_steps(calls), StepContext(job))
    assert calls == ["scan"]
    text = job.plan_text()
    for name, plan in (("scan", "edge_files=1"), ("nodes", "after=1"), ("last", "disk_bytes=10")):
        assert name in text and plan in text
    assert not (tmp_path / "s").exists()


def test_spec_dry_run_lists_every_declared_step(tmp_path):
    spec_path, _ = make_toy_dataset(tmp_path / "d")
    names = [s.name for s in spec_steps(load_spec(spec_path))]
    # ids of both renumbered types, reorder, node types, renumbered edges + CSC, columns, splits
    assert names[:2] == ["ids:paper", "ids:author"] and "reorder:venue" in names
    assert "csc:paper__rev_writes__author" in names and names[-1] == "split:valid/paper"
    job = run_spec(spec_path, tmp_path / "store", dry_run=True, progress=False)
    assert [s.name for s in job.steps] == names
    assert {s.status for s in job.steps} == {"planned"}
    assert not (tmp_path / "store").exists()


def test_ogb_errors_are_preprocess_errors():
    from preprocess.ogb.errors import (RawDataError, RawFileNotFoundError, TorchTooOldError,
                                       UnsafePickleError)

    assert issubclass(RawDataError, BadInputError) and issubclass(RawDataError, ValueError)
    assert issubclass(RawFileNotFoundError, InputNotFoundError)
    assert issubclass(RawFileNotFoundError, FileNotFoundError)
    assert issubclass(UnsafePickleError, pickle.UnpicklingError)
    assert issubclass(TorchTooOldError, RuntimeError)
    for cls in (RawDataError, RawFileNotFoundError, UnsafePickleError, TorchTooOldError):
        assert issubclass(cls, PreprocessError) and issubclass(cls, fs.FeatureStoreError)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-3, 12), max_size=40), st.integers(0, 10),
       st.sampled_from(["int64", "int32", "uint16", ">i8"]))
def test_check_input_ids_matches_brute_force(ids, n, dtype):
    a = np.array(ids, dtype=np.int64)
    if dtype == "uint16":
        a = a[a >= 0]
    a = a.astype(dtype)
    bad = [int(v) for v in a if v < 0 or v >= n]
    if not bad:
        out = check_input_ids(a, n, "e.npy", "source")
        assert out.dtype == np.int64 and out.tolist() == a.tolist()
        return
    with pytest.raises(IdsOutOfRangeInputError, match=r"source ids in \[0, \d+\) in e.npy. "
                                                      r"Got -?\d+ in the block at row 7"):
        check_input_ids(a, n, "e.npy", "source", at=7)
    try:
        check_input_ids(a, n, "e.npy", "source", at=7)
    except IdsOutOfRangeInputError as e:  # the smallest if negative, else the largest
        assert f"Got {min(bad) if min(bad) < 0 else max(bad)} " in str(e)


def test_check_input_ids_shapes_and_dtypes():
    with pytest.raises(IdsOutOfRangeInputError, match="1-D"):
        check_input_ids(np.zeros((2, 2), np.int64), 4, "x.npy", "split")
    with pytest.raises(BadInputError, match="integer"):
        check_input_ids(np.zeros(3, np.float32), 4, "x.npy", "split")
