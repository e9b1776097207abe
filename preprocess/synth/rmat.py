"""Skewed synthetic graphs: R-MAT (Graph500 parameters) with scrambled ids, a clustered
training split, labels and features, written as a dataset that ``featurestore preprocess
spec`` ingests unchanged.

Layout of ``ROOT`` (``featurestore synth rmat ROOT --scale S --edge-factor F``)::

    edges.npy   int32 (int64 from scale 31) [2, E]: E = F * 2**S directed R-MAT edges, as drawn
                (self loops and duplicates included; the spec's ``undirected: true`` adds the
                reverse of every edge and coalesces, ``drop_self_loops`` removes the loops)
    feat.npy    [2**S, dim] float16 (or float32): noise plus a class centroid
    label.npy   int64 [2**S]: class of every node (a hash of its id)
    train.npy, valid.npy, test.npy   int64 store ids, sorted
    spec.yaml   the dataset spec (``featurestore preprocess spec ROOT/spec.yaml STORE``)
    meta.json   parameters, counts, degree statistics, seconds per stage

Every random draw is a counter-based hash (splitmix64) of ``(seed, stream, index)``, so each
block of edges or feature rows is a pure function of its position: the files are identical
whatever the thread count or block size. Memory stays bounded: edges and features are drawn
in blocks and written straight to the files; what is held for the whole graph is the id
permutation (4-8 bytes per node), the degrees (4 per node) and one byte per node for the
split's ball.

**R-MAT.** Each edge picks one of the four quadrants of the adjacency matrix per level
(``a, b, c, d = 0.57, 0.19, 0.19, 0.05``, from 16 bits of hash each), for ``scale`` levels;
``(row, column) = (source, destination)``. Node ids are then scrambled by a random
permutation of ``[0, 2**S)`` (Graph500 does the same), so hubs are not the low ids.

**The clustered split.** Real training sets are a community (the arXiv papers of
papers100M), not a uniform sample, and that is what makes their sampled neighbourhoods
cacheable. The split is a *ball*: a breadth-first search over the (undirected) edge file from
a few random roots, one pass over the edges per level, that does not expand through hubs
(nodes of degree above 8x the mean: in a small-world graph two hops through a hub reach
everything), cut at the level that overshoots the wanted size by a random choice of that
level's nodes weighted by 1/degree (a BFS level over-represents high-degree nodes; this keeps
the split's degrees like the graph's). The ball holds ``train_share * connected`` nodes for
``train`` and a quarter of that each for ``valid`` and ``test``, assigned at random within the
ball (the three splits are one community, as in ogbn-arxiv / papers100M).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field

import numba
import numpy as np

from preprocess.errors import BadInputError
from preprocess.progress import bar

__all__ = ["synth_rmat", "RmatSpec", "RmatResult", "RMAT_ABCD", "rmat_edges", "rmat_features",
           "quadrant_thresholds", "SPEC_NAME"]

log = logging.getLogger(__name__)

#: Graph500's R-MAT parameters.
RMAT_ABCD = (0.57, 0.19, 0.19, 0.05)
#: name of the spec file written into the dataset directory.
SPEC_NAME = "spec.yaml"
#: edges per generated block (two int32 arrays: 32 MiB).
EDGE_BLOCK = 1 << 22
#: bytes of features per generated block.
FEAT_BLOCK_BYTES = 64 << 20
#: a node above this multiple of the mean degree is a hub: the split's ball does not cross it.
HUB_FACTOR = 8.0

# streams of the counter-based generator: one per kind of draw.
_S_EDGES, _S_FEAT, _S_LABEL, _S_PRIO, _S_CENTROID, _S_PERM, _S_ROOTS = 1, 2, 3, 4, 5, 6, 7

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


# -- counter-based random numbers -------------------------------------------------------------
@numba.njit(nogil=True, cache=True, inline="always")
def _mix(z):
    """splitmix64's finaliser (a bijection of uint64 with full avalanche)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(nogil=True, cache=True, inline="always")
def _draw(key, counter):
    """The ``counter``-th 64-bit draw of the stream ``key`` (splitmix64 at that position)."""
    return _mix(key + (np.uint64(counter) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15))


def stream_key(seed: int, stream: int) -> np.uint64:
    """The key of one stream of one seed (a plain-Python splitmix64, for numba's arguments)."""
    m = (1 << 64) - 1

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        return z ^ (z >> 31)

    return np.uint64(mix((mix(int(seed) & m) + stream * 0x632BE59BD9B4E019) & m))


@numba.njit(nogil=True, cache=True)
def _hash_ids(key, ids, out):
    """``out[i] = draw(key, ids[i])``: a per-node random priority / class."""
    for i in range(ids.shape[0]):
        out[i] = _draw(key, ids[i])


# -- R-MAT edges ----------------------------------------------------------------------------------
def quadrant_thresholds(abcd=RMAT_ABCD) -> np.ndarray:
    """Cumulative quadrant probabilities as 16-bit thresholds ``[a, a+b, a+b+c]`` (uint64):
    a level's 16 random bits ``r`` pick ``a`` if ``r < t0``, ``b`` if ``r < t1``, ``c`` if
    ``r < t2``, else ``d``. The quantisation error is below 2**-16 per quadrant."""
    a, b, c, d = abcd
    if min(abcd) < 0 or abs(a + b + c + d - 1) > 1e-9:
        raise BadInputError(f"Expected four non-negative R-MAT probabilities summing to 1. "
                            f"Got {abcd}.")
    cum = np.cumsum([a, b, c])
    return np.minimum(np.round(cum * 65536), 65536).astype(np.uint64)


@numba.njit(nogil=True, parallel=True, cache=True)
def _rmat_block(key, lo, scale, thr, perm, out_src, out_dst):
    """Edges ``lo .. lo+len(out_src)-1``: ``scale`` quadrant choices each, 4 per 64-bit draw,
    then both ends mapped through ``perm`` (the id scramble)."""
    t0, t1, t2 = thr[0], thr[1], thr[2]
    groups = (scale + 3) // 4
    for i in numba.prange(out_src.shape[0]):
        e = np.uint64(lo + i) * np.uint64(groups)
        u = np.int64(0)
        v = np.int64(0)
        h = np.uint64(0)
        for lev in range(scale):
            if lev % 4 == 0:
                h = _draw(key, e + np.uint64(lev // 4))
            r = h & np.uint64(0xFFFF)
            h = h >> np.uint64(16)
            bu = np.int64(1) if r >= t1 else np.int64(0)                   # c or d: row bit
            bv = np.int64(1) if (r >= t0 and r < t1) or r >= t2 else np.int64(0)  # b or d
            u = (u << 1) | bu
            v = (v << 1) | bv
        out_src[i] = perm[u]
        out_dst[i] = perm[v]


def rmat_edges(seed: int, scale: int, lo: int, hi: int, perm: np.ndarray | None = None,
               abcd=RMAT_ABCD, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Edges ``lo .. hi-1`` of the R-MAT stream ``seed``: ``(src, dst)``; ``perm`` scrambles
    the ids (``None``: the raw quadrant ids, for tests)."""
    if perm is None:
        perm = np.arange(1 << scale, dtype=np.int64)
    s = np.empty(hi - lo, dtype)
    d = np.empty(hi - lo, dtype)
    _rmat_block(stream_key(seed, _S_EDGES), lo, scale, quadrant_thresholds(abcd), perm, s, d)
    return s, d


@numba.njit(nogil=True, cache=True)
def _count_degrees(src, dst, deg):
    """Undirected degree without self loops (duplicates counted)."""
    for i in range(src.shape[0]):
        s, d = src[i], dst[i]
        if s != d:
            deg[s] += 1
            deg[d] += 1


# -- features -----------------------------------------------------------------------------------
@numba.njit(nogil=True, parallel=True, cache=True)
def _feature_block(key, lo, centroids, labels, scale, out):
    """Rows ``lo .. lo+len(out)-1``: ``centroid[label] + scale * uniform(-1, 1)``, two values
    per 64-bit draw (float32 out; the caller casts)."""
    dim = out.shape[1]
    half = (dim + 1) // 2
    inv = np.float32(1.0 / 2147483648.0)
    for i in numba.prange(out.shape[0]):
        row = np.uint64(lo + i) * np.uint64(half)
        c = centroids[labels[i]]
        for j in range(half):
            h = _draw(key, row + np.uint64(j))
            x0 = np.float32(np.int64(h & np.uint64(0xFFFFFFFF)) - np.int64(2147483648)) * inv
            out[i, 2 * j] = c[2 * j] + scale * x0
            if 2 * j + 1 < dim:
                x1 = np.float32(np.int64(h >> np.uint64(32)) - np.int64(2147483648)) * inv
                out[i, 2 * j + 1] = c[2 * j + 1] + scale * x1


def node_labels(seed: int, lo: int, hi: int, num_classes: int) -> np.ndarray:
    """Class of nodes ``lo .. hi-1``: a hash of the id (so features can carry it)."""
    h = np.empty(hi - lo, np.uint64)
    _hash_ids(stream_key(seed, _S_LABEL), np.arange(lo, hi, dtype=np.int64), h)
    return (h % np.uint64(num_classes)).astype(np.int64)


def centroids(seed: int, num_classes: int, dim: int) -> np.ndarray:
    return np.random.default_rng([seed, _S_CENTROID]).standard_normal(
        (num_classes, dim), dtype=np.float32)


def rmat_features(seed: int, lo: int, hi: int, dim: int, num_classes: int,
                  dtype=np.float16, cent: np.ndarray | None = None) -> np.ndarray:
    """Feature rows ``lo .. hi-1`` (unit-variance uniform noise around the class centroid)."""
    from preprocess.steps.kernels import f32_to_f16

    cent = centroids(seed, num_classes, dim) if cent is None else cent
    x = np.empty((hi - lo, dim), np.float32)
    _feature_block(stream_key(seed, _S_FEAT), lo, cent, node_labels(seed, lo, hi, num_classes),
                   np.float32(math.sqrt(3.0)), x)
    if np.dtype(dtype) == np.float32:
        return x
    out = np.empty((hi - lo, dim), np.float16)
    f32_to_f16(x.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


# -- the clustered split -----------------------------------------------------------------------
@numba.njit(nogil=True, parallel=True, cache=True)
def _expand(src, dst, level, cur, deg, cap):
    """One BFS level over an undirected edge list: ``level[x] = cur + 1`` for every unvisited
    neighbour ``x`` of a node at level ``cur`` whose degree is at most ``cap`` (hubs join the
    ball but are not crossed).

    Racing writers all store the same value and ``cur + 1 != cur``, so the result is the same
    set whatever the thread count."""
    nxt = np.int8(cur + 1)
    c = np.int8(cur)
    for i in numba.prange(src.shape[0]):
        s, d = src[i], dst[i]
        if s == d:
            continue
        if level[s] == c and deg[s] <= cap and level[d] < 0:
            level[d] = nxt
        if level[d] == c and deg[d] <= cap and level[s] < 0:
            level[s] = nxt


def clustered_ball(src, dst, deg: np.ndarray, want: int, seed: int, *, roots: int = 8,
                   hub_factor: float = HUB_FACTOR, on_level=None) -> tuple[np.ndarray, dict]:
    """``want`` connected nodes forming a BFS ball (see the module's doc), sorted by a random
    priority (so any prefix is a random part of the ball); and statistics."""
    n = deg.shape[0]
    connected = np.flatnonzero(deg > 0)
    want = int(min(want, connected.size))
    if want <= 0:
        return np.empty(0, np.int64), {"roots": 0, "levels": 0}
    mean = float(deg[connected].mean())
    cap = max(int(hub_factor * mean), 1)
    level = np.full(n, -1, np.int8)
    rng = np.random.default_rng([seed, _S_ROOTS])
    order = rng.permutation(connected.size)  # roots are taken in this order
    next_root = 0
    used_roots = 0
    sizes: list[int] = []
    cur = 0
    total = 0

    def add_roots(k):
        nonlocal next_root, used_roots
        added = 0
        while added < k and next_root < order.size:
            r = connected[order[next_root]]
            next_root += 1
            if level[r] < 0:
                level[r] = cur
                added += 1
        used_roots += added
        return added

    add_roots(roots)
    sizes.append(int(np.count_nonzero(level == 0)))
    total = sizes[0]
    while total < want:
        if cur >= 120:
            raise BadInputError("Expected the split's ball to fill within 120 levels.")
        _expand(src, dst, level, cur, deg, cap)
        cur += 1
        got = int(np.count_nonzero(level == cur))
        if got == 0:  # the ball stalled (a small component, or only hubs around): new roots
            add_roots(roots)
            got = int(np.count_nonzero(level == cur))
            if got == 0:
                break
        sizes.append(got)
        total += got
        if on_level is not None:
            on_level(cur, total)
    ball = np.flatnonzero(level >= 0)
    if ball.size > want:
        # every level before the last, and from the last a random part weighted by 1/degree
        # (a BFS level holds nodes in proportion to their degree, the friendship paradox;
        # Efraimidis-Spirakis: the smallest -log(u) * degree), so the typical member's degree
        # stays near the graph's while the ball keeps its hubs (R-MAT's only clustering)
        inner = np.flatnonzero((level >= 0) & (level < cur))
        last = np.flatnonzero(level == cur)
        pr = np.empty(last.size, np.uint64)
        _hash_ids(stream_key(seed, _S_PRIO), last, pr)
        u = ((pr >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)
        last = last[np.argsort(-np.log(u) * deg[last], kind="stable")[:max(0, want - inner.size)]]
        ball = np.concatenate([inner, last])
    pr = np.empty(ball.size, np.uint64)
    _hash_ids(stream_key(seed, _S_PRIO + 16), ball, pr)
    ball = ball[np.argsort(pr, kind="stable")]
    return ball.astype(np.int64), {"roots": used_roots, "levels": cur, "level_sizes": sizes,
                                   "hub_degree_cap": cap}


# -- the dataset ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RmatSpec:
    """Parameters of an R-MAT dataset."""

    scale: int
    edge_factor: int = 16
    dim: int = 768
    dtype: str = "float16"
    seed: int = 0
    num_classes: int = 16
    train_share: float = 0.01
    abcd: tuple = RMAT_ABCD

    def __post_init__(self):
        if not (isinstance(self.scale, int) and 1 <= self.scale <= 40):
            raise BadInputError(f"Expected an integer scale in 1..40. Got {self.scale!r}.")
        if not (isinstance(self.edge_factor, int) and self.edge_factor >= 1):
            raise BadInputError(f"Expected an integer edge factor >= 1. Got {self.edge_factor!r}.")
        if self.dim < 1:
            raise BadInputError(f"Expected a feature dim >= 1. Got {self.dim!r}.")
        if np.dtype(self.dtype) not in (np.float16, np.float32):
            raise BadInputError(f"Expected dtype float16 or float32. Got {self.dtype!r}.")
        if not 0 < self.train_share <= 0.5:
            raise BadInputError(f"Expected a train share in (0, 0.5]. Got {self.train_share!r}.")
        quadrant_thresholds(self.abcd)

    @property
    def num_nodes(self) -> int:
        """``2 ** scale``."""
        return 1 << self.scale

    @property
    def num_edges(self) -> int:
        """Edges drawn: ``edge_factor * 2 ** scale``."""
        return self.edge_factor << self.scale

    @property
    def id_dtype(self):
        """The edge file's id dtype (int32 while ids fit)."""
        return np.int32 if self.num_nodes <= 2**31 else np.int64

    @property
    def feature_bytes(self) -> int:
        """Bytes of the feature matrix."""
        return self.num_nodes * self.dim * np.dtype(self.dtype).itemsize


@dataclass
class RmatResult:
    """What :func:`synth_rmat` wrote."""

    root: str
    spec_path: str
    meta: dict = field(default_factory=dict)


def _scramble(spec: RmatSpec) -> np.ndarray:
    return np.random.default_rng([spec.seed, _S_PERM]).permutation(spec.num_nodes).astype(
        spec.id_dtype)


def _npy_writer(path: str, shape, dtype) -> int:
    """Create ``path`` as an ``.npy`` of ``shape`` (sparse) and return its data offset."""
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    off = arr.offset
    del arr
    return off


def synth_rmat(root: str | os.PathLike, scale: int, edge_factor: int = 16, *, dim: int = 768,
               dtype: str = "float16", seed: int = 0, num_classes: int = 16,
               train_share: float = 0.01, progress: bool = True) -> RmatResult:
    """Write an R-MAT dataset (see the module's doc) into the directory ``root``.

    Existing files of the dataset are replaced; the spec file and ``meta.json`` are written
    last, so a dataset with a spec is complete.
    """
    spec = RmatSpec(int(scale), int(edge_factor), int(dim), str(np.dtype(dtype)), int(seed),
                    int(num_classes), float(train_share))
    root = os.path.abspath(os.fspath(root))
    os.makedirs(root, exist_ok=True)
    for name in (SPEC_NAME, "meta.json"):
        if os.path.exists(os.path.join(root, name)):
            os.remove(os.path.join(root, name))
    n, e = spec.num_nodes, spec.num_edges
    log.info("synth rmat: scale %d, %d nodes, %d edges, features %d x %d %s (%.2f GB)",
             spec.scale, n, e, n, spec.dim, spec.dtype, spec.feature_bytes / 1e9)
    times: dict[str, float] = {}
    path = {k: os.path.join(root, f"{k}.npy") for k in ("edges", "feat", "label", "train",
                                                           "valid", "test")}
    t = time.perf_counter()
    deg = _write_edges(spec, path["edges"], progress)  # and the undirected degrees
    times["edges"] = time.perf_counter() - t
    t = time.perf_counter()
    _write_labels_features(spec, path, progress)
    times["features"] = time.perf_counter() - t
    t = time.perf_counter()
    parts, ball_stats = _write_split(spec, path, deg, progress)
    times["split"] = time.perf_counter() - t
    meta = _meta(spec, deg, parts, ball_stats, times)
    spec_text = _spec_yaml(spec, {k: v.size for k, v in parts.items()})
    with open(os.path.join(root, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, default=str)
    sp = os.path.join(root, SPEC_NAME)
    with open(sp + ".partial", "w") as f:
        f.write(spec_text)
    os.replace(sp + ".partial", sp)
    return RmatResult(root, sp, meta)


def _write_edges(spec: RmatSpec, out: str, progress: bool) -> np.ndarray:
    """Draw the edges into ``out`` (``[2, E]`` ``.npy``); return the undirected degrees."""
    n, e, seed = spec.num_nodes, spec.num_edges, spec.seed
    perm = _scramble(spec)
    deg = np.zeros(n, np.int32 if 2 * e < 2**31 else np.int64)
    idt = np.dtype(spec.id_dtype)
    tmp = out + ".partial"
    off = _npy_writer(tmp, (2, e), idt)
    key = stream_key(seed, _S_EDGES)
    thr = quadrant_thresholds(spec.abcd)
    s = np.empty(min(EDGE_BLOCK, e), idt)
    d = np.empty(min(EDGE_BLOCK, e), idt)
    with open(tmp, "r+b") as f, bar(e, "rmat edges", progress) as pb:
        for lo in range(0, e, EDGE_BLOCK):
            k = min(EDGE_BLOCK, e - lo)
            _rmat_block(key, lo, spec.scale, thr, perm, s[:k], d[:k])
            _count_degrees(s[:k], d[:k], deg)
            f.seek(off + lo * idt.itemsize)
            f.write(memoryview(s[:k]).cast("B"))
            f.seek(off + (e + lo) * idt.itemsize)
            f.write(memoryview(d[:k]).cast("B"))
            pb.update(k)
    os.replace(tmp, out)
    return deg


def _write_labels_features(spec: RmatSpec, path: dict, progress: bool) -> None:
    """Labels and the class-centred features, streamed into their ``.npy`` files."""
    n, seed = spec.num_nodes, spec.seed
    np.save(path["label"] + ".partial.npy", node_labels(seed, 0, n, spec.num_classes))
    os.replace(path["label"] + ".partial.npy", path["label"])
    tmp = path["feat"] + ".partial"
    off = _npy_writer(tmp, (n, spec.dim), np.dtype(spec.dtype))
    row_bytes = spec.dim * np.dtype(spec.dtype).itemsize
    step = max(1, FEAT_BLOCK_BYTES // (spec.dim * 4))
    cent = centroids(seed, spec.num_classes, spec.dim)
    with open(tmp, "r+b") as f, bar(n, "rmat features", progress, unit="row") as pb:
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            x = rmat_features(seed, lo, hi, spec.dim, spec.num_classes, spec.dtype, cent)
            f.seek(off + lo * row_bytes)
            f.write(memoryview(x).cast("B"))
            pb.update(hi - lo)
    os.replace(tmp, path["feat"])


def _write_split(spec: RmatSpec, path: dict, deg: np.ndarray,
                 progress: bool) -> tuple[dict, dict]:
    """The clustered train/valid/test split (a BFS ball), each saved sorted."""
    connected = int(np.count_nonzero(deg))
    n_train = max(1, int(round(spec.train_share * connected)))
    n_other = max(1, n_train // 4) if connected >= n_train + 2 else 0
    edges = np.load(path["edges"], mmap_mode="r")
    with bar(None, "rmat split (BFS levels)", progress, unit="level") as pb:
        ball, ball_stats = clustered_ball(edges[0], edges[1], deg, n_train + 2 * n_other,
                                          spec.seed, on_level=lambda lev, tot: pb.update(1))
    del edges
    n_train = min(n_train, ball.size)
    n_valid = min(n_other, max(0, ball.size - n_train) // 2)
    parts = {"train": ball[:n_train], "valid": ball[n_train:n_train + n_valid],
             "test": ball[n_train + n_valid:n_train + 2 * n_valid]}
    for name, ids in parts.items():
        np.save(path[name] + ".partial.npy", np.sort(ids))
        os.replace(path[name] + ".partial.npy", path[name])
    return parts, ball_stats


def _meta(spec: RmatSpec, deg: np.ndarray, parts: dict, ball_stats: dict,
          times: dict) -> dict:
    """``meta.json``'s content: parameters, degree statistics, split sizes, timings."""
    n = spec.num_nodes
    connected = int(np.count_nonzero(deg))
    dsorted = np.sort(deg)[::-1]
    total_deg = int(dsorted.sum())
    top1 = int(dsorted[:max(1, n // 100)].sum())
    return {"generator": "featurestore synth rmat", "params": {**asdict(spec),
                                                              "abcd": list(spec.abcd)},
            "num_nodes": n, "num_edges_drawn": spec.num_edges,
            "edges_dtype": str(np.dtype(spec.id_dtype)), "connected_nodes": connected,
            "self_loops_and_duplicates": "kept in edges.npy; removed by the spec job "
                                         "(undirected: true coalesces, drop_self_loops: true)",
            "max_degree": int(dsorted[0]) if n else 0,
            "mean_degree_connected": total_deg / max(connected, 1),
            "top1pct_degree_share": top1 / max(total_deg, 1),
            "splits": {k: int(v.size) for k, v in parts.items()}, "split_ball": ball_stats,
            "feature_bytes": spec.feature_bytes, "seconds": times}


def _spec_yaml(spec: RmatSpec, sizes: dict) -> str:
    splits = "".join(f"  {k}: {{node: {k}.npy}}\n" for k, v in sizes.items() if v)
    return (
        f"# R-MAT scale {spec.scale}, edge factor {spec.edge_factor} (a,b,c,d = "
        f"{', '.join(map(str, spec.abcd))}), seed {spec.seed}: written by featurestore synth rmat\n"
        f"name: rmat-s{spec.scale}-ef{spec.edge_factor}\n"
        "nodes:\n"
        "  node:\n"
        f"    count: {spec.num_nodes}\n"
        "    features:\n"
        "      feat: feat.npy\n"
        "    labels: label.npy\n"
        "edges:\n"
        "  - relation: [node, to, node]\n"
        "    path: edges.npy\n"
        "    undirected: true            # both directions, duplicates removed\n"
        "splits:\n" + splits +
        "options:\n"
        "  drop_self_loops: true\n"
        "  coalesce: true\n")
