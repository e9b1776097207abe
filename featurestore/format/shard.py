"""Single-shard arrays: how the store writes arrays and how the local path finds rows.

Each array of the store is one zarr shard file (``<array>/c/0[/0]``) holding every inner
chunk contiguously in row order, followed by the shard index (``n_chunks`` pairs of
little-endian uint64 ``(offset, nbytes)`` and a crc32c of them). Uncompressed, row ``r``
then starts at byte ``r * row_bytes``: the file *is* the raw array, padded to whole chunks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import google_crc32c
import numpy as np

from featurestore.errors import DiskFullError, SchemaError
from featurestore.fileio import disk_full_as_error, is_disk_full
from featurestore.format.names import inner_chunk_rows
from featurestore.remote.location import Location

MISSING = np.uint64(2**64 - 1)


@dataclass(frozen=True)
class ShardLayout:
    """Geometry of a single-shard array."""

    shape: tuple[int, ...]
    dtype: np.dtype
    chunk_rows: int

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    @property
    def n_chunks(self) -> int:
        """Number of inner chunks."""
        return -(-self.shape[0] // self.chunk_rows)

    @property
    def data_bytes(self) -> int:
        """Bytes of the chunk data, padding included."""
        return self.n_chunks * self.chunk_rows * self.row_bytes

    @property
    def index_bytes(self) -> int:
        """Bytes of the shard index (16 per chunk, plus its CRC-32)."""
        return 16 * self.n_chunks + 4

    @property
    def file_bytes(self) -> int:
        """Bytes of the whole shard file."""
        return self.data_bytes + self.index_bytes

    def chunk_key(self) -> str:
        """The shard's key under the array's directory."""
        return "c/" + "/".join("0" for _ in self.shape)

    def index_blob(self) -> bytes:
        """The shard index: each chunk's offset and size, then their CRC-32."""
        chunk = self.chunk_rows * self.row_bytes
        idx = np.empty((self.n_chunks, 2), dtype="<u8")
        idx[:, 0] = np.arange(self.n_chunks, dtype=np.uint64) * np.uint64(chunk)
        idx[:, 1] = chunk
        raw = idx.tobytes()
        return raw + google_crc32c.value(raw).to_bytes(4, "little")

    @classmethod
    def from_metadata(cls, meta: dict) -> ShardLayout | None:
        """The layout of an array's ``zarr.json``, or None when it is not one uncompressed shard."""
        shape = tuple(meta["shape"])
        dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        codecs = meta.get("codecs", [])
        if len(codecs) != 1 or codecs[0]["name"] != "sharding_indexed":
            return None
        conf = codecs[0]["configuration"]
        inner = conf["codecs"]
        if [c["name"] for c in inner] != ["bytes"] or conf.get("index_location", "end") != "end":
            return None
        outer = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
        chunk = tuple(conf["chunk_shape"])
        if outer[0] < shape[0] or outer[1:] != shape[1:] or chunk[1:] != shape[1:]:
            return None
        if [c["name"] for c in conf["index_codecs"]] != ["bytes", "crc32c"]:
            return None
        lay = cls(shape, dtype, chunk[0])
        if lay.n_chunks * chunk[0] != outer[0]:
            return None
        return lay


def zarr_array_kwargs(shape: tuple[int, ...], dtype: np.dtype) -> dict:
    """Arguments of ``zarr.create_array`` for an uncompressed single-shard array."""
    rest = tuple(shape[1:])
    if shape[0] == 0:
        return dict(shape=shape, dtype=dtype, chunks=(1,) + rest, compressors=None,
                    filters=None, fill_value=0)
    row_bytes = int(np.prod(rest, dtype=np.int64)) * dtype.itemsize
    # small arrays: no big pad
    c = min(inner_chunk_rows(row_bytes), 1 << (int(shape[0]) - 1).bit_length())
    lay = ShardLayout(tuple(shape), dtype, c)
    return dict(shape=shape, dtype=dtype, chunks=(c,) + rest, shards=(lay.n_chunks * c,) + rest,
                compressors=None, filters=None, fill_value=0)


class ShardWriter:
    """Streams rows of one array into its shard file, in order, then appends the index.

    ``write(block)`` appends rows; ``close()`` checks the row count, pads, writes the index and
    renames the temporary file into place, so a crash never leaves a plausible-looking file.
    Plain writes, no memory maps: a full disk is a :class:`DiskFullError` naming the array,
    never a SIGBUS.
    """

    def __init__(self, loc: Location, array_key: str, shape: tuple[int, ...], dtype,
                 chunk_rows: int):
        self.loc = loc
        self.layout = ShardLayout(tuple(int(s) for s in shape), np.dtype(dtype).newbyteorder("<"),
                                  chunk_rows)
        self.name = array_key
        self.path = loc.path(f"{array_key}/{self.layout.chunk_key()}")
        self.tmp = self.path + ".partial"
        self.rows = 0
        with disk_full_as_error(self.tmp, hint=f" It is array {array_key}. Free space and run the "
                                               "job again: it resumes."):
            loc.fs.makedirs(os.path.dirname(self.tmp) if loc.is_local
                            else self.tmp.rsplit("/", 1)[0], exist_ok=True)
            self._f = loc.fs.open(self.tmp, "wb") if not loc.is_local else open(self.tmp, "wb")

    def _put(self, data) -> None:
        try:
            self._f.write(data)
        except OSError as e:
            if is_disk_full(e):
                raise DiskFullError(f"The disk is full: could not write {self.tmp} (array "
                                    f"{self.name}, {self.layout.file_bytes} bytes). Free space "
                                    "and run the job again: it resumes.") from None
            raise

    def write(self, block) -> None:
        """Append a block of rows."""
        lay = self.layout
        block = np.asarray(block)
        if block.shape[1:] != lay.shape[1:]:
            raise SchemaError(f"Expected rows of shape {lay.shape[1:]} for {self.name}. "
                              f"Got a block of shape {block.shape} instead.")
        if self.rows + block.shape[0] > lay.shape[0]:
            raise SchemaError(f"Expected {lay.shape[0]} rows for {self.name}. "
                              f"Got at least {self.rows + block.shape[0]} instead.")
        if not np.can_cast(block.dtype, lay.dtype, casting="same_kind"):
            raise SchemaError(f"Expected data castable to {lay.dtype} for {self.name}. "
                              f"Got {block.dtype} instead.")
        self._put(memoryview(np.ascontiguousarray(block, dtype=lay.dtype)).cast("B"))
        self.rows += block.shape[0]

    def close(self) -> None:
        """Pad, write the index and move the file into place."""
        lay = self.layout
        if self.rows != lay.shape[0]:
            self._f.close()
            self.loc.fs.rm(self.tmp)
            raise SchemaError(f"Expected {lay.shape[0]} rows for {self.name}. "
                              f"Got {self.rows} instead.")
        pad = (lay.n_chunks * lay.chunk_rows - lay.shape[0]) * lay.row_bytes
        if pad:
            self._put(bytes(pad))
        self._put(lay.index_blob())
        try:
            if self.loc.is_local:
                self._f.flush()
                os.fsync(self._f.fileno())
            self._f.close()
        except OSError as e:
            if is_disk_full(e):
                raise DiskFullError(f"The disk is full: could not write {self.tmp} (array "
                                    f"{self.name}). Free space and run the job again.") from None
            raise
        if self.loc.is_local:
            os.replace(self.tmp, self.path)
        else:
            self.loc.fs.mv(self.tmp, self.path)

    def abort(self) -> None:
        """Drop the partial file."""
        try:
            self._f.close()
        except OSError:  # a full disk fails the close too; the file goes anyway
            pass
        if self.loc.fs.exists(self.tmp):
            self.loc.fs.rm(self.tmp)


def check_shard_file(loc: Location, array_key: str, layout: ShardLayout,
                     full: bool = False) -> list[str]:
    """Problems with an array's shard file: missing, wrong size, index not contiguous."""
    path = loc.path(f"{array_key}/{layout.chunk_key()}")
    if layout.shape[0] == 0:
        return []
    if not loc.fs.exists(path):
        return [f"{path}: shard file missing"]
    size = loc.fs.size(path)
    if size != layout.file_bytes:
        return [f"{path}: expected {layout.file_bytes} bytes, found {size} "
                "(truncated or overwritten)"]
    if full or layout.n_chunks <= 1 << 16:
        with loc.fs.open(path, "rb") as f:
            f.seek(layout.data_bytes)
            blob = f.read(layout.index_bytes)
        if blob != layout.index_blob():
            return [f"{path}: shard index is not the contiguous layout of format v1"]
    return []

