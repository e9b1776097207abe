"""The official OGB-LSC layouts: directory names, file names and true sizes."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["MAG240M", "PAPERS100M", "WIKIKG90MV2", "MAG240M_DIR", "PAPERS100M_DIR",
           "WIKIKG90MV2_DIR", "MagPaths", "PapersPaths", "WikiPaths"]

MAG240M_DIR = "mag240m_kddcup2021"
PAPERS100M_DIR = "ogbn_papers100M"
WIKIKG90MV2_DIR = "wikikg90m-v2"

#: true sizes of MAG240M (ogb 1.3, ``mag240m_kddcup2021``).
MAG240M = dict(paper=121_751_666, author=122_383_112, institution=25_721, num_classes=153,
               feat_dim=768, writes=386_022_720, affiliated_with=44_592_586,
               cites=1_297_748_926, train=1_112_392, valid=138_949, test=146_818)
#: (src, rel, dst) of MAG240M's edge files, in the order ogb lists them.
MAG240M_RELATIONS = (("author", "writes", "paper"),
                     ("author", "affiliated_with", "institution"),
                     ("paper", "cites", "paper"))

#: true sizes of ogbn-papers100M.
PAPERS100M = dict(nodes=111_059_956, edges=1_615_685_872, feat_dim=128, num_classes=172,
                  train=1_207_179, valid=125_265, test=214_338)
PAPERS100M_SPLITS = ("train", "valid", "test")

#: true sizes of WikiKG90Mv2 (ogb >= 1.3.2, ``wikikg90m-v2``); the test sizes are those
#: ``WikiKG90Mv2Evaluator.save_test_submission`` asserts.
WIKIKG90MV2 = dict(num_entities=91_230_610, num_relations=1_387, feat_dim=768,
                   train=601_062_811, valid=15_000, test_dev=15_000, test_challenge=10_000)


@dataclass(frozen=True)
class MagPaths:
    """Paths of MAG240M's files under ``ROOT/mag240m_kddcup2021``."""

    root: str

    @classmethod
    def under(cls, root: str | os.PathLike) -> MagPaths:
        """The paths under ``root`` (holding ``mag240m_kddcup2021/``, or that folder)."""
        root = os.fspath(root)
        if os.path.basename(os.path.normpath(root)) != MAG240M_DIR:
            root = os.path.join(root, MAG240M_DIR)
        return cls(root)

    @property
    def meta(self) -> str:
        """``meta.pt``."""
        return os.path.join(self.root, "meta.pt")

    @property
    def split_dict(self) -> str:
        """``split_dict.pt``."""
        return os.path.join(self.root, "split_dict.pt")

    def paper(self, what: str) -> str:
        """``what``: ``node_feat``, ``node_label`` or ``node_year``."""
        return os.path.join(self.root, "processed", "paper", f"{what}.npy")

    def edge_index(self, src: str, rel: str, dst: str) -> str:
        """The ``edge_index.npy`` of relation ``(src, rel, dst)``."""
        return os.path.join(self.root, "processed", f"{src}___{rel}___{dst}", "edge_index.npy")


@dataclass(frozen=True)
class PapersPaths:
    """Paths of ogbn-papers100M's files under ``ROOT/ogbn_papers100M``."""

    root: str

    @classmethod
    def under(cls, root: str | os.PathLike) -> PapersPaths:
        """The paths under ``root`` (holding ``ogbn_papers100M/``, or that folder)."""
        root = os.fspath(root)
        if os.path.basename(os.path.normpath(root)) != PAPERS100M_DIR:
            root = os.path.join(root, PAPERS100M_DIR)
        return cls(root)

    @property
    def data(self) -> str:
        """``raw/data.npz``."""
        return os.path.join(self.root, "raw", "data.npz")

    @property
    def node_label(self) -> str:
        """``raw/node-label.npz``."""
        return os.path.join(self.root, "raw", "node-label.npz")

    def split(self, name: str) -> str:
        """``split/time/<name>.csv.gz``."""
        return os.path.join(self.root, "split", "time", f"{name}.csv.gz")


@dataclass(frozen=True)
class WikiPaths:
    """Paths of WikiKG90Mv2's files under ``ROOT/wikikg90m-v2`` (as ogb's
    ``WikiKG90Mv2Dataset`` reads them)."""

    root: str

    @classmethod
    def under(cls, root: str | os.PathLike) -> WikiPaths:
        """The paths under ``root`` (holding ``wikikg90m-v2/``, or that folder)."""
        root = os.fspath(root)
        if os.path.basename(os.path.normpath(root)) != WIKIKG90MV2_DIR:
            root = os.path.join(root, WIKIKG90MV2_DIR)
        return cls(root)

    @property
    def meta(self) -> str:
        """``meta.pt`` (a dict with ``num_entities`` and ``num_relations``)."""
        return os.path.join(self.root, "meta.pt")

    def processed(self, name: str) -> str:
        """``processed/<name>.npy``: ``train_hrt``, ``entity_feat``, ``relation_feat``,
        ``val_hr``, ``val_t``, ``test-dev_hr``, ``test-challenge_hr``."""
        return os.path.join(self.root, "processed", f"{name}.npy")
