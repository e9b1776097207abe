"""Test support: the row-reader conformance suite for other backends, loopback servers.

* :mod:`featurestore.testing.conformance`: :class:`RowReaderTests` and its helpers;
* :mod:`featurestore.testing.loopback`: a Range-capable HTTP server, moto's S3 on loopback, and
  a latency-injecting filesystem;
* :mod:`featurestore.testing.kill`: :func:`kill_at_write`, for crash tests of jobs.
"""

from featurestore.testing.conformance import *  # noqa: F401,F403
from featurestore.testing.conformance import __all__  # noqa: F401
