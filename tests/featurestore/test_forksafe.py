"""A forked child that drops inherited remote filesystems leaves the parent's reads working.

Without featurestore.remote.forksafe the child's finalizers unregister the parent's pooled sockets
from the epoll instance they share, and the parent's next read times out.
"""

from __future__ import annotations

import gc
import multiprocessing
import time

import numpy as np
import pytest

import featurestore as fs
from featurestore.remote import forksafe
from featurestore.testing.conformance import write_array_store

aiohttp = pytest.importorskip("aiohttp")
fsspec = pytest.importorskip("fsspec")

SOCK_READ_S = 10  # a lost wake-up shows as this timeout instead of the 60 s default


def _http(**kw):
    timeout = aiohttp.ClientTimeout(total=None, sock_read=SOCK_READ_S)
    return fsspec.filesystem("http", skip_instance_cache=True,
                             client_kwargs={"timeout": timeout}, **kw)


def _in_child(target, *args):
    """Run ``target(*args)`` in a forked child; return what it put on the queue."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(q, *args))
    p.start()
    try:
        return q.get(timeout=60)
    finally:
        p.join(timeout=30)


_HELD: list = []  # what the parent reads through, named nowhere else


@pytest.fixture(autouse=True)
def _held():
    _HELD.clear()
    yield
    _HELD.clear()


def _drop_and_read(q, url):
    _HELD.clear()  # the parent's filesystem (and its pooled connections) finalized here
    gc.collect()
    q.put(len(_http().cat_file(url, start=0, end=10)))


def test_parent_reads_after_a_child_finalized_an_inherited_filesystem(server):
    root, base, _ = server
    blob = np.random.default_rng(0).bytes(50_000)
    (root / "blob").write_bytes(blob)
    url = f"{base}/blob"
    _HELD.append(_http())  # no local name: the child's copy of this frame would keep it alive
    assert _HELD[0].cat_file(url, start=0, end=100) == blob[:100]  # a pooled connection
    assert _in_child(_drop_and_read, url) == 10
    t = time.perf_counter()
    assert _HELD[0].cat_file(url, start=100, end=300) == blob[100:300]
    assert time.perf_counter() - t < SOCK_READ_S  # woken by its own answer, not a timeout


def _opts():
    return {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=None,
                                                               sock_read=SOCK_READ_S)}}


def _drop_store_and_read(q, url):
    _HELD.clear()
    gc.collect()
    with fs.open_store(url, storage_options=_opts()) as s:
        q.put(s.features("v").gather([0, 1]).shape)


@pytest.mark.parametrize("compressed", [False, True], ids=["ranges", "zarr"])
def test_parent_store_reads_after_a_child_dropped_it(server, compressed):
    """Both remote read paths: RangeRows on fsspec's loop, ZarrRows on zarr's."""
    zarr = pytest.importorskip("zarr")
    root, base, _ = server
    x = np.random.default_rng(1).standard_normal((300, 16)).astype(np.float32)
    extra = {"compressors": zarr.codecs.ZstdCodec()} if compressed else {}
    name = f"fork-{compressed}"
    write_array_store(x, root / name, **extra)
    _HELD.append(fs.open_store(f"{base}/{name}", storage_options=_opts()))
    np.testing.assert_array_equal(_HELD[0].features("v").gather([5, 2]), x[[5, 2]])
    assert _in_child(_drop_store_and_read, f"{base}/{name}") == (2, 16)
    t = time.perf_counter()
    np.testing.assert_array_equal(_HELD[0].features("v").gather([7, 299, 0]), x[[7, 299, 0]])
    assert time.perf_counter() - t < SOCK_READ_S
    _HELD.pop().close()


def test_inherited_loops_are_the_running_io_loops():
    fsspec.asyn.get_loop()
    loops = forksafe.inherited_loops()
    assert fsspec.asyn.loop[0] in loops
    assert all(lp.is_running() for lp in loops)


def _acquire_in_child(q, locks):
    q.put([lk.acquire(timeout=5) for lk in locks])


def _held_during_fork(locks, child, *args):
    """Run ``child`` in a process forked while another thread holds every lock of ``locks``."""
    import threading

    taken, done = threading.Event(), threading.Event()

    def hold():
        for lk in locks:
            lk.acquire()
        taken.set()
        done.wait(60)
        for lk in reversed(locks):
            lk.release()

    t = threading.Thread(target=hold)
    t.start()
    taken.wait(10)
    try:
        return _in_child(child, *args)
    finally:
        done.set()
        t.join()


def test_locks_held_by_a_parent_thread_are_free_in_the_child():
    locks = [forksafe.Lock(), forksafe.RLock()]
    assert _held_during_fork(locks, _acquire_in_child, locks) == [True, True]
    assert all(lk.acquire(timeout=5) for lk in locks)  # released in the parent as usual


def test_a_pickled_lock_is_a_new_unlocked_lock():
    import pickle

    for cls in (forksafe.Lock, forksafe.RLock):
        lk = cls()
        lk.acquire()
        twin = pickle.loads(pickle.dumps(lk))
        assert type(twin) is cls and twin.acquire(timeout=1)


def _gather_in_child(q, s, ids):
    q.put(s.features("v").gather(ids).tolist())


def test_store_gathers_in_a_child_forked_while_its_locks_were_held(tmp_path):
    """A DataLoader worker forked while a loader thread of the parent was inside the store's
    locks (opening an array, counting a gather) gathers instead of hanging."""
    x = np.random.default_rng(2).standard_normal((100, 4)).astype(np.float32)
    s = fs.open_store(write_array_store(x, tmp_path / "s"))
    ids = np.array([9, 0, 99])
    locks = [s._lock, s.gate._lock]  # the store's own locks, held as its threads hold them
    got = _held_during_fork(locks, _gather_in_child, s, ids)
    np.testing.assert_array_equal(np.asarray(got, np.float32), x[ids])
    s.close()


def _gather_inherited(q, ids):
    try:
        q.put(_HELD[0].features("v").gather(ids).tolist())
    except Exception as e:  # noqa: BLE001 - reported to the parent
        q.put(f"{type(e).__name__}: {e}")


@pytest.mark.parametrize("compressed", [False, True], ids=["ranges", "zarr"])
def test_child_reads_the_parents_open_remote_store(server, compressed):
    """A forked worker gathers through the store object it inherited (its own client, not the
    parent's), and the parent's reads stay right afterwards (a child reading through the
    parent's pooled connections could hand the parent another request's bytes)."""
    zarr = pytest.importorskip("zarr")
    root, base, _ = server
    x = np.random.default_rng(3).standard_normal((2000, 12)).astype(np.float32)
    extra = {"compressors": zarr.codecs.ZstdCodec()} if compressed else {}
    name = f"inherited-{compressed}"
    write_array_store(x, root / name, **extra)
    _HELD.append(fs.open_store(f"{base}/{name}", storage_options=_opts(), cache_bytes=0))
    ids = np.arange(0, 1000, 7)
    np.testing.assert_array_equal(_HELD[0].features("v").gather(ids), x[ids])
    for k in range(3):
        other = np.arange(1000 + k, 2000, 11)
        got = _in_child(_gather_inherited, other)
        assert not isinstance(got, str), got
        np.testing.assert_array_equal(np.asarray(got, np.float32), x[other])
        np.testing.assert_array_equal(_HELD[0].features("v").gather(ids), x[ids])


def _close_in_child(q, s):
    s.close()
    q.put(s.closed)


def test_close_in_a_child_forked_during_a_parent_gather(tmp_path):
    """The parent's reads in flight at fork are not the child's to wait for."""
    import threading

    x = np.zeros((10, 2), np.float32)
    s = fs.open_store(write_array_store(x, tmp_path / "s"))
    inside, done = threading.Event(), threading.Event()

    def read():
        with s.gate.using("a gather"):  # what a gather holds while it runs
            inside.set()
            done.wait(60)

    t = threading.Thread(target=read)
    t.start()
    inside.wait(10)
    try:
        assert _in_child(_close_in_child, s) is True
    finally:
        done.set()
        t.join()
    s.close()
