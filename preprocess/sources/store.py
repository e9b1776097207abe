"""Rows of another store as a feature source: a store's feature array read in order, block
by block, as the jobs that rewrite a store (``preprocess reorder``) read it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from preprocess.sources.features import FeatureSource

__all__ = ["StoreRows"]


class StoreRows(FeatureSource):
    """The rows of a store's feature array (node or edge features: a
    :class:`featurestore.FeatureArray`), read by contiguous slices.

    ``array()`` is None: a consumer that needs random access (a permutation) goes through its
    out-of-core path, or reads the rows into memory first when they fit its budget
    (:meth:`load`).
    """

    def __init__(self, arr, name: str | None = None):
        self.arr = arr
        self.name = name or arr.name
        self.num_rows = int(arr.shape[0])
        self.row_shape = tuple(int(x) for x in arr.shape[1:])
        self.dtype = np.dtype(arr.dtype)

    def iter_blocks(self, rows: int) -> Iterator[np.ndarray]:
        """Rows ``[lo, lo + rows)`` in turn, each one read of the store."""
        for lo in range(0, self.num_rows, rows):
            yield self.arr[lo:min(self.num_rows, lo + rows)]

    def load(self) -> FeatureSource:
        """The rows read into memory (a source with random access)."""
        return FeatureSource.from_array(self.arr[0:self.num_rows], self.name)
