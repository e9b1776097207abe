"""The generic job: a dataset spec file (YAML) to a store (``featurestore preprocess spec``).

The format (documented in ``docs/preprocess.md``) is in the spirit of GraphBolt's
``metadata.yaml``: node types with counts or id files, edge files per relation, features,
labels, values and splits. Paths are relative to the spec file. :func:`load_spec` checks the
whole spec (and that every file exists) before anything is written; :func:`run_spec` runs it
as a resumable :class:`~preprocess.job.Job`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from featurestore import format as fmt
from featurestore.errors import FeatureStoreError

from .csc import build_csc, plan_csc, reverse_etype
from .diskmap import map_file, open_npy
from .edges import EdgeSource, concat, open_edges
from .edges_job import max_id
from .errors import BadInputError, InputNotFoundError, SpecError
from .features import FeatureSource, write_features, write_values
from .job import Job
from .renumber import (IdMap, IdMapper, MappedEdges, build_idmap, count_into, degree_rank,
                       id_column_blocks, materialize_edges)

__all__ = ["load_spec", "run_spec", "DatasetSpec"]

log = logging.getLogger(__name__)

ID_KINDS = ("contiguous", "sparse", "string")
REORDERS = ("none", "degree")


@dataclass(frozen=True)
class FileRef:
    """A file (and optionally a column, or columns) the spec names."""

    path: str
    column: Any = None
    header: bool = True
    delimiter: str | None = None
    dtype: str | None = None
    ids: FileRef | None = None  # for features/labels/values not row-aligned with the nodes

    @property
    def files(self) -> list[str]:
        return [self.path] + (self.ids.files if self.ids is not None else [])


@dataclass
class NodeSpec:
    name: str
    id_kind: str
    count: int | None
    ids: FileRef | None
    features: dict[str, FileRef] = field(default_factory=dict)
    values: dict[str, FileRef] = field(default_factory=dict)
    labels: FileRef | None = None


@dataclass
class EdgeSpec:
    etype: tuple[str, str, str]
    files: list[FileRef]
    src_col: Any
    dst_col: Any
    reverse: bool
    undirected: bool


@dataclass
class DatasetSpec:
    path: str
    name: str
    reorder: str
    nodes: dict[str, NodeSpec]
    edges: list[EdgeSpec]
    splits: dict[str, dict[str, FileRef]]
    coalesce: bool
    drop_self_loops: bool
    sort_neighbors: bool
    raw: dict

    def files(self) -> list[str]:
        out = [self.path]
        for n in self.nodes.values():
            refs = ([n.ids] if n.ids else []) + list(n.features.values()) + \
                list(n.values.values()) + ([n.labels] if n.labels else [])
            out += [f for r in refs for f in r.files]
        for e in self.edges:
            out += [f.path for f in e.files]
        for per in self.splits.values():
            out += [f for r in per.values() for f in r.files]
        return list(dict.fromkeys(out))


# -- parsing ---------------------------------------------------------------------------------
def _fail(spec_path: str, where: str, msg: str):
    raise SpecError(f"{spec_path}: {where}: {msg}")


def _mapping(spec_path: str, where: str, v) -> dict:
    if v is None:
        return {}
    if not isinstance(v, dict):
        _fail(spec_path, where, f"Expected a mapping. Got {v!r}.")
    return v


def _ref(spec_path: str, base: str, where: str, v, allow_columns: bool = False) -> FileRef:
    if isinstance(v, str):
        v = {"path": v}
    if not isinstance(v, dict) or "path" not in v:
        _fail(spec_path, where, f"Expected a file name or a mapping with 'path'. Got {v!r}.")
    unknown = set(v) - {"path", "column", "columns", "header", "delimiter", "dtype", "ids"}
    if unknown:
        _fail(spec_path, where, f"Expected keys path, column, header, delimiter, dtype, ids. "
                                f"Got {sorted(unknown)} too.")
    path = v["path"]
    if not isinstance(path, str):
        _fail(spec_path, where, f"Expected a path string. Got {path!r}.")
    full = path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))
    if not os.path.exists(full):
        raise InputNotFoundError(f"{spec_path}: {where}: Expected the file {full}. "
                                 "It does not exist.")
    column = v.get("columns", v.get("column"))
    if isinstance(column, list) and not allow_columns:
        _fail(spec_path, where, "Expected one column here. Got a list.")
    ids = _ref(spec_path, base, f"{where}.ids", v["ids"]) if "ids" in v else None
    if v.get("dtype") is not None:
        try:
            np.dtype(v["dtype"])
        except TypeError as e:
            _fail(spec_path, where, f"Expected a NumPy dtype name. Got {v['dtype']!r} ({e}).")
    return FileRef(full, column, bool(v.get("header", True)), v.get("delimiter"),
                   v.get("dtype"), ids)


#: a spec is a few hundred bytes; anything far larger is not one (and bounds what YAML builds).
MAX_SPEC_BYTES = 1 << 20


def _spec_loader(path: str):
    """Yaml's SafeLoader without aliases: ``*ref`` lets a tiny file expand into a huge tree
    (a "billion laughs"), and a spec never needs one."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.events.AliasEvent):
                mark = self.peek_event().start_mark
                raise SpecError(f"{path}: line {mark.line + 1}: Expected no YAML aliases "
                                "(*name) in a spec; write the value out.")
            return super().compose_node(parent, index)

    return NoAliasLoader


def _name(spec_path: str, where: str, kind: str, name) -> str:
    """A node type, relation, feature, value or split name checked with the format's rules
    (it becomes a directory of the store) before anything is written."""
    try:
        return fmt.check_name(kind, name if isinstance(name, str) else str(name))
    except FeatureStoreError as e:
        raise type(e)(f"{spec_path}: {where}: {e}") from None


def load_spec(path: str | os.PathLike) -> DatasetSpec:
    """Parse and check a spec file; every error names the spec and the entry."""
    import yaml

    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise InputNotFoundError(f"Expected a spec file at {path}. Nothing is there.")
    size = os.path.getsize(path)
    if size > MAX_SPEC_BYTES:
        raise SpecError(f"{path}: Expected a spec file of at most {MAX_SPEC_BYTES} bytes. "
                        f"Got {size} bytes.")
    try:
        with open(path) as f:
            raw = yaml.load(f, Loader=_spec_loader(path))  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: Expected YAML: {e}") from e
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: Expected a mapping at the top. Got {type(raw).__name__}.")
    base = os.path.dirname(path)
    top_keys = {"name", "ids", "reorder", "nodes", "edges", "splits", "options"}
    if set(raw) - top_keys:
        _fail(path, "top level", f"Expected keys {sorted(top_keys)}. "
                                 f"Got {sorted(set(raw) - top_keys)} too.")
    default_kind = raw.get("ids", "contiguous")
    if default_kind not in ID_KINDS:
        _fail(path, "ids", f"Expected one of {ID_KINDS}. Got {default_kind!r}.")
    reorder = raw.get("reorder", "none") or "none"
    if reorder not in REORDERS:
        _fail(path, "reorder", f"Expected one of {REORDERS}. Got {reorder!r}.")
    nodes_raw = raw.get("nodes")
    if not isinstance(nodes_raw, dict) or not nodes_raw:
        _fail(path, "nodes", "Expected a mapping of node types (name: {count: N} or {ids: FILE}).")
    nodes: dict[str, NodeSpec] = {}
    for nt, v in nodes_raw.items():
        v = v or {}
        where = f"nodes.{nt}"
        nt = _name(path, where, "node type", nt)
        if not isinstance(v, dict):
            _fail(path, where, f"Expected a mapping. Got {v!r}.")
        allowed = {"count", "ids", "id_kind", "features", "values", "labels"}
        if set(v) - allowed:
            _fail(path, where, f"Expected keys {sorted(allowed)}. Got {sorted(set(v) - allowed)}.")
        kind = v.get("id_kind", default_kind)
        if kind not in ID_KINDS:
            _fail(path, f"{where}.id_kind", f"Expected one of {ID_KINDS}. Got {kind!r}.")
        ids = _ref(path, base, f"{where}.ids", v["ids"]) if v.get("ids") is not None else None
        if ids is not None and kind == "contiguous":
            kind = "sparse"  # an id file means ids to renumber
        count = v.get("count")
        if count is not None and (not isinstance(count, int) or count < 0):
            _fail(path, f"{where}.count", f"Expected a non-negative integer. Got {count!r}.")
        if count is not None and kind != "contiguous":
            _fail(path, where, "Expected either count (ids 0..count-1) or ids/id_kind "
                               "(ids to renumber), not both.")
        feats = {_name(path, f"{where}.features", "feature", k):
                 _ref(path, base, f"{where}.features.{k}", fv, allow_columns=True)
                 for k, fv in _mapping(path, f"{where}.features", v.get("features")).items()}
        vals = {_name(path, f"{where}.values", "value", k):
                _ref(path, base, f"{where}.values.{k}", fv)
                for k, fv in _mapping(path, f"{where}.values", v.get("values")).items()}
        labels = _ref(path, base, f"{where}.labels", v["labels"]) if v.get("labels") else None
        nodes[str(nt)] = NodeSpec(str(nt), kind, count, ids, feats, vals, labels)
    edges: list[EdgeSpec] = []
    for i, e in enumerate(raw.get("edges") or []):
        where = f"edges[{i}]"
        if not isinstance(e, dict):
            _fail(path, where, f"Expected a mapping. Got {e!r}.")
        allowed = {"relation", "path", "paths", "src", "dst", "header", "delimiter", "reverse",
                   "undirected"}
        if set(e) - allowed:
            _fail(path, where, f"Expected keys {sorted(allowed)}. Got {sorted(set(e) - allowed)}.")
        rel = e.get("relation")
        if isinstance(rel, str):
            rel = rel.split(":")
        if not isinstance(rel, (list, tuple)) or len(rel) != 3:
            _fail(path, f"{where}.relation", "Expected [src_type, relation, dst_type] or "
                                             f"'src:relation:dst'. Got {e.get('relation')!r}.")
        rel = (_name(path, f"{where}.relation", "node type", rel[0]),
               _name(path, f"{where}.relation", "relation", rel[1]),
               _name(path, f"{where}.relation", "node type", rel[2]))
        for t in (rel[0], rel[2]):
            if t not in nodes:
                _fail(path, f"{where}.relation", f"Expected node types from nodes "
                                                 f"({sorted(nodes)}). Got {t!r}.")
        paths = e.get("paths", [e["path"]] if "path" in e else None)
        if not paths:
            _fail(path, where, "Expected path (or paths) of the edge file(s).")
        extra = {k: e[k] for k in ("header", "delimiter") if k in e}
        files = [_ref(path, base, f"{where}.path", {"path": p, **extra}) for p in paths]
        undirected = bool(e.get("undirected", False))
        if undirected and rel[0] != rel[2]:
            _fail(path, where, "Expected undirected only for a relation within one node type; "
                               "use reverse: true to add the reverse relation.")
        edges.append(EdgeSpec(rel, files, e.get("src", "src"), e.get("dst", "dst"),
                              bool(e.get("reverse", False)), undirected))
    splits: dict[str, dict[str, FileRef]] = {}
    for sname, per in _mapping(path, "splits", raw.get("splits")).items():
        sname = _name(path, f"splits.{sname}", "split", sname)
        if not isinstance(per, dict):
            _fail(path, f"splits.{sname}", f"Expected a mapping node_type: file. Got {per!r}.")
        for nt, fv in per.items():
            if nt not in nodes:
                _fail(path, f"splits.{sname}", f"Expected node types from nodes. Got {nt!r}.")
            splits.setdefault(str(sname), {})[str(nt)] = _ref(path, base, f"splits.{sname}.{nt}", fv)
    opts = raw.get("options") or {}
    allowed = {"coalesce", "drop_self_loops", "sort_neighbors", "to_undirected"}
    if set(opts) - allowed:
        _fail(path, "options", f"Expected keys {sorted(allowed)}. Got {sorted(set(opts) - allowed)}.")
    if opts.get("to_undirected"):  # PyG's ToUndirected over the whole graph
        for e in edges:
            if e.etype[0] == e.etype[2]:
                e.undirected = True
            else:
                e.reverse = True
    return DatasetSpec(path, str(raw.get("name") or os.path.splitext(os.path.basename(path))[0]),
                       reorder, nodes, edges, splits, bool(opts.get("coalesce", False)),
                       bool(opts.get("drop_self_loops", False)),
                       bool(opts.get("sort_neighbors", True)), raw)


# -- running ---------------------------------------------------------------------------------
class _Types:
    """What the job knows about each node type as steps finish: counts, id maps, ranks."""

    def __init__(self, spec: DatasetSpec, job: Job):
        self.spec, self.job = spec, job
        self.count: dict[str, int | None] = {}

    def idmap_dir(self, nt: str) -> str:
        return os.path.join(self.job.workdir, "idmap", nt)

    def rank_path(self, nt: str, what: str = "rank") -> str:
        return os.path.join(self.job.workdir, "rank", f"{nt}.{what}.npy")

    def idmap(self, nt: str) -> IdMap | None:
        return None if self.spec.nodes[nt].id_kind == "contiguous" else IdMap(self.idmap_dir(nt))

    def rank(self, nt: str, what: str = "rank") -> np.ndarray | None:
        """``rank`` (old store id -> new) or ``perm`` (new -> old) of a degree reordering."""
        if self.spec.reorder != "degree":
            return None
        return np.load(self.rank_path(nt, what), mmap_mode="r")

    def mapper(self, nt: str, ranked: bool = True) -> IdMapper:
        return IdMapper(self.count[nt], self.idmap(nt), self.rank(nt) if ranked else None)


def _edge_source(e: EdgeSpec) -> EdgeSource:
    parts = [open_edges(f.path, e.src_col, e.dst_col, header=f.header, delimiter=f.delimiter)
             for f in e.files]
    return concat(*parts)


def run_spec(spec_path, store, *, reorder: str | None = None, force: bool = False,
             dry_run: bool = False, budget_bytes: int = 2 << 30, progress: bool = True) -> Job:
    """Build the store a spec file describes; resumable (see :class:`~preprocess.job.Job`).

    ``reorder`` overrides the spec's ``reorder`` (``"none"`` or ``"degree"``).
    """
    spec = load_spec(spec_path)
    if reorder is not None:
        if reorder not in REORDERS:
            raise SpecError(f"Expected reorder in {REORDERS}. Got {reorder!r}.")
        spec.reorder = reorder
    options = {"spec": spec.raw, "reorder": spec.reorder}
    job = Job(store, f"spec:{spec.name}", spec.files(), options, force=force, dry_run=dry_run,
              budget_bytes=budget_bytes, progress=progress)
    T = _Types(spec, job)
    B = budget_bytes
    if not dry_run and not job.complete:
        job.check_disk(_disk_estimate(spec), "the store and its scratch files")

    # 1. node counts and id maps
    for nt, ns in spec.nodes.items():
        if ns.id_kind == "contiguous":
            if ns.count is not None:
                T.count[nt] = ns.count
                continue
            srcs = [(_edge_source(e), side) for e in spec.edges for side, t in
                    (("src", e.etype[0]), ("dst", e.etype[2])) if t == nt]
            if not srcs:
                raise SpecError(f"{spec.path}: nodes.{nt}: Expected count (no edge names this "
                                "type, so it cannot be counted from the edges).")

            def scan(srcs=srcs):
                hi = max((max_id(s) for s, _ in srcs), default=-1)
                return {"num_nodes": hi + 1}

            st = job.run_step(f"scan:{nt}", scan, plan={"edge_files": len(srcs)})
            if job.dry_run and "num_nodes" not in st:
                # a dry run reads the ids too (read only): the node count sets the disk need
                # (a 3-line CSV naming id 20,000,000 means 20M nodes, ~320 MB of arrays)
                st = scan()
            T.count[nt] = st.get("num_nodes")
            continue

        strings = ns.id_kind == "string"

        def ids_step(nt=nt, ns=ns, strings=strings):
            if ns.ids is not None:
                blocks = id_column_blocks(ns.ids.path, ns.ids.column, header=ns.ids.header,
                                          delimiter=ns.ids.delimiter)
                m = build_idmap(T.idmap_dir(nt), blocks, name=ns.ids.path, what=nt,
                                from_file=True, strings=strings, budget_bytes=B)
            else:
                def blocks():
                    for e in spec.edges:
                        for i, side in ((0, "src"), (2, "dst")):
                            if e.etype[i] != nt:
                                continue
                            for s, d in _edge_source(e).iter_raw(1 << 22):
                                yield s if side == "src" else d
                m = build_idmap(T.idmap_dir(nt), blocks(), name=f"the edge files of {nt}",
                                what=nt, from_file=False, strings=strings, budget_bytes=B)
            return {"num_nodes": m.num_nodes}

        st = job.run_step(f"ids:{nt}", ids_step, plan={"kind": ns.id_kind})
        T.count[nt] = st.get("num_nodes")

    # 2. degree reordering
    if spec.reorder == "degree":
        for nt in spec.nodes:
            def degree_step(nt=nt):
                n = T.count[nt]
                os.makedirs(os.path.dirname(T.rank_path(nt)), exist_ok=True)
                deg = (np.zeros(n, np.int64) if 8 * n <= B // 4 else open_npy(
                    T.rank_path(nt, "deg"), mode="w+", dtype=np.int64, shape=(n,)))
                for e in spec.edges:
                    sides = [2] if e.etype[2] == nt else []
                    if (e.undirected or e.reverse) and e.etype[0] == nt:
                        sides.append(0)
                    m = T.mapper(nt, ranked=False)
                    for side in sides:
                        for part in _edge_source(e).parts():
                            at = 0
                            for s, d in part.iter_raw(1 << 22):
                                count_into(deg, m(d if side == 2 else s, part.name,
                                                  "destination" if side == 2 else "source", at))
                                at += len(s)
                tmp = {w: T.rank_path(nt, w) + ".partial.npy" for w in ("rank", "perm")}
                rank = open_npy(tmp["rank"], mode="w+", dtype=np.int64,
                                                 shape=(n,))
                degree_rank(deg, rank)
                perm = open_npy(tmp["perm"], mode="w+", dtype=np.int64,
                                                 shape=(n,))
                step = 1 << 22
                for lo in range(0, n, step):
                    r = np.asarray(rank[lo:lo + step])
                    perm[r] = np.arange(lo, lo + len(r), dtype=np.int64)
                rank.flush()
                perm.flush()
                top = int(deg.max()) if n else 0
                del rank, perm, deg
                for w in ("rank", "perm"):
                    os.replace(tmp[w], T.rank_path(nt, w))
                return {"max_in_degree": top}

            job.run_step(f"reorder:{nt}", degree_step, plan={"nodes": T.count[nt]})

    # 3. node types with orig ids
    for nt in spec.nodes:
        with job.step(f"nodes:{nt}", plan={"nodes": T.count[nt],
                                           "disk_bytes": 8 * (T.count[nt] or 0)}) as st:
            if st.todo:
                n = T.count[nt]
                orig = _orig_ids(T, nt, n)
                job.writer.add_node_type(nt, n, orig_ids=orig)
                del orig
                st.stats = {"num_nodes": n}

    # 4. edges: renumbered once when needed, then CSC (and reverse)
    for e in spec.edges:
        key = "__".join(e.etype)
        src_t, _, dst_t = e.etype
        raw = _edge_source(e)
        plan = plan_csc(T.count[src_t] or 0, T.count[dst_t] or 0, raw.num_edges, B)
        mapped = any(spec.nodes[t].id_kind != "contiguous" for t in (src_t, dst_t)) \
            or spec.reorder == "degree"
        epath = os.path.join(job.workdir, "edges", f"{key}.npy")
        if mapped:
            def map_step(e=e, epath=epath):
                os.makedirs(os.path.dirname(epath), exist_ok=True)
                src = MappedEdges(_edge_source(e), T.mapper(e.etype[0]), T.mapper(e.etype[2]))
                s = materialize_edges(src, epath)
                return {"edges": s.num_edges}

            job.run_step(f"map:{key}", map_step,
                         plan={"edges": raw.num_edges,
                               "disk_bytes": 16 * (raw.num_edges or 0)})
        csc_plan = {"edges": raw.num_edges, "passes": plan.est_passes,
                    "disk_bytes": 2 * plan.output_bytes, "memory_bytes": B}
        todo = [(e.etype, False)] + ([(reverse_etype(e.etype), True)] if e.reverse else [])
        for etype, rev in todo:
            with job.step(f"csc:{'__'.join(etype)}", plan=csc_plan) as st:
                if st.todo:
                    source = open_edges(epath) if mapped else raw
                    if rev:
                        source = source.reversed()
                    ns, nd = T.count[etype[0]], T.count[etype[2]]
                    st.stats = build_csc(job.writer, etype, source, num_src=ns, num_dst=nd,
                                         coalesce=spec.coalesce or e.undirected,
                                         drop_self_loops=spec.drop_self_loops,
                                         symmetrize=e.undirected,
                                         sort_neighbors=spec.sort_neighbors,
                                         budget_bytes=B, tmpdir=job.tmpdir, progress=progress)

    # 5. features, values, labels (row order: the node id file's, else store ids before reorder)
    for nt, ns in spec.nodes.items():
        items = [("features", k, r) for k, r in ns.features.items()] + \
                [("values", k, r) for k, r in ns.values.items()] + \
                ([("values", "label", ns.labels)] if ns.labels else [])
        for kind, name, ref in items:
            src = _feature_source(ref, spec.path)
            step = f"{'features' if kind == 'features' else 'values'}:{nt}/{name}"
            out_dtype = np.dtype(ref.dtype) if ref.dtype else None
            with job.step(step, plan={"rows": src.num_rows,
                                      "disk_bytes": src.num_rows * (
                                          src.row_bytes if out_dtype is None else
                                          int(np.prod(src.row_shape, dtype=np.int64))
                                          * out_dtype.itemsize)}) as st:
                if st.todo:
                    perm = _row_perm(T, nt, ref, src.num_rows)
                    if kind == "features":
                        st.stats = write_features(job.writer, nt, name, src, dtype=out_dtype,
                                                  perm=perm, budget_bytes=B, tmpdir=job.tmpdir,
                                                  progress=progress)
                    else:
                        st.stats = write_values(job.writer, nt, name, src, perm=perm,
                                                dtype=out_dtype, budget_bytes=B,
                                                tmpdir=job.tmpdir)

    # 6. splits (ids in the source id space, mapped to store ids)
    for sname, per in spec.splits.items():
        for nt, ref in per.items():
            with job.step(f"split:{sname}/{nt}") as st:
                if st.todo:
                    ids = np.concatenate([
                        T.mapper(nt)(col, ref.path, f"{sname} split")
                        for col in id_column_blocks(ref.path, ref.column, header=ref.header,
                                                    delimiter=ref.delimiter)] or
                        [np.empty(0, np.int64)])
                    job.writer.add_split(sname, nt, ids)
                    st.stats = {"ids": int(ids.shape[0])}
    job.commit(spec=spec.path)
    return job


def _disk_estimate(spec: DatasetSpec) -> int:
    """Bytes a run needs at most, from the file headers (CSV edge counts are unknown: 0)."""
    need = 0
    for e in spec.edges:
        n = _edge_source(e).num_edges or 0
        n *= 2 if e.undirected else 1
        copies = 2 if e.reverse else 1
        need += 16 * n + copies * 2 * 8 * n  # renumbered scratch, scratch + store indices
    for ns in spec.nodes.values():
        for ref in list(ns.features.values()) + list(ns.values.values()):
            need += 2 * os.path.getsize(ref.path)
    return need


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


def _orig_ids(T: _Types, nt: str, n: int):
    """orig_id in final store order: a memory map in the work directory (or None = identity)."""
    m = T.idmap(nt)
    rank = T.rank(nt)
    if m is None and rank is None:
        return None
    out_path = os.path.join(T.job.workdir, f"orig-{nt}.bin")
    if m is not None:
        orig = m.orig_ids(out_path)
    else:
        orig = map_file(out_path, dtype=np.int64, mode="w+", shape=(max(n, 1),))[:n]
        step = 1 << 22
        for lo in range(0, n, step):
            orig[lo:lo + step] = np.arange(lo, min(lo + step, n), dtype=np.int64)
    if rank is not None:
        perm = T.rank(nt, "perm")  # new -> old
        final = map_file(out_path + ".ranked", dtype=np.int64, mode="w+", shape=(max(n, 1),))[:n]
        step = 1 << 22
        for lo in range(0, n, step):
            final[lo:lo + step] = np.asarray(orig)[np.asarray(perm[lo:lo + step])]
        final.flush()
        return final
    return orig


def _row_perm(T: _Types, nt: str, ref: FileRef, num_rows: int):
    """Source row of each store id (``perm[store_id] = row``), or None when rows are in order."""
    n = T.count[nt]
    if ref.ids is None:
        return T.rank(nt, "perm")  # rows follow the store ids before reordering
    pos = open_npy(os.path.join(T.job.workdir, f"rows-{nt}.npy"), mode="w+",
                                    dtype=np.int64, shape=(n,))
    pos[:] = -1
    at = 0
    for col in id_column_blocks(ref.ids.path, ref.ids.column, header=ref.ids.header,
                                delimiter=ref.ids.delimiter):
        sid = T.mapper(nt)(col, ref.ids.path, f"{nt} row", at)
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
