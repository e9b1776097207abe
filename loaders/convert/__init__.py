"""Converters from a :class:`~loaders.sample.sampler.MiniBatch` to a peer's batch, below the
loader: ``"pyg"`` (:mod:`loaders.convert.pyg`: ``Data``/``HeteroData``) and ``"dgl"``
(:mod:`loaders.convert.dgl`: ``(input_nodes, output_nodes, blocks)``).

:func:`converter` finds one by its ``output=`` name and imports its module (and so
torch_geometric or dgl) only then, so ``import loaders`` imports neither. The peer-facing
shims built on the loader are :mod:`loaders.pyg` and :mod:`loaders.dgl`, above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["OUTPUTS", "converter"]

#: the batch forms a loader yields: ``output=`` names.
OUTPUTS = ("raw", "pyg", "dgl")


def _raw(mb):
    return mb


def converter(output: str) -> Callable[[Any], Any]:
    """The function that turns a :class:`~loaders.sample.sampler.MiniBatch` into the batch
    ``output`` names (``"raw"``: the mini-batch itself); imports PyG or DGL only here."""
    if output == "raw":
        return _raw
    if output == "pyg":
        from loaders.convert.pyg import to_pyg  # imports torch_geometric

        return to_pyg
    try:
        from loaders.convert.dgl import to_dgl
    except ImportError as e:
        raise ImportError("output='dgl' needs DGL (dgl 2.1.0 with torch <= 2.2.1): "
                          "see the README's DGL section for its environment.") from e
    return to_dgl
