"""Link-level batches: :class:`LinkNeighborLoader`, PyG's ``LinkNeighborLoader`` over a store.

A batch is ``batch_size`` positive ``(src, dst)`` pairs of one edge type, plus negatives drawn
by :mod:`loaders.sample.negative` from ``(seed, epoch, batch)``: ``"binary"`` draws
``ceil(amount * batch)`` random pairs labelled 0, ``"triplet"`` draws ``amount`` destinations
per positive. Both endpoints are sampled as seeds through the node loader's sampler, memory
plan, cache and pipeline; the batch carries PyG's link fields (``edge_label_index`` in local
ids, ``edge_label``, ``input_id``; ``src_index``, ``dst_pos_index``, ``dst_neg_index`` for
triplets), numbered as PyG numbers them (the sorted unique endpoints first).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from featurestore import check_ids
from featurestore.format.names import EdgeType
from loaders.errors import LoaderArgumentError, UnsupportedArgumentError
from loaders.loader.core import NeighborLoader
from loaders.sample.exclude import drop_edges, seed_edge_ids
from loaders.sample.negative import (cumulative_weights, degree_weights, negative_key,
                                     uniform_negatives, weighted_negatives)
from loaders.sample.rng import batch_key
from loaders.sample.sampler import SampledSubgraph

__all__ = ["LinkNeighborLoader", "NegativeSampling", "sample_link_batch"]


@dataclass(frozen=True)
class NegativeSampling:
    """PyG's ``NegativeSampling``: ``mode`` ``"binary"`` or ``"triplet"``, ``amount`` negatives
    per positive (an integer for triplets), ``weight`` per node (``None``: uniform;
    ``"degree"``: in-degree ** 0.75 over the edge type)."""

    mode: str
    amount: float = 1.0
    weight: object = None

    @classmethod
    def parse(cls, neg_sampling, ratio) -> NegativeSampling | None:
        """From PyG's arguments: a ``NegativeSampling`` (ours or PyG's), a mode string, a dict,
        or ``neg_sampling_ratio`` alone (binary)."""
        if neg_sampling is None:
            if ratio is None:
                return None
            neg_sampling = cls("binary", ratio)
        elif isinstance(neg_sampling, str):
            neg_sampling = cls(neg_sampling, 1.0 if ratio is None else ratio)
        elif isinstance(neg_sampling, dict):
            neg_sampling = cls(**neg_sampling)
        elif not isinstance(neg_sampling, cls):  # PyG's own object, by its fields
            mode = getattr(getattr(neg_sampling, "mode", None), "value",
                           getattr(neg_sampling, "mode", None))
            neg_sampling = cls(str(mode), getattr(neg_sampling, "amount", 1.0),
                               getattr(neg_sampling, "weight", None))
        neg_sampling._check()
        return neg_sampling

    def _check(self) -> None:
        if self.mode not in ("binary", "triplet"):
            raise LoaderArgumentError(f"Expected neg_sampling mode 'binary' or 'triplet'. Got "
                                      f"{self.mode!r} instead.")
        a = self.amount
        if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)) \
                or not math.isfinite(a) or a <= 0:
            raise LoaderArgumentError(
                f"Expected a negative sampling amount (neg_sampling_ratio) > 0. Got {a!r} "
                f"instead (pass neg_sampling=None for no negatives).")
        if self.mode == "triplet" and a != math.ceil(a):
            raise LoaderArgumentError(f"Expected an integer amount of negatives per positive "
                                      f"for triplet sampling. Got {a!r} instead.")


def _split_pairs(store, name: str, et) -> tuple[EdgeType, np.ndarray, np.ndarray | None]:
    """The pairs (and ``label`` column, if any) of the store's edge split ``name``."""
    from featurestore.errors import UnknownSplitError

    try:
        cols = store.edge_split(name, et)
    except UnknownSplitError as e:
        raise LoaderArgumentError(f"Expected edge_label_index as pairs, or the name of an edge "
                                  f"split of the store ({store.edge_split_names}): {e}") from e
    et = store.edge_split_types(name)[0] if et is None else EdgeType(*et)
    if "dst" not in cols:
        raise LoaderArgumentError(f"Expected an edge split with a 'dst' column for "
                                  f"edge_label_index. Got split {name!r} with columns "
                                  f"{sorted(cols)} (queries without answers).")
    pairs = np.stack([np.asarray(cols["src"], np.int64), np.asarray(cols["dst"], np.int64)])
    return et, pairs, (np.asarray(cols["label"]) if "label" in cols else None)


def _pairs(store, edge_label_index) -> tuple[EdgeType, np.ndarray]:
    """The edge type and the ``(2, E)`` int64 pairs asked for (every edge when ``None``)."""
    if isinstance(edge_label_index, tuple) and len(edge_label_index) == 2 and \
            isinstance(edge_label_index[0], (tuple, list, str)):
        et, pairs = edge_label_index
        et = EdgeType(*et) if not isinstance(et, str) else _etype_named(store, et)
    else:
        if len(store.edge_types) != 1:
            raise LoaderArgumentError(
                f"Expected edge_label_index=(edge_type, pairs) on a store of edge types "
                f"{store.edge_types}. Got pairs without an edge type instead.")
        et, pairs = store.edge_types[0], edge_label_index
    if et not in store.edge_types:
        raise LoaderArgumentError(f"Expected an edge type among {store.edge_types}. Got "
                                  f"{tuple(et)} instead.")
    if pairs is None:  # every edge, as PyG's edge_label_index defaults to edge_index
        indptr, indices = store.csc(et)
        dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
        return et, np.stack([np.asarray(indices, dtype=np.int64), dst])
    if hasattr(pairs, "numpy") and not isinstance(pairs, np.ndarray):
        pairs = pairs.detach().cpu().numpy()
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[0] != 2 or pairs.dtype.kind not in "iu":
        raise LoaderArgumentError(f"Expected edge_label_index as integer pairs of shape "
                                  f"(2, E). Got shape {pairs.shape}, dtype {pairs.dtype} "
                                  f"instead.")
    return et, pairs


def _etype_named(store, rel: str) -> EdgeType:
    hits = [et for et in store.edge_types if et.rel == rel]
    if len(hits) != 1:
        raise LoaderArgumentError(f"Expected an edge type (src, rel, dst) among "
                                  f"{store.edge_types}. Got {rel!r} instead.")
    return hits[0]


class LinkNeighborLoader(NeighborLoader):
    """PyG's ``LinkNeighborLoader`` over a store: batches of seed edges with negatives.

    Parameters
    ----------
    store
        A store (or a view of one).
    num_neighbors
        Fanouts per layer (or per edge type), as :class:`~loaders.NeighborLoader`'s.
    edge_label_index
        The positive pairs: a ``(2, E)`` integer array or tensor of ``(src, dst)`` store ids of
        the only edge type, ``(edge_type, pairs)`` on a typed store, or ``None`` (every edge,
        PyG's default); ``pairs`` ``None`` in the tuple: every edge of that type. The name of
        an edge split of the store (``"train"``, or ``(edge_type, "train")``) takes its
        ``src``/``dst`` columns, and its ``label`` column unless ``edge_label`` is given.
    edge_label
        Labels of the pairs (``(E,)``). With binary negatives, a label set whose smallest
        value is 0 is shifted by one, as PyG shifts it, so that 0 means "negative".
    neg_sampling, neg_sampling_ratio
        ``None`` (no negatives), ``"binary"``/``"triplet"``, a :class:`NegativeSampling` (or
        PyG's), or ``neg_sampling_ratio=r`` alone (binary, ``r`` per positive).
    exclude
        ``None`` (PyG's behaviour: seed edges may be sampled), ``"self"`` (each batch's
        positive edges are removed from its sampled graph) or ``"reverse"`` (their reverses
        too: ``(dst, src)`` in ``reverse_edge_type``, by default the same edge type when both
        ends have one node type, else ``(dst, "rev_" + rel, src)``), as DGL's
        ``exclude="self"``/``"reverse_types"``; see :mod:`loaders.sample.exclude`.
    **kwargs
        Everything :class:`~loaders.NeighborLoader` takes (``batch_size``, ``shuffle``,
        ``memory``, ``device``, ``output="pyg"|"raw"|"dgl"`` ...). ``output="dgl"`` yields DGL's
        ``(input_nodes, pair_graph, neg_pair_graph, blocks)`` (no ``neg_pair_graph`` without
        negatives; triplet negatives as DGL's ``Uniform(k)``: the source repeated).
    """

    def __init__(self, store, num_neighbors, edge_label_index=None, edge_label=None, *,
                 neg_sampling=None, neg_sampling_ratio=None, exclude: str | None = None,
                 reverse_edge_type=None, **kwargs):
        if kwargs.get("disjoint", False) is not False:
            raise UnsupportedArgumentError(
                f"Expected disjoint=False for link batches (their endpoints share one sampled "
                f"graph). Got disjoint={kwargs['disjoint']!r} instead: per-seed trees are "
                "supported by NeighborLoader (node batches) only.")
        if "input_nodes" in kwargs:
            raise UnsupportedArgumentError("Expected edge_label_index for link batches. Got "
                                           "input_nodes instead (a node-level argument).")
        self._link_args = (edge_label_index, edge_label,
                           NegativeSampling.parse(neg_sampling, neg_sampling_ratio))
        self._exclude_args = (exclude, reverse_edge_type)
        super().__init__(store, num_neighbors, None, **kwargs)
        self._link_args = None  # the caller's pairs are not held past their int32 copy

    def _set_inputs(self, input_nodes) -> None:
        """The seed edges: their type, pairs and labels, and the negative sampler."""
        eli, label, neg = self._link_args
        store = self.store
        if isinstance(eli, str) or (isinstance(eli, tuple) and len(eli) == 2
                                    and isinstance(eli[1], str)):
            name, et0 = (eli, None) if isinstance(eli, str) else (eli[1], eli[0])
            if et0 is not None:
                et0 = EdgeType(*et0) if not isinstance(et0, str) else _etype_named(store, et0)
            et, pairs, split_label = _split_pairs(store, name, et0)
            label = split_label if label is None else label
        else:
            et, pairs = _pairs(store, eli)
        n_src, n_dst = store.num_nodes(et.src), store.num_nodes(et.dst)
        if n_dst == 0 or n_src == 0:
            raise LoaderArgumentError(f"Expected nodes on both ends of {tuple(et)}. Got "
                                      f"{n_src} {et.src!r} and {n_dst} {et.dst!r} nodes.")
        check_ids(pairs[0], n_src, f"edge_label_index sources ({et.src!r})")
        check_ids(pairs[1], n_dst, f"edge_label_index destinations ({et.dst!r})")
        self.edge_type, self.neg_sampling = et, neg
        # held for the loader's life: int32 where the ids fit (80 MB for 10M pairs, not 160),
        # made int64 per batch
        small = max(n_src, n_dst) < 2**31
        self._pairs = np.ascontiguousarray(pairs, dtype=np.int32 if small else np.int64)
        self._label = self._labels(label, pairs.shape[1], neg)
        self._cdf = self._weights(neg, et, n_dst)
        self._exclude = self._exclusions(*self._exclude_args)
        # the node loader's bookkeeping: one input per seed edge
        self.seed_type, self.input_nodes, self._input_id = et.src, self._pairs[0], None

    def _exclusions(self, exclude, reverse) -> tuple:
        """``((edge type, reversed?), ...)`` whose seed pairs leave the sampled graph."""
        if exclude is None:
            return ()
        et = self.edge_type
        if exclude == "self":
            return ((et, False),)
        if exclude != "reverse":
            raise LoaderArgumentError(f"Expected exclude None, 'self' or 'reverse'. Got "
                                      f"{exclude!r} instead.")
        if reverse is None:
            reverse = et if et.src == et.dst else EdgeType(et.dst, "rev_" + et.rel, et.src)
        reverse = EdgeType(*reverse)
        if reverse not in self.store.edge_types or (reverse.src, reverse.dst) != (et.dst, et.src):
            raise LoaderArgumentError(f"Expected a reverse edge type ({et.dst!r}, ..., "
                                      f"{et.src!r}) among {self.store.edge_types}. Got "
                                      f"{tuple(reverse)} instead: pass reverse_edge_type=.")
        return ((et, False), (reverse, True)) if reverse != et else ((et, False), (et, True))

    def _labels(self, label, n: int, neg) -> np.ndarray | None:
        if label is None:
            return None
        if neg is not None and neg.mode == "triplet":
            raise LoaderArgumentError("Expected edge_label=None with triplet negative sampling "
                                      "(PyG's rule). Got labels instead.")
        if hasattr(label, "numpy") and not isinstance(label, np.ndarray):
            label = label.detach().cpu().numpy()
        label = np.asarray(label)
        if label.shape[:1] != (n,):
            raise LoaderArgumentError(f"Expected edge_label with one row per pair ({n}). Got "
                                      f"shape {label.shape} instead.")
        if neg is not None and label.size and label.min() == 0:
            label = label + 1  # PyG: 0 now means "negative"
        return label

    def _weights(self, neg, et: EdgeType, n_dst: int) -> np.ndarray | None:
        if neg is None or neg.weight is None:
            return None
        if isinstance(neg.weight, str):
            if neg.weight != "degree":
                raise LoaderArgumentError(f"Expected neg_sampling weight 'degree' or one "
                                          f"weight per node. Got {neg.weight!r} instead.")
            indptr, _ = self.store.csc(et)
            return cumulative_weights(degree_weights(np.diff(np.asarray(indptr))))
        w = neg.weight
        w = w.detach().cpu().numpy() if hasattr(w, "detach") else np.asarray(w)
        if w.shape != (n_dst,):
            raise LoaderArgumentError(f"Expected one negative sampling weight per {et.dst!r} "
                                      f"node ({n_dst}). Got shape {w.shape} instead.")
        return cumulative_weights(w)

    def sample_batch(self, epoch: int, k: int, pos: np.ndarray) -> SampledSubgraph:
        """Batch ``k`` of ``epoch``: the seed edges at positions ``pos``, their negatives, and
        the sampled computation graph of every endpoint, with the link fields in
        ``subgraph.link``."""
        label = None if self._label is None else self._label[pos]
        return sample_link_batch(self.sampler, self.edge_type,
                                 self._pairs[0][pos].astype(np.int64),
                                 self._pairs[1][pos].astype(np.int64), label,
                                 self.neg_sampling, self._cdf,
                                 (self.store.num_nodes(self.edge_type.src),
                                  self.store.num_nodes(self.edge_type.dst)),
                                 np.asarray(pos, dtype=np.int64), seed=self.seed, epoch=epoch,
                                 batch=k, exclude=self._exclude)

    def batch_seeds(self, pos: np.ndarray) -> np.ndarray:
        """The seed-type nodes a batch samples from (the presample pass ranks rows by them)."""
        if self.edge_type.src == self.edge_type.dst:
            seeds = np.unique(np.concatenate([self._pairs[0][pos], self._pairs[1][pos]]))
        else:
            seeds = np.unique(self._pairs[0][pos])
        return seeds.astype(np.int64)

    def max_batch_seeds(self) -> dict[str, int]:
        """The most seed nodes a batch samples from, per node type: ``B`` positives and
        ``ceil(r * B)`` binary negatives give up to ``2 * (B + ceil(r * B))`` endpoints
        (fewer when they repeat); triplets ``B`` sources and ``B * (1 + amount)``
        destinations."""
        et, b, neg = self.edge_type, self.batch_size, self.neg_sampling
        pairs = b + (math.ceil(b * neg.amount) if neg is not None and neg.mode == "binary"
                     else 0)
        dst = b * (1 + int(neg.amount)) if neg is not None and neg.mode == "triplet" else pairs
        if et.src == et.dst:
            return {et.src: pairs + dst}
        return {et.src: pairs, et.dst: dst}

    def _converter(self, output: str):
        convert = super()._converter("raw" if output == "dgl" else output)
        if output == "dgl":
            from loaders.convert.dgl import require_dgl, to_dgl_link

            require_dgl(self.device)
            return lambda mb: to_dgl_link(convert(mb))
        if output != "pyg":
            return convert
        from loaders.convert.pyg import add_link_fields

        return lambda mb: add_link_fields(convert(mb), mb.subgraph.link, mb.device)


def _draw(key: int, endpoint: int, n: int, num_nodes: int, cdf, same: bool) -> np.ndarray:
    k = negative_key(key, endpoint)
    if cdf is not None and (endpoint == 1 or same):
        return weighted_negatives(k, n, cdf)
    return uniform_negatives(k, n, num_nodes)


def sample_link_batch(sampler, et: EdgeType, src: np.ndarray, dst: np.ndarray, label,
                      neg: NegativeSampling | None, cdf, num_nodes: tuple[int, int],
                      input_id: np.ndarray, *, seed: int, epoch: int, batch: int,
                      exclude: tuple = ()) -> SampledSubgraph:
    """One link batch: the positive pairs ``(src, dst)`` (validated store ids), their
    negatives drawn from ``(seed, epoch, batch)``, the sampled computation graph of every
    endpoint (the sorted unique endpoints first, per type) and the link fields in
    ``SampledSubgraph.link``. ``cdf``: :func:`~loaders.sample.negative.cumulative_weights`
    of the negatives' weight, or ``None`` (uniform). ``exclude``: ``((edge type, reversed?),
    ...)`` whose positive pairs (reversed: ``dst -> src``) are dropped from the sampled graph."""
    num_pos, same = src.shape[0], et.src == et.dst
    pos_src, pos_dst = src, dst
    key = batch_key(seed, epoch, batch)
    if neg is not None and neg.mode == "binary":
        m = math.ceil(num_pos * neg.amount)
        src = np.concatenate([src, _draw(key, 0, m, num_nodes[0], cdf, same)])
        dst = np.concatenate([dst, _draw(key, 1, m, num_nodes[1], cdf, same)])
        base = np.ones(num_pos, np.float32) if label is None else np.asarray(label)
        label = np.concatenate([base, np.zeros((m,) + base.shape[1:], base.dtype)])
    elif neg is not None:
        dst = np.concatenate([dst, _draw(key, 1, num_pos * int(neg.amount), num_nodes[1], cdf,
                                         same)])
    if same:
        seeds, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
        inv_src, inv_dst = inv[:src.shape[0]], inv[src.shape[0]:]
        sub = sampler.sample(seeds, et.src, seed=seed, epoch=epoch, batch=batch)
    else:
        s_seeds, inv_src = np.unique(src, return_inverse=True)
        d_seeds, inv_dst = np.unique(dst, return_inverse=True)
        sub = sampler.sample(s_seeds, et.src, seed=seed, epoch=epoch, batch=batch,
                             more_seeds={et.dst: d_seeds})
    for xet, rev in exclude:
        indptr, indices = sampler.graph.csc[xet]
        a, b = (pos_dst, pos_src) if rev else (pos_src, pos_dst)
        sub = drop_edges(sub, xet, seed_edge_ids(indptr, indices, a, b))
    link = {"edge_type": et, "input_id": input_id}
    if neg is None or neg.mode == "binary":
        link["edge_label_index"] = np.stack([inv_src, inv_dst]).astype(np.int64)
        if label is not None:
            link["edge_label"] = label
    else:
        link["src_index"] = inv_src.astype(np.int64)
        link["dst_pos_index"] = inv_dst[:num_pos].astype(np.int64)
        neg_index = inv_dst[num_pos:].astype(np.int64).reshape(num_pos, -1)
        link["dst_neg_index"] = neg_index[:, 0] if neg_index.shape[1] == 1 else neg_index
    return dataclasses.replace(sub, link=link)
