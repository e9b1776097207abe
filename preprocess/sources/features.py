"""Feature sources: re-iterable streams of feature rows (the contract and its readers).

A :class:`FeatureSource` is read block by block, never whole::

    src = FeatureSource.from_npy("feat.npy")                 # memory-mapped [N, D] (or [N])
    src = FeatureSource.from_parquet("feat.parquet", "emb")  # list / fixed_size_list column
    src = FeatureSource.from_parquet("nodes.parquet", ["f0", "f1", "f2"])  # numeric columns

The readers (an array or memory-mapped ``.npy``, a ``.npy`` on an fsspec URL, parquet
columns) sit beside the contract: its constructors name them.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterator, Sequence

import numpy as np

from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.sources.npy import load_npy
from preprocess.sources.remote import is_remote, open_remote_npy

__all__ = ["FeatureSource"]


class FeatureSource(abc.ABC):
    """A re-iterable stream of feature rows.

    Attributes
    ----------
    name
        The file, for messages.
    num_rows, row_shape, dtype
        Shape ``(num_rows, *row_shape)`` and dtype of the matrix.
    """

    name: str
    num_rows: int
    row_shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of all rows."""
        return self.num_rows * self.row_bytes

    @abc.abstractmethod
    def iter_blocks(self, rows: int) -> Iterator[np.ndarray]:
        """Row blocks in order, at most ``rows`` rows each."""

    def array(self) -> np.ndarray | None:
        """The matrix as an array or memory map when it has one (random access), else None."""
        return None

    def inputs(self) -> list[str]:
        """The input files (for the job's manifest)."""
        return []

    # -- constructors -------------------------------------------------------------------
    @staticmethod
    def from_array(arr, name: str = "<array>") -> FeatureSource:
        """A source over an in-memory array (or array-like)."""
        return ArrayFeatures(np.asarray(arr) if not isinstance(arr, np.ndarray) else arr, name)

    @staticmethod
    def from_npy(path) -> FeatureSource:
        """A source over a ``.npy`` file (memory-mapped; an fsspec URL: read by byte range)."""
        if is_remote(path):
            return RemoteFeatures(os.fspath(path))
        return ArrayFeatures(load_npy(path, "feature matrix"), os.fspath(path), [os.fspath(path)])

    @staticmethod
    def from_parquet(path, columns) -> FeatureSource:
        """A source over parquet column(s) (one list column, or scalar columns)."""
        return ParquetFeatures(path, columns)


class ArrayFeatures(FeatureSource):
    """An in-memory array or a memory-mapped ``.npy``."""

    def __init__(self, arr: np.ndarray, name: str, files: Sequence[str] = ()):
        if arr.ndim < 1:
            raise BadInputError(f"Expected a feature matrix with rows in {name}. "
                                f"Got a scalar instead.")
        if arr.dtype.kind not in "fiub":
            raise BadInputError(f"Expected numeric features in {name}. Got {arr.dtype} instead.")
        self.arr = arr
        self.name = name
        self.num_rows = int(arr.shape[0])
        self.row_shape = tuple(int(x) for x in arr.shape[1:])
        self.dtype = arr.dtype
        self._files = list(files)

    def iter_blocks(self, rows):
        for lo in range(0, self.num_rows, rows):
            yield self.arr[lo:lo + rows]

    def array(self):
        return self.arr

    def inputs(self):
        return list(self._files)


class RemoteFeatures(FeatureSource):
    """A ``.npy`` on an fsspec URL: header read here, rows fetched by byte range per block
    (:class:`~preprocess.sources.remote.RemoteArray`, which the Dask feature tasks reopen)."""

    def __init__(self, url: str):
        self.remote = open_remote_npy(url, "feature matrix")
        dtype = np.dtype(self.remote.dtype)
        if not self.remote.shape:
            raise BadInputError(f"Expected a feature matrix with rows in {url}. "
                                "Got a scalar instead.")
        if dtype.kind not in "fiub":
            raise BadInputError(f"Expected numeric features in {url}. Got {dtype} instead.")
        self.name = url
        self.num_rows = int(self.remote.shape[0])
        self.row_shape = tuple(int(x) for x in self.remote.shape[1:])
        self.dtype = dtype

    def iter_blocks(self, rows):
        for lo in range(0, self.num_rows, rows):
            yield self.remote[lo:lo + rows]

    def inputs(self):
        return [self.name]


class ParquetFeatures(FeatureSource):
    """A list/fixed-size-list column, or several numeric columns stacked, of a parquet file."""

    def __init__(self, path, columns):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise InputNotFoundError(f"Expected a feature file at {self.path}. Nothing is there.")
        self.name = self.path
        self.columns = [columns] if isinstance(columns, str) else list(columns)
        try:
            f = pq.ParquetFile(self.path)
        except Exception as e:
            raise BadInputError(f"Expected a readable parquet file at {self.path}: {e}") from e
        schema = f.schema_arrow
        for c in self.columns:
            if c not in schema.names:
                raise BadInputError(f"Expected a column {c!r} in {self.path}. "
                                    f"Its columns are {schema.names}.")
        self.num_rows = int(f.metadata.num_rows)
        types = [schema.field(c).type for c in self.columns]
        if len(self.columns) == 1 and (pa.types.is_list(types[0])
                                       or pa.types.is_large_list(types[0])
                                       or pa.types.is_fixed_size_list(types[0])):
            self.listed = True
            value_type = types[0].value_type
            if pa.types.is_fixed_size_list(types[0]):
                dim = types[0].list_size
            else:  # a list column: its first row says the width, every row is checked
                first = next(f.iter_batches(batch_size=1, columns=self.columns), None)
                dim = len(first.column(0)[0]) if first is not None and first.num_rows else 0
            self.row_shape = (int(dim),)
        else:
            for c, t in zip(self.columns, types):
                if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                    raise BadInputError(f"Expected a numeric or list column {c!r} in "
                                        f"{self.path}. Got {t} instead.")
            self.listed = False
            value_type = types[0]
            self.row_shape = (len(self.columns),) if len(self.columns) > 1 else ()
        try:
            self.dtype = np.dtype(value_type.to_pandas_dtype())
        except (NotImplementedError, TypeError) as e:
            raise BadInputError(f"Expected numeric feature values in {self.path}. "
                                f"Got {value_type} instead.") from e

    def _block(self, batch, at: int) -> np.ndarray:
        import pyarrow.compute as pc

        cols = [batch.column(i) for i in range(batch.num_columns)]
        for c, name in zip(cols, self.columns):
            if c.null_count:
                raise BadInputError(f"Expected no null feature rows in {self.path} (column "
                                    f"{name!r}). Got {c.null_count} in the rows from {at}.")
        if self.listed:
            col = cols[0]
            dim = self.row_shape[0]
            lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False)
            bad = np.flatnonzero(lengths != dim)
            if bad.size:
                raise BadInputError(f"Expected lists of {dim} values in {self.path} (column "
                                    f"{self.columns[0]!r}). Got {lengths[bad[0]]} at row "
                                    f"{at + int(bad[0])}.")
            vals = col.flatten()
            if vals.null_count:
                raise BadInputError(f"Expected no null feature values in {self.path}. Got "
                                    f"{vals.null_count} in the rows from {at}.")
            return vals.to_numpy(zero_copy_only=False).astype(self.dtype, copy=False) \
                .reshape(-1, dim)
        arrs = [c.to_numpy(zero_copy_only=False).astype(self.dtype, copy=False) for c in cols]
        return arrs[0] if not self.row_shape else np.stack(arrs, axis=1)

    def iter_blocks(self, rows):
        import pyarrow.parquet as pq

        at = 0
        try:
            f = pq.ParquetFile(self.path)
            for batch in f.iter_batches(batch_size=rows, columns=self.columns):
                yield self._block(batch, at)
                at += batch.num_rows
        except (OSError, ValueError) as e:
            if isinstance(e, BadInputError):
                raise
            raise BadInputError(f"Expected a readable parquet file at {self.path}: {e}") from e

    def inputs(self):
        return [self.path]
