"""Casting feature blocks to the store's dtype, counting the values a float downcast makes
infinite (shared by the feature step and its Dask variant)."""

from __future__ import annotations

import numpy as np

from preprocess.errors import BadInputError
from preprocess.steps.kernels import f32_to_f16

__all__ = ["cast_block"]


def cast_block(block: np.ndarray, dtype: np.dtype, name: str, state: dict) -> np.ndarray:
    """Cast a block, counting values a float downcast turns into inf (fp16 tops at 65504)."""
    if block.dtype == dtype:
        return block
    if dtype.kind not in "fiub":
        raise BadInputError(f"Expected a numeric target dtype for {name}. Got {dtype}.")
    if block.dtype.kind == "f" and dtype.kind in "iub":
        raise BadInputError(f"Expected a float dtype to cast the float features of {name} to. "
                            f"Got {dtype}: casting would truncate.")
    if block.dtype == np.float32 and dtype == np.float16:  # the common case, faster than numpy
        src = np.ascontiguousarray(block)
        out = np.empty(src.shape, np.float16)
        over = f32_to_f16(src.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
        state["overflow"] = state.get("overflow", 0) + int(over)
        return out
    with np.errstate(over="ignore"):  # overflows are counted and logged instead
        out = block.astype(dtype)
    if dtype.kind == "f" and dtype.itemsize < block.dtype.itemsize:
        over = int(np.count_nonzero(np.isinf(out))) - int(np.count_nonzero(np.isinf(block)))
        state["overflow"] = state.get("overflow", 0) + over
    return out
