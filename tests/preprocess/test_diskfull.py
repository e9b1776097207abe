"""A disk that fills during a job (issue 10, item 7): a named DiskFullError, never SIGBUS, and
the job resumes once there is space. Runs on a small tmpfs, so only as root; skipped otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

from featurestore.errors import DiskFullError
from preprocess.steps.diskmap import map_file, open_npy

from pp_helpers import make_toy_dataset, store_snapshot

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class _Disk:
    def __init__(self, path, remount):
        self.path, self.remount = path, remount


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs; ``remount(size)`` grows it."""
    d = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    d.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")

    def remount(size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(d)], check=True)

    try:
        yield _Disk(d, remount)
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_maps_reserve_their_blocks(small_disk):
    with pytest.raises(DiskFullError, match="big.bin"):
        map_file(small_disk.path / "big.bin", dtype=np.int64, mode="w+", shape=(1 << 20,))
    with pytest.raises(DiskFullError, match="big.npy"):
        open_npy(small_disk.path / "big.npy", mode="w+", dtype=np.int64, shape=(1 << 20,))
    m = map_file(small_disk.path / "ok.bin", dtype=np.int64, mode="w+", shape=(1000,))
    assert m.sum() == 0 and m.shape == (1000,)


WRITE = """
import sys, numpy as np, featurestore as fs
w = fs.create_store(sys.argv[1])
w.add_node_type("v", 4000)
w.add_features("v", "feat", np.ones((4000, 256), np.float32))
"""


def test_writer_on_a_full_disk_names_the_array(small_disk):
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", WRITE, str(small_disk.path / "s")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])  # not -7 (SIGBUS)
    assert "DiskFullError" in p.stderr and "nodes/v/features/feat" in p.stderr


JOB = """
import sys
from preprocess.jobs.spec_steps import run_spec
run_spec(sys.argv[1], sys.argv[2], budget_bytes=16 << 20, progress=False)
"""


def test_job_stops_with_a_named_error_then_resumes(small_disk, tmp_path):
    spec, _ = make_toy_dataset(tmp_path / "data", reorder="degree", n_paper=3000, n_cites=40000)
    env = dict(os.environ, PYTHONPATH=ROOT)
    store = small_disk.path / "store"
    p = subprocess.run([sys.executable, "-c", JOB, spec, str(store)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])  # an error, not a signal
    assert "DiskFullError" in p.stderr or "NotEnoughDiskError" in p.stderr, p.stderr[-2000:]
    small_disk.remount("256M")
    p = subprocess.run([sys.executable, "-c", JOB, spec, str(store)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    from preprocess.jobs.spec_steps import run_spec

    run_spec(spec, tmp_path / "clean", budget_bytes=16 << 20, progress=False)
    assert store_snapshot(store) == store_snapshot(tmp_path / "clean")
