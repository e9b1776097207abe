"""Errors of the OGB ingest: raw files that are missing, malformed or unsafe.

Each derives from :class:`preprocess.errors.PreprocessError` (through the matching generic
input error where there is one) and keeps the built-in base it had.
"""

from __future__ import annotations

import pickle

from preprocess.errors import BadInputError, InputNotFoundError, PreprocessError

__all__ = ["RawDataError", "RawFileNotFoundError", "UnsafePickleError", "TorchTooOldError"]


class RawDataError(BadInputError):
    """A raw file exists but its content is not what the official layout says."""


class RawFileNotFoundError(InputNotFoundError):
    """A file of the official layout is missing."""


class UnsafePickleError(PreprocessError, pickle.UnpicklingError):
    """A ``.pt`` file holds a pickled object outside the allow-list; it was not loaded."""


class TorchTooOldError(PreprocessError, RuntimeError):
    """The installed torch cannot load ``.pt`` files with an allow-list (needs torch >= 2.6)."""
