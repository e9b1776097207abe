"""Uniform neighbour sampling over a store's CSC topology, with numba kernels.

:class:`NeighborSampler` turns a batch of seed nodes into a :class:`SampledSubgraph`: the
sampled nodes per type (seeds first, then hop by hop), and per edge type the sampled edges as
local ``(row, col)`` indices (source, destination) plus their positions in the store's CSC
``indices`` array. Randomness is a pure function of ``(seed, epoch, batch index)`` (see
:mod:`loaders.sample.rng`), so a batch is the same whatever the number of threads.

:mod:`loaders.sample.reference` holds a plain Python/NumPy sampler that yields the same batches.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from collections.abc import Mapping, Sequence

import numba
import numpy as np

from featurestore.errors import UnknownEdgeTypeError, UnknownNodeTypeError
from featurestore.format.names import EdgeType
from featurestore.gather import check_ids

from loaders.sample import kernels as K
from loaders.sample.labor import labor_counts, labor_fill
from loaders.sample.packed import kernel_ids, pack_ids
from loaders.errors import LoaderArgumentError
from loaders.sample.rng import batch_key, layer_key

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["SampledSubgraph", "MiniBatch", "Fanouts", "CSCGraph", "NeighborSampler"]


@dataclass(frozen=True)
class SampledSubgraph:
    """One sampled batch, in store ids and local indices.

    Attributes
    ----------
    seed_type
        Node type of the seeds.
    node
        Global store ids per node type, ordered by hop; for ``seed_type`` the seeds come first,
        in order. Every node type of the graph has an entry (possibly empty).
    row, col
        Per edge type, the local index into ``node[et.src]`` of each sampled edge's source
        and into ``node[et.dst]`` of its destination (PyG's ``edge_index[0]``, ``[1]``).
    edge
        Per edge type, the position of each sampled edge in the store's CSC ``indices``.
    num_sampled_nodes
        Per node type, nodes added per hop (hop 0 = seeds; 0 for other types).
    num_sampled_edges
        Per edge type, edges sampled per layer ``1..L``; edges are ordered by layer.
    batch_size
        Number of seeds.
    input_id
        Positions of the seeds in the loader's input nodes.
    link
        ``None``, or a link batch's fields: ``edge_type``, ``input_id`` (positions of the seed
        edges), ``edge_label_index`` and ``edge_label``, or ``src_index``, ``dst_pos_index`` and
        ``dst_neg_index`` (triplets), all in local ids of ``node``.
    batch
        ``None``, or with ``disjoint=True`` (one tree per seed), per node type the index in
        the batch of the seed whose tree each node of ``node`` belongs to (PyG's ``batch``);
        ``node`` then repeats a node once per tree holding it.
    """

    seed_type: str
    node: dict[str, np.ndarray]
    row: dict[EdgeType, np.ndarray]
    col: dict[EdgeType, np.ndarray]
    edge: dict[EdgeType, np.ndarray]
    num_sampled_nodes: dict[str, list[int]]
    num_sampled_edges: dict[EdgeType, list[int]]
    batch_size: int
    input_id: np.ndarray
    #: a link batch's fields (``edge_label_index``... in local ids; :mod:`loaders.loader.link`)
    link: dict | None = None
    #: ``disjoint=True``: per node type, the seed index of each node's tree
    batch: dict[str, np.ndarray] | None = None

    @property
    def seeds(self) -> np.ndarray:
        """Store ids of the seeds (the first ``batch_size`` nodes of ``seed_type``)."""
        return self.node[self.seed_type][: self.batch_size]

    @property
    def num_edges(self) -> int:
        """Sampled edges of every edge type."""
        return int(sum(r.shape[0] for r in self.row.values()))


@dataclass
class MiniBatch:
    """What ``NeighborLoader(output="raw")`` yields; the PyG and DGL adapters convert it.

    ``x`` holds the features (store feature ``feat`` by default) of ``subgraph.node[ntype]``
    rows for each node type that has them, ``y`` the labels of the seeds, and ``y_all`` the
    labels (int64) of every sampled node of each node type with a ``label`` value array, in
    ``subgraph.node[ntype]`` order, all on ``device``. The seeds come first, so ``y`` is
    ``y_all[subgraph.seed_type][:batch_size]`` (a view of it). ``attrs`` holds, per node type,
    the values and split masks the loader carries (``attrs=``), in the same order;
    ``edge_attrs`` per edge type the edge features and values (``edge_attrs=``).
    """

    subgraph: SampledSubgraph
    x: dict[str, torch.Tensor]
    y: torch.Tensor | None
    device: torch.device
    y_all: dict[str, torch.Tensor] = field(default_factory=dict)
    attrs: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    #: per edge type, the edge features and values of ``subgraph.edge[et]`` (``edge_attrs=``)
    edge_attrs: dict[EdgeType, dict[str, torch.Tensor]] = field(default_factory=dict)


def _as_etype(et) -> EdgeType:
    return et if isinstance(et, EdgeType) else EdgeType(*et)


@dataclass(frozen=True)
class Fanouts:
    """Per-layer fanouts of every edge type (``-1`` = all neighbours, ``0`` = not sampled)."""

    per_etype: Mapping[EdgeType, tuple[int, ...]]
    num_layers: int

    @classmethod
    def parse(cls, num_neighbors, edge_types: Sequence[EdgeType]) -> Fanouts:
        """From one list for all edge types, or a dict keyed by edge type or relation name.

        Edge types missing from a dict are not sampled (fanout 0).
        """
        edge_types = [_as_etype(e) for e in edge_types]
        if isinstance(num_neighbors, Fanouts):
            return num_neighbors
        if isinstance(num_neighbors, Mapping):
            per = {}
            for k, v in num_neighbors.items():
                if isinstance(k, str):
                    match = [e for e in edge_types if e.rel == k]
                else:
                    match = [e for e in edge_types if tuple(e) == tuple(k)]
                if len(match) != 1:
                    raise UnknownEdgeTypeError(f"Expected num_neighbors keys among the edge types "
                                   f"{[tuple(e) for e in edge_types]} (or their relation names). "
                                   f"Got {k!r} instead.")
                per[match[0]] = _check_list(v)
            lengths = {len(v) for v in per.values()}
            if len(lengths) > 1:
                raise LoaderArgumentError(f"Expected the same number of layers for every edge "
                                          f"type. Got {sorted(lengths)} instead.")
            n = lengths.pop() if lengths else 0
            per = {e: per.get(e, (0,) * n) for e in edge_types}
        else:
            lst = _check_list(num_neighbors)
            n = len(lst)
            per = {e: lst for e in edge_types}
        if n == 0:
            raise LoaderArgumentError("Expected at least one layer of fanouts. Got none.")
        return cls(per, n)


def _check_list(v) -> tuple[int, ...]:
    try:  # integers only: 2.7, True or "3" are refused, not truncated or parsed
        if not isinstance(v, (str, bytes)):
            v = list(v)  # a generator is read once
        if isinstance(v, (str, bytes)) or any(isinstance(x, (bool, np.bool_)) for x in v):
            raise TypeError(v)
        out = tuple(operator.index(x) for x in v)
    except TypeError as e:
        raise LoaderArgumentError(f"Expected a list of integer fanouts. Got {v!r} instead.") from e
    if any(x < -1 for x in out):
        raise LoaderArgumentError(f"Expected fanouts >= -1 (-1 = all neighbours). Got {list(out)} "
                                  "instead.")
    return out


@dataclass(frozen=True)
class CSCGraph:
    """The topology a sampler needs: node counts and per-edge-type CSC arrays.

    Built from arrays, each edge type's CSC is validated here (``indptr[0] == 0``, never
    decreasing, ``indptr[-1] == len(indices)``, source ids in range; a bad one raises
    :class:`featurestore.errors.CorruptStoreError`) and converted to native byte order, so the
    sampling kernels never read out of bounds. :meth:`from_store` takes what
    :meth:`featurestore.Store.csc` returns, which the store has validated already.
    """

    num_nodes: Mapping[str, int]
    csc: Mapping[EdgeType, tuple[np.ndarray, np.ndarray]] = field(repr=False)
    validated: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        if self.validated:
            return
        from featurestore.store import check_csc, native  # the checks the store runs

        checked = {}
        for et, (indptr, indices) in self.csc.items():
            et = _as_etype(et)
            for t in (et.src, et.dst):
                if t not in self.num_nodes:
                    raise UnknownNodeTypeError(f"Expected node type {t!r} of edge type "
                                               f"{tuple(et)} among {list(self.num_nodes)}. "
                                               "Got none.")
            indptr, indices = np.asarray(indptr), np.asarray(indices)
            if indptr.shape != (self.num_nodes[et.dst] + 1,):
                from featurestore.errors import CorruptStoreError
                raise CorruptStoreError(f"Expected indptr of length "
                                        f"{self.num_nodes[et.dst] + 1} for edge type "
                                        f"{tuple(et)}. Got shape {indptr.shape} instead.")
            check_csc(indptr, indices, self.num_nodes[et.src], f"edge type {tuple(et)}")
            checked[et] = (native(indptr), native(indices))
        object.__setattr__(self, "csc", checked)
        object.__setattr__(self, "validated", True)

    @property
    def node_types(self) -> list[str]:
        """The node types, in the graph's order."""
        return list(self.num_nodes)

    @property
    def edge_types(self) -> list[EdgeType]:
        """The edge types, in the graph's order."""
        return list(self.csc)

    @classmethod
    def from_store(cls, store, topology: str = "mmap") -> CSCGraph:
        """The topology of a :class:`featurestore.Store`.

        ``topology="mmap"``: memory-mapped, zero-copy when local (the page cache holds it);
        ``"memory"``: copied into this process, so that a tight memory budget spent on
        feature pages cannot evict it (each evicted page would cost a synchronous read per
        sampled neighbour); ``"packed"``: copied with the neighbour ids bit-packed
        (:class:`~loaders.sample.packed.PackedIds`: ``ceil(log2 N)`` bits each, where that is
        fewer than the stored dtype's).
        """
        if topology not in ("mmap", "memory", "packed"):
            raise LoaderArgumentError(f"Expected topology 'mmap', 'memory' or 'packed'. Got "
                                      f"{topology!r} instead.")
        nn = {t: store.num_nodes(t) for t in store.node_types}
        csc = {et: store.csc(et) for et in store.edge_types}
        if topology == "memory":
            csc = {et: (np.array(p), np.array(i)) for et, (p, i) in csc.items()}
        elif topology == "packed":
            csc = {et: (np.array(p), pack_ids(i, nn[et.src])) for et, (p, i) in csc.items()}
        from featurestore.store import Store

        # featurestore's Store.csc validates each edge type; anything else is checked here
        return cls(nn, csc, validated=isinstance(store, Store))

    @classmethod
    def of(cls, graph, topology: str = "mmap") -> CSCGraph:
        """``graph`` itself when a :class:`CSCGraph`, else the topology of the store ``graph``."""
        return graph if isinstance(graph, CSCGraph) else cls.from_store(graph, topology)


#: node types up to this many bytes of int32 map ids to local ids with a dense array
#: (one memory access per sampled edge); larger ones use a hash table sized to the batch.
DIRECT_MAP_BYTES = 64 << 20


class _Table:
    """Per node type: the growing node list and the global id -> local id map (``hashed``:
    always a hash table, for keys beyond the node ids: disjoint mode's ``(seed, node)``)."""

    def __init__(self, num_nodes: int, cap: int = 1 << 12, hashed: bool = False):
        self.nodes = np.empty(cap, np.int64)
        self.count = 0
        self.direct = not hashed and num_nodes * 4 <= DIRECT_MAP_BYTES
        if self.direct:
            self.local_of = np.full(num_nodes, -1, np.int32)
        else:
            self.slots = np.empty(cap, np.int64)
            self.keys = np.full(2 * cap, -1, np.int64)
            self.vals = np.empty(2 * cap, np.int64)

    def reserve(self, need: int) -> None:
        if need > self.nodes.shape[0]:
            cap = 1 << int(need - 1).bit_length()
            for name in ("nodes",) if self.direct else ("nodes", "slots"):
                new = np.empty(cap, np.int64)
                new[: self.count] = getattr(self, name)[: self.count]
                setattr(self, name, new)
        if not self.direct and 2 * need > self.keys.shape[0]:
            cap = 1 << int(2 * need - 1).bit_length()
            self.keys = np.full(cap, -1, np.int64)
            self.vals = np.empty(cap, np.int64)
            K.rehash(self.nodes, self.count, self.keys, self.vals, self.slots)

    def insert_seeds(self, seeds: np.ndarray) -> None:
        self.reserve(seeds.shape[0])
        if self.direct:
            self.count = K.seeds_direct(seeds, self.local_of, self.nodes)
        else:
            self.count = K.insert_seeds(seeds, self.keys, self.vals, self.nodes, self.slots)

    def dedup(self, src: np.ndarray) -> np.ndarray:
        """Local ids of ``src``, appending the unseen ones."""
        self.reserve(self.count + src.shape[0])
        local = np.empty(src.shape[0], np.int64)
        if self.direct:
            self.count = K.dedup_direct(src, self.local_of, self.nodes, self.count, local)
        else:
            self.count = K.dedup(src, self.keys, self.vals, self.nodes, self.slots, self.count,
                                 local)
        return local

    def reset(self) -> None:
        if self.direct:
            K.clear_direct(self.local_of, self.nodes, self.count)
        else:
            K.clear(self.keys, self.slots, self.count)
        self.count = 0


@contextlib.contextmanager
def numba_threads(n: int | None):
    """Run numba's parallel kernels on ``n`` threads (of this thread), then restore the count.

    numba's thread count is per calling thread; ``None`` or 0 leaves it as it is.
    """
    if not n:
        yield
        return
    before = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


class NeighborSampler:
    """Uniform neighbour sampler over a :class:`CSCGraph` or a store.

    Parameters
    ----------
    graph
        A :class:`featurestore.Store` or a :class:`CSCGraph`.
    num_neighbors
        Fanouts per layer, one list for all edge types or a dict per edge type (or relation
        name); ``-1`` takes all neighbours.
    replace
        Sample with replacement (then each node gets exactly ``fanout`` draws when it has a
        neighbour).
    num_threads
        numba threads for the parallel kernels (default: numba's setting).
    topology
        ``"mmap"`` (default) or ``"memory"``: see :meth:`CSCGraph.from_store`.
    fanout_per
        ``"edge_type"`` (default, as PyG and DGL sample a typed graph): each fanout caps the
        neighbours drawn per node *per edge type*. ``"node"``: it caps them per node over the
        in-edges of all its edge types together, uniformly, as a sampler on the homogenised
        graph draws them (OGB-LSC's ``rgnn.py``, DGL's MAG240M RGAT); the relational view
        (``homogeneous=``) samples so. Edge types into one node type then need the same fanout
        per layer (``0`` leaves one out). A node type with one sampled edge type into it is
        sampled the same way in both modes.
    sampling
        ``"uniform"`` (default: ``k`` neighbours drawn uniformly per node, as PyG and DGL) or
        ``"labor"``: layer-neighbour sampling (LABOR-0, GraphBolt's ``sample_layer_neighbor``,
        :mod:`loaders.sample.labor`): each in-edge kept with the same probability
        ``min(1, k / degree)``, ``k`` per node in expectation, but nodes sharing neighbours
        keep the same ones, so batches hold fewer distinct nodes. A different sampling
        distribution (the kept neighbours of two nodes are correlated); not with
        ``replace=True`` or ``fanout_per="node"``.
    layer_dependency
        With ``sampling="labor"``: one variate per source node for all layers of a batch
        (GraphBolt's ``layer_dependency``), so the layers pick alike too; else one per layer.
    disjoint
        PyG's ``disjoint=True``: every seed gets its own tree. Nodes are deduplicated per
        ``(seed index, node)`` pair, not globally, so ``node`` may repeat a node (once per
        tree holding it), edges never join two trees, and the subgraph's ``batch`` gives each
        node's seed index. Draws stay a function of ``(seed, epoch, batch)`` and the frontier
        position. Not with ``sampling="labor"`` or ``more_seeds`` (link batches).

    Example::

        s = NeighborSampler(store, [15, 10, 5])
        sub = s.sample(seeds, "paper", seed=0, epoch=0, batch=3)
    """

    def __init__(self, graph, num_neighbors, *, replace: bool = False,
                 num_threads: int | None = None, topology: str = "mmap",
                 fanout_per: str = "edge_type", sampling: str = "uniform",
                 layer_dependency: bool = False, disjoint: bool = False):
        if sampling not in ("uniform", "labor"):
            raise LoaderArgumentError(f"Expected sampling 'uniform' or 'labor'. Got "
                                      f"{sampling!r} instead.")
        if sampling == "labor" and replace:
            raise LoaderArgumentError("Expected replace=False with sampling='labor' (each "
                                      "in-edge is kept at most once). Got replace=True.")
        if layer_dependency and sampling != "labor":
            raise LoaderArgumentError("Expected sampling='labor' with layer_dependency=True "
                                      f"(a LABOR option). Got sampling={sampling!r}.")
        if not isinstance(disjoint, (bool, np.bool_)):
            raise LoaderArgumentError(f"Expected disjoint True or False. Got {disjoint!r} "
                                      "instead.")
        if disjoint and sampling == "labor":
            raise LoaderArgumentError("Expected sampling='uniform' with disjoint=True (one "
                                      "tree per seed). Got sampling='labor' instead.")
        self.sampling, self.layer_dependency = sampling, bool(layer_dependency)
        self.disjoint = bool(disjoint)
        self.graph = CSCGraph.of(graph, topology)
        # pickling reopens the topology from the store (never ships memory maps)
        self._source = None if isinstance(graph, CSCGraph) else (graph, topology)
        self.fanouts = Fanouts.parse(num_neighbors, self.graph.edge_types)
        self.fanout_per = fanout_per
        self._groups = union_groups(self.graph, self.fanouts, fanout_per)
        if sampling == "labor" and self._groups:
            raise LoaderArgumentError("Expected fanout_per='edge_type' with sampling='labor'. "
                                      "Got fanout_per='node' over several edge types.")
        self.replace = bool(replace)
        self.num_threads = num_threads
        self._local = threading.local()

    def __getstate__(self) -> dict:
        """Picklable for worker processes (``spawn``): the per-thread tables are dropped, and a
        sampler built from a store carries the store (which reopens itself), not its CSC."""
        state = dict(self.__dict__)
        del state["_local"]
        if self._source is not None:
            del state["graph"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._source is not None:
            self.graph = CSCGraph.of(*self._source)
        self._local = threading.local()

    @property
    def num_layers(self) -> int:
        """Layers of fanouts (hops sampled)."""
        return self.fanouts.num_layers

    def _tables(self) -> dict[str, _Table]:
        t = getattr(self._local, "tables", None)
        if t is None:
            t = self._local.tables = {nt: _Table(n, hashed=self.disjoint)
                                      for nt, n in self.graph.num_nodes.items()}
        return t

    def sample(self, seeds, seed_type: str | None = None, *, seed: int = 0, epoch: int = 0,
               batch: int = 0, input_id=None, more_seeds=None) -> SampledSubgraph:
        """Sample the computation graph of ``seeds`` (store ids of type ``seed_type``).

        ``more_seeds``: ``{node type: unique ids}`` of other types sampled from too (a link
        batch's destinations of another type); they come first among their type's nodes.
        """
        g = self.graph
        if seed_type is None:
            if len(g.node_types) != 1:
                raise LoaderArgumentError(f"Expected a seed_type among {g.node_types}. "
                                          "Got None instead.")
            seed_type = g.node_types[0]
        if seed_type not in g.num_nodes:
            raise UnknownNodeTypeError(f"Expected a seed_type among {g.node_types}. "
                                       f"Got {seed_type!r} instead.")
        if hasattr(seeds, "numpy") and not isinstance(seeds, np.ndarray):  # a CPU tensor
            seeds = seeds.numpy()
        # integer ids only: floats or bools are refused, never truncated into ids
        seeds = check_ids(seeds, g.num_nodes[seed_type], f"seeds of node type {seed_type!r}")
        seeds = np.ascontiguousarray(seeds, dtype=np.int64)
        input_id = (np.arange(seeds.shape[0], dtype=np.int64) if input_id is None
                    else np.asarray(input_id, dtype=np.int64))
        if self.disjoint:
            if more_seeds:
                raise LoaderArgumentError(f"Expected no more_seeds with disjoint=True (trees "
                                          f"grow from one seed type). Got {list(more_seeds)}.")
            widest = max(g.num_nodes.values())
            if seeds.shape[0] * widest >= 2**63:
                raise LoaderArgumentError(f"Expected batch size x nodes per type below 2**63 "
                                          f"with disjoint=True. Got {seeds.shape[0]} x "
                                          f"{widest} instead.")
        more = {}
        for t, ids in (more_seeds or {}).items():
            if t == seed_type or t not in g.num_nodes:
                raise LoaderArgumentError(f"Expected more_seeds of node types other than "
                                          f"{seed_type!r} among {g.node_types}. Got {t!r}.")
            more[t] = np.ascontiguousarray(
                check_ids(ids, g.num_nodes[t], f"seeds of node type {t!r}"), dtype=np.int64)
        with numba_threads(self.num_threads):
            return self._sample(seeds, seed_type, batch_key(seed, epoch, batch), input_id, more)

    def _sample(self, seeds, seed_type, key, input_id, more=None) -> SampledSubgraph:
        g, L = self.graph, self.fanouts.num_layers
        tables = self._tables()
        # disjoint: the tables hold keys seed index * n + node (n: nodes of the type)
        n_of = {t: max(int(n), 1) for t, n in g.num_nodes.items()} if self.disjoint else None
        try:
            if self.disjoint:
                tables[seed_type].insert_seeds(
                    np.arange(seeds.shape[0], dtype=np.int64) * n_of[seed_type] + seeds)
            else:
                tables[seed_type].insert_seeds(seeds)
            for t, ids in (more or {}).items():
                tables[t].insert_seeds(ids)
            hop = {t: [tables[t].count] for t in g.node_types}
            lo = {t: 0 for t in g.node_types}
            parts = {et: ([], [], []) for et in g.edge_types}
            nse = {et: [0] * L for et in g.edge_types}
            for layer in range(L):
                start = {t: tables[t].count for t in g.node_types}
                front = {t: tables[t].nodes[lo[t]:start[t]] for t in g.node_types}
                if self.disjoint:  # (seed index, node id) of each frontier node
                    owner = {t: np.divmod(k, n_of[t]) for t, k in front.items()}
                    front = {t: v[1] for t, v in owner.items()}
                for et, (src, eid, dst) in self._draw_layer(front, layer, key).items():
                    if self.disjoint:
                        K.pair_keys(src, dst, owner[et.dst][0], n_of[et.src])
                    row = tables[et.src].dedup(src)
                    dst += lo[et.dst]
                    nse[et][layer] = src.shape[0]
                    parts[et][0].append(row)
                    parts[et][1].append(dst)
                    parts[et][2].append(eid)
                for t in g.node_types:
                    lo[t] = start[t]
                    hop[t].append(tables[t].count - start[t])
            node = {t: tables[t].nodes[: tables[t].count].copy() for t in g.node_types}
        finally:
            for t in tables.values():
                t.reset()
        batch = None
        if self.disjoint:
            split = {t: np.divmod(k, n_of[t]) for t, k in node.items()}
            batch = {t: v[0] for t, v in split.items()}
            node = {t: v[1] for t, v in split.items()}
        cat = _concat
        row = {et: cat(p[0]) for et, p in parts.items()}
        col = {et: cat(p[1]) for et, p in parts.items()}
        edge = {et: cat(p[2]) for et, p in parts.items()}
        return SampledSubgraph(seed_type, node, row, col, edge, hop, nse,
                               int(seeds.shape[0]), input_id, batch=batch)

    def _draw_layer(self, front, layer: int, key: int) -> dict:
        """Per edge type (in the graph's order): ``(src, eid, dst)`` drawn for the frontiers
        ``front`` (per node type) at ``layer``; ``dst`` indexes the frontier."""
        g, fan = self.graph, self.fanouts.per_etype
        out = {}
        for t, group in self._groups.items():  # "node": one draw over several edge types
            active = [(i, et) for i, et in group if fan[et][layer] != 0]
            if len(active) > 1 and front[t].shape[0]:
                k = np.uint64(layer_key(key, layer, len(g.edge_types) + g.node_types.index(t)))
                out.update(self._draw_union(front[t], active, fan[active[0][1]][layer], k))
        for e_idx, et in enumerate(g.edge_types):  # one edge type at a time
            f = fan[et][layer]
            if et in out or f == 0 or not front[et.dst].shape[0]:
                continue
            indptr, indices = g.csc[et]
            fr = front[et.dst]
            starts, degs = np.empty(fr.shape[0], np.int64), np.empty(fr.shape[0], np.int64)
            if self.sampling == "labor":
                out[et] = self._draw_labor(indptr, indices, fr, f, starts, degs,
                                           layer_key(key, 0 if self.layer_dependency
                                                     else layer, e_idx))
                continue
            offsets = K.sample_counts(indptr, fr, f, self.replace, starts, degs)
            m = int(offsets[-1])
            src, eid, dst = (np.empty(m, np.int64) for _ in range(3))
            K.sample_fill(starts, degs, indices, f, self.replace,
                          np.uint64(layer_key(key, layer, e_idx)), offsets, src, eid, dst)
            out[et] = (src, eid, dst)
        return {et: out[et] for et in g.edge_types if et in out}

    @staticmethod
    def _draw_labor(indptr, indices, fr, fanout, starts, degs, key) -> tuple:
        """``(src, eid, dst)`` of LABOR-0 for the frontier ``fr`` (:mod:`~loaders.sample.labor`)."""
        par = K._parallel_ok()
        offsets = labor_counts(indptr, indices, fr, fanout, key, starts, degs, par)
        m = int(offsets[-1])
        src, eid, dst = (np.empty(m, np.int64) for _ in range(3))
        labor_fill(starts, degs, indices, fanout, key, offsets, src, eid, dst, par)
        return src, eid, dst

    def _draw_union(self, fr, group, fanout: int, key) -> dict:
        """``(src, eid, dst)`` per edge type of ``group`` (edge types into one node type),
        drawn ``fanout`` per node over their in-edges together."""
        n = fr.shape[0]
        starts = np.empty((len(group), n), np.int64)
        degs = np.empty((len(group), n), np.int64)
        for r, (_, et) in enumerate(group):
            K.sample_counts(self.graph.csc[et][0], fr, -1, False, starts[r], degs[r])
        offsets, rel, pos = K.union_draw(degs, fanout, self.replace, key)
        counts = np.bincount(rel, minlength=len(group))
        out = {}
        for r, (_, et) in enumerate(group):
            src, eid, dst = (np.empty(int(counts[r]), np.int64) for _ in range(3))
            K.union_pick(offsets, rel, pos, r, starts[r], kernel_ids(self.graph.csc[et][1]),
                         src, eid, dst)
            out[et] = (src, eid, dst)
        return out


def union_groups(graph: CSCGraph, fanouts: Fanouts, fanout_per: str) -> dict:
    """For ``fanout_per="node"``: per node type with several edge types into it, the
    ``(index, edge type)`` pairs drawn together (empty for ``"edge_type"``). Refuses edge types
    into one node type whose fanouts differ at some layer (other than ``0``)."""
    if fanout_per not in ("edge_type", "node"):
        raise LoaderArgumentError(f"Expected fanout_per 'edge_type' or 'node'. Got "
                                  f"{fanout_per!r} instead.")
    if fanout_per == "edge_type":
        return {}
    groups = {}
    for t in graph.node_types:
        into = [(i, et) for i, et in enumerate(graph.edge_types) if et.dst == t]
        for layer in range(fanouts.num_layers):
            fs = {fanouts.per_etype[et][layer] for _, et in into} - {0}
            if len(fs) > 1:
                raise LoaderArgumentError(
                    f"Expected one fanout per layer for the edge types into {t!r} with "
                    f"fanout_per='node' (they are drawn together). Got {sorted(fs)} at layer "
                    f"{layer} for {[tuple(et) for _, et in into]} instead.")
        if len(into) > 1:
            groups[t] = into
    return groups


def _concat(chunks: list) -> np.ndarray:
    if not chunks:
        return np.empty(0, np.int64)
    return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
