"""Id range checks of the input files, through the store's one validator.

:func:`featurestore.check_ids` is the package's rule for an id in range (``0 <= id < n``, one
numba pass); :func:`check_input_ids` applies it to a block of an input file and re-raises its
error as the preprocessing error that names the file (and the block's first row).
"""

from __future__ import annotations

import numpy as np

import featurestore as fs
from featurestore.errors import FeatureStoreError, IdsOutOfRangeError

from preprocess.errors import IdsOutOfRangeInputError

__all__ = ["check_input_ids", "NO_BOUND"]

#: the bound of a check that ids are non-negative only.
NO_BOUND = int(np.iinfo(np.int64).max)


def check_input_ids(ids, n: int, name: str, what: str, *, at: int | None = None,
                    error: type[Exception] = IdsOutOfRangeInputError) -> np.ndarray:
    """``ids`` (1-D integers) checked to lie in ``[0, n)``, as an int64 array.

    Parameters
    ----------
    ids
        A block of ids read from an input file.
    n
        The exclusive upper bound (the node count).
    name
        The input file (or ``file:member``), named by the error.
    what
        What the ids are (``source``, ``train split``), named by the error.
    at
        Row of the block's first id in the file, named by the error when given.
    error
        The class raised (default :class:`~preprocess.errors.IdsOutOfRangeInputError`; the
        OGB jobs raise their ``RawDataError``).

    Raises
    ------
    error
        ``ids`` is not 1-D, not integers, or has an id outside ``[0, n)``.
    """
    try:
        arr = fs.check_ids(ids, n, f"{what} in {name}")
    except IdsOutOfRangeError as e:
        a = np.asarray(ids)
        lo = int(a.min())
        bad = lo if lo < 0 else int(a.max())
        where = f" in the block at row {at}" if at is not None else ""
        raise error(f"Expected {what} ids in [0, {n}) in {name}. Got {bad}{where}.") from e
    except FeatureStoreError as e:  # not 1-D, not integers
        raise error(str(e)) from e
    return arr.astype(np.int64, copy=False)
