"""OGB-LSC's ``MAG240MDataset`` and ``MAG240MEvaluator`` (and, from
:mod:`loaders.datasets.lsc_wikikg`, ``WikiKG90Mv2Dataset`` and ``WikiKG90Mv2Evaluator``) over
a store, so the MAG240M baselines
(OGB-LSC's ``rgnn.py``, DGL's ``ogb_lsc/MAG240M/train.py``) keep their dataset lines::

    from loaders.datasets.lsc import MAG240MDataset, MAG240MEvaluator  # was: from ogb.lsc
    dataset = MAG240MDataset("mag240m.store")     # featurestore preprocess mag240m ROOT STORE
    dataset.num_papers, dataset.num_classes, dataset.get_idx_split("train")

Arrays are the store's: ``paper_feat`` is a read-only memory map, labels are read on first
use. The homogeneous graph the baselines build by hand (``full_adj_t.pt``, ``graph.dgl``,
``full_feat.npy``) is :meth:`MAG240MDataset.homogeneous` (a
:class:`~loaders.sample.relational.HomogeneousGraph`; ``.x`` holds every node type's features).
"""

from __future__ import annotations

import os

import numpy as np

from featurestore import Store
from loaders.datasets.lsc_wikikg import (EvaluatorInputError, WikiKG90Mv2Dataset,
                                         WikiKG90Mv2Evaluator, open_root_store)
from loaders.errors import LoaderArgumentError
from loaders.sample.relational import HomogeneousGraph

__all__ = ["MAG240MDataset", "MAG240MEvaluator", "SubmissionModeError", "ogb_test_splits",
           "dev_positions", "WikiKG90Mv2Dataset", "WikiKG90Mv2Evaluator", "EvaluatorInputError"]

#: OGB-LSC's split names, in the order its ``get_idx_split()`` lists them.
SPLIT_NAMES = ("train", "valid", "test-whole", "test-dev", "test-challenge")

#: ``save_test_submission``'s modes and the file each writes (``.npz`` added), as OGB-LSC's.
SUBMISSION_FILES = {"test-whole": "y_pred_mag240m", "test-dev": "y_pred_mag240m_test-dev",
                    "test-challenge": "y_pred_mag240m_test-challenge"}


#: papers per test mode, as OGB-LSC's ``save_test_submission`` asserts them
TEST_SIZES = {"test-whole": 146_818, "test-dev": 88_092, "test-challenge": 58_726}


class SubmissionModeError(LoaderArgumentError, AssertionError):
    """``save_test_submission`` got a mode OGB-LSC does not know (it asserts the mode)."""


class SubmissionShapeError(LoaderArgumentError, AssertionError):
    """``save_test_submission`` got ``y_pred`` of another shape than the mode's test split
    (OGB-LSC asserts it)."""


def dev_positions(n: int) -> np.ndarray:
    """Whether each position of a whole test split of ``n`` papers is test-dev, as OGB-LSC's
    ``split_test`` divides it (position ``% 5 < 3``; the rest is test-challenge)."""
    return np.arange(n) % 5 < 3


def ogb_test_splits(store: Store) -> dict:
    """``test-whole``, ``test-dev`` and ``test-challenge`` paper ids of ``store``, as OGB-LSC's
    ``split_test`` makes them.

    Stored splits of those names are taken as they are. A ``test`` split is ``test-whole``,
    divided by :func:`dev_positions` into the parts not stored. Stored ``test-dev`` and
    ``test-challenge`` without a whole (``featurestore preprocess mag240m`` writes those) give
    ``test-whole`` by interleaving them back, exactly OGB-LSC's order; when their sizes cannot
    be the two parts of such a division there is no ``test-whole``.
    """
    have = store.split_names
    out = {k: np.asarray(store.split(k, "paper"))
           for k in ("test-whole", "test-dev", "test-challenge") if k in have}
    if "test-whole" not in out and "test" in have:
        out["test-whole"] = np.asarray(store.split("test", "paper"))
    if "test-whole" in out:
        is_dev = dev_positions(out["test-whole"].size)
        out.setdefault("test-dev", out["test-whole"][is_dev])
        out.setdefault("test-challenge", out["test-whole"][~is_dev])
    elif "test-dev" in out and "test-challenge" in out:
        dev, chal = out["test-dev"], out["test-challenge"]
        is_dev = dev_positions(dev.size + chal.size)
        if int(is_dev.sum()) == dev.size:
            whole = np.empty(dev.size + chal.size, np.result_type(dev, chal))
            whole[is_dev], whole[~is_dev] = dev, chal
            out["test-whole"] = whole
    return out


class MAG240MDataset:
    """OGB-LSC's ``MAG240MDataset(root)`` answered from a store (``root``: its path, an open
    :class:`featurestore.Store`, or as OGB takes it the parent of ``mag240m_kddcup2021``)."""

    def __init__(self, root: str | os.PathLike | Store = "dataset"):
        self.store = open_root_store(root, "mag240m_kddcup2021")
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
        """Paper ids of ``split``, or a dict of every split, as OGB-LSC's: ``train``,
        ``valid``, ``test-whole``, ``test-dev``, ``test-challenge`` (see
        :func:`ogb_test_splits`). ``"test"`` (which OGB-LSC no longer answers) is the store's
        ``test`` split where it has one (OGB-LSC's ``test-whole``), else ``test-dev``."""
        store, have = self.store, self.store.split_names
        splits = {}
        for key, names in (("train", ("train",)), ("valid", ("valid", "val"))):
            name = next((n for n in names if n in have), None)
            if name is not None:
                splits[key] = np.asarray(store.split(name, "paper"))
        splits.update(ogb_test_splits(store))
        out = {k: np.array(splits[k]) for k in SPLIT_NAMES if k in splits}
        if split is None:
            return out
        key = split
        if split == "test":
            key = "test-whole" if "test" in have else "test-dev"
        if key not in out:
            raise LoaderArgumentError(
                f"Expected a split in {list(out)} of {self.root} (its splits: {have}). Got "
                f"{split!r} instead." + (" Its test-dev and test-challenge sizes are not those "
                                         "of OGB-LSC's division of one test split."
                                         if key == "test-whole" else ""))
        return out[key]

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
        (``edge_index("author", "institution")``), sources first.

        These are the store's edges in CSC order (by destination), not OGB-LSC's file order,
        and as the store holds them: every relation coalesced (no duplicate edges) and
        ``paper-cites-paper`` symmetrised unless preprocessed with ``--directed``
        (docs/ogb.md).
        """
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
        """A :class:`~loaders.datasets.views.StoreData` view in place of PyG's in-memory
        ``HeteroData``: ``data['paper'].x`` (rows gathered on indexing), ``.y``, the split
        masks, ``metadata()``, ``num_classes``; ``NeighborLoader(data, ...)`` takes it."""
        from loaders.datasets.views import StoreData

        return StoreData(self.store)

    def homogeneous(self, node_types=None) -> HomogeneousGraph:
        """The store as one homogeneous graph numbered in ``node_types`` order (default the
        store's, which is DGL's: author, institution, paper; OGB-LSC's R-GNN numbers
        ``["paper", "author", "institution"]``)."""
        return HomogeneousGraph(self.store, node_types)


class MAG240MEvaluator:
    """OGB-LSC's evaluator: accuracy, and the test submission file.

    ``test_sizes``: papers per test mode that :meth:`save_test_submission` checks ``y_pred``
    against (OGB-LSC's by default; for a twin, ``{mode: len(dataset.get_idx_split(mode))}``).
    """

    def __init__(self, test_sizes: dict | None = None):
        self.test_sizes = dict(TEST_SIZES if test_sizes is None else test_sizes)

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
        """Write ``y_pred`` (int16) where OGB-LSC writes it: ``dir_path/y_pred_mag240m.npz``
        for ``mode="test-whole"``, ``y_pred_mag240m_test-dev.npz``,
        ``y_pred_mag240m_test-challenge.npz``; another mode raises
        :class:`SubmissionModeError`, and ``y_pred`` of another shape than
        ``(test_sizes[mode],)`` :class:`SubmissionShapeError` (``AssertionError`` s, as
        OGB-LSC asserts them), before anything is written."""
        if mode not in SUBMISSION_FILES:
            raise SubmissionModeError(f"Expected mode in {list(SUBMISSION_FILES)}, as OGB-LSC's "
                                      f"save_test_submission. Got {mode!r} instead.")
        if "y_pred" not in input_dict:
            raise LoaderArgumentError("Expected a 'y_pred' entry in input_dict. Got "
                                      f"{sorted(input_dict)} instead.")
        y = np.asarray(_numpy(input_dict["y_pred"]))
        want = (self.test_sizes.get(mode),)
        if y.shape != want:
            raise SubmissionShapeError(
                f"Expected y_pred of shape {want} for {mode}, as OGB-LSC's save_test_submission "
                f"asserts (a twin's sizes: MAG240MEvaluator({{mode: len(split)}})). Got "
                f"{y.shape} instead; nothing was written to {dir_path}.")
        if y.size and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0
                       or y.max() > np.iinfo(np.int16).max):
            raise SubmissionShapeError(f"Expected y_pred of class ids (integers in [0, "
                                       f"{np.iinfo(np.int16).max}]). Got {y.dtype} in "
                                       f"[{y.min()}, {y.max()}] instead.")
        os.makedirs(dir_path, exist_ok=True)
        y = y.astype(np.int16)
        np.savez_compressed(os.path.join(dir_path, SUBMISSION_FILES[mode] + ".npz"), y_pred=y)


def _numpy(v):
    return v.cpu().numpy() if hasattr(v, "cpu") else v
