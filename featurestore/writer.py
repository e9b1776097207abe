"""The writer API: build a store step by step, then commit it.

Until :meth:`StoreWriter.commit` the root attributes say ``complete: false`` and readers
refuse the store. Each array is written to a temporary file and renamed into place when
whole, and the schema in the root ``zarr.json`` is rewritten atomically after every step,
so a writer killed at any point leaves a store that is either refused or resumable.

The writer records each step in a :class:`~featurestore.format.schema.StoreSchema`, the
representation readers parse the root ``zarr.json`` into, and writes it back with
:meth:`~featurestore.format.schema.StoreSchema.to_json`.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from featurestore.errors import (
    IncompleteStoreError,
    NotAStoreError,
    SchemaError,
    StoreExistsError,
    UnknownNodeTypeError,
    UnsafePathError,
)
from featurestore.format import names as fmt
from featurestore.format.arrays import BlockCheck, create_array, write_array
from featurestore.format.integrity import topology_records
from featurestore.format.names import EdgeType
from featurestore.format.schema import (
    EdgeTypeSchema,
    FeatureSchema,
    NodeTypeSchema,
    StoreSchema,
    ValueSchema,
)
from featurestore.remote.location import Location
from featurestore.remote.lock import LOCK_NAME, WriteLock
from featurestore.rows.validate import first_out_of_range
from featurestore.version import __version__
from featurestore.format.blocks import BLOCK_BYTES, blocks_of, iter_blocks, row_blocks
from featurestore.writer_edges import EdgeDataSteps

__all__ = ["create_store", "StoreWriter", "iter_blocks", "BLOCK_BYTES"]

#: errno of a place the writer may not write: no permission, a read-only file system.
_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def create_store(url: str | os.PathLike, *, mode: str = "w-",
                 storage_options: dict | None = None) -> StoreWriter:
    """Start writing a store at ``url`` (local path or fsspec URL).

    ``mode``: ``"w-"`` fails if anything exists there; ``"w"`` replaces an existing store
    of this package (root attribute ``format == "graph-featurestore"``), removing only its
    own files; ``"a"`` resumes an incomplete store (its finished arrays are kept). A
    directory holding anything else is never removed (:class:`StoreExistsError`).

    The writer holds the store's exclusive write lock (:mod:`featurestore.remote.lock`) until
    :meth:`StoreWriter.commit` or :meth:`StoreWriter.close`; a second writer of the same
    path fails with :class:`StoreLockedError`.
    """
    return StoreWriter(url, mode=mode, storage_options=storage_options)


class StoreWriter(EdgeDataSteps):
    """Writes a store. Use :func:`create_store`; call :meth:`commit` when done."""

    def __init__(self, url, *, mode: str = "w-", storage_options: dict | None = None):
        if mode not in ("w-", "w", "a"):
            raise ValueError(f"Expected mode 'w-', 'w' or 'a'. Got {mode!r} instead.")
        self.loc = Location(url, storage_options)
        self.url = self.loc.url
        self._lock = WriteLock(self.loc)
        state = _inspect(self.loc)  # refuse before touching anything
        if state == "store" and mode == "w-":
            raise StoreExistsError(f"Expected nothing at {self.url}. A store exists there; "
                                   "pass mode='w' to replace it or mode='a' to resume it.")
        if state == "other" and mode == "a" and self.loc.exists("zarr.json"):
            raise NotAStoreError(f"Expected a feature store to resume at {self.url}. Its "
                                 "zarr.json is not of format graph-featurestore.")
        if state == "other":
            raise StoreExistsError(
                f"Expected an empty or new directory, or a store of this package, at {self.url}. "
                "It holds other files (and no graph-featurestore zarr.json); nothing was "
                "removed. Choose another path.")
        if state == "file":
            raise StoreExistsError(f"Expected a directory for the store at {self.url}. "
                                  "A file is there; nothing was removed.")
        try:
            self.loc.fs.makedirs(self.loc.root, exist_ok=True)
        except OSError as e:
            if not isinstance(e, (FileExistsError, NotADirectoryError)) and \
                    e.errno not in _UNWRITABLE:
                raise
            raise UnsafePathError(f"Cannot create the store directory {self.url}: {e}") from e
        try:
            self._lock.acquire()
        except OSError as e:
            if e.errno not in _UNWRITABLE:
                raise
            raise UnsafePathError(f"Cannot write to {self.url} (read-only?): {e}") from e
        try:
            self._open(mode, _inspect(self.loc))  # again: the state may have changed meanwhile
        except BaseException:
            self._lock.release()
            raise
        self._zstore = self.loc.zarr_store(read_only=False)

    def _open(self, mode: str, state: str) -> None:
        if mode == "a" and state == "store":
            attrs = self.loc.read_json("zarr.json").get("attributes", {})
            if attrs.get("complete") is True:
                raise StoreExistsError(f"The store at {self.url} is complete; nothing to resume.")
            self._meta = StoreSchema.from_attrs(attrs, self.url, file=self.loc.path("zarr.json"))
            return
        if state == "store":
            if mode == "w-":
                raise StoreExistsError(f"Expected nothing at {self.url}. A store exists there.")
            _remove_store_files(self.loc)
        elif state == "other":
            raise StoreExistsError(f"Expected no other files at {self.url}; nothing was removed.")
        self._meta = StoreSchema.new(self.url, __version__)
        self._save()

    def close(self) -> None:
        """Release the write lock without committing (the store stays incomplete, resumable
        with ``mode="a"``)."""
        self._lock.release()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- bookkeeping ----------------------------------------------------------------
    @property
    def meta(self) -> StoreSchema:
        """The schema written so far (what :attr:`Store.meta <featurestore.Store.meta>` will
        read back)."""
        return self._meta

    @property
    def attrs(self) -> dict[str, Any]:
        """The root attributes written so far, as JSON (a copy: steps change :attr:`meta`)."""
        return self._meta.to_attrs()

    @property
    def schema(self) -> dict[str, Any]:
        """The schema being written, as the JSON of the root attributes (a copy)."""
        return self.attrs["schema"]

    def _save(self) -> None:
        self.loc.write_json_atomic("zarr.json", self._meta.to_json())

    def _record(self, meta: StoreSchema) -> None:
        """Make ``meta`` the schema and write it."""
        self._meta = meta
        self._save()

    def has_array(self, key: str) -> bool:
        """Whether ``key`` was written completely (resuming jobs skip it)."""
        return self.loc.exists(f"{key}/zarr.json") and key in self._meta.arrays

    def _ntype(self, ntype: str) -> NodeTypeSchema:
        nts = self._meta.node_types
        if ntype not in nts:
            raise UnknownNodeTypeError(f"Expected a node type added to {self.url} "
                                       f"({sorted(nts)}). Got {ntype!r}.")
        return nts[ntype]

    def _create_meta(self, key: str, shape: tuple, dtype: np.dtype, compressors=None) -> dict:
        return create_array(self._zstore, key, shape, dtype, compressors)

    def _done(self, key: str) -> None:
        self._record(self._meta.with_array(key))

    def _write(self, key: str, shape: tuple, dtype: np.dtype, blocks: Iterable,
               compressors=None, check: BlockCheck | None = None) -> None:
        write_array(self.loc, self._zstore, key, shape, dtype, blocks, compressors, check)
        self._done(key)

    # -- public steps ---------------------------------------------------------------
    def add_node_type(self, ntype: str, num_nodes: int, orig_ids=None) -> None:
        """Declare a node type with ``num_nodes`` nodes (ids ``0..num_nodes-1``).

        ``orig_ids``: the original id of each node (array or iterator of blocks, integer);
        by default the identity.
        """
        fmt.check_name("node type", ntype)
        if num_nodes < 0:
            raise SchemaError(f"Expected a non-negative node count for {ntype!r}. Got {num_nodes}.")
        nt = self._meta.node_types.get(ntype)
        if nt is None:
            nt = NodeTypeSchema(ntype, int(num_nodes))
            self._meta = self._meta.with_node_type(nt)  # written with the orig_id array
        if nt.num_nodes != num_nodes:
            raise SchemaError(f"Node type {ntype!r} already has {nt.num_nodes} nodes, "
                              f"not {num_nodes}.")
        key = fmt.orig_id_key(ntype)
        if orig_ids is None:
            step = max(1, BLOCK_BYTES // 8)
            orig_ids = (np.arange(lo, min(lo + step, num_nodes), dtype=np.int64)
                        for lo in range(0, num_nodes, step))

        def check(b, at):
            if b.ndim != 1 or b.dtype.kind not in "iu":
                raise SchemaError(f"Expected 1-D integer orig_ids for {ntype!r}. "
                                  f"Got {b.dtype} of shape {b.shape} instead.")

        self._write(key, (int(num_nodes),), np.dtype(np.int64), blocks_of(orig_ids), check=check)

    def add_edge_type(self, etype: Sequence[str], indptr, indices, *,
                      indices_dtype=None, validate: bool = True) -> None:
        """Add a CSC edge type: for destination ``v``, sources ``indices[indptr[v]:indptr[v+1]]``.

        ``indptr`` is an array of length ``num_nodes(dst) + 1``; ``indices`` an array or an
        iterator of blocks with ids of ``src``. Stored as int32 when every id fits.
        """
        et = EdgeType(*etype)
        for part, name in (("relation", et.rel), ("node type", et.src), ("node type", et.dst)):
            fmt.check_name(part, name)
        num_src = self._ntype(et.src).num_nodes
        num_dst = self._ntype(et.dst).num_nodes
        indptr = np.asarray(indptr)
        if indptr.ndim != 1 or indptr.shape[0] != num_dst + 1 or indptr.dtype.kind not in "iu":
            raise SchemaError(f"Expected an integer indptr of length {num_dst + 1} for {et}. "
                              f"Got {indptr.dtype} of shape {indptr.shape} instead.")
        num_edges = int(indptr[-1])
        if validate:
            if indptr[0] != 0:
                raise SchemaError(f"Expected indptr[0] == 0 for {et}. Got {indptr[0]}.")
            d = _first_decrease(indptr)
            if d >= 0:
                raise SchemaError(f"Expected a non-decreasing indptr for {et}. "
                                  f"indptr[{d + 1}] < indptr[{d}].")
        idt = np.dtype(indices_dtype) if indices_dtype is not None else fmt.index_dtype(num_src)

        def check(b, at):
            if b.ndim != 1 or (b.size and b.dtype.kind not in "iu"):
                raise SchemaError(f"Expected 1-D integer indices for {et}. "
                                  f"Got {b.dtype} of shape {b.shape} instead.")
            bad = first_out_of_range(b, num_src) if b.size and validate else -1
            if bad >= 0:
                raise SchemaError(f"Expected source ids in [0, {num_src}) for {et}. "
                                  f"Got {int(b[bad])} at edge {at + bad}.")

        self._write(fmt.edge_key(et, "indptr"), (num_dst + 1,), np.dtype(np.int64),
                    iter_blocks(indptr))
        self._write(fmt.edge_key(et, "indices"), (num_edges,), idt, blocks_of(indices),
                    check=check)
        self._record(self._meta.with_edge_type(EdgeTypeSchema(et, num_edges, idt, "csc")))

    def add_features(self, ntype: str, name: str, data, *, dtype=None, compressors=None,
                     row_shape: Sequence[int] | None = None) -> None:
        """Add a feature matrix (rows = nodes of ``ntype``).

        ``data``: an array (a memory map is streamed, not loaded) or an iterator of row
        blocks; then give ``dtype`` and ``row_shape`` or they are taken from the first block.
        ``dtype`` casts (e.g. float32 to float16). ``compressors``: zarr compressors (e.g.
        ``zarr.codecs.ZstdCodec()``) for object stores; uncompressed by default.
        """
        fmt.check_name("feature", name)
        n = self._ntype(ntype).num_nodes
        blocks, dtype, row_shape = row_blocks(data, dtype, row_shape, f"feature {ntype}/{name}")
        self._write(fmt.feature_key(ntype, name), (n,) + tuple(row_shape), dtype, blocks,
                    compressors=compressors)
        self._record_feature(ntype, FeatureSchema(name, dtype, tuple(row_shape),
                                                  compressors is not None))

    def _record_feature(self, ntype: str, f: FeatureSchema) -> None:
        """Record feature ``f`` of ``ntype`` (its array written) in the schema, and write it."""
        self._record(self._meta.with_node_type(self._ntype(ntype).with_feature(f)))

    def add_values(self, ntype: str, name: str, data) -> None:
        """Add a per-node 1-D array (``year``, ``label``, a mask, ...)."""
        fmt.check_name("value", name)
        n = self._ntype(ntype).num_nodes
        arr = data if isinstance(data, np.ndarray) else np.asarray(data)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise SchemaError(f"Expected {n} values for {ntype}/{name}. "
                              f"Got shape {arr.shape} instead.")
        self._write(fmt.values_key(ntype, name), (n,), arr.dtype, iter_blocks(arr))
        nt = self._ntype(ntype).with_value(ValueSchema(name, arr.dtype))
        self._record(self._meta.with_node_type(nt))

    def add_labels(self, ntype: str, labels) -> None:
        """Add labels (integers; ``-1`` for nodes without one)."""
        arr = np.asarray(labels)
        if arr.dtype.kind not in "iu":
            raise SchemaError(f"Expected integer labels for {ntype} (-1 for none). "
                              f"Got {arr.dtype} instead.")
        self.add_values(ntype, "label", arr)

    def add_split(self, name: str, ntype: str, ids) -> None:
        """Add split ``name`` (``train``, ``valid``, ...): store ids of ``ntype``."""
        fmt.check_name("split", name)
        n = self._ntype(ntype).num_nodes
        arr = np.asarray(ids)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise SchemaError(f"Expected 1-D integer ids for split {name!r}. "
                              f"Got {arr.dtype} of shape {arr.shape} instead.")
        arr = arr.astype(np.int64, copy=False)
        bad = first_out_of_range(arr, n)
        if bad >= 0:
            raise SchemaError(f"Expected ids in [0, {n}) for split {name!r} of {ntype!r}. "
                              f"Got {int(arr[bad])} at position {bad} instead.")
        self._write(fmt.split_key(name, ntype), (arr.shape[0],), np.dtype(np.int64),
                    iter_blocks(arr))
        self._record(self._meta.with_split(name, ntype, int(arr.shape[0])))

    def set_node_order(self, ntype: str, order: dict[str, Any]) -> None:
        """Record how the ids of ``ntype`` are ordered (root attribute ``node_order``, see
        docs/format.md): ``order["order"]`` names it, ``order["hot_rows"]`` is the length of
        the id prefix holding the rows ranked hottest, hottest first (0: none)."""
        self._ntype(ntype)
        if not isinstance(order.get("order"), str) or \
                not isinstance(order.get("hot_rows"), (int, np.integer)):
            raise SchemaError(f"Expected a node order for {ntype!r} with 'order' (a name) and "
                              f"'hot_rows' (an integer). Got {order!r} instead.")
        orders = dict(self._meta.extra.get("node_order", {}))
        orders[ntype] = {k: (v.item() if isinstance(v, np.generic) else v)
                         for k, v in order.items()}
        self._record(self._meta.with_extra("node_order", orders))

    def add_provenance(self, step: str, **info: Any) -> None:
        """Record a preprocessing step (inputs, options, timings) in the root attributes."""
        entry = {"step": step, "tool": f"featurestore {__version__}",
                 "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
        entry.update(info)
        self._record(self._meta.with_provenance(entry))

    def commit(self) -> None:
        """Mark the store complete. Readers accept it from now on."""
        for nt in self._meta.node_types:
            if fmt.orig_id_key(nt) not in self._meta.arrays:
                raise IncompleteStoreError(f"Node type {nt!r} of {self.url} has no orig_id array.")
        generation = uuid.uuid4().hex
        # validate every CSC once, so readers can skip it while the files stay unchanged
        checks = topology_records(self.loc, self._meta, generation)
        self._record(self._meta.committed(generation, checks))
        self._lock.release()


def _inspect(loc: Location) -> str:
    """What is at ``loc``: ``"none"`` (nothing, or an empty directory), ``"scratch"`` (only
    what a writer or job of this package leaves before its first array: a manifest, a lock),
    ``"store"`` (a zarr.json of this format), ``"file"``, or ``"other"`` (anything else, which
    is never removed)."""
    if not loc.exists():
        return "none"
    if loc.is_local and not os.path.isdir(loc.root):
        return "file"
    if loc.exists("zarr.json"):
        try:
            attrs = loc.read_json("zarr.json").get("attributes", {})
        except (ValueError, AttributeError, OSError):
            return "other"
        return "store" if isinstance(attrs, dict) and attrs.get("format") == fmt.FORMAT_NAME \
            else "other"
    names = {os.path.basename(p.rstrip("/")) for p in loc.fs.ls(loc.root, detail=False)}
    names.discard(LOCK_NAME)
    if not names:
        return "none"
    return "scratch" if names <= {".preprocess"} else "other"


def _remove_store_files(loc: Location) -> None:
    """Remove a store of this package: its own entries only (``format.STORE_ENTRIES`` and
    the atomic writers' leftovers), never a user's file beside them."""
    for p in loc.fs.ls(loc.root, detail=False):
        name = os.path.basename(p.rstrip("/"))
        ours = name in fmt.STORE_ENTRIES or (name.startswith("zarr.json.") and
                                            name.endswith(".tmp"))
        if ours and name != LOCK_NAME:
            loc.fs.rm(p, recursive=True)


def _first_decrease(a: np.ndarray) -> int:
    """Index i with a[i+1] < a[i], or -1; streamed in blocks (no full diff copy)."""
    step = BLOCK_BYTES // 8
    for lo in range(0, max(a.shape[0] - 1, 0), step):
        seg = np.asarray(a[lo:lo + step + 1])
        bad = np.nonzero(seg[1:] < seg[:-1])[0]
        if bad.size:
            return lo + int(bad[0])
    return -1
