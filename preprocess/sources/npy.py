"""``.npy`` edge lists: one ``[2, E]`` (or ``[E, 2]``) file, or two 1-D files, memory-mapped
(an fsspec URL: read by byte range, :mod:`preprocess.sources.remote`)."""

from __future__ import annotations

import os
from functools import partial

import numpy as np

from preprocess.errors import BadInputError
from preprocess.sources.base import ArraySource, EdgeSource, check_exists
from preprocess.sources.remote import is_remote, open_remote_npy

__all__ = ["from_npy", "from_npy_pair", "load_npy"]


def load_npy(path, what: str = "array") -> np.ndarray:
    """Memory-map a ``.npy`` file, with errors that name it (truncated, not npy, pickled)."""
    path = check_exists(path)
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise BadInputError(f"Expected a readable .npy {what} in {path}: {e} "
                            "(truncated or not an .npy file?)") from e
    if not isinstance(arr, np.ndarray):
        raise BadInputError(f"Expected one .npy array in {path}. Got {type(arr).__name__}.")
    return arr


def from_npy(path, *, layout: str = "auto") -> EdgeSource:
    """Edges from one ``.npy`` file of shape ``[2, E]`` (or ``[E, 2]``), memory-mapped.

    ``layout``: ``"2e"``, ``"e2"`` or ``"auto"`` (``[2, E]`` unless the shape is ``[E, 2]``
    with ``E != 2``). An fsspec URL (``s3://...``) is read by byte range
    (:mod:`preprocess.sources.remote`): its header here, its blocks where they are used.
    """
    path = os.fspath(path)
    if is_remote(path):
        return _remote_npy_edges(path, layout)
    arr = load_npy(path, "edge list")
    if arr.ndim != 2 or 2 not in arr.shape:
        raise BadInputError(f"Expected an edge list of shape [2, E] or [E, 2] in {path}. "
                            f"Got shape {arr.shape} instead.")
    if layout == "auto":
        layout = "2e" if arr.shape[0] == 2 else "e2"
    if layout == "2e" and arr.shape[0] == 2:
        out = ArraySource(arr[0], arr[1], path, [path])
    elif layout == "e2" and arr.shape[1] == 2:
        out = ArraySource(arr[:, 0], arr[:, 1], path, [path])
    else:
        out = None
    if out is not None:
        out._reopen = (partial(from_npy, layout=layout), (path,))
        return out
    raise BadInputError(f"Expected layout {layout!r} in {path}. Got shape {arr.shape} instead.")


def _remote_npy_edges(url: str, layout: str) -> EdgeSource:
    """:func:`from_npy` of a URL: a source over two :class:`RemoteArray` views of its rows."""
    arr = open_remote_npy(url, "edge list")
    shape = arr.shape
    if len(shape) != 2 or 2 not in shape:
        raise BadInputError(f"Expected an edge list of shape [2, E] or [E, 2] in {url}. "
                            f"Got shape {shape} instead.")
    if layout == "auto":
        layout = "2e" if shape[0] == 2 else "e2"
    if layout == "2e" and shape[0] == 2:
        s, d = arr.row(0), arr.row(1)
    elif layout == "e2" and shape[1] == 2:
        s, d = arr.col(0), arr.col(1)
    else:
        raise BadInputError(f"Expected layout {layout!r} in {url}. Got shape {shape} instead.")
    return ArraySource(s, d, url, [url])  # pickles by its header (the file is not re-read)


def from_npy_pair(src_path, dst_path) -> EdgeSource:
    """Edges from two 1-D ``.npy`` files of equal length (source ids, destination ids)."""
    s = load_npy(src_path, "source id array")
    d = load_npy(dst_path, "destination id array")
    name = f"{os.fspath(src_path)} + {os.fspath(dst_path)}"
    out = ArraySource(s, d, name, [os.fspath(src_path), os.fspath(dst_path)])
    out._reopen = (from_npy_pair, (os.fspath(src_path), os.fspath(dst_path)))
    return out


