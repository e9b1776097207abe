"""Neighbour sampling and streaming mini-batch loaders over a feature store.

``loaders.NeighborLoader`` yields PyG ``Data``/``HeteroData``, DGL blocks or raw
:class:`~loaders.sampler.MiniBatch` objects; ``loaders.pyg`` plugs the store and sampler into
PyG's own ``FeatureStore``/``GraphStore``/``BaseSampler`` interfaces; ``loaders.dgl`` converts
to DGL blocks. torch_geometric and dgl are imported lazily, by those modules only.
"""

from .loader import LoaderStats, NeighborLoader, resolve_input_nodes
from .sampler import CSCGraph, Fanouts, MiniBatch, NeighborSampler, SampledSubgraph

__all__ = ["NeighborLoader", "LoaderStats", "NeighborSampler", "SampledSubgraph", "MiniBatch", "Fanouts",
           "CSCGraph", "resolve_input_nodes"]
