"""The exclusive writer lock of a store.

One writer at a time: :class:`~featurestore.writer.StoreWriter` takes the lock before it
touches anything and holds it until :meth:`~featurestore.writer.StoreWriter.commit` or
``close()``. A second writer on the same path fails at once with
:class:`~featurestore.errors.StoreLockedError` naming the holder.

* Local stores: ``fcntl.flock`` on ``<store>/.featurestore.lock``. The kernel drops the lock
  when its holder dies (even by ``kill -9``), so a crashed job resumes without clean-up. The
  file itself stays (unlinking a flock'd file lets two processes lock two inodes).
* Remote stores (fsspec URLs): a lock object ``<store>/.featurestore.lock`` holding the owner
  (host, pid, a random token) and the time, created only where none is, read back to check
  ownership, deleted on release. A lock older than ``stale_after`` seconds (default one day)
  is taken over with a warning: object stores have no process liveness to ask.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid

from featurestore.errors import StoreLockedError

__all__ = ["LOCK_NAME", "WriteLock"]

log = logging.getLogger(__name__)

#: name of the lock file (local) or object (remote) at the root of a store.
LOCK_NAME = ".featurestore.lock"


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

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
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
        if fs.exists(self.path):
            try:
                held = json.loads(fs.cat_file(self.path))
            except (ValueError, FileNotFoundError):
                held = {}
            age = time.time() - float(held.get("time", 0) or 0)
            if age < self.stale_after:
                raise StoreLockedError(
                    f"Expected no other writer of {self.loc.url}. The lock object {self.path} "
                    f"names host {held.get('host')!r} pid {held.get('pid')} since "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(held.get('time', 0)))} "
                    "UTC; remove it if that writer is gone.")
            log.warning("taking over the stale write lock %s (%.0f s old)", self.path, age)
        me = _owner()
        fs.pipe_file(self.path, json.dumps(me).encode())
        try:
            back = json.loads(fs.cat_file(self.path))
        except (ValueError, FileNotFoundError):
            back = {}
        if back.get("token") != me["token"]:  # another writer raced us and won
            raise StoreLockedError(f"Expected no other writer of {self.loc.url}. Another writer "
                                   f"took the lock object {self.path} at the same time.")
        self._owner = me

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
