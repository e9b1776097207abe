"""Renumbering as Dask tasks: the ``reorder:`` degree counts and ``map:`` steps on workers.

A ``map:`` step of a spec job maps every edge's raw ids (sparse int64 or strings) to store ids
through the node types' id maps and degree rankings, and writes the ``[2, E]`` ``.npy`` the
CSC passes read. Its edges are cut into tasks: a ``.npy`` part into blocks of
``block_edges`` edges, any other part (parquet, CSV: no random access) whole. A task maps its
edges with the same :class:`~preprocess.steps.renumber.IdMapper` (reopened by file name on the
worker) and writes them with ``os.pwrite`` at their position in the preallocated output, so
the file is the single-process one byte for byte. The degree counts of ``--reorder degree``
are cut the same way: a task maps one side of its edges and returns the distinct store ids
with their counts, which the driver adds into the degree array. The id maps themselves are
built in the driver (their sorted runs come from one ordered pass over the input; see
docs/preprocess.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from featurestore.fileio import pwrite_all

from preprocess.dask.features import MappedArray
from preprocess.steps.diskmap import open_npy
from preprocess.sources.base import ArraySource, EdgeSource, as_int64_ids
from preprocess.sources.npy import from_npy
from preprocess.progress import bar
from preprocess.steps.renumber import IdMap, IdMapper, MappedEdges

__all__ = ["MapperFiles", "materialize_edges_dask", "count_degrees_dask"]

#: Dask key prefix of the renumbering tasks (tests count them).
TASK_PREFIX = "map-edges"
#: Dask key prefix of the degree-counting tasks.
DEGREE_PREFIX = "count-degrees"


@dataclass(frozen=True)
class MapperFiles:
    """An :class:`IdMapper` by its files: node count, id map folder, ranking file."""

    num_nodes: int
    idmap: str | None
    rank: MappedArray | None

    @classmethod
    def of(cls, m: IdMapper | None) -> MapperFiles | None:
        """The files of ``m`` (None when ``m`` is None); ValueError if its rank is in RAM."""
        if m is None:
            return None
        rank = MappedArray.of(m.rank) if m.rank is not None else None
        if m.rank is not None and rank is None:
            raise ValueError("the ranking is not a file a worker can map")
        return cls(m.num_nodes, m.idmap.path if m.idmap is not None else None, rank)

    def open(self) -> IdMapper:
        """The mapper, its files mapped in this process."""
        return IdMapper(self.num_nodes, IdMap(self.idmap) if self.idmap else None,
                        self.rank.open() if self.rank is not None else None)


@dataclass(frozen=True)
class _MapTask:
    part: EdgeSource
    lo: int | None  # edges [lo, hi) of an array part; None: the whole part
    hi: int | None
    offset: int  # position of the part's first edge in the output
    src: MapperFiles | None
    dst: MapperFiles | None
    out: str
    data_offset: int  # bytes before the data in the output .npy
    total: int  # edges in the output
    block_edges: int


def _put(fd: int, arr: np.ndarray, pos: int) -> None:
    pwrite_all(fd, np.ascontiguousarray(arr, dtype="<i8"), pos, "the renumbered edges")


def _map_task(t: _MapTask) -> int:
    """Map and write the task's edges; returns how many."""
    sm = t.src.open() if t.src is not None else None
    dm = t.dst.open() if t.dst is not None else None
    p = t.part
    if t.lo is None:
        blocks = p.iter_raw(t.block_edges)
        at = 0
    else:
        blocks = iter([(p.src[t.lo:t.hi], p.dst[t.lo:t.hi])])
        at = t.lo
    fd = os.open(t.out, os.O_WRONLY)
    n = 0
    try:
        for s, d in blocks:
            s = sm(s, p.name, "source", at) if sm else s
            d = dm(d, p.name, "destination", at) if dm else d
            s = as_int64_ids(s, p.name, "source", at)
            d = as_int64_ids(d, p.name, "destination", at)
            _put(fd, s, t.data_offset + 8 * (t.offset + at))
            _put(fd, d, t.data_offset + 8 * (t.total + t.offset + at))
            at += len(s)
            n += len(s)
    finally:
        os.close(fd)
    return n


def _tasks(source: MappedEdges, out: str, data_offset: int, total: int, block_edges: int):
    src, dst = MapperFiles.of(source.src_map), MapperFiles.of(source.dst_map)
    off = 0
    for part in source.inner.parts():
        n = part.count_edges()
        if isinstance(part, ArraySource):
            for lo in range(0, n, block_edges):
                yield _MapTask(part, lo, min(n, lo + block_edges), off, src, dst, out,
                               data_offset, total, block_edges)
        else:
            yield _MapTask(part, None, None, off, src, dst, out, data_offset, total,
                           block_edges)
        off += n


def materialize_edges_dask(client, source: MappedEdges, path: str, *,
                           block_edges: int = 1 << 22, progress: bool = False) -> EdgeSource:
    """:func:`~preprocess.steps.renumber.materialize_edges` with the edge blocks as Dask tasks."""
    from distributed import as_completed

    total = source.count_edges()
    tmp = path + ".partial"
    out = open_npy(tmp, mode="w+", dtype=np.int64, shape=(2, total))
    data_offset = int(out.offset)
    del out
    tasks = list(_tasks(source, tmp, data_offset, total, block_edges))
    tag = os.urandom(4).hex()
    futures = [client.submit(_map_task, t, key=f"{TASK_PREFIX}-{tag}-{i}", pure=False)
               for i, t in enumerate(tasks)]
    done = 0
    try:
        with bar(total, f"{source.name}: renumber (dask)", progress, unit="edge") as pb:
            for fut in as_completed(futures):
                k = fut.result()
                done += k
                pb.update(k)
    except BaseException:
        client.cancel(futures)
        raise
    if done != total:
        raise RuntimeError(f"Expected {total} renumbered edges of {source.name}. "
                           f"The tasks wrote {done}.")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return from_npy(path)


@dataclass(frozen=True)
class _DegreeTask:
    part: EdgeSource
    lo: int | None  # edges [lo, hi) of an array part; None: the whole part
    hi: int | None
    side: str  # "source" or "destination"
    mapper: MapperFiles
    block_edges: int


def _degree_task(t: _DegreeTask) -> tuple[np.ndarray, np.ndarray]:
    """(distinct store ids, their counts) of one side of the task's edges."""
    m = t.mapper.open()
    p = t.part
    if t.lo is None:
        blocks, at = p.iter_raw(t.block_edges), 0
    else:
        blocks, at = iter([(p.src[t.lo:t.hi], p.dst[t.lo:t.hi])]), t.lo
    ids, counts = [], []
    for s, d in blocks:
        u, c = np.unique(m(s if t.side == "source" else d, p.name, t.side, at),
                         return_counts=True)
        ids.append(u)
        counts.append(c)
        at += len(s)
    if len(ids) == 1:
        return ids[0], counts[0].astype(np.int64)
    if not ids:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    u, inv = np.unique(np.concatenate(ids), return_inverse=True)
    return u, np.bincount(inv, weights=np.concatenate(counts), minlength=len(u)) \
        .astype(np.int64)


def count_degrees_dask(client, deg: np.ndarray, sides, *, block_edges: int = 1 << 22) -> None:
    """``deg[store id] +=`` the edges naming it, over ``sides``: ``(source, side, mapper)``
    triples (``side`` ``"source"`` or ``"destination"``), counted in Dask tasks."""
    from distributed import as_completed

    tasks = []
    for source, side, mapper in sides:
        mf = MapperFiles.of(mapper)
        for part in source.parts():
            if isinstance(part, ArraySource):
                n = part.count_edges()
                tasks += [_DegreeTask(part, lo, min(n, lo + block_edges), side, mf, block_edges)
                          for lo in range(0, n, block_edges)]
            else:
                tasks.append(_DegreeTask(part, None, None, side, mf, block_edges))
    tag = os.urandom(4).hex()
    futures = [client.submit(_degree_task, t, key=f"{DEGREE_PREFIX}-{tag}-{i}", pure=False)
               for i, t in enumerate(tasks)]
    try:
        for fut in as_completed(futures):
            u, c = fut.result()
            deg[u] += c  # u distinct: no repeated index in the fancy add
            fut.release()
    except BaseException:
        client.cancel(futures)
        raise
