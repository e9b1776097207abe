"""CSV/TSV edge lists: two columns (names or 0-based indices), streamed with pyarrow's
incremental reader."""

from __future__ import annotations

from preprocess.errors import BadInputError
from preprocess.sources.base import EdgeSource, check_exists

__all__ = ["from_csv"]


class CsvSource(EdgeSource):
    """Two columns of a CSV/TSV file, streamed with pyarrow's incremental reader."""

    def __init__(self, path, src_col, dst_col, *, header: bool = True, delimiter: str = ",",
                 block_bytes: int = 64 << 20):
        self.path = check_exists(path)
        self.name = self.path
        self.src_col, self.dst_col = src_col, dst_col
        self.header, self.delimiter, self.block_bytes = header, delimiter, block_bytes
        self.num_edges = None

    def _reader(self):
        import pyarrow.csv as pcsv

        ro = pcsv.ReadOptions(block_size=self.block_bytes,
                              autogenerate_column_names=not self.header)
        po = pcsv.ParseOptions(delimiter=self.delimiter)
        return pcsv.open_csv(self.path, read_options=ro, parse_options=po)

    def _column(self, names: list[str], col) -> int:
        if isinstance(col, int):
            if not 0 <= col < len(names):
                raise BadInputError(f"Expected column index {col} in {self.path}, which has "
                                    f"{len(names)} columns.")
            return col
        if col not in names:
            raise BadInputError(f"Expected a column {col!r} in {self.path}. "
                                f"Its columns are {names}.")
        return names.index(col)

    def iter_raw(self, block_edges):
        try:
            reader = self._reader()
            names = reader.schema.names
            i, j = self._column(names, self.src_col), self._column(names, self.dst_col)
            for batch in reader:
                s, d = batch.column(i), batch.column(j)
                for lo in range(0, len(s), block_edges):
                    yield s.slice(lo, block_edges), d.slice(lo, block_edges)
        except BadInputError:
            raise
        except Exception as e:  # pyarrow.lib.ArrowInvalid: unparsable or ragged rows
            raise BadInputError(f"Expected a readable CSV edge list at {self.path}: {e}") from e

    def inputs(self):
        return [self.path]


def from_csv(path, src_col=0, dst_col=1, *, header: bool = True,
             delimiter: str = ",") -> EdgeSource:
    """Edges from two columns (names, or 0-based indices) of a CSV (or TSV) file."""
    return CsvSource(path, src_col, dst_col, header=header, delimiter=delimiter)


