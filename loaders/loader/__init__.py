"""The streaming loader: its arguments, the memory plan at setup, the gather of features into
batch tensors (one path, host and device sinks, one cast), and the thread pipeline.

:class:`NeighborLoader` (:mod:`loaders.loader.core`) ties them together:
:mod:`~loaders.loader.args` turns peer-style arguments into its options,
:mod:`~loaders.loader.planning` plans its memory and builds the caches,
:mod:`~loaders.loader.gather` reads rows into batches (:mod:`~loaders.memory.cast`,
:mod:`~loaders.loader.buffers`), :mod:`~loaders.loader.pipeline` runs the stage threads and
:mod:`~loaders.loader.stats` counts. Seeds and epoch orders come from
:mod:`loaders.sample.seeds`; ``resolve_input_nodes`` stays importable from here (0.1 path).
"""

from loaders.loader.core import NeighborLoader
from loaders.loader.stats import LoaderStats
from loaders.sample.seeds import resolve_input_nodes

__all__ = ["NeighborLoader", "LoaderStats", "resolve_input_nodes"]
