"""``featurestore replicate``: a store copied from an HTTP server with Range support (and from
moto's S3 server) equals the source byte for byte, resumes after a crash copying only the
missing files, refuses what it must not touch, and a damaged replica is caught."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

import featurestore as fs
import featurestore.remote.replicate as rp
from featurestore.commands import register
from featurestore.remote.lock import LOCK_NAME
from featurestore.testing.loopback import serve_http
from featurestore.verify import verify_report
from graph_helpers import random_csc

N, DIM = 3000, 24


def build(path, seed=3, commit=True):
    """A two-type store with fp32, fp16 and zstd features; returns the feature matrix."""
    rng = np.random.default_rng(seed)
    w = fs.create_store(path, mode="w")
    w.add_node_type("paper", N)
    w.add_node_type("author", 700)
    w.add_edge_type(("paper", "cites", "paper"), *random_csc(rng, N, N, 20000)[:2])
    w.add_edge_type(("author", "writes", "paper"), *random_csc(rng, 700, N, 5000)[:2])
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    w.add_features("paper", "feat", x)
    w.add_features("paper", "zstd", x, compressors=zarr.codecs.ZstdCodec())
    w.add_features("author", "feat", rng.standard_normal((700, 8)).astype(np.float16))
    w.add_labels("paper", rng.integers(0, 5, N))
    w.add_split("train", "paper", np.sort(rng.choice(N, 500, replace=False)))
    if commit:
        w.commit()
    else:
        w.close()
    return x


def tree(root) -> dict[str, bytes]:
    """Every file under ``root`` but the writer lock: relative path -> bytes."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if n != LOCK_NAME:
                out[os.path.relpath(p, root)] = Path(p).read_bytes()
    return out


@pytest.fixture(scope="module")
def source(server):
    root, url, counts = server
    x = build(root / "store")
    return root / "store", f"{url}/store", counts, x


def test_replica_equals_source(source, tmp_path):
    path, url, _, x = source
    rep = rp.replicate(url, tmp_path / "r", threads=4, part_bytes=64 << 10, progress=False)
    assert tree(tmp_path / "r") == tree(path)
    src = tree(path)
    root = src.pop("zarr.json")  # written at the commit, not counted among the files
    assert rep.files_copied == rep.files_total == len(src) and rep.files_skipped == 0
    assert rep.bytes_copied == rep.bytes_total == sum(map(len, src.values()))
    assert (tmp_path / "r/zarr.json").read_bytes() == root
    assert rep.blocks_checked >= 5  # one CRC-32 block per uncompressed array at least
    with fs.open_store(tmp_path / "r") as s:
        ids = np.random.default_rng(0).integers(0, N, 500)
        np.testing.assert_array_equal(s.features("paper").gather(ids), x[ids])
        np.testing.assert_array_equal(s.features("paper", "zstd").gather(ids), x[ids])
    assert verify_report(tmp_path / "r", data=True).ok
    again = rp.replicate(url, tmp_path / "r", progress=False)  # up to date: nothing copied
    assert (again.files_copied, again.files_skipped) == (0, rep.files_total)
    assert again.up_to_date and not rep.up_to_date
    assert tree(tmp_path / "r") == tree(path)


def test_interrupted_replicate_resumes(source, tmp_path, monkeypatch):
    path, url, counts, _ = source
    real, finished = rp.finish_file, []

    def crash_after_5(c, rep):
        if len(finished) == 5:
            raise OSError("simulated crash")
        real(c, rep)
        finished.append(c.f.rel)

    monkeypatch.setattr(rp, "finish_file", crash_after_5)
    with pytest.raises(OSError, match="simulated crash"):
        rp.replicate(url, tmp_path / "r", threads=1, part_bytes=16 << 10, progress=False)
    monkeypatch.undo()
    with pytest.raises(fs.IncompleteStoreError):  # readers refuse the half replica
        fs.open_store(tmp_path / "r")
    assert len(finished) == 5
    counts.clear()
    rep = rp.replicate(url, tmp_path / "r", threads=3, part_bytes=16 << 10, progress=False)
    assert rep.files_skipped == 5 and rep.files_copied == rep.files_total - 5
    shard_gets = {p.lstrip("/").removeprefix("store/") for p in counts if "/c/" in p}
    assert not shard_gets & set(finished)  # nothing fetched again for the finished files
    assert tree(tmp_path / "r") == tree(path)
    assert not [p for p in tree(tmp_path / "r") if p.endswith(rp.PARTIAL)]


def test_short_writes_stop_the_copy_and_record_nothing(source, tmp_path, monkeypatch):
    """A full disk under replicate (review of 2026-11-30, stop 14: short writes were ignored
    and the part recorded as copied over a hole): ``pwrite`` taking 100 bytes of a part and
    then nothing is a DiskFullError; the half replica refuses to open, and the rerun's
    replica equals the source (no zeros kept from the hole)."""
    import featurestore.fileio as fio

    path, url, _, _ = source
    real = os.pwrite

    def short(fd, buf, off):  # the disk takes 100 bytes, then nothing
        return real(fd, bytes(memoryview(buf)[:100]), off) if off % 4096 == 0 else 0

    monkeypatch.setattr(fio.os, "pwrite", short)
    with pytest.raises(fs.DiskFullError, match="replica"):
        rp.replicate(url, tmp_path / "r", threads=1, part_bytes=16 << 10, progress=False)
    monkeypatch.undo()
    with pytest.raises(fs.IncompleteStoreError):
        fs.open_store(tmp_path / "r")
    rp.replicate(url, tmp_path / "r", threads=2, part_bytes=16 << 10, progress=False)
    assert tree(tmp_path / "r") == tree(path)


def test_resume_inside_a_file(source, tmp_path, monkeypatch):
    path, url, counts, _ = source
    part = 16 << 10
    real, wrote = rp.copy_part, []

    def crash_after_7_parts(src, c, lo, hi):
        if len(wrote) == 7:
            raise OSError("simulated crash")
        wrote.append((c.f.rel, lo))
        return real(src, c, lo, hi)

    monkeypatch.setattr(rp, "copy_part", crash_after_7_parts)
    with pytest.raises(OSError, match="simulated crash"):
        rp.replicate(url, tmp_path / "r", threads=1, part_bytes=part, progress=False)
    monkeypatch.undo()
    big = wrote[0][0]
    assert {r for r, _ in wrote} == {big}  # the largest file goes first: crashed inside it
    size = os.path.getsize(path / big)
    assert size > 8 * part
    counts.clear()
    rep = rp.replicate(url, tmp_path / "r", threads=2, part_bytes=part, progress=False)
    assert rep.bytes_resumed == 7 * part and rep.bytes_copied == rep.bytes_total - 7 * part
    assert counts[f"/store/{big}"] == -(-size // part) - 7  # only the missing parts fetched
    got = tree(tmp_path / "r")
    assert got == tree(path)


def test_damaged_replica(source, tmp_path):
    path, url, _, _ = source
    rp.replicate(url, tmp_path / "r", progress=False)
    shard = tmp_path / "r/nodes/paper/features/feat/c/0/0"
    raw = bytearray(shard.read_bytes())
    raw[1000] ^= 0xFF
    shard.write_bytes(bytes(raw))
    found = verify_report(tmp_path / "r", data=True).problems
    assert len(found) == 1 and "nodes/paper/features/feat" in found[0] and "checksum" in found[0]
    rep = rp.replicate(url, tmp_path / "r", progress=False)  # sizes match: left as it is
    assert rep.files_copied == 0 and tree(tmp_path / "r") != tree(path)
    rep = rp.replicate(url, tmp_path / "r", recheck=True, progress=False)  # copied again
    assert rep.files_copied == 1 and tree(tmp_path / "r") == tree(path)


def test_refusals(source, tmp_path):
    path, url, _, _ = source
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(fs.StoreExistsError, match="nothing was removed"):
        rp.replicate(url, other, progress=False)
    assert os.listdir(other) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(fs.StoreExistsError):
        rp.replicate(url, tmp_path / "file", progress=False)
    build(tmp_path / "another", seed=9)  # a store of another generation: only with force
    (tmp_path / "another/README").write_text("user file beside a store")
    with pytest.raises(fs.StoreExistsError, match="force"):
        rp.replicate(url, tmp_path / "another", progress=False)
    rp.replicate(url, tmp_path / "another", force=True, progress=False)
    got = tree(tmp_path / "another")
    assert got.pop("README") == b"user file beside a store" and got == tree(path)
    build(tmp_path / "half", commit=False)
    with pytest.raises(fs.IncompleteStoreError):
        rp.replicate(tmp_path / "half", tmp_path / "r", progress=False)
    with pytest.raises(fs.StoreNotFoundError):
        rp.replicate(tmp_path / "missing", tmp_path / "r", progress=False)
    shutil.copytree(path, tmp_path / "broken")  # a source with a missing shard file
    os.remove(tmp_path / "broken/nodes/paper/features/feat/c/0/0")
    with pytest.raises(fs.IncompleteStoreError, match="missing"):
        rp.replicate(tmp_path / "broken", tmp_path / "another", progress=False)


def test_cli(source, tmp_path, capsys):
    path, url, _, _ = source
    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    args = p.parse_args(["replicate", url, str(tmp_path / "r"), "--threads", "2",
                         "--no-progress", "--json"])
    assert args.func(args) == 0
    assert '"files_copied": ' in capsys.readouterr().out
    assert tree(tmp_path / "r") == tree(path)


@pytest.fixture
def fast_retries(monkeypatch):
    """The readers' retries with a 10 ms first backoff."""
    import featurestore.remote.retry as R

    monkeypatch.setattr(R, "REMOTE_BACKOFF_S", 0.01)
    return R


@pytest.mark.parametrize("fault", ["short", "lying", "500"])
def test_transient_transport_errors_are_retried(source, tmp_path, fast_retries, fault):
    """Issue 23 item 8: the first GET of every third distinct request (file and range) answers
    half its body, a Content-Length 1000 bytes too long, or a 500. replicate retries as the
    readers do (it passed aiohttp's ClientPayloadError / ClientResponseError through), copies
    the store byte for byte, and the replica verifies."""
    path, _, _, _ = source
    lock, seen, failed = threading.Lock(), set(), []

    def one_in_three(p, rng):
        with lock:
            if (p, rng) in seen:
                return None
            seen.add((p, rng))
            if len(seen) % 3:
                return None
            failed.append(p)
            return fault

    url, stop = serve_http(path.parent, fault=one_in_three)
    try:
        rep = rp.replicate(f"{url}/{path.name}", tmp_path / "r", threads=4,
                           part_bytes=64 << 10, progress=False)
    finally:
        stop()
    assert any(p.endswith("zarr.json") for p in failed)  # metadata and data both failed
    assert any("/c/" in p for p in failed)
    assert rep.files_copied == rep.files_total
    assert tree(tmp_path / "r") == tree(path)
    assert verify_report(tmp_path / "r", data=True).ok


@pytest.mark.parametrize("fault,files", [("500", "data"), ("500", "metadata"),
                                         ("short", "data"), ("lying", "data")])
def test_persistent_transport_errors_are_named(source, tmp_path, fast_retries, fault, files):
    """A source whose shard files (or arrays' zarr.json) always fail is a RemoteStoreError
    naming the URL and the file, after the retries."""
    path, _, _, _ = source
    calls = []

    def broken(p, rng):
        meta = p.endswith("zarr.json")
        if p == f"/{path.name}/zarr.json" or meta != (files == "metadata"):
            return None
        calls.append(p)
        return fault

    url, stop = serve_http(path.parent, fault=broken)
    try:
        with pytest.raises(fs.RemoteStoreError,
                           match=re.escape(f"remote store {url}/{path.name} failed")):
            rp.replicate(f"{url}/{path.name}", tmp_path / "r", threads=2, progress=False)
    finally:
        stop()
    assert len(calls) >= fast_retries.REMOTE_RETRIES + 1


@pytest.mark.parametrize("mode", ["stall", "stall-body"])
def test_stalled_source_fails_within_the_read_timeout(source, tmp_path, fast_retries, mode):
    """A source that stalls on its shard files (answers nothing, or the headers and then
    nothing) fails with a RemoteStoreError naming the URL within 2 x (read timeout x
    (retries + 1)), not a bare FSTimeoutError."""
    import aiohttp

    path, _, _, _ = source
    timeout = 1.0
    bound = 2 * timeout * (fast_retries.REMOTE_RETRIES + 1)
    opts = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(
        total=None, sock_connect=timeout, sock_read=timeout)}}
    url, stop = serve_http(path.parent, fault=lambda p, rng: mode if "/c/" in p else None)
    try:
        t0 = time.perf_counter()
        with pytest.raises(fs.RemoteStoreError, match=re.escape(url) + ".*[Tt]imeout"):
            rp.replicate(f"{url}/{path.name}", tmp_path / "r", storage_options=opts,
                         threads=4, part_bytes=64 << 10, progress=False)
        took = time.perf_counter() - t0
    finally:
        stop()
    assert took < bound, took


def test_from_s3(tmp_path):
    s3fs = pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    from featurestore.testing.loopback import serve_s3

    opts, stop = serve_s3("replicate-test", key="k", secret="s")
    try:
        s3 = s3fs.S3FileSystem(**opts)
        build(tmp_path / "src")
        s3.put(str(tmp_path / "src"), "replicate-test/store", recursive=True)
        rep = rp.replicate("s3://replicate-test/store", tmp_path / "r", storage_options=opts,
                           part_bytes=32 << 10, progress=False)
        assert rep.files_copied == rep.files_total
        assert tree(tmp_path / "r") == tree(tmp_path / "src")
    finally:
        stop()


def test_source_without_generation_is_copied_again_after_a_crash(tmp_path, monkeypatch):
    """A store written before generations cannot tell a rewrite from itself: after a crash the
    rerun copies everything, so a source rewritten in between is not mixed with old files."""
    import json

    from featurestore.testing.conformance import write_array_store

    src, dst = tmp_path / "src", tmp_path / "dst"

    def write(seed):
        x = np.random.default_rng(seed).standard_normal((2000, 8)).astype(np.float32)
        write_array_store(x, src)
        meta = json.loads((src / "zarr.json").read_text())
        meta["attributes"].pop("generation")
        (src / "zarr.json").write_text(json.dumps(meta))
        return x

    write(1)
    real, finished = rp.finish_file, []

    def crash_after_1(c, rep):
        if finished:
            raise OSError("simulated crash")
        real(c, rep)
        finished.append(c.f.rel)

    monkeypatch.setattr(rp, "finish_file", crash_after_1)
    with pytest.raises(OSError, match="simulated crash"):
        rp.replicate(src, dst, threads=1, progress=False)
    monkeypatch.undo()
    x2 = write(2)  # rewritten, same shapes and sizes
    rep = rp.replicate(src, dst, threads=1, progress=False)
    assert rep.files_skipped == 0
    with fs.open_store(dst) as s:
        np.testing.assert_array_equal(s.features("v").gather(np.arange(2000)), x2)


@pytest.mark.parametrize("evil", ["../victim.store/nodes/paper/features/feat", "/etc/x",
                                  "nodes/../../victim.store/zarr", "nodes//paper"])
def test_traversal_keys_refused_before_a_byte(tmp_path, evil):
    """Issue 23 item 1: an array key from the source that reaches outside the target (a
    neighbouring store's shard) is refused with UnsafePathError before anything is written;
    the neighbour is untouched."""
    import json

    victim = tmp_path / "victim.store"
    build(victim, seed=5)
    before = tree(victim)
    src = tmp_path / "a" / "src"  # its "../victim.store" is the attacker's, the target's ours
    build(src, seed=6)
    root = json.loads((src / "zarr.json").read_text())
    key = root["attributes"]["arrays"][0]
    root["attributes"]["arrays"][0] = evil
    (src / "zarr.json").write_text(json.dumps(root))
    evil_dir = src / evil if not evil.startswith("/") else None
    if evil_dir is not None:  # the source serves the attacker's files under that key
        shutil.copytree(src / key, evil_dir, dirs_exist_ok=True)
    with pytest.raises(fs.UnsafePathError, match="array key"):
        rp.replicate(str(src), tmp_path / "target.store", progress=False)
    assert not (tmp_path / "target.store").exists() or not any(
        (tmp_path / "target.store").iterdir())
    assert tree(victim) == before
