"""Fixtures of the featurestore tests."""

from __future__ import annotations

import collections

import pytest

from featurestore.testing.loopback import serve_http


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(served directory, base URL, GETs per file path) of a loopback HTTP server with byte
    ranges, one per test module."""
    root = tmp_path_factory.mktemp("served")
    counts = collections.Counter()
    url, stop = serve_http(root, paths=counts)
    yield root, url, counts
    stop()
