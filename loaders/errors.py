"""Errors of the loaders about their arguments (the store's own errors are in
:mod:`featurestore.errors`).

Both derive from :class:`featurestore.errors.FeatureStoreError` and from the built-in a caller
of PyG's or DGL's loaders would catch for the same mistake (``TypeError`` for a keyword the
loader does not take, ``ValueError`` for a value it cannot honour).
"""

from __future__ import annotations

from featurestore.errors import FeatureStoreError, InvalidArgumentError

__all__ = ["LoaderArgumentError", "UnsupportedArgumentError", "LoaderMemoryError"]


class LoaderArgumentError(InvalidArgumentError):
    """An argument's value is ambiguous or cannot be honoured (the message says what to pass)."""


class UnsupportedArgumentError(FeatureStoreError, TypeError):
    """A PyG or DGL loader argument this loader does not take; the message names ours."""



class LoaderMemoryError(FeatureStoreError, MemoryError):
    """The loader's memory budget cannot hold even its smallest plan (one batch buffer, one
    subgraph prefetched, a memory-mapped topology, no cache): raised before any batch buffer
    is allocated. ``min_budget`` is the smallest budget in bytes that would work; ``plan`` the
    :class:`~loaders.memory.budget.LoaderPlan` as asked (before any fallback): the sampled
    batch sizes behind it."""

    def __init__(self, message: str, min_budget: int, plan=None):
        super().__init__(message)
        self.min_budget = int(min_budget)
        self.plan = plan
