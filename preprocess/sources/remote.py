"""``.npy`` inputs on fsspec URLs (``s3://``, ``gs://``, ``http://``, ...), read by byte range.

The driver reads a file's header once (:func:`open_remote_npy`: ``numpy.lib.format`` on an
fsspec file); what it learns (URL, data offset, dtype, shape) is all a Dask task needs, so the
tasks pickle that and fetch only their rows with ``fs.cat_file(path, start, end)``. A
:class:`RemoteArray` slices like the memory-mapped array a local ``.npy`` gives
(``arr[lo:hi]``, ``take_rows(idx)``), returning NumPy arrays, so the edge and feature readers
use it in place of a ``np.memmap``. The file system comes from ``fsspec.core.url_to_fs`` (its
credentials and endpoint from the environment, e.g. the ``AWS_*`` variables, on every worker).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from preprocess.errors import BadInputError, InputNotFoundError

__all__ = ["is_remote", "RemoteArray", "open_remote_npy", "remote_input_record"]

#: fetch at most this many bytes per range request when reading many rows.
MAX_REQUEST_BYTES = 64 << 20


def is_remote(path) -> bool:
    """Whether ``path`` is a URL other than ``file://`` (read through fsspec)."""
    p = str(path)
    return "://" in p and not p.startswith("file://")


def _fs(url: str):
    import fsspec

    return fsspec.core.url_to_fs(url)


def _mtime_s(info: dict) -> float:
    """Seconds since the epoch of a remote file's modification (0 when the server gives none):
    s3fs's ``LastModified`` (a datetime), ``mtime``, or HTTP's ``Last-Modified`` header."""
    import email.utils

    mtime = info.get("LastModified", info.get("mtime", info.get("last_modified")))
    if mtime is None and info.get("Last-Modified"):
        try:
            mtime = email.utils.parsedate_to_datetime(info["Last-Modified"])
        except (TypeError, ValueError):
            mtime = None
    if hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    try:
        return float(mtime or 0)
    except (TypeError, ValueError):
        return 0.0


def remote_input_record(url: str) -> dict:
    """``{"path", "size", "mtime_ns"}`` of a remote input (mtime 0 where the server gives
    none), plus ``"etag"`` where it gives one (S3, most HTTP servers): a rewrite within the
    second of ``Last-Modified`` changes it."""
    fs, path = _fs(url)
    try:
        info = fs.info(path)
    except FileNotFoundError as e:
        raise InputNotFoundError(f"Expected an input file at {url}. Nothing is there.") from e
    rec = {"path": url, "size": int(info.get("size") or 0),
           "mtime_ns": int(_mtime_s(info) * 1e9)}
    etag = info.get("ETag", info.get("etag"))
    if etag:
        rec["etag"] = str(etag)
    return rec


@dataclass(frozen=True)
class RemoteArray:
    """C-ordered rows of a remote ``.npy`` (or of one row of a ``[2, E]`` one), by byte range.

    ``offset`` is the byte position of row 0, ``shape[0]`` the number of rows; ``column``
    selects one column of a 2-D file (an ``[E, 2]`` edge list) so that the view is 1-D.
    """

    url: str
    offset: int
    dtype: str
    shape: tuple
    column: int | None = None

    @property
    def ndim(self) -> int:
        """Dimensions of the view."""
        return len(self.shape) - (self.column is not None)

    @property
    def view_shape(self) -> tuple:
        """Shape of the view (a column drops the last axis)."""
        return self.shape[:1] if self.column is not None else tuple(self.shape)

    @property
    def row_bytes(self) -> int:
        """Bytes per row in the file."""
        return int(np.prod(self.shape[1:], dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def __len__(self) -> int:
        return int(self.shape[0])

    def open(self) -> RemoteArray:
        """Itself (what a Dask task calls on its source, as on a :class:`MappedArray`)."""
        return self

    def row(self, i: int) -> RemoteArray:
        """Row ``i`` of a 2-D array as a 1-D one (a row of a ``[2, E]`` edge list)."""
        return RemoteArray(self.url, self.offset + i * self.row_bytes, self.dtype,
                           tuple(self.shape[1:]))

    def col(self, j: int) -> RemoteArray:
        """Column ``j`` of a 2-D array (a column of an ``[E, 2]`` edge list)."""
        return RemoteArray(self.url, self.offset, self.dtype, tuple(self.shape), j)

    def _rows(self, lo: int, hi: int) -> np.ndarray:
        rb = self.row_bytes
        if hi <= lo:  # no request: a zero-length range reads the whole object on some stores
            out = np.empty((0,) + tuple(self.shape[1:]), np.dtype(self.dtype))
            return out if self.column is None else out[:, self.column]
        fs, path = _fs(self.url)
        data = fs.cat_file(path, start=self.offset + lo * rb, end=self.offset + hi * rb)
        if len(data) != (hi - lo) * rb:
            raise BadInputError(f"Expected {(hi - lo) * rb} bytes of rows {lo}:{hi} in "
                                f"{self.url}. Got {len(data)} (truncated file?).")
        out = np.frombuffer(data, dtype=np.dtype(self.dtype)).reshape((hi - lo,)
                                                                      + tuple(self.shape[1:]))
        return out if self.column is None else out[:, self.column]

    def __getitem__(self, key) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"Expected a slice lo:hi of {self.url}. Got {key!r}.")
        lo, hi, _ = key.indices(len(self))
        if hi <= lo:
            return self._rows(0, 0)
        return self._rows(lo, hi)

    def take_rows(self, idx) -> np.ndarray:
        """Rows ``idx`` (any order), fetched as merged byte ranges, concurrently."""
        from fsspec.utils import merge_offset_ranges

        idx = np.asarray(idx, dtype=np.int64)
        if not idx.size:
            return self._rows(0, 0)
        u, inv = np.unique(idx, return_inverse=True)
        rb = self.row_bytes
        fs, path = _fs(self.url)
        at = self.offset + u * rb
        paths, starts, ends = merge_offset_ranges([path] * len(u), at.tolist(),
                                                  (at + rb).tolist(), max_gap=0,
                                                  max_block=MAX_REQUEST_BYTES, sort=False)
        parts = fs.cat_ranges(paths, starts, ends, on_error="raise")
        buf = b"".join(parts)  # max_gap=0: the unique rows back to back, in order
        if len(buf) != len(u) * rb:
            raise BadInputError(f"Expected {len(u) * rb} bytes of {len(u)} rows in {self.url}. "
                                f"Got {len(buf)} (truncated file?).")
        out = np.frombuffer(buf, dtype=np.dtype(self.dtype)).reshape(
            (len(u),) + tuple(self.shape[1:]))[inv]
        return out if self.column is None else out[:, self.column]


def open_remote_npy(url: str, what: str = "array") -> RemoteArray:
    """The header of a remote ``.npy`` (read once, here); errors name the URL."""
    from numpy.lib import format as npf

    fs, path = _fs(url)
    try:
        f = fs.open(path, "rb")
    except FileNotFoundError as e:
        raise InputNotFoundError(f"Expected an {what} file at {url}. Nothing is there.") from e
    with f:
        try:
            version = npf.read_magic(f)
            shape, fortran, dtype = (npf.read_array_header_1_0(f) if version == (1, 0)
                                     else npf.read_array_header_2_0(f))
        except (ValueError, OSError, EOFError) as e:
            raise BadInputError(f"Expected a readable .npy {what} in {url}: {e} "
                                "(truncated or not an .npy file?)") from e
        offset = f.tell()
    if dtype.hasobject:
        raise BadInputError(f"Expected a numeric .npy {what} in {url}. Got dtype {dtype}.")
    if fortran and len(shape) > 1:
        raise BadInputError(f"Expected a C-ordered .npy {what} in {url}. Got Fortran order; "
                            "save it with np.save(path, np.ascontiguousarray(a)).")
    return RemoteArray(url, int(offset), dtype.str, tuple(int(x) for x in shape))
