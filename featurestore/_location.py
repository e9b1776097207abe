"""Where a store lives: a local directory or any fsspec URL."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem


class Location:
    """A store's root: the fsspec filesystem, the root path, and whether it is local."""

    def __init__(self, url: str | os.PathLike, storage_options: dict | None = None):
        self.url = os.fspath(url)
        self.storage_options = dict(storage_options or {})
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
