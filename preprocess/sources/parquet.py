"""Parquet edge lists: two columns of a file, or of every ``*.parquet`` file under a directory,
streamed as record batches."""

from __future__ import annotations

import os

from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.sources.base import EdgeSource, check_exists, concat

__all__ = ["from_parquet"]


class ParquetSource(EdgeSource):
    """Two columns of a parquet file (or directory of files), streamed as record batches."""

    def __init__(self, path, src_col: str, dst_col: str):
        import pyarrow.parquet as pq

        self.path = check_exists(path)
        self.name = self.path
        self.src_col, self.dst_col = src_col, dst_col
        try:
            f = pq.ParquetFile(self.path)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ... for bad files
            raise BadInputError(f"Expected a readable parquet file at {self.path}: {e}") from e
        names = f.schema_arrow.names
        for c in (src_col, dst_col):
            if c not in names:
                raise BadInputError(f"Expected a column {c!r} in {self.path}. "
                                    f"Its columns are {names}.")
        self.num_edges = int(f.metadata.num_rows)

    def iter_raw(self, block_edges):
        import pyarrow.parquet as pq

        try:
            f = pq.ParquetFile(self.path)
            for batch in f.iter_batches(batch_size=block_edges,
                                        columns=[self.src_col, self.dst_col]):
                yield batch.column(0), batch.column(1)
        except (OSError, ValueError) as e:
            raise BadInputError(f"Expected a readable parquet file at {self.path}: {e}") from e

    def inputs(self):
        return [self.path]


def from_parquet(path, src_col: str = "src", dst_col: str = "dst") -> EdgeSource:
    """Edges from two integer (or, for renumbering, string) columns of a parquet file, or of
    every ``*.parquet`` file under a directory (in sorted order)."""
    path = check_exists(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs
                       if f.endswith(".parquet"))
        if not files:
            raise InputNotFoundError(f"Expected .parquet files under {path}. There are none.")
        return concat(*[ParquetSource(f, src_col, dst_col) for f in files])
    return ParquetSource(path, src_col, dst_col)


