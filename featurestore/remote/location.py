"""Where a store lives: a local directory or any fsspec URL."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import json
import os
import uuid
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from featurestore.errors import RemoteStoreError
from featurestore.fileio import disk_full_as_error
from featurestore.remote.rangecache import CACHE_BLOCK_BYTES, RangeCacheFileSystem

log = logging.getLogger(__name__)

#: seconds to connect and to wait for the next bytes of a remote read before giving up
#: (aiohttp's default is 300 s of silence, then a TimeoutError with an empty message).
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 60


def remote_defaults(url: str, storage_options: dict | None) -> dict:
    """``storage_options`` with default timeouts (and retries, for S3) for remote URLs; what
    the caller set wins."""
    opts = dict(storage_options or {})
    proto = url.split("://", 1)[0].lower() if "://" in url else "file"
    if proto in ("http", "https"):
        client = dict(opts.get("client_kwargs") or {})
        if "timeout" not in client:
            import aiohttp

            client["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S,
                                                      sock_read=READ_TIMEOUT_S)
        opts["client_kwargs"] = client
    elif proto in ("s3", "s3a"):
        cfg = dict(opts.get("config_kwargs") or {})
        cfg.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        cfg.setdefault("read_timeout", READ_TIMEOUT_S)
        cfg.setdefault("retries", {"max_attempts": 5, "mode": "adaptive"})
        opts["config_kwargs"] = cfg
    return opts


def remote_error(exc: BaseException, url: str, key: str) -> RemoteStoreError:
    """A named error for a failed remote read of ``key`` (an array or file) of ``url``."""
    what = type(exc).__name__
    msg = str(exc) or ("no answer within the read timeout" if "Timeout" in what else "")
    return RemoteStoreError(f"Reading {key} of the remote store {url} failed: {what}: {msg}. "
                            "Check that the server is up and reachable; timeouts are set by "
                            "storage_options (client_kwargs.timeout for HTTP).")


#: keys of ``storage_options`` that configure the local cache tier, not fsspec.
CACHE_OPTIONS = ("cache_dir", "cache_block_bytes")


class Location:
    """A store's root: the fsspec filesystem, the root path, and whether it is local.

    Parameters
    ----------
    url
        A local path or any fsspec URL.
    storage_options
        fsspec options of a remote URL. Two keys are this package's own and are taken out
        before fsspec sees them: ``cache_dir`` (as the argument below) and
        ``cache_block_bytes`` (the cache's block size, default 64 KiB). Through them a cache
        reaches every reader that forwards ``storage_options`` (the loader, ``train_ddp.py
        --storage-options``, stores reopened in worker processes).
    cache_dir
        A local directory caching the remote store's data files block by block
        (:class:`~featurestore.remote.rangecache.RangeCacheFileSystem`); ignored for a local store.
    """

    def __init__(self, url: str | os.PathLike, storage_options: dict | None = None,
                 cache_dir: str | os.PathLike | None = None):
        self.url = os.fspath(url)
        opts = dict(storage_options or {})
        cache_dir = opts.pop("cache_dir", None) or cache_dir
        block = int(opts.pop("cache_block_bytes", CACHE_BLOCK_BYTES))
        self.storage_options = remote_defaults(self.url, opts)
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **self.storage_options)
        self.root = self.root.rstrip("/") or "/"
        self.is_local = isinstance(self.fs, LocalFileSystem)
        if self.is_local:
            self.root = os.path.abspath(self.root)
        #: the filesystem the bytes come from (``fs`` unless a cache wraps it).
        self.remote_fs = self.fs
        #: this store generation's cache directory, or None.
        self.cache_dir: str | None = None
        if cache_dir is not None and not self.is_local:
            self.cache_dir = self._cache_storage(os.fspath(cache_dir))
            if self.cache_dir is not None:
                self.fs = RangeCacheFileSystem(self.remote_fs, self.cache_dir, block)

    def _cache_storage(self, cache_dir: str) -> str | None:
        """``cache_dir/<hash of the URL>-<generation>``: a rewritten store gets a new one.

        ``None`` (no caching) when the generation cannot be read or the store has none (not
        complete, or written before generations): bytes cached under an unknown generation
        could be served for another one.
        """
        try:
            raw = self.remote_fs.cat_file(self.path("zarr.json"))
            attrs = json.loads(raw).get("attributes", {})
            gen = attrs.get("generation") if attrs.get("complete") is True else None
        except Exception as e:  # noqa: BLE001 - the reader reports the store's state next
            log.warning("%s: not caching in %s: the store's generation could not be read "
                        "(%s: %s)", self.url, cache_dir, type(e).__name__, e)
            return None
        if not isinstance(gen, str) or not gen:
            log.warning("%s: not caching in %s: the store has no generation id (incomplete, "
                        "or written before generations)", self.url, cache_dir)
            return None
        key = hashlib.sha256(self.remote_fs.unstrip_protocol(self.root).encode()).hexdigest()
        return os.path.join(os.path.abspath(cache_dir), f"{key[:16]}-{gen}")

    def __repr__(self) -> str:
        return f"Location({self.url!r})"

    def path(self, key: str) -> str:
        """The full path of ``key`` (relative to the root) on :attr:`fs`."""
        return f"{self.root}/{key}" if key else self.root

    def exists(self, key: str = "") -> bool:
        """Whether ``key`` (default: the root) exists."""
        return self.fs.exists(self.path(key))

    def zarr_store(self, read_only: bool):
        """A zarr store over the root (reads through the cache when there is one)."""
        import zarr.storage

        if self.is_local:
            return zarr.storage.LocalStore(self.root, read_only=read_only)
        if self.cache_dir is not None:  # zarr's reads go through the cache too
            from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

            return zarr.storage.FsspecStore(AsyncFileSystemWrapper(self.fs, asynchronous=True),
                                            read_only=read_only, path=self.root)
        return zarr.storage.FsspecStore.from_url(
            self.url, read_only=read_only, storage_options=self.storage_options or None
        )

    def check_ranges(self, key: str = "zarr.json") -> None:
        """Raise :class:`RemoteStoreError` if the server ignores byte-range requests (a plain
        ``python -m http.server`` does): row reads and zarr's shard indexes need them, and
        without this check they fail later as a checksum error or read whole files."""
        proto = self.remote_fs.protocol
        proto = proto[0] if isinstance(proto, (tuple, list)) else proto
        if self.is_local or proto not in ("http", "https"):
            return
        try:
            got = self.remote_fs.cat_file(self.path(key), start=0, end=2)
        except FileNotFoundError:
            return  # nothing there: the caller says so
        except Exception as e:  # noqa: BLE001 - any transport error, named below
            raise remote_error(e, self.url, key) from e
        if len(got) != 2:
            raise RemoteStoreError(
                f"Expected the server of {self.url} to answer byte-range requests (HTTP Range). "
                f"It returned {len(got)} bytes for a 2-byte range of {key}. Serve the store "
                "with a server that supports Range (nginx, an object store) or copy it to a "
                "local disk; `python -m http.server` does not support Range.")

    def read_json(self, key: str) -> dict[str, Any]:
        """The parsed JSON file ``key``."""
        with self.fs.open(self.path(key), "rb") as f:
            return json.loads(f.read())

    def write_bytes_atomic(self, key: str, data: bytes) -> None:
        """Write a small file so that readers see the old or the new content, never half."""
        path = self.path(key)
        if self.is_local:
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            try:
                with disk_full_as_error(path, len(data)), open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            except BaseException:
                with contextlib.suppress(OSError):  # no stray temporary file in the store
                    os.remove(tmp)
                raise
            os.replace(tmp, path)
        else:  # object stores replace a whole object at once
            self.fs.pipe_file(path, data)

    def write_json_atomic(self, key: str, obj: dict[str, Any]) -> None:
        """Write ``obj`` as JSON to ``key`` atomically (see :meth:`write_bytes_atomic`)."""
        self.write_bytes_atomic(key, json.dumps(obj, indent=2, sort_keys=False).encode())

    def size(self, key: str) -> int:
        """Bytes of file ``key``."""
        return int(self.fs.size(self.path(key)))

    def disk_usage(self, key: str = "") -> int:
        """Bytes of all files under ``key``."""
        return int(self.fs.du(self.path(key), total=True))
