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
        return f"{self.src}__{self.rel}__{self.dst}"


def node_group(ntype: str) -> str:
    return f"nodes/{ntype}"


def orig_id_key(ntype: str) -> str:
    return f"nodes/{ntype}/orig_id"


def feature_key(ntype: str, name: str) -> str:
    return f"nodes/{ntype}/features/{name}"


def values_key(ntype: str, name: str) -> str:
    """Per-node 1-D arrays (``label``, ``year``, ...)."""
    return f"nodes/{ntype}/values/{name}"


def edge_key(etype: EdgeType, part: str) -> str:
    """``part`` is ``indptr`` or ``indices`` (CSC: per destination, its sources)."""
    return f"edges/{etype.key()}/{part}"


def split_key(name: str, ntype: str) -> str:
    return f"splits/{name}/{ntype}"


def check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not name or "/" in name or "__" in name or name.startswith("."):
        raise ValueError(
            f"Expected a {kind} name without '/', '__' or a leading '.'. Got {name!r} instead."
        )
    return name


def inner_chunk_rows(row_bytes: int, target: int = INNER_CHUNK_BYTES) -> int:
    """Rows per inner chunk: a power of two with about ``target`` bytes per chunk."""
    rows = max(1, target // max(1, row_bytes))
    return 1 << (rows.bit_length() - 1)


def index_dtype(max_id: int) -> np.dtype:
    """int32 when every id fits, else int64 (DESIGN.md: topology)."""
    return np.dtype(np.int32) if max_id < 2**31 - 1 else np.dtype(np.int64)
