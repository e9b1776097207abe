"""COO to CSC in a memory budget: the external, bucketed counting sort.

The edge list is streamed, never held:

1. **Count.** One pass counts the in-degree of every destination (a numba kernel that also
   checks every id against the node counts); the prefix sum is ``indptr``.
2. **Plan.** Destinations are cut into consecutive ranges whose edges (and per-destination
   cursors) fit the budget, so a range's slice of ``indices`` is built in RAM.
3. **Scatter.** For each range the input is streamed again and the source of every edge whose
   destination falls in the range is scattered to its slot (a stable counting sort).
4. **Finish.** Neighbours are sorted within each destination (parallel), duplicates removed
   when coalescing, and the slice is appended to the store's ``indices`` in order.

The input is read ``1 + number of ranges`` times; the budget decides the number of ranges.
``indptr`` stays in RAM when it fits a quarter of the budget and in a scratch memory map
otherwise. Coalescing changes the counts, so its output goes to a scratch file first and is
copied into the store once the final ``indptr`` is known.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from featurestore import format as fmt
from featurestore.format import EdgeType

from . import _kernels as K
from .edges import EdgeSource, concat
from .errors import BadInputError, IdsOutOfRangeInputError, NotEnoughDiskError
from .memory import PeakMemory, format_size, free_disk_bytes
from .progress import bar

__all__ = ["build_csc", "coo_to_csc", "CscPlan", "plan_csc", "reverse_etype"]

log = logging.getLogger(__name__)

#: smallest and largest input block (edges) the budget may choose.
MIN_BLOCK_EDGES = 1 << 16
MAX_BLOCK_EDGES = 1 << 22


def reverse_etype(etype: Sequence[str]) -> EdgeType:
    """PyG's ``ToUndirected`` name for the reverse of a relation between two node types."""
    et = EdgeType(*etype)
    return EdgeType(et.dst, f"rev_{et.rel}", et.src)


@dataclass(frozen=True)
class CscPlan:
    """How a conversion splits its budget (what ``--dry-run`` prints)."""

    num_src: int
    num_dst: int
    num_edges: int | None
    budget_bytes: int
    block_edges: int
    index_dtype: np.dtype
    indptr_in_ram: bool
    work_bytes: int

    @property
    def est_passes(self) -> int | None:
        """Input reads: the count pass plus one per destination range (an estimate)."""
        if self.num_edges is None:
            return None
        need = self.num_edges * self.index_dtype.itemsize + self.num_dst * 8
        return 1 + max(1, -(-need // max(self.work_bytes, 1)))

    @property
    def output_bytes(self) -> int:
        n = self.num_edges or 0
        return n * self.index_dtype.itemsize + (self.num_dst + 1) * 8


def plan_csc(num_src: int, num_dst: int, num_edges: int | None,
             budget_bytes: int, coalesce: bool = False) -> CscPlan:
    """Split ``budget_bytes`` between input blocks, ``indptr`` and the per-range buffers.

    Coalescing keeps a second ``indptr`` (the counts after removing duplicates).
    """
    budget = int(budget_bytes)
    if budget < 16 << 20:
        raise ValueError(f"Expected a memory budget of at least 16 MiB. Got {format_size(budget)}.")
    block = int(np.clip(budget // 128, MIN_BLOCK_EDGES, MAX_BLOCK_EDGES))
    # int64 conversions of a block (src, dst) may coexist with the raw block: 4 x 8 bytes/edge
    block_mem = 32 * block
    indptr_bytes = (num_dst + 1) * 8
    copies = 2 if coalesce else 1
    indptr_in_ram = copies * indptr_bytes <= budget // 4
    work = budget - block_mem - (copies * indptr_bytes if indptr_in_ram else 0)
    return CscPlan(num_src, num_dst, num_edges, budget, block, fmt.index_dtype(num_src),
                   indptr_in_ram, max(work, budget // 8))


def _parts(source: EdgeSource) -> list[EdgeSource]:
    return source.parts() if hasattr(source, "parts") else [source]


class _Scratch:
    """A scratch directory for memory maps that outgrow the budget; removed on close."""

    def __init__(self, tmpdir):
        self.base = tmpdir
        self.path: str | None = None

    def file(self, name: str) -> str:
        if self.path is None:
            if self.base is not None:
                os.makedirs(self.base, exist_ok=True)
            self.path = tempfile.mkdtemp(prefix="csc-", dir=self.base)
        return os.path.join(self.path, name)

    def zeros(self, name: str, n: int, dtype) -> np.ndarray:
        """A zero-filled writable memory map of ``n`` items (a sparse file)."""
        path = self.file(name)
        dtype = np.dtype(dtype)
        with open(path, "wb") as f:
            f.truncate(max(n, 1) * dtype.itemsize)
        return np.memmap(path, dtype=dtype, mode="r+", shape=(n,))

    def close(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None


def _count(source: EdgeSource, plan: CscPlan, indptr: np.ndarray, drop_self_loops: bool,
           progress: bool, what: str) -> tuple[int, int]:
    """Count pass: in-degrees into ``indptr[1:]`` (checking ids), then the prefix sum."""
    counts = indptr[1:]
    edges_in = 0
    nbytes = 0
    with bar(source.num_edges, f"{what}: count", progress) as pb:
        for part in _parts(source):
            at = 0
            for s, d in part.iter_blocks(plan.block_edges):
                bad = K.count_block(s, d, plan.num_src, plan.num_dst, counts, drop_self_loops)
                if bad >= 0:
                    _raise_range(part, s, d, bad, at, plan)
                at += s.shape[0]
                nbytes += s.nbytes + d.nbytes
                pb.update(s.shape[0])
            edges_in += at
    indptr[0] = 0
    np.cumsum(indptr, out=indptr)
    return edges_in, nbytes


def _raise_range(part: EdgeSource, s, d, i: int, at: int, plan: CscPlan):
    sv, dv = int(s[i]), int(d[i])
    if not 0 <= sv < plan.num_src:
        what, v, n = "source", sv, plan.num_src
    else:
        what, v, n = "destination", dv, plan.num_dst
    raise IdsOutOfRangeInputError(
        f"Expected {what} ids in [0, {n}) in {part.name}. Got {v} at edge {at + i} "
        f"({'negative' if v < 0 else 'not below the node count'}).")


def _iter_ranges(source: EdgeSource, plan: CscPlan, indptr: np.ndarray, bounds: np.ndarray,
                 *, sort: bool, coalesce: bool, drop_self_loops: bool, scratch: _Scratch,
                 stats: dict, progress: bool, what: str):
    """Yield ``(lo, hi, indices_slice, new_counts)`` per destination range, in order.

    ``new_counts`` is None unless coalescing (then it holds each destination's count after
    removing duplicates).
    """
    idt = plan.index_dtype
    nranges = len(bounds) - 1
    with bar((source.num_edges or 0) * nranges or None, f"{what}: scatter", progress) as pb:
        for r in range(nranges):
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            base = int(indptr[lo])
            n = int(indptr[hi]) - base
            if n * idt.itemsize + (hi - lo) * 8 > plan.work_bytes:
                log.info("%s: destination %d has %d edges, more than the budget holds; "
                         "it is built in a scratch memory map", what, lo, n)
                out = scratch.zeros(f"range-{r}.bin", n, idt)
            else:
                out = np.empty(n, idt)
            cursor = np.empty(hi - lo, np.int64)
            np.subtract(indptr[lo:hi], base, out=cursor)
            if n:
                for part in _parts(source):
                    for s, d in part.iter_blocks(plan.block_edges):
                        K.scatter_block(s, d, lo, hi, cursor, out, drop_self_loops)
                        stats["bytes_read"] += s.nbytes + d.nbytes
                        pb.update(s.shape[0])
            else:
                pb.update(source.num_edges or 0)
            # cursor[k] is now the end of destination lo + k inside out
            if sort or coalesce:
                K.sort_segments(out, cursor)
            if coalesce:
                w = K.dedupe_segments(out, cursor)
                yield lo, hi, out[:w], cursor
            else:
                yield lo, hi, out, None
            del out


def coo_to_csc(source: EdgeSource, *, num_src: int, num_dst: int, indptr_out, indices_out,
               coalesce: bool = False, drop_self_loops: bool = False, sort_neighbors: bool = True,
               budget_bytes: int = 1 << 30, tmpdir=None, progress: bool = True,
               what: str = "csc") -> dict:
    """Convert ``source`` to CSC, streaming the result into two sinks.

    ``indptr_out(indptr)`` is called once with the final ``indptr`` (an array or memory map
    of ``num_dst + 1`` int64) *before* ``indices_out(blocks, num_edges, dtype)`` is called with
    an iterator of index blocks in order. :func:`build_csc` passes the store writer's methods;
    tests pass plain collectors. Returns the statistics of :func:`build_csc`.
    """
    t0 = time.perf_counter()
    if num_src < 0 or num_dst < 0:
        raise ValueError(f"Expected non-negative node counts. Got {num_src} and {num_dst}.")
    plan = plan_csc(num_src, num_dst, source.num_edges, budget_bytes, coalesce)
    scratch = _Scratch(tmpdir)
    stats = {"edges_in": 0, "edges_out": 0, "bytes_read": 0, "passes": 0,
             "budget_bytes": plan.budget_bytes}
    try:
        with PeakMemory() as mem:
            indptr = (np.zeros(num_dst + 1, np.int64) if plan.indptr_in_ram
                      else scratch.zeros("indptr.bin", num_dst + 1, np.int64))
            edges_in, nbytes = _count(source, plan, indptr, drop_self_loops, progress, what)
            stats.update(edges_in=edges_in, bytes_read=nbytes, passes=1)
            t_count = time.perf_counter()
            bounds = K.plan_ranges(indptr, plan.index_dtype.itemsize, 8, plan.work_bytes)
            stats["ranges"] = len(bounds) - 1
            stats["passes"] += len(bounds) - 1 if int(indptr[-1]) else 0
            ranges = _iter_ranges(source, plan, indptr, bounds, sort=sort_neighbors,
                                  coalesce=coalesce, drop_self_loops=drop_self_loops,
                                  scratch=scratch, stats=stats, progress=progress, what=what)
            if not coalesce:
                indptr_out(indptr)
                stats["edges_out"] = int(indptr[-1])
                indices_out((out for _, _, out, _ in ranges), int(indptr[-1]), plan.index_dtype)
            else:
                final, tmp_indices, n_out = _coalesced(ranges, plan, scratch)
                stats["edges_out"] = n_out
                indptr_out(final)
                tmp = np.memmap(tmp_indices, dtype=plan.index_dtype, mode="r", shape=(n_out,)) \
                    if n_out else np.empty(0, plan.index_dtype)
                step = max(1, plan.work_bytes // plan.index_dtype.itemsize)
                indices_out((tmp[i:i + step] for i in range(0, n_out, step)), n_out,
                            plan.index_dtype)
                del tmp, final
            del indptr
    finally:
        scratch.close()
    dt = time.perf_counter() - t0
    stats.update(seconds=round(dt, 3), count_seconds=round(t_count - t0, 3),
                 edges_per_s=stats["edges_in"] / dt if dt > 0 else 0.0,
                 gb_per_s=stats["bytes_read"] / dt / 1e9 if dt > 0 else 0.0,
                 peak_anon_bytes=mem.peak, added_anon_bytes=mem.added,
                 block_edges=plan.block_edges, indptr_in_ram=plan.indptr_in_ram)
    return stats


def _coalesced(ranges, plan: CscPlan, scratch: _Scratch):
    """Drain coalesced ranges into a scratch indices file and a final indptr."""
    num_dst = plan.num_dst
    final = (np.zeros(num_dst + 1, np.int64) if plan.indptr_in_ram
             else scratch.zeros("indptr-final.bin", num_dst + 1, np.int64))
    path = scratch.file("indices.bin")
    total = 0
    with open(path, "wb") as f:
        for lo, hi, out, counts in ranges:
            total = K.write_indptr(counts, total, final[lo + 1:hi + 1])
            f.write(memoryview(np.ascontiguousarray(out)).cast("B"))
    return final, path, int(total)


def build_csc(writer, etype: Sequence[str], source: EdgeSource, *, num_src: int, num_dst: int,
              coalesce: bool = False, drop_self_loops: bool = False, symmetrize: bool = False,
              sort_neighbors: bool = True, budget_bytes: int = 1 << 30, tmpdir=None,
              progress: bool = True) -> dict:
    """Write edge type ``etype`` into ``writer`` (a :class:`featurestore.StoreWriter`) as CSC.

    Parameters
    ----------
    writer
        The store being written; both node types must have been added (their counts are
        checked against ``num_src`` and ``num_dst``).
    etype
        ``(src_type, relation, dst_type)``.
    source
        The edges, with ids already in store numbering (see :mod:`preprocess.renumber`).
    coalesce
        Remove duplicate edges (what ``scipy``'s ``tocsc`` and PyG's ``coalesce`` do).
    drop_self_loops
        Drop edges ``(v, v)`` (meaningful when source and destination types are the same).
    symmetrize
        Add ``(d, s)`` for each ``(s, d)``: PyG's ``ToUndirected`` for a relation within one node
        type (combine with ``coalesce=True`` to match it exactly). For a relation between two
        types, build the reverse with ``build_csc(writer, reverse_etype(etype),
        source.reversed(), num_src=num_dst, num_dst=num_src)`` instead.
    sort_neighbors
        Sort the sources of each destination (else they keep the input order).
    budget_bytes
        Anonymous memory the conversion may hold; the input is re-read as often as needed.
    tmpdir
        Where scratch files go (indptr past a quarter of the budget, coalesced output);
        the system's temporary directory by default.
    progress
        Show tqdm bars.

    Returns
    -------
    dict
        ``edges_in``, ``edges_out``, ``seconds``, ``edges_per_s``, ``gb_per_s`` (input bytes
        read per second, over all passes), ``passes``, ``ranges``, ``peak_anon_bytes``.
    """
    et = EdgeType(*etype)
    for nt, n in ((et.src, num_src), (et.dst, num_dst)):
        have = writer.schema["node_types"].get(nt, {}).get("num_nodes")
        if have is None:
            raise BadInputError(f"Expected node type {nt!r} added to {writer.url} before edge "
                                f"type {tuple(et)}.")
        if have != n:
            raise BadInputError(f"Expected {have} nodes of type {nt!r} (the store's count) for "
                                f"edge type {tuple(et)}. Got {n} instead.")
    if symmetrize:
        if et.src != et.dst:
            raise ValueError(f"Expected symmetrize only for a relation within one node type. "
                             f"{tuple(et)} joins two types: add its reverse_etype instead.")
        source = concat(source, source.reversed())
    need = (source.num_edges or 0) * fmt.index_dtype(num_src).itemsize * (2 if coalesce else 1)
    if writer.loc.is_local:
        free = free_disk_bytes(writer.loc.root)
        if need > free:
            raise NotEnoughDiskError(f"Expected {format_size(need)} free for {tuple(et)} in "
                                     f"{writer.url}. Got {format_size(free)} instead.")
    state = {}

    def indptr_out(indptr):
        state["indptr"] = indptr

    def indices_out(blocks, n, dtype):
        writer.add_edge_type(et, state["indptr"], blocks, indices_dtype=dtype, validate=False)

    stats = coo_to_csc(source, num_src=num_src, num_dst=num_dst, indptr_out=indptr_out,
                       indices_out=indices_out, coalesce=coalesce,
                       drop_self_loops=drop_self_loops, sort_neighbors=sort_neighbors,
                       budget_bytes=budget_bytes, tmpdir=tmpdir, progress=progress,
                       what=et.key())
    log.info("%s: %d edges in, %d out, %.1f s, %.2fM edges/s, %d passes, peak %s", et.key(),
             stats["edges_in"], stats["edges_out"], stats["seconds"],
             stats["edges_per_s"] / 1e6, stats["passes"], format_size(stats["peak_anon_bytes"]))
    return stats
