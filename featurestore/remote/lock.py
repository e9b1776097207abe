"""The exclusive writer lock of a store.

One writer at a time: :class:`~featurestore.writer.StoreWriter` takes the lock before it
touches anything and holds it until :meth:`~featurestore.writer.StoreWriter.commit` or
``close()``. A second writer on the same path fails at once with
:class:`~featurestore.errors.StoreLockedError` naming the holder.

* Local stores: ``fcntl.flock`` on ``<store>/.featurestore.lock``. The kernel drops the lock
  when its holder dies (even by ``kill -9``), so a crashed job resumes without clean-up. The
  file itself stays (unlinking a flock'd file lets two processes lock two inodes).
* Remote stores (fsspec URLs): a lock object ``<store>/.featurestore.lock`` holding the owner
  (host, pid, a random token) and the time, created by an atomic create-if-absent (S3's
  conditional ``PutObject`` with ``If-None-Match: *``; ``memory://`` within its process), so
  two writers started together cannot both hold it; deleted on release. A lock older than
  ``stale_after`` seconds (default one day) is taken over with a warning (object stores have
  no process liveness to ask) by a write conditional on the stale object's ETag
  (``If-Match``), so two writers taking it over together cannot both win. A filesystem with no
  atomic create (GCS, Azure, HTTP, ...) is refused for writing
  (:class:`~featurestore.errors.UnsupportedRemoteWriteError`): write the store locally, then
  copy it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid

from featurestore.errors import LockUnavailableError, StoreLockedError, UnsupportedRemoteWriteError

__all__ = ["LOCK_NAME", "WriteLock"]

log = logging.getLogger(__name__)

#: name of the lock file (local) or object (remote) at the root of a store.
LOCK_NAME = ".featurestore.lock"
#: fsspec protocols whose ``pipe_file(mode="create")`` is an atomic create-if-absent.
ATOMIC_CREATE = ("s3", "s3a", "memory")


def _owner() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex,
            "time": time.time()}


class WriteLock:
    """An exclusive lock on the store at ``loc`` (the writer's ``Location``).

    Use :meth:`acquire` / :meth:`release`, or ``with``. The store's directory must exist
    (local) before :meth:`acquire`.
    """

    def __init__(self, loc, stale_after: float = 86400.0):
        self.loc = loc
        self.stale_after = float(stale_after)
        self.path = loc.path(LOCK_NAME)
        self._fd = -1
        self._owner: dict | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd >= 0 or self._owner is not None

    def acquire(self) -> WriteLock:
        """Take the lock or raise :class:`StoreLockedError` (never waits)."""
        if self.held:
            return self
        if self.loc.is_local:
            self._acquire_local()
        else:
            self._acquire_remote()
        return self

    def _acquire_local(self) -> None:
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except IsADirectoryError as e:
            raise self._unavailable(e, "a directory is in its place: remove it") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if not isinstance(e, BlockingIOError):
                os.close(fd)
                raise self._unavailable(e, "this file system may have no file locks (NFS "
                                        "without lockd): write the store to a local disk, "
                                        "then copy it") from e
            try:
                holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise StoreLockedError(
                f"Expected no other writer of {self.loc.url}. Another process holds its write "
                f"lock ({self.path}: {holder or 'owner unknown'}); wait for it to finish or "
                "stop it. A crashed writer releases the lock by itself.") from None
        self._owner = _owner()
        data = json.dumps(self._owner).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        self._fd = fd

    def _acquire_remote(self) -> None:
        fs = self.loc.fs
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        if not set(protocols) & set(ATOMIC_CREATE):
            raise UnsupportedRemoteWriteError(
                f"Expected a filesystem with an atomic create-if-absent "
                f"({', '.join(ATOMIC_CREATE)}) to write {self.loc.url}: {protocols[0]}:// has "
                "none, so two writers could both take the write lock. Write the store to a "
                "local path, then copy it.")
        me = _owner()
        data = json.dumps(me).encode()
        try:
            fs.pipe_file(self.path, data, mode="create")
        except (FileExistsError, OSError) as e:
            if not isinstance(e, FileExistsError) and not _precondition_failed(e):
                raise
            self._take_over_stale(fs, data)
        self._owner = me

    def _take_over_stale(self, fs, data: bytes) -> None:
        """The lock object exists: raise naming its holder, or replace it when stale (a
        write conditional on its ETag: of two writers taking it over, one wins)."""
        try:  # the ETag first: content read after it is at least as new (never older)
            etag = fs.info(self.path, refresh=True).get("ETag")
            held = json.loads(fs.cat_file(self.path))
        except FileNotFoundError:  # released in between: try once more to create it
            held, etag = None, None
        except ValueError:
            held = {}
        if held is None:
            try:
                fs.pipe_file(self.path, data, mode="create")
                return
            except (FileExistsError, OSError) as e:
                if not isinstance(e, FileExistsError) and not _precondition_failed(e):
                    raise
                raise self._locked({}) from None
        age = time.time() - float(held.get("time", 0) or 0) if isinstance(held, dict) else 0.0
        if age < self.stale_after:
            raise self._locked(held if isinstance(held, dict) else {})
        log.warning("taking over the stale write lock %s (%.0f s old)", self.path, age)
        if not etag:
            raise self._locked(held)
        try:
            fs.pipe_file(self.path, data, IfMatch=etag)
        except OSError as e:
            if _precondition_failed(e):
                raise StoreLockedError(f"Expected no other writer of {self.loc.url}. Another "
                                       f"writer took over the stale lock object {self.path} at "
                                       "the same time.") from None
            raise

    def _unavailable(self, err: OSError, hint: str) -> LockUnavailableError:
        return LockUnavailableError(
            f"Expected to take the write lock {self.path} of {self.loc.url}. Got "
            f"{type(err).__name__}: {err.strerror or err} instead; {hint}.")

    def _locked(self, held: dict) -> StoreLockedError:
        return StoreLockedError(
            f"Expected no other writer of {self.loc.url}. The lock object {self.path} "
            f"names host {held.get('host')!r} pid {held.get('pid')} since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(held.get('time', 0) or 0))} "
            "UTC; remove it if that writer is gone.")

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the descriptor releases the flock
        elif self._owner is not None and not self.loc.is_local:
            try:
                back = json.loads(self.loc.fs.cat_file(self.path))
                if back.get("token") == self._owner["token"]:
                    self.loc.fs.rm(self.path)
            except (ValueError, FileNotFoundError):
                pass
        self._owner = None

    def __enter__(self) -> WriteLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _precondition_failed(e: BaseException) -> bool:
    """Whether ``e`` is S3's answer to a failed conditional write (HTTP 412)."""
    text = f"{e} {e.__cause__ or ''}"
    return "PreconditionFailed" in text or "412" in text or "At least one of the pre-conditions" \
        in text
