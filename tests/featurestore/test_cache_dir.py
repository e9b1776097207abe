"""``open_store(url, storage_options={"cache_dir": ...})``: a remote store's data files cached
block by block on local disk. Rows equal the local store; rows read once are read again
without a request to the server (counted on the server); a failed fetch leaves no hole; a
rewritten store is never served from the old cache."""

from __future__ import annotations

import json
import os
import pathlib
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


# -- a damaged or vanished cache (issue 23, items 3 and 9) ---------------------------------
def _feat_cache(cache) -> str:
    """The cache files' base path of the ``paper/feat`` shard (uncompressed, v1)."""
    for f in cache.rglob("*.json"):
        if "/paper/features/feat/" in json.loads(f.read_text())["path"]:
            return str(f)[:-len(".json")]
    raise AssertionError(f"no cache of paper/feat in {cache}")


def _fill_then(url, cache, ids, damage):
    """Read ``ids`` through a cache at ``cache`` (4 KiB blocks), close, apply ``damage`` to
    the feat shard's cache files; returns the storage options."""
    opts = {"cache_dir": str(cache), "cache_block_bytes": 4096}
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        s.features("paper").gather(ids)
    damage(_feat_cache(cache))
    return opts


def _all_rows_equal(url, opts, x):
    """A new reader's rows of the whole feat array through the damaged cache equal ``x``."""
    with fs.open_store(url, storage_options=opts, cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(np.arange(N)), x)
        return dict(s.loc.fs.stats)


def test_state_claiming_every_block_is_checked(store, tmp_path):
    """A .state listing every block when one row was fetched: the blocks never written fail
    their CRC-32 and are fetched (the cache served them as zeros)."""
    _, url, _, x = store

    def claim_all(base):
        with open(base + ".state", "r+b") as f:
            f.write(b"\x01" * os.path.getsize(base + ".state"))

    opts = _fill_then(url, tmp_path / "cache", [7], claim_all)
    st = _all_rows_equal(url, opts, x)
    assert st["blocks_refetched"] > 100 and st["requests"] > 0


@pytest.mark.parametrize("damage", ["zeroed", "flipped"])
def test_damaged_data_block_is_fetched_again(store, tmp_path, damage):
    """A cached block zeroed, or 4 bytes of it flipped, in .data: it fails its CRC-32 and is
    fetched again (the cache served zeros, or a wrong row)."""
    _, url, counts, x = store

    def hurt(base):
        with open(base + ".data", "r+b") as f:
            f.seek(5 * 4096 + 100)
            if damage == "zeroed":
                f.seek(5 * 4096)
                f.write(bytes(4096))
            else:
                b = bytearray(f.read(4))
                f.seek(5 * 4096 + 100)
                f.write(bytes(v ^ 0x5A for v in b))

    opts = _fill_then(url, tmp_path / "cache", np.arange(N), hurt)
    counts.clear()
    st = _all_rows_equal(url, opts, x)
    assert st["blocks_refetched"] == 1 and st["requests"] == 1
    assert st["blocks_checked"] >= N * DIM * 4 // 4096
    assert _all_rows_equal(url, opts, x)["requests"] == 0  # repaired in place


def test_damaged_block_and_sum_fail_the_writer_crc(tmp_path, store):
    """A block changed in .data with its .sum changed to match still fails the writer's
    CRC-32 of its rows when a fill completes them: the rows are fetched again."""
    _, url, _, x = store

    def forge(base):
        import zlib

        with open(base + ".data", "r+b") as f:
            f.seek(5 * 4096)
            blk = bytearray(f.read(4096))
            blk[100] ^= 0xFF
            f.seek(5 * 4096)
            f.write(blk)
        sums = np.memmap(base + ".sum", dtype="<u4", mode="r+")
        sums[5] = zlib.crc32(blk)
        sums.flush()
        del sums
        with open(base + ".state", "r+b") as f:  # one block lost: the next fill completes
            f.seek(9)  # the block of rows and checks it
            f.write(b"\x00")

    opts = _fill_then(url, tmp_path / "cache", np.arange(N), forge)
    st = _all_rows_equal(url, opts, x)
    assert st["requests"] >= 2  # the lost block, then the block of rows again


def test_fill_checks_the_writer_crc(tmp_path, store, monkeypatch):
    """Bytes from the remote that fail the writer's CRC-32 (checked when a fill completes a
    block of rows) are fetched again; twice wrong is a CorruptStoreError naming the file."""
    from featurestore.remote import rangecache as rc

    _, url, _, x = store
    real, calls = rc.cat_ranges, []

    def flip(target, paths, starts, ends, **kw):  # the cache's fetch of missing blocks
        got = real(target, paths, starts, ends, **kw)
        calls.append(1)
        if len(calls) == 1 or always:
            return [g[:50] + bytes([g[50] ^ 1]) + g[51:]
                    if "/feat/" in p and len(g) > 50 else g for p, g in zip(paths, got)]
        return got

    always = False
    monkeypatch.setattr(rc, "cat_ranges", flip)
    with fs.open_store(url, cache_dir=tmp_path / "c", cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather(np.arange(N)), x)
        assert len(calls) == 2
    with fs.open_store(url, cache_dir=tmp_path / "d", cache_bytes=0) as s:
        always = True
        with pytest.raises(fs.CorruptStoreError, match="CRC-32 its writer recorded"):
            s.features("paper").gather(np.arange(N))


@pytest.mark.parametrize("damage", ["halved", "halved-forged", "block0", "garbage"])
def test_damaged_json_is_rebuilt(store, tmp_path, damage):
    """A cache .json with a halved size (as edited, or with its check made to match), a block
    size of 0, or not JSON: made again, and the rows come from the store (a halved size gave
    "file truncated?" on every run, block_bytes 0 a ZeroDivisionError)."""
    from featurestore.remote import rangecache as rc

    _, url, _, x = store

    def hurt(base):
        meta = json.loads(pathlib.Path(base + ".json").read_text())
        if damage.startswith("halved"):
            meta["size"] //= 2
        elif damage == "block0":
            meta["block_bytes"] = 0
        if damage == "halved-forged":
            meta["check"] = rc._meta_check(meta["path"], meta["size"], meta["block_bytes"])
        pathlib.Path(base + ".json").write_text(json.dumps(meta) if damage != "garbage"
                                                else "{not json")

    opts = _fill_then(url, tmp_path / "cache", np.arange(0, N, 3), hurt)
    _all_rows_equal(url, opts, x)
    raw = pathlib.Path(_feat_cache(tmp_path / "cache") + ".json").read_bytes()
    assert rc._parse_meta(raw, json.loads(raw)["path"]) is not None
    assert _all_rows_equal(url, opts, x)["requests"] == 0


def test_cache_dir_removed_under_a_running_reader(store, tmp_path):
    """The cache directory removed while a reader runs: it is made again and filled (the
    reader failed with FileNotFoundError)."""
    _, url, _, x = store
    cache = tmp_path / "cache"
    with fs.open_store(url, cache_dir=cache, cache_bytes=0) as s:
        a = np.arange(0, N, 7)
        np.testing.assert_array_equal(s.features("paper").gather(a), x[a])
        shutil.rmtree(cache)
        np.testing.assert_array_equal(s.features("paper").gather(np.arange(N)), x)
        np.testing.assert_array_equal(s.features("paper", "half").gather(a), x[a].astype(
            np.float16))
        assert any(cache.rglob("*.data"))


def test_unusable_cache_dir_is_named(store, tmp_path, monkeypatch):
    """A cache directory that cannot be written is a CacheDirError naming it, not a raw
    OSError blamed on the server. Tested as root too: the cache_dir given as a regular file,
    the store's cache directory replaced by a regular file under a running reader, and
    ``os.open`` refusing with EACCES / EROFS (chmod does not stop root)."""
    import errno

    import featurestore.remote.rangecache as rc

    _, url, _, x = store
    plain = tmp_path / "plain"
    plain.write_text("not a directory")
    with pytest.raises(fs.CacheDirError, match="Expected a writable cache directory at "
                       + str(plain)):
        fs.open_store(url, cache_dir=plain)

    cache = tmp_path / "cache"
    with fs.open_store(url, cache_dir=cache, cache_bytes=0) as s:
        np.testing.assert_array_equal(s.features("paper").gather([1, 2]), x[[1, 2]])
        storage = s.loc.fs.storage
        shutil.rmtree(storage)
        open(storage, "w").close()
        with pytest.raises(fs.CacheDirError, match=storage) as e:
            s.features("paper").gather([3, 4000])
        assert isinstance(e.value, OSError)
        os.remove(storage)

    real = rc.os.open
    for code in (errno.EACCES, errno.EROFS):
        def refuse(path, flags, *a, code=code):
            if str(path).startswith(str(tmp_path / "ro")) and flags & (os.O_RDWR | os.O_WRONLY):
                raise OSError(code, os.strerror(code), path)
            return real(path, flags, *a)

        monkeypatch.setattr(rc.os, "open", refuse)
        with fs.open_store(url, cache_dir=tmp_path / "ro", cache_bytes=0) as s:
            with pytest.raises(fs.CacheDirError, match=os.strerror(code)):
                s.features("paper").gather([1, 2])
        monkeypatch.undo()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permissions: see "
                    "test_unusable_cache_dir_is_named")
def test_read_only_cache_dir_is_named(store, tmp_path):
    _, url, _, x = store
    cache = tmp_path / "cache"
    with fs.open_store(url, cache_dir=cache, cache_bytes=0) as s:
        storage = s.loc.fs.storage
    os.chmod(storage, 0o555)
    try:
        with fs.open_store(url, cache_dir=cache, cache_bytes=0) as s:
            with pytest.raises(fs.CacheDirError, match=storage):
                s.features("paper").gather([1, 2])
    finally:
        os.chmod(storage, 0o755)
