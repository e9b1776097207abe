"""Input locations: a local path or a ``file://`` URL (what every Dask worker can open)."""

from __future__ import annotations

import os

from .errors import InputNotFoundError

__all__ = ["local_input"]


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
