"""DGL's negative samplers (``dgl.dataloading.negative_sampler``) by their names, for
:func:`loaders.dgl.as_edge_prediction_sampler` (``loaders.dgl.negative_sampler.Uniform(k)``).

* :class:`PerSourceUniform` (alias :data:`Uniform`): ``k`` negatives per positive edge
  ``(u, v)``: ``(u, v')`` with ``v'`` uniform over the destination type, the source repeated
  (``repeat(src, k)``), as DGL 2.x.
* :class:`GlobalUniform`: ``k * E`` uniform ``(u', v')`` pairs that are not edges, without
  self-loops (``exclude_self_loops``) and repeats (``replace=False``); possibly fewer on a
  dense graph, as DGL's.

Draws are the numba kernels of :mod:`loaders.sample.negative`, a pure function of ``(seed,
epoch, batch)``. DGL's own sampler objects are read by their type and fields
(:func:`as_negatives`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from loaders.errors import UnsupportedArgumentError
from loaders.loader.edge_pred import EdgeNegatives, seed_edges_of
from loaders.sample.exclude import edge_endpoints
from loaders.sample.negative import global_uniform_negatives, negative_key, uniform_negatives
from loaders.sample.seeds import as_store

__all__ = ["PerSourceUniform", "Uniform", "GlobalUniform", "as_negatives"]


@dataclass(frozen=True)
class PerSourceUniform:
    """DGL's ``PerSourceUniform(k)``: ``k`` uniform destinations per positive edge, source
    kept."""

    k: int

    def __post_init__(self):
        EdgeNegatives("per_source", self.k)

    def __call__(self, g, eids):
        """DGL's call: ``(src, dst)`` negatives of the edges ``eids`` of store ``g`` (a dict
        per edge type for ``{etype: eids}``), drawn from torch's generator."""
        return _call(self, g, eids)


#: DGL's alias of :class:`PerSourceUniform`
Uniform = PerSourceUniform


@dataclass(frozen=True)
class GlobalUniform:
    """DGL's ``GlobalUniform(k, exclude_self_loops=True, replace=False)``: ``k * E`` uniform
    pairs with no edge between them."""

    k: int
    exclude_self_loops: bool = True
    replace: bool = False

    def __post_init__(self):
        EdgeNegatives("global", self.k)

    def __call__(self, g, eids):
        """DGL's call: up to ``k * len(eids)`` non-edge pairs of the edge type of ``eids`` (a
        dict per edge type for ``{etype: eids}``), drawn from torch's generator."""
        return _call(self, g, eids)


def _call(sampler, g, eids):
    """What DGL's negative samplers return for ``sampler(g, eids)``."""
    store = as_store(g)
    neg = as_negatives(sampler)
    out = {}
    for et, ids in seed_edges_of(store, eids):
        key = int(torch.randint(1 << 62, ()))
        indptr, indices = store.csc(et)
        if neg.kind == "per_source":
            s = np.repeat(edge_endpoints(indptr, indices, ids)[0], neg.k)
            d = uniform_negatives(negative_key(key, 1), s.shape[0], store.num_nodes(et.dst))
        else:
            s, d = global_uniform_negatives(
                key, ids.shape[0] * neg.k, store.num_nodes(et.src), store.num_nodes(et.dst),
                indptr, indices, exclude_self_loops=neg.exclude_self_loops and et.src == et.dst,
                replace=neg.replace)
        out[tuple(et)] = (torch.from_numpy(s), torch.from_numpy(d))
    return out if isinstance(eids, Mapping) else next(iter(out.values()))


def as_negatives(sampler) -> EdgeNegatives | None:
    """An :class:`~loaders.loader.edge_pred.EdgeNegatives` of ours or of DGL's negative
    sampler objects (by type name and fields); ``None`` for ``None``; anything else (a
    custom callable) is refused by name."""
    if sampler is None:
        return None
    name = type(sampler).__name__
    if isinstance(sampler, PerSourceUniform) or name in ("PerSourceUniform", "Uniform"):
        return EdgeNegatives("per_source", getattr(sampler, "k", None))
    if isinstance(sampler, GlobalUniform) or name == "GlobalUniform":
        return EdgeNegatives("global", getattr(sampler, "k", None),
                             bool(getattr(sampler, "exclude_self_loops", True)),
                             bool(getattr(sampler, "replace", False)))
    raise UnsupportedArgumentError(
        f"Expected negative_sampler None, Uniform(k), PerSourceUniform(k) or GlobalUniform(k) "
        f"(loaders.dgl.negative_sampler or dgl.dataloading.negative_sampler). Got "
        f"{type(sampler).__module__}.{name} instead: custom negative samplers are not run "
        f"by this loader.")
