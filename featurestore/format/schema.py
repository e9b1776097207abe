"""The root attributes of a store, parsed once into typed, frozen objects.

:meth:`StoreSchema.from_attrs` checks every key the format defines (presence, JSON type,
range, names) and raises a named error that gives the file and the key:

* :class:`~featurestore.errors.NotAStoreError`: another format or format version;
* :class:`~featurestore.errors.UnsafePathError`: a name that would reach outside the store
  (``../x``, ``/abs``, a leading ``.``);
* :class:`~featurestore.errors.CorruptStoreError`: anything else (a key missing, a wrong type
  such as ``"complete": "false"``, a negative count, an edge type naming an unknown node type).

:meth:`StoreSchema.to_attrs` gives back the JSON form (``docs/format.md``), and
:meth:`StoreSchema.arrays_expected` the key, shape and dtype of every array the schema names,
which readers and ``verify`` compare with each array's own ``zarr.json``.

Reader and writer share this one representation: :func:`parse_root` reads a root ``zarr.json``,
:meth:`StoreSchema.to_json` is what the writer writes, and the writer records each step as a
new schema (:meth:`StoreSchema.new`, ``with_*``, :meth:`StoreSchema.committed`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from featurestore.errors import (
    CorruptStoreError,
    FeatureStoreError,
    NotAStoreError,
    UnsafePathError,
)
from featurestore.format import names as fmt
from featurestore.format.names import EdgeType
from featurestore.format.shard import ShardLayout

__all__ = ["FeatureSchema", "ValueSchema", "NodeTypeSchema", "EdgeTypeSchema", "ArraySpec",
           "EdgeSplitSchema", "StoreSchema", "parse_dtype", "parse_root", "check_array_meta"]

#: largest count accepted in a schema (row counts and offsets are int64).
MAX_COUNT = 2**62
#: dtypes an array of the store may have.
_KINDS = "fiub"
INDEX_DTYPES = ("int32", "int64")
#: edge split columns holding node ids, and the end of the edge type whose ids they are.
EDGE_ID_COLUMNS = {"src": "src", "dst": "dst", "neg_dst": "dst"}


@dataclass(frozen=True)
class FeatureSchema:
    """A feature array of a node type: dtype, row shape, compressed or not."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    compressed: bool = False

    def to_attrs(self) -> dict:
        """Return the JSON form of the root ``zarr.json``'s schema."""
        return {"dtype": self.dtype.name, "shape": list(self.shape), "compressed": self.compressed}


@dataclass(frozen=True)
class ValueSchema:
    """A per-node 1-D value array of a node type (``label``, ``year``, ...)."""

    name: str
    dtype: np.dtype

    def to_attrs(self) -> dict:
        """Return the JSON form of the root ``zarr.json``'s schema."""
        return {"dtype": self.dtype.name}


class _RowArrays:
    """``with_feature``/``with_value`` of a node or edge type (dataclasses with ``features``
    and ``values`` mappings)."""

    def with_feature(self, f: FeatureSchema):
        """Return this type with feature ``f`` added (or replaced, keeping its place)."""
        return dataclasses.replace(self, features=_frozen({**self.features, f.name: f}))

    def with_value(self, v: ValueSchema):
        """Return this type with value array ``v`` added (or replaced, keeping its place)."""
        return dataclasses.replace(self, values=_frozen({**self.values, v.name: v}))


@dataclass(frozen=True)
class NodeTypeSchema(_RowArrays):
    """A node type: its node count, feature arrays and value arrays."""

    name: str
    num_nodes: int
    features: Mapping[str, FeatureSchema] = field(default_factory=dict)
    values: Mapping[str, ValueSchema] = field(default_factory=dict)

    def to_attrs(self) -> dict:
        """Return the JSON form of the root ``zarr.json``'s schema."""
        return {"num_nodes": self.num_nodes,
                "features": {k: f.to_attrs() for k, f in self.features.items()},
                "values": {k: v.to_attrs() for k, v in self.values.items()}}


@dataclass(frozen=True)
class EdgeTypeSchema(_RowArrays):
    """An edge type: ``(src, rel, dst)``, its edge count, the dtype of its indices, and its
    per-edge feature and value arrays (rows in CSC edge order: row ``i`` is the edge at
    position ``i`` of ``indices``, the ``e_id`` the sampler returns)."""

    etype: EdgeType
    num_edges: int
    indices_dtype: np.dtype
    layout: str = "csc"
    features: Mapping[str, FeatureSchema] = field(default_factory=dict)
    values: Mapping[str, ValueSchema] = field(default_factory=dict)

    @property
    def src(self) -> str:
        """The source node type."""
        return self.etype.src

    @property
    def rel(self) -> str:
        """The relation name."""
        return self.etype.rel

    @property
    def dst(self) -> str:
        """The destination node type."""
        return self.etype.dst

    def to_attrs(self) -> dict:
        """Return the JSON form of the root ``zarr.json``'s schema."""
        out = {"src": self.src, "rel": self.rel, "dst": self.dst, "num_edges": self.num_edges,
               "layout": self.layout, "indices_dtype": self.indices_dtype.name}
        if self.features:  # absent when empty: stores without edge data stay byte-identical
            out["features"] = {k: f.to_attrs() for k, f in self.features.items()}
        if self.values:
            out["values"] = {k: v.to_attrs() for k, v in self.values.items()}
        return out


@dataclass(frozen=True)
class EdgeSplitSchema:
    """The pairs of one edge type in an edge split: ``count`` rows of named columns (``src``
    always; ``dst``, ``neg_dst``, ``label``, ``relation`` ... as written), each column's
    dtype and row shape."""

    count: int
    columns: Mapping[str, FeatureSchema] = field(default_factory=dict)

    def to_attrs(self) -> dict:
        """Return the JSON form of the root ``zarr.json``'s schema."""
        return {"count": self.count,
                "columns": {k: {"dtype": c.dtype.name, "shape": list(c.shape)}
                            for k, c in self.columns.items()}}


@dataclass(frozen=True)
class ArraySpec:
    """What the schema says about one array: key, full shape, dtype, compressed or not."""

    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    compressed: bool = False


def parse_dtype(value: Any, where: str) -> np.dtype:
    """A numeric dtype from its name in the schema, or CorruptStoreError naming ``where``."""
    if not isinstance(value, str):
        raise CorruptStoreError(f"{where}: expected a dtype name (a string). Got {value!r}.")
    try:
        dt = np.dtype(value)
    except (TypeError, ValueError) as e:
        raise CorruptStoreError(f"{where}: {value!r} is not a dtype ({e}).") from e
    if dt.kind not in _KINDS or dt.fields is not None or dt.subdtype is not None:
        raise CorruptStoreError(f"{where}: expected a numeric dtype (int, uint, float, bool). "
                                f"Got {value!r}.")
    return dt.newbyteorder("=")


class _Parser:
    """Typed access to a JSON tree, with errors naming the file and the key path."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, path: str, msg: str) -> CorruptStoreError:
        return CorruptStoreError(f"{self.file}: {path}: {msg}")

    def get(self, d: Mapping, key: str, path: str, types, *, default=..., what: str = ""):
        if key not in d:
            if default is ...:
                raise self.fail(f"{path}.{key}" if path else key, "required key is missing")
            return default
        v = d[key]
        p = f"{path}.{key}" if path else key
        if types is int:
            return self.count(v, p)
        ok = isinstance(v, bool) if types is bool else (isinstance(v, types)
                                                         and not isinstance(v, bool))
        if not ok:
            raise self.fail(p, f"expected {what or _type_name(types)}, got {json_repr(v)}")
        return v

    def count(self, v, path: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < MAX_COUNT:
            raise self.fail(path, f"expected a non-negative integer, got {json_repr(v)}")
        return int(v)

    def name(self, kind: str, v, path: str) -> str:
        try:
            return fmt.check_name(kind, v)
        except UnsafePathError as e:
            raise UnsafePathError(f"{self.file}: {path}: {e} Refusing to open the store: "
                                  "its keys would reach outside the store directory.") from e
        except (FeatureStoreError, ValueError, TypeError) as e:
            raise self.fail(path, str(e)) from e


def _type_name(types) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true or false",
             int: "an integer"}
    if isinstance(types, tuple):
        return " or ".join(names.get(t, t.__name__) for t in types)
    return names.get(types, types.__name__)


def json_repr(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _frozen(d: dict) -> Mapping:
    return MappingProxyType(dict(d))


#: root attribute keys that the schema parses; others are kept as they are (``extra``).
_KNOWN = ("format", "format_version", "complete", "writer_version", "generation", "schema",
          "arrays", "provenance")


def _parse_node_types(P: _Parser, schema: dict, file: str) -> dict:
    """The node types of a raw schema, checked."""
    nts = {}
    for nt, spec in P.get(schema, "node_types", "schema", dict).items():
        path = f"schema.node_types.{nt}"
        P.name("node type", nt, path)
        if not isinstance(spec, dict):
            raise P.fail(path, f"expected an object, got {json_repr(spec)}")
        n = P.get(spec, "num_nodes", path, int)
        feats, vals = _parse_features(P, spec, path), _parse_values(P, spec, path)
        nts[nt] = NodeTypeSchema(nt, n, feats, vals)

    return nts


def _parse_row_schema(P: _Parser, f, fp: str, kind: str, name: str) -> FeatureSchema:
    """A ``{"dtype", "shape"[, "compressed"]}`` object (a feature or an edge split column)."""
    P.name(kind, name, fp)
    if not isinstance(f, dict):
        raise P.fail(fp, f"expected an object, got {json_repr(f)}")
    shape = P.get(f, "shape", fp, list)
    if len(shape) > 32:
        raise P.fail(f"{fp}.shape", f"expected at most 32 dimensions, got {len(shape)}")
    shape = tuple(P.count(s, f"{fp}.shape[{i}]") for i, s in enumerate(shape))
    return FeatureSchema(name, parse_dtype(P.get(f, "dtype", fp, str), f"{P.file}: {fp}.dtype"),
                         shape, P.get(f, "compressed", fp, bool, default=False))


def _parse_features(P: _Parser, spec: dict, path: str) -> Mapping:
    """The ``features`` of a node or edge type."""
    return _frozen({name: _parse_row_schema(P, f, f"{path}.features.{name}", "feature", name)
                    for name, f in P.get(spec, "features", path, dict, default={}).items()})


def _parse_values(P: _Parser, spec: dict, path: str) -> Mapping:
    """The ``values`` (1-D per-node or per-edge arrays) of a node or edge type."""
    vals = {}
    for name, v in P.get(spec, "values", path, dict, default={}).items():
        vp = f"{path}.values.{name}"
        P.name("value", name, vp)
        if not isinstance(v, dict):
            raise P.fail(vp, f"expected an object, got {json_repr(v)}")
        vals[name] = ValueSchema(name, parse_dtype(P.get(v, "dtype", vp, str),
                                                   f"{P.file}: {vp}.dtype"))
    return _frozen(vals)


def _parse_edge_types(P: _Parser, schema: dict, nts: dict) -> list:
    """The edge types of a raw schema, checked against its node types."""
    ets = []
    seen = set()
    for i, e in enumerate(P.get(schema, "edge_types", "schema", list)):
        path = f"schema.edge_types[{i}]"
        if not isinstance(e, dict):
            raise P.fail(path, f"expected an object, got {json_repr(e)}")
        src = P.name("node type", P.get(e, "src", path, str), f"{path}.src")
        rel = P.name("relation", P.get(e, "rel", path, str), f"{path}.rel")
        dst = P.name("node type", P.get(e, "dst", path, str), f"{path}.dst")
        for side, t in (("src", src), ("dst", dst)):
            if t not in nts:
                raise P.fail(f"{path}.{side}", f"node type {t!r} is not in schema.node_types "
                                               f"{sorted(nts)}")
        et = EdgeType(src, rel, dst)
        if et in seen:
            raise P.fail(path, f"edge type {tuple(et)} appears twice")
        seen.add(et)
        layout = P.get(e, "layout", path, str, default="csc")
        if layout != "csc":
            raise P.fail(f"{path}.layout", f"expected 'csc', got {layout!r}")
        idt = P.get(e, "indices_dtype", path, str)
        if idt not in INDEX_DTYPES:
            raise P.fail(f"{path}.indices_dtype",
                         f"expected one of {INDEX_DTYPES}, got {idt!r}")
        ets.append(EdgeTypeSchema(et, P.get(e, "num_edges", path, int), np.dtype(idt), layout,
                                  _parse_features(P, e, path), _parse_values(P, e, path)))

    return ets


def _parse_splits(P: _Parser, schema: dict, nts: dict) -> dict:
    """The splits of a raw schema, checked against its node types."""
    splits = {}
    for name, per in P.get(schema, "splits", "schema", dict, default={}).items():
        path = f"schema.splits.{name}"
        P.name("split", name, path)
        if not isinstance(per, dict):
            raise P.fail(path, f"expected an object, got {json_repr(per)}")
        counts = {}
        for nt, c in per.items():
            P.name("node type", nt, f"{path}.{nt}")
            if nt not in nts:
                raise P.fail(f"{path}.{nt}", f"node type {nt!r} is not in schema.node_types")
            counts[nt] = P.count(c, f"{path}.{nt}")
        splits[name] = _frozen(counts)

    return splits


def _parse_edge_splits(P: _Parser, schema: dict, ets: list) -> dict:
    """The edge splits of a raw schema: per split, per edge type key, its pair columns."""
    by_key = {e.etype.key(): e.etype for e in ets}
    out = {}
    for name, per in P.get(schema, "edge_splits", "schema", dict, default={}).items():
        path = f"schema.edge_splits.{name}"
        P.name("split", name, path)
        if not isinstance(per, dict):
            raise P.fail(path, f"expected an object, got {json_repr(per)}")
        types = {}
        for key, sp in per.items():
            kp = f"{path}.{key}"
            if key not in by_key:
                raise P.fail(kp, f"expected an edge type key among {sorted(by_key)}, got "
                                 f"{json_repr(key)}")
            if not isinstance(sp, dict):
                raise P.fail(kp, f"expected an object, got {json_repr(sp)}")
            count = P.get(sp, "count", kp, int)
            cols = {c: _parse_row_schema(P, v, f"{kp}.columns.{c}", "column", c)
                    for c, v in P.get(sp, "columns", kp, dict).items()}
            if "src" not in cols:
                raise P.fail(f"{kp}.columns", "required column 'src' is missing")
            for c in EDGE_ID_COLUMNS:
                if c in cols and cols[c].dtype != np.dtype(np.int64):
                    raise P.fail(f"{kp}.columns.{c}", f"expected int64 node ids, got "
                                                      f"{cols[c].dtype.name}")
            types[by_key[key]] = EdgeSplitSchema(count, _frozen(cols))
        out[name] = _frozen(types)
    return out


@dataclass(frozen=True)
class StoreSchema:
    """Everything the root ``zarr.json`` of a store says, typed and checked."""

    url: str
    format_version: int
    complete: bool
    node_types: Mapping[str, NodeTypeSchema]
    edge_types: tuple[EdgeTypeSchema, ...]
    splits: Mapping[str, Mapping[str, int]]
    arrays: tuple[str, ...] = ()
    writer_version: str | None = None
    generation: str | None = None
    provenance: tuple[dict, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    edge_splits: Mapping[str, Mapping[EdgeType, EdgeSplitSchema]] = field(default_factory=dict)

    # -- parsing ----------------------------------------------------------------------
    @classmethod
    def from_attrs(cls, attrs: Any, url: str, *, file: str | None = None) -> StoreSchema:
        """Parse and check the root attributes of the store at ``url``.

        ``file`` names the ``zarr.json`` in error messages (default ``url/zarr.json``).
        """
        file = file or f"{url.rstrip('/')}/zarr.json"
        P = _Parser(file)
        if not isinstance(attrs, Mapping):
            raise P.fail("attributes", f"expected an object, got {json_repr(attrs)}")
        if attrs.get("format") != fmt.FORMAT_NAME:
            raise NotAStoreError(f"Expected a zarr group with format {fmt.FORMAT_NAME!r} at "
                                 f"{url}. Got format {attrs.get('format')!r} instead.")
        version = attrs.get("format_version")
        if version != fmt.FORMAT_VERSION or isinstance(version, bool):
            raise NotAStoreError(f"Expected format version {fmt.FORMAT_VERSION} at {url}. "
                                 f"Got {version!r} instead.")
        complete = P.get(attrs, "complete", "", bool)
        writer_version = P.get(attrs, "writer_version", "", str, default=None)
        generation = P.get(attrs, "generation", "", str, default=None)
        if generation is not None and not generation:
            raise P.fail("generation", "expected a non-empty string")
        schema = P.get(attrs, "schema", "", dict)

        nts = _parse_node_types(P, schema, file)
        ets = _parse_edge_types(P, schema, nts)
        splits = _parse_splits(P, schema, nts)
        edge_splits = _parse_edge_splits(P, schema, ets)

        arrays = P.get(attrs, "arrays", "", list, default=[])
        for i, key in enumerate(arrays):
            if not isinstance(key, str):
                raise P.fail(f"arrays[{i}]", f"expected a string, got {json_repr(key)}")
        prov = P.get(attrs, "provenance", "", list, default=[])
        extra = {k: v for k, v in attrs.items() if k not in _KNOWN}
        return cls(url=url, format_version=int(version), complete=complete,
                   node_types=_frozen(nts), edge_types=tuple(ets), splits=_frozen(splits),
                   arrays=tuple(arrays), writer_version=writer_version, generation=generation,
                   provenance=tuple(prov), extra=_frozen(extra),
                   edge_splits=_frozen(edge_splits))

    def validate(self) -> StoreSchema:
        """Check the schema again (e.g. one built in code); returns it. Raises like from_attrs."""
        return StoreSchema.from_attrs(self.to_attrs(), self.url)

    def to_attrs(self) -> dict[str, Any]:
        """The JSON form of the root attributes (``docs/format.md``).

        Keys come in the order the writer adds them (so a store's ``zarr.json`` is the same
        byte for byte however it was made): the header, ``schema``, ``provenance``, then
        ``arrays`` once one is written, ``generation`` once committed, and the other keys
        (``topology_checks``, ...).
        """
        out: dict[str, Any] = {"format": fmt.FORMAT_NAME, "format_version": self.format_version,
                               "complete": self.complete}
        if self.writer_version is not None:
            out["writer_version"] = self.writer_version
        out["schema"] = {
            "node_types": {k: v.to_attrs() for k, v in self.node_types.items()},
            "edge_types": [e.to_attrs() for e in self.edge_types],
            "splits": {k: dict(v) for k, v in self.splits.items()},
        }
        if self.edge_splits:
            out["schema"]["edge_splits"] = {
                k: {et.key(): sp.to_attrs() for et, sp in per.items()}
                for k, per in self.edge_splits.items()}
        out["provenance"] = [dict(p) if isinstance(p, Mapping) else p for p in self.provenance]
        if self.arrays:
            out["arrays"] = list(self.arrays)
        if self.generation is not None:
            out["generation"] = self.generation
        out.update(self.extra)
        return out

    def to_json(self) -> dict[str, Any]:
        """The whole root ``zarr.json``: a zarr v3 group whose attributes are :meth:`to_attrs`."""
        return {"zarr_format": 3, "node_type": "group", "attributes": self.to_attrs()}

    # -- building (the writer) ----------------------------------------------------------
    @classmethod
    def new(cls, url: str, writer_version: str) -> StoreSchema:
        """The schema of a store just created: no types, no arrays, not complete."""
        return cls(url=url, format_version=fmt.FORMAT_VERSION, complete=False,
                   node_types=_frozen({}), edge_types=(), splits=_frozen({}),
                   writer_version=writer_version)

    def with_node_type(self, nt: NodeTypeSchema) -> StoreSchema:
        """Return this schema with node type ``nt`` added (or replaced, keeping its place)."""
        return dataclasses.replace(self, node_types=_frozen({**self.node_types, nt.name: nt}))

    def with_edge_type(self, e: EdgeTypeSchema) -> StoreSchema:
        """Return this schema with edge type ``e`` last (dropping one of the same name)."""
        kept = tuple(x for x in self.edge_types if x.etype != e.etype)
        return dataclasses.replace(self, edge_types=kept + (e,))

    def with_split(self, name: str, ntype: str, count: int) -> StoreSchema:
        """Return this schema with ``count`` nodes of ``ntype`` in split ``name``."""
        per = _frozen({**self.splits.get(name, {}), ntype: count})
        return dataclasses.replace(self, splits=_frozen({**self.splits, name: per}))

    def with_edge_split(self, name: str, et: EdgeType, sp: EdgeSplitSchema) -> StoreSchema:
        """Return this schema with the pairs ``sp`` of edge type ``et`` in edge split ``name``."""
        per = _frozen({**self.edge_splits.get(name, {}), et: sp})
        return dataclasses.replace(self, edge_splits=_frozen({**self.edge_splits, name: per}))

    def with_array(self, key: str) -> StoreSchema:
        """Return this schema with array ``key`` recorded as completely written."""
        if key in self.arrays:
            return self
        return dataclasses.replace(self, arrays=self.arrays + (key,))

    def with_provenance(self, entry: dict) -> StoreSchema:
        """Return this schema with provenance ``entry`` (a preprocessing step) appended."""
        return dataclasses.replace(self, provenance=self.provenance + (entry,))

    def with_extra(self, key: str, value: Any) -> StoreSchema:
        """Return this schema with root attribute ``key`` (one the schema does not parse,
        such as ``node_order``) set to ``value`` (JSON)."""
        if key in _KNOWN:
            raise ValueError(f"Expected a root attribute outside the schema's own keys "
                             f"{_KNOWN}. Got {key!r} instead.")
        return dataclasses.replace(self, extra=_frozen({**self.extra, key: value}))

    def committed(self, generation: str, topology_checks: dict) -> StoreSchema:
        """Return this schema complete, as generation ``generation`` with its CSC check records."""
        extra = _frozen({**self.extra, "topology_checks": topology_checks})
        return dataclasses.replace(self, complete=True, generation=generation, extra=extra)

    # -- lookups ----------------------------------------------------------------------
    def edge_type(self, et: EdgeType) -> EdgeTypeSchema:
        """Return the schema of edge type ``et`` (``KeyError`` when absent)."""
        for e in self.edge_types:
            if e.etype == et:
                return e
        raise KeyError(et)

    def arrays_expected(self) -> list[ArraySpec]:
        """Every array the schema names, with the shape and dtype it must have."""
        out = []
        for nt, spec in self.node_types.items():
            n = spec.num_nodes
            out.append(ArraySpec(fmt.orig_id_key(nt), (n,), np.dtype(np.int64)))
            for name, f in spec.features.items():
                out.append(ArraySpec(fmt.feature_key(nt, name), (n,) + f.shape, f.dtype,
                                     f.compressed))
            for name, v in spec.values.items():
                out.append(ArraySpec(fmt.values_key(nt, name), (n,), v.dtype))
        for e in self.edge_types:
            nd = self.node_types[e.dst].num_nodes
            out.append(ArraySpec(fmt.edge_key(e.etype, "indptr"), (nd + 1,), np.dtype(np.int64)))
            out.append(ArraySpec(fmt.edge_key(e.etype, "indices"), (e.num_edges,),
                                 e.indices_dtype))
            for name, f in e.features.items():
                out.append(ArraySpec(fmt.edge_feature_key(e.etype, name),
                                     (e.num_edges,) + f.shape, f.dtype, f.compressed))
            for name, v in e.values.items():
                out.append(ArraySpec(fmt.edge_values_key(e.etype, name), (e.num_edges,),
                                     v.dtype))
        for name, per in self.splits.items():
            for nt, count in per.items():
                out.append(ArraySpec(fmt.split_key(name, nt), (count,), np.dtype(np.int64)))
        for name, per in self.edge_splits.items():
            for et, sp in per.items():
                for col, c in sp.columns.items():
                    out.append(ArraySpec(fmt.edge_split_key(name, et, col),
                                         (sp.count,) + c.shape, c.dtype))
        return out

    def array_spec(self, key: str) -> ArraySpec:
        """Return the spec of the array at ``key`` (``KeyError`` when absent)."""
        for a in self.arrays_expected():
            if a.key == key:
                return a
        raise KeyError(key)


def parse_root(raw: bytes, url: str, file: str) -> tuple[dict, StoreSchema]:
    """Parse the bytes of a store's root ``zarr.json``.

    Returns
    -------
    attrs : dict
        The root attributes, as JSON.
    meta : StoreSchema
        The same, checked and typed (:meth:`StoreSchema.from_attrs`).

    Raises
    ------
    NotAStoreError
        Not JSON, not a zarr group, or not of this format (or version).
    CorruptStoreError, UnsafePathError
        As :meth:`StoreSchema.from_attrs`.
    """
    try:
        root = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise NotAStoreError(f"Expected JSON in {file}: {e}") from e
    if not isinstance(root, dict):
        raise NotAStoreError(f"Expected a JSON object in {file}. Got {type(root).__name__}.")
    attrs = root.get("attributes", {})
    if root.get("node_type") != "group" or not isinstance(attrs, dict) \
            or attrs.get("format") != fmt.FORMAT_NAME:
        got = attrs.get("format") if isinstance(attrs, dict) else attrs
        raise NotAStoreError(f"Expected a zarr group with format {fmt.FORMAT_NAME!r} at "
                             f"{url}. Got format {got!r} instead.")
    return attrs, StoreSchema.from_attrs(attrs, url, file=file)


_V1 = ("the v1 layout: one shard of uncompressed inner chunks in row order, codecs "
       "sharding_indexed[bytes little-endian] with index bytes+crc32c at the end")


def check_array_meta(raw: bytes | str | dict, spec: ArraySpec, file: str):
    """Check an array's own ``zarr.json`` against what the root schema says of it.

    Returns the :class:`~featurestore.format.shard.ShardLayout` when the array has the v1
    uncompressed single-shard layout (the local fast path), else ``None`` (a compressed or
    empty array, read through zarr). Raises ``CorruptStoreError`` naming ``file`` when the
    file is not JSON, not a zarr v3 array, or its shape, dtype or layout disagree.
    """
    meta = raw
    if isinstance(raw, (bytes, str)):
        try:
            meta = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptStoreError(f"{file}: not valid JSON ({e}); array {spec.key} is "
                                    "unreadable.") from e
    if not isinstance(meta, dict):
        raise CorruptStoreError(f"{file}: expected a JSON object, got {json_repr(meta)}.")
    if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
        raise CorruptStoreError(f"{file}: expected a zarr v3 array (zarr_format 3, node_type "
                                f"'array'), got {meta.get('zarr_format')!r}/"
                                f"{meta.get('node_type')!r}.")
    shape = meta.get("shape")
    if not isinstance(shape, list) or tuple(shape) != spec.shape:
        raise CorruptStoreError(f"{file}: shape {json_repr(shape)}, but the root schema says "
                                f"{list(spec.shape)} for {spec.key}.")
    dt = meta.get("data_type")
    try:
        ok = isinstance(dt, str) and np.dtype(dt).newbyteorder("=") == spec.dtype
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise CorruptStoreError(f"{file}: data_type {json_repr(dt)}, but the root schema says "
                                f"{spec.dtype.name} for {spec.key}.")
    cke = meta.get("chunk_key_encoding", {})
    if not isinstance(cke, dict) or cke.get("name") != "default" or \
            (cke.get("configuration") or {}).get("separator", "/") != "/":
        raise CorruptStoreError(f"{file}: chunk_key_encoding {json_repr(cke)}; format v1 uses "
                                "the default encoding with '/'.")
    grid = meta.get("chunk_grid")
    try:
        chunks = grid["configuration"]["chunk_shape"]
        good = (grid["name"] == "regular" and len(chunks) == len(shape)
                and all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in chunks))
    except (KeyError, TypeError):
        good = False
    if not good:
        raise CorruptStoreError(f"{file}: chunk_grid {json_repr(grid)} is not a regular grid "
                                f"of positive chunk sizes for shape {shape}.")
    try:
        layout = ShardLayout.from_metadata(meta)
        if layout is not None:
            inner = meta["codecs"][0]["configuration"]["codecs"][0].get("configuration") or {}
            if layout.dtype.itemsize > 1 and inner.get("endian", "little") != "little":
                raise CorruptStoreError(f"{file}: inner chunks are {inner.get('endian')}-endian; "
                                        f"{_V1}.")
            if layout.chunk_rows <= 0:
                layout = None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError,
            ZeroDivisionError) as e:
        raise CorruptStoreError(f"{file}: codecs not understood ({type(e).__name__}: {e}); "
                                f"expected {_V1}.") from e
    if layout is None and not spec.compressed and spec.shape[0] > 0:
        raise CorruptStoreError(f"{file}: array {spec.key} is not in {_V1} (the schema says it "
                                "is uncompressed).")
    return layout
