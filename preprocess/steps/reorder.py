"""Renumbering a store's nodes: the order, and the topology relabelled through it.

A node order is a permutation ``perm`` (new id -> old id) and its inverse ``inv`` (old id ->
new id), both ``int64`` files (memory-mapped: the job holds neither in RAM). It is built by
:func:`node_order` from a *hot prefix* (ids ranked hottest first, e.g. by a presample pass)
followed by the other nodes in a *locality order*: a breadth-first search over one CSC from
the hot prefix (:func:`bfs_fill`), which puts a node's in-neighbours, the rows one sampling
step reads together, at adjacent ids. Nodes of high in-degree are placed but not expanded
(``expand_max_degree``): a sampler draws a few of their many neighbours, so grouping those
buys no shared disk blocks, and expanding the hubs first would hand every node to a hub.

:func:`relabel_csc` writes one edge type of the new store: new destination ``v`` has the
sources of old destination ``perm[v]``, each mapped through ``inv`` and sorted again, in
chunks of destinations within the budget; it can also write, for every new edge position,
the old one (the order its edge features and values follow).

Every numba kernel here has a NumPy twin in ``tests/preprocess/test_reorder.py``.
"""

from __future__ import annotations

import logging
import os
import time

import numba
import numpy as np

from preprocess.errors import BadInputError
from preprocess.progress import bar
from preprocess.steps.diskmap import open_npy

__all__ = ["mark_prefix", "bfs_fill", "invert", "relabel_block", "node_order", "load_order",
           "relabel_csc", "new_indptr", "ORDER_FILES"]

log = logging.getLogger(__name__)

#: the files of a node order in the job's work directory
ORDER_FILES = ("perm.npy", "inv.npy")


# -- kernels -----------------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def mark_prefix(hot, perm, visited):
    """``perm[i] = hot[i]`` and ``visited[hot[i]] = 1``; returns -1, or the position of the
    first id that is out of range or repeated (the prefix is then partly written)."""
    n = visited.shape[0]
    for i in range(hot.shape[0]):
        v = hot[i]
        if v < 0 or v >= n or visited[v]:
            return i
        visited[v] = 1
        perm[i] = v
    return -1


@numba.njit(nogil=True, cache=True)
def bfs_fill(indptr, indices, perm, start, visited, max_degree):
    """Fill ``perm[start:]`` with the nodes not ``visited``, breadth first.

    The queue is ``perm`` itself: it starts as ``perm[:start]`` (the hot prefix, in order);
    each node taken from it appends its in-neighbours (``indices[indptr[v]:indptr[v+1]]``) not
    seen yet, unless its in-degree exceeds ``max_degree`` (then it is placed, not expanded).
    When the queue runs dry, the smallest id not seen yet starts the next component.
    Returns the number of roots so started.
    """
    n = visited.shape[0]
    head = 0
    tail = start
    root = 0
    roots = 0
    while tail < n:
        if head == tail:
            while visited[root]:
                root += 1
            visited[root] = 1
            perm[tail] = root
            tail += 1
            roots += 1
        v = perm[head]
        head += 1
        a = indptr[v]
        b = indptr[v + 1]
        if b - a > max_degree:
            continue
        for j in range(a, b):
            u = indices[j]
            if not visited[u]:
                visited[u] = 1
                perm[tail] = u
                tail += 1
    return roots


@numba.njit(nogil=True, cache=True)
def invert(perm, inv, lo):
    """``inv[perm[i]] = lo + i`` for a block ``perm`` of a permutation starting at ``lo``."""
    for i in range(perm.shape[0]):
        inv[perm[i]] = lo + i


@numba.njit(nogil=True, cache=True)
def _sort_pairs(a, e, lo, hi):
    """Sort ``a[lo:hi]`` ascending, stably, moving ``e[lo:hi]`` alike (insertion sort for
    short lists, else a merge sort's argsort)."""
    if hi - lo <= 32:
        for i in range(lo + 1, hi):
            v = a[i]
            w = e[i]
            j = i - 1
            while j >= lo and a[j] > v:
                a[j + 1] = a[j]
                e[j + 1] = e[j]
                j -= 1
            a[j + 1] = v
            e[j + 1] = w
        return
    order = np.argsort(a[lo:hi], kind="mergesort")
    sa = a[lo:hi][order]
    se = e[lo:hi][order]
    a[lo:hi] = sa
    e[lo:hi] = se


@numba.njit(nogil=True, parallel=True, cache=True)
def relabel_block(indptr, indices, dst_perm, src_inv, lo, hi, new_ptr, out, eids):
    """The new neighbour lists of new destinations ``lo .. hi-1``, into ``out``.

    New destination ``v`` takes the list of old destination ``dst_perm[v]`` (``v`` itself
    when ``dst_perm`` is empty); each source ``s`` becomes ``src_inv[s]`` (kept when
    ``src_inv`` is empty), and a list whose sources were renumbered is sorted again.
    ``new_ptr`` holds the new offsets of ``lo .. hi`` (its first entry is ``out[0]``'s);
    ``eids`` (empty: not wanted) gets the old position of every new edge.
    """
    base = new_ptr[0]
    want_e = eids.shape[0] > 0
    for k in numba.prange(hi - lo):
        v = lo + k
        ov = dst_perm[v] if dst_perm.shape[0] else v
        a = indptr[ov]
        at = new_ptr[k] - base
        m = indptr[ov + 1] - a
        for j in range(m):
            s = indices[a + j]
            out[at + j] = src_inv[s] if src_inv.shape[0] else s
            if want_e:
                eids[at + j] = a + j
        if src_inv.shape[0] and m > 1:
            if want_e:
                _sort_pairs(out, eids, at, at + m)
            else:
                out[at:at + m].sort()


# -- the order ---------------------------------------------------------------------------------
def _tmp(path: str) -> str:
    return path + ".tmp.npy"


def load_order(workdir: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(perm, inv)`` memory-mapped read-only from ``workdir``, or None when not written."""
    paths = [os.path.join(workdir, f) for f in ORDER_FILES]
    if not all(os.path.exists(p) for p in paths):
        return None
    return tuple(np.load(p, mmap_mode="r") for p in paths)


def node_order(n: int, hot: np.ndarray, csc: tuple | None, workdir: str, *,
               expand_max_degree: int | None = None, block: int = 1 << 22) -> dict:
    """Write ``perm`` and ``inv`` (:data:`ORDER_FILES`) of ``n`` nodes into ``workdir``.

    ``hot``: the ids that come first, hottest first (distinct, in ``[0, n)``); ``csc``:
    ``(indptr, indices)`` of an edge type from the node type to itself for the breadth-first
    order of the rest, or None (the rest in id order). ``expand_max_degree``: nodes of larger
    in-degree are placed but not expanded (None: all expanded). Both files are renamed into
    place when whole. Returns statistics.
    """
    t0 = time.perf_counter()
    os.makedirs(workdir, exist_ok=True)
    ppath, ipath = (os.path.join(workdir, f) for f in ORDER_FILES)
    hot = np.ascontiguousarray(hot, dtype=np.int64)
    perm = open_npy(_tmp(ppath), mode="w+", dtype=np.int64, shape=(n,))
    visited = np.zeros(n, np.uint8)
    bad = mark_prefix(hot, perm, visited)
    if bad >= 0:
        why = "repeated" if 0 <= hot[bad] < n else "out of range"
        raise BadInputError(f"Expected distinct hot ids in [0, {n}). Got {int(hot[bad])} at "
                            f"position {bad} of the ranking ({why}).")
    roots = 0
    if csc is not None:
        cap = np.iinfo(np.int64).max if expand_max_degree is None else int(expand_max_degree)
        roots = int(bfs_fill(csc[0], csc[1], perm, hot.shape[0], visited, cap))
    else:
        perm[hot.shape[0]:] = np.flatnonzero(visited == 0)
    del visited
    perm.flush()
    inv = open_npy(_tmp(ipath), mode="w+", dtype=np.int64, shape=(n,))
    for lo in range(0, n, block):
        invert(np.asarray(perm[lo:lo + block]), inv, lo)
    inv.flush()
    del perm, inv
    os.replace(_tmp(ipath), ipath)
    os.replace(_tmp(ppath), ppath)
    return {"nodes": n, "hot_rows": int(hot.shape[0]), "bfs_roots": roots,
            "seconds": round(time.perf_counter() - t0, 3)}


# -- the topology ------------------------------------------------------------------------------
def new_indptr(indptr: np.ndarray, dst_perm: np.ndarray | None, path: str,
               block: int = 1 << 22) -> np.ndarray:
    """The new offsets (an ``.npy`` at ``path``, memory-mapped): degrees of ``dst_perm``'s
    old destinations, accumulated (``indptr`` itself when ``dst_perm`` is None)."""
    nd = indptr.shape[0] - 1
    out = open_npy(path, mode="w+", dtype=np.int64, shape=(nd + 1,))
    out[0] = 0
    acc = 0
    for lo in range(0, nd, block):
        hi = min(nd, lo + block)
        if dst_perm is None:
            out[lo + 1:hi + 1] = indptr[lo + 1:hi + 1]
            continue
        old = np.asarray(dst_perm[lo:hi])
        deg = np.asarray(indptr)[old + 1] - np.asarray(indptr)[old]
        np.cumsum(deg, out=deg)
        out[lo + 1:hi + 1] = deg + acc
        acc += int(deg[-1]) if deg.size else 0
    out.flush()
    return out


def relabel_csc(writer, etype, indptr, indices, dst_perm, src_inv, *, tmpdir: str,
                eids_path: str | None = None, budget_bytes: int, progress: bool = True) -> dict:
    """Write edge type ``etype`` of the new store from the old CSC ``(indptr, indices)``.

    ``dst_perm`` (new -> old destination) and ``src_inv`` (old -> new source) are None for an
    end whose type keeps its ids. With ``eids_path``, the old position of every new edge is
    written there (``.npy``, renamed into place when whole). The neighbour lists are made in
    chunks of destinations of at most a quarter of ``budget_bytes``.
    """
    t0 = time.perf_counter()
    os.makedirs(tmpdir, exist_ok=True)
    ptr = new_indptr(indptr, dst_perm, os.path.join(tmpdir, "indptr.npy"))
    nd, e = ptr.shape[0] - 1, int(ptr[-1])
    width = indices.dtype.itemsize + (8 if eids_path else 0)
    step = max(1, budget_bytes // 4 // width)
    eids = (open_npy(_tmp(eids_path), mode="w+", dtype=np.int64, shape=(e,))
            if eids_path else None)
    empty = np.empty(0, np.int64)
    dp = empty if dst_perm is None else dst_perm
    si = empty if src_inv is None else src_inv

    def blocks():
        with bar(e, f"{'__'.join(etype)}: relabel", progress) as pb:
            lo = 0
            while lo < nd:  # destinations [lo, hi) hold at most `step` edges (or one list)
                hi = int(np.searchsorted(ptr, int(ptr[lo]) + step, side="right")) - 1
                hi = min(nd, max(hi, lo + 1))
                p = np.asarray(ptr[lo:hi + 1])
                out = np.empty(int(p[-1] - p[0]), indices.dtype)
                ev = eids[p[0]:p[-1]] if eids is not None else empty
                relabel_block(indptr, indices, dp, si, lo, hi, p, out, ev)
                pb.update(out.shape[0])
                yield out
                lo = hi

    writer.add_edge_type(etype, ptr, blocks(), indices_dtype=indices.dtype)
    if eids is not None:
        eids.flush()
        del eids
        os.replace(_tmp(eids_path), eids_path)
    os.remove(os.path.join(tmpdir, "indptr.npy"))
    dt = time.perf_counter() - t0
    return {"edges": e, "seconds": round(dt, 3), "edges_per_s": e / dt if dt else 0.0}
