"""Row copies that cast: the loader's ``dtype=`` (an fp16 store's rows reach the model as fp32).

``dtype="auto"`` (the loader's default) casts only where a model of unknown dtype receives the
rows: half-precision features go to ``output="pyg"`` and ``"dgl"`` batches as float32 (PyG's
and DGL's layers are created in float32, and an fp16 input to them fails in their first
matrix product); every other dtype, and every ``output="raw"`` batch, keeps the store's.
``dtype=None`` keeps the store's dtype everywhere.

The cast happens in the copy that puts a row into the batch buffer: cache hits are copied
from the hot tier by :func:`cast_rows` (a numba kernel, parallel for large batches), missed
rows are read into a small staging buffer in the store's dtype and cast on their way out of
it. No pass over the finished batch and no batch-sized temporary in the store's dtype.

numba has no CPU ``float16``: half-precision sources are read as their ``uint16`` bits and
converted through a 65,536-entry table (256 KiB for fp32, exact: the table is numpy's own
conversion of every half value).
"""

from __future__ import annotations

import functools

import numba
import numpy as np
import torch

from loaders.errors import LoaderArgumentError

__all__ = ["resolve_dtype", "cast_rows", "AUTO", "MODEL_OUTPUTS"]

#: the default ``dtype=``: float32 for fp16 rows bound for a PyG or DGL model, else as stored
AUTO = "auto"
#: outputs whose batches feed a PyG or DGL model (float32 by default)
MODEL_OUTPUTS = ("pyg", "dgl")

#: target dtypes the kernels write (numba has no CPU float16: an fp16 target uses numpy).
_KERNEL_TARGETS = (np.dtype(np.float32), np.dtype(np.float64))
#: below this many output bytes the copy runs on the calling thread only.
_PARALLEL_MIN_BYTES = 4 << 20


def resolve_dtype(dtype, store_dtype: np.dtype, what: str,
                  output: str = "raw") -> np.dtype | None:
    """The numpy dtype features are cast to (``None``: no cast), from a torch or numpy dtype
    or its name, ``None`` (the store's) or ``"auto"`` (float32 for fp16 rows when ``output``
    is ``"pyg"`` or ``"dgl"``, else the store's). Only floating dtypes: an integer or boolean
    target would drop the values' fractional part or sign (say, ``uint8`` embeddings), and
    complex ones mean nothing for a feature; torch's ``bfloat16`` has no numpy counterpart to
    cast into on the host."""
    if isinstance(dtype, str) and dtype == AUTO:
        half = np.dtype(store_dtype).newbyteorder("=") == np.float16
        dtype = np.float32 if half and output in MODEL_OUTPUTS else None
    if dtype is None:
        return None
    src = dtype
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point or dtype == torch.bfloat16:
            why = (" (numpy has no bfloat16 to cast into on the host: cast on the device)"
                   if dtype == torch.bfloat16 else "")
            raise LoaderArgumentError(
                f"Expected dtype float16, float32 or float64 for the features of {what}. Got "
                f"{dtype} instead{why}.")
        dtype = torch.empty(0, dtype=dtype).numpy().dtype
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise LoaderArgumentError(f"Expected dtype as a torch or numpy dtype or its name "
                                  f"(torch.float32, 'float32'), None (the store's) or "
                                  f"'auto'. Got {src!r} instead.") from e
    dt = dt.newbyteorder("=")  # torch takes native byte order only; ">f4" means float32
    if dt.kind != "f":
        raise LoaderArgumentError(
            f"Expected a floating dtype (float16, float32, float64) for the features of "
            f"{what}. Got {src!r} ({dt}) instead: casting features to {dt.kind!r}-kind values "
            f"would lose what they mean.")
    return None if dt == np.dtype(store_dtype) else dt


@functools.cache
def _half_table(dtype: np.dtype) -> np.ndarray:
    """Every fp16 bit pattern's value in ``dtype`` (numpy's conversion: exact, NaNs kept)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(dtype)


@numba.njit(nogil=True, cache=True, inline="always")
def _one(src, srcpos, out, dstpos, i):
    s = np.int64(srcpos[i])
    if s >= 0:  # (int64 both ways: a prange index and an int64 would unify to float)
        d = np.int64(dstpos[i]) if dstpos.shape[0] else np.int64(i)
        for j in range(src.shape[1]):
            out[d, j] = src[s, j]


@numba.njit(nogil=True, cache=True, inline="always")
def _one_lut(src, srcpos, table, out, dstpos, i):
    s = np.int64(srcpos[i])
    if s >= 0:
        d = np.int64(dstpos[i]) if dstpos.shape[0] else np.int64(i)
        for j in range(src.shape[1]):
            out[d, j] = table[src[s, j]]


@numba.njit(nogil=True, cache=True)
def _cast_ser(src, srcpos, out, dstpos):
    for i in range(srcpos.shape[0]):
        _one(src, srcpos, out, dstpos, i)


@numba.njit(nogil=True, cache=True, parallel=True)
def _cast_par(src, srcpos, out, dstpos):
    for i in numba.prange(srcpos.shape[0]):
        _one(src, srcpos, out, dstpos, i)


@numba.njit(nogil=True, cache=True)
def _cast_lut_ser(src, srcpos, table, out, dstpos):
    for i in range(srcpos.shape[0]):
        _one_lut(src, srcpos, table, out, dstpos, i)


@numba.njit(nogil=True, cache=True, parallel=True)
def _cast_lut_par(src, srcpos, table, out, dstpos):
    for i in numba.prange(srcpos.shape[0]):
        _one_lut(src, srcpos, table, out, dstpos, i)


_NO_POS = np.empty(0, np.int64)


def cast_rows(src: np.ndarray, srcpos: np.ndarray, out: np.ndarray,
              dstpos: np.ndarray | None = None) -> None:
    """``out[dstpos[i]] = src[srcpos[i]]`` cast to ``out.dtype``, for every ``srcpos[i] >= 0``
    (``dstpos=None``: ``out[i]``). ``src`` and ``out`` are C-contiguous with equal row
    shapes; positions are trusted (the callers made them)."""
    n = srcpos.shape[0]
    if n == 0:
        return
    s2 = src.reshape(src.shape[0], -1)
    o2 = out.reshape(out.shape[0], -1)
    dp = _NO_POS if dstpos is None else dstpos
    if out.dtype not in _KERNEL_TARGETS:  # an fp16 target: numpy, row block by row block
        _cast_numpy(s2, srcpos, o2, dstpos)
        return
    from loaders.sample.kernels import (
        _parallel_ok,  # the workqueue layer aborts on concurrent regions
    )

    par = n * o2.shape[1] * o2.itemsize >= _PARALLEL_MIN_BYTES and _parallel_ok()
    if s2.dtype == np.float16:
        kernel = _cast_lut_par if par else _cast_lut_ser
        kernel(s2.view(np.uint16), srcpos, _half_table(out.dtype), o2, dp)
    else:
        (_cast_par if par else _cast_ser)(s2, srcpos, o2, dp)


def _cast_numpy(s2, srcpos, o2, dstpos, block: int = 4096) -> None:
    """:func:`cast_rows` in numpy, ``block`` rows at a time (small temporaries only)."""
    for lo in range(0, srcpos.shape[0], block):
        sp = srcpos[lo:lo + block]
        keep = sp >= 0
        dp = (np.arange(lo, lo + sp.shape[0]) if dstpos is None else dstpos[lo:lo + block])
        o2[dp[keep]] = s2[sp[keep]]
