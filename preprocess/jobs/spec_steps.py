"""Running a dataset spec (``featurestore preprocess spec``): its steps, declared.

:func:`spec_steps` turns a checked :class:`~preprocess.jobs.spec.DatasetSpec` into the job's list of
:class:`~preprocess.jobs.job.StepDef` (counts and id maps, degree reordering, node types, edges,
features, splits, in that order); :func:`run_spec` runs them as a resumable
:class:`~preprocess.jobs.job.Job`. Steps share a :class:`SpecContext`: the spec, the job, and the
statistics of the steps before them (a node count found by a scan or an id map).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from featurestore.fileio import disk_full_as_error

import preprocess.dask.renumber as dren
from preprocess.dask.run import check_shared_scratch
from preprocess.errors import BadInputError, SpecError
from preprocess.jobs.edge_data import check_column_rows, edge_column_steps, source_of
from preprocess.jobs.edges import max_id
from preprocess.jobs.job import Job, StepContext, StepDef
from preprocess.jobs.spec import REORDERS, DatasetSpec, EdgeSpec, FileRef, load_spec
from preprocess.jobs.variants import build_csc, write_features
from preprocess.sources.base import EdgeSource, concat
from preprocess.sources.dispatch import open_edges
from preprocess.sources.features import FeatureSource
from preprocess.sources.columns import open_columns
from preprocess.sources.remote import is_remote, remote_input_record
from preprocess.steps.csc import plan_csc, reverse_etype
from preprocess.steps.diskmap import map_file, open_npy
from preprocess.steps.features import write_values
from preprocess.steps.renumber import (
    IdMap,
    IdMapper,
    MappedEdges,
    build_idmap,
    count_into,
    degree_rank,
    id_column_blocks,
    materialize_edges,
)

__all__ = ["run_spec", "spec_steps", "SpecContext"]

log = logging.getLogger(__name__)

#: elements per block when streaming per-node arrays.
BLOCK = 1 << 22


@dataclass
class SpecContext(StepContext):
    """What the steps of a spec job share: the spec, its memory budget, what steps found."""

    spec: DatasetSpec = None
    budget_bytes: int = 2 << 30
    progress: bool = True
    dask: Any = None  # a distributed.Client: CSC ranges as Dask tasks

    def count(self, nt: str) -> int | None:
        """The node count of ``nt``: declared, or what its scan or id map step found."""
        ns = self.spec.nodes[nt]
        if ns.id_kind == "contiguous" and ns.count is not None:
            return ns.count
        step = f"scan:{nt}" if ns.id_kind == "contiguous" else f"ids:{nt}"
        return self.stats.get(step, {}).get("num_nodes")

    def idmap_dir(self, nt: str) -> str:
        """Where the id map of ``nt`` goes (the job's work directory)."""
        return os.path.join(self.job.workdir, "idmap", nt)

    def rank_path(self, nt: str, what: str = "rank") -> str:
        """Where the degree reordering of ``nt`` goes (``rank``, ``perm`` or ``deg``)."""
        return os.path.join(self.job.workdir, "rank", f"{nt}.{what}.npy")

    def idmap(self, nt: str) -> IdMap | None:
        """The id map of ``nt`` (None for contiguous ids)."""
        return None if self.spec.nodes[nt].id_kind == "contiguous" else IdMap(self.idmap_dir(nt))

    def rank(self, nt: str, what: str = "rank") -> np.ndarray | None:
        """``rank`` (old store id -> new) or ``perm`` (new -> old) of a degree reordering."""
        if self.spec.reorder != "degree":
            return None
        return np.load(self.rank_path(nt, what), mmap_mode="r")

    def mapper(self, nt: str, ranked: bool = True) -> IdMapper:
        """Raw ids of ``nt`` to store ids (through the reordering when ``ranked``)."""
        return IdMapper(self.count(nt), self.idmap(nt), self.rank(nt) if ranked else None)


def _edge_source(e: EdgeSpec) -> EdgeSource:
    parts = [open_edges(f.path, e.src_col, e.dst_col, header=f.header, delimiter=f.delimiter)
             for f in e.files]
    return concat(*parts)


def _sides(spec: DatasetSpec, nt: str) -> list[tuple[EdgeSpec, str]]:
    """(edge type, side) of every edge column that names node type ``nt``."""
    return [(e, side) for e in spec.edges for side, t in (("src", e.etype[0]),
                                                          ("dst", e.etype[2])) if t == nt]


# -- 1. node counts and id maps --------------------------------------------------------------
def _scan(ctx: SpecContext, nt: str) -> dict:
    hi = max((max_id(_edge_source(e)) for e, _ in _sides(ctx.spec, nt)), default=-1)
    return {"num_nodes": hi + 1}


def _edge_ids(spec: DatasetSpec, nt: str):
    for e in spec.edges:
        for i, side in ((0, "src"), (2, "dst")):
            if e.etype[i] != nt:
                continue
            for s, d in _edge_source(e).iter_raw(1 << 22):
                yield s if side == "src" else d


def _ids(ctx: SpecContext, nt: str) -> dict:
    ns = ctx.spec.nodes[nt]
    strings = ns.id_kind == "string"
    if ns.ids is not None:
        blocks = id_column_blocks(ns.ids.path, ns.ids.column, header=ns.ids.header,
                                  delimiter=ns.ids.delimiter)
        m = build_idmap(ctx.idmap_dir(nt), blocks, name=ns.ids.path, what=nt, from_file=True,
                        strings=strings, budget_bytes=ctx.budget_bytes)
    else:
        m = build_idmap(ctx.idmap_dir(nt), _edge_ids(ctx.spec, nt),
                        name=f"the edge files of {nt}", what=nt, from_file=False,
                        strings=strings, budget_bytes=ctx.budget_bytes)
    return {"num_nodes": m.num_nodes}


def _count_steps(spec: DatasetSpec) -> list[StepDef]:
    steps = []
    for nt, ns in spec.nodes.items():
        if ns.id_kind != "contiguous":
            steps.append(StepDef(f"ids:{nt}", partial(_ids, nt=nt), {"kind": ns.id_kind}))
        elif ns.count is None:
            sides = _sides(spec, nt)
            if not sides:
                raise SpecError(f"{spec.path}: nodes.{nt}: Expected count (no edge names this "
                                "type, so it cannot be counted from the edges).")
            # read only: a dry run scans too, the node count sets the disk need (a 3-line
            # CSV naming id 20,000,000 means 20M nodes, ~320 MB of arrays)
            steps.append(StepDef(f"scan:{nt}", partial(_scan, nt=nt),
                                 {"edge_files": len(sides)}, read_only=True))
    return steps


# -- 2. degree reordering --------------------------------------------------------------------
def _degree_sides(e: EdgeSpec, nt: str) -> list[int]:
    """The columns of ``e`` (2: destination, 0: source) whose ids count toward ``nt``'s
    degree: in-degree, plus out-degree over undirected or reversed types."""
    sides = [2] if e.etype[2] == nt else []
    if (e.undirected or e.reverse) and e.etype[0] == nt:
        sides.append(0)
    return sides


def _degrees(ctx: SpecContext, nt: str) -> np.ndarray:
    """In-degree of every node of ``nt`` (plus out-degree over undirected/reversed types)."""
    n = ctx.count(nt)
    os.makedirs(os.path.dirname(ctx.rank_path(nt)), exist_ok=True)
    deg = (np.zeros(n, np.int64) if 8 * n <= ctx.budget_bytes // 4 else open_npy(
        ctx.rank_path(nt, "deg"), mode="w+", dtype=np.int64, shape=(n,)))
    if ctx.dask is not None:  # the lookups and counts per edge block as Dask tasks
        m = ctx.mapper(nt, ranked=False)
        dren.count_degrees_dask(ctx.dask, deg, [
            (_edge_source(e), "destination" if side == 2 else "source", m)
            for e in ctx.spec.edges for side in _degree_sides(e, nt)])
        return deg
    for e in ctx.spec.edges:
        m = ctx.mapper(nt, ranked=False)
        for side in _degree_sides(e, nt):
            for part in _edge_source(e).parts():
                at = 0
                for s, d in part.iter_raw(1 << 22):
                    count_into(deg, m(d if side == 2 else s, part.name,
                                      "destination" if side == 2 else "source", at))
                    at += len(s)
    return deg


def _reorder(ctx: SpecContext, nt: str) -> dict:
    n = ctx.count(nt)
    deg = _degrees(ctx, nt)
    tmp = {w: ctx.rank_path(nt, w) + ".partial.npy" for w in ("rank", "perm")}
    rank = open_npy(tmp["rank"], mode="w+", dtype=np.int64, shape=(n,))
    degree_rank(deg, rank)
    perm = open_npy(tmp["perm"], mode="w+", dtype=np.int64, shape=(n,))
    for lo in range(0, n, BLOCK):
        r = np.asarray(rank[lo:lo + BLOCK])
        perm[r] = np.arange(lo, lo + len(r), dtype=np.int64)
    rank.flush()
    perm.flush()
    top = int(deg.max()) if n else 0
    del rank, perm, deg
    for w in ("rank", "perm"):
        os.replace(tmp[w], ctx.rank_path(nt, w))
    return {"max_in_degree": top}


def _reorder_steps(spec: DatasetSpec) -> list[StepDef]:
    if spec.reorder != "degree":
        return []
    return [StepDef(f"reorder:{nt}", partial(_reorder, nt=nt),
                    lambda ctx, nt=nt: {"nodes": ctx.count(nt)}) for nt in spec.nodes]


# -- 3. node types with orig ids -------------------------------------------------------------
def _orig_ids(ctx: SpecContext, nt: str, n: int):
    """orig_id in final store order: a memory map in the work directory (or None = identity)."""
    m = ctx.idmap(nt)
    rank = ctx.rank(nt)
    if m is None and rank is None:
        return None
    out_path = os.path.join(ctx.job.workdir, f"orig-{nt}.bin")
    if m is not None:
        orig = m.orig_ids(out_path)
    else:
        orig = map_file(out_path, dtype=np.int64, mode="w+", shape=(max(n, 1),))[:n]
        for lo in range(0, n, BLOCK):
            orig[lo:lo + BLOCK] = np.arange(lo, min(lo + BLOCK, n), dtype=np.int64)
    if rank is not None:
        perm = ctx.rank(nt, "perm")  # new -> old
        final = map_file(out_path + ".ranked", dtype=np.int64, mode="w+", shape=(max(n, 1),))[:n]
        for lo in range(0, n, BLOCK):
            final[lo:lo + BLOCK] = np.asarray(orig)[np.asarray(perm[lo:lo + BLOCK])]
        final.flush()
        return final
    return orig


def _add_nodes(ctx: SpecContext, nt: str) -> dict:
    n = ctx.count(nt)
    orig = _orig_ids(ctx, nt, n)
    ctx.job.writer.add_node_type(nt, n, orig_ids=orig)
    del orig
    return {"num_nodes": n}


def _node_steps(spec: DatasetSpec) -> list[StepDef]:
    return [StepDef(f"nodes:{nt}", partial(_add_nodes, nt=nt),
                    lambda ctx, nt=nt: {"nodes": ctx.count(nt),
                                        "disk_bytes": 8 * (ctx.count(nt) or 0)})
            for nt in spec.nodes]


# -- 4. edges: renumbered once when needed, then CSC (and reverse) ---------------------------
def _edges_path(ctx: SpecContext, e: EdgeSpec) -> str:
    return os.path.join(ctx.job.workdir, "edges", f"{'__'.join(e.etype)}.npy")


def _mapped(spec: DatasetSpec, e: EdgeSpec) -> bool:
    """Whether the edges' ids go through an id map or a reordering (renumbered once)."""
    return any(spec.nodes[t].id_kind != "contiguous" for t in (e.etype[0], e.etype[2])) \
        or spec.reorder == "degree"


def _map_edges(ctx: SpecContext, e: EdgeSpec) -> dict:
    epath = _edges_path(ctx, e)
    os.makedirs(os.path.dirname(epath), exist_ok=True)
    src = MappedEdges(_edge_source(e), ctx.mapper(e.etype[0]), ctx.mapper(e.etype[2]))
    if ctx.dask is not None:  # edge blocks mapped and written by the workers: the same file
        s = dren.materialize_edges_dask(ctx.dask, src, epath, progress=ctx.progress)
    else:
        s = materialize_edges(src, epath)
    return {"edges": s.num_edges}


def _map_plan(ctx: SpecContext, e: EdgeSpec) -> dict:
    n = _edge_source(e).num_edges
    return {"edges": n, "disk_bytes": 16 * (n or 0)}


def _csc_plan(ctx: SpecContext, e: EdgeSpec) -> dict:
    n = _edge_source(e).num_edges
    plan = plan_csc(ctx.count(e.etype[0]) or 0, ctx.count(e.etype[2]) or 0, n, ctx.budget_bytes)
    return {"edges": n, "passes": plan.est_passes, "disk_bytes": 2 * plan.output_bytes,
            "memory_bytes": ctx.budget_bytes}


def _store_edges(ctx: SpecContext, e: EdgeSpec) -> EdgeSource:
    """The edges of ``e`` in store ids (renumbered once when needed), in input order."""
    return open_edges(_edges_path(ctx, e)) if _mapped(ctx.spec, e) else _edge_source(e)


def _csc(ctx: SpecContext, e: EdgeSpec, rev: bool) -> dict:
    spec = ctx.spec
    source = _store_edges(ctx, e)
    etype = e.etype
    if rev:
        source, etype = source.reversed(), reverse_etype(e.etype)
    # with per-edge columns, undirected keeps every edge and its reverse (each has its row)
    coalesce = spec.coalesce or (e.undirected and not e.columns)
    return build_csc(ctx.job.writer, etype, source, num_src=ctx.count(etype[0]),
                     num_dst=ctx.count(etype[2]), coalesce=coalesce,
                     drop_self_loops=spec.drop_self_loops, symmetrize=e.undirected,
                     sort_neighbors=spec.sort_neighbors, budget_bytes=ctx.budget_bytes,
                     tmpdir=ctx.job.tmpdir, progress=ctx.progress, dask=ctx.dask)


def _edge_steps(spec: DatasetSpec) -> list[StepDef]:
    steps = []
    for e in spec.edges:
        if _mapped(spec, e):
            steps.append(StepDef(f"map:{'__'.join(e.etype)}", partial(_map_edges, e=e),
                                 partial(_map_plan, e=e)))
        for rev in (False, True) if e.reverse else (False,):
            etype = reverse_etype(e.etype) if rev else e.etype
            steps.append(StepDef(f"csc:{'__'.join(etype)}", partial(_csc, e=e, rev=rev),
                                 partial(_csc_plan, e=e)))
            steps += edge_column_steps(
                etype, e.columns, source_of(partial(_store_edges, e=e), rev),
                lambda ctx, e=e: _edge_source(e).num_edges,
                drop_self_loops=spec.drop_self_loops, symmetrize=e.undirected)
    return steps


# -- 5. features, values, labels (row order: the node id file's, else store ids before reorder)
def _feature_source(ref: FileRef, spec_path: str) -> FeatureSource:
    ext = os.path.splitext(ref.path)[1].lower()
    if ext == ".npy":
        return FeatureSource.from_npy(ref.path)
    if ext in (".parquet", ".pq") or os.path.isdir(ref.path):
        if ref.column is None:
            raise SpecError(f"{spec_path}: {ref.path}: Expected column (or columns) for a "
                            "parquet feature file.")
        return FeatureSource.from_parquet(ref.path, ref.column)
    raise SpecError(f"{spec_path}: Expected a .npy or .parquet feature file. Got {ref.path}.")


def _row_perm(ctx: SpecContext, nt: str, ref: FileRef, num_rows: int):
    """Source row of each store id (``perm[store_id] = row``), or None when rows are in order."""
    n = ctx.count(nt)
    if ref.ids is None:
        return ctx.rank(nt, "perm")  # rows follow the store ids before reordering
    pos = open_npy(os.path.join(ctx.job.workdir, f"rows-{nt}.npy"), mode="w+",
                   dtype=np.int64, shape=(n,))
    pos[:] = -1
    at = 0
    for col in id_column_blocks(ref.ids.path, ref.ids.column, header=ref.ids.header,
                                delimiter=ref.ids.delimiter):
        sid = ctx.mapper(nt)(col, ref.ids.path, f"{nt} row", at)
        pos[sid] = np.arange(at, at + len(sid), dtype=np.int64)
        at += len(sid)
    if at != num_rows:
        raise BadInputError(f"Expected one id per row of {ref.path} ({num_rows}) in "
                            f"{ref.ids.path}. Got {at}.")
    missing = int(np.count_nonzero(np.asarray(pos) < 0))
    if missing or num_rows != n:
        raise BadInputError(f"Expected exactly one row per node of {nt!r} ({n}) in {ref.path}. "
                            f"Got {num_rows} rows, {missing} nodes without one.")
    return pos


def _column_plan(ctx: SpecContext, ref: FileRef) -> dict:
    src = _feature_source(ref, ctx.spec.path)
    out_dtype = np.dtype(ref.dtype) if ref.dtype else None
    row_bytes = (src.row_bytes if out_dtype is None else
                 int(np.prod(src.row_shape, dtype=np.int64)) * out_dtype.itemsize)
    return {"rows": src.num_rows, "disk_bytes": src.num_rows * row_bytes}


def _column(ctx: SpecContext, kind: str, nt: str, name: str, ref: FileRef) -> dict:
    src = _feature_source(ref, ctx.spec.path)
    out_dtype = np.dtype(ref.dtype) if ref.dtype else None
    perm = _row_perm(ctx, nt, ref, src.num_rows)
    if kind == "features":
        return write_features(ctx.job.writer, nt, name, src, dtype=out_dtype, perm=perm,
                              budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir,
                              progress=ctx.progress, dask=ctx.dask)
    return write_values(ctx.job.writer, nt, name, src, perm=perm, dtype=out_dtype,
                        budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir)


def _column_steps(spec: DatasetSpec) -> list[StepDef]:
    steps = []
    for nt, ns in spec.nodes.items():
        items = [("features", k, r) for k, r in ns.features.items()] + \
                [("values", k, r) for k, r in ns.values.items()] + \
                ([("values", "label", ns.labels)] if ns.labels else [])
        for kind, name, ref in items:
            steps.append(StepDef(f"{kind}:{nt}/{name}",
                                 partial(_column, kind=kind, nt=nt, name=name, ref=ref),
                                 partial(_column_plan, ref=ref)))
    return steps


# -- 6. splits (ids in the source id space, mapped to store ids) -----------------------------
def _split(ctx: SpecContext, sname: str, nt: str, ref: FileRef) -> dict:
    ids = np.concatenate([
        ctx.mapper(nt)(col, ref.path, f"{sname} split")
        for col in id_column_blocks(ref.path, ref.column, header=ref.header,
                                    delimiter=ref.delimiter)] or [np.empty(0, np.int64)])
    ctx.job.writer.add_split(sname, nt, ids)
    return {"ids": int(ids.shape[0])}


def _split_steps(spec: DatasetSpec) -> list[StepDef]:
    return [StepDef(f"split:{sname}/{nt}", partial(_split, sname=sname, nt=nt, ref=ref))
            for sname, per in spec.splits.items() for nt, ref in per.items()]


# -- 7. edge splits (pairs of an edge type; node ids mapped to store ids) --------------------
def _spill(blocks, path: str) -> np.ndarray:
    """Row blocks streamed into a raw file, then memory-mapped (bounded memory, any length)."""
    shape, dtype, n = None, None, 0
    with disk_full_as_error(path), open(path, "wb") as f:
        for b in blocks:
            b = np.ascontiguousarray(b)
            shape, dtype = (b.shape[1:], b.dtype) if shape is None else (shape, dtype)
            f.write(memoryview(b.astype(dtype, copy=False)).cast("B"))
            n += b.shape[0]
    if not n:
        return np.empty((0,) + (shape or ()), dtype or np.int64)
    return np.memmap(path, dtype=dtype, mode="r", shape=(n,) + shape)


def _split_column(ctx: SpecContext, sname: str, etype: tuple, col: str, ref: FileRef):
    """One column of an edge split in bounded memory: ``src``/``dst``/``neg_dst`` node ids
    mapped to store ids block by block into a work file; another column as it is (a ``.npy``
    memory-mapped, parquet or CSV streamed into a work file)."""
    path = os.path.join(ctx.job.workdir, f"edge-split-{sname}-{'__'.join(etype)}-{col}.bin")
    what = f"{col} of edge split {sname}"
    if col in ("src", "dst"):
        m = ctx.mapper(etype[0] if col == "src" else etype[2])
        blocks = id_column_blocks(ref.path, ref.column, header=ref.header,
                                  delimiter=ref.delimiter)
        return _spill((m(b, ref.path, what) for b in blocks), path)
    src = open_columns(ref.path, None if ref.path.lower().endswith(".npy") else ref.column,
                       header=ref.header, delimiter=ref.delimiter)
    if col != "neg_dst":
        return src.array() if src.array() is not None else _spill(src.iter_blocks(1 << 20),
                                                                   path)
    m = ctx.mapper(etype[2])

    def mapped():
        at = 0
        for b in src.iter_blocks(1 << 20):
            b = np.asarray(b)
            yield m(b.reshape(-1), ref.path, what, at).reshape(b.shape)
            at += b.size

    return _spill(mapped(), path)


def _edge_split(ctx: SpecContext, sname: str, etype: tuple, cols: dict) -> dict:
    out = {col: _split_column(ctx, sname, etype, col, ref) for col, ref in cols.items()}
    n = out["src"].shape[0]
    for col, a in out.items():
        if a.shape[0] != n:
            raise BadInputError(f"Expected {n} rows (as src, {cols['src'].path}) in column "
                                f"{col!r} of edge split {sname!r} ({cols[col].path}). Got "
                                f"{a.shape[0]}.")
    ctx.job.writer.add_edge_split(sname, etype, **out)
    del out
    return {"pairs": int(n)}


def _edge_split_steps(spec: DatasetSpec) -> list[StepDef]:
    return [StepDef(f"edge_split:{sname}/{'__'.join(et)}",
                    partial(_edge_split, sname=sname, etype=et, cols=cols))
            for sname, per in spec.edge_splits.items() for et, cols in per.items()]


# -- the job ---------------------------------------------------------------------------------
def spec_steps(spec: DatasetSpec) -> list[StepDef]:
    """The steps of the job building ``spec``'s store, in the order they run."""
    return (_count_steps(spec) + _reorder_steps(spec) + _node_steps(spec) + _edge_steps(spec)
            + _column_steps(spec) + _split_steps(spec) + _edge_split_steps(spec))


def _column_rows(ref) -> int:
    """Bytes per row of a per-edge column (from its header)."""
    src = ref.open()
    dtype = np.dtype(ref.dtype) if ref.dtype else src.dtype
    return int(np.prod(src.row_shape, dtype=np.int64)) * dtype.itemsize


def _disk_estimate(spec: DatasetSpec) -> int:
    """Bytes a run needs at most, from the file headers (CSV edge counts are unknown: 0)."""
    need = 0
    for e in spec.edges:
        n = _edge_source(e).num_edges or 0
        n *= 2 if e.undirected else 1
        copies = 2 if e.reverse else 1
        need += 16 * n + copies * 2 * 8 * n  # renumbered scratch, scratch + store indices
        for ref in e.columns:  # the edge order, the store's column and its bucket files
            rows = _column_rows(ref)
            need += copies * (32 * n + 2 * n * rows)
    for ns in spec.nodes.values():
        for ref in list(ns.features.values()) + list(ns.values.values()):
            need += 2 * (remote_input_record(ref.path)["size"] if is_remote(ref.path)
                         else os.path.getsize(ref.path))
    return need


def run_spec(spec_path, store, *, reorder: str | None = None, force: bool = False,
             dry_run: bool = False, budget_bytes: int = 2 << 30, progress: bool = True,
             dask=None, scratch_dir=None) -> Job:
    """Build the store a spec file describes; resumable (see :class:`~preprocess.jobs.job.Job`).

    ``reorder`` overrides the spec's ``reorder`` (``"none"`` or ``"degree"``). With
    ``dry_run`` nothing is written: ``job.plan_text()`` lists the steps and their plans.
    ``dask`` (a ``distributed.Client``) runs the CSC ranges and the feature blocks as Dask
    tasks (:mod:`preprocess.dask.run`); the store is the same byte for byte. ``scratch_dir``:
    see :class:`~preprocess.jobs.job.Job` (required with ``dask`` for a remote store).
    """
    spec = load_spec(spec_path, urls=dask is not None)
    if reorder is not None:
        if reorder not in REORDERS:
            raise SpecError(f"Expected reorder in {REORDERS}. Got {reorder!r}.")
        spec.reorder = reorder
    steps = spec_steps(spec)
    for i, e in enumerate(spec.edges):  # before anything is written
        check_column_rows(e.columns, _edge_source(e).num_edges, f"{spec.path}: edges[{i}]")
    options = {"spec": spec.raw, "reorder": spec.reorder}
    check_shared_scratch(store, scratch_dir, dask, dry_run)  # before the store is opened
    job = Job(store, f"spec:{spec.name}", spec.files(), options, force=force, dry_run=dry_run,
              budget_bytes=budget_bytes, progress=progress, scratch_dir=scratch_dir)
    if not dry_run and not job.complete:
        job.check_disk(_disk_estimate(spec), "the store and its scratch files")
    job.run_steps(steps, SpecContext(job, spec=spec, budget_bytes=budget_bytes,
                                     progress=progress, dask=dask))
    job.commit(spec=spec.path)
    return job
