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

import abc
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence

import numpy as np

from preprocess.steps.kernels import f32_to_f16
from preprocess.sources.edges import load_npy
from preprocess.sources.remote import is_remote, open_remote_npy
from preprocess.steps.diskmap import map_file
from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.steps.memory import PeakMemory
from preprocess.progress import bar

__all__ = ["FeatureSource", "write_features", "permuted_blocks", "write_values"]

log = logging.getLogger(__name__)


class FeatureSource(abc.ABC):
    """A re-iterable stream of feature rows.

    Attributes
    ----------
    name
        The file, for messages.
    num_rows, row_shape, dtype
        Shape ``(num_rows, *row_shape)`` and dtype of the matrix.
    """

    name: str
    num_rows: int
    row_shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of all rows."""
        return self.num_rows * self.row_bytes

    @abc.abstractmethod
    def iter_blocks(self, rows: int) -> Iterator[np.ndarray]:
        """Row blocks in order, at most ``rows`` rows each."""

    def array(self) -> np.ndarray | None:
        """The matrix as an array or memory map when it has one (random access), else None."""
        return None

    def inputs(self) -> list[str]:
        """The input files (for the job's manifest)."""
        return []

    # -- constructors -------------------------------------------------------------------
    @staticmethod
    def from_array(arr, name: str = "<array>") -> FeatureSource:
        """A source over an in-memory array (or array-like)."""
        return ArrayFeatures(np.asarray(arr) if not isinstance(arr, np.ndarray) else arr, name)

    @staticmethod
    def from_npy(path) -> FeatureSource:
        """A source over a ``.npy`` file (memory-mapped; an fsspec URL: read by byte range)."""
        if is_remote(path):
            return RemoteFeatures(os.fspath(path))
        return ArrayFeatures(load_npy(path, "feature matrix"), os.fspath(path), [os.fspath(path)])

    @staticmethod
    def from_parquet(path, columns) -> FeatureSource:
        """A source over parquet column(s) (one list column, or scalar columns)."""
        return ParquetFeatures(path, columns)


class ArrayFeatures(FeatureSource):
    """An in-memory array or a memory-mapped ``.npy``."""

    def __init__(self, arr: np.ndarray, name: str, files: Sequence[str] = ()):
        if arr.ndim < 1:
            raise BadInputError(f"Expected a feature matrix with rows in {name}. "
                                f"Got a scalar instead.")
        if arr.dtype.kind not in "fiub":
            raise BadInputError(f"Expected numeric features in {name}. Got {arr.dtype} instead.")
        self.arr = arr
        self.name = name
        self.num_rows = int(arr.shape[0])
        self.row_shape = tuple(int(x) for x in arr.shape[1:])
        self.dtype = arr.dtype
        self._files = list(files)

    def iter_blocks(self, rows):
        for lo in range(0, self.num_rows, rows):
            yield self.arr[lo:lo + rows]

    def array(self):
        return self.arr

    def inputs(self):
        return list(self._files)


class RemoteFeatures(FeatureSource):
    """A ``.npy`` on an fsspec URL: header read here, rows fetched by byte range per block
    (:class:`~preprocess.sources.remote.RemoteArray`, which the Dask feature tasks reopen)."""

    def __init__(self, url: str):
        self.remote = open_remote_npy(url, "feature matrix")
        dtype = np.dtype(self.remote.dtype)
        if not self.remote.shape:
            raise BadInputError(f"Expected a feature matrix with rows in {url}. "
                                "Got a scalar instead.")
        if dtype.kind not in "fiub":
            raise BadInputError(f"Expected numeric features in {url}. Got {dtype} instead.")
        self.name = url
        self.num_rows = int(self.remote.shape[0])
        self.row_shape = tuple(int(x) for x in self.remote.shape[1:])
        self.dtype = dtype

    def iter_blocks(self, rows):
        for lo in range(0, self.num_rows, rows):
            yield self.remote[lo:lo + rows]

    def inputs(self):
        return [self.name]


class ParquetFeatures(FeatureSource):
    """A list/fixed-size-list column, or several numeric columns stacked, of a parquet file."""

    def __init__(self, path, columns):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise InputNotFoundError(f"Expected a feature file at {self.path}. Nothing is there.")
        self.name = self.path
        self.columns = [columns] if isinstance(columns, str) else list(columns)
        try:
            f = pq.ParquetFile(self.path)
        except Exception as e:
            raise BadInputError(f"Expected a readable parquet file at {self.path}: {e}") from e
        schema = f.schema_arrow
        for c in self.columns:
            if c not in schema.names:
                raise BadInputError(f"Expected a column {c!r} in {self.path}. "
                                    f"Its columns are {schema.names}.")
        self.num_rows = int(f.metadata.num_rows)
        types = [schema.field(c).type for c in self.columns]
        if len(self.columns) == 1 and (pa.types.is_list(types[0])
                                       or pa.types.is_large_list(types[0])
                                       or pa.types.is_fixed_size_list(types[0])):
            self.listed = True
            value_type = types[0].value_type
            if pa.types.is_fixed_size_list(types[0]):
                dim = types[0].list_size
            else:  # a list column: its first row says the width, every row is checked
                first = next(f.iter_batches(batch_size=1, columns=self.columns), None)
                dim = len(first.column(0)[0]) if first is not None and first.num_rows else 0
            self.row_shape = (int(dim),)
        else:
            for c, t in zip(self.columns, types):
                if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                    raise BadInputError(f"Expected a numeric or list column {c!r} in "
                                        f"{self.path}. Got {t} instead.")
            self.listed = False
            value_type = types[0]
            self.row_shape = (len(self.columns),) if len(self.columns) > 1 else ()
        try:
            self.dtype = np.dtype(value_type.to_pandas_dtype())
        except (NotImplementedError, TypeError) as e:
            raise BadInputError(f"Expected numeric feature values in {self.path}. "
                                f"Got {value_type} instead.") from e

    def _block(self, batch, at: int) -> np.ndarray:
        import pyarrow.compute as pc

        cols = [batch.column(i) for i in range(batch.num_columns)]
        for c, name in zip(cols, self.columns):
            if c.null_count:
                raise BadInputError(f"Expected no null feature rows in {self.path} (column "
                                    f"{name!r}). Got {c.null_count} in the rows from {at}.")
        if self.listed:
            col = cols[0]
            dim = self.row_shape[0]
            lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False)
            bad = np.flatnonzero(lengths != dim)
            if bad.size:
                raise BadInputError(f"Expected lists of {dim} values in {self.path} (column "
                                    f"{self.columns[0]!r}). Got {lengths[bad[0]]} at row "
                                    f"{at + int(bad[0])}.")
            vals = col.flatten()
            if vals.null_count:
                raise BadInputError(f"Expected no null feature values in {self.path}. Got "
                                    f"{vals.null_count} in the rows from {at}.")
            return vals.to_numpy(zero_copy_only=False).astype(self.dtype, copy=False) \
                .reshape(-1, dim)
        arrs = [c.to_numpy(zero_copy_only=False).astype(self.dtype, copy=False) for c in cols]
        return arrs[0] if not self.row_shape else np.stack(arrs, axis=1)

    def iter_blocks(self, rows):
        import pyarrow.parquet as pq

        at = 0
        try:
            f = pq.ParquetFile(self.path)
            for batch in f.iter_batches(batch_size=rows, columns=self.columns):
                yield self._block(batch, at)
                at += batch.num_rows
        except (OSError, ValueError) as e:
            if isinstance(e, BadInputError):
                raise
            raise BadInputError(f"Expected a readable parquet file at {self.path}: {e}") from e

    def inputs(self):
        return [self.path]


# -- casting -----------------------------------------------------------------------------
def _cast(block: np.ndarray, dtype: np.dtype, name: str, state: dict) -> np.ndarray:
    """Cast a block, counting values a float downcast turns into inf (fp16 tops at 65504)."""
    if block.dtype == dtype:
        return block
    if dtype.kind not in "fiub":
        raise BadInputError(f"Expected a numeric target dtype for {name}. Got {dtype}.")
    if block.dtype.kind == "f" and dtype.kind in "iub":
        raise BadInputError(f"Expected a float dtype to cast the float features of {name} to. "
                            f"Got {dtype}: casting would truncate.")
    if block.dtype == np.float32 and dtype == np.float16:  # the common case, 2-3x numpy
        src = np.ascontiguousarray(block)
        out = np.empty(src.shape, np.float16)
        over = f32_to_f16(src.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
        state["overflow"] = state.get("overflow", 0) + int(over)
        return out
    with np.errstate(over="ignore"):  # overflows are counted and logged instead
        out = block.astype(dtype)
    if dtype.kind == "f" and dtype.itemsize < block.dtype.itemsize:
        over = int(np.count_nonzero(np.isinf(out))) - int(np.count_nonzero(np.isinf(block)))
        state["overflow"] = state.get("overflow", 0) + over
    return out


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
        with contextlib.ExitStack() as stack:  # the bucket files close on errors too
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
def write_features(writer, ntype: str, name: str, source: FeatureSource, *, dtype=None,
                   perm: np.ndarray | None = None, budget_bytes: int = 1 << 30, tmpdir=None,
                   compressors=None, progress: bool = True, dask=None) -> dict:
    """Stream ``source`` into feature ``name`` of ``ntype`` (cast, and permuted by ``perm``).

    Returns ``seconds``, ``bytes_read``, ``bytes_written``, ``rows_per_s``, ``gb_per_s``,
    ``peak_anon_bytes`` and ``overflow`` (values a float downcast made infinite; logged).
    With ``dask`` (a ``distributed.Client``) the row blocks are Dask tasks
    (:mod:`preprocess.dask.features`; ``tmpdir`` must then be shared by the workers when the
    store is remote) when the source is a memory-mapped ``.npy``; the store is the same.
    """
    t0 = time.perf_counter()
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
    dtype = np.dtype(dtype) if dtype is not None else source.dtype
    if dask is not None and compressors is None:
        from preprocess.dask.features import dask_feature_source, write_features_dask

        src_file, perm_file, why = dask_feature_source(source, perm)
        if not why:
            return write_features_dask(dask, writer, ntype, name, source, src=src_file,
                                       perm=perm_file, dtype=dtype, budget_bytes=budget_bytes,
                                       scratch=tmpdir, progress=progress)
        log.info("%s/%s: written in this process, not as Dask tasks: %s", ntype, name, why)
    state: dict = {}
    stats: dict = {"bytes_read": 0}
    out_row = int(np.prod(source.row_shape, dtype=np.int64)) * dtype.itemsize
    rows = max(1, int(budget_bytes // 4 // max(source.row_bytes + out_row, 1)))
    rows = min(rows, max(1, (256 << 20) // max(out_row, 1)))

    def cast(b):
        return _cast(np.asarray(b), dtype, source.name, state)

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
