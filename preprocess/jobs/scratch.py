"""Where a job's files go besides the store: the scratch directory of a step (emptied when a
run starts) and the work directory whose files later steps read (kept across runs); both are
removed when the job commits."""

from __future__ import annotations

import hashlib
import os
import tempfile

__all__ = ["SCRATCH_KEY", "WORK_KEY", "store_tag", "scratch_root", "step_tmpdir", "work_dir"]

SCRATCH_KEY = ".preprocess/tmp"
WORK_KEY = ".preprocess/work"


def store_tag(loc) -> str:
    """A hash of the store's normalised location (``out``, ``./out`` and ``/abs/out/``
    are one store), naming its scratch folders so that a resumed job finds them."""
    where = (os.path.realpath(loc.root) if loc.is_local else
             loc.fs.unstrip_protocol(loc.root).rstrip("/"))
    return hashlib.sha1(where.encode()).hexdigest()[:16]


def scratch_root(loc, scratch_dir: str) -> str:
    """``scratch_dir/featurestore-<hash of the store's location>`` (one folder per store)."""
    return os.path.join(scratch_dir, f"featurestore-{store_tag(loc)}")


def step_tmpdir(loc, scratch_dir: str | None) -> str | None:
    """A step's scratch directory: under ``scratch_dir``, else inside the store when local;
    None (the system's) for a remote store without ``scratch_dir``."""
    if scratch_dir is not None:
        return os.path.join(scratch_root(loc, scratch_dir), "tmp")
    return loc.path(SCRATCH_KEY) if loc.is_local else None


def work_dir(loc, scratch_dir: str | None) -> str:
    """The job's work directory: under ``scratch_dir``, else inside the store when local,
    else under the system's temp directory."""
    if scratch_dir is not None:
        return os.path.join(scratch_root(loc, scratch_dir), "work")
    if loc.is_local:
        return loc.path(WORK_KEY)
    return os.path.join(tempfile.gettempdir(), f"featurestore-work-{store_tag(loc)}")
