"""Locality-aware splits of the seeds over data-parallel ranks.

``NeighborLoader(rank=r, world_size=k)`` deals each rank a random share of the seeds, reshuffled
every epoch, so every rank's sampled neighbourhoods cover the whole graph and each rank's cache
must serve it all. On a graph with communities, :func:`split_seeds` keeps a rank's seeds in a
few of them instead: each rank's rows per epoch shrink and its cache hits more (see
``benchmarks/partition_bench.py`` and docs/scale-out.md, "Partitioned seeds").

Methods
-------
``"ldg"``
    Linear deterministic greedy (Stanton & Kliot, KDD 2012): nodes arrive one at a time and
    join the part holding most of their neighbours, weighted by ``1 - load / capacity``.
``"fennel"``
    Fennel (Tsourakakis et al., WSDM 2014): most neighbours less ``alpha * gamma *
    load ** (gamma - 1)`` with ``gamma = 1.5`` and Fennel's ``alpha = m k**0.5 / n**1.5``.
``"random"``
    A seeded random split (what the loader's ``rank``/``world_size`` does, fixed over epochs).

The streaming methods place every node of the seeds' type, seeds and the others alike (the
other nodes carry the communities between seeds), over the CSC of the edge type that joins the
seed type to itself (a node's votes come from its in-neighbours, the nodes the sampler reaches
from it). Seeds and other nodes are balanced separately: the other nodes softly, by the
penalty, and the seeds exactly: a part takes a seed only while it holds fewer than
``len(seeds) // k`` of them, or that plus one for ``len(seeds) % k`` parts, so every rank gets
an equal share, +-1. ``passes > 1`` restreams: each node leaves its part and is placed again
with every other node's current part known (Nishimura & Ugander, KDD 2013); a seed can always
return to the part it left, so the shares stay exact.

Memory: one ``int32`` per node (its part; seeds are coded ``k + part``) beside the CSC the
loader holds anyway; the stream order is an affine permutation of the ids (no array), chosen by
``seed``, and ties are broken by a hash of ``(seed, node)``: a split is a pure function of its
arguments.

Example::

    parts = split_seeds(store, "train", world_size, method="ldg")
    loader = NeighborLoader(store, [10, 5], input_nodes=parts[rank], shuffle=True)
"""

from __future__ import annotations

import math

import numba
import numpy as np

from featurestore.errors import InvalidIdsError

from loaders.errors import LoaderArgumentError

__all__ = ["split_seeds", "partition_nodes", "edge_cut", "METHODS"]

METHODS = ("ldg", "fennel", "random")
_STREAMING = ("ldg", "fennel")
#: the load penalties count a part full at ``SLACK`` times its share (as Fennel's nu = 1.1);
#: at 1.0, LDG's ``1 - load / capacity`` weighs the neighbours so little once the parts are
#: near balance that restreaming hardly moves a node (SBM, 200k nodes, 4 parts, 8 passes:
#: edge cut 0.51 at 1.0, 0.16 at 1.1)
SLACK = 1.1
#: default streaming passes (the last one places the seeds exactly)
PASSES = 8


# -- the streaming kernel --------------------------------------------------------------------
@numba.njit(nogil=True, cache=True, inline="always")
def _hash(key, x):
    """splitmix64 of ``key + x``: a deterministic tie-break."""
    z = key + np.uint64(x) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(nogil=True, cache=True, inline="always")
def _best(cnt, seeds, others, is_seed, hard, base, extra, big, cap_s, cap_n, fennel, penalty,
          start):
    """The part with the best score for a node with ``cnt`` neighbours per part (ties: the
    lighter part, then the first from ``start``); ``hard``: a seed only where there is room."""
    k = cnt.shape[0]
    best, best_score, best_load = -1, -np.inf, 0
    for t in range(k):
        p = (start + t) % k
        load = seeds[p] if is_seed else others[p]
        if is_seed and hard and not (load < base or (load == base and big < extra)):
            continue
        f = load / (cap_s if is_seed else cap_n)
        score = cnt[p] - penalty * math.sqrt(f) if fennel else cnt[p] * (1.0 - f)
        if best < 0 or score > best_score or (score == best_score and load < best_load):
            best, best_score, best_load = p, score, load
    return best


@numba.njit(nogil=True, cache=True)
def _stream(indptr, indices, part, k, stride, offset, key, fennel, penalty, counts, seeds,
            others, hard):
    """One pass over every node in the order ``(stride * i + offset) % n``.

    ``part``: ``-1`` unplaced, ``-2`` an unplaced seed, ``p`` a node in part ``p``, ``k + p``
    a seed in part ``p``; ``seeds`` / ``others``: the parts' loads, ``counts = [seeds, other
    nodes]``. A soft pass moves each node to its best part (load penalised); the ``hard``
    pass places the seeds afresh (their loads start at 0) where there is room, every node's
    current part still voting."""
    n = part.shape[0]
    cap_s = max(counts[0] / k * SLACK, 1e-9)
    cap_n = max(counts[1] / k * SLACK, 1e-9)
    base, extra = counts[0] // k, counts[0] % k
    cnt = np.zeros(k, np.int64)
    big = 0  # parts holding base + 1 seeds (hard pass)
    if hard:
        seeds[:] = 0
    for i in range(n):
        v = (stride * i + offset) % n
        pv = part[v]
        is_seed = pv == -2 or pv >= k
        if pv >= 0 and not (is_seed and hard):  # leave the current part
            if is_seed:
                seeds[pv % k] -= 1
            else:
                others[pv % k] -= 1
        cnt[:] = 0
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            if u != v and part[u] >= 0:
                cnt[part[u] % k] += 1
        start = np.int64(_hash(key, v) % np.uint64(k))
        best = _best(cnt, seeds, others, is_seed, hard, base, extra, big, cap_s, cap_n,
                     fennel, penalty, start)
        if is_seed:
            if hard and seeds[best] == base:
                big += 1
            seeds[best] += 1
            part[v] = k + best
        else:
            others[best] += 1
            part[v] = best


@numba.njit(nogil=True, cache=True)
def _cut(indptr, indices, part, k):
    """CSC entries ``(u -> v)`` with ``u != v`` whose ends are in different parts, and all
    such entries."""
    cut = 0
    total = 0
    for v in range(indptr.shape[0] - 1):
        pv = part[v] % k
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            if u != v:
                total += 1
                if part[u] % k != pv:
                    cut += 1
    return cut, total


# -- helpers -------------------------------------------------------------------------------------
def _graph_and_seeds(store, seeds):
    """``(CSCGraph, seed type, distinct seed ids)`` from a store (or a CSCGraph with ids)."""
    from loaders.sample.seeds import resolve_input_nodes
    from loaders.sample.sampler import CSCGraph

    if isinstance(store, CSCGraph):
        graph = store
        if isinstance(seeds, tuple) and len(seeds) == 2 and isinstance(seeds[0], str):
            ntype, ids = seeds
        elif len(graph.node_types) == 1:
            ntype, ids = graph.node_types[0], seeds
        else:
            raise LoaderArgumentError(f"Expected seeds as (ntype, ids) for a graph of node "
                                      f"types {graph.node_types}. Got {type(seeds).__name__}.")
        ids = np.asarray(ids)
    else:
        graph = CSCGraph.from_store(store)
        ntype, ids = resolve_input_nodes(store, seeds)
    n = graph.num_nodes[ntype]
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise InvalidIdsError(f"Expected 1-D integer seeds of node type {ntype!r}. Got "
                              f"{ids.dtype} of shape {ids.shape} instead.")
    ids = ids.astype(np.int64, copy=False)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise InvalidIdsError(f"Expected seeds of node type {ntype!r} in [0, {n}). Got ids in "
                              f"[{ids.min()}, {ids.max()}] instead.")
    return graph, ntype, ids


def _homogeneous_csc(graph, ntype: str, etype=None):
    """The CSC of the edge type joining ``ntype`` to itself (``etype`` picks one of several)."""
    cands = [et for et in graph.edge_types if et.src == ntype and et.dst == ntype]
    if etype is not None:
        cands = [et for et in cands if tuple(et) == tuple(etype) or et.rel == etype]
    if len(cands) != 1:
        raise LoaderArgumentError(
            f"Expected one edge type from {ntype!r} to {ntype!r} to partition over (etype= "
            f"picks one). Got {[tuple(e) for e in cands]} among {graph.edge_types}.")
    return graph.csc[cands[0]]


def _stride(n: int, seed: int) -> tuple[int, int]:
    """A stride coprime to ``n`` near ``0.618 n`` (a well-spread order) and an offset."""
    if n <= 2:
        return 1, 0
    rng = np.random.default_rng([seed, 0x5EED])
    a = int(n * 0.6180339887) + int(rng.integers(0, max(n // 64, 1)))
    a = max(a % n, 1)
    while math.gcd(a, n) != 1:
        a = a + 1 if a + 1 < n else 1
    return a, int(rng.integers(0, n))


# -- public --------------------------------------------------------------------------------------
def partition_nodes(store, seeds, world_size: int, method: str = "ldg", *, seed: int = 0,
                    passes: int = PASSES, etype=None) -> tuple[str, np.ndarray]:
    """Place every node of the seeds' type in one of ``world_size`` parts (see the module).

    Parameters
    ----------
    store
        A :class:`featurestore.Store` or a :class:`loaders.CSCGraph`.
    seeds
        Distinct seeds, in any form :class:`loaders.NeighborLoader` takes as ``input_nodes``.
    world_size
        Number of parts (ranks).
    method
        ``"ldg"`` or ``"fennel"`` (streaming; ``"random"`` has no node placement).
    seed
        Chooses the stream order and breaks ties.
    passes
        Streaming passes (``> 1`` restreams).
    etype
        The edge type (or relation) to partition over, when the seed type has several to
        itself.

    Returns
    -------
    (ntype, part)
        ``part`` (``int32``, one per node of ``ntype``) in ``[0, world_size)``.
    """
    graph, ntype, ids = _graph_and_seeds(store, seeds)
    return ntype, _place(graph, ntype, ids, world_size, method, seed, passes, etype) % world_size


def _check(world_size, method, passes, seed) -> None:
    if method not in METHODS:
        raise LoaderArgumentError(f"Expected method in {METHODS}. Got {method!r} instead.")
    for name, v, lo in (("world_size", world_size, 1), ("passes", passes, 1), ("seed", seed, 0)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
            raise LoaderArgumentError(f"Expected an integer {name} >= {lo}. Got {v!r} instead.")


def _place(graph, ntype, ids, k, method, seed, passes, etype) -> np.ndarray:
    """The coded placement (``k + p`` for seeds, ``p`` for other nodes)."""
    _check(k, method, passes, seed)
    if method not in _STREAMING:
        raise LoaderArgumentError(f"Expected a streaming method {_STREAMING} to place nodes. "
                                  f"Got {method!r} instead.")
    indptr, indices = _homogeneous_csc(graph, ntype, etype)
    n = graph.num_nodes[ntype]
    part = np.full(n, -1, np.int32)
    part[ids] = -2
    if np.count_nonzero(part == -2) != ids.shape[0]:
        raise InvalidIdsError(f"Expected distinct seeds of node type {ntype!r}. Got "
                              f"{ids.shape[0] - np.unique(ids).shape[0]} repeated ids.")
    if k >= 2**30:  # seeds are coded k + part in int32
        raise LoaderArgumentError(f"Expected world_size < 2**30. Got {k}.")
    counts = np.array([ids.shape[0], n - ids.shape[0]], np.int64)
    stride, offset = _stride(n, seed)
    key = np.uint64((int(seed) * 0x632BE59BD9B4E019 + 0x9A47) % 2**64)
    penalty = 1.5 * indices.shape[0] / (2.0 * max(n, 1))  # gamma * m / n, m = entries / 2
    seeds, others = np.zeros(k, np.int64), np.zeros(k, np.int64)
    for p in range(passes):  # the last pass is the hard one
        _stream(indptr, indices, part, np.int64(k), np.int64(stride), np.int64(offset), key,
                method == "fennel", penalty, counts, seeds, others, p == passes - 1)
    return part


def split_seeds(store, seeds, world_size: int, method: str = "ldg", *, seed: int = 0,
                passes: int = PASSES, etype=None, drop_remainder: bool = False) -> list[np.ndarray]:
    """Split ``seeds`` over ``world_size`` ranks: a list of sorted ``int64`` id arrays.

    The parts are disjoint, cover the seeds and hold ``len(seeds) // world_size`` or one more
    each (``drop_remainder``: exactly ``len(seeds) // world_size``, the extra seeds left out,
    as ``NeighborLoader(rank=, world_size=)`` does, so every rank runs as many batches).
    Give rank ``r`` its part as ``NeighborLoader(..., input_nodes=parts[r])``. Parameters as
    :func:`partition_nodes`; ``method="random"``: a seeded random split.
    """
    _check(world_size, method, passes, seed)
    if method == "random":
        from loaders.sample.seeds import resolve_input_nodes
        from loaders.sample.sampler import CSCGraph

        if isinstance(store, CSCGraph):
            _, ntype, ids = _graph_and_seeds(store, seeds)
        else:
            ntype, ids = resolve_input_nodes(store, seeds)
            ids = np.asarray(ids, np.int64)
        if np.unique(ids).shape[0] != ids.shape[0]:
            raise InvalidIdsError(f"Expected distinct seeds of node type {ntype!r}.")
        perm = np.random.default_rng([seed, 0xA11]).permutation(ids.shape[0])
        parts = [np.sort(p) for p in np.array_split(ids[perm], world_size)]
    else:
        graph, ntype, ids = _graph_and_seeds(store, seeds)
        code = _place(graph, ntype, ids, world_size, method, seed, passes, etype)[ids]
        parts = [np.sort(ids[code == world_size + r]) for r in range(world_size)]
    if drop_remainder:
        share = ids.shape[0] // world_size
        parts = [p[:share] for p in parts]
    return parts


def edge_cut(store, part: np.ndarray, ntype: str | None = None, etype=None) -> float:
    """Share of the edges (of the type joining ``ntype`` to itself, self loops aside) whose
    ends are in different parts of ``part`` (one part per node, e.g. :func:`partition_nodes`)."""
    from loaders.sample.sampler import CSCGraph

    graph = store if isinstance(store, CSCGraph) else CSCGraph.from_store(store)
    ntype = ntype or (graph.node_types[0] if len(graph.node_types) == 1 else None)
    if ntype is None:
        raise LoaderArgumentError(f"Expected ntype among {graph.node_types}. Got None.")
    part = np.asarray(part)
    if part.shape != (graph.num_nodes[ntype],) or (part.size and part.min() < 0):
        raise LoaderArgumentError(f"Expected one part >= 0 per node of {ntype!r} "
                                  f"({graph.num_nodes[ntype]}). Got shape {part.shape}.")
    indptr, indices = _homogeneous_csc(graph, ntype, etype)
    k = int(part.max()) + 1 if part.size else 1
    cut, total = _cut(indptr, indices, part.astype(np.int64), k)
    return cut / max(total, 1)
