"""Where a store lives: a local directory or any fsspec URL."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from .errors import RemoteStoreError

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


class Location:
    """A store's root: the fsspec filesystem, the root path, and whether it is local."""

    def __init__(self, url: str | os.PathLike, storage_options: dict | None = None):
        self.url = os.fspath(url)
        self.storage_options = remote_defaults(self.url, storage_options)
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **self.storage_options)
        self.root = self.root.rstrip("/") or "/"
        self.is_local = isinstance(self.fs, LocalFileSystem)
        if self.is_local:
            self.root = os.path.abspath(self.root)

    def __repr__(self) -> str:
        return f"Location({self.url!r})"

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def exists(self, key: str = "") -> bool:
        return self.fs.exists(self.path(key))

    def zarr_store(self, read_only: bool):
        import zarr.storage

        if self.is_local:
            return zarr.storage.LocalStore(self.root, read_only=read_only)
        return zarr.storage.FsspecStore.from_url(
            self.url, read_only=read_only, storage_options=self.storage_options or None
        )

    def check_ranges(self, key: str = "zarr.json") -> None:
        """Raise :class:`RemoteStoreError` if the server ignores byte-range requests (a plain
        ``python -m http.server`` does): row reads and zarr's shard indexes need them, and
        without this check they fail later as a checksum error or read whole files."""
        proto = self.fs.protocol
        proto = proto[0] if isinstance(proto, (tuple, list)) else proto
        if self.is_local or proto not in ("http", "https"):
            return
        try:
            got = self.fs.cat_file(self.path(key), start=0, end=2)
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
        with self.fs.open(self.path(key), "rb") as f:
            return json.loads(f.read())

    def write_bytes_atomic(self, key: str, data: bytes) -> None:
        """Write a small file so that readers see the old or the new content, never half."""
        path = self.path(key)
        if self.is_local:
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        else:  # object stores replace a whole object at once
            self.fs.pipe_file(path, data)

    def write_json_atomic(self, key: str, obj: dict[str, Any]) -> None:
        self.write_bytes_atomic(key, json.dumps(obj, indent=2, sort_keys=False).encode())

    def size(self, key: str) -> int:
        return int(self.fs.size(self.path(key)))

    def disk_usage(self, key: str = "") -> int:
        """Bytes of all files under ``key``."""
        return int(self.fs.du(self.path(key), total=True))
