"""Keep a forked child from breaking its parent's remote reads.

fsspec and zarr each run one asyncio loop in a thread; every HTTP or S3 connection of the
process is registered in that loop's epoll instance. ``fork`` shares the epoll instance (and
the sockets) with the child, but not the thread. When the child then drops an inherited
filesystem or connector (fsspec's ``close_session`` finalizer, aiohttp's ``__del__``, a
``gc`` pass over the parent's garbage), closing its transports unregisters the *parent's*
sockets from the shared epoll: the parent's next read on a pooled connection gets its answer
but is never woken, and fails after the read timeout (``FSTimeoutError``, seen in a
DataLoader-style parent after one forked worker exited; docs/benchmarks.md).

:func:`install` (run on import of :mod:`featurestore`) registers an ``os.register_at_fork``
hook that, in the child only, gives each inherited loop a selector of its own and marks it
not running: closing an inherited transport then touches nothing the parent uses, and
``close_session`` does not wait a second for a loop thread that does not exist. The child's
own reads use fresh loops (fsspec and zarr reset theirs after fork).

:class:`Lock` and :class:`RLock` are ``threading`` locks made again in a forked child: a
lock that another thread of the parent held at the moment of ``fork`` is never released in
the child (that thread does not exist there), and the child's first ``with lock:`` would hang
forever. The readers' and samplers' locks are these.
"""

from __future__ import annotations

import os
import selectors
import sys
import threading
import weakref

__all__ = ["install", "inherited_loops", "Lock", "RLock", "PerProcess"]

_LOOP_MODULES = ("fsspec.asyn", "zarr.core.sync")  # each keeps its loop in ``loop[0]``
_pending: list = []
_installed = False
_locks: weakref.WeakSet = weakref.WeakSet()


class Lock:
    """A ``threading.Lock`` that a forked child gets unlocked (see the module docstring).

    Pickles as a new, unlocked lock, so objects holding one pickle for spawned workers.
    """

    __slots__ = ("_lock", "__weakref__")
    _factory = staticmethod(threading.Lock)

    def __init__(self):
        self._lock = self._factory()
        _locks.add(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """As ``threading.Lock.acquire``."""
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        """As ``threading.Lock.release``."""
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc) -> None:
        self._lock.release()

    def __reduce__(self):
        return (type(self), ())

    def _renew(self) -> None:
        self._lock = self._factory()


class RLock(Lock):
    """A ``threading.RLock`` that a forked child gets unlocked."""

    __slots__ = ()
    _factory = staticmethod(threading.RLock)


class PerProcess:
    """A value of this process: ``make()`` on first use, and again on first use in a forked
    child (a client bound to the parent's event loop, sharing its connections, is not the
    child's to use).

    Parameters
    ----------
    make
        Makes the value.
    first
        The value of the calling process, when it exists already (``None``: made on use).
    """

    def __init__(self, make, first=None):
        self._make = make
        self._value, self._pid = first, (os.getpid() if first is not None else -1)
        self._lock = Lock()

    def get(self):
        """Return the value of the calling process."""
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._value, self._pid = self._make(), os.getpid()
        return self._value

    def drop(self) -> None:
        """Forget the value (the next :meth:`get` makes one)."""
        with self._lock:
            self._value, self._pid = None, -1


def inherited_loops() -> list:
    """The IO loops of fsspec and zarr in this process (modules not imported are skipped)."""
    loops = []
    for name in _LOOP_MODULES:
        mod = sys.modules.get(name)
        holder = getattr(mod, "loop", None) if mod is not None else None
        loop = holder[0] if holder else None
        if loop is not None and loop not in loops:
            loops.append(loop)
    return loops


def _before_fork() -> None:
    _pending[:] = inherited_loops()


def _after_fork_in_parent() -> None:
    _pending.clear()


def _after_fork_in_child() -> None:
    for lock in list(_locks):  # the child has one thread: nobody holds them here
        lock._renew()
    for loop in _pending:
        # asyncio has no public way to detach a loop from its selector; these two attributes
        # of BaseSelectorEventLoop have been stable since Python 3.4.
        if hasattr(loop, "_selector"):
            loop._selector = selectors.SelectSelector()  # unknown fds: removing one is a no-op
        if hasattr(loop, "_thread_id"):
            loop._thread_id = None  # is_running() is False: no cross-thread call to it
    _pending.clear()


def install() -> None:
    """Register the fork hooks once per process (idempotent)."""
    global _installed
    if _installed or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
    _installed = True
