"""Conformance tests for row readers, shipped with the package (as ``zarr.testing``).

A backend's test file subclasses :class:`RowReaderTests` and defines ``make_reader``::

    from featurestore.testing.conformance import RowReaderTests, open_rows, write_array_store

    class TestMyRows(RowReaderTests):
        def make_reader(self, array):
            url = write_array_store(array, self.tmp_path / "s")
            return open_rows(url, cache_bytes=self.cache_bytes)

Every test compares the reader with NumPy on the same array: gathers and uncached reads
against fancy indexing (random, repeated, empty, sorted ids), slices against slicing, the
bound of a decoded-chunk cache, gathers in a child process after ``fork``, gathers from
several threads at once, and ``close``; and checks what a memory plan reads of every reader
(``io_threads``, ``scratch_bytes()``, the ``reads``/``bytes_read`` counters). Needs ``pytest``.

It re-exports the remote test doubles of :mod:`featurestore.testing.loopback` (an HTTP server with
byte ranges, a filesystem that injects latency and counts round trips).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from featurestore.errors import ClosedStoreError
from featurestore.testing.loopback import LatencyFileSystem, RangeRequestHandler, serve_http
from featurestore.rows.base import RowReader

__all__ = ["RowReaderTests", "write_array_store", "open_rows", "serve_http",
           "LatencyFileSystem", "RangeRequestHandler"]

#: the store key of the array :func:`write_array_store` writes
ARRAY_KEY = "nodes/v/features/feat"


def write_array_store(array: np.ndarray, url, *, storage_options: dict | None = None,
                      **add_features) -> str:
    """Write a one-node-type store whose only feature is ``array``; return its URL.

    Parameters
    ----------
    array
        The rows (2-D).
    url
        Where to write (a directory or an fsspec URL).
    storage_options
        For a remote URL.
    **add_features
        Passed to :meth:`StoreWriter.add_features` (``compressors=...`` for a zarr-read array).
    """
    from featurestore.writer import create_store

    w = create_store(url, mode="w", storage_options=storage_options)
    w.add_node_type("v", array.shape[0])
    w.add_features("v", "feat", array, **add_features)
    w.commit()
    return os.fspath(url)


def open_rows(url, *, storage_options: dict | None = None, **open_kw) -> RowReader:
    """Open the store at ``url`` and return the row reader of its ``v/feat`` array.

    The store stays open as long as the reader is used; closing the reader is enough for the
    tests (the store holds nothing else).
    """
    from featurestore.store import open_store

    store = open_store(url, storage_options=storage_options, **open_kw)
    store.features("v", "feat")
    return store.row_reader(ARRAY_KEY)


def _child_gather(reader: RowReader, ids: np.ndarray, want: np.ndarray, q) -> None:
    try:
        out = np.empty((ids.size,) + reader.shape[1:], reader.dtype)
        reader.gather(ids, out)
        s = np.empty((9,) + reader.shape[1:], reader.dtype)
        reader.read_slice(3, 12, s)
        q.put(bool(np.array_equal(out, want[ids]) and np.array_equal(s, want[3:12])))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put(f"{type(e).__name__}: {e}")


class RowReaderTests:
    """The row-reader contract as pytest tests; subclass and define :meth:`make_reader`.

    Attributes
    ----------
    rows, dim, dtype
        The test array's geometry (a few inner chunks, a partial last chunk).
    cache_bytes
        Bound of a decoded-chunk cache the factory should pass on (small, so that the LRU
        test evicts).
    batch
        Ids per gather of the random-id tests.
    """

    rows = 5000
    dim = 24
    dtype = np.dtype(np.float32)
    cache_bytes = 64 << 10
    #: ids per gather of the random-id tests (16 of them at once in the thread test): fewer
    #: for a slow test server
    batch = 400

    def make_reader(self, array: np.ndarray) -> RowReader:
        """Return a reader of ``array`` (``self.tmp_path`` is a fresh directory)."""
        raise NotImplementedError

    # -- fixtures ---------------------------------------------------------------------------
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.tmp_path = tmp_path
        self._opened: list[RowReader] = []
        yield
        for r in self._opened:
            r.close()

    @pytest.fixture
    def case(self):
        """(reader, array) of random data."""
        rng = np.random.default_rng(17)
        a = (rng.standard_normal((self.rows, self.dim)) * 100).astype(self.dtype)
        r = self.make_reader(a)
        self._opened.append(r)
        return r, a

    def _gather(self, r: RowReader, ids) -> np.ndarray:
        ids = np.asarray(ids)
        out = np.full((ids.size,) + r.shape[1:], 7, r.dtype)
        r.gather(ids, out)
        return out

    # -- the contract -------------------------------------------------------------------------
    def test_shape_dtype_and_flags(self, case):
        """Shape, dtype, row bytes and capability flags; no residency means 1.0."""
        r, a = case
        assert r.shape == a.shape and r.dtype == a.dtype
        assert r.row_bytes == a[0].nbytes
        assert isinstance(r.is_local, bool) and isinstance(r.supports_residency, bool)
        share = r.resident_share(np.arange(10))
        assert 0.0 <= share <= 1.0
        if not r.supports_residency:
            assert share == 1.0
        assert isinstance(r.stats(), dict)

    @pytest.mark.parametrize("kind", ["random", "repeated", "sorted", "one", "all", "int32"])
    def test_gather_equals_fancy_indexing(self, case, kind):
        """A gather equals NumPy fancy indexing of the same ids."""
        r, a = case
        rng = np.random.default_rng(3)
        n = a.shape[0]
        k = self.batch
        ids = {"random": rng.integers(0, n, 2 * k),
               "repeated": np.repeat(rng.integers(0, n, 50), 3)[::-1].copy(),
               "sorted": np.sort(rng.choice(n, k, replace=False)),
               "one": np.array([n - 1]),
               "all": rng.permutation(n),
               "int32": rng.integers(0, n, k).astype(np.int32)}[kind]
        np.testing.assert_array_equal(self._gather(r, ids), a[ids])

    def test_plan_members(self, case):
        """``io_threads``, ``scratch_bytes()`` and the uncached-read counters: ints >= 0."""
        r, _ = case
        for v in (r.io_threads, r.scratch_bytes(), r.reads, r.bytes_read):
            assert isinstance(v, (int, np.integer)) and v >= 0, v

    @pytest.mark.parametrize("read_path", ["direct", "dontneed"])
    def test_read_uncached_equals_fancy_indexing(self, case, read_path):
        """``read_uncached`` equals fancy indexing, into ``out`` or at positions ``at``, and
        counts its reads (at least one, at most one per distinct row) and bytes."""
        r, a = case
        rng = np.random.default_rng(11)
        ids = rng.integers(0, a.shape[0], self.batch)
        ids = np.concatenate([ids, ids[:9]])
        distinct = np.unique(ids).size
        reads, nbytes = r.reads, r.bytes_read
        out = np.full((ids.size,) + a.shape[1:], 7, a.dtype)
        assert isinstance(r.read_uncached(ids, out, read_path), str)
        np.testing.assert_array_equal(out, a[ids])
        assert 1 <= r.reads - reads <= distinct
        assert r.bytes_read - nbytes >= distinct * r.row_bytes
        at = rng.permutation(2 * ids.size)[:ids.size]
        wide = np.full((2 * ids.size,) + a.shape[1:], 7, a.dtype)
        r.read_uncached(ids, wide, read_path, at=at)
        np.testing.assert_array_equal(wide[at], a[ids])
        rest = np.setdiff1d(np.arange(wide.shape[0]), at)
        assert np.all(wide[rest] == 7)
        assert r.read_uncached(np.zeros(0, np.int64), out[:0], read_path) == "none"

    def test_empty_gather(self, case):
        """No ids: nothing read, path ``none``."""
        r, _ = case
        out = np.empty((0,) + r.shape[1:], r.dtype)
        assert r.gather(np.zeros(0, np.int64), out) == "none"

    def test_read_slice_equals_slicing(self, case):
        """``read_slice`` and ``array`` equal NumPy slicing."""
        r, a = case
        n = a.shape[0]
        for lo, hi in ((0, 1), (0, n), (17, 1234), (n - 3, n), (5, 5), (2047, 2049)):
            out = np.full((hi - lo,) + a.shape[1:], 7, a.dtype)
            r.read_slice(lo, hi, out)
            np.testing.assert_array_equal(out, a[lo:hi])
        np.testing.assert_array_equal(np.asarray(r.array()), a)

    def test_chunk_cache_stays_within_its_bound(self, case):
        """A decoded-chunk cache never holds more than its bound, and hits."""
        r, a = case
        st = r.stats()
        if "cache_bytes" not in st:
            pytest.skip(f"{type(r).__name__} keeps no decoded-chunk cache")
        rng = np.random.default_rng(5)
        for _ in range(6):
            ids = rng.integers(0, a.shape[0], 300)
            np.testing.assert_array_equal(self._gather(r, ids), a[ids])
            st = r.stats()
            assert st["cached_bytes"] <= st["cache_bytes"], st
        assert st["misses"] > 0
        if st.get("cached_chunks"):  # chunks small enough to be kept: a repeat hits
            hits = st["hits"]
            np.testing.assert_array_equal(self._gather(r, ids[-1:]), a[ids[-1:]])
            assert r.stats()["hits"] == hits + 1

    def test_gathers_after_fork(self, case):
        """A forked child gathers and slices (its own threads, connections)."""
        r, a = case
        ids = np.random.default_rng(8).integers(0, a.shape[0], self.batch)
        np.testing.assert_array_equal(self._gather(r, ids), a[ids])  # threads, caches warm
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_child_gather, args=(r, ids[::-1].copy(), a, q))
        p.start()
        try:
            got = q.get(timeout=120)
        finally:
            p.join(timeout=30)
        assert got is True, got
        assert p.exitcode == 0
        np.testing.assert_array_equal(self._gather(r, ids), a[ids])  # the parent still reads

    def test_concurrent_gathers_from_threads(self, case):
        """Gathers from 8 threads at once each equal NumPy."""
        r, a = case
        rng = np.random.default_rng(9)
        batches = [rng.integers(0, a.shape[0], self.batch) for _ in range(16)]
        with ThreadPoolExecutor(8) as pool:
            outs = list(pool.map(lambda ids: self._gather(r, ids), batches))
        for ids, out in zip(batches, outs):
            np.testing.assert_array_equal(out, a[ids])

    def test_close(self, case):
        """``close`` is idempotent; later reads raise ``ClosedStoreError``."""
        r, a = case
        np.testing.assert_array_equal(self._gather(r, [1, 2]), a[[1, 2]])
        r.close()
        r.close()  # idempotent
        assert r.closed
        with pytest.raises(ClosedStoreError):
            r.gather(np.array([1]), np.empty((1,) + a.shape[1:], a.dtype))
        with pytest.raises(ClosedStoreError):
            r.read_slice(0, 1, np.empty((1,) + a.shape[1:], a.dtype))
        with pytest.raises(ClosedStoreError):
            r.read_uncached(np.array([1]), np.empty((1,) + a.shape[1:], a.dtype))
