"""A plain Python/NumPy neighbour sampler: the specification the numba kernels must match.

:func:`reference_sample` draws from the same counter-based random stream as
:class:`loaders.sample.sampler.NeighborSampler` and numbers nodes the same way, so for the same
``(seed, epoch, batch)`` both return identical batches. It is slow (a Python loop per node)
and meant for tests only.
"""

from __future__ import annotations

import numpy as np

from loaders.sample.rng import GOLDEN, MASK, batch_key, layer_key, mix_py, node_state_py
from loaders.sample.sampler import CSCGraph, Fanouts, SampledSubgraph, union_groups

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


def _union_picks(g, fan, groups, nodes, lo, start, layer, key, replace) -> dict:
    """``fanout_per="node"``: per edge type drawn together, its ``(frontier index, position)``
    picks, node by node, each node's in draw order."""
    picks = {}
    for t, group in groups.items():
        active = [et for _, et in group if fan.per_etype[et][layer] != 0]
        a, b = lo[t], start[t]
        if len(active) < 2 or a == b:
            continue
        f = fan.per_etype[active[0]][layer]
        k = layer_key(key, layer, len(g.edge_types) + g.node_types.index(t))
        for et in active:
            picks[et] = []
        for i in range(b - a):
            v = nodes[t][a + i]
            degs = [int(g.csc[et][0][v + 1]) - int(g.csc[et][0][v]) for et in active]
            for p in choose_py(sum(degs), f, replace, k, i):
                r = 0
                while p >= degs[r]:
                    p -= degs[r]
                    r += 1
                picks[active[r]].append((i, p))
    return picks


def reference_sample(graph, num_neighbors, seeds, seed_type: str | None = None, *,
                     replace: bool = False, seed: int = 0, epoch: int = 0, batch: int = 0,
                     input_id=None, fanout_per: str = "edge_type",
                     disjoint: bool = False) -> SampledSubgraph:
    """Sample like :meth:`NeighborSampler.sample`, one node at a time in Python
    (``disjoint``: nodes keyed by ``(seed index, node)``, as PyG's ``disjoint=True``)."""
    g = CSCGraph.of(graph)
    fan = Fanouts.parse(num_neighbors, g.edge_types)
    groups = union_groups(g, fan, fanout_per)
    L = fan.num_layers
    seed_type = seed_type or g.node_types[0]
    seeds = [int(s) for s in np.asarray(seeds).reshape(-1)]
    key = batch_key(seed, epoch, batch)
    nodes = {t: [] for t in g.node_types}
    owner = {t: [] for t in g.node_types}  # the seed index of each node's tree (disjoint)
    local = {t: {} for t in g.node_types}
    for b, s in enumerate(seeds):
        local[seed_type].setdefault((b, s) if disjoint else s, len(nodes[seed_type]))
        nodes[seed_type].append(s)
        owner[seed_type].append(b)
    hop = {t: [len(nodes[t])] for t in g.node_types}
    lo = {t: 0 for t in g.node_types}
    rows = {et: [] for et in g.edge_types}
    cols = {et: [] for et in g.edge_types}
    eids = {et: [] for et in g.edge_types}
    nse = {et: [0] * L for et in g.edge_types}
    for layer in range(L):
        start = {t: len(nodes[t]) for t in g.node_types}
        union = _union_picks(g, fan, groups, nodes, lo, start, layer, key, replace)
        for e_idx, et in enumerate(g.edge_types):
            f = fan.per_etype[et][layer]
            a, b = lo[et.dst], start[et.dst]
            indptr, indices = g.csc[et]
            if et in union:
                picks = union[et]
            elif f == 0 or a == b:
                continue
            else:
                k = layer_key(key, layer, e_idx)
                picks = [(i, p) for i in range(b - a) for p in choose_py(
                    int(indptr[nodes[et.dst][a + i] + 1]) - int(indptr[nodes[et.dst][a + i]]),
                    f, replace, k, i)]
            for i, pos in picks:
                e = int(indptr[nodes[et.dst][a + i]]) + pos
                u = int(indices[e])
                b = owner[et.dst][a + i]
                k = (b, u) if disjoint else u
                if k not in local[et.src]:
                    local[et.src][k] = len(nodes[et.src])
                    nodes[et.src].append(u)
                    owner[et.src].append(b)
                rows[et].append(local[et.src][k])
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
        arr(range(len(seeds))) if input_id is None else arr(input_id),
        batch={t: arr(v) for t, v in owner.items()} if disjoint else None)
