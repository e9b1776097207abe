"""Deterministic block generators shared by the synthetic twins.

Everything is produced in fixed-size blocks, each from its own random stream
``default_rng([seed, stream, block])``, so any block can be regenerated on its own (the
``.npz`` writer needs the sources and the destinations of the edges in two passes) and the
output does not depend on memory or thread count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: edges per generated block.
EDGE_BLOCK = 1 << 22
#: bytes of features per generated block.
FEAT_BLOCK_BYTES = 64 << 20

#: power law of citing papers (``IdMap.powerlaw``'s alpha: the top 1% of papers write 10% of
#: the citations, the top 10% 32%); cited papers use 2.5 (16% and 40%).
CITE_SRC_ALPHA = 2.0

# stream ids: one per kind of random draw.
S_NODES, S_FEAT, S_EDGES = 1, 2, 3


def rng_for(seed: int, stream: int, block: int, sub: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, stream, block, sub])


def scaled(true_count: int, scale: float, minimum: int = 1) -> int:
    return max(minimum, int(round(true_count * scale)))


@dataclass(frozen=True)
class IdMap:
    """A bijection of ``[0, n)`` (``i -> (a*i + b) mod n``), restricted to ``[0, active)``.

    Drawing ranks in ``[0, active)`` and mapping them gives ids spread over ``[0, n)`` that
    never hit the ``n - active`` ids outside the image: those stay isolated. Low ranks (the
    hubs of a power law) land at scattered ids, not at 0, 1, 2.
    """

    n: int
    active: int
    a: int
    b: int
    #: ranks are first permuted within ``[0, active)`` by ``r -> (ra*r + rb) mod active``:
    #: another power law over the same active ids puts its heavy ids elsewhere.
    ra: int = 1
    rb: int = 0

    @classmethod
    def make(cls, n: int, active_share: float, salt: int) -> IdMap:
        a = max(1, int(n * 0.6180339887) | 1)
        while math.gcd(a, n) != 1:
            a += 2 if n > 2 else 1
            if a >= n:
                a = 1
                break
        active = max(1, min(n, int(math.ceil(n * active_share))))
        return cls(n, active, a % max(n, 1) or 1, (salt * 7919) % max(n, 1))

    def reranked(self, salt: int) -> IdMap:
        """The same active ids, hit in another order of ranks (independent heavy ids)."""
        m = self.active
        ra = max(1, int(m * 0.7548776662) | 1)
        while m > 1 and math.gcd(ra, m) != 1:
            ra += 2
        return IdMap(self.n, m, self.a, self.b, ra % m if m > 1 else 1,
                     (salt * 104729 + 17) % m)

    def __call__(self, ranks: np.ndarray) -> np.ndarray:
        r = ranks.astype(np.int64)
        if self.ra != 1 or self.rb != 0:
            r = (r * self.ra + self.rb) % self.active
        return (r * self.a + self.b) % self.n

    def uniform(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return self(rng.integers(0, self.active, k, dtype=np.int64))

    def powerlaw(self, rng: np.random.Generator, k: int, alpha: float) -> np.ndarray:
        """Ranks with density ~ r**(1/alpha - 1): a few ids get most of the draws."""
        r = np.floor(self.active * rng.random(k) ** alpha).astype(np.int64)
        return self(np.minimum(r, self.active - 1))


def edge_block(seed: int, stream: int, block: int, k: int, src: IdMap, dst: IdMap, *,
               src_alpha: float | None, dst_alpha: float | None, dup_share: float = 0.005,
               self_loop_share: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``k`` edges of block ``block``: power-law or uniform ends, some duplicates and loops."""
    rng = rng_for(seed, S_EDGES + 16 * stream, block)
    s = src.powerlaw(rng, k, src_alpha) if src_alpha else src.uniform(rng, k)
    d = dst.powerlaw(rng, k, dst_alpha) if dst_alpha else dst.uniform(rng, k)
    if k > 1 and dup_share > 0:  # exact duplicates of earlier edges of the block
        n_dup = int(k * dup_share)
        if n_dup:
            at = rng.integers(1, k, n_dup)
            frm = (rng.random(n_dup) * at).astype(np.int64)
            s[at] = s[frm]
            d[at] = d[frm]
    if self_loop_share > 0:
        loops = rng.random(k) < self_loop_share
        d[loops] = s[loops]
    return s, d


def edge_blocks(seed: int, stream: int, num_edges: int, src: IdMap, dst: IdMap, **kw):
    """All edges of a relation as ``(lo, src, dst)`` blocks, in order."""
    for b, lo in enumerate(range(0, num_edges, EDGE_BLOCK)):
        k = min(EDGE_BLOCK, num_edges - lo)
        s, d = edge_block(seed, stream, b, k, src, dst, **kw)
        yield lo, s, d


def topic(ids: np.ndarray, num_classes: int, seed: int) -> np.ndarray:
    """A node's hidden class, a hash of its id: labels and features both follow it."""
    h = (ids.astype(np.uint64) * np.uint64(2654435761) + np.uint64(seed * 97 + 13)) >> np.uint64(7)
    return (h % np.uint64(num_classes)).astype(np.int64)


def node_block(seed: int, lo: int, hi: int, num_classes: int, labeled_share: float):
    """Years, labels (float, NaN = none) and the split of nodes ``lo..hi-1``.

    Years lean recent (2020 minus an exponential). A labelled node is ``train`` before 2018,
    ``valid`` in 2018, ``test`` in 2019; labelled 2020 nodes get NaN like unlabelled ones.
    Returns ``year, label, split`` with split 0 = none, 1 = train, 2 = valid, 3 = test.
    """
    rng = rng_for(seed, S_NODES, lo)
    k = hi - lo
    year = (2020 - np.minimum(70, np.floor(rng.exponential(8.0, k)))).astype(np.int64)
    labeled = rng.random(k) < labeled_share
    split = np.zeros(k, np.int8)
    split[labeled & (year <= 2017)] = 1
    split[labeled & (year == 2018)] = 2
    split[labeled & (year == 2019)] = 3
    label = np.full(k, np.nan, np.float64)
    has = split > 0
    label[has] = topic(np.arange(lo, hi, dtype=np.int64)[has], num_classes, seed)
    return year, label, split


def node_ranges(n: int, rows: int):
    for lo in range(0, n, rows):
        yield lo, min(n, lo + rows)


class FeatureMaker:
    """Features that carry the node's topic: ``centroid[topic] + noise``, so a model can learn."""

    def __init__(self, seed: int, num_classes: int, dim: int, dtype):
        self.seed, self.num_classes, self.dim = seed, num_classes, dim
        self.dtype = np.dtype(dtype)
        rng = rng_for(seed, S_FEAT, 0, 1)  # row blocks use sub-stream 0
        self.centroids = rng.standard_normal((num_classes, dim), dtype=np.float32)

    def block_rows(self) -> int:
        return max(1, FEAT_BLOCK_BYTES // (self.dim * 4))

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo..hi-1`` (call with the bounds of :meth:`block_rows` blocks)."""
        rng = rng_for(self.seed, S_FEAT, lo)
        x = rng.standard_normal((hi - lo, self.dim), dtype=np.float32)
        x += self.centroids[topic(np.arange(lo, hi, dtype=np.int64), self.num_classes, self.seed)]
        return x.astype(self.dtype, copy=False)
