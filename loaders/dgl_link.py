"""DGL's edge-prediction API over a store: ``as_edge_prediction_sampler`` and the
``DataLoader(graph, seed_edges, sampler)`` call it feeds (re-exported by :mod:`loaders.dgl`).

Iterating yields ``(input_nodes, pair_graph, neg_pair_graph, blocks)`` with a negative
sampler and ``(input_nodes, pair_graph, blocks)`` without, as DGL does; the pair graphs hold
the batch's positive (negative) edges over the compacted node set, which is
``blocks[-1].dstdata`` (same ids, same order). Edge ids (``seed_edges``, ``reverse_eids``,
``pair_graph.edata[dgl.EID]``) are positions in the edge type's CSC ``indices``
(``store.csc(etype)``): DGL's edge ids of ``dgl.graph(("csc", (indptr, indices, [])))``.
DGL's own ``dgl.dataloading.as_edge_prediction_sampler(...)`` result and negative samplers
are read by their type and fields. See :mod:`loaders.loader.edge_pred` for the batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from loaders.dgl_negative import as_negatives
from loaders.errors import UnsupportedArgumentError
from loaders.loader.edge_pred import EXCLUDE_MODES, EdgePredictionLoader
from loaders.sample.exclude import reverse_edge_ids as _reverse_ids
from loaders.sample.seeds import as_store

__all__ = ["EdgePredictionSampler", "as_edge_prediction_sampler", "is_edge_prediction_sampler",
           "edge_prediction_loader", "reverse_edge_ids"]


@dataclass(frozen=True)
class EdgePredictionSampler:
    """What :func:`as_edge_prediction_sampler` returns (DGL's fields)."""

    sampler: object
    exclude: str | None = None
    reverse_eids: object = None
    reverse_etypes: dict | None = None
    negative_sampler: object = None
    prefetch_labels: list = field(default_factory=list)


def as_edge_prediction_sampler(sampler, exclude=None, reverse_eids=None, reverse_etypes=None,
                               negative_sampler=None, prefetch_labels=None):
    """DGL's ``as_edge_prediction_sampler``: wraps a node sampler (a
    ``dgl.dataloading.NeighborSampler`` or its fanouts, input layer first) for
    :func:`loaders.dgl.DataLoader` over seed edge ids.

    ``exclude``: ``None``, ``"self"``, ``"reverse_id"`` (with ``reverse_eids``: the reverse
    edge id of every edge, CSC numbering; :func:`reverse_edge_ids` builds it) or
    ``"reverse_types"`` (with ``reverse_etypes``: ``{etype: reverse etype}``).
    ``negative_sampler``: ``loaders.dgl.negative_sampler.Uniform(k)``, ``PerSourceUniform(k)``,
    ``GlobalUniform(k, ...)`` or DGL's own. ``prefetch_labels``: edge values or features of
    the seed edge type set on ``pair_graph.edata``.
    """
    if exclude not in EXCLUDE_MODES:
        raise UnsupportedArgumentError(
            f"Expected exclude in {EXCLUDE_MODES}. Got {exclude!r} instead (a callable or a "
            f"fixed set of edge ids is not supported).")
    as_negatives(negative_sampler)  # refuse what cannot be served, now
    return EdgePredictionSampler(sampler, exclude, reverse_eids, reverse_etypes,
                                 negative_sampler, list(prefetch_labels or []))


def is_edge_prediction_sampler(obj) -> bool:
    """Whether ``obj`` is ours or DGL's ``EdgePredictionSampler`` (by type name and fields)."""
    return isinstance(obj, EdgePredictionSampler) or (
        type(obj).__name__ == "EdgePredictionSampler"
        and all(hasattr(obj, a) for a in ("sampler", "exclude", "negative_sampler")))


def edge_prediction_loader(graph, seed_edges, sampler, device=None, **kwargs):
    """``DataLoader(graph, seed_edges, edge_sampler, ...)``: an
    :class:`~loaders.loader.edge_pred.EdgePredictionLoader` with DGL's output."""
    return EdgePredictionLoader(
        graph, seed_edges, sampler.sampler, exclude=sampler.exclude,
        reverse_eids=getattr(sampler, "reverse_eids", None),
        reverse_etypes=getattr(sampler, "reverse_etypes", None),
        negatives=as_negatives(sampler.negative_sampler),
        prefetch_labels=getattr(sampler, "prefetch_labels", None), output="dgl",
        device=device, **kwargs)


def reverse_edge_ids(graph, etype=None) -> torch.Tensor:
    """``reverse_eids`` of a symmetric edge type of a store (or view): the id of each edge's
    reverse edge, in CSC numbering (what DGL's ``to_bidirected`` with a reverse mapping
    gives a DGL graph)."""
    indptr, indices = as_store(graph).csc(etype)
    return torch.from_numpy(_reverse_ids(indptr, indices))
