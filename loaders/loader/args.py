"""What :class:`loaders.NeighborLoader` makes of PyG's and DGL's ways of calling a loader.

* :func:`fanouts`: ``num_neighbors`` in PyG's order (seeds first), from a list, a dict per
  edge type, DGL's list of per-layer dicts or a ``dgl.dataloading.NeighborSampler``, read in
  PyG's or DGL's order (``fanout_order``); and the refusal of old-style calls that passed the
  input nodes second.
* :func:`peer_options`: every keyword of PyG's ``NeighborLoader`` (and the PyTorch
  ``DataLoader`` keywords it forwards) and of DGL's ``DataLoader`` is either honoured here or
  refused with :class:`~loaders.errors.UnsupportedArgumentError` naming our equivalent.
* :func:`check_args`: the loader's own integer and named options, checked at its edge.

The seeds themselves (``input_nodes``) and each epoch's order of them are resolved by
:mod:`loaders.sample.seeds`, below the loader, as the planner and the cache traces share them.

``docs/compat.md`` lists the same table for users.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Mapping

import numpy as np

from featurestore.errors import UnknownFeatureError
from featurestore.sysmem import available_cpus
from loaders.errors import LoaderArgumentError, UnsupportedArgumentError
from loaders.memory.cache import POLICIES

__all__ = ["fanouts", "peer_options", "PeerOptions", "check_args", "check_feature",
           "FANOUT_ORDERS", "MAX_LAYERS"]

log = logging.getLogger(__name__)

FANOUT_ORDERS = ("pyg", "dgl")

#: more layers than this is taken for an old-style call that passed seeds as num_neighbors.
MAX_LAYERS = 16

_ORDER_HINT = ("NeighborLoader takes PyG's argument order: NeighborLoader(store, num_neighbors, "
               "input_nodes), e.g. NeighborLoader(store, [15, 10], ('paper', 'train'))")


def _looks_like_dgl_sampler(obj) -> bool:
    return hasattr(obj, "fanouts") and hasattr(obj, "sample_blocks")


def _int_list(v) -> bool:
    return isinstance(v, (list, tuple)) and all(
        isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v)


def _dgl_sampler_fanouts(s) -> tuple[list, bool]:
    """``(fanouts input layer first, replace)`` of a ``dgl.dataloading.NeighborSampler``."""
    name = type(s).__name__
    if getattr(s, "edge_dir", "in") != "in":
        raise LoaderArgumentError(f"Expected a DGL {name} with edge_dir='in' (our CSC samples "
                                  f"in-neighbours). Got edge_dir={s.edge_dir!r} instead.")
    for attr in ("prob", "mask"):
        if getattr(s, attr, None) is not None:
            raise LoaderArgumentError(
                f"Expected a DGL {name} without {attr}= (our sampler is uniform). Got "
                f"{attr}={getattr(s, attr)!r} instead.")
    return list(s.fanouts), bool(getattr(s, "replace", False))


def _layers_to_dict(layers: list) -> dict:
    """DGL's ``[{etype: k, ...}, ...]`` (one dict per layer) as ``{etype: [k per layer]}``."""
    keys: list = []
    for d in layers:
        for k in d:
            if k not in keys:
                keys.append(k)
    return {k: [int(d.get(k, 0)) for d in layers] for k in keys}


def fanouts(num_neighbors, input_nodes=None, *, output: str = "raw",
            fanout_order: str | None = None, replace: bool = False) -> tuple[Any, bool]:
    """``(num_neighbors in PyG's order, replace)`` for :class:`~loaders.sample.sampler.Fanouts`.

    ``fanout_order`` says how a list is read: ``"pyg"`` (first entry = the seeds' layer) or
    ``"dgl"`` (first entry = the input layer, as ``dgl.dataloading.NeighborSampler``); the
    default is ``"dgl"`` with ``output="dgl"`` and ``"pyg"`` otherwise. A DGL
    ``NeighborSampler`` object is always read in DGL's order (and gives ``replace``).
    """
    from loaders.sample.sampler import Fanouts

    if fanout_order is not None and fanout_order not in FANOUT_ORDERS:
        raise LoaderArgumentError(f"Expected fanout_order in {FANOUT_ORDERS} (or None: 'dgl' "
                                  f"with output='dgl', else 'pyg'). Got {fanout_order!r} instead.")
    order = fanout_order or ("dgl" if output == "dgl" else "pyg")
    nn = num_neighbors
    if isinstance(nn, Fanouts):
        return nn, replace
    if type(nn).__name__ == "EdgePredictionSampler":  # ours or DGL's as_edge_prediction_sampler
        raise LoaderArgumentError(
            "Expected a node sampler or fanouts as num_neighbors. Got an edge-prediction "
            "sampler (as_edge_prediction_sampler) instead: pass it to loaders.dgl.DataLoader("
            "graph, seed_edges, sampler), which takes seed edge ids as DGL does.")
    if _looks_like_dgl_sampler(nn):
        if fanout_order == "pyg":
            raise LoaderArgumentError("Expected fanout_order None or 'dgl' with a DGL "
                                      "NeighborSampler (its fanouts list the input layer "
                                      "first). Got 'pyg' instead.")
        nn, rep = _dgl_sampler_fanouts(nn)
        order, replace = "dgl", replace or rep
    if isinstance(nn, (list, tuple)) and nn and all(isinstance(d, Mapping) for d in nn):
        nn = _layers_to_dict(list(nn))  # DGL's per-layer dicts
    if isinstance(nn, Mapping):
        bad = [k for k, v in nn.items() if not _int_list(v)]
        if bad:
            raise LoaderArgumentError(
                f"Expected num_neighbors as a dict of per-layer fanout lists (e.g. "
                f"{{'cites': [15, 10]}}). Got {nn[bad[0]]!r} for {bad[0]!r} instead.")
        lens = [len(v) for v in nn.values()]
        if lens and max(lens) > MAX_LAYERS:
            raise LoaderArgumentError(f"Expected at most {MAX_LAYERS} layers of fanouts. Got "
                                      f"{max(lens)} instead. {_ORDER_HINT}.")
        if order == "dgl":
            nn = {k: list(v)[::-1] for k, v in nn.items()}
        return nn, replace
    hint = (f", with input_nodes={input_nodes!r}, which look like fanouts: swap the two"
            if _int_list(input_nodes) and len(input_nodes) <= MAX_LAYERS
            else " (were the input nodes passed second?)")
    if not _int_list(nn):
        if not isinstance(nn, (list, tuple, str)):
            what = f"{type(nn).__module__}.{type(nn).__name__}"
        else:
            what = repr(nn) if len(repr(nn)) < 60 else f"a {type(nn).__name__} of {len(nn)} items"
        raise LoaderArgumentError(
            f"Expected num_neighbors (the second argument) as a list of fanouts per layer or a "
            f"dict per edge type. Got {what} instead{hint}. {_ORDER_HINT}.")
    if len(nn) > MAX_LAYERS:
        raise LoaderArgumentError(
            f"Expected at most {MAX_LAYERS} layers of fanouts in num_neighbors (the second "
            f"argument). Got {len(nn)} instead{hint}. {_ORDER_HINT}.")
    nn = [int(x) for x in nn]
    return (nn[::-1] if order == "dgl" else nn), replace


# -- peer keywords ---------------------------------------------------------------------------
_THREADS = ("this loader runs sampling and gathering on threads in this process (numba "
            "kernels release the GIL): use num_threads= (numba threads) and prefetch= (batches "
            "each stage holds ahead); for worker processes use PyG's NodeLoader over "
            "loaders.pyg.remote_backend(store) with loaders.pyg.NeighborSampler")

#: keyword -> (values that are honoured, what to do instead). ``None`` honours every value.
_REFUSED: dict[str, tuple[tuple, str]] = {
    # PyG NeighborLoader
    "input_time": ((None,), "temporal sampling is not supported: every sampled neighbour may "
                            "be newer than its seed. Drop input_time (and time_attr)"),
    "time_attr": ((None,), "temporal sampling is not supported. Drop time_attr"),
    "temporal_strategy": (("uniform",), "temporal sampling is not supported"),
    "weight_attr": ((None,), "sampling is uniform; weighted sampling is not supported"),
    "subgraph_type": (("directional",), "only 'directional' subgraphs (the sampled edges) are "
                                        "returned; 'bidirectional'/'induced' are not supported"),
    "directed": ((True,), "directed=False (the induced subgraph) is not supported; the "
                          "sampled edges are returned, as PyG's directed=True"),
    "custom_cls": ((None,), "batches are torch_geometric Data/HeteroData: convert them in "
                            "transform="),
    "neighbor_sampler": ((None,), "the sampler is ours (numba, over the store's CSC); pass "
                                  "its options (num_neighbors, replace, seed) to the loader"),
    "transform_sampler_output": ((None,), "use transform= on the Data/HeteroData batch"),
    "input_id": ((None,), "each batch's input_id holds its seeds' positions in input_nodes"),
    "is_sorted": (None, ""),
    "share_memory": (None, ""),
    "filter_per_worker": (None, ""),
    # PyTorch DataLoader keywords PyG forwards
    # honoured by threads: num_workers=N -> N sampling threads, prefetch_factor -> prefetch=
    "persistent_workers": (None, ""),
    "multiprocessing_context": ((None,), _THREADS),
    "worker_init_fn": ((None,), _THREADS),
    "timeout": ((0, None), "a stage's error is raised in the training loop; there is no "
                           "worker to time out"),
    "collate_fn": ((None,), "batches are built by the loader: use transform= on each batch"),
    "sampler": ((None,), "batches are shuffled with shuffle= and seed= (and split between "
                         "DDP ranks with rank= and world_size=)"),
    "batch_sampler": ((None,), "use batch_size=, shuffle=, drop_last= and seed="),
    "generator": ((None,), "the order of each epoch comes from seed= and the epoch "
                           "(set_epoch)"),
    "pin_memory_device": ((None, ""), "pass device= (batches are copied there on a side "
                                      "stream)"),
    "in_order": ((True,), "batches always come in order"),
    # DGL DataLoader
    # use_uva=True: features stay in host memory; ours are gathered there into pinned
    # buffers and copied to device= on a side stream, which is what UVA is asked for
    "use_uva": (None, ""),
    "use_ddp": ((False,), "pass rank= and world_size= (each rank takes a disjoint share of "
                          "the seeds)"),
    "ddp_seed": (None, ""),
    "use_prefetch_thread": (None, ""),
    "use_alternate_streams": (None, ""),
    "pin_prefetcher": (None, ""),
    "gpu_cache": ((None,), "the loader's feature cache is planned from memory= and cache="),
    "graph_sampler": ((None,), "pass the dgl.dataloading.NeighborSampler (or its fanouts) "
                               "as num_neighbors"),
}


@dataclass(frozen=True)
class PeerOptions:
    """The PyG/DGL keywords the loader honours itself."""

    transform: Callable[[Any], Any] | None = None
    pin_memory: bool = False
    #: PyTorch's worker count, honoured as the loader's sampling threads (``num_threads``,
    #: at most the cores available: :meth:`sampling_threads`)
    num_workers: int = 0
    #: PyTorch's batches loaded ahead per worker, honoured as ``prefetch``
    prefetch_factor: int | None = None

    def sampling_threads(self, num_threads: int | None) -> int | None:
        """The loader's threads: ``num_threads`` when given, else ``num_workers`` (PyTorch's
        worker processes, run as threads here) capped at the cores this process may use
        (:func:`featurestore.sysmem.available_cpus`: ``num_workers=16`` on 2 cores is 2
        threads, not 16 contending for them); ``None``: numba's setting."""
        if num_threads is not None or not self.num_workers:
            return num_threads
        n = min(self.num_workers, available_cpus())
        if n < self.num_workers:
            log.info("num_workers=%d runs as %d sampling threads, the cores this process may "
                     "use (num_threads= sets them)", self.num_workers, n)
        return n

    def wrap(self, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``convert`` followed by ``transform`` (PyG's ``transform=``), run in the loader's
        gather thread like the conversion itself."""
        if self.transform is None:
            return convert
        t = self.transform
        return lambda mb: t(convert(mb))


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and other odd values: not a default
        return False


def peer_options(kwargs: dict, *, transform=None, pin_memory: bool = False) -> PeerOptions:
    """Check the keywords :class:`NeighborLoader` does not take itself (PyG's, PyTorch's and
    DGL's loader keywords): a no-op value passes, others raise
    :class:`UnsupportedArgumentError` naming our equivalent; an unknown keyword raises it too.
    """
    for name, value in kwargs.items():
        if name in ("transform", "pin_memory", "num_workers", "prefetch_factor"):
            continue
        if name not in _REFUSED:
            raise UnsupportedArgumentError(
                f"NeighborLoader got an unexpected keyword argument {name!r}. See "
                "docs/compat.md for the PyG and DGL loader arguments and ours.")
        ok, hint = _REFUSED[name]
        if ok is None or any(_same(value, v) for v in ok):
            continue
        raise UnsupportedArgumentError(f"Expected {name}={ok[0]!r} (or no {name}=). Got "
                                       f"{name}={_short(value)} instead: {hint}.")
    transform = kwargs.get("transform", transform)
    if transform is not None and not callable(transform):
        raise LoaderArgumentError(f"Expected transform to be callable (batch -> batch). Got "
                                  f"{_short(transform)} instead.")
    workers = kwargs.get("num_workers", 0)
    factor = kwargs.get("prefetch_factor")
    for name, v, lo, none_ok in (("num_workers", workers, 0, False),
                                 ("prefetch_factor", factor, 1, True)):
        if (v is None and none_ok) or (isinstance(v, (int, np.integer))
                                       and not isinstance(v, bool) and v >= lo):
            continue
        raise LoaderArgumentError(f"Expected an integer {name} >= {lo}. Got {_short(v)} "
                                  "instead.")
    return PeerOptions(transform, bool(kwargs.get("pin_memory", pin_memory)), int(workers),
                       None if factor is None else int(factor))


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else f"a {type(v).__name__}"


# -- the loader's own options ------------------------------------------------------------------
def _check_int(name: str, v, lo: int, none_ok: bool = False) -> None:
    """An integer argument >= ``lo`` (not a float, a bool or a string that would be coerced)."""
    if v is None and none_ok:
        return
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo:
        raise LoaderArgumentError(f"Expected an integer {name} >= {lo}"
                                  f"{' or None' if none_ok else ''}. Got {v!r} instead.")


def check_args(*, rank, world_size, cache, topology, num_threads, disjoint=(False, "raw"),
               **ints) -> None:
    """The loader's integer arguments, ``rank < world_size``, ``cache``, ``topology`` and
    ``disjoint`` (``(disjoint, output)``: not with DGL's blocks)."""
    if disjoint[1] == "dgl" and disjoint[0]:
        raise UnsupportedArgumentError(
            "Expected disjoint=False with output='dgl' (DGL's blocks dedupe nodes across "
            "seeds; DGL has no per-seed trees). Got disjoint=True instead: use "
            "output='pyg' or 'raw' for one tree per seed.")
    lows = {"batch_size": 1, "prefetch": 1, "staging_bytes": 1, "batches_in_flight": 1,
            "presample_epochs": 0, "seed": 0}
    for name, v in ints.items():
        _check_int(name, v, lows[name])
    _check_int("num_threads", num_threads, 1, none_ok=True)
    _check_int("rank", rank, 0)
    _check_int("world_size", world_size, 1)
    if not 0 <= rank < world_size:
        raise LoaderArgumentError(f"Expected 0 <= rank < world_size. Got rank={rank}, "
                                  f"world_size={world_size} instead.")
    if cache not in (None, "auto") + POLICIES:
        raise LoaderArgumentError(f"Expected cache in {(None, 'auto') + POLICIES}. Got "
                                  f"{cache!r} instead.")
    if topology not in (None, "mmap", "memory", "packed"):
        raise LoaderArgumentError(f"Expected topology None, 'mmap', 'memory' or 'packed'. Got "
                                  f"{topology!r} instead.")


def check_feature(store, feature) -> None:
    """``feature`` names a feature of some node type (when the store has features)."""
    have = {t: store.feature_names(t) for t in store.node_types}
    if feature is not None and any(have.values()) and not any(
            feature in names for names in have.values()):
        raise UnknownFeatureError(f"Expected feature {feature!r} on some node type of "
                                  f"{store.url}. The store has {have}.")
