"""A synthetic ogbn-papers100M in its binary layout (``raw/data.npz``, ``raw/node-label.npz``,
``split/time/*.csv.gz``).

The ``.npz`` members are streamed into the zip block by block (stored by default, deflated
with ``compress=True`` like the official download), so a scale larger than RAM works.
"""

from __future__ import annotations

import gzip
import logging
import os
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from preprocess.ogb.layout import PAPERS100M, PAPERS100M_DIR, PAPERS100M_SPLITS, PapersPaths
from preprocess.ogb.npz import NpzWriter
from preprocess.synth._gen import (
    CITE_SRC_ALPHA,
    EDGE_BLOCK,
    FeatureMaker,
    IdMap,
    edge_blocks,
    node_block,
    node_ranges,
    scaled,
)

__all__ = ["synth_papers100m", "PapersSynthSpec"]

log = logging.getLogger(__name__)

NODE_BLOCK = 1 << 20


@dataclass(frozen=True)
class PapersSynthSpec:
    """Counts of a synthetic ogbn-papers100M."""

    nodes: int
    edges: int
    num_classes: int = PAPERS100M["num_classes"]
    feat_dim: int = PAPERS100M["feat_dim"]

    @classmethod
    def at_scale(cls, scale: float) -> PapersSynthSpec:
        """The twin at ``scale`` times ogbn-papers100M's sizes."""
        if not scale > 0:
            raise ValueError(f"Expected a scale > 0. Got {scale!r} instead.")
        return cls(nodes=scaled(PAPERS100M["nodes"], scale, 10),
                   edges=scaled(PAPERS100M["edges"], scale, 10))


def synth_papers100m(root: str | os.PathLike, scale: float, *, seed: int = 0,
                     labeled_share: float = 0.014, compress: bool = False,
                     progress: bool = True, spec: PapersSynthSpec | None = None) -> PapersPaths:
    """Write a synthetic ogbn-papers100M under ``root/ogbn_papers100M``.

    Parameters
    ----------
    root
        Directory to hold ``ogbn_papers100M/`` (created; existing files are replaced).
    scale
        Fraction of the true sizes (``1`` = 111M nodes, 1.6B edges, 57 GB of features).
    seed
        Same seed and scale give identical arrays.
    labeled_share
        Share of nodes with a label (the true data: about 1.4%).
    compress
        Deflate the ``.npz`` members (the official files are compressed); stored otherwise.
    spec
        Explicit counts instead of ``scale`` (tests).
    """
    spec = spec or PapersSynthSpec.at_scale(scale)
    paths = PapersPaths.under(os.path.join(os.fspath(root), PAPERS100M_DIR))
    os.makedirs(os.path.dirname(paths.data), exist_ok=True)
    os.makedirs(os.path.dirname(paths.split("train")), exist_ok=True)
    n, e = spec.nodes, spec.edges
    log.info("synth papers100m: %d nodes, %d edges, %.2f GB features", n, e,
             n * spec.feat_dim * 4 / 1e9)
    nodes = IdMap.make(n, 0.95, seed + 1)
    # Chung-Lu citations: citing and cited papers both power-law, heavy ids independent
    kw = dict(src_alpha=CITE_SRC_ALPHA, dst_alpha=2.5, self_loop_share=1e-4)
    nblocks = -(-e // EDGE_BLOCK)
    maker = FeatureMaker(seed, spec.num_classes, spec.feat_dim, np.float32)

    def ends(which: int):
        it = edge_blocks(seed, 0, e, nodes.reranked(seed + 5), nodes, **kw)
        for _, s, d in tqdm(it, total=nblocks, unit="block", disable=not progress,
                            desc="edge_index " + ("src" if which == 0 else "dst")):
            yield s if which == 0 else d

    def nodes_of(what: str):
        for lo, hi in node_ranges(n, NODE_BLOCK):
            year, label, _ = node_block(seed, lo, hi, spec.num_classes, labeled_share)
            yield year if what == "year" else label

    with NpzWriter(paths.data, compress=compress) as z:
        # C order [2, E]: every source, then every destination (regenerated, same stream).
        z.write("edge_index", (2, e), np.int64, _chain(ends(0), ends(1)))
        step = maker.block_rows()
        feats = (maker.rows(lo, hi) for lo, hi in tqdm(
            list(node_ranges(n, step)), desc="node_feat", unit="block", disable=not progress))
        z.write("node_feat", (n, spec.feat_dim), np.float32, feats)
        z.write("node_year", (n, 1), np.int64, nodes_of("year"))
        z.write_array("num_nodes_list", np.array([n], np.int64))
        z.write_array("num_edges_list", np.array([e], np.int64))
    with NpzWriter(paths.node_label, compress=compress) as z:
        z.write("node_label", (n, 1), np.float64, nodes_of("label"))
    files = {name: gzip.open(paths.split(name) + ".partial", "wt", compresslevel=1)
             for name in PAPERS100M_SPLITS}
    try:
        for lo, hi in node_ranges(n, NODE_BLOCK):
            _, _, sp = node_block(seed, lo, hi, spec.num_classes, labeled_share)
            for k, name in enumerate(PAPERS100M_SPLITS, start=1):
                ids = lo + np.flatnonzero(sp == k)
                if ids.size:
                    files[name].write("\n".join(map(str, ids.tolist())) + "\n")
    finally:
        for f in files.values():
            f.close()
    for name in PAPERS100M_SPLITS:
        os.replace(paths.split(name) + ".partial", paths.split(name))
    with open(os.path.join(paths.root, "RELEASE_v1.txt"), "w") as f:
        f.write("synthetic ogbn-papers100M twin written by featurestore synth\n")
    return paths


def _chain(*its):
    for it in its:
        yield from it
