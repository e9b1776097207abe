"""OGB's link-property datasets and evaluator over a store: ``DglLinkPropPredDataset`` and
``Evaluator`` (of ``ogb.linkproppred``) for scripts such as DGL's GraphSAGE link prediction::

    from loaders.datasets.linkprop import DglLinkPropPredDataset, Evaluator  # was: ogb.linkproppred

``dataset[0]`` is a :class:`~loaders.datasets.views.StoreGraph`; ``get_edge_split()`` reads
the store's edge splits (``add_edge_split(name, etype, src=, dst=, neg_dst=)``) in OGB's
``ogbl-citation2`` keys: ``source_node``, ``target_node``, ``target_node_neg``.
"""

from __future__ import annotations

import numpy as np
import torch

from loaders.datasets.ranking import link_ranks
from loaders.datasets.views import StoreGraph, _Dataset
from loaders.errors import LoaderArgumentError
from loaders.sample.seeds import SPLITS

__all__ = ["DglLinkPropPredDataset", "Evaluator"]

#: OGB's column names of an edge split, by the store's
_COLUMNS = {"src": "source_node", "dst": "target_node", "neg_dst": "target_node_neg"}


class DglLinkPropPredDataset(_Dataset):
    """OGB's ``DglLinkPropPredDataset(name, root)`` over the store at ``root`` (or
    ``root/name``): ``dataset[0]`` a :class:`StoreGraph`, ``get_edge_split()`` OGB's dict."""

    def __getitem__(self, i: int) -> StoreGraph:
        return StoreGraph(super().__getitem__(i).store)

    def get_edge_split(self) -> dict:
        """``{'train', 'valid', 'test'}`` (those the store has) -> ``{'source_node',
        'target_node', 'target_node_neg'}`` int64 tensors, from the store's edge splits (of
        its only edge type with split pairs); ``valid`` may be stored as ``val``, ``test`` as
        ``test-dev``."""
        have = self.store.edge_split_names
        out = {}
        for key, (_, _, names) in SPLITS.items():
            name = next((n for n in names if n in have), None)
            if name is not None:
                cols = self.store.edge_split(name)
                out[key] = {_COLUMNS.get(c, c): torch.from_numpy(np.array(v))
                            for c, v in cols.items()}
        if not out:
            raise LoaderArgumentError(f"Expected edge splits train/valid/test in "
                                      f"{self.store.url}. Got {have} instead.")
        return out


class Evaluator:
    """OGB's link ``Evaluator(name)`` for the ranking datasets (``ogbl-citation2``,
    ``ogbl-wikikg2``): ``eval({"y_pred_pos": (n,), "y_pred_neg": (n, k)})`` returns
    ``hits@1_list``, ``hits@3_list``, ``hits@10_list`` and ``mrr_list`` (ties counted half,
    as OGB; :func:`loaders.datasets.ranking.link_ranks`)."""

    NAMES = ("ogbl-citation2", "ogbl-wikikg2")

    def __init__(self, name: str):
        if name not in self.NAMES:
            raise LoaderArgumentError(f"Expected an OGB ranking dataset name {self.NAMES}. Got "
                                      f"{name!r} instead (hits@K datasets are not served).")
        self.name = name
        self.eval_metric = "mrr"

    def eval(self, input_dict: dict) -> dict:
        """Per-positive hits@1/3/10 and reciprocal rank, as float tensors."""
        missing = {"y_pred_pos", "y_pred_neg"} - set(input_dict)
        if missing:
            raise LoaderArgumentError(f"Expected y_pred_pos and y_pred_neg in input_dict. Got "
                                      f"{sorted(input_dict)} instead.")
        r = link_ranks(input_dict["y_pred_pos"], input_dict["y_pred_neg"])
        out = {f"hits@{k}_list": (r <= k).to(torch.float) for k in (1, 3, 10)}
        out["mrr_list"] = (1.0 / r).to(torch.float)
        return out
