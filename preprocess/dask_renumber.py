"""Renumbering the edges as Dask tasks: the ``map:`` step of a spec job on workers.

The step maps every edge's raw ids (sparse int64 or strings) to store ids through the node
types' id maps and degree rankings, and writes the ``[2, E]`` ``.npy`` the CSC passes read.
The edges are cut into tasks: a ``.npy`` part into blocks of ``block_edges`` edges, any
other part (parquet, CSV: no random access) whole. A task maps its edges with the same
:class:`~preprocess.renumber.IdMapper` (reopened by file name on the worker) and writes them
with ``os.pwrite`` at their position in the preallocated output, so the file is the
single-process one byte for byte. The id maps themselves are built in the driver (their
sorted runs come from one pass over the edge files; see docs/preprocess.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .dask_features import MappedArray
from .diskmap import open_npy
from .edges import ArraySource, EdgeSource, as_int64_ids, from_npy
from .progress import bar
from .renumber import IdMap, IdMapper, MappedEdges

__all__ = ["MapperFiles", "materialize_edges_dask"]

#: Dask key prefix of the renumbering tasks (tests count them).
TASK_PREFIX = "map-edges"


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
    mv = memoryview(np.ascontiguousarray(arr, dtype="<i8")).cast("B")
    at = 0
    while at < len(mv):
        at += os.pwrite(fd, mv[at:], pos + at)


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
    """:func:`~preprocess.renumber.materialize_edges` with the edge blocks as Dask tasks."""
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
