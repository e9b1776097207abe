"""Read OGB's ``.pt`` files (``meta.pt``, ``split_dict.pt``) without running pickled code.

They are ``torch.save`` dumps of plain dicts holding ints and NumPy arrays. We load them with
``torch.load(weights_only=True)`` plus an explicit allow-list of the NumPy globals such dumps
reference (array reconstruction, dtypes, scalars), under both the NumPy 1.x (``numpy.core``)
and 2.x (``numpy._core``) module names. Anything else in the pickle (a class, a function such
as ``os.system``) is refused before it is called. ``weights_only=False`` is never used.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np

from preprocess.ogb.errors import (
    RawDataError,
    RawFileNotFoundError,
    TorchTooOldError,
    UnsafePickleError,
)

__all__ = ["load_pt", "allowed_globals"]

_NUMERIC_CODES = "?bBhHiIlLqQefdgFDG"


def allowed_globals() -> list:
    """The allow-list: ``(object, "module.name")`` pairs for torch's ``safe_globals``."""
    core = np._core.multiarray  # numpy >= 2; ``numpy.core`` names below cover 1.x dumps
    out: list = []
    for fn in (core._reconstruct, core.scalar):
        for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
            out.append((fn, f"{mod}.{fn.__name__}"))
    out += [(np.ndarray, "numpy.ndarray"), (np.dtype, "numpy.dtype"),
            (bytes, "builtins.bytes")]  # protocol 2 pickles an empty array's b"" as bytes()
    for code in _NUMERIC_CODES:
        cls = type(np.dtype(code))
        out.append((cls, f"numpy.dtypes.{cls.__name__}"))
    return out


def load_pt(path: str | os.PathLike) -> Any:
    """Load a ``.pt`` file that holds only containers, numbers, strings and NumPy arrays.

    Raises
    ------
    RawFileNotFoundError
        ``path`` does not exist.
    UnsafePickleError
        The file references a global outside :func:`allowed_globals` (nothing was executed).
    RawDataError
        The file is not a readable ``torch.save`` dump.
    TorchTooOldError
        torch < 2.6 (no allow-list of named globals); this never falls back to unsafe loading.
    """
    import torch

    path = os.fspath(path)
    version = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 6) or not hasattr(torch.serialization, "safe_globals"):
        raise TorchTooOldError(
            f"Expected torch >= 2.6 to read {path} safely (torch.load(weights_only=True) with an "
            f"allow-list of named globals). Got torch {torch.__version__}; upgrade torch.")
    if not os.path.exists(path):
        raise RawFileNotFoundError(f"Expected {path}. It is missing.")
    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        msg = str(e)
        if "weights_only" in msg.lower() or "GLOBAL" in msg:
            why = [ln.strip() for ln in msg.splitlines() if "GLOBAL" in ln or "global" in ln]
            raise UnsafePickleError(
                f"Expected {path} to hold only dicts, numbers and NumPy arrays. It references "
                "another pickled object, so it was refused without loading it"
                + (f": {why[0]}" if why else ".")) from e
        raise RawDataError(f"Expected a torch.save file at {path}. Could not read it: {msg}") from e
    except (RuntimeError, EOFError, OSError, KeyError, ValueError, IndexError) as e:
        # a text or truncated file fails inside torch's legacy reader with a bare KeyError
        raise RawDataError(f"Expected a torch.save file at {path}. Could not read it: "
                           f"{type(e).__name__}: {e}") from e
