"""Exception classes of the preprocessing jobs.

Each derives from :class:`featurestore.FeatureStoreError` (so the ``featurestore`` command
reports it cleanly) and from the built-in exception a caller would catch for the same
problem. Messages name the input file concerned.
"""

from __future__ import annotations

from featurestore.errors import FeatureStoreError, MissingDependencyError

__all__ = [
    "PreprocessError",
    "InputNotFoundError",
    "BadInputError",
    "IdsOutOfRangeInputError",
    "ManifestMismatchError",
    "NotEnoughDiskError",
    "SpecError",
    "BudgetTooSmallError",
    "DaskNotInstalledError",
    "EdgeColumnError",
    "ReorderError",
]


class PreprocessError(FeatureStoreError):
    """Base class of the errors of ``preprocess``."""


class InputNotFoundError(PreprocessError, FileNotFoundError):
    """An input file named by a job or a spec does not exist."""


class BadInputError(PreprocessError, ValueError):
    """An input file cannot be used: wrong dtype or shape, truncated, NaN or null ids, ..."""


class IdsOutOfRangeInputError(BadInputError, IndexError):
    """Ids in an input file are negative or not below the node count."""


class ManifestMismatchError(PreprocessError, RuntimeError):
    """A job is resumed with other inputs or options than the run that started it."""


class NotEnoughDiskError(PreprocessError, OSError):
    """The output (or scratch) file system has less free space than the job needs."""


class SpecError(PreprocessError, ValueError):
    """A dataset spec file is malformed or names something that does not exist."""


class BudgetTooSmallError(PreprocessError, ValueError):
    """The memory budget given to a job is below what its steps need at the least."""


class DaskNotInstalledError(PreprocessError, MissingDependencyError):
    """``--dask`` was asked for without ``dask[distributed]`` installed."""


class EdgeColumnError(BadInputError):
    """Per-edge columns (edge features, values) cannot be carried into CSC order: options that
    merge or reorder edges without a rule for their rows (coalesce, unsorted neighbours), a
    CSC that is not the input's, or a column of the wrong shape."""


class ReorderError(PreprocessError, ValueError):
    """A store cannot be reordered as asked: an unknown order or node type, a hot prefix
    larger than the node type, an output inside the input store, or no ranking of that name
    installed."""
