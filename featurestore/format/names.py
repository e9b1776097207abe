"""Format v1 of the store: names, keys and layout rules (see ``docs/format.md``).

A store is a zarr v3 group. Every array is written as a single shard file (zarr's
``sharding_indexed`` codec) whose inner chunks lie contiguously in row order, followed by
the shard index. Uncompressed, such a file is the raw C-order array plus padding, so the
local read path memory-maps it or reads rows by byte offset, while any zarr reader (or
an fsspec URL) still sees an ordinary zarr array.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "INNER_CHUNK_BYTES", "EdgeType", "node_group",
           "orig_id_key", "feature_key", "values_key", "edge_key", "edge_feature_key",
           "edge_values_key", "edge_split_key", "split_key", "check_name",
           "inner_chunk_rows", "index_dtype", "STORE_ENTRIES"]

FORMAT_NAME = "graph-featurestore"
FORMAT_VERSION = 1

#: target bytes of one inner chunk: the unit a remote or compressed read fetches.
INNER_CHUNK_BYTES = 1 << 20


class EdgeType(NamedTuple):
    """An edge type ``(src, relation, dst)``, PyG's convention."""

    src: str
    rel: str
    dst: str

    def key(self) -> str:
        """Return the edge type's directory name, ``src__rel__dst``."""
        return f"{self.src}__{self.rel}__{self.dst}"


def node_group(ntype: str) -> str:
    """Return the group key of a node type."""
    return f"nodes/{ntype}"


def orig_id_key(ntype: str) -> str:
    """Return the key of a node type's original ids."""
    return f"nodes/{ntype}/orig_id"


def feature_key(ntype: str, name: str) -> str:
    """Return the key of a node type's feature array."""
    return f"nodes/{ntype}/features/{name}"


def values_key(ntype: str, name: str) -> str:
    """Per-node 1-D arrays (``label``, ``year``, ...)."""
    return f"nodes/{ntype}/values/{name}"


def edge_key(etype: EdgeType, part: str) -> str:
    """``part`` is ``indptr`` or ``indices`` (CSC: per destination, its sources)."""
    return f"edges/{etype.key()}/{part}"


def edge_feature_key(etype: EdgeType, name: str) -> str:
    """Return the key of an edge type's feature array (rows in CSC edge order)."""
    return f"edges/{etype.key()}/features/{name}"


def edge_values_key(etype: EdgeType, name: str) -> str:
    """Per-edge 1-D arrays (a relation id, a timestamp), in CSC edge order."""
    return f"edges/{etype.key()}/values/{name}"


def edge_split_key(name: str, etype: EdgeType, column: str) -> str:
    """Return the key of one column (``src``, ``dst``, ``neg_dst`` ...) of an edge split."""
    return f"edge_splits/{name}/{etype.key()}/{column}"


def split_key(name: str, ntype: str) -> str:
    """Return the key of a split's ids of one node type."""
    return f"splits/{name}/{ntype}"


#: characters a name may not hold: path separators, NUL and other control characters.
_BAD_CHARS = frozenset("/\\:") | frozenset(chr(c) for c in range(32)) | {"\x7f"}


def check_name(kind: str, name: str) -> str:
    r"""Check a node type, relation, feature, value or split name against the format's rules.

    A name becomes a directory of the store, so it must be a non-empty string of at most 255
    characters without ``/``, ``\\``, ``:``, control characters or ``__`` (the edge-type
    separator), and must not start with ``.`` (no ``..``, no hidden files). Raises
    :class:`~featurestore.errors.UnsafePathError` for a name that could reach outside the
    store and :class:`~featurestore.errors.SchemaError` for any other bad name.
    """
    from featurestore.errors import SchemaError, UnsafePathError

    if not isinstance(name, str) or not name:
        raise SchemaError(f"Expected a non-empty string as {kind} name. Got {name!r} instead.")
    if name.startswith(".") or any(c in _BAD_CHARS for c in name):
        raise UnsafePathError(
            f"Expected a {kind} name without '/', '\\', ':', control characters or a leading "
            f"'.' (it becomes a directory of the store). Got {name!r} instead.")
    if "__" in name or len(name) > 255:
        raise SchemaError(f"Expected a {kind} name without '__' and at most 255 characters. "
                          f"Got {name!r} instead.")
    return name


def inner_chunk_rows(row_bytes: int, target: int = INNER_CHUNK_BYTES) -> int:
    """Rows per inner chunk: a power of two with about ``target`` bytes per chunk."""
    rows = max(1, target // max(1, row_bytes))
    return 1 << (rows.bit_length() - 1)


def index_dtype(max_id: int) -> np.dtype:
    """int32 when every id fits, else int64 (docs/design.md, "The store")."""
    return np.dtype(np.int32) if max_id < 2**31 - 1 else np.dtype(np.int64)


#: the top-level entries of a store directory this package writes (root metadata, the array
#: groups, the jobs' manifest and scratch, the writer lock). Replacing a store removes these
#: and nothing else: other files a user put beside them stay.
STORE_ENTRIES = ("zarr.json", "nodes", "edges", "splits", "edge_splits", ".preprocess")
