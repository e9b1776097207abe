"""Retries of a remote store's reads: transport errors (reset, refused, timed out) are retried
with exponential backoff, then raised as a :class:`~featurestore.errors.RemoteStoreError` that
names the store and what was read. Local reads and every other error are not retried."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from featurestore.errors import FeatureStoreError
from featurestore.remote.location import remote_error

__all__ = ["REMOTE_RETRIES", "REMOTE_BACKOFF_S", "is_transport_error", "retry_remote"]

log = logging.getLogger(__name__)

#: retries of a remote read after a transport error, and the first backoff (doubling).
REMOTE_RETRIES = 3
REMOTE_BACKOFF_S = 0.25

T = TypeVar("T")


def is_transport_error(e: BaseException) -> bool:
    """A network failure (refused, reset, timed out) rather than a bug or bad data."""
    if isinstance(e, (FileNotFoundError, FeatureStoreError)):
        return False
    if isinstance(e, (OSError, TimeoutError, ConnectionError)):
        return True
    mod = type(e).__module__ or ""
    return mod.startswith(("aiohttp", "botocore", "aiobotocore", "asyncio", "fsspec"))


def retry_remote(read: Callable[[], T], url: str | None, what: str) -> T:
    """Return ``read()``, retrying it when it fails with a transport error of a remote store.

    Parameters
    ----------
    read
        The read, called up to ``REMOTE_RETRIES + 1`` times.
    url
        The remote store's URL, or ``None`` for a local store (nothing is retried).
    what
        What is read (an array's URL, a row range), for the log and the error.

    Raises
    ------
    RemoteStoreError
        The read still failed with a transport error after ``REMOTE_RETRIES`` retries
        (backoff ``REMOTE_BACKOFF_S``, doubling).
    """
    for attempt in range(REMOTE_RETRIES + 1):
        try:
            return read()
        except FeatureStoreError:
            raise
        except Exception as e:  # noqa: BLE001 - only transport errors are retried
            if url is None or not is_transport_error(e):
                raise
            if attempt == REMOTE_RETRIES:
                raise remote_error(e, url, what) from e
            log.warning("reading %s of %s failed (%s: %s); retry %d of %d", what, url,
                        type(e).__name__, e, attempt + 1, REMOTE_RETRIES)
            time.sleep(REMOTE_BACKOFF_S * 2 ** attempt)
    raise AssertionError("unreachable")  # pragma: no cover
