"""Writable memory maps whose disk blocks are reserved up front.

Writing through a memory map of a sparse file on a full disk kills the process with SIGBUS
and no message. Every writable scratch or output map of the jobs is made here instead: the
file's blocks are reserved with ``posix_fallocate`` before mapping, so a full disk is a
:class:`~featurestore.errors.DiskFullError` naming the file and the bytes it needed, raised
before anything is written through the map.
"""

from __future__ import annotations

import errno
import os

import numpy as np

from featurestore.errors import DiskFullError
from featurestore.fileio import disk_full_error as _disk_full_error
from featurestore.fileio import is_disk_full

__all__ = ["reserve", "map_file", "open_npy", "disk_full_error"]


def disk_full_error(path: str, need: int | None, exc: OSError | None = None) -> DiskFullError:
    """The error for a full file system under ``path`` (free space measured now)."""
    return _disk_full_error(path, exc, need)


def reserve(path: str | os.PathLike, nbytes: int) -> None:
    """Reserve ``nbytes`` of disk blocks for the existing file ``path``."""
    path = os.fspath(path)
    if nbytes <= 0:
        return
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as e:
        if is_disk_full(e):
            raise disk_full_error(path, nbytes, e) from None
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        # a file system without fallocate: write the last byte of every block instead
        os.ftruncate(fd, max(nbytes, os.fstat(fd).st_size))
    finally:
        os.close(fd)


def map_file(filename, dtype=np.uint8, mode: str = "w+", offset: int = 0,
             shape=None, order: str = "C") -> np.memmap:
    """``np.memmap(filename, dtype, "w+", offset, shape)`` with the file's blocks reserved."""
    if mode != "w+":
        return np.memmap(filename, dtype=dtype, mode=mode, offset=offset, shape=shape,
                         order=order)
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    try:
        with open(filename, "wb") as f:
            f.truncate(max(nbytes, 1))
    except OSError as e:
        if is_disk_full(e):
            raise disk_full_error(os.fspath(filename), nbytes, e) from None
        raise
    reserve(filename, nbytes)
    return np.memmap(filename, dtype=dtype, mode="r+", offset=offset, shape=shape, order=order)


def open_npy(filename, mode: str = "w+", dtype=None, shape=None,
             fortran_order: bool = False) -> np.memmap:
    """``np.lib.format.open_memmap`` (an ``.npy`` file) with the file's blocks reserved."""
    try:
        arr = np.lib.format.open_memmap(filename, mode=mode, dtype=dtype, shape=shape,
                                        fortran_order=fortran_order)
    except OSError as e:
        if is_disk_full(e):
            raise disk_full_error(os.fspath(filename), None, e) from None
        raise
    if mode == "w+":
        reserve(filename, os.path.getsize(filename))
    return arr
