"""OGB-LSC's ``MAG240MDataset`` and ``MAG240MEvaluator`` over a store, so the MAG240M baselines
(OGB-LSC's ``rgnn.py``, DGL's ``ogb_lsc/MAG240M/train.py``) keep their dataset lines:

>>> from loaders.lsc import MAG240MDataset, MAG240MEvaluator   # was: from ogb.lsc import ...
>>> dataset = MAG240MDataset("mag240m.store")     # featurestore preprocess mag240m ROOT STORE
>>> dataset.num_papers, dataset.num_classes, dataset.get_idx_split("train")

Arrays are the store's: ``paper_feat`` is a read-only memory map, labels are read on first
use. The homogeneous graph the baselines build by hand (``full_adj_t.pt``, ``graph.dgl``,
``full_feat.npy``) is :meth:`MAG240MDataset.homogeneous` (a
:class:`~loaders.relational.HomogeneousGraph`; ``.x`` holds every node type's features).
"""

from __future__ import annotations

import os

import numpy as np

from featurestore import Store, open_store

from .errors import LoaderArgumentError
from .relational import HomogeneousGraph

__all__ = ["MAG240MDataset", "MAG240MEvaluator"]

#: OGB-LSC's split names and the store's.
_SPLITS = {"train": ("train",), "valid": ("valid", "val"), "test": ("test-dev", "test"),
           "test-dev": ("test-dev", "test"), "test-challenge": ("test-challenge",)}


class MAG240MDataset:
    """OGB-LSC's ``MAG240MDataset(root)`` answered from a store (``root``: its path, or an open
    :class:`featurestore.Store`)."""

    def __init__(self, root: str | os.PathLike | Store = "dataset"):
        self.store = root if isinstance(root, Store) else open_store(root)
        self.root = self.store.url

    def __repr__(self) -> str:
        return f"MAG240MDataset({self.root!r})"

    num_papers = property(lambda self: self.store.num_nodes("paper"))
    num_authors = property(lambda self: self.store.num_nodes("author"))
    num_institutions = property(lambda self: self.store.num_nodes("institution"))
    num_paper_features = property(lambda self: int(self.store.features("paper").shape[1]))

    @property
    def num_classes(self) -> int:
        """Classes of the paper labels (153 on MAG240M)."""
        return self.store.num_classes("paper")

    def get_idx_split(self, split: str | None = None):
        """Paper ids of ``split`` (``"test"`` is ``test-dev``), or a dict of every split."""
        have = self.store.split_names
        if split is None:
            return {k: self.get_idx_split(k) for k in ("train", "valid", "test-dev",
                                                      "test-challenge")
                    if any(n in have for n in _SPLITS[k])}
        names = [n for n in _SPLITS.get(split, ()) if n in have]
        if not names:
            raise LoaderArgumentError(f"Expected a split in {sorted(_SPLITS)} that {self.root} "
                                      f"has ({have}). Got {split!r} instead.")
        return np.array(self.store.split(names[0], "paper"))

    @property
    def paper_feat(self) -> np.ndarray:
        """The paper features (a read-only memory map of the store's rows)."""
        return self.store.features("paper").numpy()

    all_paper_feat = paper_feat

    @property
    def paper_label(self) -> np.ndarray:
        """Paper labels as OGB gives them: float64, NaN where a paper has none."""
        y = np.asarray(self.store.labels("paper")).astype(np.float64)
        y[y < 0] = np.nan
        return y

    all_paper_label = paper_label

    @property
    def paper_year(self) -> np.ndarray:
        """Publication year of every paper."""
        return np.array(self.store.values("paper", "year"))

    all_paper_year = paper_year

    def edge_index(self, id1: str, id2: str, id3: str | None = None) -> np.ndarray:
        """``(2, E)`` edges of ``(id1, id2, id3)`` or of the single relation ``id1``-``id2``
        (``edge_index("author", "institution")``), sources first."""
        ets = [et for et in self.store.edge_types
               if et.src == id1 and (et.dst == id2 if id3 is None else
                                     (et.rel, et.dst) == (id2, id3))]
        if not ets:
            raise LoaderArgumentError(f"Expected an edge type of {self.root} from {id1!r} to "
                                      f"{id3 or id2!r}. It has {self.store.edge_types}.")
        indptr, indices = self.store.csc(ets[0])
        dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        return np.stack([np.asarray(indices, np.int64), dst])

    def to_pyg_hetero_data(self):
        """A :class:`~loaders.datasets.StoreData` view in place of PyG's in-memory
        ``HeteroData``: ``data['paper'].x`` (rows gathered on indexing), ``.y``, the split
        masks, ``metadata()``, ``num_classes``; ``NeighborLoader(data, ...)`` takes it."""
        from .datasets import StoreData

        return StoreData(self.store)

    def homogeneous(self, node_types=None) -> HomogeneousGraph:
        """The store as one homogeneous graph numbered in ``node_types`` order (default the
        store's, which is DGL's: author, institution, paper; OGB-LSC's R-GNN numbers
        ``["paper", "author", "institution"]``)."""
        return HomogeneousGraph(self.store, node_types)


class MAG240MEvaluator:
    """OGB-LSC's evaluator: accuracy, and the test submission file."""

    def eval(self, input_dict: dict) -> dict:
        """``{"acc": ...}`` of ``input_dict["y_pred"]`` against ``input_dict["y_true"]``."""
        y_true, y_pred = (np.asarray(_numpy(input_dict[k])) for k in ("y_true", "y_pred"))
        if y_true.shape != y_pred.shape:
            raise LoaderArgumentError(f"Expected y_true and y_pred of one shape, as OGB-LSC's "
                                      f"evaluator asserts. Got {y_true.shape} and "
                                      f"{y_pred.shape}.")
        y_true, y_pred = y_true.reshape(-1), y_pred.reshape(-1)
        return {"acc": float((y_true == y_pred).mean()) if y_true.size else 0.0}

    def save_test_submission(self, input_dict: dict, dir_path: str, mode: str = "test-dev"):
        """Write ``y_pred`` to ``dir_path/y_pred_mag240m_<mode>.npz`` (int16, as OGB does)."""
        os.makedirs(dir_path, exist_ok=True)
        y = np.asarray(_numpy(input_dict["y_pred"])).astype(np.int16)
        np.savez_compressed(os.path.join(dir_path, f"y_pred_mag240m_{mode}.npz"), y_pred=y)


def _numpy(v):
    return v.cpu().numpy() if hasattr(v, "cpu") else v
