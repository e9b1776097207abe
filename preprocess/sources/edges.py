"""Edge sources: re-iterable streams of ``(src, dst)`` blocks of bounded size.

Every job reads its edges through an :class:`EdgeSource`, so the conversion to CSC never
needs the whole edge list in memory and may read it several times::

    src = from_npy("edges.npy")                    # [2, E] or [E, 2], memory-mapped
    src = from_npy_pair("row.npy", "col.npy")      # two 1-D arrays
    src = from_parquet("cites.parquet", "src", "dst")
    src = from_csv("cites.csv", 0, 1, header=False)
    src = concat(src_a, src_b)                     # one relation spread over files
    for s, d in src.iter_blocks():                 # int64 arrays, at most block_edges long
        ...

:meth:`EdgeSource.iter_blocks` validates as it goes: integer ids (no NaN, no nulls, no
strings), equal lengths, a readable file. Ranges are checked by the consumer, which knows
the node counts; errors name :attr:`EdgeSource.name` (the file).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np

from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.sources.remote import RemoteArray, is_remote, open_remote_npy

__all__ = [
    "EdgeSource",
    "DEFAULT_BLOCK_EDGES",
    "from_arrays",
    "from_npy",
    "from_npy_pair",
    "from_parquet",
    "from_csv",
    "concat",
    "open_edges",
]

#: edges per block unless the consumer asks otherwise (2 x 32 MiB as int64).
DEFAULT_BLOCK_EDGES = 1 << 22


class EdgeSource(abc.ABC):
    """A re-iterable stream of edges, read in blocks.

    Attributes
    ----------
    name
        What to call the source in messages: its file path(s).
    num_edges
        The number of edges when known without reading the data (``.npy`` and parquet
        headers), else ``None``.
    """

    name: str
    num_edges: int | None

    def iter_blocks(self, block_edges: int | None = None
                    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(src, dst)`` int64 arrays of equal length, at most ``block_edges`` long.

        Raises :class:`BadInputError` naming the file for non-integer, NaN or null ids and
        for columns of different lengths.
        """
        block_edges = int(block_edges or DEFAULT_BLOCK_EDGES)
        if block_edges <= 0:
            raise ValueError(f"Expected block_edges > 0. Got {block_edges} instead.")
        at = 0
        for s, d in self.iter_raw(block_edges):
            s = as_int64_ids(s, self.name, "source", at)
            d = as_int64_ids(d, self.name, "destination", at)
            if s.shape[0] != d.shape[0]:
                raise BadInputError(f"Expected as many source as destination ids in {self.name}. "
                                    f"Got {s.shape[0]} and {d.shape[0]} at edge {at}.")
            yield s, d
            at += s.shape[0]

    @abc.abstractmethod
    def iter_raw(self, block_edges: int) -> Iterator[tuple[object, object]]:
        """Yield the id columns as stored (NumPy or Arrow arrays of any type), in blocks.

        Renumbering reads string or sparse ids through this; most callers want
        :meth:`iter_blocks`.
        """

    def reversed(self) -> EdgeSource:
        """The same edges with source and destination swapped."""
        return _Reversed(self)

    def inputs(self) -> list[str]:
        """Paths of the files this source reads (recorded in job manifests)."""
        return []

    def parts(self) -> list[EdgeSource]:
        """The single-file sources this one chains (itself unless it is a :func:`concat`);
        consumers iterate them one by one so that an error names the right file."""
        return [self]

    def count_edges(self) -> int:
        """``num_edges``, counting by a pass over the data when the header does not say."""
        if self.num_edges is not None:
            return self.num_edges
        return sum(int(len(s)) for s, _ in self.iter_raw(DEFAULT_BLOCK_EDGES))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, num_edges={self.num_edges})"


# -- validation --------------------------------------------------------------------------
def as_int64_ids(col, name: str, what: str, at: int = 0) -> np.ndarray:
    """A block of ids as a 1-D int64 NumPy array, or :class:`BadInputError` naming ``name``."""
    if _is_arrow(col):
        if col.null_count:
            raise BadInputError(f"Expected {what} ids without nulls in {name}. "
                                f"Got {col.null_count} null ids in the block at edge {at}.")
        import pyarrow as pa

        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            raise BadInputError(
                f"Expected integer {what} ids in {name}. Got {col.type} instead (string ids "
                "need renumbering: give the node type an id file or ids: string in the spec).")
        col = col.to_numpy(zero_copy_only=False)
    arr = np.asarray(col)
    if arr.ndim != 1:
        raise BadInputError(f"Expected 1-D {what} ids in {name}. Got shape {arr.shape} instead.")
    if arr.dtype.kind == "i":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "u":
        if arr.dtype.itemsize == 8 and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise BadInputError(f"Expected {what} ids below 2**63 in {name}. "
                                f"Got {int(arr.max())} near edge {at}.")
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        nan = np.flatnonzero(np.isnan(arr))
        if nan.size:
            raise BadInputError(f"Expected integer {what} ids in {name}. "
                                f"Got NaN at edge {at + int(nan[0])}.")
        frac = np.flatnonzero(arr != np.floor(arr))
        if frac.size:
            raise BadInputError(f"Expected integer {what} ids in {name}. "
                                f"Got {arr[frac[0]]} at edge {at + int(frac[0])}.")
        raise BadInputError(f"Expected an integer dtype for the {what} ids in {name}. "
                            f"Got {arr.dtype} instead; store ids as integers.")
    raise BadInputError(f"Expected integer {what} ids in {name}. Got dtype {arr.dtype} instead.")


def _is_arrow(col) -> bool:
    return type(col).__module__.startswith("pyarrow")


def _check_exists(path) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputNotFoundError(f"Expected an edge file at {path}. Nothing is there.")
    return path


def load_npy(path, what: str = "array") -> np.ndarray:
    """Memory-map a ``.npy`` file, with errors that name it (truncated, not npy, pickled)."""
    path = _check_exists(path)
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise BadInputError(f"Expected a readable .npy {what} in {path}: {e} "
                            "(truncated or not an .npy file?)") from e
    if not isinstance(arr, np.ndarray):
        raise BadInputError(f"Expected one .npy array in {path}. Got {type(arr).__name__}.")
    return arr


# -- sources -----------------------------------------------------------------------------
class ArraySource(EdgeSource):
    """Edges held in two 1-D arrays (NumPy arrays or memory maps, sliced per block)."""

    def __init__(self, src, dst, name: str = "<arrays>", files: Sequence[str] = ()):
        keep = (np.ndarray, RemoteArray)  # a remote .npy is read by range, per block
        self.src = src if isinstance(src, keep) else np.asarray(src)
        self.dst = dst if isinstance(dst, keep) else np.asarray(dst)
        self.name = name
        for a, what in ((self.src, "source"), (self.dst, "destination")):
            if a.ndim != 1:
                raise BadInputError(f"Expected 1-D {what} ids in {name}. "
                                    f"Got shape {a.shape} instead.")
        if self.src.shape[0] != self.dst.shape[0]:
            raise BadInputError(f"Expected as many source as destination ids in {name}. "
                                f"Got {self.src.shape[0]} and {self.dst.shape[0]}.")
        self.num_edges = int(self.src.shape[0])
        self._files = list(files)
        self._reopen: tuple | None = None  # (function, args): how a worker reopens the files

    def __reduce__(self):
        """Pickle a file-backed source by its files (a worker maps them again), not its data."""
        if self._reopen is not None:
            return self._reopen
        if isinstance(self.src, RemoteArray):  # a remote .npy: its header, not its data
            return (ArraySource, (self.src, self.dst, self.name, self._files))
        return (ArraySource, (np.asarray(self.src), np.asarray(self.dst), self.name,
                              self._files))

    def iter_raw(self, block_edges):
        for lo in range(0, self.num_edges, block_edges):
            yield self.src[lo:lo + block_edges], self.dst[lo:lo + block_edges]

    def inputs(self):
        return list(self._files)


def from_arrays(src, dst, name: str = "<arrays>") -> EdgeSource:
    """Edges from two equal-length 1-D arrays (any integer dtype, NumPy or memory maps)."""
    return ArraySource(src, dst, name)


def from_npy(path, *, layout: str = "auto") -> EdgeSource:
    """Edges from one ``.npy`` file of shape ``[2, E]`` (or ``[E, 2]``), memory-mapped.

    ``layout``: ``"2e"``, ``"e2"`` or ``"auto"`` (``[2, E]`` unless the shape is ``[E, 2]``
    with ``E != 2``). An fsspec URL (``s3://...``) is read by byte range
    (:mod:`preprocess.sources.remote`): its header here, its blocks where they are used.
    """
    path = os.fspath(path)
    if is_remote(path):
        return _remote_npy_edges(path, layout)
    arr = load_npy(path, "edge list")
    if arr.ndim != 2 or 2 not in arr.shape:
        raise BadInputError(f"Expected an edge list of shape [2, E] or [E, 2] in {path}. "
                            f"Got shape {arr.shape} instead.")
    if layout == "auto":
        layout = "2e" if arr.shape[0] == 2 else "e2"
    if layout == "2e" and arr.shape[0] == 2:
        out = ArraySource(arr[0], arr[1], path, [path])
    elif layout == "e2" and arr.shape[1] == 2:
        out = ArraySource(arr[:, 0], arr[:, 1], path, [path])
    else:
        out = None
    if out is not None:
        out._reopen = (partial(from_npy, layout=layout), (path,))
        return out
    raise BadInputError(f"Expected layout {layout!r} in {path}. Got shape {arr.shape} instead.")


def _remote_npy_edges(url: str, layout: str) -> EdgeSource:
    """:func:`from_npy` of a URL: a source over two :class:`RemoteArray` views of its rows."""
    arr = open_remote_npy(url, "edge list")
    shape = arr.shape
    if len(shape) != 2 or 2 not in shape:
        raise BadInputError(f"Expected an edge list of shape [2, E] or [E, 2] in {url}. "
                            f"Got shape {shape} instead.")
    if layout == "auto":
        layout = "2e" if shape[0] == 2 else "e2"
    if layout == "2e" and shape[0] == 2:
        s, d = arr.row(0), arr.row(1)
    elif layout == "e2" and shape[1] == 2:
        s, d = arr.col(0), arr.col(1)
    else:
        raise BadInputError(f"Expected layout {layout!r} in {url}. Got shape {shape} instead.")
    return ArraySource(s, d, url, [url])  # pickles by its header (the file is not re-read)


def from_npy_pair(src_path, dst_path) -> EdgeSource:
    """Edges from two 1-D ``.npy`` files of equal length (source ids, destination ids)."""
    s = load_npy(src_path, "source id array")
    d = load_npy(dst_path, "destination id array")
    name = f"{os.fspath(src_path)} + {os.fspath(dst_path)}"
    out = ArraySource(s, d, name, [os.fspath(src_path), os.fspath(dst_path)])
    out._reopen = (from_npy_pair, (os.fspath(src_path), os.fspath(dst_path)))
    return out


class ParquetSource(EdgeSource):
    """Two columns of a parquet file (or directory of files), streamed as record batches."""

    def __init__(self, path, src_col: str, dst_col: str):
        import pyarrow.parquet as pq

        self.path = _check_exists(path)
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
    path = _check_exists(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs
                       if f.endswith(".parquet"))
        if not files:
            raise InputNotFoundError(f"Expected .parquet files under {path}. There are none.")
        return concat(*[ParquetSource(f, src_col, dst_col) for f in files])
    return ParquetSource(path, src_col, dst_col)


class CsvSource(EdgeSource):
    """Two columns of a CSV/TSV file, streamed with pyarrow's incremental reader."""

    def __init__(self, path, src_col, dst_col, *, header: bool = True, delimiter: str = ",",
                 block_bytes: int = 64 << 20):
        self.path = _check_exists(path)
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


def open_edges(path, src_col="src", dst_col="dst", *, header: bool = True,
               delimiter: str | None = None) -> EdgeSource:
    """An edge source for a file by its extension: ``.npy``, ``.parquet``, ``.csv``/``.tsv``."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        return from_npy(path)
    if is_remote(path):
        raise InputNotFoundError(
            f"Expected a .npy edge list for the URL {path}: parquet and CSV edge files are "
            "read from a local path or a file system every worker mounts; copy it there first.")
    if ext in (".parquet", ".pq") or os.path.isdir(path):
        return from_parquet(path, src_col, dst_col)
    if ext in (".csv", ".tsv", ".txt"):
        delim = delimiter or ("\t" if ext == ".tsv" else ",")
        return from_csv(path, src_col, dst_col, header=header, delimiter=delim)
    raise BadInputError(f"Expected an edge file ending .npy, .parquet, .csv or .tsv. "
                        f"Got {path} instead.")


class _Concat(EdgeSource):
    def __init__(self, sources: Sequence[EdgeSource]):
        self.sources = list(sources)
        self.name = " + ".join(s.name for s in self.sources)
        counts = [s.num_edges for s in self.sources]
        self.num_edges = None if any(c is None for c in counts) else int(sum(counts))

    def iter_blocks(self, block_edges=None):
        for s in self.sources:  # each part validates itself, so errors name the right file
            yield from s.iter_blocks(block_edges)

    def iter_raw(self, block_edges):
        for s in self.sources:
            yield from s.iter_raw(block_edges)

    def reversed(self):
        return _Concat([s.reversed() for s in self.sources])

    def inputs(self):
        return [p for s in self.sources for p in s.inputs()]

    def parts(self):
        return [p for s in self.sources for p in s.parts()]


def concat(*sources: EdgeSource) -> EdgeSource:
    """The edges of several sources, one after the other."""
    if len(sources) == 1 and not isinstance(sources[0], EdgeSource):
        sources = tuple(sources[0])
    for s in sources:
        if not isinstance(s, EdgeSource):
            raise TypeError(f"Expected EdgeSource objects. Got {type(s).__name__} instead.")
    return sources[0] if len(sources) == 1 else _Concat(sources)


class _Reversed(EdgeSource):
    def __init__(self, inner: EdgeSource):
        self.inner = inner
        self.name = inner.name
        self.num_edges = inner.num_edges

    def iter_blocks(self, block_edges=None):
        for s, d in self.inner.iter_blocks(block_edges):
            yield d, s

    def iter_raw(self, block_edges):
        for s, d in self.inner.iter_raw(block_edges):
            yield d, s

    def reversed(self):
        return self.inner

    def inputs(self):
        return self.inner.inputs()

    def parts(self):
        inner = self.inner.parts()
        return [self] if inner == [self.inner] else [p.reversed() for p in inner]
