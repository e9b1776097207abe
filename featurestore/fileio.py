"""Positioned writes that either land whole or raise (``pwrite`` may write fewer bytes)."""

from __future__ import annotations

import errno
import os

from featurestore.errors import DiskFullError

__all__ = ["pwrite_all"]


def pwrite_all(fd: int, data, offset: int, what: str, hint: str = "") -> None:
    """Write all of ``data`` (bytes or a contiguous buffer) at ``offset`` of ``fd``.

    ``pwrite`` may write less than asked (a full disk, a file-size limit): the rest is written,
    and a write that makes no progress, or fails with ``ENOSPC``/``EFBIG``, raises
    :class:`~featurestore.errors.DiskFullError` naming ``what`` (the file) and ``hint`` (what
    to do), so callers never record a range as written over a hole. Other errors propagate.
    """
    view, done = memoryview(data).cast("B"), 0
    while done < len(view):
        try:
            n = os.pwrite(fd, view[done:], offset + done)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EFBIG):
                raise DiskFullError(f"No space to write {len(view) - done} bytes at offset "
                                    f"{offset + done} of {what}.{hint}") from e
            raise
        if n <= 0:
            raise DiskFullError(f"Expected to write {len(view)} bytes at offset {offset} of "
                                f"{what}: the disk took no more bytes after {done}.{hint}")
        done += n
