"""The row-reader contract (featurestore.testing.conformance.RowReaderTests) for every backend."""

from __future__ import annotations

import numpy as np
import zarr

from featurestore.rows import LocalRows, ZarrRows
from featurestore.testing.conformance import RowReaderTests, open_rows, write_array_store


class TestLocalRows(RowReaderTests):
    def make_reader(self, array):
        r = open_rows(write_array_store(array, self.tmp_path / "s"), io_threads=4)
        assert isinstance(r, LocalRows)
        return r


class TestLocalRowsFloat16(TestLocalRows):
    dtype = np.dtype(np.float16)
    dim = 100


class TestZarrRows(RowReaderTests):
    def make_reader(self, array):
        url = write_array_store(array, self.tmp_path / "s", compressors=zarr.codecs.ZstdCodec())
        r = open_rows(url, cache_bytes=self.cache_bytes, io_threads=4)
        assert isinstance(r, ZarrRows)
        return r


class TestZarrRowsSmallChunks(RowReaderTests):
    """Chunks of 256 rows (24 KiB) against a 64 KiB cache: the LRU bound evicts."""

    def make_reader(self, array):
        z = zarr.create_array(store=str(self.tmp_path / "z"), shape=array.shape,
                              dtype=array.dtype, chunks=(256, array.shape[1]),
                              compressors=zarr.codecs.ZstdCodec())
        z[...] = array
        return ZarrRows(zarr.open_array(str(self.tmp_path / "z"), mode="r"),
                        cache_bytes=self.cache_bytes, io_threads=4, name="small-chunks")


def test_local_uncached_reads_at_every_density(tmp_path, monkeypatch):
    """The direct and dontneed paths with several dense spans (a small dense scratch)."""
    import featurestore.rows.local as L

    rng = np.random.default_rng(4)
    a = rng.standard_normal((6000, 384)).astype(np.float16)
    r = open_rows(write_array_store(a, tmp_path / "s"), io_threads=4)
    monkeypatch.setattr(L, "DENSE_SCRATCH_BYTES", 64 << 10)
    try:
        for path in ("direct", "dontneed"):
            for share in (0.002, 0.05, 0.3, 1.0):
                ids = rng.permutation(rng.choice(a.shape[0], max(1, int(share * a.shape[0])),
                                                 replace=False))
                ids = np.concatenate([ids, ids[:7]])
                out = np.empty((ids.size, 384), np.float16)
                r.read_uncached(ids, out, path)
                np.testing.assert_array_equal(out, a[ids])
    finally:
        r.close()


def test_zarr_gather_holds_one_wave_of_chunks():
    """A gather touching many chunks holds at most ``io_threads`` decoded chunks beyond the
    cache at once (every one of them was held until the gather ended)."""
    import gc
    import threading
    import weakref

    z = zarr.create_array(store=zarr.storage.MemoryStore(), shape=(20000, 8), chunks=(100, 8),
                          dtype="float32")
    x = np.random.default_rng(0).standard_normal((20000, 8)).astype(np.float32)
    z[:] = x
    live, peak, lock = [0], [0], threading.Lock()

    def gone():
        with lock:
            live[0] -= 1

    class Counted(ZarrRows):
        def _chunk(self, c):
            data = super()._chunk(c)
            with lock:
                live[0] += 1
                peak[0] = max(peak[0], live[0])
            weakref.finalize(data, gone)
            return data

    r = Counted(z, cache_bytes=0, io_threads=4)
    ids = np.arange(0, 20000, 50)  # two rows in each of the 200 chunks
    out = np.empty((ids.size, 8), np.float32)
    gc.disable()  # only references, not the collector's timing, free the chunks
    try:
        r.gather(ids, out)
    finally:
        gc.enable()
    np.testing.assert_array_equal(out, x[ids])
    assert peak[0] <= 2 * 4 + 1, peak[0]
    r.close()
