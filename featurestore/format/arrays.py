"""Writing one array of a store: its ``zarr.json``, then its rows.

An uncompressed array is one shard file in the v1 layout (:class:`~featurestore.format.shard.
ShardWriter`), streamed block by block with the CRC-32 of every checksum block recorded in its
``zarr.json`` (``verify --data``). A compressed array is written through zarr, whole shards at
a time, with zarr's crc32c codec after the compressors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from featurestore.errors import SchemaError
from featurestore.fileio import disk_full_as_error
from featurestore.format.integrity import layout_checksums, record_checksums
from featurestore.format.shard import ShardWriter, zarr_array_kwargs
from featurestore.remote.location import Location

__all__ = ["create_array", "write_array"]

#: ``check(block, first_row)``: raises for a block of rows the array must not hold.
BlockCheck = Callable[[np.ndarray, int], None]


def create_array(zstore, key: str, shape: tuple, dtype: np.dtype, compressors=None) -> dict:
    """Write the ``zarr.json`` of array ``key`` (replacing one there).

    Returns ``{"array": the zarr array, "kw": the arguments it was made with}``; ``kw["chunks"]``
    holds the inner chunk shape.
    """
    import zarr

    if compressors is None:
        kw = zarr_array_kwargs(shape, dtype)
    else:
        kw = zarr_array_kwargs(shape, dtype)
        kw.pop("shards", None)
        kw["compressors"] = _with_crc32c(compressors)  # zarr checks every inner chunk
        if shape[0]:
            kw["shards"] = (kw["chunks"][0] * 64,) + tuple(shape[1:])
    kw["config"] = {"write_empty_chunks": True}
    return dict(array=zarr.create_array(store=zstore, name=key, overwrite=True, **kw), kw=kw)


def write_array(loc: Location, zstore, key: str, shape: tuple, dtype: np.dtype,
                blocks: Iterable, compressors=None, check: BlockCheck | None = None) -> None:
    """Write array ``key`` of ``shape`` and ``dtype`` from its row ``blocks``, in order.

    Uncompressed unless ``compressors`` are given. Raises ``SchemaError`` when the blocks do
    not add up to ``shape`` (or ``check`` refuses one); the array is then left unfinished.
    """
    if compressors is not None:
        with disk_full_as_error(loc.path(key)):  # zarr's own writes
            _write_zarr(zstore, key, shape, dtype, blocks, compressors, check)
        return
    with disk_full_as_error(loc.path(f"{key}/zarr.json")):
        meta = create_array(zstore, key, shape, dtype)
    if shape[0] == 0:
        for b in blocks:
            if len(b):
                raise SchemaError(f"Expected 0 rows for {key}. Got {len(b)} or more instead.")
        return
    w = ShardWriter(loc, key, shape, dtype, meta["kw"]["chunks"][0])
    sums = layout_checksums(w.layout)  # CRC-32 per block of rows: `verify --data`
    try:
        for b in blocks:
            b = np.asarray(b)
            if check is not None:
                check(b, w.rows)
            sums.update_async(np.ascontiguousarray(b, dtype=w.layout.dtype))  # as written
            w.write(b)
            sums.wait()  # before the block's buffer may be reused
        w.close()
    except BaseException:
        sums.close()
        w.abort()
        raise
    record_checksums(loc, key, sums)


def _write_zarr(zstore, key, shape, dtype, blocks, compressors, check) -> None:
    """A compressed array through zarr: rows gathered into whole shards, each written once."""
    z = create_array(zstore, key, shape, dtype, compressors)["array"]
    step = z.shards[0] if shape[0] else 1
    buf = np.empty((step,) + tuple(shape[1:]), dtype)
    fill = 0
    done = 0
    for b in blocks:
        b = np.asarray(b)
        if check is not None:
            check(b, done + fill)
        if b.shape[1:] != tuple(shape[1:]) or done + fill + len(b) > shape[0]:
            raise SchemaError(f"Expected {shape[0]} rows of shape {shape[1:]} for {key}. "
                              f"Got a block of shape {b.shape} at row {done + fill}.")
        i = 0
        while i < len(b):
            k = min(step - fill, len(b) - i)
            buf[fill:fill + k] = b[i:i + k]
            fill += k
            i += k
            if fill == step:
                z[done:done + step] = buf
                done += step
                fill = 0
    if fill:
        z[done:done + fill] = buf[:fill]
        done += fill
    if done != shape[0]:
        raise SchemaError(f"Expected {shape[0]} rows for {key}. Got {done} instead.")


def _with_crc32c(compressors) -> list:
    """``compressors`` followed by zarr's crc32c codec (unless it is there): a flipped byte
    in a compressed chunk then fails its checksum instead of decoding to wrong rows."""
    import zarr.codecs

    out = list(compressors) if isinstance(compressors, (list, tuple)) else [compressors]
    if not any(isinstance(c, zarr.codecs.Crc32cCodec) for c in out):
        out.append(zarr.codecs.Crc32cCodec())
    return out
