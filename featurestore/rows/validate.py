"""Validation at the public edge: ids, output buffers and id ranges.

The public methods of the package check their input here once and then call trusted code
(the row readers of :mod:`featurestore.rows`, the writer's block writes). One rule for an
id in range: ``0 <= id < num_rows``, found by one numba pass (threaded for long arrays).
"""

from __future__ import annotations

import numpy as np

from featurestore.format.integrity import _first_out_of_range
from featurestore.errors import IdsOutOfRangeError, InvalidIdsError, SchemaError

__all__ = ["check_ids", "check_out", "first_out_of_range"]


def first_out_of_range(ids: np.ndarray, num_rows: int) -> int:
    """Position of the first id outside ``[0, num_rows)``, or -1 when all are in range.

    Parameters
    ----------
    ids
        A 1-D integer array (any width, signed or not, native byte order).
    num_rows
        The exclusive upper bound.

    Returns
    -------
    int
        The smallest ``i`` with ``ids[i] < 0`` or ``ids[i] >= num_rows``, else -1.
    """
    if ids.shape[0] == 0:
        return -1
    return _first_out_of_range(ids, num_rows)


def check_ids(ids, num_rows: int, what: str) -> np.ndarray:
    """Validate ``ids`` against ``[0, num_rows)`` and return them as an array.

    Parameters
    ----------
    ids
        Any 1-D integer array-like (a list, a NumPy array of any integer width or byte order).
    num_rows
        Rows of the array the ids index.
    what
        The array's name, for the error message.

    Returns
    -------
    numpy.ndarray
        The ids in native byte order (``uint64`` as ``int64``; an empty input as ``int64``).

    Raises
    ------
    InvalidIdsError
        ``ids`` is not 1-D or not of an integer dtype.
    IdsOutOfRangeError
        An id is negative or ``>= num_rows``.
    """
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InvalidIdsError(f"Expected a 1-D array of ids for {what}. "
                              f"Got an array of shape {arr.shape} instead.")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise InvalidIdsError(f"Expected integer ids for {what}. Got dtype {arr.dtype} instead.")
    if not arr.dtype.isnative:  # big-endian ids from a file: numba takes native order only
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
        arr = arr.astype(np.int64)  # uint64 has no numba-safe comparison with negative bounds
    i = first_out_of_range(arr, num_rows)
    if i >= 0:
        raise IdsOutOfRangeError(f"Expected ids in [0, {num_rows}) for {what}. "
                                 f"Got {int(arr[i])} at position {i} instead.")
    return arr


def check_out(out, n: int, row_shape: tuple, dtype: np.dtype, what: str) -> np.ndarray:
    """Validate (or allocate) the output buffer of a gather of ``n`` rows.

    Parameters
    ----------
    out
        ``None`` (a new array is returned), a NumPy array or a CPU torch tensor.
    n
        Rows gathered.
    row_shape
        Shape of one row.
    dtype
        The array's dtype.
    what
        The array's name, for the error message.

    Returns
    -------
    numpy.ndarray
        A C-contiguous writeable array of shape ``(n,) + row_shape`` (a view of ``out``).

    Raises
    ------
    SchemaError
        ``out`` has another shape or dtype, or is not C-contiguous and writeable.
    """
    want = (n,) + tuple(row_shape)
    if out is None:
        return np.empty(want, dtype=dtype)
    o = out.numpy() if hasattr(out, "numpy") and not isinstance(out, np.ndarray) else out
    if not isinstance(o, np.ndarray) or o.shape != want or o.dtype != dtype:
        raise SchemaError(f"Expected out of shape {want} and dtype {dtype} for {what}. Got "
                          f"{getattr(o, 'shape', type(o))} {getattr(o, 'dtype', '')} instead.")
    if not o.flags.c_contiguous or not o.flags.writeable:
        raise SchemaError(f"Expected a C-contiguous writeable out buffer for {what}.")
    return o
