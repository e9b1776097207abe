"""OGB-LSC's ``WikiKG90Mv2Dataset`` and ``WikiKG90Mv2Evaluator`` over a store written by
``featurestore preprocess wikikg90mv2`` (importable from :mod:`loaders.datasets.lsc`)::

    from loaders.datasets.lsc import WikiKG90Mv2Dataset, WikiKG90Mv2Evaluator  # was: ogb.lsc
    dataset = WikiKG90Mv2Dataset("wikikg.store")
    dataset.num_entities, dataset.entity_feat[ids], dataset.valid_dict["h,r->t"]["hr"]

Nothing large is loaded: ``entity_feat`` is a read-only memory map of the store's rows (ogb's
is one too) and ``train_hrt`` a :class:`TripleView` over the store's ``train`` edge split
(ogb loads all 601M triples, 14.4 GB).
"""

from __future__ import annotations

import os

import numpy as np

from featurestore import Store, open_store
from loaders.errors import LoaderArgumentError

__all__ = ["WikiKG90Mv2Dataset", "WikiKG90Mv2Evaluator", "TripleView", "EvaluatorInputError",
           "KG_ETYPE", "TEST_SIZES", "mrr_top10"]

#: the store's edge type of the triples (h -> t), as ``preprocess wikikg90mv2`` writes it.
KG_ETYPE = ("entity", "relation", "entity")
#: rows ``save_test_submission`` asserts per mode (ogb's), and the file each writes.
TEST_SIZES = {"test-dev": 15_000, "test-challenge": 10_000}
SUBMISSION_FILES = {m: f"t_pred_wikikg90m-v2_{m}" for m in TEST_SIZES}
TASK = "h,r->t"


class EvaluatorInputError(LoaderArgumentError, AssertionError):
    """Input ogb's evaluator refuses with an ``assert`` (an ``AssertionError`` here too)."""


class TripleView:
    """``(n, 3)`` triples ``(h, r, t)`` read from three stored columns on indexing.

    ``view[:, j]`` is column ``j`` itself (a memory map); ``view[rows]`` and
    ``view[rows, cols]`` gather only the rows asked; ``np.asarray(view)`` loads everything.
    """

    def __init__(self, h, r, t):
        self.columns = (h, r, t)
        self.shape = (int(h.shape[0]), 3)
        self.dtype = np.dtype(np.int64)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"TripleView(shape={self.shape})"

    def __getitem__(self, key):
        rows, cols = key if isinstance(key, tuple) else (key, slice(None))
        if isinstance(cols, (int, np.integer)):
            return np.asarray(self.columns[int(cols)][rows], np.int64)
        picked = range(3)[cols] if isinstance(cols, slice) else np.asarray(cols).reshape(-1)
        return np.stack([np.asarray(self.columns[int(j)][rows], np.int64) for j in picked],
                        axis=-1)

    def __array__(self, dtype=None, copy=None):
        out = self[:, :]
        return out.astype(dtype) if dtype is not None else out



def open_root_store(root, folder: str) -> Store:
    """The store ``root`` (a path, URL or open :class:`~featurestore.Store`), or the one at
    ``root/folder`` when ``root`` is a local folder holding no store but that one: OGB-LSC's
    datasets take the parent (``MAG240MDataset(root)`` reads ``root/mag240m_kddcup2021``), so
    both spellings open the same store."""
    if isinstance(root, Store):
        return root
    path = os.fspath(root)
    sub = os.path.join(path, folder)
    if ("://" not in path and not os.path.exists(os.path.join(path, "zarr.json"))
            and os.path.exists(os.path.join(sub, "zarr.json"))):
        return open_store(sub)
    return open_store(path)


class WikiKG90Mv2Dataset:
    """OGB-LSC's ``WikiKG90Mv2Dataset(root)`` answered from a store (``root``: its path, or
    an open :class:`featurestore.Store`)."""

    def __init__(self, root: str | os.PathLike | Store = "dataset"):
        self.store = open_root_store(root, "wikikg90m-v2")
        self.root = self.store.url
        self._valid = None
        self._test: dict[str, dict] = {}

    def __repr__(self) -> str:
        return f"WikiKG90Mv2Dataset({self.root!r})"

    num_entities = property(lambda self: self.store.num_nodes("entity"))
    num_relations = property(lambda self: self.store.num_nodes("relation"))
    num_feat_dims = property(lambda self: int(self.store.features("entity", "feat").shape[1]))

    @property
    def entity_feat(self) -> np.ndarray:
        """``(num_entities, 768)`` fp16 features: a read-only memory map, not loaded."""
        return self.store.features("entity", "feat").numpy()

    all_entity_feat = entity_feat  # ogb loads it whole; here the same memory map

    @property
    def relation_feat(self) -> np.ndarray:
        """``(num_relations, 768)`` fp16 relation features (small: loaded)."""
        return np.array(self.store.features("relation", "feat").numpy())

    all_relation_feat = relation_feat

    @property
    def train_hrt(self) -> TripleView:
        """The training triples ``(h, r, t)``, ``(num_triples, 3)``, read on indexing."""
        c = self.store.edge_split("train", KG_ETYPE)
        return TripleView(c["src"], c["relation"], c["dst"])

    @property
    def valid_dict(self) -> dict:
        """``{'h,r->t': {'hr': (n, 2) int64, 't': (n,) int64}}``."""
        if self._valid is None:
            c = self.store.edge_split("valid", KG_ETYPE)
            self._valid = {TASK: {"hr": _hr(c), "t": np.array(c["dst"], np.int64)}}
        return self._valid

    def test_dict(self, mode: str) -> dict:
        """``{'h,r->t': {'hr': (n, 2) int64}}`` of ``mode`` (``test-dev`` or
        ``test-challenge``)."""
        if mode not in TEST_SIZES:
            raise EvaluatorInputError(f"Expected mode in {list(TEST_SIZES)}, as ogb's "
                                      f"test_dict. Got {mode!r} instead.")
        if mode not in self._test:
            self._test[mode] = {TASK: {"hr": _hr(self.store.edge_split(mode, KG_ETYPE))}}
        return self._test[mode]


def _hr(cols: dict) -> np.ndarray:
    return np.stack([np.asarray(cols["src"], np.int64), np.asarray(cols["relation"], np.int64)],
                    axis=1)


def _numpy(v) -> np.ndarray:
    return np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v)


def duplicated_rows(pred: np.ndarray) -> np.ndarray:
    """Whether each row of ``pred`` repeats an entity among its entries ``>= 0`` (ogb's
    duplicate check, vectorised)."""
    s = np.sort(pred, axis=1)
    return ((s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)).any(axis=1)


def mrr_top10(t: np.ndarray, t_pred_top10: np.ndarray) -> float:
    """MRR as ogb's ``_calculate_mrr``: mean over queries of ``1 / (position + 1)`` of the true tail
    in the top 10, 0 when absent; float32 reciprocal ranks averaged by torch, as ogb does."""
    import torch

    hit = t.reshape(-1, 1) == t_pred_top10
    rows = np.flatnonzero(hit.any(axis=1))
    # ogb assigns rr[row] once per hit; with several hits (only possible for t < 0) the last
    last = t_pred_top10.shape[1] - 1 - np.argmax(hit[rows, ::-1], axis=1)
    rr = np.zeros(t.shape[0], np.float32)
    rr[rows] = 1.0 / (last.astype(np.float32) + 1.0)
    return float(torch.from_numpy(rr).mean().item())


class WikiKG90Mv2Evaluator:
    """OGB-LSC's WikiKG90Mv2 evaluator: MRR of the top-10 tails, and the submission files.

    ``test_sizes``: rows per test mode checked by :meth:`save_test_submission` (ogb's 15,000
    and 10,000 by default, which every ``synth wikikg90mv2`` twin keeps).
    """

    def __init__(self, test_sizes: dict | None = None):
        self.test_sizes = dict(TEST_SIZES if test_sizes is None else test_sizes)

    @staticmethod
    def _task(input_dict: dict, keys) -> dict:
        if not isinstance(input_dict, dict) or TASK not in input_dict:
            raise EvaluatorInputError(f"Expected input_dict[{TASK!r}], as ogb's evaluator "
                                      f"asserts. Got {type(input_dict).__name__} without it.")
        d = input_dict[TASK]
        missing = [k for k in keys if k not in d]
        if missing:
            raise EvaluatorInputError(f"Expected {list(keys)} in input_dict[{TASK!r}]. "
                                      f"Missing {missing}.")
        return d

    def eval(self, input_dict: dict) -> dict:
        """``{'mrr': ...}`` of ``input_dict['h,r->t']['t_pred_top10']`` (``(n, 10)``) against
        ``input_dict['h,r->t']['t']`` (``(n,)``); NumPy arrays or torch tensors. A row that
        names an entity twice sets the MRR to 0 (ogb prints it, so does this)."""
        d = self._task(input_dict, ("t_pred_top10", "t"))
        pred, t = _numpy(d["t_pred_top10"]), _numpy(d["t"])
        if pred.ndim != 2 or pred.shape[1] != 10 or len(pred) != len(t):
            raise EvaluatorInputError(f"Expected t_pred_top10 of shape (n, 10) and t of "
                                      f"length n, as ogb asserts. Got {pred.shape} and "
                                      f"{t.shape}.")
        if duplicated_rows(pred).any():
            print("Found duplicated tail prediction for some triplets! MRR is automatically "
                  "set to 0.")
            return {"mrr": 0}
        return {"mrr": mrr_top10(t.reshape(-1), pred)}

    def save_test_submission(self, input_dict: dict, dir_path: str, mode: str) -> str:
        """Write ``t_pred_top10`` (int32) where ogb does:
        ``dir_path/t_pred_wikikg90m-v2_{mode}.npz``; returns its path. ogb's asserts
        (mode, no duplicated tail in a row, ``(test_sizes[mode], 10)``) raise
        :class:`EvaluatorInputError`."""
        d = self._task(input_dict, ("t_pred_top10",))
        if mode not in SUBMISSION_FILES:
            raise EvaluatorInputError(f"Expected mode in {list(SUBMISSION_FILES)}, as ogb's "
                                      f"save_test_submission. Got {mode!r} instead.")
        pred = _numpy(d["t_pred_top10"])
        if pred.ndim == 2 and duplicated_rows(pred).any():
            raise EvaluatorInputError("Found duplicated tail prediction for some triplets! "
                                      f"(row {int(np.flatnonzero(duplicated_rows(pred))[0])})")
        want = (self.test_sizes[mode], 10)
        if pred.shape != want:
            raise EvaluatorInputError(f"Expected t_pred_top10 of shape {want} for {mode}, as "
                                      f"ogb asserts. Got {pred.shape}.")
        os.makedirs(dir_path, exist_ok=True)
        path = os.path.join(dir_path, SUBMISSION_FILES[mode])
        np.savez_compressed(path, t_pred_top10=pred.astype(np.int32))
        return path + ".npz"
