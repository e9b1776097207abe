"""Writes that either land whole or raise :class:`~featurestore.errors.DiskFullError`.

A full disk shows in several shapes: ``ENOSPC`` (``EDQUOT`` over a quota, ``EFBIG`` past a
file-size limit), a ``pwrite`` that writes fewer bytes than asked, and NumPy's
``OSError("200000 requested and 0 written")`` (``ndarray.tofile``, no ``errno``). Every
write path of the store writer and the jobs goes through these helpers, so each of those is
one named error that says which file could not be written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re

from featurestore.errors import DiskFullError, FeatureStoreError
from featurestore.units import format_size

__all__ = ["pwrite_all", "write_file", "disk_full_as_error", "is_disk_full",
           "disk_full_error", "DISK_FULL_ERRNOS"]

#: ``errno`` values of a write that failed for want of space.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

_SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")  # numpy's tofile


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed for want of space (see the module docstring).

    A :class:`~featurestore.errors.FeatureStoreError` (already named) is not."""
    if not isinstance(exc, OSError) or isinstance(exc, FeatureStoreError):
        return False
    if exc.errno in DISK_FULL_ERRNOS:
        return True
    return exc.errno is None and bool(_SHORT_WRITE.match(str(exc)))


def disk_full_error(path, exc: BaseException | None = None, need: int | None = None,
                    hint: str = "") -> DiskFullError:
    """The :class:`DiskFullError` for ``path`` (free space on its file system measured now).

    ``need``: the bytes the write needed, when known; ``hint``: what the user should do
    (by default: free space and run again)."""
    path = os.fspath(path)
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)) or ".")
        free = format_size(st.f_bavail * st.f_frsize)
    except OSError:
        free = "unknown"
    what = f" of {format_size(need)}" if need is not None else ""
    cause = ""
    if isinstance(exc, OSError):
        cause = f" ({exc.strerror or exc})"
    hint = hint or " Free space or choose another output, then run the job again: it resumes."
    return DiskFullError(f"The disk is full: could not write {path}{what} ({free} free)."
                         f"{hint}{cause}")


@contextlib.contextmanager
def disk_full_as_error(path, need: int | None = None, hint: str = ""):
    """Turn a full disk met inside the block into :func:`disk_full_error` for ``path``."""
    try:
        yield
    except OSError as e:
        if not is_disk_full(e):
            raise
        raise disk_full_error(path, e, need, hint) from e


def write_file(path, data, hint: str = "") -> None:
    """Write ``data`` (bytes, or a C-contiguous array) as the whole new file ``path``.

    ``ndarray.tofile`` without its short-write ``OSError``: a full disk is a
    :class:`DiskFullError` naming ``path``.
    """
    view = memoryview(data).cast("B")
    with disk_full_as_error(path, view.nbytes, hint), open(path, "wb") as f:
        f.write(view)


def pwrite_all(fd: int, data, offset: int, what: str, hint: str = "") -> None:
    """Write all of ``data`` (bytes or a contiguous buffer) at ``offset`` of ``fd``.

    ``pwrite`` may write less than asked (a full disk, a file-size limit): the rest is written,
    and a write that makes no progress, or fails with ``ENOSPC``/``EDQUOT``/``EFBIG``, raises
    :class:`~featurestore.errors.DiskFullError` naming ``what`` (the file) and ``hint`` (what
    to do), so callers never record a range as written over a hole. Other errors propagate.
    """
    view, done = memoryview(data).cast("B"), 0
    while done < len(view):
        try:
            n = os.pwrite(fd, view[done:], offset + done)
        except OSError as e:
            if e.errno in DISK_FULL_ERRNOS:
                raise DiskFullError(f"No space to write {len(view) - done} bytes at offset "
                                    f"{offset + done} of {what}.{hint}") from e
            raise
        if n <= 0:
            raise DiskFullError(f"Expected to write {len(view)} bytes at offset {offset} of "
                                f"{what}: the disk took no more bytes after {done}.{hint}")
        done += n
