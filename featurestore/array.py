"""A feature array of an open store: validated random row gathers and slices."""

from __future__ import annotations

import contextlib

import numpy as np

from featurestore.errors import CorruptStoreError, FeatureStoreError
from featurestore.remote.retry import retry_remote
from featurestore.rows import RowReader
from featurestore.rows.local import READ_PATHS
from featurestore.rows.validate import check_ids, check_out

__all__ = ["FeatureArray"]


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
        The :class:`~featurestore.Store` that owns the reader (reads count as in flight for
        its ``close``; a remote store's transport errors are retried).
    """

    def __init__(self, name: str, rows: RowReader, shape, dtype, read_path: str,
                 store=None):
        self.name = name
        self.reader = rows
        self._gate = store.gate if store is not None else None
        #: the remote store's URL (its reads are retried), None when local or unowned
        self._remote = store.url if store is not None and not store.loc.is_local else None
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

    def _using(self):
        """The owning store's in-flight count around a read (nothing when unowned)."""
        return self._gate.using(self.name) if self._gate else contextlib.nullcontext()

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
            A remote read failed after ``REMOTE_RETRIES`` retries
            (:mod:`featurestore.remote.retry`).
        """
        ids = check_ids(ids, self.shape[0], self.name)
        buf = check_out(out, ids.shape[0], self.shape[1:], self.dtype, self.name)
        path = read_path or self.read_path
        if path not in READ_PATHS:
            raise ValueError(f"Expected read_path in {READ_PATHS}. Got {path!r} instead.")
        with self._using():
            try:
                retry_remote(lambda: self.reader.gather(ids, buf, path), self._remote,
                             self.name)
            except FeatureStoreError:
                raise
            except Exception as e:
                if not self.reader.is_local:  # zarr's decode / checksum errors, short reads
                    raise CorruptStoreError(f"Could not read rows of {self.name}: "
                                            f"{type(e).__name__}: {e}") from e
                raise
        return out if out is not None else buf

    def __getitem__(self, key) -> np.ndarray:
        """Rows by slice (only the slice is read) or by an integer (array) index."""
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if abs(step) > 1:  # strided: only the rows asked, as a gather
                return self.gather(np.arange(start, stop, step, dtype=np.int64))
            lo, hi = (start, stop) if step > 0 else (stop + 1, start + 1)
            hi = max(lo, hi)
            out = np.empty((hi - lo,) + self.shape[1:], self.dtype)
            with self._using():
                retry_remote(lambda: self.reader.read_slice(lo, hi, out), self._remote,
                             f"rows [{lo}, {hi}) of {self.name}")
            return out if step > 0 else out[::-1]
        return self.gather(np.asarray(key).reshape(-1)).reshape(np.shape(key) + self.shape[1:])

    def numpy(self) -> np.ndarray:
        """The whole array: a read-only memory map when local, else read into memory."""
        with self._using():
            return self.reader.array()

    def resident_share(self, ids) -> float:
        """Share of the pages of rows ``ids`` in the page cache (1.0 when not local)."""
        if self.reader.supports_residency:
            ids = check_ids(ids, self.shape[0], self.name)
            with self._using():
                return self.reader.resident_share(ids)
        return 1.0
