"""Pieces both OGB jobs use: label conversion, id checks, scratch files."""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from preprocess.steps.diskmap import open_npy
from preprocess.steps.idcheck import check_input_ids
from preprocess.ogb.errors import RawDataError

#: elements per block when converting per-node arrays.
BLOCK = 1 << 22


def labels_to_int(blocks: Iterable[np.ndarray], n: int, out_path: str, *, name: str,
                  num_classes: int | None = None) -> np.ndarray:
    """Float labels (NaN = none) to int64 with ``-1`` for none, streamed into ``out_path``.

    A label of ``-1`` stays ``-1`` (MAG240M's hidden test labels). Any other value must be
    an integer in ``[0, num_classes)``; otherwise :class:`RawDataError` names ``name`` and
    the first bad node. Returns the result memory-mapped read-only.
    """
    out = open_npy(out_path + ".partial", mode="w+", dtype=np.int64, shape=(n,))
    lo = 0
    for b in blocks:
        b = np.asarray(b).reshape(-1)
        if lo + b.size > n:
            raise RawDataError(f"Expected {n} labels in {name}. Got more.")
        if b.dtype.kind == "f":
            nan = np.isnan(b)
            v = np.where(nan, -1.0, b)
            bad = (v != np.floor(v)) | (v < -1)
        elif b.dtype.kind in "iu":
            v = b.astype(np.int64)
            bad = v < -1
        else:
            raise RawDataError(f"Expected numeric labels in {name}. Got dtype {b.dtype}.")
        if num_classes is not None:
            bad |= v >= num_classes
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise RawDataError(f"Expected labels that are NaN, -1 or a class in [0, "
                               f"{num_classes if num_classes is not None else 'inf'}) in {name}. "
                               f"Got {b[i]!r} for node {lo + i}.")
        out[lo:lo + b.size] = v
        lo += b.size
    if lo != n:
        raise RawDataError(f"Expected {n} labels in {name}. Got {lo} instead.")
    out.flush()
    del out
    os.replace(out_path + ".partial", out_path)
    return np.load(out_path, mmap_mode="r")


def check_ids(ids, n: int, name: str, what: str) -> np.ndarray:
    """1-D int64 node ids in ``[0, n)`` or :class:`RawDataError` naming the file."""
    return check_input_ids(ids, n, name, what, error=RawDataError)


def scratch_file(job, name: str) -> str:
    """A path in the job's scratch directory (inside the store; removed when it commits)."""
    os.makedirs(job.tmpdir, exist_ok=True)
    return os.path.join(job.tmpdir, name)
