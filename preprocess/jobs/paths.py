"""Input locations: a local path or a ``file://`` URL, and under Dask a ``.npy`` on any fsspec
URL (read by byte range, :mod:`preprocess.sources.remote`)."""

from __future__ import annotations

import os

from preprocess.errors import InputNotFoundError

__all__ = ["local_input", "input_location"]


def local_input(path: str | os.PathLike) -> str:
    """The local path of an input given as a path or a ``file://`` URL.

    Inputs are memory-mapped by the driver and reopened by name on the workers, so they must
    be on a file system every worker mounts (a local disk, NFS); other URLs are refused.
    """
    p = os.fspath(path)
    if "://" not in p:
        return p
    proto, rest = p.split("://", 1)
    if proto == "file":
        return rest if rest.startswith("/") else os.path.abspath(rest)
    raise InputNotFoundError(
        f"Expected a local path or a file:// URL for the input {p}. Got a {proto}:// URL: "
        "inputs are read from a file system every worker mounts; copy them there first.")


def input_location(path: str | os.PathLike, *, urls: bool = False) -> str:
    """:func:`local_input`, or with ``urls`` (a Dask job) an fsspec URL kept as it is.

    A Dask job reads ``.npy`` inputs on any fsspec URL (``s3://``, ``gs://``, ...) by byte
    range in its tasks; the single-process job keeps refusing them.
    """
    p = os.fspath(path)
    if urls and "://" in p and not p.startswith("file://"):
        return p
    return local_input(p)
