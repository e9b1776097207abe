"""Per-edge (or per-row) columns as :class:`FeatureSource` streams, by file type: a ``.npy``
array, parquet columns, or CSV/TSV columns (names, or 0-based indices without a header).

Used to carry edge features and per-edge values from an edge list's own file, or a file
beside it, into the store (:mod:`preprocess.steps.edge_columns`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.sources.features import FeatureSource

__all__ = ["open_columns", "CsvColumns"]


class CsvColumns(FeatureSource):
    """Numeric columns of a CSV/TSV file (one: a 1-D array; several: stacked as rows), streamed
    with pyarrow's incremental reader. The dtype is the first block's; the row count is
    counted by a pass over the file when first asked."""

    def __init__(self, path, columns, *, header: bool = True, delimiter: str = ",",
                 block_bytes: int = 16 << 20):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise InputNotFoundError(f"Expected a CSV file at {self.path}. Nothing is there.")
        self.name = self.path
        self.many = isinstance(columns, (list, tuple))
        self.columns = list(columns) if self.many else [columns]
        self.header, self.delimiter, self.block_bytes = header, delimiter, block_bytes
        self._rows: int | None = None
        first = next(self._batches(), None)
        if first is None:
            self.dtype = np.dtype(np.float32)
        else:
            self.dtype = np.result_type(*[c.dtype for c in first])
        self.row_shape = (len(self.columns),) if self.many else ()

    @property
    def num_rows(self) -> int:
        """The rows of the file (counted by a pass over it, once)."""
        if self._rows is None:
            self._rows = sum(int(b[0].shape[0]) for b in self._batches())
        return self._rows

    def _batches(self):
        import pyarrow.csv as pcsv

        try:
            ro = pcsv.ReadOptions(block_size=self.block_bytes,
                                  autogenerate_column_names=not self.header)
            reader = pcsv.open_csv(self.path, read_options=ro,
                                   parse_options=pcsv.ParseOptions(delimiter=self.delimiter))
            names = reader.schema.names
            idx = [self._index(names, c) for c in self.columns]
            at = 0
            for batch in reader:
                cols = []
                for i, c in zip(idx, self.columns):
                    col = batch.column(i)
                    if col.null_count:
                        raise BadInputError(f"Expected no empty values in column {c!r} of "
                                            f"{self.path}. Got {col.null_count} in the rows "
                                            f"from {at}.")
                    a = col.to_numpy(zero_copy_only=False)
                    if a.dtype.kind not in "fiub":
                        raise BadInputError(f"Expected a numeric column {c!r} in {self.path}. "
                                            f"Got {col.type} instead.")
                    cols.append(a)
                yield cols
                at += batch.num_rows
        except BadInputError:
            raise
        except Exception as e:  # pyarrow.lib.ArrowInvalid: unparsable or ragged rows
            raise BadInputError(f"Expected a readable CSV file at {self.path}: {e}") from e

    def _index(self, names: list[str], col) -> int:
        if isinstance(col, int):
            if not 0 <= col < len(names):
                raise BadInputError(f"Expected column index {col} in {self.path}, which has "
                                    f"{len(names)} columns.")
            return col
        if col not in names:
            raise BadInputError(f"Expected a column {col!r} in {self.path}. "
                                f"Its columns are {names}.")
        return names.index(col)

    def iter_blocks(self, rows):
        """Blocks of at most ``rows`` rows, in the first block's dtype."""
        at = 0
        for cols in self._batches():
            for c, name in zip(cols, self.columns):
                if not np.can_cast(c.dtype, self.dtype, "same_kind") or (
                        c.dtype.kind == "f" and self.dtype.kind != "f"):
                    raise BadInputError(f"Expected {self.dtype} values in column {name!r} of "
                                        f"{self.path} (its first rows' type). Got {c.dtype} "
                                        f"in the rows from {at}.")
            arr = (np.stack(cols, axis=1) if self.many else cols[0]).astype(self.dtype,
                                                                             copy=False)
            for lo in range(0, arr.shape[0], rows):
                yield arr[lo:lo + rows]
            at += arr.shape[0]

    def inputs(self):
        """The CSV file."""
        return [self.path]


def open_columns(path, columns=None, *, header: bool = True,
                 delimiter: str | None = None) -> FeatureSource:
    """A row source for ``columns`` of ``path`` by its extension: ``.npy`` (the whole array;
    ``columns`` must be None), ``.parquet`` (a list column, or scalar columns) or
    ``.csv``/``.tsv`` (column names, or indices without a header). A list of columns gives
    rows of that many values; one column name gives a 1-D array."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        if columns is not None:
            raise BadInputError(f"Expected no column names for the .npy file {path} (its rows "
                                f"are the values). Got {columns!r}.")
        return FeatureSource.from_npy(path)
    if columns is None or (isinstance(columns, Sequence) and not isinstance(columns, str)
                           and not columns):
        raise BadInputError(f"Expected column names to read from {path}.")
    if ext in (".parquet", ".pq") or os.path.isdir(path):
        src = FeatureSource.from_parquet(path, columns)
        if isinstance(columns, (list, tuple)) and len(columns) == 1 and not src.row_shape:
            src.row_shape = (1,)  # [c]: rows of one value, as several columns give
        return src
    if ext in (".csv", ".tsv", ".txt"):
        delim = delimiter or ("\t" if ext == ".tsv" else ",")
        return CsvColumns(path, columns, header=header, delimiter=delim)
    raise BadInputError(f"Expected a column file ending .npy, .parquet, .csv or .tsv. "
                        f"Got {path} instead.")
