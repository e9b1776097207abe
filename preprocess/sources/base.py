"""Edge sources: re-iterable streams of ``(src, dst)`` blocks of bounded size (the contract).

Every job reads its edges through an :class:`EdgeSource`, so the conversion to CSC never
needs the whole edge list in memory and may read it several times. This module holds the
contract and what any format builds on: :class:`ArraySource` (two 1-D arrays or memory maps),
:func:`concat`, the reversed view, and :func:`as_int64_ids` (the id validation every block
goes through). The formats are :mod:`preprocess.sources.npy`, :mod:`~preprocess.sources.parquet`,
:mod:`~preprocess.sources.csv` and :mod:`~preprocess.sources.remote`.

:meth:`EdgeSource.iter_blocks` validates as it goes: integer ids (no NaN, no nulls, no
strings), equal lengths, a readable file. Ranges are checked by the consumer, which knows
the node counts; errors name :attr:`EdgeSource.name` (the file).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterator, Sequence

import numpy as np

from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.sources.remote import RemoteArray

__all__ = ["EdgeSource", "DEFAULT_BLOCK_EDGES", "from_arrays", "concat", "as_int64_ids"]

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
        return ReversedSource(self)

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


def check_exists(path) -> str:
    """``path`` as a string, or :class:`InputNotFoundError` when nothing is there."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputNotFoundError(f"Expected an edge file at {path}. Nothing is there.")
    return path


# -- arrays, concatenation, reversal ------------------------------------------------------
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


class ReversedSource(EdgeSource):
    """A source's edges with source and destination swapped (:meth:`EdgeSource.reversed`)."""

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
