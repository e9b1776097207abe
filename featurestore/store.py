"""The reader API: :func:`open_store` and the :class:`Store` it returns.

A store is assembled from parts with one job each: :class:`~featurestore.root.RootFile` (the
root ``zarr.json``, parsed and watched for rewrites), :class:`~featurestore.opening.ArrayOpener`
(each array checked, then its row reader), :class:`~featurestore.gate.ReadGate` (reads in
flight and ``close``), :class:`~featurestore.topology.Topology` (each edge type's CSC,
validated once), :class:`~featurestore.schema_view.SchemaView` (types, counts and names) and
:class:`~featurestore.array.FeatureArray` (row gathers).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from featurestore.array import FeatureArray
from featurestore.edge_data import EdgeData
from featurestore.errors import (CorruptStoreError, FeatureStoreError, InvalidArgumentError,
                                 StoreNotFoundError, UnknownFeatureError, UnknownNodeTypeError,
                                 UnknownSplitError)
from featurestore.format import names as fmt
# the CSC checks the store runs (topology.py), importable from here as in 0.1
from featurestore.format.integrity import check_csc, native, writer_checksums  # noqa: F401
from featurestore.format.schema import ArraySpec, StoreSchema
from featurestore.gate import ReadGate
from featurestore.opening import ArrayOpener
from featurestore.remote import forksafe
from featurestore.remote.location import Location, remote_error
from featurestore.remote.rangecache import RangeCacheFileSystem
from featurestore.remote.retry import is_transport_error
from featurestore.root import RootFile
from featurestore.rows import RowReader
from featurestore.rows.local import READ_PATHS
from featurestore.schema_view import SchemaView
from featurestore.topology import Topology

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
        Reads in flight on the ``pread`` path (a device serves many more random reads with a
        deep queue than one at a time), and byte-range requests in flight of a remote store
        (its S3 connection pool is made as large).
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



class Store(EdgeData, SchemaView):
    """A read-only feature store. Use :func:`open_store` to make one.

    At open the root ``zarr.json`` is parsed into :attr:`meta` (a checked
    :class:`~featurestore.format.schema.StoreSchema`). Each array is checked against it on first
    use (its ``zarr.json``: shape, dtype, v1 layout; its shard file: size and place), and each
    edge type's CSC is validated before :meth:`csc` returns it. :meth:`check_generation`
    (also run by :meth:`csc`, :meth:`features` and every first use of an array) raises
    :class:`~featurestore.errors.StoreChangedError` once the store was rewritten.

    Attributes
    ----------
    gate
        The :class:`~featurestore.gate.ReadGate` of the store's reads in flight (``close``
        waits for them and refuses later ones).
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
        if isinstance(self.loc.fs, RangeCacheFileSystem):  # fills checked as the writer wrote
            self.loc.fs.writer_record = writer_checksums
        self.url = self.loc.url
        self.read_path, self.io_threads, self.cache_bytes = read_path, io_threads, cache_bytes
        self.loc.check_ranges()  # remote HTTP: an unreachable server or one without Range
        try:  # a remote store's directory URL may answer 404 (no listings): its zarr.json counts
            found = self.loc.exists() or (not self.loc.is_local and self.loc.exists("zarr.json"))
        except Exception as e:  # noqa: BLE001 - a remote store's transport errors, named
            if self.loc.is_local or not is_transport_error(e):
                raise
            raise remote_error(e, self.url, "the store root") from e
        if not found:
            raise StoreNotFoundError(f"Expected a feature store at {self.url}. Nothing is there.")
        self._root = RootFile(self.loc, allow_incomplete)
        self.meta: StoreSchema = self._root.meta
        #: the generation this reader opened (``None`` for stores written before generations).
        self.generation: str | None = self.meta.generation
        self.attrs: dict[str, Any] = self._root.attrs
        self.schema: dict[str, Any] = self.attrs["schema"]  # the raw JSON; prefer :attr:`meta`
        self.provenance: list[dict] = list(self.meta.provenance)
        specs: dict[str, ArraySpec] = {a.key: a for a in self.meta.arrays_expected()}
        self._opener = ArrayOpener(self.loc, storage_options, specs, io_threads, cache_bytes)
        self._arrays: dict[str, RowReader] = {}
        self._topology = Topology(self.loc, self.meta, self._vector, self._arrays.get)
        self._lock = forksafe.RLock()
        self.gate = ReadGate(self.url)

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
        return self.gate.closed

    def close(self) -> None:
        """Release memory maps, file descriptors and reader threads.

        Waits for gathers in flight; any use afterwards raises ``ClosedStoreError``.
        """
        self.gate.close()
        with self._lock:
            for rows in self._arrays.values():
                rows.close()
            self._arrays.clear()
            self._topology.clear()
            if isinstance(self.loc.fs, RangeCacheFileSystem):  # its descriptors and maps
                self.loc.fs.close()

    # -- generation ---------------------------------------------------------------------
    def check_generation(self) -> None:
        """Raise ``StoreChangedError`` if the store was rewritten since this reader opened it.

        Costs one read of the root ``zarr.json`` (parsed only when its bytes changed).
        """
        self.gate.check_open()
        self._root.check_generation()

    def _recheck_generation(self) -> None:
        """The implicit check of csc(), features() and first array uses: every time when
        local, at most once per ``RootFile.REMOTE_RECHECK_S`` when remote."""
        if self._root.due():
            self.check_generation()

    # -- labels -------------------------------------------------------------------------
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


    # -- arrays -------------------------------------------------------------------------
    def row_reader(self, key: str) -> RowReader:
        """Return the (cached) row reader of the array at `key`, opening it on first use."""
        with self._lock:
            self.gate.check_open(key)
            rows = self._arrays.get(key)
            if rows is None:
                self._recheck_generation()
                rows = self._opener.open(key)
                self._arrays[key] = rows
            return rows

    def _vector(self, key: str) -> np.ndarray:
        rows = self.row_reader(key)
        with self.gate.using(key):
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
        self.gate.check_open(f"edges {et.key()}")
        self._recheck_generation()
        with self._lock:
            return self._topology.get(e)

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
        self.gate.check_open(f"feature {nt}/{name}")
        self._recheck_generation()
        key = fmt.feature_key(nt, name)
        rows = self.row_reader(key)
        spec = self._opener.specs[key]
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
        """Return the store ids of the nodes of split ``name`` (``train``, ``valid``, ...),
        writable: a copy where the store maps the file (``torch.from_numpy`` takes it).

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
        ids = self._vector(fmt.split_key(name, nt))
        return ids if ids.flags.writeable else np.array(ids)


def _reopen(args: dict) -> Store:
    return Store(**args)
