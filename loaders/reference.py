"""A plain Python/NumPy neighbour sampler: the specification the numba kernels must match.

:func:`reference_sample` draws from the same counter-based random stream as
:class:`loaders.sampler.NeighborSampler` and numbers nodes the same way, so for the same
``(seed, epoch, batch)`` both return identical batches. It is slow (a Python loop per node)
and meant for tests only.
"""

from __future__ import annotations

import numpy as np

from ._rng import GOLDEN, MASK, batch_key, layer_key, mix_py, node_state_py
from .sampler import CSCGraph, Fanouts, SampledSubgraph

__all__ = ["reference_sample", "choose_py"]


def choose_py(d: int, fanout: int, replace: bool, key: int, i: int) -> list[int]:
    """Neighbour positions (in ``0..d-1``) picked for the ``i``-th frontier node of degree ``d``."""
    if d == 0 or fanout == 0:
        return []
    if fanout < 0 or (not replace and fanout >= d):
        return list(range(d))
    state = node_state_py(key, i)
    out: list[int] = []
    if replace:
        for _ in range(fanout):
            state = (state + GOLDEN) & MASK
            out.append(mix_py(state) % d)
        return out
    chosen: set[int] = set()
    for j in range(d - fanout, d):  # Floyd's algorithm
        state = (state + GOLDEN) & MASK
        t = mix_py(state) % (j + 1)
        if t in chosen:
            t = j
        chosen.add(t)
        out.append(t)
    return out


def reference_sample(graph, num_neighbors, seeds, seed_type: str | None = None, *,
                     replace: bool = False, seed: int = 0, epoch: int = 0, batch: int = 0,
                     input_id=None) -> SampledSubgraph:
    """Sample like :meth:`NeighborSampler.sample`, one node at a time in Python."""
    g = CSCGraph.of(graph)
    fan = Fanouts.parse(num_neighbors, g.edge_types)
    L = fan.num_layers
    seed_type = seed_type or g.node_types[0]
    seeds = [int(s) for s in np.asarray(seeds).reshape(-1)]
    key = batch_key(seed, epoch, batch)
    nodes = {t: [] for t in g.node_types}
    local = {t: {} for t in g.node_types}
    for s in seeds:
        local[seed_type].setdefault(s, len(nodes[seed_type]))
        nodes[seed_type].append(s)
    hop = {t: [len(nodes[t])] for t in g.node_types}
    lo = {t: 0 for t in g.node_types}
    rows = {et: [] for et in g.edge_types}
    cols = {et: [] for et in g.edge_types}
    eids = {et: [] for et in g.edge_types}
    nse = {et: [0] * L for et in g.edge_types}
    for layer in range(L):
        start = {t: len(nodes[t]) for t in g.node_types}
        for e_idx, et in enumerate(g.edge_types):
            f = fan.per_etype[et][layer]
            a, b = lo[et.dst], start[et.dst]
            if f == 0 or a == b:
                continue
            indptr, indices = g.csc[et]
            k = layer_key(key, layer, e_idx)
            for i in range(b - a):
                v = nodes[et.dst][a + i]
                p0, p1 = int(indptr[v]), int(indptr[v + 1])
                for pos in choose_py(p1 - p0, f, replace, k, i):
                    e = p0 + pos
                    u = int(indices[e])
                    if u not in local[et.src]:
                        local[et.src][u] = len(nodes[et.src])
                        nodes[et.src].append(u)
                    rows[et].append(local[et.src][u])
                    cols[et].append(a + i)
                    eids[et].append(e)
                    nse[et][layer] += 1
        for t in g.node_types:
            lo[t] = start[t]
            hop[t].append(len(nodes[t]) - start[t])

    def arr(x):
        return np.asarray(x, dtype=np.int64)

    return SampledSubgraph(
        seed_type, {t: arr(v) for t, v in nodes.items()},
        {et: arr(v) for et, v in rows.items()}, {et: arr(v) for et, v in cols.items()},
        {et: arr(v) for et, v in eids.items()}, hop, nse, len(seeds),
        arr(range(len(seeds))) if input_id is None else arr(input_id))
