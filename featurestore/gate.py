"""The reads in flight of an open store, and its closed flag.

:meth:`ReadGate.close` refuses new reads, then waits for those in flight: a store's memory
maps and descriptors stay alive until the last gather that uses them has returned.
"""

from __future__ import annotations

import contextlib
import os
import time

from featurestore.errors import ClosedStoreError
from featurestore.remote import forksafe

__all__ = ["ReadGate"]


class ReadGate:
    """Counts the reads in flight of the store at ``url`` and refuses reads once it is closed.

    Parameters
    ----------
    url
        The store's URL, for messages.
    """

    def __init__(self, url: str):
        self.url = url
        self._lock = forksafe.Lock()  # guards _inflight and closed
        self._inflight = 0
        self._pid = os.getpid()  # whose reads _inflight counts (a forked child starts at 0)
        self.closed = False

    def check_open(self, what: str = "") -> None:
        """Raise ``ClosedStoreError`` (naming ``what``) once the store is closed."""
        if self.closed:
            raise ClosedStoreError(f"The store {self.url} was closed"
                                   f"{f'; cannot read {what}' if what else ''}. Open it again.")

    def _own_count(self) -> None:
        """In a forked child, forget the parent's reads in flight (their threads are not
        here); the caller holds ``_lock``."""
        if self._pid != os.getpid():
            self._pid, self._inflight = os.getpid(), 0

    def enter(self, what: str) -> None:
        """A read of ``what`` starts: the store's maps and descriptors stay alive until
        :meth:`exit`."""
        with self._lock:
            if self.closed:
                self.check_open(what)
            self._own_count()
            self._inflight += 1

    def exit(self) -> None:
        """A read started by :meth:`enter` ended."""
        with self._lock:
            self._inflight -= 1

    @contextlib.contextmanager
    def using(self, what: str):
        """:meth:`enter` and :meth:`exit` around a block."""
        self.enter(what)
        try:
            yield
        finally:
            self.exit()

    def close(self) -> None:
        """Refuse new reads, then wait for those in flight (close is rare: poll)."""
        with self._lock:
            self.closed = True
            self._own_count()
        while self._inflight:
            time.sleep(0.001)
