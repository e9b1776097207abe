"""Loopback test doubles for remote stores, shared by the tests and the benchmarks.

* :func:`serve_http`: a threaded HTTP server on 127.0.0.1 with single byte ranges
  (keep-alive, no Nagle delay, a deep accept backlog), optionally counting what it served
  and failing the GETs a ``fault`` callback picks (stalls, short bodies, 500s);
* :func:`serve_s3`: moto's S3 server on 127.0.0.1 with the buckets asked for (``moto[server]``
  and ``s3fs``, the ``s3`` extra);
* :class:`LatencyFileSystem`: an fsspec async filesystem over any other that waits a fixed
  latency before every read and counts requests and round trips.

Neither needs pytest.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import http.server
import io
import os
import select
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from fsspec.asyn import AsyncFileSystem

__all__ = ["serve_http", "serve_s3", "LatencyFileSystem", "RangeRequestHandler", "FAULTS"]

#: what a ``fault`` callback of :func:`serve_http` may answer for a GET: ``"stall"`` (read the
#: request, answer nothing), ``"stall-body"`` (the headers, then nothing), ``"short"`` (half the
#: body Content-Length announces, then the end), ``"lying"`` (the body, but a Content-Length
#: 1000 bytes longer), ``"500"`` (an Internal Server Error); ``None`` serves the file.
FAULTS = ("stall", "stall-body", "short", "lying", "500")


class RangeRequestHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with single HTTP byte ranges (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``)."""

    protocol_version = "HTTP/1.1"  # keep-alive: one connection serves many ranges
    disable_nagle_algorithm = True  # headers and body in two sends: no 40 ms delayed ACK

    def log_message(self, *args):
        """Log nothing (one line per request otherwise)."""

    def list_directory(self, path):
        """A directory's listing, or 404 when the server has ``listings`` off (nginx without
        autoindex, object-store endpoints and CDNs answer so)."""
        if not getattr(self.server, "listings", True):
            self.send_error(404, "No listing")
            return None
        return super().list_directory(path)

    def do_GET(self):
        """A GET, or the failure the server's ``fault`` callback picks for this file."""
        fault = getattr(self.server, "fault", None)
        what = fault(self.path, self.headers.get("Range")) if fault is not None and \
            os.path.isfile(self.translate_path(self.path)) else None
        if what is None:
            return super().do_GET()
        if what not in FAULTS:
            raise ValueError(f"Expected a fault among {FAULTS}. Got {what!r} instead.")
        self.close_connection = True
        if what == "500":
            self.send_error(500, "Injected fault")
            return None
        if what == "stall":  # the request was read: answer nothing
            return self._stall()
        got = self._range(self.translate_path(self.path))
        if got is None:
            return super().do_GET()
        start, end, size, data = got
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        lie = {"lying": len(data) + 1000}.get(what, len(data))
        self.send_header("Content-Length", str(lie))
        self.end_headers()
        if what == "stall-body":  # headers, then silence
            self.wfile.flush()
            return self._stall()
        self.wfile.write(data[:len(data) // 2] if what == "short" else data)
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_WR)  # end the body before Content-Length says
        return None

    def _stall(self) -> None:
        """Send nothing more until the client hangs up or the server stops."""
        while not self.server.stopping.wait(0.05):
            if select.select([self.connection], [], [], 0)[0]:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return
                except OSError:
                    return

    def _range(self, path):
        """``(start, end, size, bytes)`` of the request's byte range of ``path`` (the whole
        file without ``Range``), or ``None`` when it is unsatisfiable."""
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            rng = self.headers.get("Range") or "bytes=0-"
            a, _, b = rng.strip().removeprefix("bytes=").partition("-")
            if a == "":
                start, end = max(0, size - int(b)), size - 1
            else:
                start, end = int(a), min(size - 1, int(b) if b else size - 1)
            if start >= size or end < start:
                return None
            f.seek(start)
            return start, end, size, f.read(max(0, end - start + 1))

    def send_head(self):
        """Answer a Range request with 206 and the bytes; anything else as the base class."""
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        paths = getattr(self.server, "paths", None)
        if paths is not None and self.command == "GET" and os.path.isfile(path):
            with self.server.counts_lock:
                paths[self.path] += 1
        if not rng or not os.path.isfile(path) or not getattr(self.server, "ranges", True):
            return super().send_head()
        got = self._range(path)
        if got is None:  # unsatisfiable: 416, as a real server answers
            with open(path, "rb") as f:
                size = f.seek(0, 2)
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        start, end, size, data = got
        counts = getattr(self.server, "counts", None)
        if counts is not None:
            with self.server.counts_lock:
                counts["requests"] = counts.get("requests", 0) + 1
                counts["bytes"] = counts.get("bytes", 0) + len(data)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return io.BytesIO(data)


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 drops concurrent connects (1 s retry)

    def get_request(self):
        """Accept a connection and remember it (``close_connections`` ends it)."""
        conn, addr = super().get_request()
        with self._conns_lock:
            self._conns.add(conn)
        return conn, addr

    def shutdown_request(self, request):
        """Forget a connection the handler finished with, then close it."""
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End the keep-alive connections still open (a stopped server leaves none behind
        for a client's pool to reuse)."""
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address):
        """Ignore clients that hang up (a closed pool); report anything else."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def serve_http(directory, counts: dict | None = None,
               paths: collections.Counter | None = None,
               ranges: bool = True, listings: bool = True,
               fault: Callable[[str, str | None], str | None] | None = None) -> tuple[str, Any]:
    """Serve ``directory`` read-only on 127.0.0.1 (a free port) with byte ranges.

    Parameters
    ----------
    directory
        What to serve.
    counts
        When given, the range requests answered and their bytes are added to its
        ``"requests"`` and ``"bytes"`` (the server's own count, independent of the reader's).
    paths
        When given, the GETs of each file (ranged or whole; directory listings left out) are
        counted in it by URL path.
    ranges
        ``False`` ignores ``Range`` headers and sends whole files, as ``python -m http.server``
        does (to test clients against servers without range support).
    listings
        ``False`` answers 404 for directory URLs, as servers without listings do.
    fault
        Called with the URL path and the ``Range`` header (or ``None``) of every GET of a
        file, from the server's threads; what it returns (one of :data:`FAULTS`, or ``None``
        to serve the file) is how that GET fails. A stalled GET
        holds its thread until the client hangs up or the server stops.

    Returns
    -------
    url : str
        ``http://127.0.0.1:PORT``.
    stop : callable
        Stops the server.
    """
    handler = functools.partial(RangeRequestHandler, directory=os.fspath(directory))
    srv = _Server(("127.0.0.1", 0), handler)
    srv.counts, srv.paths, srv.counts_lock = counts, paths, threading.Lock()
    srv.ranges, srv.listings, srv.fault = ranges, listings, fault
    srv.stopping = threading.Event()
    srv._conns, srv._conns_lock = set(), threading.Lock()
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()

    def stop():
        srv.stopping.set()
        srv.shutdown()
        srv.server_close()
        srv.close_connections()

    return f"http://127.0.0.1:{srv.server_address[1]}", stop


def serve_s3(*buckets: str, key: str = "testing-key",
             secret: str = "testing-secret") -> tuple[dict, Any]:
    """Start moto's S3 server on 127.0.0.1 (a free port) with empty ``buckets``.

    Returns
    -------
    storage_options : dict
        ``endpoint_url``, ``key`` and ``secret`` for s3fs (``open_store(url,
        storage_options=...)``).
    stop : callable
        Stops the server and drops s3fs's cached clients of it.
    """
    import logging

    import moto.server
    import s3fs

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = moto.server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    opts = {"endpoint_url": f"http://{host}:{port}", "key": key, "secret": secret}

    def stop():
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()

    try:
        s3 = s3fs.S3FileSystem(**opts)
        for b in buckets:
            s3.mkdir(b)
    except BaseException:
        stop()
        raise
    return opts, stop


class LatencyFileSystem(AsyncFileSystem):
    """Wrap ``fs`` so that every byte-range read waits ``latency_s`` first, and count them.

    An fsspec ``AsyncFileSystem`` (so ``cat_ranges`` runs reads concurrently, ``batch_size``
    at a time) over any filesystem (an async one shares fsspec's loop). It counts
    ``requests``, ``bytes``, ``max_in_flight`` and ``round_trips``: the longest chain of
    requests each started after the previous one finished (a request's depth is one more
    than the deepest request finished before it started), which is the number of latencies a
    gather waits, independent of the machine's speed.

    Parameters
    ----------
    fs
        The filesystem that holds the data (local, HTTP, S3, ...).
    latency_s
        Seconds added to every read.
    """

    cachable = False
    protocol = "latency"

    def __init__(self, fs, latency_s: float = 0.02, **kw):
        super().__init__(**kw)
        self.fs = fs
        self.latency_s = float(latency_s)
        self._count_lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Zero the counters."""
        with self._count_lock:
            self.requests = 0
            self.bytes = 0
            self.round_trips = 0
            self.in_flight = self.max_in_flight = 0
            self._done_depth = 0

    async def _cat_file(self, path, start=None, end=None, **kw):
        with self._count_lock:  # a request's depth: one more than any finished before it
            depth = self._done_depth + 1
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency_s)
            if getattr(self.fs, "async_impl", False):
                data = await self.fs._cat_file(path, start=start, end=end, **kw)
            else:
                data = self.fs.cat_file(path, start=start, end=end, **kw)
        finally:
            with self._count_lock:
                self.in_flight -= 1
                self._done_depth = max(self._done_depth, depth)
                self.round_trips = max(self.round_trips, depth)
        self.bytes += len(data)
        return data

    async def _info(self, path, **kw):
        if getattr(self.fs, "async_impl", False):
            return await self.fs._info(path, **kw)
        return self.fs.info(path, **kw)

    async def _ls(self, path, detail=True, **kw):
        if getattr(self.fs, "async_impl", False):
            return await self.fs._ls(path, detail=detail, **kw)
        return self.fs.ls(path, detail=detail, **kw)


