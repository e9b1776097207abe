"""Graphs with community structure: a sparse stochastic block model (SBM) with block-correlated
labels and features, written as a dataset that ``featurestore preprocess spec`` ingests.

Layout of ``ROOT`` (``featurestore synth sbm ROOT --nodes N --blocks B``)::

    edges.npy   int32 [2, E]: E undirected edges as drawn (no self loops; the rare duplicate
                pairs are coalesced by the spec, ``undirected: true`` adds the reverse edges)
    block.npy   int32 [N]: the block of every node (a per-node value array ``block`` in the store)
    label.npy   int64 [N]: ``block % classes``, except a ``label_noise`` share of random classes
    feat.npy    [N, dim] float16 (or float32): noise around the label's centroid
    train.npy, valid.npy, test.npy   int64 store ids, sorted: a uniform random share of nodes
    spec.yaml   the dataset spec (``featurestore preprocess spec ROOT/spec.yaml STORE``)
    meta.json   parameters, counts, the expected and drawn share of edges inside blocks

**The model.** ``B`` blocks of ``N / B`` nodes (sizes differ by at most one); two nodes of one
block are linked with probability ``p_in``, of two blocks with ``p_out``. A sparse graph is drawn
edge by edge rather than pair by pair: ``E = round(N * (d_in + d_out) / 2)`` edges, where
``d_in = p_in * (N/B - 1)`` and ``d_out = p_out * (N - N/B)`` are a node's expected degrees
inside and outside its block (they can be given instead of the probabilities). Each edge takes
a uniform source node, then with probability ``d_in / (d_in + d_out)`` a uniform other node of
the source's block, else a uniform node of another block; so every block pair gets ``pairs * p``
edges in expectation. Nodes are placed in blocks by a random permutation, so a block is not a
range of ids (as in a real graph's numbering).

Every draw is a counter-based hash of ``(seed, stream, index)`` (:mod:`.rmat`'s splitmix64), so
the files are the same whatever the thread count or block size; edges and features are drawn
in blocks straight into the files. Memory held for the whole graph: the permutation and the
block of each node (4 bytes per node each) and the labels (8).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field

import numba
import numpy as np

from preprocess.errors import BadInputError
from preprocess.progress import bar
from preprocess.synth.rmat import (
    EDGE_BLOCK,
    FEAT_BLOCK_BYTES,
    SPEC_NAME,
    _draw,
    _feature_block,
    _hash_ids,
    _npy_writer,
    centroids,
    stream_key,
)

__all__ = ["synth_sbm", "SbmSpec", "SbmResult", "sbm_edges", "sbm_blocks", "sbm_labels",
           "SPEC_NAME"]

log = logging.getLogger(__name__)

# streams of the counter-based generator (distinct from R-MAT's)
_S_EDGES, _S_FEAT, _S_LABEL, _S_SPLIT, _S_PERM = 11, 12, 13, 14, 15
_MAX_NODES = 2**31 - 1


@dataclass(frozen=True)
class SbmSpec:
    """Parameters of an SBM dataset (average degrees inside and outside a node's block)."""

    nodes: int = 10_000
    blocks: int = 10
    deg_in: float = 12.0
    deg_out: float = 3.0
    dim: int = 64
    dtype: str = "float16"
    seed: int = 0
    classes: int | None = None
    label_noise: float = 0.1
    train_share: float = 0.1

    def __post_init__(self):
        if not (isinstance(self.nodes, int) and 2 <= self.nodes <= _MAX_NODES):
            raise BadInputError(f"Expected an integer node count in 2..{_MAX_NODES}. "
                                f"Got {self.nodes!r}.")
        if not (isinstance(self.blocks, int) and 1 <= self.blocks and
                2 * self.blocks <= self.nodes):
            raise BadInputError(f"Expected 1 <= blocks <= nodes / 2 (two nodes a block). "
                                f"Got blocks={self.blocks!r} for {self.nodes} nodes.")
        if self.deg_in < 0 or self.deg_out < 0 or self.deg_in + self.deg_out <= 0:
            raise BadInputError(f"Expected non-negative degrees, not both 0. Got deg_in="
                                f"{self.deg_in!r}, deg_out={self.deg_out!r}.")
        if self.blocks == 1 and self.deg_out > 0:
            raise BadInputError("Expected deg_out = 0 (or p_out = 0) with a single block. "
                                f"Got {self.deg_out!r}.")
        if self.dim < 1:
            raise BadInputError(f"Expected a feature dim >= 1. Got {self.dim!r}.")
        if np.dtype(self.dtype) not in (np.float16, np.float32):
            raise BadInputError(f"Expected dtype float16 or float32. Got {self.dtype!r}.")
        if self.classes is not None and self.classes < 1:
            raise BadInputError(f"Expected classes >= 1. Got {self.classes!r}.")
        if not 0 <= self.label_noise <= 1:
            raise BadInputError(f"Expected a label noise in [0, 1]. Got {self.label_noise!r}.")
        if not 0 < self.train_share <= 0.6:
            raise BadInputError(f"Expected a train share in (0, 0.6]. Got {self.train_share!r}.")

    @classmethod
    def from_probabilities(cls, nodes: int, blocks: int, p_in: float, p_out: float,
                           **kw) -> SbmSpec:
        """The spec with ``p_in`` / ``p_out`` (link probabilities) turned into degrees."""
        for name, p in (("p_in", p_in), ("p_out", p_out)):
            if not 0 <= p <= 1:
                raise BadInputError(f"Expected {name} in [0, 1]. Got {p!r}.")
        nb = nodes / max(blocks, 1)
        return cls(int(nodes), int(blocks), p_in * (nb - 1), p_out * (nodes - nb), **kw)

    @property
    def num_classes(self) -> int:
        """Label classes (one per block unless ``classes`` is given)."""
        return self.blocks if self.classes is None else int(self.classes)

    @property
    def num_edges(self) -> int:
        """Undirected edges drawn."""
        return int(round(self.nodes * (self.deg_in + self.deg_out) / 2))

    @property
    def q_in(self) -> float:
        """Probability that an edge joins two nodes of one block."""
        return self.deg_in / (self.deg_in + self.deg_out)

    def expected_intra_share(self) -> float:
        """Share of the (distinct) edges inside blocks, from the model (``q_in``)."""
        return self.q_in


@dataclass
class SbmResult:
    """What :func:`synth_sbm` wrote."""

    root: str
    spec_path: str
    meta: dict = field(default_factory=dict)


# -- kernels ----------------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True, inline="always")
def _below(h, n):
    """A uniform integer in ``[0, n)`` from the top 32 bits of ``h`` (n < 2**32)."""
    return np.int64(((h >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


@numba.njit(nogil=True, parallel=True, cache=True)
def _sbm_block(key, lo, n, nblocks, q32, perm, out_src, out_dst):
    """Edges ``lo .. lo+len(out_src)-1`` (see the module's doc); returns how many are inside a
    block. Positions ``p`` in ``[0, n)`` are block ``p * B // n``; ``perm[p]`` is the node."""
    inside = 0
    for i in numba.prange(out_src.shape[0]):
        e = np.uint64(lo + i) * np.uint64(2)
        h = _draw(key, e)
        h2 = _draw(key, e + np.uint64(1))
        p = _below(h, n)
        b = p * nblocks // n
        b_lo = (b * n + nblocks - 1) // nblocks
        b_hi = ((b + 1) * n + nblocks - 1) // nblocks
        if (h & np.uint64(0xFFFFFFFF)) < q32:  # inside the block, another node
            r = b_lo + _below(h2, b_hi - b_lo - 1)
            if r >= p:
                r += 1
            inside += 1
        else:  # a node of another block
            r = _below(h2, n - (b_hi - b_lo))
            if r >= b_lo:
                r += b_hi - b_lo
        out_src[i] = perm[p]
        out_dst[i] = perm[r]
    return inside


def _permutation(spec: SbmSpec) -> np.ndarray:
    """``perm[position] = node``: which node holds each block position."""
    return np.random.default_rng([spec.seed, _S_PERM]).permutation(spec.nodes).astype(np.int32)


def sbm_blocks(spec: SbmSpec, perm: np.ndarray | None = None) -> np.ndarray:
    """The block of every node (``int32``)."""
    perm = _permutation(spec) if perm is None else perm
    n, b = spec.nodes, spec.blocks
    out = np.empty(n, np.int32)
    step = 1 << 22
    for lo in range(0, n, step):
        pos = np.arange(lo, min(n, lo + step), dtype=np.int64)
        out[perm[lo:lo + step]] = pos * b // n
    return out


def sbm_edges(spec: SbmSpec, lo: int, hi: int,
              perm: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Edges ``lo .. hi-1`` of the dataset: ``(src, dst, inside)`` (``inside``: how many of them
    join two nodes of one block)."""
    perm = _permutation(spec) if perm is None else perm
    s = np.empty(hi - lo, np.int32)
    d = np.empty(hi - lo, np.int32)
    inside = _sbm_block(stream_key(spec.seed, _S_EDGES), lo, spec.nodes, spec.blocks,
                        _q32(spec.q_in), perm, s, d)
    return s, d, int(inside)


def _q32(q: float) -> np.uint64:
    return np.uint64(min(int(round(q * 2**32)), 2**32))


def _uniform(seed: int, stream: int, lo: int, hi: int) -> np.ndarray:
    """One uniform ``[0, 1)`` draw per node ``lo .. hi-1`` of a stream."""
    h = np.empty(hi - lo, np.uint64)
    _hash_ids(stream_key(seed, stream), np.arange(lo, hi, dtype=np.int64), h)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def sbm_labels(spec: SbmSpec, block: np.ndarray) -> np.ndarray:
    """``block % classes``, a ``label_noise`` share replaced by a random class (``int64``)."""
    n, c = spec.nodes, spec.num_classes
    lab = (block % c).astype(np.int64)
    step = 1 << 22
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        u = _uniform(spec.seed, _S_LABEL, lo, hi)
        noisy = u < spec.label_noise
        # the draw's value below the noise share, rescaled, picks the class
        lab[lo:hi][noisy] = np.minimum((u[noisy] / max(spec.label_noise, 1e-300) * c)
                                       .astype(np.int64), c - 1)
    return lab


def _features(spec: SbmSpec, lo: int, hi: int, labels: np.ndarray,
              cent: np.ndarray) -> np.ndarray:
    from preprocess.steps.kernels import f32_to_f16

    x = np.empty((hi - lo, spec.dim), np.float32)
    _feature_block(stream_key(spec.seed, _S_FEAT), lo, cent, labels[lo:hi],
                   np.float32(np.sqrt(3.0)), x)
    if np.dtype(spec.dtype) == np.float32:
        return x
    out = np.empty((hi - lo, spec.dim), np.float16)
    f32_to_f16(x.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


# -- the dataset ----------------------------------------------------------------------------------
def _write_edges(spec: SbmSpec, path: str, perm: np.ndarray, progress: bool) -> int:
    """Draw the edges block by block into ``path`` (``.npy`` int32 [2, E]); inside count."""
    e = spec.num_edges
    tmp = path + ".partial"
    off = _npy_writer(tmp, (2, e), np.int32)
    key = stream_key(spec.seed, _S_EDGES)
    q32 = _q32(spec.q_in)
    s = np.empty(min(EDGE_BLOCK, e), np.int32)
    d = np.empty(min(EDGE_BLOCK, e), np.int32)
    inside = 0
    with open(tmp, "r+b") as f, bar(e, "sbm edges", progress) as pb:
        for lo in range(0, e, EDGE_BLOCK):
            k = min(EDGE_BLOCK, e - lo)
            inside += int(_sbm_block(key, lo, spec.nodes, spec.blocks, q32, perm, s[:k], d[:k]))
            f.seek(off + lo * 4)
            f.write(memoryview(s[:k]).cast("B"))
            f.seek(off + (e + lo) * 4)
            f.write(memoryview(d[:k]).cast("B"))
            pb.update(k)
    os.replace(tmp, path)
    return inside


def _write_features(spec: SbmSpec, path: str, labels: np.ndarray, progress: bool) -> None:
    n = spec.nodes
    tmp = path + ".partial"
    dt = np.dtype(spec.dtype)
    off = _npy_writer(tmp, (n, spec.dim), dt)
    row_bytes = spec.dim * dt.itemsize
    step = max(1, FEAT_BLOCK_BYTES // (spec.dim * 4))
    cent = centroids(spec.seed, spec.num_classes, spec.dim)
    with open(tmp, "r+b") as f, bar(n, "sbm features", progress, unit="row") as pb:
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            f.seek(off + lo * row_bytes)
            f.write(memoryview(_features(spec, lo, hi, labels, cent)).cast("B"))
            pb.update(hi - lo)
    os.replace(tmp, path)


def _splits(spec: SbmSpec) -> dict[str, np.ndarray]:
    """Train, valid, test: the nodes whose uniform draw is below ``t``, ``1.25 t``, ``1.5 t``."""
    t = spec.train_share
    cuts = {"train": (0.0, t), "valid": (t, 1.25 * t), "test": (1.25 * t, 1.5 * t)}
    parts: dict[str, list] = {k: [] for k in cuts}
    step = 1 << 22
    for lo in range(0, spec.nodes, step):
        hi = min(spec.nodes, lo + step)
        u = _uniform(spec.seed, _S_SPLIT, lo, hi)
        for k, (a, b) in cuts.items():
            parts[k].append(lo + np.flatnonzero((u >= a) & (u < b)))
    return {k: np.concatenate(v).astype(np.int64) for k, v in parts.items()}


def _save(path: str, arr: np.ndarray) -> None:
    np.save(path + ".partial.npy", arr)
    os.replace(path + ".partial.npy", path)


def synth_sbm(root: str | os.PathLike, spec: SbmSpec | None = None, *,
              progress: bool = True) -> SbmResult:
    """Write an SBM dataset (see the module's doc) into the directory ``root``.

    Existing files of the dataset are replaced; the spec file and ``meta.json`` are written
    last, so a dataset with a spec is complete.

    Example::

        synth_sbm("sbm", SbmSpec(nodes=200_000, blocks=20))
        # then: featurestore preprocess spec sbm/spec.yaml sbm.store
    """
    spec = spec or SbmSpec()
    root = os.path.abspath(os.fspath(root))
    os.makedirs(root, exist_ok=True)
    for name in (SPEC_NAME, "meta.json"):
        if os.path.exists(os.path.join(root, name)):
            os.remove(os.path.join(root, name))
    log.info("synth sbm: %d nodes in %d blocks, %d edges (degree %.1f inside, %.1f outside)",
             spec.nodes, spec.blocks, spec.num_edges, spec.deg_in, spec.deg_out)
    path = {k: os.path.join(root, f"{k}.npy") for k in ("edges", "block", "label", "feat",
                                                           "train", "valid", "test")}
    times: dict[str, float] = {}
    t = time.perf_counter()
    perm = _permutation(spec)
    inside = _write_edges(spec, path["edges"], perm, progress)
    times["edges"] = time.perf_counter() - t
    t = time.perf_counter()
    block = sbm_blocks(spec, perm)
    del perm
    _save(path["block"], block)
    labels = sbm_labels(spec, block)
    del block
    _save(path["label"], labels)
    _write_features(spec, path["feat"], labels, progress)
    del labels
    times["labels_features"] = time.perf_counter() - t
    t = time.perf_counter()
    parts = _splits(spec)
    for k, ids in parts.items():
        _save(path[k], ids)
    times["split"] = time.perf_counter() - t
    meta = {"generator": "featurestore synth sbm", "params": asdict(spec),
            "num_nodes": spec.nodes, "num_edges_drawn": spec.num_edges,
            "num_classes": spec.num_classes,
            "expected_intra_share": spec.expected_intra_share(),
            "drawn_intra_share": inside / max(spec.num_edges, 1),
            "splits": {k: int(v.size) for k, v in parts.items()}, "seconds": times}
    with open(os.path.join(root, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    sp = os.path.join(root, SPEC_NAME)
    with open(sp + ".partial", "w") as f:
        f.write(_spec_yaml(spec, {k: v.size for k, v in parts.items()}))
    os.replace(sp + ".partial", sp)
    return SbmResult(root, sp, meta)


def _spec_yaml(spec: SbmSpec, sizes: dict) -> str:
    splits = "".join(f"  {k}: {{node: {k}.npy}}\n" for k, v in sizes.items() if v)
    return (
        f"# stochastic block model: {spec.nodes} nodes, {spec.blocks} blocks, degree "
        f"{spec.deg_in:g} inside / {spec.deg_out:g} outside, seed {spec.seed}: written by "
        "featurestore synth sbm\n"
        f"name: sbm-n{spec.nodes}-b{spec.blocks}\n"
        "nodes:\n"
        "  node:\n"
        f"    count: {spec.nodes}\n"
        "    features:\n"
        "      feat: feat.npy\n"
        "    labels: label.npy\n"
        "    values:\n"
        "      block: block.npy\n"
        "edges:\n"
        "  - relation: [node, to, node]\n"
        "    path: edges.npy\n"
        "    undirected: true            # both directions, duplicates removed\n"
        "splits:\n" + splits +
        "options:\n"
        "  drop_self_loops: true\n"
        "  coalesce: true\n")
