"""Neighbour sampling and streaming mini-batch loaders over a feature store.

``loaders.NeighborLoader`` yields PyG ``Data``/``HeteroData``, DGL blocks or raw
:class:`~loaders.sampler.MiniBatch` objects; ``loaders.pyg`` plugs the store and sampler into
PyG's own ``FeatureStore``/``GraphStore``/``BaseSampler`` interfaces; ``loaders.dgl`` converts
to DGL blocks. torch_geometric and dgl are imported lazily, by those modules only: the
attributes ``loaders.pyg`` and ``loaders.dgl`` import them on first use.

Importing this package makes numba's threading layer fork-safe (TBB, else workqueue) unless
the user chose one (see :mod:`featurestore.threading_layer`, run by ``import featurestore``),
so PyTorch ``DataLoader`` workers can fork from a process that ran torch or numba kernels.
"""

from featurestore import threading_layer as _threading_layer

_threading_layer.choose()  # a no-op once featurestore chose; kept for clarity of the order

from .errors import LoaderArgumentError, UnsupportedArgumentError  # noqa: E402
from .loader import LoaderStats, NeighborLoader, resolve_input_nodes  # noqa: E402
from .relational import HomogeneousGraph  # noqa: E402
from .sampler import CSCGraph, Fanouts, MiniBatch, NeighborSampler, SampledSubgraph  # noqa: E402

__all__ = ["NeighborLoader", "LoaderStats", "NeighborSampler", "SampledSubgraph", "MiniBatch",
           "Fanouts", "CSCGraph", "HomogeneousGraph", "resolve_input_nodes",
           "LoaderArgumentError", "UnsupportedArgumentError"]
# not in __all__: ``from loaders import *`` must not import torch_geometric or dgl

_LAZY = ("pyg", "dgl")


def __getattr__(name):
    """``loaders.pyg`` / ``loaders.dgl``: imported on first access (they import PyG / DGL)."""
    if name in _LAZY:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
