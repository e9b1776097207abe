"""GraphBolt's datapipe chain, recorded as options of our loader.

``ItemSampler(item_set, batch_size, shuffle=...)`` followed by ``.sample_neighbor(graph,
fanouts)`` (or ``.sample_layer_neighbor``), ``.fetch_feature(features, node_feature_keys=...)``,
``.copy_to(device)`` and ``.transform(fn)`` builds a :class:`Datapipe`: a frozen record of those
steps, not a torch datapipe. :class:`loaders.graphbolt.loader.DataLoader` reads it and runs
:class:`loaders.NeighborLoader` with the matching options. A step GraphBolt has and we do not
raises :class:`UnsupportedDatapipeError`, which lists the steps supported.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from loaders.errors import LoaderArgumentError, UnsupportedArgumentError
from loaders.graphbolt.dataset import ItemSetDict, SamplingGraph, columns
from loaders.graphbolt.feature import FeatureStore

__all__ = ["ItemSampler", "Datapipe", "SampleStep", "FetchStep", "UnsupportedDatapipeError",
           "SUPPORTED_STEPS", "SEED_NAMES"]

#: the datapipe steps :mod:`loaders.graphbolt` reads (GraphBolt's functional names)
SUPPORTED_STEPS = ("sample_neighbor", "sample_layer_neighbor", "fetch_feature", "copy_to",
                   "transform")
#: item names an ItemSampler takes (node classification); link items are not read here
SEED_NAMES = ("seed_nodes", "labels")


class UnsupportedDatapipeError(UnsupportedArgumentError, AttributeError):
    """A GraphBolt datapipe step or option that :mod:`loaders.graphbolt` does not read; the
    message lists what it does read."""


def _unsupported(what: str, why: str = "") -> UnsupportedDatapipeError:
    return UnsupportedDatapipeError(
        f"Expected a datapipe step among {', '.join(SUPPORTED_STEPS)} (after "
        f"loaders.graphbolt.ItemSampler). Got {what} instead{': ' + why if why else ''}. "
        "Link prediction (node_pairs, negative samplers) runs through loaders.dgl.DataLoader "
        "with as_edge_prediction_sampler.")


@dataclass(frozen=True, eq=False)
class SampleStep:
    """``sample_neighbor`` / ``sample_layer_neighbor``: fanouts input layer first (GraphBolt's
    and DGL's order), or per edge type (a dict of such lists)."""

    graph: SamplingGraph
    fanouts: list | dict
    sampling: str = "uniform"
    replace: bool = False
    layer_dependency: bool = False


@dataclass(frozen=True, eq=False)
class FetchStep:
    """``fetch_feature``: the feature store and, per node type, the feature names asked."""

    features: FeatureStore
    node_keys: dict  # {node type: (names...)}


class DatapipeSteps(abc.ABC):
    """GraphBolt's functional datapipe steps, each returning a new :class:`Datapipe`."""

    @abc.abstractmethod
    def as_datapipe(self) -> Datapipe:
        """The chain so far (a :class:`Datapipe`)."""

    def sample_neighbor(self, graph, fanouts, replace=False, prob_name=None, deduplicate=True):
        """GraphBolt's uniform neighbour sampling (``-1``: every neighbour)."""
        return self.as_datapipe().with_sampler(graph, fanouts, "uniform", replace, prob_name,
                                         deduplicate)

    def sample_layer_neighbor(self, graph, fanouts, replace=False, prob_name=None,
                              deduplicate=True, layer_dependency=False, batch_dependency=1):
        """GraphBolt's layer-neighbour sampling (LABOR-0; our ``sampling="labor"``)."""
        if batch_dependency != 1:
            raise _unsupported(f"sample_layer_neighbor(batch_dependency={batch_dependency!r})",
                               "our LABOR draws are independent across batches (1)")
        return self.as_datapipe().with_sampler(graph, fanouts, "labor", replace, prob_name,
                                         deduplicate, layer_dependency=layer_dependency)

    def fetch_feature(self, feature_store, node_feature_keys=None, edge_feature_keys=None):
        """Gather node features per batch (``node_features[name]``, or ``[(type, name)]``)."""
        if edge_feature_keys:
            raise _unsupported(f"fetch_feature(edge_feature_keys={edge_feature_keys!r})",
                               "edge features are not fetched through loaders.graphbolt")
        if not isinstance(feature_store, FeatureStore):
            raise LoaderArgumentError(
                "Expected dataset.feature of a loaders.graphbolt dataset as the feature store. "
                f"Got {type(feature_store).__name__} instead.")
        return self.as_datapipe().with_fetch(feature_store, node_feature_keys)

    def copy_to(self, device, extra_attrs=None):  # noqa: ARG002 - every attribute moves
        """Where batches go (features, labels, blocks); sampling stays on the CPU."""
        return dataclasses.replace(self.as_datapipe(), device=torch.device(device))

    def transform(self, fn: Callable):
        """Apply ``fn`` to each :class:`~loaders.graphbolt.loader.MiniBatch` (GraphBolt's
        ``MiniBatchTransformer``)."""
        pipe = self.as_datapipe()
        return dataclasses.replace(pipe, transforms=(*pipe.transforms, fn))

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise _unsupported(f"the step {name!r}")


class ItemSampler(DatapipeSteps):
    """GraphBolt's ``ItemSampler(item_set, batch_size, shuffle=..., drop_last=...)``.

    The items are an :class:`~loaders.graphbolt.dataset.ItemSet` (ours or GraphBolt's) named
    ``"seed_nodes"`` (and ``"labels"``), or an ``ItemSetDict`` of one node type. Each epoch's
    order is GraphBolt's: a seed drawn from :attr:`rng` per epoch shuffles the positions in
    buffers of ``buffer_size`` (all items by default), then batches are cut in that order.
    ``rng`` (a ``numpy.random.Generator``, our addition) defaults to one seeded from
    ``torch.initial_seed()``, so ``torch.manual_seed`` makes the order reproducible (GraphBolt's
    is seeded from the OS).
    """

    def __init__(self, item_set, batch_size: int, minibatcher=None, drop_last: bool = False,
                 shuffle: bool = False, use_indexing: bool = True,  # noqa: ARG002
                 buffer_size: int = -1, rng: np.random.Generator | None = None):
        if minibatcher is not None and getattr(minibatcher, "__name__", "") != \
                "minibatcher_default":
            raise _unsupported("ItemSampler(minibatcher=...)", "batches are built by "
                               "loaders.graphbolt.DataLoader")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise LoaderArgumentError(f"Expected a positive integer batch_size. Got "
                                      f"{batch_size!r} instead.")
        self.seed_type, self.items = _seed_items(item_set)
        self.item_set = item_set
        self.batch_size, self.drop_last, self.shuffle = int(batch_size), drop_last, shuffle
        self.buffer_size = int(buffer_size)
        self.rng = rng if rng is not None else np.random.default_rng(torch.initial_seed())

    def as_datapipe(self) -> Datapipe:
        """A chain of this item sampler alone."""
        return Datapipe(self)

    def __len__(self) -> int:
        n, b = len(self.items["seed_nodes"]), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def epoch_order(self) -> list[np.ndarray]:
        """Positions in the items of each batch of the next epoch, drawn as GraphBolt's
        ``ItemShufflerAndBatcher`` draws them (one seed from :attr:`rng` per epoch)."""
        n, b = len(self.items["seed_nodes"]), self.batch_size
        buffer = n if self.buffer_size == -1 else self.buffer_size
        buffer = max(b, -(-buffer // b) * b)
        left = n // b * b if self.drop_last else n
        shuffler = np.random.default_rng(self.rng.integers(0, np.iinfo(np.int32).max))
        out = []
        for start in range(0, n, buffer):
            idx = np.arange(min(buffer, n - start), dtype=np.int64)
            if self.shuffle:
                shuffler.shuffle(idx)
            for i in range(0, len(idx), b):
                if left <= 0:
                    return out
                out.append(idx[i:i + min(b, left)] + start)
                left -= b
        return out


def _seed_items(item_set) -> tuple[str | None, dict[str, torch.Tensor]]:
    """``(node type or None, {name: tensor})`` of an ItemSampler's items, checked."""
    seed_type = None
    if isinstance(item_set, (dict, ItemSetDict)):
        sets = dict(item_set.items())
        if len(sets) != 1:
            raise _unsupported(f"an ItemSetDict of node types {sorted(sets)}",
                               "a batch's seeds are of one node type here")
        seed_type, item_set = next(iter(sets.items()))
    names = tuple(item_set.names or ("seed_nodes",))
    if "seed_nodes" not in names or not set(names) <= set(SEED_NAMES):
        raise _unsupported(f"an ItemSet named {names!r}",
                           f"node classification items are named {SEED_NAMES!r}")
    return seed_type, columns(item_set)


@dataclass(frozen=True, eq=False)
class Datapipe(DatapipeSteps):
    """The recorded chain: an :class:`ItemSampler`, its sampling and fetching steps, the
    device batches go to and the per-batch transforms."""

    items: ItemSampler
    sampler: SampleStep | None = None
    fetch: FetchStep | None = None
    device: torch.device = torch.device("cpu")
    transforms: tuple = ()

    def as_datapipe(self) -> Datapipe:
        """``self``."""
        return self

    def with_sampler(self, graph, fanouts, sampling, replace, prob_name, deduplicate,
                     layer_dependency=False) -> Datapipe:
        """The chain with its sampling step added (one per chain)."""
        if self.sampler is not None:
            raise _unsupported("a second sampling step", "one sampler per datapipe")
        if prob_name is not None:
            raise _unsupported(f"prob_name={prob_name!r}", "our sampler draws uniformly")
        if not deduplicate:
            raise _unsupported("deduplicate=False", "sampled nodes are always deduplicated")
        if not isinstance(graph, SamplingGraph):
            raise LoaderArgumentError("Expected dataset.graph of a loaders.graphbolt dataset "
                                      f"as the graph. Got {type(graph).__name__} instead.")
        step = SampleStep(graph, _fanouts(graph, fanouts), sampling, bool(replace),
                          bool(layer_dependency))
        return dataclasses.replace(self, sampler=step)

    def with_fetch(self, features: FeatureStore, node_feature_keys) -> Datapipe:
        """The chain with its feature step added (after the sampler, as GraphBolt needs)."""
        if self.sampler is None:
            raise _unsupported("fetch_feature before sample_neighbor",
                               "features are fetched for the sampled nodes")
        if self.fetch is not None:
            raise _unsupported("a second fetch_feature", "name every key in one")
        if node_feature_keys is None:
            keys = {}
        elif isinstance(node_feature_keys, dict):
            keys = {features.store.resolve_ntype(t): tuple(v)
                    for t, v in node_feature_keys.items()}
        else:
            keys = {features.store.resolve_ntype(None): tuple(node_feature_keys)}
        for nt, names in keys.items():
            for name in names:
                features.resolve("node", nt, name)
        return dataclasses.replace(self, fetch=FetchStep(features, keys))


def _fanouts(graph: SamplingGraph, fanouts) -> list | dict:
    """GraphBolt's fanouts (ints, or tensors of one value or one per edge type in its sorted
    ``"src:rel:dst"`` order) as our per-layer list, or per-edge-type lists."""
    layers = [f.tolist() if isinstance(f, torch.Tensor) else f for f in fanouts]
    layers = [f if isinstance(f, list) else [int(f)] for f in layers]
    if all(len(f) == 1 for f in layers):
        return [int(f[0]) for f in layers]
    etypes = sorted(graph.store.edge_types, key=lambda et: ":".join(et))
    if any(len(f) != len(etypes) for f in layers):
        raise LoaderArgumentError(
            f"Expected per layer one fanout, or one per edge type ({len(etypes)}, in the order "
            f"{[':'.join(et) for et in etypes]}). Got {fanouts!r} instead.")
    return {et: [int(f[i]) for f in layers] for i, et in enumerate(etypes)}
