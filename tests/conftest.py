"""Shared fixtures: a loopback HTTP server with byte ranges."""

from __future__ import annotations

import pytest

from featurestore.testing.loopback import serve_http


@pytest.fixture(scope="session")
def http_root(tmp_path_factory):
    """(directory, base URL) of a read-only HTTP server on loopback serving the directory."""
    root = tmp_path_factory.mktemp("http")
    url, stop = serve_http(root)
    yield root, url
    stop()
