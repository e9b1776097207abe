"""Neighbour sampling and streaming mini-batch loaders over a feature store.

``loaders.NeighborLoader`` yields PyG ``Data``/``HeteroData``, DGL blocks or raw
:class:`~loaders.sample.sampler.MiniBatch` objects; ``loaders.pyg`` plugs the store and sampler into
PyG's own ``FeatureStore``/``GraphStore``/``BaseSampler`` interfaces; ``loaders.dgl`` converts
to DGL blocks; ``loaders.graphbolt`` answers DGL GraphBolt's names (``OnDiskDataset``,
``ItemSampler``, ``DataLoader``...). torch_geometric and dgl are imported lazily, by those
modules only: the attributes ``loaders.pyg``, ``loaders.dgl`` and ``loaders.graphbolt`` are
imported on first use.

Importing this package makes numba's threading layer fork-safe (TBB, else workqueue) unless
the user chose one (see :mod:`featurestore.threading_layer`, run by ``import featurestore``),
so PyTorch ``DataLoader`` workers can fork from a process that ran torch or numba kernels.
"""

from featurestore import threading_layer as _threading_layer

_threading_layer.choose()  # a no-op once featurestore chose; kept for clarity of the order

from loaders.errors import LoaderArgumentError, UnsupportedArgumentError  # noqa: E402
from loaders.loader import LoaderStats, NeighborLoader  # noqa: E402
from loaders.loader.link import LinkNeighborLoader, NegativeSampling  # noqa: E402
from loaders.sample.relational import HomogeneousGraph  # noqa: E402
from loaders.sample.sampler import CSCGraph, Fanouts, MiniBatch, NeighborSampler, SampledSubgraph  # noqa: E402
from loaders.sample.seeds import resolve_input_nodes  # noqa: E402


from featurestore.moved import alias_modules as _alias_modules  # noqa: E402

# the 0.1 layout's module paths, importable until 0.3 (README, "Layout")
_alias_modules("loaders", {
    "budget": "loaders.memory.budget", "cache": "loaders.memory.cache",
    "cache_policies": "loaders.memory.trace", "lsc": "loaders.datasets.lsc",
    "node_attrs": "loaders.loader.node_attrs", "partition": "loaders.sample.partition",
    "plan": "loaders.memory.plan", "reference": "loaders.sample.reference",
    "relational": "loaders.sample.relational", "sampler": "loaders.sample.sampler",
    "synthetic": "loaders.datasets.synthetic",
})

__all__ = ["NeighborLoader", "LinkNeighborLoader", "NegativeSampling", "LoaderStats",
           "NeighborSampler", "SampledSubgraph", "MiniBatch", "Fanouts", "CSCGraph",
           "HomogeneousGraph", "resolve_input_nodes",
           "LoaderArgumentError", "UnsupportedArgumentError"]
# not in __all__: ``from loaders import *`` must not import torch_geometric or dgl

_LAZY = ("pyg", "dgl", "graphbolt")


def __getattr__(name):
    """``loaders.pyg`` / ``loaders.dgl`` / ``loaders.graphbolt``: imported on first access
    (they import PyG / DGL)."""
    if name in _LAZY:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
