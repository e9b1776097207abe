"""Opening an array of a store: its ``zarr.json`` checked against the schema, its files
confined to the store directory, then the row reader that fits (local shard file, remote
byte ranges, or zarr for compressed arrays)."""

from __future__ import annotations

import functools
import json
import os

import numpy as np

from featurestore.errors import CorruptStoreError, FeatureStoreError, UnsafePathError
from featurestore.format.schema import ArraySpec, check_array_meta
from featurestore.remote import forksafe
from featurestore.remote.location import Location, remote_error
from featurestore.remote.retry import is_transport_error
from featurestore.rows import LocalRows, RowReader, ZarrRows
from featurestore.rows.ranges import RangeRows, pooled_filesystem

__all__ = ["ArrayOpener"]


class ArrayOpener:
    """Opens the row readers of the arrays of one store, each checked first.

    Parameters
    ----------
    loc
        The store's location.
    storage_options
        The options ``loc`` was made with (a forked child remakes its clients from them).
    specs
        What the root schema says of each array, by key.
    io_threads, cache_bytes
        Passed to the row readers (see :func:`~featurestore.open_store`).
    """

    def __init__(self, loc: Location, storage_options: dict | None,
                 specs: dict[str, ArraySpec], io_threads: int, cache_bytes: int):
        self.loc, self.url = loc, loc.url
        self.storage_options = storage_options
        self.specs = specs
        self.io_threads, self.cache_bytes = io_threads, cache_bytes
        self._root_real = os.path.realpath(loc.root) if loc.is_local else None
        # the zarr store of compressed arrays, one per process (made on first use)
        self._zstore = forksafe.PerProcess(functools.partial(loc.zarr_store, read_only=True))

    def confined(self, key: str, path: str) -> str:
        """``path`` (of array ``key``), refused unless it resolves inside the store's root."""
        if self._root_real is not None:
            real = os.path.realpath(path)
            if not real.startswith(self._root_real + os.sep):
                raise UnsafePathError(f"Array {key} of {self.url} resolves to {real}, outside "
                                      f"the store directory {self._root_real}. "
                                      "Refusing to read it.")
        return path

    def open(self, key: str) -> RowReader:
        """The row reader of array ``key``, after checking its ``zarr.json`` and files."""
        spec = self.specs[key]
        file = self.confined(key, self.loc.path(f"{key}/zarr.json"))
        try:
            with self.loc.fs.open(file, "rb") as f:
                raw = f.read()
        except FileNotFoundError as e:
            raise CorruptStoreError(f"Expected array {key} in {self.url} (its schema names it). "
                                    f"Its zarr.json ({file}) is missing.") from e
        layout = check_array_meta(raw, spec, file)
        if self.loc.is_local and layout is not None:
            path = self.confined(key, self.loc.path(f"{key}/{layout.chunk_key()}"))
            return LocalRows(path, layout, io_threads=self.io_threads)
        if layout is not None:  # remote v1: rows are byte ranges of the shard file
            return self._range_rows(key, layout)
        if spec.compressed or layout is None:
            self.check_chunks_present(key, json.loads(raw))
        return self._zarr_rows(key, file)

    def _zarr_rows(self, key: str, file: str) -> ZarrRows:
        """A compressed (or empty) array's reader, through zarr."""
        import zarr

        url, opts = self.url, self.storage_options

        def reopen():  # a forked child's own zarr store: the parent's client is bound to its
            return zarr.open_array(  # loop and shares its connections
                store=Location(url, opts).zarr_store(read_only=True), path=key, mode="r")

        try:
            z = zarr.open_array(store=self._zstore.get(), path=key, mode="r")
        except Exception as e:  # zarr's own metadata errors
            raise CorruptStoreError(f"zarr cannot open array {key} of {self.url} ({file}): "
                                    f"{type(e).__name__}: {e}") from e
        return ZarrRows(z, cache_bytes=self.cache_bytes, name=f"{self.url}/{key}",
                        reopen=None if self.loc.is_local else reopen)

    def _range_rows(self, key: str, layout) -> RangeRows:
        """A remote v1 array's reader: its own pooled client, remade after ``fork``."""
        n, url, opts = self.io_threads, self.url, self.storage_options

        def reopen():
            return pooled_filesystem(Location(url, opts).fs, n)

        try:
            return RangeRows(pooled_filesystem(self.loc.fs, n),
                             self.loc.path(f"{key}/{layout.chunk_key()}"), layout,
                             concurrency=n, reopen=reopen)
        except (FeatureStoreError, FileNotFoundError):
            raise
        except Exception as e:  # noqa: BLE001 - the size request's transport errors, named
            if not is_transport_error(e):
                raise
            raise remote_error(e, self.url, key) from e

    def check_chunks_present(self, key: str, meta: dict) -> None:
        """Every chunk (shard) file of a zarr-read array exists: zarr reads a missing one as
        zeros, which would be silent wrong data."""
        shape = meta["shape"]
        if not shape or any(s == 0 for s in shape):
            return
        grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
        counts = [-(-s // c) for s, c in zip(shape, grid)]
        expected = int(np.prod(counts))
        base = self.loc.path(f"{key}/c")
        try:
            found = self.loc.fs.find(base)
        except FileNotFoundError:
            found = []
        rel = {p[len(base) + 1:] if p.startswith(base + "/") else p for p in found}
        if len(rel) >= expected and expected == len(_grid_keys(counts) & rel):
            return
        missing = sorted(_grid_keys(counts) - rel)
        raise CorruptStoreError(
            f"Expected {expected} chunk file(s) of array {key} in {self.url}. "
            f"{len(missing)} missing, e.g. {self.loc.path(f'{key}/c/{missing[0]}')} "
            "(zarr would read them as zeros).")


def _grid_keys(counts: list[int]) -> set[str]:
    keys = [""]
    for c in counts:
        keys = [f"{k}/{i}" if k else str(i) for k in keys for i in range(c)]
    return set(keys)
