"""COO to CSC in a memory budget: an external, bucketed radix sort.

The edge list is streamed, never held:

1. **Histogram.** One pass checks every id against the node counts and counts the edges per
   bucket of ``2**s0`` destinations (at most 2**16 buckets: the counters stay in the core's
   cache, so the pass runs at the speed of reading the input).
2. **Plan.** Buckets are grouped into consecutive ranges whose edges fit the budget (6 bytes
   per edge with int32 ids: the source and the destination's offset in its bucket).
3. **Partition.** For each range the input is streamed again and its edges are radix-
   partitioned into buckets of destinations (a few hundred to a few thousand write streams).
4. **Finish.** Each bucket, in cache and in parallel, is counted per destination and
   counting-sorted in place (American flag sort); neighbours are sorted, duplicates dropped
   when coalescing. The range's slice of ``indices`` is appended to a scratch file and its
   destinations' counts to ``indptr``.

The budget decides the number of ranges. With one or two ranges the input is simply read again
per range; with more, one *spill* pass groups the edges by range into a scratch file (the
sources and the destinations' offsets, 8 bytes per edge with int32 ids), so the input is read
twice in all and each range reads only its own edges. The store's ``indptr`` is written first,
so ``indices`` is copied from a scratch file once the last range is done (a sequential copy of
the output).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np

from featurestore.fileio import disk_full_as_error, write_file
from featurestore.format import names as fmt
from featurestore.format.names import EdgeType
from featurestore.remote.location import Location

from preprocess.steps import kernels as K
from preprocess.sources.base import EdgeSource, concat
from preprocess.steps.diskmap import map_file
from preprocess.errors import (BadInputError, BudgetTooSmallError, IdsOutOfRangeInputError,
                     NotEnoughDiskError)
from preprocess.steps.memory import PeakMemory, format_size, free_disk_bytes
from preprocess.progress import bar

__all__ = ["build_csc", "coo_to_csc", "CscPlan", "CscPasses", "plan_csc", "reverse_etype"]

log = logging.getLogger(__name__)

#: smallest and largest input block (edges) the budget may choose.
MIN_BLOCK_EDGES = 1 << 16
MAX_BLOCK_EDGES = 1 << 20
#: the smallest budget a conversion accepts (tests lower it to force many ranges).
MIN_BUDGET_BYTES = 16 << 20
#: at most this many histogram buckets (their counters stay in cache).
MAX_HIST_BUCKETS = 1 << 16
#: a partition bucket holds at most 2**16 destinations (offsets fit uint16) and about
#: BUCKET_EDGES edges, so that finishing it stays in the core's cache; at most MAX_BUCKETS
#: buckets per range keep the partition pass's write streams few.
MAX_BUCKET_SHIFT = 16
#: spill the input once by range when there are at least this many ranges, and no more than
#: one per SPILL_MIN_SEGMENT edges of an input block (so spilled segments stay large reads).
SPILL_MIN_RANGES = 3
SPILL_MIN_SEGMENT = 4096
BUCKET_EDGES = 1 << 16
MAX_BUCKETS = 1 << 14


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
    hist_shift: int
    indptr_in_ram: bool
    work_bytes: int

    @property
    def edge_bytes(self) -> int:
        """Bytes per edge of a range in RAM: the source id and a uint16 bucket offset."""
        return self.index_dtype.itemsize + 2

    @property
    def est_ranges(self) -> int | None:
        """Destination ranges (an estimate: skewed degrees need a few more)."""
        if self.num_edges is None:
            return None
        return max(1, -(-self.num_edges * self.edge_bytes // max(self.work_bytes, 1)))

    @property
    def est_passes(self) -> int | None:
        """Reads of the input: the histogram pass, then one per range or one spill pass."""
        r = self.est_ranges
        if r is None:
            return None
        return 1 + r if r < SPILL_MIN_RANGES else 2

    @property
    def output_bytes(self) -> int:
        """Bytes of the edge type in the store: its indices and int64 indptr."""
        n = self.num_edges or 0
        return n * self.index_dtype.itemsize + (self.num_dst + 1) * 8


def plan_csc(num_src: int, num_dst: int, num_edges: int | None,
             budget_bytes: int) -> CscPlan:
    """Split ``budget_bytes`` between input blocks, ``indptr`` and the per-range buffers."""
    budget = int(budget_bytes)
    if budget < MIN_BUDGET_BYTES:
        raise BudgetTooSmallError(f"Expected a memory budget of at least "
                                  f"{format_size(MIN_BUDGET_BYTES)}. Got {format_size(budget)}.")
    block = int(np.clip(budget // 512, MIN_BLOCK_EDGES, MAX_BLOCK_EDGES))
    # int64 conversions of a block (src, dst) may coexist with the raw block: 4 x 8 bytes/edge
    block_mem = 32 * block
    hist_shift = max(0, (-(-num_dst // MAX_HIST_BUCKETS) - 1).bit_length())
    hist_mem = 16 * (-(-num_dst >> hist_shift) + 1) if num_dst else 16
    indptr_bytes = (num_dst + 1) * 8
    # indptr is output, written range by range: past a small share of the budget it goes to
    # a scratch file (page cache) rather than taking edges' room in RAM
    indptr_in_ram = indptr_bytes <= budget // 16
    work = budget - block_mem - hist_mem - (indptr_bytes if indptr_in_ram else 0)
    return CscPlan(num_src, num_dst, num_edges, budget, block, fmt.index_dtype(num_src),
                   hist_shift, indptr_in_ram, max(work, budget // 8))


class _Scratch:
    """A scratch directory for files that outgrow the budget; removed on close."""

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
        """A zero-filled writable memory map of ``n`` items (its disk blocks reserved)."""
        return map_file(self.file(name), dtype=dtype, mode="w+", shape=(max(n, 1),))[:n]

    def close(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None


def _histogram(source: EdgeSource, plan: CscPlan, hist: np.ndarray, drop_self_loops: bool,
               progress: bool, what: str) -> tuple[int, int]:
    """Pass 1: check ids, count edges per histogram bucket. Returns (edges, bytes read)."""
    edges_in = 0
    nbytes = 0
    with bar(source.num_edges, f"{what}: histogram", progress) as pb:
        for part in source.parts():
            at = 0
            for s, d in part.iter_blocks(plan.block_edges):
                bad = K.histogram_block(s, d, plan.num_src, plan.num_dst, plan.hist_shift, hist,
                                        drop_self_loops)
                if bad >= 0:
                    raise_out_of_range(part, s, d, bad, at, plan)
                at += s.shape[0]
                nbytes += s.nbytes + d.nbytes
                pb.update(s.shape[0])
            edges_in += at
    return edges_in, nbytes


def raise_out_of_range(part: EdgeSource, s, d, i: int, at: int, plan: CscPlan):
    """:class:`IdsOutOfRangeInputError` for edge ``i`` of a block at edge ``at`` of ``part``."""
    sv, dv = int(s[i]), int(d[i])
    if not 0 <= sv < plan.num_src:
        what, v, n = "source", sv, plan.num_src
    else:
        what, v, n = "destination", dv, plan.num_dst
    raise IdsOutOfRangeInputError(
        f"Expected {what} ids in [0, {n}) in {part.name}. Got {v} at edge {at + i} "
        f"({'negative' if v < 0 else 'not below the node count'}).")


def bucket_shift(width: int, edges: int, min_shift: int) -> int:
    """log2 of the destinations per partition bucket for a range (at least ``min_shift``)."""
    avg = max(edges, 1) / max(width, 1)
    shift = int(round(np.log2(max(1.0, BUCKET_EDGES / avg))))
    shift = max(min_shift, min(MAX_BUCKET_SHIFT, shift))
    while shift < MAX_BUCKET_SHIFT and (width >> shift) > MAX_BUCKETS:
        shift += 1
    return shift


class _Spill:
    """The spill pass: one more read of the input that groups its edges by destination range
    into one scratch file (segments of ``(sources, offsets)``, indexed per range), so that each
    range then reads only its own edges instead of the whole input again."""

    def __init__(self, source: EdgeSource, plan: CscPlan, range_hi: np.ndarray,
                 drop_self_loops: bool, scratch: _Scratch, stats: dict, progress: bool,
                 what: str):
        self.plan = plan
        self.widths = np.diff(np.concatenate([[0], range_hi]))
        self.dd = np.dtype(np.uint32) if self.widths.max() < 2**32 else np.dtype(np.int64)
        self.path = scratch.file("spill.bin")
        self.segments: list[list[tuple[int, int]]] = [[] for _ in range_hi]
        idt = plan.index_dtype
        out_s = np.empty(plan.block_edges, idt)
        out_d = np.empty(plan.block_edges, self.dd)
        counts = np.empty(len(range_hi), np.int64)
        off = 0
        with disk_full_as_error(self.path), open(self.path, "wb") as f, \
                bar(source.num_edges, f"{what}: spill", progress) as pb:
            for part in source.parts():
                for s, d in part.iter_blocks(plan.block_edges):
                    K.split_block(s, d, range_hi, out_s, out_d, counts, drop_self_loops)
                    stats["bytes_read"] += s.nbytes + d.nbytes
                    at = 0
                    for r in np.flatnonzero(counts):
                        c = int(counts[r])
                        f.write(memoryview(out_s[at:at + c]).cast("B"))
                        f.write(memoryview(out_d[at:at + c]).cast("B"))
                        self.segments[r].append((off, c))
                        off += c * (idt.itemsize + self.dd.itemsize)
                        at += c
                    pb.update(s.shape[0])
        stats["spill_bytes"] = off

    def blocks(self, r: int):
        """The edges of range ``r``: (sources, destination offsets) per spilled segment."""
        idt = self.plan.index_dtype
        with open(self.path, "rb") as f:
            for off, c in self.segments[r]:
                f.seek(off)
                yield (np.fromfile(f, dtype=idt, count=c),
                       np.fromfile(f, dtype=self.dd, count=c))


@dataclass
class _Ranges:
    """What sorting any one destination range needs: a picklable task description (the
    source pickles by its file names, the spill by its file and segment index)."""

    source: EdgeSource
    plan: CscPlan
    cum: np.ndarray
    bounds: np.ndarray
    sort: bool
    coalesce: bool
    drop_self_loops: bool
    spill: _Spill | None = None

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def dst_range(self, r: int) -> tuple[int, int]:
        """Destinations ``[lo, hi)`` of range ``r``."""
        h = self.plan.hist_shift
        return int(self.bounds[r]) << h, min(int(self.bounds[r + 1]) << h, self.plan.num_dst)


def _sort_range(rs: _Ranges, r: int, counts: np.ndarray, scratch: _Scratch, stats: dict,
                update, what: str) -> np.ndarray:
    """Range ``r``'s slice of ``indices`` (partition, then finish its buckets); ``counts[d]``
    receives the kept edges of its ``d``-th destination."""
    plan, cum, h = rs.plan, rs.cum, rs.plan.hist_shift
    idt = plan.index_dtype
    f0, f1 = int(rs.bounds[r]), int(rs.bounds[r + 1])
    lo, hi = rs.dst_range(r)
    base = int(cum[f0])
    n = int(cum[f1]) - base
    shift = bucket_shift(hi - lo, n, h)
    # bucket starts: every 2**(shift - h)-th histogram bucket, then the range's end
    bstart = np.append(cum[f0:f1:1 << (shift - h)], cum[f1]) - base
    if n * plan.edge_bytes > plan.work_bytes:
        log.info("%s: destinations %d..%d have %d edges, more than the budget holds; "
                 "they are sorted in a scratch memory map", what, lo, hi, n)
        ts = scratch.zeros(f"range-{r}-src.bin", n, idt)
        td = scratch.zeros(f"range-{r}-dst.bin", n, np.uint16)
    else:
        ts = np.empty(n, idt)
        td = np.empty(n, np.uint16)
    t = time.perf_counter()
    if n and rs.spill is not None:  # offsets within the range; self loops already gone
        pos = bstart[:-1].copy()
        for s, d in rs.spill.blocks(r):
            K.partition_block(s, d, 0, hi - lo, shift, pos, ts, td, False)
            update(s.shape[0])
    elif n:
        pos = bstart[:-1].copy()
        for part in rs.source.parts():
            for s, d in part.iter_blocks(plan.block_edges):
                K.partition_block(s, d, lo, hi, shift, pos, ts, td, rs.drop_self_loops)
                stats["bytes_read"] += s.nbytes + d.nbytes
                update(s.shape[0])
    elif rs.spill is None:
        update(rs.source.num_edges or 0)
    t2 = time.perf_counter()
    stats["partition_seconds"] += t2 - t
    kept = np.empty(len(bstart) - 1, np.int64)
    K.finish_buckets(ts, td, bstart, hi - lo, shift, rs.sort, rs.coalesce, counts, kept)
    del td
    m = K.pack_buckets(ts, bstart, kept) if rs.coalesce else n
    stats["finish_seconds"] += time.perf_counter() - t2
    return ts[:m]


def _ranges(source: EdgeSource, plan: CscPlan, cum: np.ndarray, bounds: np.ndarray, *,
            sort: bool, coalesce: bool, drop_self_loops: bool, scratch: _Scratch, stats: dict,
            progress: bool, what: str) -> _Ranges:
    """The ranges to sort; with enough of them the input is spilled once (:class:`_Spill`)
    rather than re-read per range."""
    rs = _Ranges(source, plan, cum, bounds, sort, coalesce, drop_self_loops)
    h = plan.hist_shift
    range_hi = np.minimum(np.asarray(bounds[1:], np.int64) << h, plan.num_dst)
    if SPILL_MIN_RANGES <= len(rs) <= plan.block_edges // SPILL_MIN_SEGMENT and int(cum[-1]):
        t = time.perf_counter()
        rs.spill = _Spill(source, plan, range_hi, drop_self_loops, scratch, stats, progress,
                          what)
        stats["spill_seconds"] = round(time.perf_counter() - t, 3)
        stats["passes"] = 2  # reads of the input: the histogram and the spill
    return rs


def _iter_ranges(rs: _Ranges, counts: np.ndarray, *, scratch: _Scratch, stats: dict,
                 progress: bool, what: str):
    """Yield each destination range's slice of ``indices``, in order, sorted here.

    ``counts[d + 1]`` receives destination ``d``'s count (kept edges).
    """
    total = int(rs.cum[-1]) if rs.spill is not None else (rs.source.num_edges or 0) * len(rs)
    with bar(total or None, f"{what}: partition", progress) as pb:
        for r in range(len(rs)):
            lo, hi = rs.dst_range(r)
            yield _sort_range(rs, r, counts[lo + 1:hi + 1], scratch, stats, pb.update, what)


def sort_range_files(rs: _Ranges, r: int, scratch_dir: str, what: str) -> dict:
    """Sort range ``r`` (in a worker): its indices and counts go to files in ``scratch_dir``
    (shared storage); returns their paths and the statistics."""
    scratch = _Scratch(None)
    scratch.path = scratch_dir  # the driver's directory: the driver removes it
    lo, hi = rs.dst_range(r)
    counts = np.zeros(hi - lo, np.int64)
    stats = {"bytes_read": 0, "partition_seconds": 0.0, "finish_seconds": 0.0}
    out = _sort_range(rs, r, counts, scratch, stats, lambda k: None, what)
    paths = (os.path.join(scratch_dir, f"range-{r}.idx"),
             os.path.join(scratch_dir, f"range-{r}.cnt"))
    write_file(paths[0], np.ascontiguousarray(out))
    write_file(paths[1], counts)
    return {"indices": paths[0], "counts": paths[1], "edges": int(out.shape[0]), **stats}


class CscPasses:
    """How a conversion runs the two passes that scale with its input: here, in this process.

    :func:`coo_to_csc` calls :meth:`histogram` then :meth:`sorted_ranges`; the Dask variant
    (:class:`preprocess.dask.csc.DaskCscPasses`) runs them as tasks, with the same result.
    """

    def histogram(self, source: EdgeSource, plan: CscPlan, hist: np.ndarray,
                  drop_self_loops: bool, progress: bool, what: str) -> tuple[int, int]:
        """Check the ids and count edges per histogram bucket: (edges, bytes read)."""
        return _histogram(source, plan, hist, drop_self_loops, progress, what)

    def sorted_ranges(self, rs: _Ranges, counts: np.ndarray, *, scratch: _Scratch, stats: dict,
                      progress: bool, what: str):
        """Each destination range's slice of ``indices``, in order (see :func:`_iter_ranges`)."""
        return _iter_ranges(rs, counts, scratch=scratch, stats=stats, progress=progress,
                            what=what)


def coo_to_csc(source: EdgeSource, *, num_src: int, num_dst: int, indptr_out, indices_out,
               coalesce: bool = False, drop_self_loops: bool = False, sort_neighbors: bool = True,
               budget_bytes: int = 1 << 30, tmpdir=None, progress: bool = True,
               what: str = "csc", passes: CscPasses | None = None) -> dict:
    """Convert ``source`` to CSC, streaming the result into two sinks.

    ``indptr_out(indptr)`` is called once with the final ``indptr`` (an array or memory map
    of ``num_dst + 1`` int64) *before* ``indices_out(blocks, num_edges, dtype)`` is called with
    an iterator of index blocks in order. :func:`build_csc` passes the store writer's methods;
    tests pass plain collectors. Returns the statistics of :func:`build_csc`.

    Without ``sort_neighbors`` (and without ``coalesce``) the order of the sources within a
    destination is unspecified. ``passes`` runs the histogram and the range sorts (by default
    in this process; :class:`preprocess.dask.csc.DaskCscPasses` runs them as Dask tasks, each
    range in its own memory budget, exchanging files through ``tmpdir``, which every worker
    must then see); the result is the same.
    """
    t0 = time.perf_counter()
    if num_src < 0 or num_dst < 0:
        raise ValueError(f"Expected non-negative node counts. Got {num_src} and {num_dst}.")
    plan = plan_csc(num_src, num_dst, source.num_edges, budget_bytes)
    scratch = _Scratch(tmpdir)
    stats = {"edges_in": 0, "edges_out": 0, "bytes_read": 0, "passes": 0,
             "budget_bytes": plan.budget_bytes, "partition_seconds": 0.0, "finish_seconds": 0.0}
    try:
        with PeakMemory() as mem:
            nh = -(-num_dst >> plan.hist_shift) if num_dst else 0
            cum = np.zeros(nh + 1, np.int64)
            passes = passes if passes is not None else CscPasses()
            edges_in, nbytes = passes.histogram(source, plan, cum[1:], drop_self_loops,
                                                progress, what)
            np.cumsum(cum, out=cum)
            stats.update(edges_in=edges_in, bytes_read=nbytes, passes=1)
            t_hist = time.perf_counter()
            bounds = K.plan_ranges(cum, plan.edge_bytes, plan.work_bytes)
            stats["ranges"] = len(bounds) - 1
            stats["passes"] += len(bounds) - 1 if int(cum[-1]) else 0
            indptr = (np.zeros(num_dst + 1, np.int64) if plan.indptr_in_ram
                      else scratch.zeros("indptr.bin", num_dst + 1, np.int64))
            tmp_path = scratch.file("indices.bin")
            rs = _ranges(source, plan, cum, bounds, sort=sort_neighbors, coalesce=coalesce,
                         drop_self_loops=drop_self_loops, scratch=scratch, stats=stats,
                         progress=progress, what=what)
            kw = dict(scratch=scratch, stats=stats, progress=progress, what=what)
            outs = passes.sorted_ranges(rs, indptr, **kw)
            with disk_full_as_error(tmp_path), open(tmp_path, "wb") as f:
                for out in outs:
                    f.write(memoryview(np.ascontiguousarray(out)).cast("B"))
                    del out  # or the next range's buffers would be allocated beside it
            del cum, rs
            np.cumsum(indptr, out=indptr)
            n_out = int(indptr[-1])
            stats["edges_out"] = n_out
            t_w = time.perf_counter()
            indptr_out(indptr)
            tmp = (map_file(tmp_path, dtype=plan.index_dtype, mode="r", shape=(n_out,))
                   if n_out else np.empty(0, plan.index_dtype))
            step = max(1, (64 << 20) // plan.index_dtype.itemsize)
            indices_out((tmp[i:i + step] for i in range(0, n_out, step)), n_out,
                        plan.index_dtype)
            del tmp, indptr
            stats["write_seconds"] = time.perf_counter() - t_w
    finally:
        scratch.close()
    dt = time.perf_counter() - t0
    for k in ("partition_seconds", "finish_seconds", "write_seconds"):
        stats[k] = round(stats[k], 3)
    stats.update(seconds=round(dt, 3), histogram_seconds=round(t_hist - t0, 3),
                 edges_per_s=stats["edges_in"] / dt if dt > 0 else 0.0,
                 gb_per_s=stats["bytes_read"] / dt / 1e9 if dt > 0 else 0.0,
                 peak_anon_bytes=mem.peak, added_anon_bytes=mem.added,
                 block_edges=plan.block_edges, indptr_in_ram=plan.indptr_in_ram)
    return stats


def _check_free(writer, et: EdgeType, need: int) -> None:
    """:class:`NotEnoughDiskError` when a local store's file system lacks ``need`` bytes."""
    loc = Location(writer.url)
    if loc.is_local:
        free = free_disk_bytes(loc.root)
        if need > free:
            raise NotEnoughDiskError(f"Expected {format_size(need)} free for {tuple(et)} in "
                                     f"{writer.url}. Got {format_size(free)} instead.")


def build_csc(writer, etype: Sequence[str], source: EdgeSource, *, num_src: int, num_dst: int,
              coalesce: bool = False, drop_self_loops: bool = False, symmetrize: bool = False,
              sort_neighbors: bool = True, budget_bytes: int = 1 << 30, tmpdir=None,
              progress: bool = True, passes: CscPasses | None = None) -> dict:
    """Write edge type ``etype`` into ``writer`` (a :class:`featurestore.StoreWriter`) as CSC.

    Parameters
    ----------
    writer
        The store being written; both node types must have been added (their counts are
        checked against ``num_src`` and ``num_dst``).
    etype
        ``(src_type, relation, dst_type)``.
    source
        The edges, with ids already in store numbering (see :mod:`preprocess.steps.renumber`).
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
        Sort the sources of each destination (else their order is unspecified).
    budget_bytes
        Anonymous memory the conversion may hold (the input is read two or three times:
        a histogram pass, then once per range or one spill pass).
    tmpdir
        Where scratch files go (the indices before their copy into the store, spilled
        edges, indptr past a sixteenth of the budget); the system's temp directory by default.
    progress
        Show tqdm bars.
    passes
        Who runs the passes over the input (see :func:`coo_to_csc`): this process by default;
        :class:`preprocess.dask.csc.DaskCscPasses` for Dask tasks (``tmpdir`` must then be
        storage every worker sees). A job picks one through
        :func:`preprocess.jobs.variants.build_csc`.

    Returns
    -------
    dict
        ``edges_in``, ``edges_out``, ``seconds``, ``edges_per_s``, ``gb_per_s`` (input bytes
        read per second, over all passes), ``passes`` (reads of the input), ``ranges``,
        ``spill_bytes`` (when spilled), ``peak_anon_bytes`` and the seconds of each phase.
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
    # store + scratch indices, and the spilled edges (sources and uint32 offsets)
    _check_free(writer, et, (source.num_edges or 0) * (3 * fmt.index_dtype(num_src).itemsize + 4))
    state = {}

    def indptr_out(indptr):
        state["indptr"] = indptr

    def indices_out(blocks, n, dtype):
        writer.add_edge_type(et, state["indptr"], blocks, indices_dtype=dtype, validate=False)

    stats = coo_to_csc(source, num_src=num_src, num_dst=num_dst, indptr_out=indptr_out,
                       indices_out=indices_out, coalesce=coalesce,
                       drop_self_loops=drop_self_loops, sort_neighbors=sort_neighbors,
                       budget_bytes=budget_bytes, tmpdir=tmpdir, progress=progress,
                       what=et.key(), passes=passes)
    log.info("%s: %d edges in, %d out, %.1f s, %.2fM edges/s, %d passes, peak %s", et.key(),
             stats["edges_in"], stats["edges_out"], stats["seconds"],
             stats["edges_per_s"] / 1e6, stats["passes"], format_size(stats["peak_anon_bytes"]))
    return stats
