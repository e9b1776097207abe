"""Errors of the loaders about their arguments (the store's own errors are in
:mod:`featurestore.errors`).

Both derive from :class:`featurestore.errors.FeatureStoreError` and from the built-in a caller
of PyG's or DGL's loaders would catch for the same mistake (``TypeError`` for a keyword the
loader does not take, ``ValueError`` for a value it cannot honour).
"""

from __future__ import annotations

from featurestore.errors import FeatureStoreError, InvalidArgumentError

__all__ = ["LoaderArgumentError", "UnsupportedArgumentError"]


class LoaderArgumentError(InvalidArgumentError):
    """An argument's value is ambiguous or cannot be honoured (the message says what to pass)."""


class UnsupportedArgumentError(FeatureStoreError, TypeError):
    """A PyG or DGL loader argument this loader does not take; the message names ours."""

