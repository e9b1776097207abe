"""Edge-prediction batches from seed edge ids, as DGL's ``DataLoader`` with
``as_edge_prediction_sampler`` makes them (the DGL face is :mod:`loaders.dgl_link`).

:class:`EdgePredictionLoader` takes seed edges by id (an edge id, ``e_id``, is the edge's
position in the CSC ``indices`` of its edge type: ``store.csc(etype)``), draws negatives as
DGL's samplers do (:class:`EdgeNegatives`: ``"per_source"``, ``k`` destinations per positive
with the source repeated; ``"global"``, ``k * E`` uniform pairs that are not edges), samples
the computation graph of every endpoint through the node loader's sampler, memory plan, cache
and pipeline, and removes the excluded edges (``"self"``, ``"reverse_id"``,
``"reverse_types"``) from it. The link fields (``subgraph.link``) hold the positives and then
the negatives in local ids (``edge_label_index``), the seed ``e_id`` and ``has_neg``;
:func:`loaders.convert.dgl.to_dgl_link` makes DGL's pair graphs and blocks of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from featurestore import check_ids
from featurestore.format.names import EdgeType
from loaders.errors import LoaderArgumentError, UnsupportedArgumentError
from loaders.loader.link import LinkNeighborLoader, NegativeSampling
from loaders.sample.exclude import (check_reverse_eids, drop_edges, edge_endpoints,
                                    exclude_reverse_id, seed_edge_ids)
from loaders.sample.negative import global_uniform_negatives, negative_key, uniform_negatives
from loaders.sample.rng import batch_key
from loaders.sample.sampler import SampledSubgraph

__all__ = ["EdgeNegatives", "EdgePredictionLoader", "sample_edge_batch", "EXCLUDE_MODES"]

#: DGL's ``exclude=`` modes served
EXCLUDE_MODES = (None, "self", "reverse_id", "reverse_types")


@dataclass(frozen=True)
class EdgeNegatives:
    """How negatives are drawn: ``kind`` ``"per_source"`` (DGL's ``Uniform``/
    ``PerSourceUniform``) or ``"global"`` (``GlobalUniform``), ``k`` per positive edge."""

    kind: str
    k: int
    exclude_self_loops: bool = True
    replace: bool = False

    def __post_init__(self):
        if self.kind not in ("per_source", "global"):
            raise LoaderArgumentError(f"Expected a negative sampler kind 'per_source' or "
                                      f"'global'. Got {self.kind!r} instead.")
        k = self.k
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise LoaderArgumentError(f"Expected k >= 1 negatives per positive edge (an "
                                      f"integer). Got {k!r} instead.")


def _etype(store, et) -> EdgeType:
    if isinstance(et, str):
        hits = [t for t in store.edge_types if t.rel == et]
        if len(hits) == 1:
            return hits[0]
    elif isinstance(et, (tuple, list)) and len(et) == 3 and EdgeType(*et) in store.edge_types:
        return EdgeType(*et)
    raise LoaderArgumentError(f"Expected an edge type among {store.edge_types} (or its "
                              f"relation name). Got {et!r} instead.")


def _ids(v) -> np.ndarray:
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    return np.asarray(v)


def seed_edges_of(store, seed_edges) -> tuple[EdgeType, np.ndarray]:
    """The edge type and validated int64 ids of DGL's ``indices`` (ids of the only edge type,
    or ``{etype: ids}`` with one edge type)."""
    if isinstance(seed_edges, Mapping):
        if len(seed_edges) != 1:
            raise UnsupportedArgumentError(
                f"Expected seed edges of one edge type ({{etype: eids}}). Got "
                f"{len(seed_edges)} edge types ({list(seed_edges)}) instead: build one "
                f"loader per edge type.")
        (et, ids), = seed_edges.items()
        et = _etype(store, et)
    else:
        if len(store.edge_types) != 1:
            raise LoaderArgumentError(f"Expected seed edges as {{etype: eids}} on a store of "
                                      f"edge types {store.edge_types}. Got ids without an edge "
                                      f"type instead.")
        et, ids = store.edge_types[0], seed_edges
    ids = _ids(ids)
    if ids.dtype == np.bool_:
        raise LoaderArgumentError("Expected seed edges as edge ids. Got a boolean mask instead "
                                  "(pass mask.nonzero()).")
    ids = check_ids(ids, store.num_edges(et), f"seed edge ids of {tuple(et)}")
    return et, np.asarray(ids, dtype=np.int64)


class EdgePredictionLoader(LinkNeighborLoader):
    """Batches of seed edges given by id, with DGL's negatives and exclusions.

    Parameters
    ----------
    store
        A store (or a view of one).
    seed_edges
        Edge ids (positions in the edge type's CSC ``indices``) of the only edge type, or
        ``{etype: ids}`` with one edge type (canonical or relation name).
    num_neighbors
        Fanouts, or a ``dgl.dataloading.NeighborSampler`` (read as the node loader reads it).
    exclude, reverse_eids, reverse_etypes
        DGL's: ``None``; ``"self"`` (the batch's seed edges); ``"reverse_id"`` (those and
        ``reverse_eids[eid]``; an array over the edge type's ids, or ``{etype: array}``);
        ``"reverse_types"`` (those and, in ``reverse_etypes[etype]``, the edges of the
        reversed endpoints: every ``dst -> src`` edge, as the reverse type's ids differ).
    negatives
        An :class:`EdgeNegatives`, or ``None``.
    prefetch_labels
        Names of edge values or features of the edge type set on the pair graph's edges.
    **kwargs
        What :class:`~loaders.NeighborLoader` takes (``batch_size``, ``shuffle``, ``device``,
        ``output`` ...).
    """

    def __init__(self, store, seed_edges, num_neighbors, *, exclude=None, reverse_eids=None,
                 reverse_etypes=None, negatives: EdgeNegatives | None = None,
                 prefetch_labels=None, **kwargs):
        if exclude not in EXCLUDE_MODES:
            raise UnsupportedArgumentError(
                f"Expected exclude in {EXCLUDE_MODES}. Got {exclude!r} instead (a callable or "
                f"a fixed set of edge ids is not supported).")
        self._edge_args = (seed_edges, exclude, reverse_eids, reverse_etypes, negatives,
                           tuple(prefetch_labels or ()))
        neg = None if negatives is None else NegativeSampling(
            "triplet" if negatives.kind == "per_source" else "binary", int(negatives.k))
        super().__init__(store, num_neighbors, neg_sampling=neg, **kwargs)

    def _set_inputs(self, input_nodes) -> None:
        """The seed edges: type, ids, endpoints; exclusion and the pair graph's edge data."""
        seeds, exclude, rev_eids, rev_etypes, negatives, labels = self._edge_args
        store = self.store
        et, eids = seed_edges_of(store, seeds)
        indptr, indices = store.csc(et)
        src, dst = edge_endpoints(indptr, indices, eids)
        self.edge_type, self.neg_sampling, self._eids = et, self._link_args[2], eids
        self._pairs = np.ascontiguousarray(np.stack([src, dst]))
        self._label, self._cdf, self._exclude = None, None, ()
        self.negatives = negatives
        self._rule = self._exclusion_rule(exclude, rev_eids, rev_etypes)
        names = (set(store.edge_value_names(et)) | set(store.edge_feature_names(et))
                 if labels else set())
        missing = [n for n in labels if n not in names]
        if missing:
            raise LoaderArgumentError(f"Expected prefetch_labels among the edge values and "
                                      f"features of {tuple(et)} ({sorted(names)}). Got "
                                      f"{missing} instead.")
        self.prefetch_labels = labels
        self.seed_type, self.input_nodes, self._input_id = et.src, self._pairs[0], None
        if 0 < eids.shape[0] < self.world_size:
            raise LoaderArgumentError(f"Expected at least world_size={self.world_size} seed "
                                      f"edges. Got {eids.shape[0]}.")

    def _exclusion_rule(self, exclude, rev_eids, rev_etypes) -> tuple:
        """``(mode, reverse ids or reverse type)`` after validating DGL's arguments."""
        et, store = self.edge_type, self.store
        if exclude == "reverse_id":
            if isinstance(rev_eids, Mapping):
                m = {_etype(store, k): v for k, v in rev_eids.items()}
                if et not in m:
                    raise LoaderArgumentError(f"Expected reverse_eids for {tuple(et)}. Got "
                                              f"them for {[tuple(k) for k in m]} instead.")
                rev_eids = m[et]
            return "reverse_id", check_reverse_eids(rev_eids, store.num_edges(et))
        if exclude == "reverse_types":
            if not isinstance(rev_etypes, Mapping):
                raise LoaderArgumentError(f"Expected reverse_etypes as {{etype: reverse "
                                          f"etype}} with exclude='reverse_types'. Got "
                                          f"{rev_etypes!r} instead.")
            m = {_etype(store, k): _etype(store, v) for k, v in rev_etypes.items()}
            rev = m.get(et)
            if rev is not None and (rev.src, rev.dst) != (et.dst, et.src):
                raise LoaderArgumentError(f"Expected the reverse type of {tuple(et)} to run "
                                          f"from {et.dst!r} to {et.src!r}. Got {tuple(rev)} "
                                          f"instead.")
            return "reverse_types", rev
        return exclude, None

    def excluded(self, eids, src, dst) -> dict:
        """``{edge type: ids}`` leaving the sampled graph of a batch of seed edges."""
        mode, arg = self._rule
        et = self.edge_type
        if mode is None:
            return {}
        if mode == "reverse_id":
            return {et: exclude_reverse_id(eids, arg)}
        out = {et: np.unique(eids)}
        if mode == "reverse_types" and arg is not None:
            indptr, indices = self.sampler.graph.csc[arg]
            rev = seed_edge_ids(indptr, indices, dst, src)
            out[arg] = np.union1d(out[arg], rev) if arg == et else rev
        return out

    def sample_batch(self, epoch: int, k: int, pos: np.ndarray) -> SampledSubgraph:
        """Batch ``k`` of ``epoch``: the seed edges at positions ``pos``, negatives drawn from
        ``(seed, epoch, k)``, and the computation graph of every endpoint."""
        et, neg = self.edge_type, self.negatives
        eids = self._eids[pos]
        src, dst = self._pairs[0][pos], self._pairs[1][pos]
        n_src, n_dst = self.store.num_nodes(et.src), self.store.num_nodes(et.dst)
        key = batch_key(self.seed, epoch, k)
        if neg is None:
            ns = nd = np.zeros(0, np.int64)
        elif neg.kind == "per_source":
            ns = np.repeat(src, neg.k)
            nd = uniform_negatives(negative_key(key, 1), ns.shape[0], n_dst)
        else:
            indptr, indices = self.sampler.graph.csc[et]
            ns, nd = global_uniform_negatives(
                key, src.shape[0] * neg.k, n_src, n_dst, indptr, indices,
                exclude_self_loops=neg.exclude_self_loops and et.src == et.dst,
                replace=neg.replace)
        edata = {name: self._edge_rows(name, eids) for name in self.prefetch_labels}
        return sample_edge_batch(self.sampler, et, (src, dst), (ns, nd), eids,
                                 np.asarray(pos, np.int64), self.excluded(eids, src, dst),
                                 seed=self.seed, epoch=epoch, batch=k,
                                 has_neg=neg is not None, edata=edata)

    def _edge_rows(self, name: str, eids: np.ndarray) -> np.ndarray:
        et, store = self.edge_type, self.store
        if name in store.edge_value_names(et):
            return np.asarray(store.edge_values(et, name))[eids]
        return store.edge_features(et, name).gather(eids)


def sample_edge_batch(sampler, et: EdgeType, pos: tuple, neg: tuple, eids: np.ndarray,
                      input_id: np.ndarray, drop: dict, *, seed: int, epoch: int, batch: int,
                      has_neg: bool, edata: dict | None = None) -> SampledSubgraph:
    """One edge-prediction batch: the computation graph of the endpoints of the positive
    pairs ``pos`` and negative pairs ``neg`` (``(src, dst)`` store ids; the sorted unique
    endpoints first, per type), without the edges ``drop`` (``{edge type: ids}``), with
    ``subgraph.link``: ``edge_type``, ``input_id``, ``e_id`` (the positives' ids),
    ``edge_label_index`` (positives, then negatives, local ids), ``has_neg`` and ``edata``."""
    src, dst = np.concatenate([pos[0], neg[0]]), np.concatenate([pos[1], neg[1]])
    if et.src == et.dst:
        seeds, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
        inv_src, inv_dst = inv[:src.shape[0]], inv[src.shape[0]:]
        sub = sampler.sample(seeds, et.src, seed=seed, epoch=epoch, batch=batch)
    else:
        s_seeds, inv_src = np.unique(src, return_inverse=True)
        d_seeds, inv_dst = np.unique(dst, return_inverse=True)
        sub = sampler.sample(s_seeds, et.src, seed=seed, epoch=epoch, batch=batch,
                             more_seeds={et.dst: d_seeds})
    for xet, ids in drop.items():
        sub = drop_edges(sub, xet, ids)
    link = {"edge_type": et, "input_id": input_id, "e_id": eids, "has_neg": has_neg,
            "edge_label_index": np.stack([inv_src, inv_dst]).astype(np.int64),
            "edata": edata or {}}
    return dataclasses.replace(sub, link=link)
