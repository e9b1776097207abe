"""Renumbering: arbitrary node ids (sparse int64 or strings) to contiguous store ids, out of core.

An :class:`IdMap` of a node type holds, in scratch files, the node's original keys sorted
(``keys``) and, for each, its store id (``store``). It is built from

* a node id file (``build_idmap(..., from_file=True)``): store id = row in the file, so
  features and labels given row-aligned with it need no further mapping; repeated ids are an
  error; or
* the ids seen in the edge files (``from_file=False``): the sorted distinct ids, store id =
  rank.

by sorting runs that fit the budget and merging them pairwise (numba, streamed through memory
maps). String ids are keyed by a 64-bit FNV-1a hash and checked by a second, independent
64-bit hash: two distinct strings with the same key are reported, never merged. ``orig_id``
of a string-keyed type holds the key (:func:`string_keys` recomputes it for a join).

:func:`degree_rank` gives the ``--reorder degree`` permutation (highest in-degree first, ties
in id order) by a counting sort over degrees; an :class:`IdMapper` applies map and rank to
blocks of raw ids.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Iterator

import numba
import numpy as np

from featurestore.fileio import disk_full_as_error, write_file

from preprocess.steps.diskmap import map_file, open_npy
from preprocess.sources.base import EdgeSource, as_int64_ids
from preprocess.sources.csv import from_csv
from preprocess.sources.npy import from_npy, load_npy
from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.steps.idcheck import check_input_ids

__all__ = ["IdMap", "IdMapper", "build_idmap", "string_keys", "degree_rank",
           "id_column_blocks", "MappedEdges", "materialize_edges", "count_into"]

log = logging.getLogger(__name__)

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)


# -- string keys -------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _hash_strings(offsets, data, k1, k2):
    for i in range(offsets.shape[0] - 1):
        h = np.uint64(0xCBF29CE484222325)
        g = np.uint64(0x9E3779B97F4A7C15)
        for j in range(offsets[i], offsets[i + 1]):
            c = np.uint64(data[j])
            h = (h ^ c) * np.uint64(0x100000001B3)
            g = (g + c) * np.uint64(0xBF58476D1CE4E5B9)
            g ^= g >> np.uint64(31)
        g ^= np.uint64(offsets[i + 1] - offsets[i])
        g = (g ^ (g >> np.uint64(33))) * np.uint64(0xFF51AFD7ED558CCD)
        k1[i] = np.int64(h >> np.uint64(1))  # non-negative, so keys sort like ids
        k2[i] = np.int64(g)


def string_keys(strings) -> tuple[np.ndarray, np.ndarray]:
    """(key, check) int64 hashes of strings (an Arrow string array or a Python sequence).

    ``key`` is what ``orig_id`` stores for string-keyed node types.
    """
    import pyarrow as pa

    arr = strings if isinstance(strings, (pa.Array, pa.ChunkedArray)) else pa.array(strings)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        odt = np.int64
    elif pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        odt = np.int32
    else:
        raise BadInputError(f"Expected string ids. Got {arr.type} instead.")
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=odt)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    k1 = np.empty(len(arr), np.int64)
    k2 = np.empty(len(arr), np.int64)
    _hash_strings(offsets.astype(np.int64), data, k1, k2)
    return k1, k2


def _keys(col, name: str, what: str, strings: bool, at: int = 0):
    """A raw id block to (keys, check): int ids are their own key (check 0)."""
    if strings:
        import pyarrow as pa

        if not isinstance(col, (pa.Array, pa.ChunkedArray)):
            col = pa.array(np.asarray(col).astype(str))
        if col.null_count:
            raise BadInputError(f"Expected {what} ids without nulls in {name}. Got "
                                f"{col.null_count} nulls in the block at row {at}.")
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            col = col.cast(pa.string())
        return string_keys(col)
    k = as_int64_ids(col, name, what, at)
    return k, None


# -- id columns ----------------------------------------------------------------------------
def id_column_blocks(path, column=None, block: int = 1 << 22, *, header: bool = True,
                     delimiter: str | None = None) -> Iterator:
    """Raw blocks of one id column: a 1-D ``.npy``, or a parquet/CSV column (name or index)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputNotFoundError(f"Expected a node id file at {path}. Nothing is there.")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        arr = load_npy(path, "node id array")
        if arr.ndim != 1:
            raise BadInputError(f"Expected a 1-D node id array in {path}. Got shape {arr.shape}.")
        for lo in range(0, arr.shape[0], block):
            yield arr[lo:lo + block]
        return
    if ext in (".parquet", ".pq") or os.path.isdir(path):
        import pyarrow.parquet as pq

        try:
            f = pq.ParquetFile(path)
            names = f.schema_arrow.names
            col = names[column] if isinstance(column, int) else (column or names[0])
            if col not in names:
                raise BadInputError(f"Expected a column {col!r} in {path}. "
                                    f"Its columns are {names}.")
            for b in f.iter_batches(batch_size=block, columns=[col]):
                yield b.column(0)
        except BadInputError:
            raise
        except Exception as e:
            raise BadInputError(f"Expected a readable parquet file at {path}: {e}") from e
        return
    src = from_csv(path, column if column is not None else 0, column if column is not None else 0,
                   header=header, delimiter=delimiter or ("\t" if ext == ".tsv" else ","))
    for s, _ in src.iter_raw(block):
        yield s


# -- sorted runs and merging ---------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _merge(ka, ca, pa, kb, cb, pb, ko, co, po, dedupe):
    """Merge two sorted runs. Returns (n_out, status, key): status 0 ok, 1 a key repeated
    (when not ``dedupe``), 2 two different checks under one key (a hash collision)."""
    i = 0
    j = 0
    w = 0
    na = ka.shape[0]
    nb = kb.shape[0]
    while i < na or j < nb:
        if j >= nb or (i < na and ka[i] < kb[j]):
            k, c, p = ka[i], ca[i], pa[i]
            i += 1
        elif i >= na or kb[j] < ka[i]:
            k, c, p = kb[j], cb[j], pb[j]
            j += 1
        else:  # equal keys across the runs
            if ca[i] != cb[j]:
                return w, 2, ka[i]
            if not dedupe:
                return w, 1, ka[i]
            k, c, p = ka[i], ca[i], min(pa[i], pb[j])
            i += 1
            j += 1
        if w > 0 and ko[w - 1] == k:
            if co[w - 1] != c:
                return w, 2, k
            if not dedupe:
                return w, 1, k
            continue
        ko[w] = k
        co[w] = c
        po[w] = p
        w += 1
    return w, 0, 0


@numba.njit(nogil=True, cache=True)
def _sorted_run(keys, check, pos, dedupe):
    """Sort a block by key (in place, carrying check and pos); dedupe or detect repeats.
    Returns (n, status, key) like :func:`_merge`."""
    order = np.argsort(keys, kind="mergesort")
    k2 = keys[order]
    c2 = check[order]
    p2 = pos[order]
    w = 0
    for i in range(k2.shape[0]):
        if w > 0 and k2[i] == keys[w - 1]:
            if c2[i] != check[w - 1]:
                return w, 2, k2[i]
            if not dedupe:
                return w, 1, k2[i]
            continue
        keys[w] = k2[i]
        check[w] = c2[i]
        pos[w] = p2[i]
        w += 1
    return w, 0, 0


def _raise_status(status: int, key: int, name: str, what: str, strings: bool):
    if status == 1:
        shown = "a string id" if strings else f"id {key}"
        raise BadInputError(f"Expected each {what} id once in {name}. Got {shown} twice.")
    raise BadInputError(
        f"Expected distinct string ids of {what} to get distinct 64-bit keys in {name}. Two "
        f"different strings share key {key} (a hash collision, about n**2 / 2**65 likely); "
        "rename one of them.")


class _Run:
    """A sorted run on disk: three int64 files of equal length."""

    def __init__(self, path: str, n: int):
        self.path, self.n = path, n

    def arrays(self, mode="r"):
        return tuple(map_file(f"{self.path}.{x}", dtype=np.int64, mode=mode,
                              shape=(max(self.n, 1),))[:self.n] for x in ("k", "c", "p"))

    @staticmethod
    def write(path: str, k, c, p) -> _Run:
        for x, a in (("k", k), ("c", c), ("p", p)):
            write_file(f"{path}.{x}", np.ascontiguousarray(a, dtype=np.int64))
        return _Run(path, len(k))

    def remove(self) -> None:
        for x in ("k", "c", "p"):
            try:
                os.remove(f"{self.path}.{x}")
            except FileNotFoundError:
                pass


# -- the map -------------------------------------------------------------------------------
class IdMap:
    """Original keys of one node type, sorted, with their store ids (files in ``path``)."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        meta = np.load(os.path.join(self.path, "meta.npy"))
        self.num_nodes, strings = int(meta[0]), bool(meta[1])
        self.strings = strings
        self.keys = self._open("keys", "r")
        self.check = self._open("check", "r")
        self.store = self._open("store", "r")

    def _open(self, name: str, mode: str):
        n = self.num_nodes
        if n == 0:
            return np.empty(0, np.int64)
        return map_file(os.path.join(self.path, f"{name}.bin"), dtype=np.int64, mode=mode,
                         shape=(max(n, 1),))[:n]

    @staticmethod
    def exists(path: str) -> bool:
        """Whether a finished id map is in ``path``."""
        return os.path.exists(os.path.join(path, "meta.npy"))

    def lookup(self, col, name: str, what: str, at: int = 0) -> np.ndarray:
        """Store ids of a raw block of ids; an id not in the map raises, naming ``name``."""
        k, c = _keys(col, name, what, self.strings, at)
        if k.size == 0:
            return k
        order = np.argsort(k, kind="stable")
        ks = k[order]
        idx = np.searchsorted(self.keys, ks)
        idx_c = np.minimum(idx, max(self.num_nodes - 1, 0))
        found = (idx < self.num_nodes) & (np.asarray(self.keys[idx_c]) == ks) if self.num_nodes \
            else np.zeros(ks.shape, bool)
        if c is not None and self.num_nodes:
            found &= np.asarray(self.check[idx_c]) == c[order]
        if not found.all():
            bad = int(order[np.flatnonzero(~found)[0]])
            shown = repr(_raw_item(col, bad)) if self.strings else str(int(k[bad]))
            raise BadInputError(f"Expected {what} ids of {name} among the node ids of their "
                                f"type. Got {shown} (row {at + bad}), which is not one.")
        out = np.empty_like(k)
        out[order] = np.asarray(self.store[idx])
        return out

    def orig_ids(self, out_path: str, block: int = 1 << 22) -> np.ndarray:
        """``orig_id`` in store order (a memory map at ``out_path``): the key of each store id."""
        out = map_file(out_path, dtype=np.int64, mode="w+", shape=(max(self.num_nodes, 1),))
        for lo in range(0, self.num_nodes, block):
            out[np.asarray(self.store[lo:lo + block])] = self.keys[lo:lo + block]
        out.flush()
        return out[:self.num_nodes]


def _raw_item(col, i: int):
    try:
        v = col[i]
        return v.as_py() if hasattr(v, "as_py") else v
    except Exception:  # pragma: no cover - best effort for messages only
        return "?"


def build_idmap(path: str, blocks: Iterable, *, name: str, what: str, from_file: bool,
                strings: bool, budget_bytes: int = 1 << 30) -> IdMap:
    """Build the :class:`IdMap` of one node type in directory ``path`` from raw id blocks.

    ``from_file``: the blocks are the node id file (store id = row; repeats are an error);
    else the ids seen in edges (deduplicated; store id = rank of the id).
    """
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    per = max(1 << 16, budget_bytes // 64)  # keys, check, pos, argsort order and copies
    runs = _sorted_runs(path, blocks, per, name=name, what=what, from_file=from_file,
                        strings=strings)
    run = _merge_runs(path, runs, name=name, what=what, from_file=from_file, strings=strings)
    n = run.n if run is not None else 0
    if run is not None:
        for x, name_ in (("k", "keys"), ("c", "check"), ("p", "pos")):
            os.replace(f"{run.path}.{x}", os.path.join(path, f"{name_}.bin"))
    else:
        for name_ in ("keys", "check", "pos"):
            open(os.path.join(path, f"{name_}.bin"), "wb").close()
    if from_file:
        os.replace(os.path.join(path, "pos.bin"), os.path.join(path, "store.bin"))
    else:
        os.remove(os.path.join(path, "pos.bin"))
        st = map_file(os.path.join(path, "store.bin"), dtype=np.int64, mode="w+",
                      shape=(max(n, 1),))
        step = 1 << 22
        for lo in range(0, n, step):
            st[lo:min(lo + step, n)] = np.arange(lo, min(lo + step, n), dtype=np.int64)
        st.flush()
        del st
    with disk_full_as_error(os.path.join(path, "meta.npy")):
        np.save(os.path.join(path, "meta.npy"), np.array([n, int(strings)], np.int64))
    return IdMap(path)


def _sorted_runs(path: str, blocks: Iterable, per: int, *, name: str, what: str,
                 from_file: bool, strings: bool) -> list[_Run]:
    """Sorted runs of about ``per`` keys each, written to ``path/run<i>.{k,c,p}``."""
    runs: list[_Run] = []
    buf_k, buf_c, buf_p = [], [], []
    filled = row = 0
    for col in blocks:
        k, c = _keys(col, name, what, strings, row)
        buf_k.append(k)
        buf_c.append(c if c is not None else np.zeros_like(k))
        buf_p.append(np.arange(row, row + k.size, dtype=np.int64))
        row += k.size
        filled += k.size
        if filled >= per:
            runs.append(_write_run(path, len(runs), buf_k, buf_c, buf_p, name=name, what=what,
                                   from_file=from_file, strings=strings))
            buf_k, buf_c, buf_p, filled = [], [], [], 0
    if filled:
        runs.append(_write_run(path, len(runs), buf_k, buf_c, buf_p, name=name, what=what,
                               from_file=from_file, strings=strings))
    return runs


def _write_run(path: str, i: int, buf_k, buf_c, buf_p, *, name: str, what: str,
               from_file: bool, strings: bool) -> _Run:
    """One buffer of keys sorted (deduplicated unless ``from_file``) into run ``i``."""
    k = np.concatenate(buf_k)
    c = np.concatenate(buf_c)
    p = np.concatenate(buf_p)
    n, status, key = _sorted_run(k, c, p, not from_file)
    if status:
        _raise_status(status, key, name, what, strings)
    return _Run.write(os.path.join(path, f"run{i}"), k[:n], c[:n], p[:n])


def _merge_runs(path: str, runs: list[_Run], *, name: str, what: str, from_file: bool,
                strings: bool) -> _Run | None:
    """Merge the runs pairwise, generation by generation, into one (None when no run)."""
    gen = len(runs)
    while len(runs) > 1:
        nxt = []
        for i in range(0, len(runs) - 1, 2):
            a, b = runs[i], runs[i + 1]
            out = os.path.join(path, f"run{gen}")
            gen += 1
            n_max = a.n + b.n
            ko, co, po = (map_file(f"{out}.{x}", dtype=np.int64, mode="w+",
                                   shape=(max(n_max, 1),)) for x in ("k", "c", "p"))
            n, status, key = _merge(*a.arrays(), *b.arrays(), ko, co, po, not from_file)
            if status:
                _raise_status(status, key, name, what, strings)
            for m in (ko, co, po):
                m.flush()
            del ko, co, po
            for x in ("k", "c", "p"):
                os.truncate(f"{out}.{x}", n * 8)
            a.remove()
            b.remove()
            nxt.append(_Run(out, n))
        if len(runs) % 2:
            nxt.append(runs[-1])
        runs = nxt
    return runs[0] if runs else None


# -- reordering ----------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _rank_by_degree(deg, rank, maxdeg):
    """Stable counting sort of nodes by degree, descending: ``rank[v]`` is v's new position."""
    hist = np.zeros(maxdeg + 2, np.int64)
    for v in range(deg.shape[0]):
        hist[deg[v]] += 1
    # positions: highest degree first
    acc = 0
    for d in range(maxdeg, -1, -1):
        c = hist[d]
        hist[d] = acc
        acc += c
    for v in range(deg.shape[0]):
        d = deg[v]
        rank[v] = hist[d]
        hist[d] += 1


def degree_rank(deg: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``rank[v]``: node ``v``'s position when ordered by degree, highest first (ties by id)."""
    out = np.empty(deg.shape[0], np.int64) if out is None else out
    if deg.shape[0]:
        _rank_by_degree(deg, out, int(deg.max()))
    return out


# -- mapping ids -----------------------------------------------------------------------------
class IdMapper:
    """Raw ids of one node type to store ids: a range check (contiguous ids) or an
    :class:`IdMap` lookup, then the reordering ``rank`` when there is one.

    Call it on a block: ``mapper(col, name, what, at)``; errors name ``name`` (the file).
    """

    def __init__(self, num_nodes: int, idmap: IdMap | None = None,
                 rank: np.ndarray | None = None):
        self.num_nodes = int(num_nodes)
        self.idmap, self.rank = idmap, rank

    def __call__(self, col, name: str, what: str, at: int = 0) -> np.ndarray:
        """Store ids of a raw block of ids (see the class docstring)."""
        if self.idmap is not None:
            ids = self.idmap.lookup(col, name, what, at)
        else:
            ids = check_input_ids(as_int64_ids(col, name, what, at), self.num_nodes, name,
                                  what, at=at)
        return ids if self.rank is None else np.asarray(self.rank)[ids]


class MappedEdges(EdgeSource):
    """An edge source whose endpoints go through :class:`IdMapper`s (None: taken as they are)."""

    def __init__(self, inner: EdgeSource, src_map: IdMapper | None, dst_map: IdMapper | None):
        self.inner = inner
        self.name = inner.name
        self.num_edges = inner.num_edges
        self.src_map, self.dst_map = src_map, dst_map

    def iter_raw(self, block_edges):
        """Blocks of mapped ``(src, dst)`` ids."""
        for part in self.inner.parts():
            at = 0
            for s, d in part.iter_raw(block_edges):
                yield (self.src_map(s, part.name, "source", at) if self.src_map else s,
                       self.dst_map(d, part.name, "destination", at) if self.dst_map else d)
                at += len(s)

    def inputs(self):
        """The input files of the inner source."""
        return self.inner.inputs()


@numba.njit(nogil=True, cache=True)
def count_into(counts, ids):
    """``counts[ids[i]] += 1`` for every i (ids trusted to be in range)."""
    for i in range(ids.shape[0]):
        counts[ids[i]] += 1


def materialize_edges(source: EdgeSource, path: str, *, block_edges: int = 1 << 22,
                      dtype=np.int64) -> EdgeSource:
    """Write ``source`` (e.g. :class:`MappedEdges`) to a ``[2, E]`` ``.npy`` at ``path`` once,
    so that the CSC passes read plain ids; returns the file as a source."""
    e = source.count_edges()
    tmp = path + ".partial"
    out = open_npy(tmp, mode="w+", dtype=dtype, shape=(2, e))
    at = 0
    for s, d in source.iter_blocks(block_edges):
        out[0, at:at + len(s)] = s
        out[1, at:at + len(s)] = d
        at += len(s)
    out.flush()
    del out
    os.replace(tmp, path)
    return from_npy(path)
