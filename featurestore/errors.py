"""Exception classes of the feature store.

Every error derives from :class:`FeatureStoreError` and from the built-in exception a
caller would catch for the same problem, so ``except FileNotFoundError`` keeps working.
Messages name the store, array or file concerned.
"""

from __future__ import annotations

__all__ = [
    "FeatureStoreError",
    "StoreNotFoundError",
    "NotAStoreError",
    "IncompleteStoreError",
    "StoreExistsError",
    "LockUnavailableError",
    "CorruptStoreError",
    "UnknownNodeTypeError",
    "UnknownEdgeTypeError",
    "UnknownFeatureError",
    "UnknownSplitError",
    "InvalidIdsError",
    "IdsOutOfRangeError",
    "SchemaError",
    "StoreLockedError",
    "UnsafePathError",
    "StoreChangedError",
    "DiskFullError",
    "CacheDirError",
    "RemoteStoreError",
    "ClosedStoreError",
    "InvalidArgumentError",
    "MissingDependencyError",
    "UnsupportedRemoteWriteError",
]


class FeatureStoreError(Exception):
    """Base class of every error raised by this package."""


class StoreNotFoundError(FeatureStoreError, FileNotFoundError):
    """The path or URL does not exist."""


class NotAStoreError(FeatureStoreError, ValueError):
    """The path exists but holds no feature store (no zarr group, or another format)."""


class IncompleteStoreError(FeatureStoreError, RuntimeError):
    """The store was never committed: a writer crashed or is still running."""


class StoreExistsError(FeatureStoreError, FileExistsError):
    """A store already exists where a new one was to be created."""


class CorruptStoreError(FeatureStoreError, OSError):
    """A file of the store is missing, truncated or inconsistent with the metadata."""


class UnknownNodeTypeError(FeatureStoreError, KeyError):
    """The node type is not in the store's schema."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class UnknownEdgeTypeError(UnknownNodeTypeError):
    """The edge type is not in the store's schema."""


class UnknownFeatureError(UnknownNodeTypeError):
    """The feature (or per-node value array) is not in the store."""


class UnknownSplitError(UnknownNodeTypeError):
    """The split is not in the store."""


class InvalidIdsError(FeatureStoreError, TypeError):
    """Ids are not a 1-D array of integers."""


class IdsOutOfRangeError(FeatureStoreError, IndexError):
    """Ids fall outside ``[0, num_rows)``."""


class SchemaError(FeatureStoreError, ValueError):
    """Data given to the writer does not agree with the schema (shape, dtype, count)."""


class LockUnavailableError(FeatureStoreError, OSError):
    """A store's write lock cannot be taken at all (its path is a directory, the file system
    has no locks): not another writer holding it."""


class StoreLockedError(FeatureStoreError, RuntimeError):
    """Another writer holds the store's exclusive write lock."""


class UnsafePathError(FeatureStoreError, ValueError):
    """A name or path would reach outside the store, or an operation would touch files this
    package did not write (a directory that is not one of its stores, an input inside the
    output)."""


class StoreChangedError(FeatureStoreError, RuntimeError):
    """The store was rewritten (its generation changed) after this reader opened it."""


class DiskFullError(FeatureStoreError, OSError):
    """The file system ran out of space while writing; the message names the file."""


class CacheDirError(FeatureStoreError, OSError):
    """A remote store's local cache directory (``cache_dir``) cannot be used: not writable,
    not a directory, or removed and not made again; the message names the directory."""


class RemoteStoreError(FeatureStoreError, OSError):
    """A remote store failed (no Range support, unreachable, timed out); names URL and array."""


class ClosedStoreError(FeatureStoreError, RuntimeError):
    """The store (or array) was used after ``close()``."""


class InvalidArgumentError(FeatureStoreError, ValueError):
    """An argument has the wrong type or is out of range (``io_threads=0``,
    ``batch_size=100.5``)."""


class UnsupportedRemoteWriteError(FeatureStoreError, NotImplementedError):
    """Writing a store where the filesystem has no atomic create (so no safe write lock)."""


class MissingDependencyError(FeatureStoreError, ImportError):
    """An optional package a feature needs is not installed; the message says what to install."""
