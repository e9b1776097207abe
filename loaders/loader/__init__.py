"""The streaming loader: input handling, the gather of features into buffers, the thread pipeline.

:class:`NeighborLoader` (:mod:`loaders.loader.core`) ties sampler, memory plan, cache and
pipeline together; :mod:`~loaders.loader.args` turns peer-style arguments into its options.
"""

from loaders.loader.core import LoaderStats, NeighborLoader, resolve_input_nodes

__all__ = ["NeighborLoader", "LoaderStats", "resolve_input_nodes"]
