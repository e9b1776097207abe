"""Consistency checks of a store: ``featurestore verify [--data]``.

What is checked (``docs/format.md``, "What verify checks"):

* the root ``zarr.json``: JSON, format and version, every key of the schema with its type,
  names that stay inside the store, and the store is complete;
* every array the schema names: its ``zarr.json`` is JSON, a zarr v3 array with the shape and
  dtype the schema gives, in the v1 layout (uncompressed) or readable by zarr (compressed);
  its files resolve inside the store directory;
* uncompressed arrays: the shard file's size and its index (``full``: always), and with
  ``data=True`` the CRC-32 of every block of rows against the checksums the writer recorded;
* compressed arrays: every chunk file is there, every shard index is intact (crc32c) and lists
  every inner chunk, and every chunk decodes (zarr checks the codecs' checksums);
* topology: ``indptr[0] == 0``, never decreasing, ``indptr[-1] == num_edges ==
  len(indices)``, source ids in ``[0, num_nodes(src))``; split ids in range.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import google_crc32c
import numpy as np

from featurestore.errors import CorruptStoreError, FeatureStoreError, UnsafePathError
from featurestore.format.integrity import (
    CHECKSUM_ALGORITHM,
    CHECKSUM_ATTR,
    _first_decrease,
    file_checksums,
    native,
)
from featurestore.format import names as fmt
from featurestore.format.schema import EDGE_ID_COLUMNS, ArraySpec, check_array_meta
from featurestore.format.shard import MISSING, ShardLayout, check_shard_file
from featurestore.rows.validate import first_out_of_range
from featurestore.store import Store, open_store

__all__ = ["verify_store", "verify_report", "VerifyReport"]


@dataclass
class VerifyReport:
    """What :func:`verify_report` found: ``problems`` (empty when sound) and ``notes``
    (limits of the check, e.g. arrays written without checksums)."""

    url: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    arrays: int = 0
    bytes_checked: int = 0

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems


def verify_store(url, *, storage_options=None, full: bool = True, data: bool = False,
                 threads: int = 4) -> list[str]:
    """Return the problems found in the store at ``url`` (an empty list when it is sound).

    ``data=True`` also reads every byte of the uncompressed arrays and compares it with the
    checksums recorded at write time (``featurestore verify --data``).
    """
    return verify_report(url, storage_options=storage_options, full=full, data=data,
                         threads=threads).problems


def verify_report(url, *, storage_options=None, full: bool = True, data: bool = False,
                  threads: int = 4) -> VerifyReport:
    """:func:`verify_store` with notes and counts."""
    rep = VerifyReport(str(url))
    try:
        store = open_store(url, storage_options=storage_options, allow_incomplete=True)
    except (CorruptStoreError, UnsafePathError) as e:
        rep.problems.append(str(e))
        return rep
    rep.url = store.url
    try:
        if not store.complete:
            rep.problems.append(f"{store.url}: incomplete (the writer never committed)")
        broken: set[str] = set()
        for spec in store.meta.arrays_expected():
            found = _check_array(store, spec, rep, full=full, data=data, threads=threads)
            rep.arrays += 1
            rep.problems += found
            if found:
                broken.add(spec.key)
        for e in store.meta.edge_types:
            et = e.etype
            kp, ki = f"edges/{et.key()}/indptr", f"edges/{et.key()}/indices"
            if {kp, ki} & broken:
                continue
            rep.problems += _check_csc(store, et, e.num_edges, kp, ki)
        for name, per in store.meta.splits.items():
            for nt in per:
                key = f"splits/{name}/{nt}"
                if key in broken:
                    continue
                try:
                    ids = native(np.asarray(store._vector(key)))
                except FeatureStoreError as err:
                    rep.problems.append(f"{key}: {err}")
                    continue
                n = store.num_nodes(nt)
                bad = first_out_of_range(ids, n)
                if bad >= 0:
                    rep.problems.append(f"split {name}/{nt}: id {int(ids[bad])} at position "
                                        f"{bad} outside [0, {n})")
        rep.problems += _check_edge_splits(store, broken)
    finally:
        store.close()
    return rep


def _check_edge_splits(store: Store, broken: set[str]) -> list[str]:
    """Node ids of every edge split's ``src``, ``dst`` and ``neg_dst`` columns in range."""
    out = []
    for name, per in store.meta.edge_splits.items():
        for et, sp in per.items():
            for col in sp.columns:
                key = fmt.edge_split_key(name, et, col)
                if col not in EDGE_ID_COLUMNS or key in broken:
                    continue
                try:
                    ids = native(np.asarray(store._vector(key))).reshape(-1)
                except FeatureStoreError as err:
                    out.append(f"{key}: {err}")
                    continue
                end = getattr(et, EDGE_ID_COLUMNS[col])
                n = store.num_nodes(end)
                bad = first_out_of_range(ids, n)
                if bad >= 0:
                    out.append(f"edge split {name}/{et.key()}/{col}: id {int(ids[bad])} at "
                               f"position {bad} outside [0, {n}) ({end!r} nodes)")
    return out


def _check_array(store: Store, spec: ArraySpec, rep: VerifyReport, *, full: bool, data: bool,
                 threads: int) -> list[str]:
    key = spec.key
    loc = store.loc
    file = loc.path(f"{key}/zarr.json")
    try:
        store._opener.confined(key, file)
    except UnsafePathError as e:
        return [f"{key}: {e}"]
    try:
        with loc.fs.open(file, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return [f"{key}: array missing (no zarr.json at {file})"]
    try:
        layout = check_array_meta(raw, spec, file)
    except CorruptStoreError as e:
        return [f"{key}: {e}"]
    meta = json.loads(raw)
    if layout is not None:
        try:
            store._opener.confined(key, loc.path(f"{key}/{layout.chunk_key()}"))
        except UnsafePathError as e:
            return [f"{key}: {e}"]
        found = check_shard_file(loc, key, layout, full=full)
        if found:
            return [f"{key}: {p}" for p in found]
        return _check_checksums(store, key, meta, layout, rep, data=data, threads=threads)
    if spec.shape[0] == 0:
        return []
    return _check_zarr_array(store, key, meta, rep, full=full)


def _check_checksums(store: Store, key: str, meta: dict, layout: ShardLayout,
                     rep: VerifyReport, *, data: bool, threads: int) -> list[str]:
    attrs = meta.get("attributes") or {}
    rec = attrs.get(CHECKSUM_ATTR) if isinstance(attrs, dict) else None
    n, rb = layout.shape[0], layout.row_bytes
    if n == 0:
        return []
    if rec is None:
        rep.notes.append(f"{key}: no checksums recorded (written before format checksums); "
                         "its bytes cannot be checked")
        return []
    try:
        block_rows = rec["block_rows"]
        values = rec["values"]
        good = (rec["algorithm"] == CHECKSUM_ALGORITHM and isinstance(block_rows, int)
                and block_rows > 0 and isinstance(values, list)
                and len(values) == -(-n // block_rows)
                and all(isinstance(v, int) and 0 <= v < 2**32 for v in values))
    except (KeyError, TypeError):
        good = False
    if not good:
        return [f"{key}: checksum record in {store.loc.path(f'{key}/zarr.json')} is malformed "
                f"(expected algorithm {CHECKSUM_ALGORITHM!r}, block_rows, one value per block)"]
    if not data:
        return []
    path = store.loc.path(f"{key}/{layout.chunk_key()}")
    try:
        got = file_checksums(path, n * rb, block_rows * rb, threads=threads,
                             opener=None if store.loc.is_local else
                             (lambda p: store.loc.fs.open(p, "rb")))
    except (OSError, CorruptStoreError) as e:
        return [f"{key}: could not read {path}: {e}"]
    rep.bytes_checked += n * rb
    bad = [k for k, (a, b) in enumerate(zip(values, got)) if a != b]
    out = []
    for k in bad[:3]:
        lo, hi = k * block_rows, min(n, (k + 1) * block_rows)
        out.append(f"{key}: rows {lo}..{hi - 1} of {path}: checksum {got[k]:08x} read, "
                   f"{values[k]:08x} recorded at write time (the bytes changed)")
    if len(bad) > 3:
        out.append(f"{key}: {len(bad) - 3} more block(s) with a checksum mismatch")
    return out


def _check_zarr_array(store: Store, key: str, meta: dict, rep: VerifyReport, *,
                      full: bool) -> list[str]:
    """A compressed (or otherwise zarr-read) array: files present, shard indexes whole,
    every chunk decodes."""
    try:
        store._opener.check_chunks_present(key, meta)
    except CorruptStoreError as e:
        return [f"{key}: {e}"]
    out = _check_shard_indexes(store, key, meta)
    if out or not full:
        return out
    try:
        z = store.row_reader(key).z
        step = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
        for lo in range(0, z.shape[0], step):
            np.asarray(z[lo:lo + step])
            rep.bytes_checked += min(step, z.shape[0] - lo) * int(
                np.prod(z.shape[1:], dtype=np.int64)) * z.dtype.itemsize
    except FeatureStoreError as e:
        return [f"{key}: {e}"]
    except Exception as e:  # zarr's codec and checksum errors
        return [f"{key}: a chunk does not decode ({type(e).__name__}: {e})"]
    return []


def _check_shard_indexes(store: Store, key: str, meta: dict) -> list[str]:
    codecs = meta.get("codecs") or []
    if len(codecs) != 1 or codecs[0].get("name") != "sharding_indexed":
        return []
    conf = codecs[0].get("configuration") or {}
    if conf.get("index_location", "end") != "end" or \
            [c.get("name") for c in conf.get("index_codecs", [])] != ["bytes", "crc32c"]:
        return []
    shape = meta["shape"]
    outer = meta["chunk_grid"]["configuration"]["chunk_shape"]
    inner = conf["chunk_shape"]
    per = [o // i for o, i in zip(outer, inner)]
    n_inner = int(np.prod(per))
    nbytes = 16 * n_inner + 4
    counts = [-(-s // o) for s, o in zip(shape, outer)]
    for shard in np.ndindex(*counts):
        path = store.loc.path(f"{key}/c/" + "/".join(map(str, shard)))
        try:
            size = store.loc.fs.size(path)
            with store.loc.fs.open(path, "rb") as f:
                f.seek(size - nbytes)
                blob = f.read(nbytes)
        except (OSError, ValueError) as e:
            return [f"{key}: cannot read the shard index of {path}: {e}"]
        if len(blob) != nbytes or google_crc32c.value(blob[:-4]) != \
                int.from_bytes(blob[-4:], "little"):
            return [f"{key}: the shard index of {path} fails its crc32c (corrupt)"]
        idx = np.frombuffer(blob[:-4], "<u8").reshape(per + [2])
        for pos in np.ndindex(*per):
            start = [s * o + p * i for s, o, p, i in zip(shard, outer, pos, inner)]
            if all(a < s for a, s in zip(start, shape)) and idx[pos][0] == MISSING:
                return [f"{key}: inner chunk {pos} of {path} is missing from the shard index "
                        "(zarr would read it as zeros)"]
        ends = idx[..., 0].astype(np.float64) + idx[..., 1]
        present = idx[..., 0] != MISSING
        if np.any(ends[present] > size - nbytes):
            return [f"{key}: the shard index of {path} points past the end of the file"]
    return []


def _check_csc(store: Store, et, num_edges: int, kp: str, ki: str) -> list[str]:
    where = f"edges {et.src}__{et.rel}__{et.dst}"
    try:
        indptr, indices = native(store._vector(kp)), native(store._vector(ki))
    except (OSError, FeatureStoreError) as e:
        return [f"{where}: {e}"]
    out = []
    if indptr.size == 0 or indptr[0] != 0:
        out.append(f"{where}: indptr[0] is {indptr[0] if indptr.size else 'missing'}, not 0")
    i = int(_first_decrease(indptr)) if indptr.size else -1
    if i >= 0:
        out.append(f"{where}: indptr decreases at {i} ({int(indptr[i - 1])} -> {int(indptr[i])})")
    if indptr.size and int(indptr[-1]) != num_edges:
        out.append(f"{where}: indptr[-1] = {int(indptr[-1])}, but {num_edges} edges")
    if indices.shape[0] != num_edges:
        out.append(f"{where}: {indices.shape[0]} indices, but {num_edges} edges")
    n_src = store.num_nodes(et.src)
    j = first_out_of_range(indices, n_src)
    if j >= 0:
        out.append(f"{where}: source id {int(indices[j])} at edge {j} outside [0, {n_src})")
    return out
