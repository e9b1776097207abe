"""Resumable jobs: skip finished steps, refuse changed inputs, --force, and SIGKILL + resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import featurestore as fs
from preprocess import Job
from preprocess.errors import ManifestMismatchError
from preprocess.jobs.job import MANIFEST_KEY
from preprocess.jobs.spec_steps import run_spec

from pp_helpers import make_toy_dataset, store_snapshot

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _job(tmp_path, inputs, **kw):
    return Job(tmp_path / "store", "t", inputs, {"k": 1}, progress=False, **kw)


def test_steps_are_skipped_on_rerun(tmp_path):
    f = tmp_path / "in.npy"
    np.save(f, np.arange(10))
    ran = []
    for _ in range(2):
        job = _job(tmp_path, [f])

        def nodes(job=job):
            ran.append(1)
            job.writer.add_node_type("n", 10)
            return {"rows": 10}

        stats = job.run_step("nodes", nodes)
        assert stats == {"rows": 10}
        job.commit()
    assert ran == [1]
    assert "done before" in job.summary()
    man = json.loads((tmp_path / "store" / MANIFEST_KEY).read_text())
    assert man["complete"] and man["inputs"][0]["size"] == os.path.getsize(f)


def test_changed_input_or_option_is_refused_then_forced(tmp_path):
    f = tmp_path / "in.npy"
    np.save(f, np.arange(10))
    job = _job(tmp_path, [f])
    job.run_step("nodes", lambda: job.writer.add_node_type("n", 10))
    job.close()  # the run stops (as a crash would) and releases the write lock
    np.save(f, np.arange(11))
    with pytest.raises(ManifestMismatchError, match="in.npy changed.*--force"):
        _job(tmp_path, [f])
    with pytest.raises(ManifestMismatchError, match="option k: 1 -> 2"):
        Job(tmp_path / "store", "t", [f], {"k": 2}, progress=False)
    job = _job(tmp_path, [f], force=True)
    assert not job.done("nodes")
    job.run_step("nodes", lambda: job.writer.add_node_type("n", 11))
    job.commit()
    assert fs.open_store(tmp_path / "store").num_nodes("n") == 11


def test_foreign_store_is_not_replaced(tmp_path):
    w = fs.create_store(tmp_path / "store")
    w.add_node_type("n", 3)
    w.commit()
    with pytest.raises(fs.StoreExistsError, match="--force"):
        _job(tmp_path, [])
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(fs.StoreExistsError):
        Job(tmp_path / "other", "t", [], {}, progress=False, force=True)
    assert (tmp_path / "other" / "keep.txt").exists()


def test_a_second_job_on_a_store_being_written_names_the_live_writer(tmp_path):
    """The same job started twice: the second is told who holds the store's write lock, not
    to pass --force (which would destroy the first one's work); issue 23 item 10."""
    f = tmp_path / "in.npy"
    np.save(f, np.arange(10))
    w = fs.create_store(tmp_path / "store")  # a writer holding the lock, no manifest yet
    w.add_node_type("n", 3)
    with pytest.raises(fs.StoreLockedError, match=r'"pid": \d+'):
        _job(tmp_path, [f])
    w.commit()  # the writer is done: now the store is foreign to this job
    with pytest.raises(fs.StoreExistsError, match="--force"):
        _job(tmp_path, [f])
    # a manifest of other options, its writer still running
    job = _job(tmp_path / "b", [f])
    with pytest.raises(fs.StoreLockedError, match=r'"pid": \d+'):
        Job(tmp_path / "b" / "store", "t", [f], {"k": 2}, progress=False)
    job.close()
    with pytest.raises(ManifestMismatchError):
        Job(tmp_path / "b" / "store", "t", [f], {"k": 2}, progress=False)


def test_write_lock_that_cannot_be_taken_is_named(tmp_path, monkeypatch):
    import errno
    import fcntl

    from featurestore.remote.location import Location
    from featurestore.remote.lock import LOCK_NAME, WriteLock

    (tmp_path / "a.store").mkdir()
    (tmp_path / "a.store" / LOCK_NAME).mkdir()
    with pytest.raises(fs.LockUnavailableError, match=f"{LOCK_NAME}.*a directory"):
        WriteLock(Location(str(tmp_path / "a.store"))).acquire()

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(fs.LockUnavailableError, match="No locks available.*local disk"):
        fs.create_store(tmp_path / "b.store")


def test_sigkill_mid_step_then_resume_equals_uninterrupted(tmp_path):
    spec, _ = make_toy_dataset(tmp_path / "data", reorder="degree")
    run_spec(spec, tmp_path / "clean", budget_bytes=16 << 20, progress=False)
    want = store_snapshot(tmp_path / "clean")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for k in (1, 4, 9, 15):  # kill points in different steps (orig ids, csc, features)
        store = tmp_path / f"killed-{k}"
        p = subprocess.run([sys.executable, os.path.join(HERE, "kill_run.py"), spec, str(store),
                            str(k)], env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == -9, p.stderr[-2000:]
        with pytest.raises(fs.IncompleteStoreError):
            fs.open_store(store)
        job = run_spec(spec, store, budget_bytes=16 << 20, progress=False)
        assert job.resumed
        assert store_snapshot(store) == want


def test_remote_store_through_fsspec(tmp_path):
    from preprocess.jobs.edges import run_edges_job

    e = np.random.default_rng(0).integers(0, 100, (2, 1000))
    np.save(tmp_path / "e.npy", e)
    url = f"memory://preprocess-test/{tmp_path.name}"
    job = run_edges_job(tmp_path / "e.npy", url, coalesce=True, progress=False,
                        budget_bytes=64 << 20)
    assert [st.status for st in job.steps] == ["ran"] * 3
    s = fs.open_store(url)
    assert s.num_edges() == len(set(zip(e[0], e[1])))
    job = run_edges_job(tmp_path / "e.npy", url, coalesce=True, progress=False,
                        budget_bytes=64 << 20)
    assert [st.status for st in job.steps] == ["done before"] * 3


def test_scratch_folder_is_the_same_for_every_spelling_of_the_store(tmp_path, monkeypatch):
    """out, ./out, /abs/out and /abs/out/ are one store: a resumed job finds its scratch."""
    f = tmp_path / "in.npy"
    np.save(f, np.arange(10))
    scratch = tmp_path / "scratch"
    monkeypatch.chdir(tmp_path)
    roots = set()
    for spelling in ("out", "./out", str(tmp_path / "out"), str(tmp_path / "out") + "/"):
        job = Job(spelling, "t", [f], {"k": 1}, progress=False, scratch_dir=str(scratch))
        roots.add(job.tmpdir)
        job.close()
    assert len(roots) == 1


def test_kill_after_the_store_committed_is_finished_on_rerun(tmp_path, monkeypatch):
    """A job killed between the store's commit and the manifest's update: the rerun marks the
    manifest complete and removes the scratch files instead of leaving them forever."""
    f = tmp_path / "in.npy"
    np.save(f, np.arange(10))
    scratch = tmp_path / "scratch"
    job = Job(tmp_path / "store", "t", [f], {"k": 1}, progress=False, scratch_dir=str(scratch))
    job.run_step("nodes", lambda: (job.writer.add_node_type("n", 10), {"rows": 10})[-1])
    os.makedirs(job.workdir, exist_ok=True)
    (open(os.path.join(job.workdir, "left.bin"), "wb")).close()
    job.writer.commit()  # ... and the process dies here, before the manifest is updated
    job.close()
    assert any(scratch.iterdir())
    again = Job(tmp_path / "store", "t", [f], {"k": 1}, progress=False,
                scratch_dir=str(scratch))
    assert again.complete
    manifest = json.loads((tmp_path / "store" / MANIFEST_KEY).read_text())
    assert manifest["complete"] is True and not any(scratch.iterdir())
