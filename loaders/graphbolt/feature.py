"""GraphBolt's ``FeatureStore`` (``dataset.feature``) over a store's node features.

Keys are GraphBolt's ``(domain, type_name, feature_name)``: domain ``"node"``, the node type
(``None`` on a store of one node type, as GraphBolt keys a homogeneous graph's features) and
the store's feature name. Rows are read from the store; an update replaces a feature in
memory for this process (the store is read-only), which is what GraphBolt's layer-wise
inference does with ``features.update("node", None, "feat", y)``.
"""

from __future__ import annotations

import numpy as np
import torch

from featurestore import Store
from featurestore.errors import UnknownFeatureError
from loaders.errors import LoaderArgumentError, UnsupportedArgumentError

__all__ = ["FeatureStore"]


class FeatureStore:
    """GraphBolt's ``FeatureStore`` API (``read``, ``size``, ``update``, ``metadata``,
    ``keys``) over the node features of a store.

    ``read`` gathers rows from the store (every row when ``ids`` is ``None``: that reads the
    whole feature into memory). ``update(domain, type, name, value)`` with ``ids=None``
    replaces the feature by ``value`` in this process's memory: later reads, ``size`` and the
    loaders of :mod:`loaders.graphbolt` that fetch it use ``value`` (its width may differ, as
    in layer-wise inference). ``update`` with ``ids`` writes rows of such an in-memory
    feature; on a feature still in the store it is refused (:attr:`writes_to_store` is
    ``False``: the store is read-only; replace the whole feature first).

    Parameters
    ----------
    store
        An open :class:`featurestore.Store`.
    """

    #: updates stay in this process's memory; the store is never written
    writes_to_store = False

    def __init__(self, store: Store):
        self.store = store
        self._memory: dict[tuple[str, str], torch.Tensor] = {}

    def __repr__(self) -> str:
        return f"FeatureStore({self.store.url!r}, keys={self.keys()})"

    # -- keys ----------------------------------------------------------------------------
    @property
    def homogeneous(self) -> bool:
        """Whether the store has one node type (keys then carry ``None`` as the type)."""
        return len(self.store.node_types) == 1

    def keys(self) -> list[tuple[str, str | None, str]]:
        """``(domain, type_name, feature_name)`` of every node feature."""
        return [("node", None if self.homogeneous else nt, name)
                for nt in self.store.node_types for name in self.store.feature_names(nt)]

    def resolve(self, domain: str, type_name: str | None, feature_name: str) -> tuple[str, str]:
        """``(node type, feature name)`` of a GraphBolt key, checked against :meth:`keys`."""
        if domain != "node":
            raise UnknownFeatureError(
                f"Expected domain 'node' for {self.store.url} (edge and graph features are not "
                f"served through loaders.graphbolt). Got {domain!r} instead.")
        nt = self.store.resolve_ntype(type_name)
        if feature_name not in self.store.feature_names(nt) and (nt, feature_name) not in \
                self._memory:
            raise UnknownFeatureError(
                f"Expected a feature key of {self.store.url} among {self.keys()}. Got "
                f"{(domain, type_name, feature_name)!r} instead.")
        return nt, feature_name

    def in_memory(self, ntype: str, name: str) -> torch.Tensor | None:
        """The tensor that replaced feature ``name`` of ``ntype`` (:meth:`update`), if any."""
        return self._memory.get((ntype, name))

    # -- GraphBolt's API -------------------------------------------------------------------
    def size(self, domain: str, type_name: str | None, feature_name: str) -> torch.Size:
        """The shape of one row (GraphBolt's ``size``: the feature's shape without its rows)."""
        nt, name = self.resolve(domain, type_name, feature_name)
        mem = self.in_memory(nt, name)
        if mem is not None:
            return mem.shape[1:]
        return torch.Size(self.store.features(nt, name).shape[1:])

    def metadata(self, domain: str, type_name: str | None, feature_name: str) -> dict:
        """The feature's dtype and row shape (GraphBolt keeps the YAML's extra fields here)."""
        nt, name = self.resolve(domain, type_name, feature_name)
        mem = self.in_memory(nt, name)
        if mem is not None:
            return {"dtype": mem.dtype, "shape": tuple(mem.shape[1:]), "in_memory": True}
        arr = self.store.features(nt, name)
        return {"dtype": arr.dtype, "shape": tuple(arr.shape[1:]), "in_memory": False}

    def read(self, domain: str, type_name: str | None, feature_name: str, ids=None):
        """Rows ``ids`` (every row when ``None``) of a feature, as a tensor on ``ids``' device."""
        nt, name = self.resolve(domain, type_name, feature_name)
        mem = self.in_memory(nt, name)
        if mem is not None:
            return mem if ids is None else mem[torch.as_tensor(ids, device=mem.device).long()]
        arr = self.store.features(nt, name)
        if ids is None:
            return torch.from_numpy(arr.gather(np.arange(arr.shape[0])))
        device = ids.device if isinstance(ids, torch.Tensor) else torch.device("cpu")
        host = ids.cpu().numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)
        return torch.from_numpy(arr.gather(host)).to(device)

    def update(self, domain: str, type_name: str | None, feature_name: str,
               value: torch.Tensor, ids=None) -> None:
        """Replace a feature in memory (``ids=None``), or rows of an in-memory one."""
        nt, name = self.resolve(domain, type_name, feature_name)
        if not isinstance(value, torch.Tensor) or value.dim() < 1:
            raise LoaderArgumentError(f"Expected a tensor with a row per node as the value of "
                                      f"{(domain, type_name, feature_name)!r}. Got "
                                      f"{type(value).__name__} instead.")
        if ids is None:
            n = self.store.num_nodes(nt)
            if value.shape[0] != n:
                raise LoaderArgumentError(
                    f"Expected {n} rows (one per {nt!r} node) to replace feature {name!r}. "
                    f"Got {value.shape[0]} instead.")
            self._memory[(nt, name)] = value
            return
        mem = self.in_memory(nt, name)
        if mem is None:
            raise UnsupportedArgumentError(
                f"Expected update(..., ids=None) first: feature {name!r} of {nt!r} is in the "
                f"read-only store {self.store.url}, so its rows cannot be written; replacing "
                "the whole feature puts it in memory, whose rows can then be updated.")
        ids = torch.as_tensor(ids, device=mem.device).long()
        if ids.shape[0] != value.shape[0] or mem.shape[1:] != value.shape[1:]:
            raise LoaderArgumentError(
                f"Expected {ids.shape[0]} rows of shape {tuple(mem.shape[1:])} for the ids. "
                f"Got a value of shape {tuple(value.shape)} instead.")
        mem[ids] = value.to(mem.device, mem.dtype)

    # -- placement (GraphBolt moves its in-memory tensors; a store is read where it is) ----
    def pin_memory_(self) -> FeatureStore:
        """A no-op returning ``self``: the loader pins its own batch buffers."""
        return self

    def to(self, device) -> FeatureStore:  # noqa: ARG002 - GraphBolt's signature
        """``self``: the features stay in the store; batches go where ``copy_to`` says."""
        return self
