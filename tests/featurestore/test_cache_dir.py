"""``open_store(url, storage_options={"cache_dir": ...})``: a remote store's data files cached
block by block on local disk. Rows equal the local store; rows read once are read again
without a request to the server (counted on the server); a failed fetch leaves no hole; a
rewritten store is never served from the old cache."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pytest
import zarr

import featurestore as fs
from featurestore.remote.location import Location
from featurestore.remote.rangecache import RangeCacheFileSystem
from graph_helpers import random_csc

N, DIM = 5000, 32


def build(path, seed=5):
    """fp32, fp16 and zstd features of one node type; returns the fp32 matrix."""
    rng = np.random.default_rng(seed)
    w = fs.create_store(path, mode="w")
    w.add_node_type("paper", N)
    w.add_edge_type(("paper", "cites", "paper"), *random_csc(rng, N, N, 30000)[:2])
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    w.add_features("paper", "feat", x)
    w.add_features("paper", "half", x.astype(np.float16))
    w.add_features("paper", "zstd", x, compressors=zarr.codecs.ZstdCodec())
    w.commit()
    return x


def data_gets(counts) -> int:
    """GETs of the stores' data files (every file but zarr.json metadata)."""
    return sum(v for k, v in counts.items() if not k.endswith("zarr.json"))


@pytest.fixture(scope="module")
def store(server):
    root, url, counts = server
    x = build(root / "store")
    return root / "store", f"{url}/store", counts, x


def test_rows_equal_and_second_gather_is_local(store, tmp_path):
    path, url, counts, x = store
    ids = np.random.default_rng(1).integers(0, N, 300)  # sparse, repeated, unsorted
    opts = {"cache_dir": str(tmp_path / "cache")}
    with fs.open_store(path) as local:
        want = {f: local.features("paper", f).gather(ids) for f in ("feat", "half", "zstd")}
    counts.clear()
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        for f in want:
            np.testing.assert_array_equal(s.features("paper", f).gather(ids), want[f])
        first = data_gets(counts)
        assert first > 0 and s.loc.fs.stats["bytes_fetched"] > 0
        for f in want:  # no decoded-chunk cache (cache_bytes=0): served by the disk cache
            np.testing.assert_array_equal(s.features("paper", f).gather(ids), want[f])
        assert data_gets(counts) == first
    counts.clear()
    with fs.open_store(url, storage_options=opts) as s:  # another reader, same cache
        for f in want:
            np.testing.assert_array_equal(s.features("paper", f).gather(ids), want[f])
        assert s.loc.fs.stats["requests"] == 0
        twin = pickle.loads(pickle.dumps(s))  # a worker's reopened store keeps the cache
        np.testing.assert_array_equal(twin.features("paper").gather(ids), want["feat"])
        twin.close()
    assert data_gets(counts) == 0
    other = np.setdiff1d(np.arange(N), ids)[::7]  # rows not read yet: fetched
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(other), x[other])


def test_cache_dir_keyword(store, tmp_path):
    """open_store(url, cache_dir=...) is storage_options={"cache_dir": ...}."""
    path, url, counts, x = store
    ids = np.arange(0, N, 11)
    with fs.open_store(url, cache_dir=tmp_path / "kw", cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(ids), x[ids])
        assert s.loc.cache_dir is not None
    counts.clear()
    with fs.open_store(url, cache_dir=tmp_path / "kw", cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(ids), x[ids])
        assert s.loc.fs.stats["requests"] == 0
    assert data_gets(counts) == 0


def test_failed_fetch_leaves_no_hole(tmp_path):
    """A fetch that fails marks nothing: the next read fetches again (blockcache would
    return zeros here)."""
    data = np.random.default_rng(2).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    (tmp_path / "blob").write_bytes(data)
    target = fs.remote.location.fsspec.filesystem("file")
    cfs = RangeCacheFileSystem(target, str(tmp_path / "cache"), block_bytes=4096)
    real, calls = target.cat_ranges, []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionResetError("simulated")
        return real(*a, **k)

    target.cat_ranges = flaky
    p = str(tmp_path / "blob")
    with pytest.raises(ConnectionResetError):
        cfs.cat_file(p, 5000, 9000)
    assert cfs.cat_file(p, 5000, 9000) == data[5000:9000]
    target.cat_ranges = real
    rng = np.random.default_rng(3)
    lo = rng.integers(-4000, len(data), 400)
    hi = np.where(lo < 0, lo + rng.integers(0, 4000, 400), lo + rng.integers(0, 20000, 400))
    got = cfs.cat_ranges([p] * 400, lo.tolist(), hi.tolist())
    want = [data[a:b] for a, b in zip(lo.tolist(), hi.tolist())]  # Python's slice rules
    assert got == want
    assert cfs.cat_file(p) == data and cfs.cat_file(p, -100) == data[-100:]
    before = cfs.stats["requests"]
    assert cfs.cat_ranges([p] * 400, lo.tolist(), hi.tolist()) == want
    assert cfs.stats["requests"] == before  # all local now
    with cfs.open(p, "rb") as f:
        f.seek(123456)
        assert f.read(1000) == data[123456:124456]
    other = RangeCacheFileSystem(target, str(tmp_path / "cache"))  # as another process
    assert other.cat_ranges([p] * 400, lo.tolist(), hi.tolist()) == want
    assert other.stats["requests"] == 0 and other.block_bytes == 64 << 10


def test_concurrent_readers(store, tmp_path):
    _, url, _, x = store
    opts = {"cache_dir": str(tmp_path / "cache"), "cache_block_bytes": 4096}
    rng = np.random.default_rng(4)
    batches = [rng.integers(0, N, 200) for _ in range(8)]
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        feat = s.features("paper")
        with __import__("concurrent.futures").futures.ThreadPoolExecutor(4) as pool:
            got = list(pool.map(feat.gather, batches))
    for b, g in zip(batches, got):
        np.testing.assert_array_equal(g, x[b])


def test_rewritten_store_gets_a_new_cache(server, tmp_path):
    root, base, counts = server
    x1 = build(root / "moving", seed=11)
    url, opts = f"{base}/moving", {"cache_dir": str(tmp_path / "cache")}
    ids = np.arange(0, N, 13)
    with fs.open_store(url, storage_options=opts) as s:
        np.testing.assert_array_equal(s.features("paper").gather(ids), x1[ids])
    shutil.rmtree(root / "moving")
    x2 = build(root / "moving", seed=12)
    with fs.open_store(url, storage_options=opts) as s:
        np.testing.assert_array_equal(s.features("paper").gather(ids), x2[ids])
    assert len(os.listdir(tmp_path / "cache")) == 2  # one directory per generation
    assert Location(root / "moving", {"cache_dir": str(tmp_path / "x")}).cache_dir is None


def test_s3(tmp_path):
    s3fs = pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    from featurestore.testing.loopback import serve_s3

    opts, stop = serve_s3("cache-test", key="k", secret="s")
    try:
        x = build(tmp_path / "src")
        s3fs.S3FileSystem(**opts).put(str(tmp_path / "src"), "cache-test/store", recursive=True)
        ids = np.random.default_rng(6).integers(0, N, 300)
        cached = {**opts, "cache_dir": str(tmp_path / "cache")}
        for expect_requests in (True, False):
            with fs.open_store("s3://cache-test/store", storage_options=cached, cache_bytes=0) as s:
                np.testing.assert_array_equal(s.features("paper").gather(ids), x[ids])
                np.testing.assert_array_equal(s.features("paper", "zstd").gather(ids), x[ids])
                assert (s.loc.fs.stats["requests"] > 0) == expect_requests
    finally:
        stop()


def test_full_cache_disk_is_named(tmp_path, monkeypatch):
    """ENOSPC in the cache is a DiskFullError (not a transport error the reader retries), and
    marks nothing."""
    import errno

    import featurestore.remote.rangecache as rc

    data = bytes(range(256)) * 1024
    (tmp_path / "blob").write_bytes(data)
    cfs = RangeCacheFileSystem(fs.remote.location.fsspec.filesystem("file"), str(tmp_path / "c"),
                               block_bytes=4096)

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rc.os, "pwrite", full)
    with pytest.raises(fs.DiskFullError, match="cache directory"):
        cfs.cat_file(str(tmp_path / "blob"), 100, 9000)
    monkeypatch.undo()
    assert cfs.cat_file(str(tmp_path / "blob"), 100, 9000) == data[100:9000]


def test_short_cache_write_marks_nothing(tmp_path, monkeypatch):
    """pwrite writing fewer bytes than asked (a full disk, a file-size limit) is a
    DiskFullError, and the blocks stay unmarked: a later read fetches them again instead of
    serving the hole as zeros."""
    import featurestore.remote.rangecache as rc

    data = bytes(range(256)) * 1024
    (tmp_path / "blob").write_bytes(data)
    cfs = RangeCacheFileSystem(fs.remote.location.fsspec.filesystem("file"), str(tmp_path / "c"),
                               block_bytes=4096)
    real = rc.os.pwrite

    def short(fd, buf, off):  # the kernel takes 100 bytes, then nothing
        return real(fd, bytes(buf[:100]), off) if off % 4096 == 0 else 0

    monkeypatch.setattr(rc.os, "pwrite", short)
    with pytest.raises(fs.DiskFullError, match="took no more bytes"):
        cfs.cat_file(str(tmp_path / "blob"), 100, 9000)
    monkeypatch.undo()
    assert cfs.cat_file(str(tmp_path / "blob"), 100, 9000) == data[100:9000]


def test_no_cache_without_a_generation(tmp_path, server):
    """A store whose generation cannot be read is not cached (its bytes could belong to
    another generation): cache_dir is ignored, with a warning, and reads still work."""
    root, url, counts = server
    x = build(root / "nogen")
    meta = json.loads((root / "nogen" / "zarr.json").read_text())
    meta["attributes"].pop("generation", None)
    (root / "nogen" / "zarr.json").write_text(json.dumps(meta))
    with fs.open_store(f"{url}/nogen", cache_dir=tmp_path / "c", cache_bytes=0) as s:
        assert s.loc.cache_dir is None
        np.testing.assert_array_equal(s.features("paper").gather([1, 5]), x[[1, 5]])
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


def test_two_processes_share_a_cache(store, tmp_path):
    """Two processes fill one cache at the same time (as a node's ranks do); a third reader
    then reads both sets of rows without a request."""
    import subprocess
    import sys

    _, url, counts, x = store
    opts = {"cache_dir": str(tmp_path / "cache"), "cache_block_bytes": 4096}
    rng = np.random.default_rng(8)
    a, b = rng.integers(0, N, 400), rng.integers(0, N, 400)
    np.save(tmp_path / "a.npy", a)
    code = (f"import numpy as np, featurestore as fs\n"
            f"s = fs.open_store({url!r}, storage_options={opts!r}, cache_bytes=0)\n"
            f"ids = np.load({str(tmp_path / 'a.npy')!r})\n"
            f"np.save({str(tmp_path / 'got.npy')!r}, s.features('paper').gather(ids))\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen([sys.executable, "-c", code], cwd=root,
                             env={**os.environ, "PYTHONPATH": root})
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(b), x[b])
    assert child.wait(timeout=120) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), x[a])
    counts.clear()
    both = np.concatenate([a, b])
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(both), x[both])
        assert s.loc.fs.stats["requests"] == 0
    assert data_gets(counts) == 0


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_lost_data_file_is_fetched_again_not_served_as_zeros(store, tmp_path, damage):
    """A cache whose ``.data`` was deleted (or cut) beside a surviving ``.state`` refetches
    the blocks the state still lists instead of reading the new file's zeros."""
    _, url, counts, x = store
    ids = np.arange(3, N, 13)
    opts = {"cache_dir": str(tmp_path / "cache")}
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(ids), x[ids])
    data = [os.path.join(d, f) for d, _, fs_ in os.walk(tmp_path / "cache") for f in fs_
            if f.endswith(".data")]
    assert data
    for f in data:
        if damage == "deleted":
            os.remove(f)
        else:
            os.truncate(f, os.path.getsize(f) // 2)
    counts.clear()
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(ids), x[ids])
        assert s.loc.fs.stats["requests"] > 0
    assert data_gets(counts) > 0


def _remote_file(tmp_path):
    from fsspec.implementations.local import LocalFileSystem

    data = np.random.default_rng(0).integers(1, 255, 4 << 20, dtype=np.uint8).tobytes()
    src = tmp_path / "remote.bin"
    src.write_bytes(data)
    return LocalFileSystem(), str(src), data


def test_a_lost_json_resets_the_state(tmp_path):
    """A .json lost beside its .state is made again with this reader's block size and the
    .state reset: a .state counting blocks of another size served zeros."""
    lfs, src, data = _remote_file(tmp_path)
    cache = tmp_path / "cache"
    small = RangeCacheFileSystem(lfs, cache, block_bytes=64 << 10)
    assert small.cat_file(src, 0, 10) == data[:10]
    small.close()
    for f in cache.glob("*.json"):
        f.unlink()
    big = RangeCacheFileSystem(lfs, cache, block_bytes=1 << 20)
    assert big.cat_file(src, 64 << 10, 128 << 10) == data[64 << 10:128 << 10]
    later = RangeCacheFileSystem(lfs, cache, block_bytes=64 << 10)
    assert later.cat_file(src, 64 << 10, 128 << 10) == data[64 << 10:128 << 10]
    assert later._entry(src).block_bytes == 1 << 20  # the .json's block size, not its own


def test_data_deleted_under_running_readers(tmp_path):
    """A .data deleted while readers hold it open: what each reads stays the file's bytes,
    whichever reader fills which block afterwards."""
    lfs, src, data = _remote_file(tmp_path)
    cache = tmp_path / "cache"
    p1 = RangeCacheFileSystem(lfs, cache)
    assert p1.cat_file(src, 0, 10) == data[:10]
    for f in cache.glob("*.data"):
        f.unlink()
    p2 = RangeCacheFileSystem(lfs, cache)  # opens a new .data
    assert p2.cat_file(src, 0, 10) == data[:10]
    mb = 1 << 20
    assert p1.cat_file(src, mb, mb + 100) == data[mb:mb + 100]  # p1 fills (its old file)
    assert p2.cat_file(src, mb, mb + 100) == data[mb:mb + 100]  # p2 reads its new one
    assert p2.cat_file(src, 2 * mb, 2 * mb + 100) == data[2 * mb:2 * mb + 100]  # p2 fills
    assert p1.cat_file(src, 2 * mb, 2 * mb + 100) == data[2 * mb:2 * mb + 100]  # p1 too


def test_close_releases_the_cache_files(store, tmp_path):
    _, url, _, x = store
    with fs.open_store(url, cache_dir=tmp_path / "c", cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather([1, 2]), x[[1, 2]])
        cache = s.loc.fs
        assert cache._entries
    assert not cache._entries  # descriptors closed, state maps dropped
