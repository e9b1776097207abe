"""Dataset spec files (YAML): parsing and checking, into a typed :class:`DatasetSpec`.

The format (documented in ``docs/preprocess.md``) is in the spirit of GraphBolt's
``metadata.yaml``: node types with counts or id files, edge files per relation, features,
labels, values and splits. Paths are relative to the spec file. :func:`load_spec` checks the
whole spec (and that every file exists) before anything is written; running it
(``featurestore preprocess spec``) is :func:`preprocess.jobs.spec_steps.run_spec`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from featurestore.format import names as fmt
from featurestore.errors import FeatureStoreError

from preprocess.errors import InputNotFoundError, SpecError
from preprocess.jobs.edge_data import EdgeColumnRef
from preprocess.jobs.paths import input_location, local_input
from preprocess.sources.remote import is_remote

__all__ = ["load_spec", "DatasetSpec", "NodeSpec", "EdgeSpec", "FileRef", "EdgeSplitCols"]

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
        """The file and, for rows not aligned with the nodes, the id file(s)."""
        return [self.path] + (self.ids.files if self.ids is not None else [])


@dataclass
class NodeSpec:
    """A node type of the spec: how its ids are given, and its features, values, labels."""

    name: str
    id_kind: str
    count: int | None
    ids: FileRef | None
    features: dict[str, FileRef] = field(default_factory=dict)
    values: dict[str, FileRef] = field(default_factory=dict)
    labels: FileRef | None = None


#: an edge split's pairs of one edge type: column name (src, dst, neg_dst, label ...) -> file
EdgeSplitCols = dict[str, FileRef]


@dataclass
class EdgeSpec:
    """An edge type of the spec: its files and columns, whether to add the reverse, and its
    per-edge columns (``features``: rows of values, ``values``: 1-D), in input order."""

    etype: tuple[str, str, str]
    files: list[FileRef]
    src_col: Any
    dst_col: Any
    reverse: bool
    undirected: bool
    features: dict[str, EdgeColumnRef] = field(default_factory=dict)
    values: dict[str, EdgeColumnRef] = field(default_factory=dict)

    @property
    def columns(self) -> list[EdgeColumnRef]:
        """Every per-edge column, features first."""
        return list(self.features.values()) + list(self.values.values())


@dataclass
class DatasetSpec:
    """A checked spec file: node types, edge types, splits and the options of the job."""

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
    edge_splits: dict[str, dict[tuple[str, str, str], EdgeSplitCols]] = field(
        default_factory=dict)

    def files(self) -> list[str]:
        """Every input file the spec names (the spec first), once each."""
        out = [self.path]
        for n in self.nodes.values():
            refs = ([n.ids] if n.ids else []) + list(n.features.values()) + \
                list(n.values.values()) + ([n.labels] if n.labels else [])
            out += [f for r in refs for f in r.files]
        for e in self.edges:
            out += [f.path for f in e.files] + [p for r in e.columns for p in r.paths]
        for per in self.splits.values():
            out += [f for r in per.values() for f in r.files]
        for per in self.edge_splits.values():
            out += [f for cols in per.values() for r in cols.values() for f in r.files]
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


def _ref(spec_path: str, base: str, where: str, v, allow_columns: bool = False,
         urls: bool = False) -> FileRef:
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
    path = input_location(path, urls=urls)
    full = path if os.path.isabs(path) or is_remote(path) else \
        os.path.normpath(os.path.join(base, path))
    if is_remote(full):
        _check_remote(spec_path, where, full)
    elif not os.path.exists(full):
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


def _check_remote(spec_path: str, where: str, url: str) -> None:
    """A URL input (a Dask job's ``.npy`` edges or features) that exists."""
    import fsspec

    if not url.lower().endswith(".npy"):
        _fail(spec_path, where, f"Expected a .npy file for the URL {url}: parquet and CSV "
                                "inputs are read from a file system every worker mounts.")
    fs, p = fsspec.core.url_to_fs(url)
    if not fs.exists(p):
        raise InputNotFoundError(f"{spec_path}: {where}: Expected the file {url}. "
                                 "It does not exist.")


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


def _read_yaml(path: str) -> dict:
    """The spec file's top-level mapping (size-capped, no aliases)."""
    import yaml

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
    return raw


def _parse_node(path: str, base: str, nt, v, default_kind: str,
                urls: bool = False) -> NodeSpec:
    """One entry of ``nodes``."""
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
             _ref(path, base, f"{where}.features.{k}", fv, allow_columns=True, urls=urls)
             for k, fv in _mapping(path, f"{where}.features", v.get("features")).items()}
    vals = {_name(path, f"{where}.values", "value", k):
            _ref(path, base, f"{where}.values.{k}", fv)
            for k, fv in _mapping(path, f"{where}.values", v.get("values")).items()}
    labels = _ref(path, base, f"{where}.labels", v["labels"]) if v.get("labels") else None
    return NodeSpec(str(nt), kind, count, ids, feats, vals, labels)


def _parse_edge(path: str, base: str, i: int, e, nodes: dict, urls: bool = False) -> EdgeSpec:
    """One entry of ``edges``."""
    where = f"edges[{i}]"
    if not isinstance(e, dict):
        _fail(path, where, f"Expected a mapping. Got {e!r}.")
    allowed = {"relation", "path", "paths", "src", "dst", "header", "delimiter", "reverse",
               "undirected", "features", "values", "edge_splits"}
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
    files = [_ref(path, base, f"{where}.path", {"path": p, **extra}, urls=urls)
             for p in paths]
    undirected = bool(e.get("undirected", False))
    if undirected and rel[0] != rel[2]:
        _fail(path, where, "Expected undirected only for a relation within one node type; "
                           "use reverse: true to add the reverse relation.")
    out = EdgeSpec(rel, files, e.get("src", "src"), e.get("dst", "dst"),
                   bool(e.get("reverse", False)), undirected)
    for kind in ("features", "values"):
        for name, v in _mapping(path, f"{where}.{kind}", e.get(kind)).items():
            name = _name(path, f"{where}.{kind}", kind[:-1] if kind == "features" else "value",
                         name)
            getattr(out, kind)[name] = _edge_column(path, base, f"{where}.{kind}.{name}", v,
                                                    name, kind, out, urls)
    return out


def _edge_column(path: str, base: str, where: str, v, name: str, kind: str, e: EdgeSpec,
                 urls: bool) -> EdgeColumnRef:
    """One entry of an edge type's ``features`` or ``values``: a file (``.npy``, or
    ``{path, column(s)}``), or ``{column(s)}`` of the edge files themselves."""
    if isinstance(v, dict) and "path" not in v:
        unknown = set(v) - {"column", "columns", "dtype"}
        if unknown:
            _fail(path, where, f"Expected keys path, column, columns, dtype. Got "
                               f"{sorted(unknown)} too.")
        cols = v.get("columns", v.get("column"))
        if cols is None:
            _fail(path, where, "Expected path, or column(s) of the edge files.")
        f0 = e.files[0]
        paths = tuple(f.path for f in e.files)
        ref = FileRef(paths[0], cols, f0.header, f0.delimiter, v.get("dtype"))
    else:
        ref = _ref(path, base, where, v, allow_columns=True, urls=urls)
        paths = (ref.path,)
        cols = ref.column
    if ref.ids is not None:
        _fail(path, where, "Expected rows in the order of the edge files (no ids).")
    if kind == "features" and isinstance(cols, str):
        cols = [cols]  # one column: a list column, or rows of one value
    if kind == "values" and isinstance(cols, list):
        _fail(path, where, "Expected one column for per-edge values. Got a list.")
    return EdgeColumnRef(name, kind, paths, cols, ref.header, ref.delimiter, ref.dtype)


def _parse_splits(path: str, base: str, raw, nodes: dict) -> dict[str, dict[str, FileRef]]:
    """The ``splits`` mapping: split name -> node type -> id file."""
    splits: dict[str, dict[str, FileRef]] = {}
    for sname, per in _mapping(path, "splits", raw).items():
        sname = _name(path, f"splits.{sname}", "split", sname)
        if not isinstance(per, dict):
            _fail(path, f"splits.{sname}", f"Expected a mapping node_type: file. Got {per!r}.")
        for nt, fv in per.items():
            if nt not in nodes:
                _fail(path, f"splits.{sname}", f"Expected node types from nodes. Got {nt!r}.")
            splits.setdefault(str(sname), {})[str(nt)] = _ref(path, base,
                                                              f"splits.{sname}.{nt}", fv)
    return splits


EDGE_SPLIT_ID_COLUMNS = ("src", "dst", "neg_dst")


def _edge_split_cols(path: str, base: str, where: str, v) -> EdgeSplitCols:
    """One edge split of one edge type: ``{src: FILE, dst: FILE, ...}`` (each column a file,
    or ``{path, column}``), or ``{path: FILE, src: COL, dst: COL, ...}`` (columns of one
    file)."""
    if not isinstance(v, dict):
        _fail(path, where, f"Expected a mapping of columns (src, dst, neg_dst, label ...). "
                           f"Got {v!r}.")
    shared = v.get("path")
    opts = {k: v[k] for k in ("header", "delimiter") if k in v}
    cols: EdgeSplitCols = {}
    for col, fv in v.items():
        if col in ("path", "header", "delimiter"):
            continue
        col = _name(path, where, "column", col)
        if shared is not None and isinstance(fv, (str, int)):
            fv = {"path": shared, "column": fv, **opts}
        cols[col] = _ref(path, base, f"{where}.{col}", fv, allow_columns=col not in
                         ("src", "dst"))
    if "src" not in cols:
        _fail(path, where, f"Expected a src column. Got {sorted(cols)}.")
    return cols


def _parse_edge_splits(path: str, base: str, raw, edges: list[EdgeSpec], raw_edges: list
                       ) -> dict[str, dict[tuple[str, str, str], EdgeSplitCols]]:
    """``edge_splits`` (top level: split -> relation -> columns) and each edge entry's own
    ``edge_splits`` (split -> columns)."""
    known = {e.etype: e for e in edges}
    for e in edges:
        if e.reverse:
            known.setdefault((e.etype[2], f"rev_{e.etype[1]}", e.etype[0]), e)
    out: dict[str, dict[tuple[str, str, str], EdgeSplitCols]] = {}
    for sname, per in _mapping(path, "edge_splits", raw).items():
        sname = _name(path, f"edge_splits.{sname}", "split", sname)
        for rel, v in _mapping(path, f"edge_splits.{sname}", per).items():
            et = tuple(rel.split(":")) if isinstance(rel, str) else tuple(rel)
            where = f"edge_splits.{sname}.{rel}"
            if et not in known:
                _fail(path, where, f"Expected an edge type of the spec "
                                   f"({[':'.join(t) for t in known]}). Got {rel!r}.")
            out.setdefault(sname, {})[et] = _edge_split_cols(path, base, where, v)
    for i, (e, r) in enumerate(zip(edges, raw_edges)):
        for sname, v in _mapping(path, f"edges[{i}].edge_splits", r.get("edge_splits")).items():
            where = f"edges[{i}].edge_splits.{sname}"
            sname = _name(path, where, "split", sname)
            if e.etype in out.get(sname, {}):
                _fail(path, where, f"Expected split {sname!r} of {':'.join(e.etype)} once. "
                                   "It is in edge_splits too.")
            out.setdefault(sname, {})[e.etype] = _edge_split_cols(path, base, where, v)
    return out


def _check_edge_column_options(path: str, edges: list[EdgeSpec], opts: dict) -> None:
    """Options that leave per-edge columns without one row per edge are refused."""
    for i, e in enumerate(edges):
        if not e.columns:
            continue
        if opts.get("coalesce"):
            _fail(path, f"edges[{i}]", "Expected options.coalesce false with edge features "
                                       "or values: merging duplicate edges would need a rule "
                                       "to merge their rows.")
        if not opts.get("sort_neighbors", True):
            _fail(path, f"edges[{i}]", "Expected options.sort_neighbors true with edge "
                                       "features or values (their CSC order is the sorted one).")


def load_spec(path: str | os.PathLike, *, urls: bool = False) -> DatasetSpec:
    """Parse and check a spec file; every error names the spec and the entry.

    ``urls`` (a Dask job): ``.npy`` edge and feature files may be fsspec URLs (read by byte
    range, :mod:`preprocess.sources.remote`); id, label, value and split files stay local.
    """
    path = os.path.abspath(local_input(path))
    raw = _read_yaml(path)
    base = os.path.dirname(path)
    top_keys = {"name", "ids", "reorder", "nodes", "edges", "splits", "edge_splits", "options"}
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
        ns = _parse_node(path, base, nt, v, default_kind, urls)
        nodes[ns.name] = ns
    raw_edges = raw.get("edges") or []
    edges = [_parse_edge(path, base, i, e, nodes, urls) for i, e in enumerate(raw_edges)]
    splits = _parse_splits(path, base, raw.get("splits"), nodes)
    opts = raw.get("options") or {}
    allowed = {"coalesce", "drop_self_loops", "sort_neighbors", "to_undirected"}
    if set(opts) - allowed:
        _fail(path, "options",
              f"Expected keys {sorted(allowed)}. Got {sorted(set(opts) - allowed)}.")
    _check_edge_column_options(path, edges, opts)
    if opts.get("to_undirected"):  # PyG's ToUndirected over the whole graph
        for e in edges:
            if e.etype[0] == e.etype[2]:
                e.undirected = True
            else:
                e.reverse = True
    edge_splits = _parse_edge_splits(path, base, raw.get("edge_splits"), edges, raw_edges)
    return DatasetSpec(path, str(raw.get("name") or os.path.splitext(os.path.basename(path))[0]),
                       reorder, nodes, edges, splits, bool(opts.get("coalesce", False)),
                       bool(opts.get("drop_self_loops", False)),
                       bool(opts.get("sort_neighbors", True)), raw, edge_splits)

