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


def resident_topology_bytes(store) -> int:
    """Bytes of the resident copy a budgeted loader makes of ``store``'s topology, computed
    here by hand: int32 offsets (when they fit) and neighbour ids of ``ceil(log2 N)`` bits in
    64-bit words (plus one word), where that is narrower than the stored ids."""
    total = 0
    for et in store.edge_types:
        indptr, indices = store.csc(et)
        n_edges = int(indices.shape[0])
        total += indptr.shape[0] * (4 if n_edges < 2**31 - 1 else indptr.dtype.itemsize)
        bits = max(1, (store.num_nodes(et[0]) - 1).bit_length())
        if bits < 8 * indices.dtype.itemsize:
            total += ((n_edges * bits + 63) // 64 + 1) * 8
        else:
            total += indices.nbytes
    return total
