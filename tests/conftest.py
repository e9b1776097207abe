"""Shared fixtures: small stores built with the writer API, and a loopback HTTP server."""

from __future__ import annotations

import functools
import io
import os
import http.server
import threading

import pytest


@pytest.fixture(scope="session")
def http_root(tmp_path_factory):
    """(directory, base URL) of a read-only HTTP server on loopback serving the directory."""
    root = tmp_path_factory.mktemp("http")
    handler = functools.partial(_QuietHandler, directory=str(root))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with HTTP range requests (zarr reads shard indexes by suffix range)."""

    def log_message(self, *args):
        pass

    def send_head(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not rng or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        spec = rng.strip().removeprefix("bytes=")
        a, _, b = spec.partition("-")
        if a == "":
            start, end = max(0, size - int(b)), size - 1
        else:
            start, end = int(a), min(size - 1, int(b) if b else size - 1)
        f = open(path, "rb")
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return io.BytesIO(f.read(end - start + 1))
