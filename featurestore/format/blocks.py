"""Arrays as streams of row blocks, the unit the writer writes in."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from featurestore.errors import SchemaError

__all__ = ["BLOCK_BYTES", "iter_blocks", "blocks_of", "row_blocks"]

#: bytes per block when the writer streams a large array given whole (a memory map, say).
BLOCK_BYTES = 64 << 20


def iter_blocks(data, block_bytes: int = BLOCK_BYTES) -> Iterator[np.ndarray]:
    """Split an array (or memory map) into row blocks of about ``block_bytes``."""
    arr = np.asarray(data) if not isinstance(data, np.ndarray) else data
    if arr.ndim == 0:
        raise SchemaError(f"Expected an array with rows. Got a scalar {arr!r} instead.")
    row = max(1, int(np.prod(arr.shape[1:], dtype=np.int64)) * arr.dtype.itemsize)
    step = max(1, block_bytes // row)
    for lo in range(0, arr.shape[0], step):
        yield arr[lo:lo + step]


def blocks_of(data) -> Iterable[np.ndarray]:
    """Row blocks of ``data``: an array-like is split into blocks; an iterator is used as is."""
    if isinstance(data, (np.ndarray, list, tuple)) or hasattr(data, "__array__"):
        return iter_blocks(data)
    return data


def _chain(first, rest):
    yield first
    yield from rest


def row_blocks(data, dtype, row_shape, what: str):
    """``(blocks, dtype, row_shape)`` of array-like or block-iterator ``data``, the dtype and
    row shape taken from the first block when not given; a non-numeric dtype raises
    ``SchemaError`` naming ``what``."""
    blocks = iter(blocks_of(data))
    if row_shape is None or dtype is None:
        first = np.asarray(next(blocks, np.empty((0,) + tuple(row_shape or ()),
                                                 dtype or np.float32)))
        row_shape = tuple(row_shape) if row_shape is not None else first.shape[1:]
        dtype = dtype if dtype is not None else first.dtype
        blocks = _chain(first, blocks)
    dtype = np.dtype(dtype)
    if dtype.kind not in "fiub":
        raise SchemaError(f"Expected a numeric dtype for {what}. Got {dtype}.")
    return blocks, dtype, tuple(row_shape)
