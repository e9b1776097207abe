"""A synthetic MAG240M in the exact layout of ``mag240m_kddcup2021`` (ogb 1.3).

Sizes are the true ones times ``scale``. Citations (both ends) and authorship follow power
laws, some
papers and authors are isolated, every relation holds duplicate edges, citations hold a few
self-loops, labels are NaN (none), a class id (train/valid) or -1 (hidden test label). Every
array is written block by block into ``.npy`` memory maps, so a scale larger than RAM works.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from preprocess.ogb.layout import MAG240M, MAG240M_DIR, MagPaths
from preprocess.synth._gen import (
    CITE_SRC_ALPHA,
    FeatureMaker,
    IdMap,
    edge_blocks,
    node_block,
    node_ranges,
    scaled,
)

__all__ = ["synth_mag240m", "MagSynthSpec"]

log = logging.getLogger(__name__)

#: nodes per block of years/labels.
NODE_BLOCK = 1 << 20


@dataclass(frozen=True)
class MagSynthSpec:
    """Counts of a synthetic MAG240M."""

    paper: int
    author: int
    institution: int
    writes: int
    affiliated_with: int
    cites: int
    num_classes: int = MAG240M["num_classes"]
    feat_dim: int = MAG240M["feat_dim"]

    @classmethod
    def at_scale(cls, scale: float) -> MagSynthSpec:
        """The twin at ``scale`` times MAG240M's sizes (1 = the true size)."""
        if not scale > 0:
            raise ValueError(f"Expected a scale > 0. Got {scale!r} instead.")
        return cls(paper=scaled(MAG240M["paper"], scale, 10),
                   author=scaled(MAG240M["author"], scale, 10),
                   institution=scaled(MAG240M["institution"], scale, 3),
                   writes=scaled(MAG240M["writes"], scale, 10),
                   affiliated_with=scaled(MAG240M["affiliated_with"], scale, 5),
                   cites=scaled(MAG240M["cites"], scale, 10))

    @property
    def feature_bytes(self) -> int:
        """Bytes of the fp16 paper features."""
        return self.paper * self.feat_dim * 2

    @property
    def num_edges(self) -> int:
        """Edges of the three relations."""
        return self.writes + self.affiliated_with + self.cites


def synth_mag240m(root: str | os.PathLike, scale: float, *, seed: int = 0,
                  labeled_share: float = 0.0115, progress: bool = True,
                  spec: MagSynthSpec | None = None) -> MagPaths:
    """Write a synthetic MAG240M under ``root/mag240m_kddcup2021``.

    Parameters
    ----------
    root
        Directory to hold ``mag240m_kddcup2021/`` (created; existing files are replaced).
    scale
        Fraction of the true sizes (``1`` = 121.8M papers, 1.73B edges, 187 GB of features).
    seed
        Same seed and scale give byte-identical files.
    labeled_share
        Share of papers with a label (the true data: about 1.15%).
    spec
        Explicit counts instead of ``scale`` (tests).

    Returns
    -------
    MagPaths
        The paths of the files written.
    """
    spec = spec or MagSynthSpec.at_scale(scale)
    paths = MagPaths.under(os.path.join(os.fspath(root), MAG240M_DIR))
    os.makedirs(paths.root, exist_ok=True)
    log.info("synth mag240m: %d papers, %d authors, %d institutions, %d edges, %.2f GB features",
             spec.paper, spec.author, spec.institution, spec.num_edges, spec.feature_bytes / 1e9)
    _write_papers(paths, spec, seed, labeled_share, progress)
    papers = IdMap.make(spec.paper, 0.96, seed + 1)
    authors = IdMap.make(spec.author, 0.97, seed + 2)
    insts = IdMap.make(spec.institution, 1.0, seed + 3)
    # authorship: prolific authors (power law) x papers; affiliations: big institutions.
    _write_edges(paths.edge_index("author", "writes", "paper"), seed, 0, spec.writes,
                 authors, papers, dict(src_alpha=2.0, dst_alpha=None), progress)
    _write_edges(paths.edge_index("author", "affiliated_with", "institution"), seed, 1,
                 spec.affiliated_with, IdMap.make(spec.author, 0.6, seed + 4), insts,
                 dict(src_alpha=None, dst_alpha=3.0), progress)
    # citations (Chung-Lu): citing and cited papers both follow power laws, with their heavy
    # papers at independent scrambled ids (uniform sources would make every sampled
    # neighbourhood a uniform draw: nothing to cache, unlike real citation graphs).
    _write_edges(paths.edge_index("paper", "cites", "paper"), seed, 2, spec.cites,
                 papers.reranked(seed + 5), papers,
                 dict(src_alpha=CITE_SRC_ALPHA, dst_alpha=2.5, self_loop_share=1e-4), progress)
    _save_pt({"paper": spec.paper, "author": spec.author, "institution": spec.institution,
              "num_classes": spec.num_classes}, paths.meta)
    with open(os.path.join(paths.root, "RELEASE_v1.txt"), "w") as f:
        f.write("synthetic MAG240M twin written by featurestore synth\n")
    return paths


def _write_papers(paths: MagPaths, spec: MagSynthSpec, seed: int, labeled_share: float,
                  progress: bool) -> None:
    n = spec.paper
    os.makedirs(os.path.dirname(paths.paper("node_feat")), exist_ok=True)
    year = _open_npy(paths.paper("node_year"), (n,), np.int64)
    label = _open_npy(paths.paper("node_label"), (n,), np.float32)
    splits: dict[int, list[np.ndarray]] = {1: [], 2: [], 3: []}
    for lo, hi in node_ranges(n, NODE_BLOCK):
        y, lab, sp = node_block(seed, lo, hi, spec.num_classes, labeled_share)
        lab[sp == 3] = -1.0  # hidden test labels
        year[lo:hi] = y
        label[lo:hi] = lab
        for k in splits:
            splits[k].append(lo + np.flatnonzero(sp == k))
    _close_npy(year, paths.paper("node_year"))
    _close_npy(label, paths.paper("node_label"))
    cat = {k: np.concatenate(v).astype(np.int64) for k, v in splits.items()}
    _save_pt({"train": cat[1], "valid": cat[2], "test": cat[3]}, paths.split_dict)

    maker = FeatureMaker(seed, spec.num_classes, spec.feat_dim, np.float16)
    feat = _open_npy(paths.paper("node_feat"), (n, spec.feat_dim), np.float16)
    step = maker.block_rows()
    for lo, hi in tqdm(list(node_ranges(n, step)), desc="paper features", unit="block",
                       disable=not progress):
        feat[lo:hi] = maker.rows(lo, hi)
    _close_npy(feat, paths.paper("node_feat"))


def _write_edges(path: str, seed: int, stream: int, num_edges: int, src: IdMap, dst: IdMap,
                 kw: dict, progress: bool) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    out = _open_npy(path, (2, num_edges), np.int64)
    name = os.path.basename(os.path.dirname(path))
    blocks = edge_blocks(seed, stream, num_edges, src, dst, **kw)
    for lo, s, d in tqdm(blocks, desc=name, unit="block", disable=not progress,
                         total=-(-num_edges // (1 << 22))):
        out[0, lo:lo + len(s)] = s
        out[1, lo:lo + len(d)] = d
    _close_npy(out, path)


def _open_npy(path: str, shape, dtype) -> np.memmap:
    return np.lib.format.open_memmap(path + ".partial", mode="w+", dtype=dtype, shape=shape)


def _close_npy(arr: np.memmap, path: str) -> None:
    arr.flush()
    del arr
    os.replace(path + ".partial", path)


def _save_pt(obj, path: str) -> None:
    import torch

    torch.save(obj, path + ".partial")
    os.replace(path + ".partial", path)
