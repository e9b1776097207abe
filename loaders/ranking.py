"""Row rankings of a store, hottest first, for ``featurestore preprocess reorder``.

The same rankings the loader's static cache uses (:mod:`loaders.memory.cache`), as functions
``rank(store, ntype, k, **options) -> ids`` that return the ``k`` hottest rows of ``ntype``
in ranking order (scores descending, ties by degree descending, then by id): any prefix of
the result is the top of the ranking. They are registered as entry points of the group
``featurestore.rankings`` (``pyproject.toml``), which the reorder job of ``preprocess`` looks
up by name, as ``preprocess`` imports nothing from ``loaders``::

    ids = presample_ranking(store, "paper", 100_000, fanouts=[15, 10, 5], batch_size=1024,
                            input="train")
"""

from __future__ import annotations

import numpy as np

from loaders.memory.cache import degree_counts, presample_counts, presample_scores, rank_rows
from loaders.sample.sampler import NeighborSampler
from loaders.sample.seeds import epoch_order, resolve_input_nodes

__all__ = ["presample_ranking", "degree_ranking", "top_rows"]


def top_rows(scores: np.ndarray, degree: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` rows of largest ``scores`` (ties: larger ``degree``, then smaller id), in
    that order: the first ``k`` of :func:`loaders.memory.cache.row_order`, found by
    :func:`~loaders.memory.cache.rank_rows` (a select, not a sort of every row)."""
    ids = rank_rows(scores, k, degree)
    order = np.lexsort((ids, -np.asarray(degree)[ids].astype(np.int64),
                        -np.asarray(scores)[ids].astype(np.float64)))
    return ids[order]


def degree_ranking(store, ntype: str, k: int, **_options) -> np.ndarray:
    """The ``k`` nodes of ``ntype`` that are most often a neighbour, most first (the loader's
    ``cache="degree"``); sampling options are ignored."""
    deg = degree_counts(store, ntype)
    return top_rows(deg, deg, k)


def presample_ranking(store, ntype: str, k: int, *, fanouts=(15, 10, 5),
                      batch_size: int = 1024, input: str | None = "train", epochs: int = 1,
                      seed: int = 0, **_options) -> np.ndarray:
    """The ``k`` rows of ``ntype`` the loader's presample ranking puts first, hottest first.

    A sampling-only pass over ``epochs`` epochs of the seeds of split ``input`` of ``ntype``
    (None: every node), in batches of ``batch_size`` shuffled as ``NeighborLoader(...,
    shuffle=True, seed=seed)`` orders them, counts each row's reads with ``fanouts``;
    the counts are shrunk towards the mean of rows of the same degree
    (:func:`~loaders.memory.cache.presample_scores`), as the loader's static cache ranks.
    Memory: 24 bytes per node of ``ntype`` beside the sampler's.
    """
    sampler = NeighborSampler(store, list(fanouts))
    seed_type, seeds = resolve_input_nodes(store, (ntype, input))
    num_nodes = {t: store.num_nodes(t) for t in store.node_types}
    counts = None
    for e in range(max(1, int(epochs))):
        order = epoch_order(seeds.shape[0], batch_size, e, seed)
        c = presample_counts(sampler, (seeds[p] for p in order), seed_type, [ntype],
                             seed=seed, epoch=e, num_nodes=num_nodes)[ntype]
        counts = c if counts is None else counts + c
    deg = degree_counts(store, ntype)
    return top_rows(presample_scores(counts, deg), deg, k)
