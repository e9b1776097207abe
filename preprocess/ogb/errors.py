"""Errors of the OGB ingest: raw files that are missing, malformed or unsafe."""

from __future__ import annotations

import pickle

from featurestore.errors import FeatureStoreError

__all__ = ["RawDataError", "RawFileNotFoundError", "UnsafePickleError", "TorchTooOldError"]


class RawDataError(FeatureStoreError, ValueError):
    """A raw file exists but its content is not what the official layout says."""


class RawFileNotFoundError(FeatureStoreError, FileNotFoundError):
    """A file of the official layout is missing."""


class UnsafePickleError(FeatureStoreError, pickle.UnpicklingError):
    """A ``.pt`` file holds a pickled object outside the allow-list; it was not loaded."""


class TorchTooOldError(FeatureStoreError, RuntimeError):
    """The installed torch cannot load ``.pt`` files with an allow-list (needs torch >= 2.6)."""
