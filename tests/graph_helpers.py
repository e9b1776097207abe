"""Small graph builders shared by the tests (plain NumPy, independent of the package)."""

from __future__ import annotations

import numpy as np


def random_csc(rng: np.random.Generator, num_src: int, num_dst: int, num_edges: int):
    """(indptr, indices, src, dst) of a random graph in CSC, neighbours sorted per destination."""
    src = rng.integers(0, num_src, num_edges) if num_src else np.zeros(0, np.int64)
    dst = rng.integers(0, num_dst, num_edges) if num_dst else np.zeros(0, np.int64)
    order = np.lexsort((src, dst))
    src, dst = src[order], dst[order]
    indptr = np.zeros(num_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, src, src, dst


def probe_plan(store, *args, **kw):
    """The memory plan a ``NeighborLoader(store, *args, **kw)`` makes as asked (its sampled
    batch sizes), read off the :class:`LoaderMemoryError` a 1-byte budget raises."""
    import pytest

    from loaders import NeighborLoader
    from loaders.errors import LoaderMemoryError

    with pytest.raises(LoaderMemoryError) as e:
        NeighborLoader(store, *args, memory=1, cache=None, **kw)
    return e.value.plan
