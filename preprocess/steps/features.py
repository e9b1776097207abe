"""Feature chunking: stream a feature matrix into the store in blocks, cast and permuted.

Sources are read block by block, never whole::

    src = FeatureSource.from_npy("feat.npy")                 # memory-mapped [N, D] (or [N])
    src = FeatureSource.from_parquet("feat.parquet", "emb")  # list / fixed_size_list column
    src = FeatureSource.from_parquet("nodes.parquet", ["f0", "f1", "f2"])  # numeric columns
    write_features(writer, "paper", "feat", src, dtype=np.float16, perm=perm)

``perm`` (store row ``i`` takes source row ``perm[i]``: the renumbering's ``orig`` order) is
applied without loading the matrix: when the source is small enough to be gathered from
directly (an array, or a ``.npy`` no larger than the budget), rows are gathered per output
block; otherwise rows are first distributed into scratch bucket files by their output range
(one sequential pass), then each bucket is placed in RAM and written out in order (an
external bucket permutation: the input is read once and the scratch written and read once,
whatever the order).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

import numpy as np

from featurestore.fileio import disk_full_as_error

from preprocess.errors import BadInputError
from preprocess.progress import bar
from preprocess.sources.features import FeatureSource
from preprocess.steps.cast import cast_block
from preprocess.steps.diskmap import map_file
from preprocess.steps.memory import PeakMemory

__all__ = ["FeatureSource", "write_features", "check_feature_rows", "permuted_blocks",
           "write_values"]

log = logging.getLogger(__name__)


# -- permutation -------------------------------------------------------------------------
def permuted_blocks(source: FeatureSource, perm: np.ndarray, rows: int, *, budget_bytes: int,
                    tmpdir=None, cast=None, progress: bool = True,
                    stats: dict | None = None) -> Iterator[np.ndarray]:
    """Yield ``source`` rows ``perm[0], perm[1], ...`` in blocks of at most ``rows``.

    ``perm`` may be a memory map. ``cast(block)`` is applied to source blocks before they are
    placed (so scratch files hold the cast, usually smaller, rows).
    """
    stats = stats if stats is not None else {}
    cast = cast or (lambda b: b)
    n = source.num_rows
    if perm.shape[0] != n:
        raise BadInputError(f"Expected a permutation of {n} rows for {source.name}. "
                            f"Got {perm.shape[0]} entries instead.")
    arr = source.array()
    if arr is not None and (not isinstance(arr, np.memmap) or source.nbytes <= budget_bytes):
        for lo in range(0, n, rows):
            yield cast(np.take(arr, np.asarray(perm[lo:lo + rows], dtype=np.int64), axis=0))
        stats["bytes_read"] = stats.get("bytes_read", 0) + source.nbytes
        return
    yield from _bucket_permute(source, perm, rows, budget_bytes, tmpdir, cast, progress, stats)


def _bucket_permute(source, perm, rows, budget_bytes, tmpdir, cast, progress, stats):
    """External permutation through scratch bucket files (see the module docstring)."""
    n = source.num_rows
    probe = cast(next(source.iter_blocks(1)))
    out_dtype, row_shape = probe.dtype, probe.shape[1:]
    out_row = max(1, int(np.prod(row_shape, dtype=np.int64)) * out_dtype.itemsize)
    # a bucket in RAM twice (read, placed) plus its positions, while the consumer may still
    # hold the previous bucket's last block: about three buckets at a time
    bucket_rows = max(1, int(budget_bytes // 4 // (out_row + 8)))
    nb = -(-n // bucket_rows)
    if tmpdir is not None:
        os.makedirs(tmpdir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="perm-", dir=tmpdir)
    try:
        inv_path = os.path.join(scratch, "inv.bin")
        inv = map_file(inv_path, dtype=np.int64, mode="w+", shape=(max(n, 1),))
        step = 1 << 22
        for lo in range(0, n, step):  # inv[perm[i]] = i, a scatter into a file-backed map
            p = np.asarray(perm[lo:lo + step], dtype=np.int64)
            inv[p] = np.arange(lo, lo + len(p), dtype=np.int64)
        inv.flush()
        with disk_full_as_error(scratch), \
                contextlib.ExitStack() as stack:  # the bucket files close on errors too
            files = [stack.enter_context(open(os.path.join(scratch, f"b{b}.rows"), "wb"))
                     for b in range(nb)]
            pos_files = [stack.enter_context(open(os.path.join(scratch, f"b{b}.pos"), "wb"))
                         for b in range(nb)]
            src_rows = max(1, int(budget_bytes // 4 // max(source.row_bytes + out_row + 16, 1)))
            with bar(n, f"{source.name}: distribute", progress, unit="row") as pb:
                at = 0
                for block in source.iter_blocks(src_rows):
                    k = block.shape[0]
                    dest = np.asarray(inv[at:at + k])
                    b = dest // bucket_rows
                    order = np.argsort(b, kind="stable")
                    cb = cast(block)[order]
                    bs = b[order]
                    dest = dest[order]
                    cuts = np.flatnonzero(np.diff(bs)) + 1
                    for seg in np.split(np.arange(k), cuts):
                        if seg.size:
                            j = int(bs[seg[0]])
                            files[j].write(memoryview(np.ascontiguousarray(cb[seg])).cast("B"))
                            pos_files[j].write(memoryview(dest[seg] - j * bucket_rows).cast("B"))
                    stats["bytes_read"] = stats.get("bytes_read", 0) + block.nbytes
                    at += k
                    pb.update(k)
        del inv
        for b in range(nb):
            lo = b * bucket_rows
            m = min(bucket_rows, n - lo)
            data = np.fromfile(os.path.join(scratch, f"b{b}.rows"), dtype=out_dtype)
            pos = np.fromfile(os.path.join(scratch, f"b{b}.pos"), dtype=np.int64)
            data = data.reshape((-1,) + row_shape)
            if data.shape[0] != m or pos.shape[0] != m:
                raise BadInputError(f"Expected a permutation of {n} rows for {source.name}: "
                                    f"bucket {b} got {data.shape[0]} rows, not {m} (repeated "
                                    "or missing entries in perm).")
            placed = np.empty_like(data)
            placed[pos] = data
            del data, pos
            os.remove(os.path.join(scratch, f"b{b}.rows"))
            for i in range(0, m, rows):
                yield placed[i:i + rows]
            del placed
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _float_labels(b: np.ndarray, name: str, at: int) -> np.ndarray:
    """Float labels to int64, NaN to -1 (no label); non-integral values are an error."""
    nan = np.isnan(b)
    frac = np.flatnonzero(~nan & (b != np.floor(b)))
    if frac.size:
        raise BadInputError(f"Expected integer labels (NaN for none) in {name}. "
                            f"Got {b[frac[0]]} at row {at + int(frac[0])}.")
    out = np.where(nan, -1, b).astype(np.int64)
    return out


# -- writing -------------------------------------------------------------------------------
def check_feature_rows(writer, ntype: str, name: str, source: FeatureSource) -> int:
    """The node count of ``ntype``, which ``source`` must match as a 2-D matrix; else
    :class:`BadInputError` (what :func:`write_features` and its Dask variant check first)."""
    n = writer.schema["node_types"].get(ntype, {}).get("num_nodes")
    if n is None:
        raise BadInputError(f"Expected node type {ntype!r} added to {writer.url} before its "
                            f"features {name!r}.")
    if source.num_rows != n:
        raise BadInputError(f"Expected {n} feature rows (the nodes of {ntype!r}) in "
                            f"{source.name}. Got {source.num_rows} instead.")
    if not source.row_shape:
        raise BadInputError(f"Expected a 2-D feature matrix in {source.name}. Got a 1-D array: "
                            "store it as values (labels, years) instead.")
    return n


def write_features(writer, ntype: str, name: str, source: FeatureSource, *, dtype=None,
                   perm: np.ndarray | None = None, budget_bytes: int = 1 << 30, tmpdir=None,
                   compressors=None, progress: bool = True) -> dict:
    """Stream ``source`` into feature ``name`` of ``ntype`` (cast, and permuted by ``perm``).

    Returns ``seconds``, ``bytes_read``, ``bytes_written``, ``rows_per_s``, ``gb_per_s``,
    ``peak_anon_bytes`` and ``overflow`` (values a float downcast made infinite; logged).
    Its Dask variant (the row blocks as Dask tasks) is
    :func:`preprocess.dask.features.write_features_dask`; a job picks one through
    :func:`preprocess.jobs.variants.write_features`.
    """
    t0 = time.perf_counter()
    n = check_feature_rows(writer, ntype, name, source)
    dtype = np.dtype(dtype) if dtype is not None else source.dtype
    state: dict = {}
    stats: dict = {"bytes_read": 0}
    out_row = int(np.prod(source.row_shape, dtype=np.int64)) * dtype.itemsize
    rows = max(1, int(budget_bytes // 4 // max(source.row_bytes + out_row, 1)))
    rows = min(rows, max(1, (256 << 20) // max(out_row, 1)))

    def cast(b):
        return cast_block(np.asarray(b), dtype, source.name, state)

    with PeakMemory() as mem, bar(n, f"{ntype}/{name}", progress, unit="row") as pb:
        if perm is None:
            def blocks():
                for b in source.iter_blocks(rows):
                    stats["bytes_read"] += b.nbytes
                    pb.update(b.shape[0])
                    yield cast(b)
        else:
            def blocks():
                for b in permuted_blocks(source, perm, rows, budget_bytes=budget_bytes,
                                         tmpdir=tmpdir, cast=cast, progress=progress,
                                         stats=stats):
                    pb.update(b.shape[0])
                    yield b
        writer.add_features(ntype, name, blocks(), dtype=dtype, row_shape=source.row_shape,
                            compressors=compressors)
    dt = time.perf_counter() - t0
    if state.get("overflow"):
        log.warning("%s: %d values overflowed to inf when cast to %s", source.name,
                    state["overflow"], dtype)
    return {"seconds": round(dt, 3), "rows": n, "bytes_read": stats["bytes_read"],
            "bytes_written": n * out_row, "rows_per_s": n / dt if dt else 0.0,
            "gb_per_s": stats["bytes_read"] / dt / 1e9 if dt else 0.0,
            "peak_anon_bytes": mem.peak, "overflow": state.get("overflow", 0)}


def write_values(writer, ntype: str, name: str, source: FeatureSource, *,
                 perm: np.ndarray | None = None, dtype=None, budget_bytes: int = 1 << 30,
                 tmpdir=None, progress: bool = False) -> dict:
    """A per-node 1-D array (``label``, ``year``, ...), permuted by ``perm``, into the store.

    The permuted array goes through a scratch memory map (the writer takes a whole array).
    """
    n = writer.schema["node_types"].get(ntype, {}).get("num_nodes")
    if source.num_rows != n:
        raise BadInputError(f"Expected {n} values (the nodes of {ntype!r}) in {source.name}. "
                            f"Got {source.num_rows} instead.")
    if source.row_shape:
        raise BadInputError(f"Expected a 1-D array of values in {source.name}. "
                            f"Got rows of shape {source.row_shape} instead.")
    label = name == "label"
    dtype = np.dtype(dtype) if dtype is not None else (
        np.dtype(np.int64) if label and source.dtype.kind == "f" else source.dtype)
    arr = source.array()
    scratch = None
    if perm is None and arr is not None and arr.dtype == dtype:
        data = arr
    else:
        if tmpdir is not None:
            os.makedirs(tmpdir, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix="values-", dir=tmpdir)
        data = map_file(os.path.join(scratch, "v.bin"), dtype=dtype, mode="w+",
                         shape=(max(n, 1),))[:n]
        rows = max(1, budget_bytes // 4 // 16)
        blocks = (permuted_blocks(source, perm, rows, budget_bytes=budget_bytes, tmpdir=tmpdir,
                                  progress=progress) if perm is not None
                  else source.iter_blocks(rows))
        at = 0
        for b in blocks:
            if label and b.dtype.kind == "f":  # float labels (papers100M): NaN means none
                b = _float_labels(b, source.name, at)
            data[at:at + len(b)] = b
            at += len(b)
    try:
        if name == "label":
            writer.add_labels(ntype, data)
        else:
            writer.add_values(ntype, name, data)
    finally:
        del data
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return {"rows": n}
