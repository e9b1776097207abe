"""The reader API: :func:`open_store` and the objects it returns."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import time
from typing import Any
from collections.abc import Sequence

import numpy as np

from featurestore.format import names as fmt
from featurestore.format.integrity import check_csc, native
from featurestore.remote.location import Location, remote_error
from featurestore.remote.rangecache import RangeCacheFileSystem
from featurestore.errors import (ClosedStoreError, CorruptStoreError, FeatureStoreError,
                     IncompleteStoreError, InvalidArgumentError, NotAStoreError,
                     StoreChangedError, StoreNotFoundError,
                     UnknownEdgeTypeError, UnknownFeatureError, UnknownNodeTypeError,
                     UnknownSplitError, UnsafePathError)
from featurestore.format.names import EdgeType
from featurestore.rows import LocalRows, RowReader, ZarrRows
from featurestore.rows.ranges import RangeRows, pooled_filesystem
from featurestore.rows.local import READ_PATHS
from featurestore.format.schema import ArraySpec, EdgeTypeSchema, StoreSchema, check_array_meta
from featurestore.rows.validate import check_ids, check_out
from featurestore.remote import forksafe

__all__ = ["open_store", "Store", "FeatureArray"]


def open_store(url: str | os.PathLike, *, storage_options: dict | None = None,
               read_path: str = "auto", io_threads: int = 32,
               cache_bytes: int = 256 << 20, allow_incomplete: bool = False,
               cache_dir: str | os.PathLike | None = None) -> Store:
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
        queue depth 32 than at 1), and byte-range requests in flight of a remote store (its
        S3 connection pool is made as large).
    cache_bytes
        Bound of the decoded-chunk cache of each compressed or remote feature array.
    allow_incomplete
        Open a store whose writer never committed (``verify`` uses this); reads may fail.
    cache_dir
        A local directory caching a remote store's data files block by block, on demand
        (shared by the processes of a node; ``storage_options={"cache_dir": ...}`` is the
        same). Ignored for a local store. See docs/scale-out.md, *A local cache tier*.
    """
    return Store(url, storage_options=storage_options, read_path=read_path,
                 io_threads=io_threads, cache_bytes=cache_bytes,
                 allow_incomplete=allow_incomplete, cache_dir=cache_dir)


log = logging.getLogger(__name__)

#: retries of a remote gather after a transport error, and the first backoff (doubling).
REMOTE_RETRIES = 3
REMOTE_BACKOFF_S = 0.25


def _is_transport_error(e: BaseException) -> bool:
    """A network failure (refused, reset, timed out) rather than a bug or bad data."""
    if isinstance(e, (FileNotFoundError, FeatureStoreError)):
        return False
    if isinstance(e, (OSError, TimeoutError, ConnectionError)):
        return True
    mod = type(e).__module__ or ""
    return mod.startswith(("aiohttp", "botocore", "aiobotocore", "asyncio", "fsspec"))


class FeatureArray:
    """A 2-D (rows = nodes) array of the store with fast random row gathers.

    Made by :meth:`Store.features`. Validates ids and output buffers once, then calls its
    row reader (:attr:`reader`, a :class:`~featurestore.rows.RowReader`).

    Parameters
    ----------
    name
        The array's URL, for messages.
    rows
        The row reader.
    shape, dtype
        The array's shape and dtype (from the store's schema).
    read_path
        The default read path of :meth:`gather`.
    store
        The store that owns the reader (gathers count as in flight for its ``close``).
    """

    def __init__(self, name: str, rows: RowReader, shape, dtype, read_path: str,
                 store: Store | None = None):
        self.name = name
        self.reader = rows
        self._store = store
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype).newbyteorder("=")
        self.read_path = read_path

    def __repr__(self) -> str:
        return f"FeatureArray({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the whole array."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def gather(self, ids, out: np.ndarray | None = None, *,
               read_path: str | None = None) -> np.ndarray:
        """Return rows ``ids`` in the order asked.

        Parameters
        ----------
        ids
            Any 1-D integer ids (unsorted, repeated, int32/int64, a list).
        out
            An optional preallocated C-contiguous buffer of shape ``(len(ids),) + shape[1:]``
            and this array's dtype (a NumPy array or a CPU torch tensor, pinned or not).
        read_path
            Overrides the store's read path for this call (local arrays: ``"auto"``,
            ``"mmap"``, ``"pread"``, ``"direct"``, ``"dontneed"``).

        Returns
        -------
        numpy.ndarray or torch.Tensor
            ``out`` when given, else a new array.

        Raises
        ------
        InvalidIdsError, IdsOutOfRangeError
            ``ids`` are not 1-D integers, or fall outside ``[0, len(self))``.
        RemoteStoreError
            A remote read failed after ``REMOTE_RETRIES`` retries.
        """
        ids = check_ids(ids, self.shape[0], self.name)
        buf = check_out(out, ids.shape[0], self.shape[1:], self.dtype, self.name)
        path = read_path or self.read_path
        if path not in READ_PATHS:
            raise ValueError(f"Expected read_path in {READ_PATHS}. Got {path!r} instead.")
        st = self._store
        if st is not None:
            st._enter(self.name)
        try:
            self._gather_retrying(ids, buf, path)
        except FeatureStoreError:
            raise
        except Exception as e:
            if st is not None and not st.loc.is_local and _is_transport_error(e):
                raise remote_error(e, st.url, self.name) from e
            if not self.reader.is_local:  # zarr's decode / checksum errors, short reads
                raise CorruptStoreError(f"Could not read rows of {self.name}: "
                                        f"{type(e).__name__}: {e}") from e
            raise
        finally:
            if st is not None:
                st._exit()
        return out if out is not None else buf

    def _gather_retrying(self, ids, buf, path) -> str:
        """The row reader's gather; on a remote store, transport errors (reset, refused, timed
        out) are retried ``REMOTE_RETRIES`` times with exponential backoff first."""
        st = self._store
        remote = st is not None and not st.loc.is_local
        for attempt in range(REMOTE_RETRIES + 1):
            try:
                return self.reader.gather(ids, buf, path)
            except FeatureStoreError:
                raise
            except Exception as e:  # noqa: BLE001 - only transport errors are retried
                if not (remote and _is_transport_error(e)) or attempt == REMOTE_RETRIES:
                    raise
                log.warning("reading %s of %s failed (%s: %s); retry %d of %d", self.name,
                            st.url, type(e).__name__, e, attempt + 1, REMOTE_RETRIES)
                time.sleep(REMOTE_BACKOFF_S * 2 ** attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def __getitem__(self, key) -> np.ndarray:
        """Rows by slice (only the slice is read) or by an integer (array) index."""
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if abs(step) > 1:  # strided: only the rows asked, as a gather
                return self.gather(np.arange(start, stop, step, dtype=np.int64))
            lo, hi = (start, stop) if step > 0 else (stop + 1, start + 1)
            hi = max(lo, hi)
            out = np.empty((hi - lo,) + self.shape[1:], self.dtype)
            self._read_slice_retrying(lo, hi, out)
            return out if step > 0 else out[::-1]
        return self.gather(np.asarray(key).reshape(-1)).reshape(np.shape(key) + self.shape[1:])

    def _read_slice_retrying(self, lo: int, hi: int, out: np.ndarray) -> None:
        """``reader.read_slice`` with gather's retries and error wrapping (remote stores)."""
        st = self._store
        remote = st is not None and not st.loc.is_local
        for attempt in range(REMOTE_RETRIES + 1):
            try:
                with st._using(self.name) if st else contextlib.nullcontext():
                    self.reader.read_slice(lo, hi, out)
                return
            except FeatureStoreError:
                raise
            except Exception as e:  # noqa: BLE001 - transport errors retried, then named
                if not (remote and _is_transport_error(e)):
                    raise
                if attempt == REMOTE_RETRIES:
                    raise remote_error(e, st.url, f"rows [{lo}, {hi}) of {self.name}") from e
                log.warning("reading rows [%d, %d) of %s failed (%s: %s); retry %d of %d", lo,
                            hi, self.name, type(e).__name__, e, attempt + 1, REMOTE_RETRIES)
                time.sleep(REMOTE_BACKOFF_S * 2 ** attempt)

    def numpy(self) -> np.ndarray:
        """The whole array: a read-only memory map when local, else read into memory."""
        with self._store._using(self.name) if self._store else contextlib.nullcontext():
            return self.reader.array()

    def resident_share(self, ids) -> float:
        """Share of the pages of rows ``ids`` in the page cache (1.0 when not local)."""
        if self.reader.supports_residency:
            ids = check_ids(ids, self.shape[0], self.name)
            with self._store._using(self.name) if self._store else contextlib.nullcontext():
                return self.reader.resident_share(ids)
        return 1.0


class Store:
    """A read-only feature store. Use :func:`open_store` to make one.

    At open the root ``zarr.json`` is parsed into :attr:`meta` (a checked
    :class:`~featurestore.format.schema.StoreSchema`). Each array is checked against it on first
    use (its ``zarr.json``: shape, dtype, v1 layout; its shard file: size and place), and each
    edge type's CSC is validated before :meth:`csc` returns it. :meth:`check_generation`
    (also run by :meth:`csc`, :meth:`features` and every first use of an array) raises
    :class:`~featurestore.errors.StoreChangedError` once the store was rewritten.
    """

    def __init__(self, url, *, storage_options=None, read_path="auto", io_threads=32,
                 cache_bytes=256 << 20, allow_incomplete=False, cache_dir=None):
        if cache_dir is not None:  # carried in the options, so pickled copies keep it
            storage_options = {**(storage_options or {}), "cache_dir": os.fspath(cache_dir)}
        self._args = dict(url=os.fspath(url), storage_options=storage_options,
                          read_path=read_path, io_threads=io_threads, cache_bytes=cache_bytes,
                          allow_incomplete=allow_incomplete)
        if read_path not in READ_PATHS:
            raise ValueError(f"Expected read_path in {READ_PATHS}. Got {read_path!r} instead.")
        for name, v, lo in (("io_threads", io_threads, 1), ("cache_bytes", cache_bytes, 0)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise InvalidArgumentError(f"Expected an integer {name} >= {lo} for {url}. "
                                  f"Got {v!r} instead.")
        self.loc = Location(url, storage_options)
        self.url = self.loc.url
        self.read_path, self.io_threads, self.cache_bytes = read_path, io_threads, cache_bytes
        self.loc.check_ranges()  # remote HTTP: an unreachable server or one without Range
        try:
            found = self.loc.exists()
        except Exception as e:  # noqa: BLE001 - a remote store's transport errors, named
            if self.loc.is_local or not _is_transport_error(e):
                raise
            raise remote_error(e, self.url, "the store root") from e
        if not found:
            raise StoreNotFoundError(f"Expected a feature store at {self.url}. Nothing is there.")
        self._root_file = self.loc.path("zarr.json")
        try:
            raw = self._read_root()
        except FileNotFoundError as e:
            raise NotAStoreError(f"Expected a zarr v3 group (zarr.json) at {self.url}. "
                                 "Found none: this is not a feature store.") from e
        meta = _root_json(raw, self._root_file)
        attrs = meta.get("attributes", {})
        if meta.get("node_type") != "group" or not isinstance(attrs, dict) \
                or attrs.get("format") != fmt.FORMAT_NAME:
            got = attrs.get("format") if isinstance(attrs, dict) else attrs
            raise NotAStoreError(f"Expected a zarr group with format {fmt.FORMAT_NAME!r} at "
                                 f"{self.url}. Got format {got!r} instead.")
        self.meta: StoreSchema = StoreSchema.from_attrs(attrs, self.url, file=self._root_file)
        if not self.meta.complete and not allow_incomplete:
            raise IncompleteStoreError(
                f"The store at {self.url} is incomplete: its writer never committed (it crashed "
                "or is still running). Re-run the job that writes it; it resumes where it stopped.")
        self._root_bytes = raw
        #: the generation this reader opened (``None`` for stores written before generations).
        self.generation: str | None = self.meta.generation
        self.attrs: dict[str, Any] = attrs
        self.schema: dict[str, Any] = attrs["schema"]  # the raw JSON; prefer :attr:`meta`
        self.provenance: list[dict] = list(self.meta.provenance)
        self._specs: dict[str, ArraySpec] = {a.key: a for a in self.meta.arrays_expected()}
        self._root_real = os.path.realpath(self.loc.root) if self.loc.is_local else None
        self._arrays: dict[str, RowReader] = {}
        self._csc: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}
        self._lock = forksafe.RLock()
        self._gate = forksafe.Lock()  # guards _inflight and _closed
        self._inflight = 0
        self._pid = os.getpid()  # whose gathers _inflight counts (a forked child starts at 0)
        self._closed = False
        self._checked_at = time.monotonic()
        # the zarr store of compressed arrays, one per process (made on first use)
        self._zstore = forksafe.PerProcess(
            functools.partial(self.loc.zarr_store, read_only=True))

    # -- pickling: reopen from the constructor arguments, never ship maps or fds ----------
    def __reduce__(self):
        return (_reopen, (self._args,))

    def __repr__(self) -> str:
        return (f"Store({self.url!r}, node_types={self.node_types}, "
                f"edge_types={len(self.edge_types)})")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Release memory maps, file descriptors and reader threads.

        Waits for gathers in flight; any use afterwards raises ``ClosedStoreError``.
        """
        with self._gate:
            self._closed = True
            self._own_count()
        while self._inflight:  # reads in flight finish first (close is rare: poll)
            time.sleep(0.001)
        with self._lock:
            for rows in self._arrays.values():
                rows.close()
            self._arrays.clear()
            self._csc.clear()
            if isinstance(self.loc.fs, RangeCacheFileSystem):  # its descriptors and maps
                self.loc.fs.close()

    def _check_open(self, what: str = "") -> None:
        if self._closed:
            raise ClosedStoreError(f"The store {self.url} was closed"
                                   f"{f'; cannot read {what}' if what else ''}. Open it again.")

    def _own_count(self) -> None:
        """In a forked child, forget the parent's reads in flight (their threads are not
        here); the caller holds ``_gate``."""
        if self._pid != os.getpid():
            self._pid, self._inflight = os.getpid(), 0

    def _enter(self, what: str) -> None:
        """A read starts: the store's maps and descriptors stay alive until :meth:`_exit`."""
        with self._gate:
            if self._closed:
                self._check_open(what)
            self._own_count()
            self._inflight += 1

    def _exit(self) -> None:
        with self._gate:
            self._inflight -= 1

    @contextlib.contextmanager
    def _using(self, what: str):
        self._enter(what)
        try:
            yield
        finally:
            self._exit()

    # -- generation ---------------------------------------------------------------------
    def _read_root(self) -> bytes:
        with self.loc.fs.open(self._root_file, "rb") as f:
            return f.read()

    def check_generation(self) -> None:
        """Raise ``StoreChangedError`` if the store was rewritten since this reader opened it.

        Costs one read of the root ``zarr.json`` (parsed only when its bytes changed).
        """
        self._check_open()
        try:
            raw = self._read_root()
        except FileNotFoundError as e:
            raise StoreChangedError(f"The store {self.url} was removed or is being rewritten "
                                    f"({self._root_file} is gone) since this reader opened it. "
                                    "Open it again.") from e
        if raw == self._root_bytes:
            return
        try:
            attrs = json.loads(raw).get("attributes", {})
            gen, complete = attrs.get("generation"), attrs.get("complete")
        except (ValueError, AttributeError):
            gen, complete = "(unreadable)", False
        if gen != self.generation or gen is None or complete is not True:
            raise StoreChangedError(
                f"The store {self.url} was rewritten since this reader opened it (generation "
                f"{self.generation!r}, now {gen!r}{'' if complete else ', not complete'}). "
                "Open it again.")

    #: implicit generation checks of a remote store (one request each) at most this often.
    REMOTE_RECHECK_S = 1.0

    def _recheck_generation(self) -> None:
        """The implicit check of csc(), features() and first array uses: every time when
        local (~20 us), at most once per REMOTE_RECHECK_S when remote."""
        if not self.loc.is_local:
            now = time.monotonic()
            if now - self._checked_at < self.REMOTE_RECHECK_S:
                return
            self._checked_at = now
        self.check_generation()

    # -- schema -------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        """Whether the writer committed the store (always true unless ``allow_incomplete``)."""
        return self.meta.complete

    @property
    def node_types(self) -> list[str]:
        """The node types, sorted."""
        return sorted(self.meta.node_types)

    @property
    def edge_types(self) -> list[EdgeType]:
        """The edge types (:class:`~featurestore.EdgeType` ``(src, rel, dst)``), schema order."""
        return [e.etype for e in self.meta.edge_types]

    @property
    def split_names(self) -> list[str]:
        """The names of the splits (``train``, ``valid``, ...), sorted."""
        return sorted(self.meta.splits)

    def resolve_ntype(self, ntype: str | None = None) -> str:
        """Return the node type `ntype` names; None means the only node type of the store.

        Raises `UnknownNodeTypeError` for an unknown name, or for None on a store with
        several node types.
        """
        nts = self.meta.node_types
        if ntype is None:
            if len(nts) != 1:
                raise UnknownNodeTypeError(f"Expected a node type for {self.url}, which has "
                                           f"{sorted(nts)}. Got None instead.")
            return next(iter(nts))
        if not isinstance(ntype, str) or ntype not in nts:
            raise UnknownNodeTypeError(f"Expected a node type of {self.url}: {sorted(nts)}. "
                                       f"Got {ntype!r} instead.")
        return ntype

    def _etype(self, etype: Sequence[str] | str | None) -> tuple[EdgeType, EdgeTypeSchema]:
        ets = self.meta.edge_types
        if etype is None:
            if len(ets) != 1:
                raise UnknownEdgeTypeError(
                    f"Expected an edge type for {self.url}, which has "
                    f"{[tuple(e.etype) for e in ets]}. Got None.")
            e = ets[0]
        else:
            if isinstance(etype, str):
                found = [e for e in ets if e.rel == etype]
            else:
                t = tuple(etype)
                found = [e for e in ets if tuple(e.etype) == t]
            if len(found) != 1:
                raise UnknownEdgeTypeError(
                    f"Expected an edge type of {self.url}: "
                    f"{[tuple(e.etype) for e in ets]}. Got {etype!r} instead.")
            e = found[0]
        return e.etype, e

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """The node and edge types, as PyG's ``HeteroData.metadata()`` gives them.

        Returns
        -------
        node_types : list of str
            The node types, sorted (as :attr:`node_types`).
        edge_types : list of tuple of str
            The edge types as plain ``(src, rel, dst)`` tuples, in the order of
            :attr:`edge_types`.

        Examples
        --------
        >>> model = torch_geometric.nn.to_hetero(model, store.metadata())  # doctest: +SKIP
        """
        return self.node_types, [tuple(et) for et in self.edge_types]

    def num_classes(self, ntype: str | None = None) -> int:
        """The number of classes: the largest label of the labelled nodes, plus one.

        Reads the ``label`` value array (``-1`` marks an unlabelled node) once per call: one
        vectorised maximum, a memory-mapped scan when the store is local.

        Parameters
        ----------
        ntype
            The node type. ``None`` means the only node type, or, in a store of several node
            types, the only one that has labels.

        Returns
        -------
        int
            ``max(label) + 1`` over the nodes whose label is not negative.

        Raises
        ------
        UnknownNodeTypeError
            ``ntype`` is not a node type of the store, or is ``None`` while several (or no)
            node types have labels.
        UnknownFeatureError
            The node type has no ``label`` array, or none of its nodes is labelled.
        """
        nts = self.meta.node_types
        if ntype is None and len(nts) > 1:
            labelled = sorted(t for t, n in nts.items() if "label" in n.values)
            if len(labelled) != 1:
                raise UnknownNodeTypeError(
                    f"Expected a node type for num_classes of {self.url}: its labelled node "
                    f"types are {labelled} (of {sorted(nts)}). Got None instead.")
            ntype = labelled[0]
        nt = self.resolve_ntype(ntype)
        if "label" not in nts[nt].values:
            raise UnknownFeatureError(
                f"Expected labels for node type {nt!r} of {self.url}: it has no 'label' value "
                f"array (its values: {sorted(nts[nt].values)}), so it has no classes.")
        labels = self.labels(nt)
        top = int(labels.max()) if labels.shape[0] else -1
        if top < 0:
            raise UnknownFeatureError(
                f"Expected at least one labelled node of type {nt!r} in {self.url} "
                f"({self.loc.path(fmt.values_key(nt, 'label'))}). All {labels.shape[0]} "
                "labels are negative (unlabelled), so it has no classes.")
        return top + 1

    def num_nodes(self, ntype: str | None = None) -> int:
        """Return the number of nodes of a node type.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.

        Raises
        ------
        UnknownNodeTypeError
            ``ntype`` is not a node type of the store (or ``None`` with several).
        """
        return self.meta.node_types[self.resolve_ntype(ntype)].num_nodes

    def num_edges(self, etype=None) -> int:
        """Return the number of edges of an edge type.

        Parameters
        ----------
        etype
            ``(src, rel, dst)``, a relation name that names one edge type, or ``None`` for the
            only edge type.

        Raises
        ------
        UnknownEdgeTypeError
            ``etype`` names no edge type, or several.
        """
        return self._etype(etype)[1].num_edges

    def feature_names(self, ntype: str | None = None) -> list[str]:
        """Return the names of a node type's feature arrays (2-D, read by :meth:`features`), sorted.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        """
        return sorted(self.meta.node_types[self.resolve_ntype(ntype)].features)

    def value_names(self, ntype: str | None = None) -> list[str]:
        """Return the names of a node type's per-node value arrays (read by :meth:`values`), sorted.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        """
        return sorted(self.meta.node_types[self.resolve_ntype(ntype)].values)

    # -- arrays -------------------------------------------------------------------------
    def row_reader(self, key: str) -> RowReader:
        """Return the (cached) row reader of the array at `key`, opening it on first use."""
        with self._lock:
            self._check_open(key)
            rows = self._arrays.get(key)
            if rows is None:
                self._recheck_generation()
                rows = self._open_rows(key)
                self._arrays[key] = rows
            return rows

    def _confined(self, key: str, path: str) -> str:
        """``path`` (of array ``key``), refused unless it resolves inside the store's root."""
        if self._root_real is not None:
            real = os.path.realpath(path)
            if not real.startswith(self._root_real + os.sep):
                raise UnsafePathError(f"Array {key} of {self.url} resolves to {real}, outside "
                                      f"the store directory {self._root_real}. "
                                      "Refusing to read it.")
        return path

    def _open_rows(self, key: str) -> RowReader:
        spec = self._specs[key]
        file = self._confined(key, self.loc.path(f"{key}/zarr.json"))
        try:
            with self.loc.fs.open(file, "rb") as f:
                raw = f.read()
        except FileNotFoundError as e:
            raise CorruptStoreError(f"Expected array {key} in {self.url} (its schema names it). "
                                    f"Its zarr.json ({file}) is missing.") from e
        layout = check_array_meta(raw, spec, file)
        if self.loc.is_local and layout is not None:
            path = self._confined(key, self.loc.path(f"{key}/{layout.chunk_key()}"))
            return LocalRows(path, layout, io_threads=self.io_threads)
        if layout is not None:  # remote v1: rows are byte ranges of the shard file
            return self._range_rows(key, layout)
        if spec.compressed or layout is None:
            self._check_chunks_present(key, json.loads(raw))
        import zarr

        url, opts = self.url, self._args["storage_options"]

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
        n, url, opts = self.io_threads, self.url, self._args["storage_options"]

        def reopen():
            return pooled_filesystem(Location(url, opts).fs, n)

        try:
            return RangeRows(pooled_filesystem(self.loc.fs, n),
                             self.loc.path(f"{key}/{layout.chunk_key()}"), layout,
                             concurrency=n, reopen=reopen)
        except (FeatureStoreError, FileNotFoundError):
            raise
        except Exception as e:  # noqa: BLE001 - the size request's transport errors, named
            if not _is_transport_error(e):
                raise
            raise remote_error(e, self.url, key) from e

    def _check_chunks_present(self, key: str, meta: dict) -> None:
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

    def _vector(self, key: str) -> np.ndarray:
        rows = self.row_reader(key)
        with self._using(key):
            try:
                return rows.array()
            except FeatureStoreError:
                raise
            except Exception as e:
                if not rows.is_local:
                    raise CorruptStoreError(f"Could not read array {key} of {self.url}: "
                                            f"{type(e).__name__}: {e}") from e
                raise

    def csc(self, etype=None) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)``: for destination ``v``, sources ``indices[indptr[v]:indptr[v+1]]``.

        Memory-mapped (zero-copy, read-only) for local stores. Validated once per edge type
        (``indptr[0] == 0``, never decreasing, ``indptr[-1] == len(indices)``, source ids in
        range) before it is returned, unless the writer's verification record still matches
        (same generation, sizes and file times): a corrupt CSC raises ``CorruptStoreError``.
        """
        et, e = self._etype(etype)
        self._check_open(f"edges {et.key()}")
        self._recheck_generation()
        with self._lock:
            got = self._csc.get(et)
            if got is not None:
                return got
            kp, ki = fmt.edge_key(et, "indptr"), fmt.edge_key(et, "indices")
            indptr, indices = self._vector(kp), self._vector(ki)
            if not self._topology_recorded(e, kp, ki):
                check_csc(indptr, indices, self.meta.node_types[et.src].num_nodes,
                          f"{self.loc.path(f'edges/{et.key()}')} (edge type {tuple(et)})")
            got = self._csc[et] = (native(indptr), native(indices))
            return got

    def _topology_recorded(self, e: EdgeTypeSchema, kp: str, ki: str) -> bool:
        """Whether the writer's record of a validated CSC still describes the files."""
        rec = self.meta.extra.get("topology_checks")
        if not isinstance(rec, dict) or not self.loc.is_local or self.generation is None:
            return False
        r = rec.get(e.etype.key())
        try:
            if (r["generation"] != self.generation or r["num_edges"] != e.num_edges
                    or r["num_src"] != self.meta.node_types[e.src].num_nodes):
                return False
            for part, key in (("indptr", kp), ("indices", ki)):
                rows = self._arrays.get(key)
                if rows is None or not rows.is_local:
                    return False
                st = os.stat(rows.path)
                if [st.st_size, st.st_mtime_ns] != r[part]:
                    return False
        except (KeyError, TypeError, OSError):
            return False
        return True

    def features(self, ntype: str | None = None, name: str = "feat") -> FeatureArray:
        """Return a node type's feature array, for row gathers.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        name
            The feature's name (``"feat"`` unless the store was written with others).

        Returns
        -------
        FeatureArray
            The array; its row reader is opened on first use and shared by later calls.

        Raises
        ------
        UnknownNodeTypeError, UnknownFeatureError
            No such node type, or no such feature of it.
        StoreChangedError
            The store was rewritten since it was opened.
        """
        nt = self.resolve_ntype(ntype)
        feats = self.meta.node_types[nt].features
        if name not in feats:
            raise UnknownFeatureError(f"Expected a feature of node type {nt!r} in {self.url}: "
                                      f"{sorted(feats)}. Got {name!r} instead.")
        self._check_open(f"feature {nt}/{name}")
        self._recheck_generation()
        key = fmt.feature_key(nt, name)
        rows = self.row_reader(key)
        spec = self._specs[key]
        return FeatureArray(f"{self.url}/{key}", rows, spec.shape, spec.dtype, self.read_path,
                            store=self)

    def values(self, ntype: str | None, name: str) -> np.ndarray:
        """Return a per-node 1-D array (``label``, ``year``, ...), memory-mapped when local.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        name
            The value array's name (:meth:`value_names` lists them).

        Raises
        ------
        UnknownNodeTypeError, UnknownFeatureError
            No such node type, or no such value array of it.
        """
        nt = self.resolve_ntype(ntype)
        vals = self.meta.node_types[nt].values
        if name not in vals:
            raise UnknownFeatureError(f"Expected a value array of node type {nt!r} in {self.url}: "
                                      f"{sorted(vals)}. Got {name!r} instead.")
        return self._vector(fmt.values_key(nt, name))

    def labels(self, ntype: str | None = None) -> np.ndarray:
        """Return the labels in store numbering (``-1`` where a node has none).

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        """
        return self.values(ntype, "label")

    def orig_ids(self, ntype: str | None = None) -> np.ndarray:
        """Return the original id of every node: ``orig_ids(t)[store_id]``.

        Parameters
        ----------
        ntype
            The node type; ``None`` means the only one.
        """
        return self._vector(fmt.orig_id_key(self.resolve_ntype(ntype)))

    def split(self, name: str, ntype: str | None = None) -> np.ndarray:
        """Return the store ids of the nodes of split ``name`` (``train``, ``valid``, ...).

        Parameters
        ----------
        name
            The split (:attr:`split_names` lists them).
        ntype
            The node type; ``None`` means the split's only node type.

        Raises
        ------
        UnknownSplitError
            No such split, or the split has no nodes of ``ntype``.
        """
        splits = self.meta.splits
        if name not in splits:
            raise UnknownSplitError(f"Expected a split of {self.url}: {sorted(splits)}. "
                                    f"Got {name!r} instead.")
        if ntype is None and len(splits[name]) == 1:
            nt = next(iter(splits[name]))
        else:
            nt = self.resolve_ntype(ntype)
        if nt not in splits[name]:
            raise UnknownSplitError(f"Expected node type in {sorted(splits[name])} for split "
                                    f"{name!r} of {self.url}. Got {nt!r} instead.")
        return self._vector(fmt.split_key(name, nt))


def _root_json(raw: bytes, file: str) -> dict:
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise NotAStoreError(f"Expected JSON in {file}: {e}") from e
    if not isinstance(meta, dict):
        raise NotAStoreError(f"Expected a JSON object in {file}. Got {type(meta).__name__}.")
    return meta


def _grid_keys(counts: list[int]) -> set[str]:
    keys = [""]
    for c in counts:
        keys = [f"{k}/{i}" if k else str(i) for k in keys for i in range(c)]
    return set(keys)


def _reopen(args: dict) -> Store:
    return Store(**args)
