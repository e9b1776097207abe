"""Integrity checks: CSC topology validation (numba) and data checksums.

* :func:`check_csc` runs two numba passes (threads over blocks, GIL released) (``indptr``
  never decreases, source ids in
  range) and raises :class:`~featurestore.errors.CorruptStoreError` naming the array and the
  first bad position; the sampler's kernels only ever see topology that passed it.
* Uncompressed arrays carry a CRC-32 (zlib, IEEE polynomial) of every block of
  ``block_rows`` rows (about 64 MiB, a whole number of inner chunks) in their ``zarr.json``
  attributes (``docs/format.md``). :class:`BlockChecksums` computes them while a writer
  streams rows; :func:`file_checksums` recomputes them from a shard file (``verify --data``).
  ``zlib.crc32`` reads memoryviews without a copy and releases the GIL, so blocks are
  checksummed on several threads at once.
"""

from __future__ import annotations

import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from featurestore.errors import CorruptStoreError
from featurestore.format import names as fmt
from featurestore.format.schema import StoreSchema
from featurestore.format.shard import ShardLayout

#: target bytes of one checksummed block.
CHECKSUM_BLOCK_BYTES = 64 << 20
CHECKSUM_ALGORITHM = "crc32"
#: key of the checksum record in an array's zarr.json attributes.
CHECKSUM_ATTR = "checksum"


@numba.njit(nogil=True, cache=True)
def _first_decrease_in(indptr, lo, hi):
    """Smallest ``i`` in ``[max(lo, 1), hi)`` with ``indptr[i] < indptr[i - 1]``, or -1."""
    for i in range(max(lo, 1), hi):
        if indptr[i] < indptr[i - 1]:
            return i
    return -1


@numba.njit(nogil=True, cache=True)
def _first_out_of_range_in(ids, n, lo, hi):
    """Smallest ``i`` in ``[lo, hi)`` with ``ids[i] < 0`` or ``ids[i] >= n``, or -1."""
    for i in range(lo, hi):
        v = np.int64(ids[i])
        if v < 0 or v >= n:
            return i
    return -1


#: entries per task of the threaded passes (the kernels release the GIL).
_TASK = 1 << 24


def _first(kernel, arr, *args) -> int:
    """First hit of ``kernel`` over ``arr``, in tasks of ``_TASK`` entries on a few threads
    (sequential nogil kernels: no numba threading layer to load; docs/benchmarks.md, "Figures
    moved from code")."""
    n = arr.shape[0]
    if n <= _TASK:
        return int(kernel(arr, *args, 0, n))
    bounds = [(lo, min(n, lo + _TASK + 1)) for lo in range(0, n, _TASK)]
    with ThreadPoolExecutor(min(len(bounds), os.cpu_count() or 1, 8),
                            thread_name_prefix="fs-check") as pool:
        hits = list(pool.map(lambda b: int(kernel(arr, *args, b[0], min(b[1], n))), bounds))
    found = [h for h in hits if h >= 0]
    return min(found) if found else -1


def _first_decrease(indptr) -> int:
    """Smallest ``i >= 1`` with ``indptr[i] < indptr[i - 1]``, or -1."""
    return _first(_first_decrease_in, indptr)


def _first_out_of_range(ids, n) -> int:
    """Smallest ``i`` with ``ids[i] < 0`` or ``ids[i] >= n``, or -1."""
    return _first(_first_out_of_range_in, ids, np.int64(n))


def native(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous array in native byte order (a view when it already is one)."""
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return np.ascontiguousarray(a)


def csc_problem(indptr: np.ndarray, indices: np.ndarray, num_src: int) -> str | None:
    """What is wrong with a CSC (``None`` when it is sound), in words."""
    if indptr.ndim != 1 or indptr.shape[0] == 0:
        return f"indptr has shape {indptr.shape}; expected at least one entry"
    if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
        return f"expected integer arrays, got indptr {indptr.dtype} and indices {indices.dtype}"
    if indices.ndim != 1:
        return f"indices has shape {indices.shape}; expected 1-D"
    indptr, indices = native(indptr), native(indices)
    if int(indptr[0]) != 0:
        return f"indptr[0] is {int(indptr[0])}, not 0"
    i = int(_first_decrease(indptr))
    if i >= 0:
        return (f"indptr decreases at entry {i} ({int(indptr[i - 1])} -> {int(indptr[i])}); "
                "offsets must never decrease")
    if int(indptr[-1]) != indices.shape[0]:
        return (f"indptr[-1] is {int(indptr[-1])} but there are {indices.shape[0]} indices "
                "(edges)")
    j = int(_first_out_of_range(indices, np.int64(num_src)))
    if j >= 0:
        return f"source id {int(indices[j])} at edge {j} is outside [0, {num_src})"
    return None


def check_csc(indptr: np.ndarray, indices: np.ndarray, num_src: int, where: str) -> None:
    """Raise :class:`CorruptStoreError` (message starts with ``where``) unless the CSC is sound."""
    p = csc_problem(indptr, indices, num_src)
    if p is not None:
        raise CorruptStoreError(f"{where}: {p}. The topology is corrupt; run "
                                "`featurestore verify` and rewrite the store.")


# -- checksums -------------------------------------------------------------------------
def checksum_block_rows(chunk_rows: int, row_bytes: int) -> int:
    """Rows per checksummed block: whole inner chunks, about CHECKSUM_BLOCK_BYTES."""
    per_chunk = max(1, chunk_rows * max(1, row_bytes))
    return chunk_rows * max(1, CHECKSUM_BLOCK_BYTES // per_chunk)


class BlockChecksums:
    """CRC-32 of consecutive blocks of ``block_bytes`` bytes of a byte stream."""

    def __init__(self, block_bytes: int, block_rows: int | None = None):
        self.block_bytes = int(block_bytes)
        self.block_rows = block_rows
        self._pool: ThreadPoolExecutor | None = None
        self._pending = None
        self.values: list[int] = []
        self._crc = 0
        self._fill = 0

    def update(self, data) -> None:
        """Fold ``data`` (any buffer) into the running block checksums."""
        mv = memoryview(data).cast("B")
        i = 0
        while i < len(mv):
            k = min(self.block_bytes - self._fill, len(mv) - i)
            self._crc = zlib.crc32(mv[i:i + k], self._crc)
            self._fill += k
            i += k
            if self._fill == self.block_bytes:
                self.values.append(self._crc)
                self._crc = 0
                self._fill = 0

    def update_async(self, data) -> None:
        """:meth:`update` on a helper thread (``zlib.crc32`` releases the GIL), overlapping the
        caller's write of the same bytes; call :meth:`wait` before ``data`` may change."""
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="fs-crc")
        self._pending = self._pool.submit(self.update, data)

    def wait(self) -> None:
        """Wait for the update in flight, if any."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def close(self) -> None:
        """Wait, then stop the background thread."""
        self.wait()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def finish(self) -> list[int]:
        """Close and return the CRC-32 of every block, the last one partial."""
        self.close()
        if self._fill:
            self.values.append(self._crc)
            self._crc = 0
            self._fill = 0
        return self.values


def checksum_record(block_rows: int, values: list[int]) -> dict:
    """The record of one array's block checksums, as the metadata keeps it."""
    return {"algorithm": CHECKSUM_ALGORITHM, "block_rows": int(block_rows),
            "values": [int(v) for v in values]}


def file_checksums(path: str, data_bytes: int, block_bytes: int, threads: int = 4,
                   opener=None) -> list[int]:
    """CRC-32 of each ``block_bytes`` block of the first ``data_bytes`` bytes of a file."""
    nblocks = -(-data_bytes // block_bytes) if data_bytes else 0
    if opener is not None:  # remote (fsspec): sequential ranged reads
        out = []
        with opener(path) as f:
            for b in range(nblocks):
                f.seek(b * block_bytes)
                n = min(block_bytes, data_bytes - b * block_bytes)
                blob = f.read(n)
                if len(blob) != n:
                    raise CorruptStoreError(f"{path}: expected {n} bytes at offset "
                                            f"{b * block_bytes}, got {len(blob)}")
                out.append(zlib.crc32(blob))
        return out
    fd = os.open(path, os.O_RDONLY)
    try:
        def one(b: int) -> int:
            n = min(block_bytes, data_bytes - b * block_bytes)
            buf = bytearray(n)
            got = os.preadv(fd, [buf], b * block_bytes)
            if got != n:
                raise CorruptStoreError(f"{path}: expected {n} bytes at offset "
                                        f"{b * block_bytes}, got {got}")
            return zlib.crc32(buf)

        if nblocks <= 1 or threads <= 1:
            return [one(b) for b in range(nblocks)]
        with ThreadPoolExecutor(min(threads, nblocks), thread_name_prefix="fs-crc") as pool:
            return list(pool.map(one, range(nblocks)))
    finally:
        os.close(fd)


# -- writer hooks ------------------------------------------------------------------------
def layout_checksums(layout) -> BlockChecksums:
    """A :class:`BlockChecksums` for the data rows of a single-shard array."""
    rows = checksum_block_rows(layout.chunk_rows, layout.row_bytes)
    return BlockChecksums(rows * max(1, layout.row_bytes), rows)


def record_checksums(loc, key: str, acc: BlockChecksums) -> None:
    """Store the checksums of array ``key`` in its ``zarr.json`` attributes (atomically)."""
    meta = loc.read_json(f"{key}/zarr.json")
    attrs = meta.get("attributes") or {}
    attrs[CHECKSUM_ATTR] = checksum_record(acc.block_rows, acc.finish())
    meta["attributes"] = attrs
    loc.write_bytes_atomic(f"{key}/zarr.json", json.dumps(meta, indent=2).encode())


def topology_records(loc, schema: StoreSchema, generation: str) -> dict:
    """Validate every edge type's CSC as written and describe the files checked.

    Returns the ``topology_checks`` root attribute: per edge type the generation, the node
    and edge counts and ``[size, mtime_ns]`` of both shard files. A reader that finds the
    same values skips its own validation pass. Raises ``CorruptStoreError`` for a bad CSC.
    Remote stores get no records (their readers validate what they load).
    """
    if not loc.is_local:
        return {}
    out = {}
    for e in schema.edge_types:
        et = e.etype
        arrays, stats = [], {}
        for part in ("indptr", "indices"):
            key = fmt.edge_key(et, part)
            layout = ShardLayout.from_metadata(loc.read_json(f"{key}/zarr.json"))
            if layout is None:  # empty (no shard file): readers validate it, it is free
                break
            path = loc.path(f"{key}/{layout.chunk_key()}")
            arrays.append(np.memmap(path, dtype=layout.dtype, mode="r",
                                    shape=layout.shape) if layout.shape[0] else
                          np.empty(0, layout.dtype))
            st = os.stat(path)
            stats[part] = [st.st_size, st.st_mtime_ns]
        else:
            num_src = int(schema.node_types[et.src].num_nodes)
            check_csc(arrays[0], arrays[1], num_src,
                      f"{loc.path(f'edges/{et.key()}')} (edge type {tuple(et)}, at commit)")
            out[et.key()] = {"generation": generation, "num_src": num_src,
                             "num_edges": int(e.num_edges), **stats}
    return out


def writer_checksums(raw: bytes, size: int) -> tuple[int, list[int], int] | None:
    """``(bytes per checksum block, CRC-32s, data bytes)`` of a v1 array's ``zarr.json``
    whose shard file has ``size`` bytes, or None: what a remote store's range cache checks
    the rows it fetched against (:attr:`RangeCacheFileSystem.writer_record`)."""
    try:
        meta = json.loads(raw)
        layout = ShardLayout.from_metadata(meta)
        rec = (meta.get("attributes") or {}).get(CHECKSUM_ATTR)
        if (layout is None or not rec or rec.get("algorithm") != CHECKSUM_ALGORITHM
                or layout.file_bytes != size):
            return None
        cb = int(rec["block_rows"]) * layout.row_bytes
        nbytes = layout.shape[0] * layout.row_bytes
        values = [int(v) for v in rec["values"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if cb <= 0 or not nbytes or len(values) != -(-nbytes // cb):
        return None
    return cb, values, nbytes
