"""Per-edge columns (edge features, relation ids, timestamps) from input order to CSC order.

A store keeps edge data in the CSC edge order of its edge type: row ``i`` belongs to the edge
at position ``i`` of ``indices`` (the ``e_id`` a sampler returns). Inputs give it in COO
order, row ``j`` for the ``j``-th edge of the edge list. Two passes carry it across, each in
a memory budget::

    order = edge_order(writer, etype, source, "scratch/order.npy", budget_bytes=1 << 30)
    write_edge_column(writer, etype, "edge_attr", FeatureSource.from_npy("attr.npy"), order)
    # or both at once:
    carry_columns(writer, etype, source, {"edge_attr": "attr.npy", "relation": rel},
                  budget_bytes=1 << 30, scratch_dir="scratch")

1. **Order** (:func:`edge_order`). The edges are sorted again, after :func:`build_csc` wrote
   the edge type, by the same external bucketed sort (:func:`coo_to_csc`) with each source id
   replaced by the key ``src << b | j`` (``j`` the edge's position in the input, ``b`` its
   bits): sources sorted within a destination, so the sorted keys give the store's
   ``indices`` (``key >> b``, checked against the store) and, in the same order, the input
   position of every CSC slot; duplicate ``(src, dst)`` pairs keep their input order. The
   slots are put in input order by an external bucket permutation (as the columns below) into
   ``slot_of_edge`` (int64 per input edge, -1 for a dropped self loop), an ``.npy`` written
   sequentially beside a small JSON record.
2. **Columns** (:func:`write_edge_column`). The column is streamed in input order (any
   :class:`FeatureSource`: ``.npy``, parquet, CSV) and each row goes to its slot: into an
   array in RAM when the column fits a quarter of the budget, else through scratch bucket
   files by output range (an external bucket permutation: the column read once, the scratch
   written and read once), then written to the store block by block.

Supported: ``drop_self_loops`` (the self loops' rows are dropped with them) and ``symmetrize``
(the reverse edge ``(d, s)`` carries the same row as ``(s, d)``; PyG's ``ToUndirected``
copies ``edge_attr`` the same way, without coalescing here). Not supported, refused with
:class:`EdgeColumnError` by the jobs: ``coalesce`` (merging duplicate edges would need a rule
to merge their rows) and ``sort_neighbors=False`` (the order of sources within a destination
would be unspecified); :func:`edge_order` refuses a store whose CSC differs from the sorted
input (naming the first edge that differs).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from featurestore.fileio import disk_full_as_error
from featurestore.format import names as fmt
from featurestore.format.names import EdgeType

from preprocess.errors import EdgeColumnError, IdsOutOfRangeInputError
from preprocess.progress import bar
from preprocess.sources.base import EdgeSource, concat
from preprocess.sources.columns import open_columns
from preprocess.sources.features import FeatureSource
from preprocess.steps import edge_kernels as EK
from preprocess.steps.cast import cast_block
from preprocess.steps.csc import MIN_BUDGET_BYTES, coo_to_csc
from preprocess.steps.diskmap import open_npy
from preprocess.steps.memory import PeakMemory, format_size, free_disk_bytes

__all__ = ["EdgeOrder", "edge_order", "write_edge_column", "carry_columns", "column_kind",
           "EdgeColumnError"]

log = logging.getLogger(__name__)

KINDS = ("auto", "features", "values")


@dataclass(frozen=True)
class EdgeOrder:
    """Where each input edge went: ``slot_of_edge`` (``path``, int64, ``edges_in`` entries,
    twice as many with ``symmetrize``: the reverse edges follow) holds its CSC slot, -1 for a
    dropped self loop; ``edges_out`` is the edge type's edge count."""

    path: str
    edges_in: int
    edges_out: int
    symmetrize: bool

    def slots(self) -> np.ndarray:
        """``slot_of_edge``, memory-mapped."""
        return np.load(self.path, mmap_mode="r")

    @staticmethod
    def load(path, ident: dict | None = None) -> EdgeOrder | None:
        """The order :func:`edge_order` finished at ``path``, or None (absent, partial, or
        recorded for another store, edge type, source or option than ``ident`` says)."""
        try:
            with open(os.fspath(path) + ".json") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            return None
        if not os.path.exists(os.fspath(path)) or any(rec.get(k) != v
                                                      for k, v in (ident or {}).items()):
            return None
        return EdgeOrder(os.fspath(path), int(rec["edges_in"]), int(rec["edges_out"]),
                         bool(rec["symmetrize"]))


class _KeyedEdges(EdgeSource):
    """``source``'s edges with each source id replaced by ``src << shift | position``
    (position: the edge's index in ``source``), self loops left out when asked."""

    def __init__(self, source: EdgeSource, shift: int, num_src: int, num_dst: int,
                 drop_self_loops: bool):
        self.inner, self.shift = source, shift
        self.num_src, self.num_dst, self.drop = num_src, num_dst, drop_self_loops
        self.name = source.name
        self.num_edges = source.num_edges

    def iter_blocks(self, block_edges=None):
        pos = 0
        for part in self.inner.parts():
            at = 0
            for s, d in part.iter_blocks(block_edges):
                keys = np.empty(s.shape[0], np.int64)
                dd = np.empty(s.shape[0], np.int64)
                n = EK.compose_keys(s, d, pos, self.shift, self.num_src, self.num_dst,
                                    self.drop, keys, dd)
                if n < 0:
                    i = -1 - n
                    sv, dv = int(s[i]), int(d[i])
                    what, v, lim = (("source", sv, self.num_src) if not 0 <= sv < self.num_src
                                    else ("destination", dv, self.num_dst))
                    raise IdsOutOfRangeInputError(f"Expected {what} ids in [0, {lim}) in "
                                                  f"{part.name}. Got {v} at edge {at + i}.")
                yield keys[:n], dd[:n]
                pos += s.shape[0]
                at += s.shape[0]

    def iter_raw(self, block_edges):
        return self.iter_blocks(block_edges)


def _edge_type_of(writer, etype) -> tuple[EdgeType, int, int, int]:
    """``(etype, num_src, num_dst, num_edges)`` from the writer's schema."""
    et = EdgeType(*etype)
    try:
        e = writer.meta.edge_type(et)
    except KeyError:
        raise EdgeColumnError(f"Expected edge type {tuple(et)} written to {writer.url} (by "
                              "build_csc) before its edge columns.") from None
    nts = writer.meta.node_types
    return et, nts[et.src].num_nodes, nts[et.dst].num_nodes, int(e.num_edges)


def _stored(writer, et: EdgeType, part: str):
    """The store's ``indptr`` or ``indices`` array of ``et`` (zarr, read by slices)."""
    import zarr

    return zarr.open_array(store=writer.loc.zarr_store(read_only=True),
                           path=fmt.edge_key(et, part), mode="r")


def _mismatch(writer, et, source, what: str) -> EdgeColumnError:
    return EdgeColumnError(
        f"Expected the CSC of {tuple(et)} in {writer.url} to be the edges of {source.name} "
        f"sorted by (destination, source). {what}: it was built with other options (coalesce, "
        "sort_neighbors=False) or from other edges, so edge columns cannot be placed.")


class _OrderSink:
    """The two sinks :func:`coo_to_csc` streams the keyed sort into: ``indptr`` is compared
    with the store's; the sorted keys' sources are compared with the store's ``indices`` and
    their slots go to their input positions in ``slots`` through a :class:`_Placer` (an
    external bucket permutation: no random writes to the memory map)."""

    def __init__(self, writer, et: EdgeType, source: EdgeSource, slots: np.ndarray, shift: int,
                 num_edges: int, num_dst: int, check_csc: bool, why: str, budget_bytes: int,
                 tmpdir):
        self.writer, self.et, self.source, self.slots = writer, et, source, slots
        self.shift, self.num_edges, self.num_dst = shift, num_edges, num_dst
        self.check, self.why = check_csc, why
        self.budget, self.tmpdir = budget_bytes, tmpdir
        self.step = max(1 << 12, budget_bytes // 128)
        self.edges_out: int | None = None
        self.stored = ({p: _stored(writer, et, p) for p in ("indptr", "indices")}
                       if check_csc else {})

    def indptr(self, indptr) -> None:
        n = self.edges_out = int(indptr[-1])
        if n != self.num_edges:
            raise _mismatch(self.writer, self.et, self.source,
                            f"It has {self.num_edges} edges, the input {n} {self.why}")
        if not self.check:
            return
        for lo in range(0, self.num_dst + 1, self.step):
            a = np.asarray(indptr[lo:lo + self.step])
            bad = np.flatnonzero(a != self.stored["indptr"][lo:lo + a.shape[0]])
            if bad.size:
                raise _mismatch(self.writer, self.et, self.source,
                                f"Destination {lo + int(bad[0]) - 1} has another number of "
                                "edges")

    def indices(self, blocks, n, dtype) -> None:
        at = 0
        empty = np.empty(0, np.int64)
        placer = _Placer(self.slots.shape[0], (), np.dtype(np.int64), self.budget, self.tmpdir,
                         f"the edge order of {tuple(self.et)}", fill=-1)
        try:
            for big in blocks:
                for lo in range(0, big.shape[0], self.step):
                    keys = np.asarray(big[lo:lo + self.step])
                    k = keys.shape[0]
                    ref = self.stored["indices"][at:at + k] if self.check else empty
                    pos = np.empty(k, np.int64)
                    bad = EK.key_positions(keys, self.shift, pos, ref, self.check)
                    if bad >= 0:
                        raise _mismatch(self.writer, self.et, self.source,
                                        f"Edge {at + bad} has another source")
                    del keys, ref
                    placer.add(np.arange(at, at + k, dtype=np.int64), pos)
                    at += k
            lo = 0
            for b in placer.blocks(self.step):  # slot of each input position, in order
                self.slots[lo:lo + b.shape[0]] = b
                lo += b.shape[0]
        finally:
            placer.close()


def _key_shift(et: EdgeType, num_src: int, n_stream: int) -> int:
    """Bits of the position part of the sort key; :class:`EdgeColumnError` when a source id
    and a position do not fit 63 bits together."""
    shift = max(1, (n_stream - 1).bit_length())
    if num_src and (num_src - 1).bit_length() + shift > 62:
        raise EdgeColumnError(f"Expected fewer edges or nodes for edge columns of {tuple(et)}: "
                              f"{num_src} source ids x {n_stream} edge positions do not fit "
                              "a 63-bit sort key.")
    return shift


def _check_free(et: EdgeType, folder: str, need: int) -> None:
    free = free_disk_bytes(folder)
    if need > free:
        raise EdgeColumnError(f"Expected {format_size(need)} free for the edge order of "
                              f"{tuple(et)} in {folder}. Got {format_size(free)}.")


def edge_order(writer, etype: Sequence[str], source: EdgeSource, path, *,
               drop_self_loops: bool = False, symmetrize: bool = False,
               budget_bytes: int = 1 << 30, tmpdir=None, progress: bool = True,
               check_csc: bool = True) -> EdgeOrder:
    """Compute where each edge of ``source`` sits in the CSC of ``etype`` (already written to
    ``writer`` by :func:`build_csc` from the same ``source`` and the same ``drop_self_loops``
    and ``symmetrize``, with sorted neighbours and no coalescing), into ``path`` (a ``.npy``
    and ``path + ".json"``, written whole or not at all; a finished one for the same store,
    edge type, source name and options is reused).

    ``check_csc`` compares the store's ``indptr`` and ``indices`` with the sorted input as it
    goes (a sequential read of both) and raises :class:`EdgeColumnError` at the first
    difference. Anonymous memory stays within ``budget_bytes``; scratch files go to
    ``tmpdir`` (about 20 bytes per edge, removed) and ``path`` takes 8 bytes per edge.
    """
    path = os.fspath(path)
    et, num_src, num_dst, num_edges = _edge_type_of(writer, etype)
    if symmetrize and et.src != et.dst:
        raise EdgeColumnError(f"Expected symmetrize only for a relation within one node type. "
                              f"Got {tuple(et)}.")
    n_in = source.count_edges()
    ident = {"store": writer.url, "etype": et.key(), "source": source.name,
             "drop_self_loops": drop_self_loops}
    done = EdgeOrder.load(path, ident)
    if done is not None and (done.edges_in, done.edges_out, done.symmetrize) == \
            (n_in, num_edges, symmetrize):
        return done
    n_stream = n_in * (2 if symmetrize else 1)
    shift = _key_shift(et, num_src, n_stream)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _check_free(et, os.path.dirname(os.path.abspath(path)), n_stream * 32)
    partial = path + ".partial.npy"
    slots = open_npy(partial, mode="w+", dtype=np.int64, shape=(n_stream,))
    stream = concat(source, source.reversed()) if symmetrize else source
    # the sink places slots while the sort's merge still holds its buffers: half each (the
    # sort at least its minimum: at a 16 MiB budget the two hold 24 MiB)
    sort_budget = max(min(budget_bytes, MIN_BUDGET_BYTES), budget_bytes - budget_bytes // 2)
    sink = _OrderSink(writer, et, source, slots, shift, num_edges, num_dst, check_csc,
                      "after dropping self loops" if drop_self_loops else "",
                      budget_bytes // 2, tmpdir)
    stats = coo_to_csc(_KeyedEdges(stream, shift, num_src, num_dst, drop_self_loops),
                       num_src=num_src << shift, num_dst=num_dst, indptr_out=sink.indptr,
                       indices_out=sink.indices, coalesce=False, drop_self_loops=False,
                       sort_neighbors=True, budget_bytes=sort_budget,
                       tmpdir=tmpdir, progress=progress, what=f"{et.key()}: edge order")
    slots.flush()
    sink.slots = slots = None
    os.replace(partial, path)
    rec = {"edges_in": n_in, "edges_out": sink.edges_out, "symmetrize": symmetrize,
           "seconds": stats["seconds"], "ranges": stats["ranges"], **ident}
    with disk_full_as_error(path + ".json"), open(path + ".json.partial", "w") as f:
        json.dump(rec, f)
    os.replace(path + ".json.partial", path + ".json")
    log.info("%s: edge order of %d edges in %.1f s (%d ranges)", et.key(), n_in,
             stats["seconds"], stats["ranges"])
    return EdgeOrder(path, n_in, sink.edges_out, symmetrize)


def column_kind(source: FeatureSource, kind: str = "auto") -> str:
    """``"features"`` (rows of values: an edge feature matrix) or ``"values"`` (1-D: a relation
    id, a timestamp); ``"auto"`` decides by the source's shape."""
    if kind not in KINDS:
        raise ValueError(f"Expected kind in {KINDS}. Got {kind!r}.")
    if kind == "auto":
        return "features" if source.row_shape else "values"
    if kind == "values" and source.row_shape:
        raise EdgeColumnError(f"Expected a 1-D column for per-edge values in {source.name}. "
                              f"Got rows of shape {source.row_shape}.")
    if kind == "features" and not source.row_shape:
        raise EdgeColumnError(f"Expected rows of values (a 2-D matrix) for edge features in "
                              f"{source.name}. Got a 1-D column: store it as values.")
    return kind


class _Placer:
    """Rows to their output positions (an external bucket permutation): scattered into one
    array in RAM when the output fits a quarter of the budget, else distributed into scratch
    bucket files by output range and each bucket placed in RAM in turn. With ``fill``, output
    rows no input reaches hold ``fill``; without, every output row must be reached once."""

    def __init__(self, n_out: int, row_shape: tuple, dtype: np.dtype, budget_bytes: int,
                 tmpdir, what: str, fill=None):
        self.n_out, self.shape, self.dtype = n_out, tuple(row_shape), dtype
        self.what, self.fill = what, fill
        out_row = max(1, int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize)
        self.bucket_rows = max(1, int(budget_bytes // 4 // (out_row + 8)))
        self.nb = max(1, -(-n_out // self.bucket_rows))
        self.counts = np.zeros(self.nb, np.int64)
        self.placed = self.placed_words = None
        self.scratch = None
        if self.nb == 1:
            self.placed = self._empty(n_out)
            self.placed_words = EK.as_words(self.placed)
            return
        if tmpdir is not None:
            os.makedirs(tmpdir, exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix="edgecol-", dir=tmpdir)
        with disk_full_as_error(self.scratch):
            self.files = [open(self._file(b, "rows"), "wb") for b in range(self.nb)]
            self.pos_files = [open(self._file(b, "pos"), "wb") for b in range(self.nb)]

    def _file(self, b: int, what: str) -> str:
        return os.path.join(self.scratch, f"b{b}.{what}")

    def _empty(self, m: int) -> np.ndarray:
        if self.fill is None:
            return np.empty((m,) + self.shape, self.dtype)
        return np.full((m,) + self.shape, self.fill, self.dtype)

    def add(self, block: np.ndarray, dest: np.ndarray) -> None:
        """Place ``block``'s rows at slots ``dest`` (-1: dropped; twice as many entries as
        rows when symmetrized: ``dest[i]`` is row ``i % len(block)``)."""
        words = EK.as_words(block)
        if self.placed is not None:
            EK.place_rows(self.placed_words, dest, words)
            return
        idx = np.empty(dest.shape[0], np.int64)
        m = EK.bucket_order(dest, self.bucket_rows, self.counts, idx)
        idx = idx[:m]
        rows = np.empty((m, words.shape[1]), words.dtype)
        EK.take_rows(rows, words, idx)
        pos = dest[idx]
        c0 = 0
        with disk_full_as_error(self.scratch):
            for b in np.flatnonzero(self.counts):
                c = int(self.counts[b])
                self.files[b].write(memoryview(np.ascontiguousarray(rows[c0:c0 + c])).cast("B"))
                self.pos_files[b].write(memoryview(pos[c0:c0 + c] - b * self.bucket_rows)
                                        .cast("B"))
                c0 += c

    def blocks(self, rows: int):
        """The placed rows in output order, in blocks of at most ``rows``."""
        n_out = self.n_out
        if self.placed is not None:
            for lo in range(0, n_out, rows):
                yield self.placed[lo:lo + rows]
            return
        with disk_full_as_error(self.scratch):  # closing flushes
            for f in self.files + self.pos_files:
                f.close()
        for b in range(self.nb):
            m = min(self.bucket_rows, n_out - b * self.bucket_rows)
            data = np.fromfile(self._file(b, "rows"), dtype=self.dtype).reshape((-1,) + self.shape)
            pos = np.fromfile(self._file(b, "pos"), dtype=np.int64)
            os.remove(self._file(b, "rows"))
            if pos.shape[0] != data.shape[0] or data.shape[0] > m or (
                    self.fill is None and data.shape[0] != m):
                raise EdgeColumnError(f"Expected {m} rows of {self.what} in output range {b}. "
                                      f"Got {data.shape[0]}: the edge order is damaged.")
            out = self._empty(m)
            EK.place_rows(EK.as_words(out), pos, EK.as_words(data))
            del data, pos
            for i in range(0, m, rows):
                yield out[i:i + rows]
            del out

    def close(self) -> None:
        """Drop the rows in RAM and the scratch files."""
        self.placed = self.placed_words = None
        if self.scratch is not None:
            for f in self.files + self.pos_files:
                f.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def _placed_blocks(source: FeatureSource, order: EdgeOrder, dtype: np.dtype, rows: int,
                   budget_bytes: int, tmpdir, progress: bool, stats: dict):
    """The rows of ``source`` (input order) in CSC order, in blocks of at most ``rows``."""
    state: dict = {}
    slots = order.slots()
    n_in = order.edges_in
    out_row = max(1, int(np.prod(source.row_shape, dtype=np.int64)) * dtype.itemsize)
    in_rows = max(1, int(budget_bytes // 8 // (source.row_bytes + 2 * out_row + 32)))
    placer = _Placer(order.edges_out, source.row_shape, dtype, budget_bytes, tmpdir,
                     f"{source.name} (edge order {order.path})")
    try:
        at = 0
        with bar(n_in, f"{source.name}: place", progress, unit="row") as pb:
            for block in source.iter_blocks(in_rows):
                block = cast_block(np.asarray(block), dtype, source.name, state)
                k = block.shape[0]
                if at + k > n_in:
                    raise EdgeColumnError(f"Expected {n_in} rows in {source.name} (one per "
                                          "input edge). Got more.")
                dest = np.asarray(slots[at:at + k])
                if order.symmetrize:
                    dest = np.concatenate([dest, slots[n_in + at:n_in + at + k]])
                placer.add(block, dest)
                stats["bytes_read"] += block.nbytes
                at += k
                pb.update(k)
        if at != n_in:
            raise EdgeColumnError(f"Expected {n_in} rows in {source.name} (one per input "
                                  f"edge). Got {at}.")
        stats["overflow"] = state.get("overflow", 0)
        yield from placer.blocks(rows)
    finally:
        placer.close()


def write_edge_column(writer, etype: Sequence[str], name: str, source: FeatureSource | str,
                      order: EdgeOrder, *, kind: str = "auto", dtype=None, compressors=None,
                      budget_bytes: int = 1 << 30, tmpdir=None, progress: bool = True) -> dict:
    """Write ``source`` (one row per input edge, in input order: a :class:`FeatureSource` or
    a ``.npy`` path) as edge feature (``kind="features"``, 2-D) or per-edge values
    (``"values"``, 1-D; ``"auto"``: by shape) ``name`` of ``etype``, in CSC edge order as
    ``order`` (from :func:`edge_order`) says. ``dtype`` casts on the way. Returns the
    statistics (``rows``, ``bytes_read``, ``seconds``, ``peak_anon_bytes``)."""
    t0 = time.perf_counter()
    if isinstance(source, (str, os.PathLike)):
        source = open_columns(source)
    et, _, _, num_edges = _edge_type_of(writer, etype)
    kind = column_kind(source, kind)
    if num_edges != order.edges_out:
        raise EdgeColumnError(f"Expected the edge order {order.path} of {tuple(et)} "
                              f"({num_edges} edges). Got one of {order.edges_out} edges.")
    n = source.num_rows
    if n != order.edges_in:
        raise EdgeColumnError(f"Expected {order.edges_in} rows in {source.name} (one per input "
                              f"edge of {tuple(et)}). Got {n} instead.")
    dtype = np.dtype(dtype) if dtype is not None else source.dtype
    out_row = max(1, int(np.prod(source.row_shape, dtype=np.int64)) * dtype.itemsize)
    rows = max(1, min(int(budget_bytes // 8 // out_row), (64 << 20) // out_row))
    stats = {"bytes_read": 0}
    with PeakMemory() as mem:
        blocks = _placed_blocks(source, order, dtype, rows, budget_bytes, tmpdir, progress,
                                stats)
        if kind == "features":
            writer.add_edge_features(et, name, blocks, dtype=dtype,
                                     row_shape=tuple(source.row_shape), compressors=compressors)
        else:
            first = next(blocks, None)
            head = [np.empty(0, dtype) if first is None else first]
            writer.add_edge_values(et, name, _chain(head, blocks))
    if stats.get("overflow"):
        log.warning("%s: %d values overflowed to inf when cast to %s", source.name,
                    stats["overflow"], dtype)
    dt = time.perf_counter() - t0
    return {"rows": order.edges_out, "kind": kind, "bytes_read": stats["bytes_read"],
            "seconds": round(dt, 3), "peak_anon_bytes": mem.peak,
            "overflow": stats.get("overflow", 0)}


def _chain(head, rest):
    yield from head
    yield from rest


def carry_columns(writer, etype: Sequence[str], coo_source: EdgeSource,
                  columns: Mapping[str, FeatureSource | np.ndarray | str], *,
                  budget_bytes: int = 1 << 30, scratch_dir=None, kind: str = "auto",
                  dtypes: Mapping[str, object] | None = None, drop_self_loops: bool = False,
                  symmetrize: bool = False, progress: bool = True) -> dict:
    """Put per-edge ``columns`` given in the order of ``coo_source`` into the CSC edge order
    of ``etype``, which :func:`build_csc` wrote to ``writer`` from ``coo_source`` (with the
    same ``drop_self_loops`` and ``symmetrize``; sorted neighbours, no coalescing).

    ``columns``: name -> a :class:`FeatureSource`, an array (or memory map) or a ``.npy``
    path, one row per input edge; ``kind``: ``"auto"`` (2-D: edge features, 1-D: per-edge
    values), ``"features"`` or ``"values"`` for all; ``dtypes``: name -> dtype to cast to.
    The edge order (8 bytes per edge) and the other scratch files go under ``scratch_dir``
    (the system's temp directory by default) and are removed at the end. Returns
    ``{"order": stats, name: stats, ...}``.
    """
    srcs = {}
    for name, col in columns.items():
        if isinstance(col, FeatureSource):
            srcs[name] = col
        elif isinstance(col, (str, os.PathLike)):
            srcs[name] = open_columns(col)
        else:
            srcs[name] = FeatureSource.from_array(col, f"<column {name}>")
        column_kind(srcs[name], kind)
    if scratch_dir is not None:
        os.makedirs(scratch_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="edge-columns-", dir=scratch_dir)
    try:
        t = time.perf_counter()
        order = edge_order(writer, etype, coo_source, os.path.join(work, "order.npy"),
                           drop_self_loops=drop_self_loops, symmetrize=symmetrize,
                           budget_bytes=budget_bytes, tmpdir=work, progress=progress)
        out = {"order": {**asdict(order), "seconds": round(time.perf_counter() - t, 3)}}
        for name, src in srcs.items():
            out[name] = write_edge_column(writer, etype, name, src, order, kind=kind,
                                          dtype=(dtypes or {}).get(name),
                                          budget_bytes=budget_bytes, tmpdir=work,
                                          progress=progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
