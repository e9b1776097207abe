"""The write lock of a remote store: an atomic create-if-absent, so writers started together
never both hold it (moto's S3 server: conditional PutObject), a stale lock is taken over by one
writer only (If-Match), and a filesystem without an atomic create is refused for writing."""

from __future__ import annotations

import json
import threading

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import featurestore as fs
from featurestore.remote.location import Location
from featurestore.remote.lock import LOCK_NAME, WriteLock

ROUNDS = 50


def _race(make_lock, rounds: int, holders=None) -> list[int]:
    """Per round, how many of two writers started at once took the lock (the locks taken are
    appended to ``holders``, which keeps them held). Any error but the loser's
    ``StoreLockedError`` fails the test with that error, not as a round nobody won."""
    wins, errors = [], []
    for r in range(rounds):
        barrier, got = threading.Barrier(2, timeout=60), []

        def one(r=r, barrier=barrier, got=got):
            try:
                lock = make_lock(r)
                barrier.wait()
                lock.acquire()
                got.append(lock)
            except fs.StoreLockedError:
                pass
            except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
                errors.append(e)

        ts = [threading.Thread(target=one) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wins.append(len(got))
        if holders is not None:
            holders += got
        if errors:
            raise errors[0]
    return wins


def _release(holders) -> None:
    """Release the locks here: a lock dropped to the garbage collector releases itself in
    whatever thread collects it, which may be the in-process moto server's own (a deadlock)."""
    for lock in holders:
        lock.release()


@pytest.fixture(scope="module")
def s3():
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    from featurestore.testing.loopback import serve_s3

    opts, stop = serve_s3("locks", key="k", secret="s")
    try:
        yield opts
    finally:
        stop()


def test_writers_started_together_never_both_hold_the_s3_lock(s3):
    holders = []
    wins = _race(lambda r: WriteLock(Location(f"s3://locks/race{r}.store", s3)), ROUNDS,
                 holders)
    _release(holders)
    assert wins == [1] * ROUNDS


def test_a_stale_s3_lock_is_taken_over_by_one_writer(s3):
    def stale(r):
        loc = Location(f"s3://locks/stale{r}.store", s3)
        path = loc.path(LOCK_NAME)
        if not loc.fs.exists(path):
            loc.fs.pipe_file(path, json.dumps({"host": "gone", "pid": 1, "time": 0}).encode())
        return WriteLock(loc, stale_after=60)

    holders = []
    assert _race(stale, 20, holders) == [1] * 20
    loc = Location("s3://locks/stale0.store", s3)
    held = json.loads(loc.fs.cat_file(loc.path(LOCK_NAME)))
    mine = holders[0]._owner["token"]
    _release(holders)
    assert held["host"] != "gone" and held["token"] == mine


def test_a_fresh_lock_names_its_holder_and_release_frees_it(s3):
    loc = Location("s3://locks/held.store", s3)
    first = WriteLock(loc).acquire()
    with pytest.raises(fs.StoreLockedError, match="names host .* pid"):
        WriteLock(loc).acquire()
    first.release()
    WriteLock(loc).acquire().release()


class NoAtomicCreate(MemoryFileSystem):
    """A filesystem whose create is not atomic (as GCS or HTTP here)."""

    protocol = "noatomic"


def test_a_filesystem_without_atomic_create_is_refused_for_writing():
    fsspec.register_implementation("noatomic", NoAtomicCreate, clobber=True)
    with pytest.raises(fs.UnsupportedRemoteWriteError, match="noatomic://.*local path"):
        fs.create_store("noatomic://x/s.store")
    assert not NoAtomicCreate().exists("/x/s.store/zarr.json")


def test_memory_stores_still_lock():
    w = fs.create_store("memory://locks/m.store")
    with pytest.raises(fs.StoreLockedError):
        fs.create_store("memory://locks/m.store", mode="a")
    w.close()
