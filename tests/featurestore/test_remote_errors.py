"""Remote stores that fail (issue 10, item 14): a server without Range support, a stopped
server, a stalled server. Each is a RemoteStoreError naming the URL (and the array), said at
once or within the read timeout, never a checksum error, a bare aiohttp error or a 300 s hang.
Every server here listens on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time

import numpy as np
import pytest

import featurestore as fs
from featurestore.testing.loopback import serve_http
from featurestore.errors import RemoteStoreError

pytest.importorskip("aiohttp")


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    p = tmp_path_factory.mktemp("remote") / "s"
    w = fs.create_store(p)
    w.add_node_type("v", 5000)
    w.add_features("v", "feat", np.arange(5000 * 64, dtype=np.float32).reshape(5000, 64))
    w.commit()
    return p


@contextlib.contextmanager
def _served(directory, ranges=True):
    """The URL of ``directory`` on a loopback HTTP server, stopped (connections closed) after."""
    url, stop = serve_http(directory, ranges=ranges)
    try:
        yield url
    finally:
        stop()


def test_server_with_range_support_reads_rows(store_dir):
    with _served(store_dir.parent) as base, fs.open_store(f"{base}/{store_dir.name}") as s, \
            fs.open_store(store_dir) as local:
        rows = s.features("v").gather([3, 4999, 0])
        assert np.array_equal(rows, local.features("v").gather([3, 4999, 0]))


def test_server_without_range_support_is_named_at_open(store_dir):
    with _served(store_dir.parent, ranges=False) as base:  # as python -m http.server
        with pytest.raises(RemoteStoreError, match="Range"):
            fs.open_store(f"{base}/{store_dir.name}")


def test_stopped_server_names_the_url(store_dir):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    url = f"http://127.0.0.1:{port}/{store_dir.name}"
    with pytest.raises(RemoteStoreError, match=f"127.0.0.1:{port}"):
        fs.open_store(url)


def test_server_stopping_mid_use_names_the_array(store_dir):
    url, stop = serve_http(store_dir.parent)
    with fs.open_store(f"{url}/{store_dir.name}") as s:
        f = s.features("v")
        stop()
        with pytest.raises((RemoteStoreError, fs.CorruptStoreError), match="feat"):
            f.gather([10, 20])


def test_stalled_server_times_out_with_a_message(store_dir):
    import aiohttp

    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    held = []
    stop = threading.Event()

    def accept():  # accept connections and never answer
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(lsock.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{lsock.getsockname()[1]}/{store_dir.name}"
    opts = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=None, sock_connect=1,
                                                               sock_read=1)}}
    t0 = time.perf_counter()
    try:
        with pytest.raises(RemoteStoreError, match="timeout|Timeout"):
            fs.open_store(url, storage_options=opts)
        assert time.perf_counter() - t0 < 30
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        lsock.close()


@pytest.fixture(scope="module")
def scattered_dir(tmp_path_factory):
    """A store of 9,000 rows: every third row of it is a gather of 3,000 separate ranges."""
    p = tmp_path_factory.mktemp("scattered") / "s"
    w = fs.create_store(p)
    w.add_node_type("v", 9000)
    w.add_features("v", "feat", np.arange(9000 * 16, dtype=np.float32).reshape(9000, 16))
    w.commit()
    return p


@pytest.mark.parametrize("mode", ["stall", "stall-body"])
def test_stalled_gather_fails_within_the_read_timeout_whatever_its_size(scattered_dir, mode,
                                                                        monkeypatch):
    """Issue 23 item 5: a server that reads the request and answers nothing (or the headers,
    then nothing) fails a gather of 32 or of 3,000 rows with a RemoteStoreError naming the URL
    within 2 x (read timeout x (retries + 1)). fsspec's cat_ranges waited out the read timeout
    once per window of 64 requests (47 windows for 3,000 ranges) before raising."""
    import aiohttp

    import featurestore.remote.retry as R
    from featurestore.rows.ranges import REMOTE_CONCURRENCY

    monkeypatch.setattr(R, "REMOTE_BACKOFF_S", 0.01)  # the bound is on timeouts, not backoff
    timeout = 1.0
    bound = 2 * timeout * (R.REMOTE_RETRIES + 1)
    state = {"fault": None}
    url, stop = serve_http(scattered_dir.parent, fault=lambda path, rng: None if
                           path.endswith("zarr.json") else state["fault"])
    opts = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(
        total=None, sock_connect=timeout, sock_read=timeout)}}
    took = {}
    try:
        with fs.open_store(f"{url}/{scattered_dir.name}", storage_options=opts) as s:
            f = s.features("v")
            assert f.gather([0, 3]).shape == (2, 16)  # served until the stall
            state["fault"] = mode
            for n in (32, 3000):
                ids = np.arange(0, 3 * n, 3)  # n rows two rows apart: n ranges
                t0 = time.perf_counter()
                with pytest.raises(RemoteStoreError, match=re.escape(url) + ".*[Tt]imeout"):
                    f.gather(ids)
                took[n] = time.perf_counter() - t0
    finally:
        stop()
    assert 3000 > 10 * REMOTE_CONCURRENCY  # many windows of requests in flight
    assert max(took.values()) < bound, took


def test_a_transient_failure_is_retried(store_dir, monkeypatch):
    import featurestore.remote.retry as R

    with _served(store_dir.parent) as base, fs.open_store(f"{base}/{store_dir.name}") as st, \
            fs.open_store(store_dir) as local:
        f = st.features("v")
        real, calls = f.reader.gather, []

        def flaky(*a):
            calls.append(1)
            if len(calls) < 3:
                raise ConnectionResetError("connection reset by peer")
            return real(*a)

        monkeypatch.setattr(f.reader, "gather", flaky)
        monkeypatch.setattr(R, "REMOTE_BACKOFF_S", 0.01)
        rows = f.gather([1, 2])
        assert len(calls) == 3
        assert np.array_equal(rows, local.features("v").gather([1, 2]))
        calls.clear()

        def down(*a):
            calls.append(1)
            raise ConnectionResetError("down")

        monkeypatch.setattr(f.reader, "gather", down)
        with pytest.raises(RemoteStoreError, match="feat"):
            f.gather([1])
        assert len(calls) == R.REMOTE_RETRIES + 1


def test_remote_slices_retry_name_errors_and_read_only_strided_rows(store_dir):
    """A slice of a remote array goes through gather's retries and error naming; a strided
    slice reads only its rows (not the whole span)."""
    counts = {}
    url, stop = serve_http(store_dir.parent, counts)
    with fs.open_store(f"{url}/{store_dir.name}") as s, fs.open_store(store_dir) as local:
        f, ref = s.features("v"), local.features("v").numpy()
        np.testing.assert_array_equal(f[10:20], ref[10:20])
        np.testing.assert_array_equal(f[20:10:-1], ref[20:10:-1])
        counts.clear()
        np.testing.assert_array_equal(f[::1000], ref[::1000])
        assert counts["bytes"] <= 2 * ref[::1000].nbytes + 4096  # not the whole array
        stop()
        with pytest.raises(RemoteStoreError, match="v"):
            _ = f[30:40]


def test_server_without_listings_opens(store_dir):
    """Issue 23 item 7: a server that answers 404 for the store's directory URL (nginx
    without autoindex, object-store endpoints, CDNs) still serves the store through its
    zarr.json; a URL with no zarr.json is still 'nothing there'."""
    url, stop = serve_http(store_dir.parent, listings=False)
    try:
        import fsspec

        assert not fsspec.filesystem("http").exists(f"{url}/{store_dir.name}/")  # 404
        with fs.open_store(f"{url}/{store_dir.name}") as s:
            local = fs.open_store(store_dir)
            ids = np.arange(0, s.num_nodes(), 7)
            np.testing.assert_array_equal(s.features("v").gather(ids),
                                          local.features("v").gather(ids))
            local.close()
        with pytest.raises(fs.StoreNotFoundError, match="Nothing is there"):
            fs.open_store(f"{url}/not-a-store")
    finally:
        stop()
