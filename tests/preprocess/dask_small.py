"""Small shard and checksum blocks, so that a toy feature matrix has many Dask feature tasks
(used by the Dask tests and kill_dask_run.py; every run of one comparison must use it)."""

import featurestore.format.integrity as integrity
import featurestore.format.shard as shard


def small_blocks(setattr_=None):
    """16-row inner chunks, 16-row checksum blocks of 16-byte rows (the toy's fp16 x 8)."""
    set_ = setattr_ or setattr
    set_(shard, "inner_chunk_rows", lambda row_bytes, target=0: 16)
    set_(integrity, "CHECKSUM_BLOCK_BYTES", 256)
