"""Consistency checks of a store: ``featurestore verify``."""

from __future__ import annotations

import numpy as np

from . import format as fmt
from ._kernels import id_range
from ._shard import ShardLayout, check_shard_file
from .reader import Store, open_store

BLOCK = 1 << 23  # entries per block when streaming big arrays


def _expected_arrays(store: Store) -> list[tuple[str, tuple]]:
    """(key, expected shape or None) of every array the schema names."""
    out = []
    for nt, spec in store.schema["node_types"].items():
        n = int(spec["num_nodes"])
        out.append((fmt.orig_id_key(nt), (n,)))
        for name, f in spec.get("features", {}).items():
            out.append((fmt.feature_key(nt, name), (n,) + tuple(f["shape"])))
        for name in spec.get("values", {}):
            out.append((fmt.values_key(nt, name), (n,)))
    for e in store.schema["edge_types"]:
        et = fmt.EdgeType(e["src"], e["rel"], e["dst"])
        nd = int(store.schema["node_types"].get(et.dst, {}).get("num_nodes", -1))
        out.append((fmt.edge_key(et, "indptr"), (nd + 1,)))
        out.append((fmt.edge_key(et, "indices"), (int(e["num_edges"]),)))
    for name, per in store.schema.get("splits", {}).items():
        for nt, count in per.items():
            out.append((fmt.split_key(name, nt), (int(count),)))
    return out


def verify_store(url, *, storage_options=None, full: bool = True) -> list[str]:
    """Return the problems found in the store at ``url`` (an empty list when it is sound).

    Checks: the store is complete; every array the schema names exists with the right shape,
    and its shard file has the right size and index; CSC ``indptr`` starts at 0, never
    decreases and ends at the edge count; source ids and split ids are in range.
    """
    problems: list[str] = []
    store = open_store(url, storage_options=storage_options, allow_incomplete=True)
    try:
        if not store.complete:
            problems.append(f"{store.url}: incomplete (the writer never committed)")
        broken: set[str] = set()
        for key, shape in _expected_arrays(store):
            try:
                meta = store.loc.read_json(f"{key}/zarr.json")
            except FileNotFoundError:
                problems.append(f"{key}: array missing (no zarr.json)")
                broken.add(key)
                continue
            if tuple(meta["shape"]) != shape:
                problems.append(f"{key}: shape {tuple(meta['shape'])}, schema says {shape}")
                broken.add(key)
                continue
            layout = ShardLayout.from_metadata(meta)
            if layout is not None:
                found = check_shard_file(store.loc, key, layout, full=full)
                problems += [f"{key}: {p}" for p in found]
                if found:
                    broken.add(key)
        for e in store.schema["edge_types"]:
            et = fmt.EdgeType(e["src"], e["rel"], e["dst"])
            if {fmt.edge_key(et, "indptr"), fmt.edge_key(et, "indices")} & broken:
                continue
            problems += _check_csc(store, et, int(e["num_edges"]))
        for name, per in store.schema.get("splits", {}).items():
            for nt in per:
                if fmt.split_key(name, nt) in broken or nt not in store.schema["node_types"]:
                    continue
                ids = store.split(name, nt)
                n = store.num_nodes(nt)
                if ids.size:
                    lo, hi = id_range(np.asarray(ids))
                    if lo < 0 or hi >= n:
                        problems.append(f"split {name}/{nt}: id {int(lo if lo < 0 else hi)} "
                                        f"outside [0, {n})")
    finally:
        store.close()
    return problems


def _check_csc(store: Store, et: fmt.EdgeType, num_edges: int) -> list[str]:
    where = f"edges {et.src}__{et.rel}__{et.dst}"
    try:
        indptr, indices = store.csc(et)
    except OSError as e:
        return [f"{where}: {e}"]
    out = []
    if indptr.size == 0 or indptr[0] != 0:
        out.append(f"{where}: indptr[0] is {indptr[0] if indptr.size else 'missing'}, not 0")
    for lo in range(0, max(indptr.size - 1, 0), BLOCK):
        seg = np.asarray(indptr[lo:lo + BLOCK + 1])
        bad = np.nonzero(seg[1:] < seg[:-1])[0]
        if bad.size:
            i = lo + int(bad[0])
            out.append(f"{where}: indptr decreases at {i + 1} ({seg[bad[0]]} -> {seg[bad[0] + 1]})")
            break
    if indptr.size and int(indptr[-1]) != num_edges:
        out.append(f"{where}: indptr[-1] = {int(indptr[-1])}, but {num_edges} edges")
    if indices.shape[0] != num_edges:
        out.append(f"{where}: {indices.shape[0]} indices, but {num_edges} edges")
    n_src = store.num_nodes(et.src)
    for lo in range(0, indices.shape[0], BLOCK):
        seg = np.asarray(indices[lo:lo + BLOCK])
        a, b = id_range(seg)
        if a < 0 or b >= n_src:
            bad = int(a if a < 0 else b)
            pos = lo + int(np.nonzero(seg == bad)[0][0])
            out.append(f"{where}: source id {bad} at edge {pos} outside [0, {n_src})")
            break
    return out
