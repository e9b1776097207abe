"""A feature array's shard file filled by row ranges, from several processes at once.

:meth:`StoreWriter.add_features` streams rows in order through one writer. A job that
converts row blocks on several workers (``preprocess --dask``) instead opens a
:class:`RowFile`: the array's ``zarr.json`` is written and its shard file preallocated (at
its temporary name, with the zero padding and the shard index already in place), so that each
worker writes the bytes of its own rows (``os.pwrite`` at ``row * row_bytes``) and returns
the CRC-32 of its checksum blocks (``block_rows`` rows each, the last one shorter).
:meth:`RowFile.commit` takes those checksums, renames the file into place and records the
array exactly as :meth:`StoreWriter.add_features` would: the store is the same byte for byte.

Local stores only (``writer.loc.is_local``): an object store has no positioned writes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from featurestore.format import names as fmt
from featurestore.format.integrity import CHECKSUM_ATTR, checksum_block_rows, checksum_record
from featurestore.format.schema import FeatureSchema
from featurestore.format.shard import ShardLayout
from featurestore.errors import SchemaError
from featurestore.fileio import disk_full_as_error

__all__ = ["RowFile", "open_row_file"]


class RowFile:
    """A preallocated shard file of one feature array; see the module docstring.

    Attributes
    ----------
    path
        The temporary file to write rows into (renamed into place by :meth:`commit`).
    shape, dtype
        The array's shape and (little-endian) dtype.
    row_bytes
        Bytes of one row; row ``r`` starts at byte ``r * row_bytes`` of ``path``.
    block_rows
        Rows per checksummed block: a writer of rows ``[lo, hi)`` with ``lo`` a multiple of
        ``block_rows`` returns the CRC-32 (``zlib.crc32``) of each block it covers.
    """

    def __init__(self, writer, ntype: str, name: str, dtype, row_shape: Sequence[int]):
        fmt.check_name("feature", name)
        if not writer.loc.is_local:
            raise SchemaError(f"Expected a local store for positioned row writes. Got "
                              f"{writer.url}; stream the rows with add_features instead.")
        self.writer, self.ntype, self.name = writer, ntype, name
        n = writer._ntype(ntype).num_nodes
        self.key = fmt.feature_key(ntype, name)
        dtype = np.dtype(dtype)
        if dtype.kind not in "fiub":
            raise SchemaError(f"Expected a numeric feature dtype for {ntype}/{name}. "
                              f"Got {dtype}.")
        self.row_shape = tuple(int(x) for x in row_shape)
        self.shape = (int(n),) + self.row_shape
        meta = writer._create_meta(self.key, self.shape, dtype)
        self.dtype = dtype.newbyteorder("<")
        self.layout = ShardLayout(self.shape, self.dtype, meta["kw"]["chunks"][0]) \
            if n else None
        self.row_bytes = int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize
        self.block_rows = (checksum_block_rows(self.layout.chunk_rows, self.row_bytes)
                           if n else 1)
        self.path = None
        if n:
            self.final = writer.loc.path(f"{self.key}/{self.layout.chunk_key()}")
            self.path = self.final + ".partial"
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with disk_full_as_error(self.path), open(self.path, "wb") as f:
                f.truncate(self.layout.file_bytes)  # zeros: the rows to come and the padding
                f.seek(self.layout.data_bytes)
                f.write(self.layout.index_blob())

    @property
    def num_blocks(self) -> int:
        """Checksummed blocks of the data rows (the CRCs :meth:`commit` expects)."""
        return -(-self.shape[0] // self.block_rows) if self.shape[0] else 0

    def commit(self, checksums: Sequence[int]) -> None:
        """Rename the filled file into place and record the array with its ``checksums``."""
        if len(checksums) != self.num_blocks:
            raise SchemaError(f"Expected {self.num_blocks} block checksums for {self.key}. "
                              f"Got {len(checksums)} instead.")
        w = self.writer
        if self.path is not None:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self.path, self.final)
            meta = w.loc.read_json(f"{self.key}/zarr.json")
            attrs = meta.get("attributes") or {}
            attrs[CHECKSUM_ATTR] = checksum_record(self.block_rows, list(checksums))
            meta["attributes"] = attrs
            w.loc.write_json_atomic(f"{self.key}/zarr.json", meta)
        w._done(self.key)
        w._record_feature(self.ntype, FeatureSchema(self.name, self.dtype.newbyteorder("="),
                                                    self.row_shape, False))

    def abort(self) -> None:
        """Remove the temporary file (the array stays absent; a rerun starts it again)."""
        if self.path is not None and os.path.exists(self.path):
            os.remove(self.path)


def open_row_file(writer, ntype: str, name: str, dtype, row_shape: Sequence[int]) -> RowFile:
    """A :class:`RowFile` for feature ``name`` of ``ntype`` (replacing any partial one)."""
    return RowFile(writer, ntype, name, dtype, row_shape)
