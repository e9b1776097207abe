"""The reader API: :func:`open_store` and the objects it returns."""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

import numpy as np

from . import format as fmt
from ._location import Location
from ._shard import ShardLayout
from .errors import (IncompleteStoreError, NotAStoreError, StoreNotFoundError,
                     UnknownEdgeTypeError, UnknownFeatureError, UnknownNodeTypeError,
                     UnknownSplitError)
from .format import EdgeType
from .gather import READ_PATHS, LocalRows, ZarrRows, check_ids, check_out

__all__ = ["open_store", "Store", "FeatureArray"]


def open_store(url: str | os.PathLike, *, storage_options: dict | None = None,
               read_path: str = "auto", io_threads: int = 32,
               cache_bytes: int = 256 << 20, allow_incomplete: bool = False) -> "Store":
    """Open a store read-only.

    Parameters
    ----------
    url
        A local directory or any fsspec URL (``memory://...``, ``http://...``, ``s3://...``).
    storage_options
        Passed to fsspec for remote URLs.
    read_path
        ``"auto"`` (memory map when the rows are in the page cache, else many concurrent
        ``pread``), ``"mmap"`` or ``"pread"``; local uncompressed arrays only.
    io_threads
        Reads in flight on the ``pread`` path (the device serves ~8x more random reads at
        queue depth 32 than at 1).
    cache_bytes
        Bound of the decoded-chunk cache of each compressed or remote feature array.
    allow_incomplete
        Open a store whose writer never committed (``verify`` uses this); reads may fail.
    """
    return Store(url, storage_options=storage_options, read_path=read_path,
                 io_threads=io_threads, cache_bytes=cache_bytes,
                 allow_incomplete=allow_incomplete)


class FeatureArray:
    """A 2-D (rows = nodes) array of the store with fast random row gathers."""

    def __init__(self, name: str, rows: LocalRows | ZarrRows, shape, dtype, read_path: str):
        self.name = name
        self._rows = rows
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype).newbyteorder("=")
        self.read_path = read_path
        self.last_read_path: str | None = None

    def __repr__(self) -> str:
        return f"FeatureArray({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def gather(self, ids, out: np.ndarray | None = None, *, read_path: str | None = None) -> np.ndarray:
        """Rows ``ids`` in the order asked (any 1-D integer ids: unsorted, repeated, int32/int64).

        ``out`` is an optional preallocated C-contiguous buffer of shape ``(len(ids),) +
        shape[1:]`` and this array's dtype (a NumPy array or a CPU torch tensor, pinned or not).
        """
        ids = check_ids(ids, self.shape[0], self.name)
        buf = check_out(out, ids.shape[0], self.shape[1:], self.dtype, self.name)
        path = read_path or self.read_path
        if path not in READ_PATHS:
            raise ValueError(f"Expected read_path in {READ_PATHS}. Got {path!r} instead.")
        self.last_read_path = self._rows.gather(ids, buf, path)
        return out if out is not None else buf

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            return np.asarray(self.numpy()[key])
        return self.gather(np.asarray(key).reshape(-1)).reshape(np.shape(key) + self.shape[1:])

    def numpy(self) -> np.ndarray:
        """The whole array: a read-only memory map when local, else read into memory."""
        return self._rows.array()

    def resident_share(self, ids) -> float:
        """Share of the pages of rows ``ids`` in the page cache (1.0 when not local)."""
        if isinstance(self._rows, LocalRows):
            return self._rows.resident_share(check_ids(ids, self.shape[0], self.name))
        return 1.0


class Store:
    """A read-only feature store. Use :func:`open_store` to make one."""

    def __init__(self, url, *, storage_options=None, read_path="auto", io_threads=32,
                 cache_bytes=256 << 20, allow_incomplete=False):
        self._args = dict(url=os.fspath(url), storage_options=storage_options,
                          read_path=read_path, io_threads=io_threads, cache_bytes=cache_bytes,
                          allow_incomplete=allow_incomplete)
        if read_path not in READ_PATHS:
            raise ValueError(f"Expected read_path in {READ_PATHS}. Got {read_path!r} instead.")
        self.loc = Location(url, storage_options)
        self.url = self.loc.url
        self.read_path, self.io_threads, self.cache_bytes = read_path, io_threads, cache_bytes
        if not self.loc.exists():
            raise StoreNotFoundError(f"Expected a feature store at {self.url}. Nothing is there.")
        try:
            meta = self.loc.read_json("zarr.json")
        except FileNotFoundError as e:
            raise NotAStoreError(f"Expected a zarr v3 group (zarr.json) at {self.url}. "
                                 "Found none: this is not a feature store.") from e
        except ValueError as e:
            raise NotAStoreError(f"Expected JSON in {self.loc.path('zarr.json')}: {e}") from e
        attrs = meta.get("attributes", {})
        if meta.get("node_type") != "group" or attrs.get("format") != fmt.FORMAT_NAME:
            raise NotAStoreError(f"Expected a zarr group with format {fmt.FORMAT_NAME!r} at "
                                 f"{self.url}. Got format {attrs.get('format')!r} instead.")
        if attrs.get("format_version") != fmt.FORMAT_VERSION:
            raise NotAStoreError(f"Expected format version {fmt.FORMAT_VERSION} at {self.url}. "
                                 f"Got {attrs.get('format_version')!r} instead.")
        if not attrs.get("complete") and not allow_incomplete:
            raise IncompleteStoreError(
                f"The store at {self.url} is incomplete: its writer never committed (it crashed "
                "or is still running). Re-run the job that writes it; it resumes where it stopped.")
        self.attrs: dict[str, Any] = attrs
        self.schema: dict[str, Any] = attrs.get("schema", {"node_types": {}, "edge_types": []})
        self.provenance: list[dict] = attrs.get("provenance", [])
        self._arrays: dict[str, LocalRows | ZarrRows] = {}
        self._lock = threading.Lock()
        self._zstore = None

    # -- pickling: reopen from the constructor arguments, never ship maps or fds ----------
    def __reduce__(self):
        return (_reopen, (self._args,))

    def __repr__(self) -> str:
        return f"Store({self.url!r}, node_types={self.node_types}, edge_types={len(self.edge_types)})"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release memory maps, file descriptors and reader threads."""
        with self._lock:
            for rows in self._arrays.values():
                rows.close()
            self._arrays.clear()

    # -- schema -------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        return bool(self.attrs.get("complete"))

    @property
    def node_types(self) -> list[str]:
        return sorted(self.schema["node_types"])

    @property
    def edge_types(self) -> list[EdgeType]:
        return [EdgeType(e["src"], e["rel"], e["dst"]) for e in self.schema["edge_types"]]

    @property
    def split_names(self) -> list[str]:
        return sorted(self.schema.get("splits", {}))

    def _ntype(self, ntype: str | None) -> str:
        nts = self.schema["node_types"]
        if ntype is None:
            if len(nts) != 1:
                raise UnknownNodeTypeError(f"Expected a node type for {self.url}, which has "
                                           f"{sorted(nts)}. Got None instead.")
            return next(iter(nts))
        if ntype not in nts:
            raise UnknownNodeTypeError(f"Expected a node type of {self.url}: {sorted(nts)}. "
                                       f"Got {ntype!r} instead.")
        return ntype

    def _etype(self, etype: Sequence[str] | str | None) -> tuple[EdgeType, dict]:
        ets = self.schema["edge_types"]
        if etype is None:
            if len(ets) != 1:
                raise UnknownEdgeTypeError(
                    f"Expected an edge type for {self.url}, which has "
                    f"{[tuple(EdgeType(e['src'], e['rel'], e['dst'])) for e in ets]}. Got None.")
            e = ets[0]
        else:
            if isinstance(etype, str):
                found = [e for e in ets if e["rel"] == etype]
            else:
                t = tuple(etype)
                found = [e for e in ets if (e["src"], e["rel"], e["dst"]) == t]
            if len(found) != 1:
                raise UnknownEdgeTypeError(
                    f"Expected an edge type of {self.url}: "
                    f"{[(e['src'], e['rel'], e['dst']) for e in ets]}. Got {etype!r} instead.")
            e = found[0]
        return EdgeType(e["src"], e["rel"], e["dst"]), e

    def num_nodes(self, ntype: str | None = None) -> int:
        return int(self.schema["node_types"][self._ntype(ntype)]["num_nodes"])

    def num_edges(self, etype=None) -> int:
        return int(self._etype(etype)[1]["num_edges"])

    def feature_names(self, ntype: str | None = None) -> list[str]:
        return sorted(self.schema["node_types"][self._ntype(ntype)].get("features", {}))

    def value_names(self, ntype: str | None = None) -> list[str]:
        return sorted(self.schema["node_types"][self._ntype(ntype)].get("values", {}))

    # -- arrays -------------------------------------------------------------------------
    def _rows(self, key: str) -> LocalRows | ZarrRows:
        with self._lock:
            rows = self._arrays.get(key)
            if rows is None:
                rows = self._open_rows(key)
                self._arrays[key] = rows
            return rows

    def _open_rows(self, key: str) -> LocalRows | ZarrRows:
        try:
            meta = self.loc.read_json(f"{key}/zarr.json")
        except FileNotFoundError as e:
            from .errors import CorruptStoreError
            raise CorruptStoreError(f"Expected array {key} in {self.url} (its schema names it). "
                                    "Its zarr.json is missing.") from e
        layout = ShardLayout.from_metadata(meta)
        if self.loc.is_local and layout is not None:
            return LocalRows(self.loc.path(f"{key}/{layout.chunk_key()}"), layout,
                             io_threads=self.io_threads)
        import zarr

        if self._zstore is None:  # the caller, _rows, holds self._lock
            self._zstore = self.loc.zarr_store(read_only=True)
        z = zarr.open_array(store=self._zstore, path=key, mode="r")
        return ZarrRows(z, cache_bytes=self.cache_bytes)

    def _vector(self, key: str) -> np.ndarray:
        return self._rows(key).array()

    def csc(self, etype=None) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)``: for destination ``v``, sources ``indices[indptr[v]:indptr[v+1]]``.

        Memory-mapped (zero-copy, read-only) for local stores.
        """
        et, _ = self._etype(etype)
        return self._vector(fmt.edge_key(et, "indptr")), self._vector(fmt.edge_key(et, "indices"))

    def features(self, ntype: str | None = None, name: str = "feat") -> FeatureArray:
        nt = self._ntype(ntype)
        feats = self.schema["node_types"][nt].get("features", {})
        if name not in feats:
            raise UnknownFeatureError(f"Expected a feature of node type {nt!r} in {self.url}: "
                                      f"{sorted(feats)}. Got {name!r} instead.")
        key = fmt.feature_key(nt, name)
        rows = self._rows(key)
        shape = (self.num_nodes(nt),) + tuple(feats[name]["shape"])
        return FeatureArray(f"{self.url}/{key}", rows, shape, feats[name]["dtype"], self.read_path)

    def values(self, ntype: str | None, name: str) -> np.ndarray:
        """A per-node 1-D array (``label``, ``year``, ...), memory-mapped when local."""
        nt = self._ntype(ntype)
        vals = self.schema["node_types"][nt].get("values", {})
        if name not in vals:
            raise UnknownFeatureError(f"Expected a value array of node type {nt!r} in {self.url}: "
                                      f"{sorted(vals)}. Got {name!r} instead.")
        return self._vector(fmt.values_key(nt, name))

    def labels(self, ntype: str | None = None) -> np.ndarray:
        """Labels in store numbering (``-1`` where a node has none)."""
        return self.values(ntype, "label")

    def orig_ids(self, ntype: str | None = None) -> np.ndarray:
        """Original id of every node: ``orig_ids(t)[store_id]``."""
        return self._vector(fmt.orig_id_key(self._ntype(ntype)))

    def split(self, name: str, ntype: str | None = None) -> np.ndarray:
        """Store ids of the nodes of split ``name`` (``train``, ``valid``, ...)."""
        splits = self.schema.get("splits", {})
        if name not in splits:
            raise UnknownSplitError(f"Expected a split of {self.url}: {sorted(splits)}. "
                                    f"Got {name!r} instead.")
        if ntype is None and len(splits[name]) == 1:
            nt = next(iter(splits[name]))
        else:
            nt = self._ntype(ntype)
        if nt not in splits[name]:
            raise UnknownSplitError(f"Expected node type in {sorted(splits[name])} for split "
                                    f"{name!r} of {self.url}. Got {nt!r} instead.")
        return self._vector(fmt.split_key(name, nt))


def _reopen(args: dict) -> Store:
    return Store(**args)
