"""Edge-prediction batches from seed edge ids, as DGL's ``DataLoader`` with
``as_edge_prediction_sampler`` makes them (the DGL face is :mod:`loaders.dgl_link`).

:class:`EdgePredictionLoader` takes seed edges by id (an edge id, ``e_id``, is the edge's
position in the CSC ``indices`` of its edge type: ``store.csc(etype)``), draws negatives as
DGL's samplers do (:class:`EdgeNegatives`: ``"per_source"``, ``k`` destinations per positive
with the source repeated; ``"global"``, ``k * E`` uniform pairs that are not edges), samples
the computation graph of every endpoint through the node loader's sampler, memory plan, cache
and pipeline, and removes the excluded edges (``"self"``, ``"reverse_id"``,
``"reverse_types"``) from it. Seed edges of several types (``{etype: eids}``) are taken in the
dict's order, and a batch may mix them, as DGL's. The link fields (``subgraph.link``) hold per
seed edge type the positive and negative pairs in local ids, the seed ``e_id`` and the pair
graph's edge data (``pairs``), and ``has_neg``; :func:`loaders.convert.dgl.to_dgl_link` makes
DGL's pair graphs and blocks of them.
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


def seed_edges_of(store, seed_edges) -> list[tuple[EdgeType, np.ndarray]]:
    """``[(edge type, validated int64 ids), ...]`` of DGL's ``indices``: ids of the only edge
    type, or ``{etype: ids}`` (in the dict's order, as DGL's loader concatenates them)."""
    if isinstance(seed_edges, Mapping):
        items = [(_etype(store, et), ids) for et, ids in seed_edges.items()]
        if not items or len({et for et, _ in items}) != len(items):
            raise LoaderArgumentError(f"Expected seed edges as {{etype: eids}} with distinct "
                                      f"edge types. Got {list(seed_edges)} instead.")
    else:
        if len(store.edge_types) != 1:
            raise LoaderArgumentError(f"Expected seed edges as {{etype: eids}} on a store of "
                                      f"edge types {store.edge_types}. Got ids without an edge "
                                      f"type instead.")
        items = [(store.edge_types[0], seed_edges)]
    out = []
    for et, ids in items:
        ids = _ids(ids)
        if ids.dtype == np.bool_:
            raise LoaderArgumentError("Expected seed edges as edge ids. Got a boolean mask "
                                      "instead (pass mask.nonzero()).")
        ids = check_ids(ids, store.num_edges(et), f"seed edge ids of {tuple(et)}")
        out.append((et, np.asarray(ids, dtype=np.int64)))
    return out


class EdgePredictionLoader(LinkNeighborLoader):
    """Batches of seed edges given by id, with DGL's negatives and exclusions.

    Parameters
    ----------
    store
        A store (or a view of one).
    seed_edges
        Edge ids (positions in the edge type's CSC ``indices``) of the only edge type, or
        ``{etype: ids}`` (canonical or relation names; a batch may mix edge types, as DGL's).
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
        Names of edge values or features of the seed edge types set on the pair graph's edges.
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
        """The seed edges: types, ids, endpoints; exclusion and the pair graph's edge data."""
        seeds, exclude, rev_eids, rev_etypes, negatives, labels = self._edge_args
        store = self.store
        per = seed_edges_of(store, seeds)
        #: the seed edge types, and per seed position its type's index, id and endpoints
        self.edge_types = [et for et, _ in per]
        self._etype_of = np.concatenate([np.full(len(ids), t, np.int8)
                                         for t, (_, ids) in enumerate(per)])
        self._eids = np.concatenate([ids for _, ids in per])
        ends = [edge_endpoints(*store.csc(et), ids) for et, ids in per]
        self._pairs = np.ascontiguousarray(np.stack([np.concatenate([e[0] for e in ends]),
                                                     np.concatenate([e[1] for e in ends])]))
        self.edge_type, self.neg_sampling = per[0][0], self._link_args[2]
        self._label, self._cdf, self._exclude = None, None, ()
        self.negatives = negatives
        self._rules = {et: self._exclusion_rule(et, exclude, rev_eids, rev_etypes)
                       for et in self.edge_types}
        for et in self.edge_types if labels else ():
            names = set(store.edge_value_names(et)) | set(store.edge_feature_names(et))
            missing = [n for n in labels if n not in names]
            if missing:
                raise LoaderArgumentError(f"Expected prefetch_labels among the edge values and "
                                          f"features of {tuple(et)} ({sorted(names)}). Got "
                                          f"{missing} instead.")
        self.prefetch_labels = labels
        self.seed_type, self.input_nodes, self._input_id = per[0][0].src, self._pairs[0], None
        if 0 < self._eids.shape[0] < self.world_size:
            raise LoaderArgumentError(f"Expected at least world_size={self.world_size} seed "
                                      f"edges. Got {self._eids.shape[0]}.")

    def _exclusion_rule(self, et, exclude, rev_eids, rev_etypes) -> tuple:
        """``(mode, reverse ids or reverse type)`` of seed type ``et``, DGL's arguments
        validated."""
        store = self.store
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

    def excluded(self, et, eids, src, dst) -> dict:
        """``{edge type: ids}`` leaving the sampled graph for seed edges ``eids`` of ``et``."""
        mode, arg = self._rules[et]
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

    def _negatives(self, t: int, et, src, key) -> tuple[np.ndarray, np.ndarray]:
        """The negative pairs of ``src``'s positives of seed type ``et`` (index ``t``)."""
        neg = self.negatives
        if neg is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        key = key if t == 0 else negative_key(key, 16 + t)
        n_src, n_dst = self.store.num_nodes(et.src), self.store.num_nodes(et.dst)
        if neg.kind == "per_source":
            ns = np.repeat(src, neg.k)
            return ns, uniform_negatives(negative_key(key, 1), ns.shape[0], n_dst)
        indptr, indices = self.sampler.graph.csc[et]
        return global_uniform_negatives(
            key, src.shape[0] * neg.k, n_src, n_dst, indptr, indices,
            exclude_self_loops=neg.exclude_self_loops and et.src == et.dst, replace=neg.replace)

    def sample_batch(self, epoch: int, k: int, pos: np.ndarray) -> SampledSubgraph:
        """Batch ``k`` of ``epoch``: the seed edges at positions ``pos``, negatives drawn from
        ``(seed, epoch, k)``, and the computation graph of every endpoint."""
        key = batch_key(self.seed, epoch, k)
        types = self._etype_of[pos]
        parts, drop = {}, {}
        for t, et in enumerate(self.edge_types):
            at = pos[types == t]
            if at.shape[0] == 0:
                continue
            eids, src, dst = self._eids[at], self._pairs[0][at], self._pairs[1][at]
            parts[et] = (src, dst, *self._negatives(t, et, src, key), eids,
                         {name: self._edge_rows(et, name, eids) for name in self.prefetch_labels})
            for xet, ids in self.excluded(et, eids, src, dst).items():
                drop[xet] = np.union1d(drop[xet], ids) if xet in drop else ids
        return sample_edge_batch(self.sampler, parts, np.asarray(pos, np.int64), drop,
                                 seed=self.seed, epoch=epoch, batch=k,
                                 has_neg=self.negatives is not None)

    def batch_seeds(self, pos: np.ndarray) -> np.ndarray:
        """The seed-type endpoints of a batch (the presample pass ranks rows by them)."""
        et = self._etype_of[pos]
        src_ok = np.array([t.src == self.seed_type for t in self.edge_types])[et]
        dst_ok = np.array([t.dst == self.seed_type for t in self.edge_types])[et]
        return np.unique(np.concatenate([self._pairs[0][pos][src_ok],
                                         self._pairs[1][pos][dst_ok]]))

    def max_batch_seeds(self) -> dict[str, int]:
        """The most seed nodes a batch has, per node type: both endpoints of ``B`` positives
        and ``k * B`` negatives, of any seed edge type."""
        k = 0 if self.negatives is None else int(self.negatives.k)
        types = {t for et in self.edge_types for t in (et.src, et.dst)}
        return {t: 2 * self.batch_size * (1 + k) for t in types}

    def _edge_rows(self, et, name: str, eids: np.ndarray) -> np.ndarray:
        store = self.store
        if name in store.edge_value_names(et):
            return np.asarray(store.edge_values(et, name))[eids]
        return store.edge_features(et, name).gather(eids)


def sample_edge_batch(sampler, parts: dict, input_id: np.ndarray, drop: dict, *, seed: int,
                      epoch: int, batch: int, has_neg: bool) -> SampledSubgraph:
    """One edge-prediction batch: ``parts`` is ``{edge type: (src, dst, neg_src, neg_dst,
    e_id, edata)}`` in store ids. Samples the computation graph of every endpoint (per node
    type the sorted unique endpoints first), drops the edges ``drop`` (``{edge type: ids}``),
    and sets ``subgraph.link``: ``input_id``, ``has_neg`` and ``pairs``, ``{edge type:
    (positives (2, n), negatives (2, m), e_id, edata)}`` in local ids."""
    ends: dict[str, list] = {}
    for et, (src, dst, ns, nd, _, _) in parts.items():
        ends.setdefault(et.src, []).extend([src, ns])
        ends.setdefault(et.dst, []).extend([dst, nd])
    seeds = {t: np.unique(np.concatenate(v)) for t, v in ends.items()}
    first = next(iter(parts)).src
    sub = sampler.sample(seeds[first], first, seed=seed, epoch=epoch, batch=batch,
                         more_seeds={t: v for t, v in seeds.items() if t != first} or None)
    for xet, ids in drop.items():
        sub = drop_edges(sub, xet, ids)
    pairs = {}
    for et, (src, dst, ns, nd, eids, edata) in parts.items():
        ls = np.searchsorted(seeds[et.src], np.concatenate([src, ns]))
        ld = np.searchsorted(seeds[et.dst], np.concatenate([dst, nd]))
        n = src.shape[0]
        pairs[et] = (np.stack([ls[:n], ld[:n]]), np.stack([ls[n:], ld[n:]]), eids, edata)
    link = {"edge_type": next(iter(parts)), "input_id": input_id, "has_neg": has_neg,
            "pairs": pairs}
    return dataclasses.replace(sub, link=link)
