"""A synthetic WikiKG90Mv2 in the exact layout of ``wikikg90m-v2`` (ogb's
``WikiKG90Mv2Dataset``): ``meta.pt`` and ``processed/*.npy``.

Sizes are the true ones times ``scale`` (the 1,387 relations and the 15,000 / 15,000 /
10,000 evaluation queries stay, so the official evaluator's checks hold). What makes it a
knowledge graph rather than noise:

- every entity has a hidden *type* (one of ``num_types``); its features are
  ``centroid[type] + noise`` (fp16 x 768), so features say something about structure;
- relation frequencies follow a Zipf law (s = 1.1) over a scrambled relation order;
- each relation has a domain type and a range type: 70% of its heads come from the domain,
  50% of its tails from the range and 30% from the head's type shifted by the relation's
  offset (a relation-specific head -> tail map); the rest are any entity;
- heads and tails follow power laws within their type (hub heads and hub tails at distinct
  ids), so entity degrees are skewed and many entities are in no triple;
- ``relation_feat`` rows are ``centroid[range type] + noise``.

Every array is generated in fixed blocks, each from its own seeded stream, and written into
``.npy`` memory maps, so memory stays flat at any scale and a seed gives the same files.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from preprocess.errors import PreprocessError
from preprocess.ogb.layout import WIKIKG90MV2, WIKIKG90MV2_DIR, WikiPaths
from preprocess.synth._gen import FEAT_BLOCK_BYTES, node_ranges, rng_for, scaled
from preprocess.synth.mag240m import _close_npy, _open_npy, _save_pt

__all__ = ["synth_wikikg90mv2", "WikiSynthSpec", "WikiModel", "NotATwinError"]

log = logging.getLogger(__name__)

# stream ids of this generator (disjoint from _gen's).
S_KG_MODEL, S_KG_TRAIN, S_KG_EVAL, S_KG_FEAT, S_KG_REL = 101, 102, 103, 104, 105
#: Zipf exponent of the relation frequencies; power laws of heads and tails (IdMap's alpha).
ZIPF_S, HEAD_ALPHA, TAIL_ALPHA = 1.1, 2.5, 4.0
#: share of heads drawn from the relation's domain type; of tails from its range type, and
#: from the head's type shifted by the relation's offset (the rest: any entity).
P_DOMAIN, P_RANGE, P_SHIFT = 0.7, 0.5, 0.3
#: the first line of the twin's RELEASE_v1.txt: only a folder that has it is replaced.
TWIN_MARK = "synthetic WikiKG90Mv2 twin written by featurestore synth"
#: triples per generated block (its temporaries stay near 100 MiB).
TRIPLE_BLOCK = 1 << 20


@dataclass(frozen=True)
class WikiSynthSpec:
    """Counts of a synthetic WikiKG90Mv2."""

    num_entities: int
    num_relations: int
    train: int
    valid: int = WIKIKG90MV2["valid"]
    test_dev: int = WIKIKG90MV2["test_dev"]
    test_challenge: int = WIKIKG90MV2["test_challenge"]
    feat_dim: int = WIKIKG90MV2["feat_dim"]
    num_types: int = 64

    @classmethod
    def at_scale(cls, scale: float) -> WikiSynthSpec:
        """The twin at ``scale`` times WikiKG90Mv2's entities and triples (1 = true size)."""
        if not scale > 0:
            raise ValueError(f"Expected a scale > 0. Got {scale!r} instead.")
        n = scaled(WIKIKG90MV2["num_entities"], scale, 100)
        return cls(num_entities=n, num_relations=WIKIKG90MV2["num_relations"],
                   train=scaled(WIKIKG90MV2["train"], scale, 100),
                   num_types=int(min(64, max(4, n // 1000))))

    @property
    def feature_bytes(self) -> int:
        """Bytes of the fp16 entity features."""
        return self.num_entities * self.feat_dim * 2


class NotATwinError(PreprocessError, FileExistsError):
    """The twin's folder holds files this package did not write (the real dataset?)."""


def _check_replaceable(root: str) -> None:
    """Refuse a non-empty ``wikikg90m-v2`` folder whose RELEASE_v1.txt is not the twin's."""
    if not os.path.isdir(root) or not os.listdir(root):
        return
    try:
        with open(os.path.join(root, "RELEASE_v1.txt")) as f:
            if f.readline().strip() == TWIN_MARK:
                return
    except (OSError, UnicodeDecodeError):
        pass
    raise NotATwinError(f"Expected an empty folder or a twin written by featurestore synth at "
                        f"{root}. It holds other files (its RELEASE_v1.txt is not a twin's: "
                        "the real dataset?); nothing was written. Choose another ROOT.")


class WikiModel:
    """The generative model: entity types, relation frequencies, domains and ranges.

    Entity ids are ranks under a bijection ``j -> (a*j + b) mod n``; rank ``j`` has type
    ``j % num_types``, so the ``i``-th entity of type ``k`` is rank ``i * num_types + k``.
    """

    def __init__(self, spec: WikiSynthSpec, seed: int):
        self.spec = spec
        n, k, r = spec.num_entities, spec.num_types, spec.num_relations
        a = max(1, int(n * 0.6180339887) | 1)
        while math.gcd(a, n) != 1:
            a += 2
        self.a, self.b = a % n or 1, (seed * 7919 + 11) % n
        self.a_inv = pow(self.a, -1, n) if n > 1 else 0
        rng = rng_for(seed, S_KG_MODEL, 0)
        w = 1.0 / np.arange(1, r + 1) ** ZIPF_S
        self.rel_cdf = np.cumsum(w / w.sum())
        self.rel_of_rank = rng.permutation(r).astype(np.int64)
        self.domain = rng.integers(0, k, r)
        self.range = rng.integers(0, k, r)
        self.shift = rng.integers(1, max(k, 2), r)
        self.centroids = rng.standard_normal((k, spec.feat_dim), dtype=np.float32)
        # entities per type: ranks k, k + K, k + 2K ... below n
        self.type_size = (n - np.arange(k) + k - 1) // k

    def ids(self, ranks: np.ndarray) -> np.ndarray:
        """Entity ids of ranks."""
        return (ranks * self.a + self.b) % self.spec.num_entities

    def types(self, ids: np.ndarray) -> np.ndarray:
        """The hidden type of each entity id."""
        n = self.spec.num_entities
        ranks = ((ids.astype(np.int64) - self.b) % n) * self.a_inv % n
        return ranks % self.spec.num_types

    def draw(self, rng, types: np.ndarray, alpha: float, flip: bool) -> np.ndarray:
        """One entity of each type in ``types``, power law within the type (``flip``: the
        hubs at the other end of the type's ranks)."""
        size = self.type_size[types]
        i = np.minimum(np.floor(size * rng.random(types.shape[0]) ** alpha).astype(np.int64),
                       size - 1)
        if flip:
            i = size - 1 - i
        return self.ids(i * self.spec.num_types + types)

    def triples(self, rng, m: int) -> np.ndarray:
        """``m`` triples ``(h, r, t)`` as an ``(m, 3)`` int64 array."""
        k = self.spec.num_types
        r = self.rel_of_rank[np.minimum(np.searchsorted(self.rel_cdf, rng.random(m)),
                                        self.spec.num_relations - 1)]
        th = np.where(rng.random(m) < P_DOMAIN, self.domain[r], rng.integers(0, k, m))
        h = self.draw(rng, th, HEAD_ALPHA, flip=False)
        u = rng.random(m)
        tt = np.where(u < P_RANGE, self.range[r],
                      np.where(u < P_RANGE + P_SHIFT, (th + self.shift[r]) % k,
                               rng.integers(0, k, m)))
        t = self.draw(rng, tt, TAIL_ALPHA, flip=True)
        return np.stack([h, r, t], axis=1)

    def feature_rows(self, seed: int, lo: int, hi: int) -> np.ndarray:
        """fp16 features of entities ``lo..hi-1``: their type's centroid plus noise."""
        rng = rng_for(seed, S_KG_FEAT, lo)
        x = rng.standard_normal((hi - lo, self.spec.feat_dim), dtype=np.float32)
        x += self.centroids[self.types(np.arange(lo, hi, dtype=np.int64))]
        return x.astype(np.float16)


def synth_wikikg90mv2(root: str | os.PathLike, scale: float, *, seed: int = 0,
                      progress: bool = True, spec: WikiSynthSpec | None = None) -> WikiPaths:
    """Write a synthetic WikiKG90Mv2 under ``root/wikikg90m-v2``.

    Parameters
    ----------
    root
        Directory to hold ``wikikg90m-v2/`` (created; a twin there is replaced, any other
        non-empty folder refused with :class:`NotATwinError`).
    scale
        Fraction of the true sizes (``1`` = 91.2M entities, 601M triples, 140 GB of features).
    seed
        Same seed and scale give byte-identical files.
    spec
        Explicit counts instead of ``scale`` (tests).

    Returns
    -------
    WikiPaths
        The paths of the files written.
    """
    spec = spec or WikiSynthSpec.at_scale(scale)
    paths = WikiPaths.under(os.path.join(os.fspath(root), WIKIKG90MV2_DIR))
    _check_replaceable(paths.root)
    os.makedirs(os.path.dirname(paths.processed("x")), exist_ok=True)
    log.info("synth wikikg90mv2: %d entities, %d relations, %d triples, %.2f GB features",
             spec.num_entities, spec.num_relations, spec.train, spec.feature_bytes / 1e9)
    model = WikiModel(spec, seed)
    _write_triples(paths, model, seed, progress)
    _write_eval(paths, model, seed)
    _write_features(paths, model, seed, progress)
    _save_pt({"num_entities": spec.num_entities, "num_relations": spec.num_relations},
             paths.meta)
    with open(os.path.join(paths.root, "RELEASE_v1.txt"), "w") as f:
        f.write(TWIN_MARK + "\n")
    return paths


def _write_triples(paths: WikiPaths, model: WikiModel, seed: int, progress: bool) -> None:
    m = model.spec.train
    out = _open_npy(paths.processed("train_hrt"), (m, 3), np.int64)
    for b, lo in enumerate(tqdm(range(0, m, TRIPLE_BLOCK), desc="train_hrt", unit="block",
                                disable=not progress)):
        k = min(TRIPLE_BLOCK, m - lo)
        out[lo:lo + k] = model.triples(rng_for(seed, S_KG_TRAIN, b), k)
    _close_npy(out, paths.processed("train_hrt"))


def _write_eval(paths: WikiPaths, model: WikiModel, seed: int) -> None:
    s = model.spec
    for i, (name, m) in enumerate((("val", s.valid), ("test-dev", s.test_dev),
                                   ("test-challenge", s.test_challenge))):
        hrt = model.triples(rng_for(seed, S_KG_EVAL, i), m)
        _save_npy(paths.processed(f"{name}_hr"), np.ascontiguousarray(hrt[:, :2]))
        if name == "val":
            _save_npy(paths.processed("val_t"), np.ascontiguousarray(hrt[:, 2]))


def _write_features(paths: WikiPaths, model: WikiModel, seed: int, progress: bool) -> None:
    s = model.spec
    feat = _open_npy(paths.processed("entity_feat"), (s.num_entities, s.feat_dim), np.float16)
    step = max(1, FEAT_BLOCK_BYTES // (s.feat_dim * 4))
    for lo, hi in tqdm(list(node_ranges(s.num_entities, step)), desc="entity_feat",
                       unit="block", disable=not progress):
        feat[lo:hi] = model.feature_rows(seed, lo, hi)
    _close_npy(feat, paths.processed("entity_feat"))
    rng = rng_for(seed, S_KG_REL, 0)
    rel = rng.standard_normal((s.num_relations, s.feat_dim), dtype=np.float32)
    rel += model.centroids[model.range]
    _save_npy(paths.processed("relation_feat"), rel.astype(np.float16))


def _save_npy(path: str, arr: np.ndarray) -> None:
    np.save(path + ".partial.npy", arr)
    os.replace(path + ".partial.npy", path)
