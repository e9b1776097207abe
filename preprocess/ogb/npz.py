"""Out-of-core access to the members of an ``.npz`` archive, and a streaming ``.npz`` writer.

``np.load("data.npz")["node_feat"]`` decompresses a member whole into RAM (57 GB for
ogbn-papers100M's features). Here a *stored* (uncompressed) member is memory-mapped at its
byte offset inside the zip file, and a *deflated* member is decompressed as a stream, in
blocks, never whole. Only the zip's central directory and each member's ``.npy`` header
are parsed up front.
"""

from __future__ import annotations

import os
import struct
import zipfile
from dataclasses import dataclass, field
from collections.abc import Iterator

import numpy as np

from preprocess.steps.diskmap import map_file, open_npy
from preprocess.ogb.errors import RawDataError, RawFileNotFoundError

__all__ = ["NpzArchive", "NpzMember", "NpzWriter"]

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"
#: bytes decompressed per read when streaming a deflated member.
STREAM_BYTES = 16 << 20


@dataclass(frozen=True)
class NpzMember:
    """One ``.npy`` member of an archive: its array header and where its bytes are."""

    archive: NpzArchive = field(repr=False)
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    compressed: bool
    #: offset of the array's first byte in the zip file (stored members only).
    data_offset: int | None

    @property
    def size(self) -> int:
        """Elements of the member."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes of the member's array (uncompressed)."""
        return self.size * self.dtype.itemsize

    def memmap(self) -> np.memmap:
        """A read-only memory map of a stored member (no copy, no decompression)."""
        if self.compressed:
            raise RawDataError(f"Expected a stored member to memory-map. {self.name!r} of "
                               f"{self.archive.path} is compressed; stream it instead.")
        if self.size == 0:
            return np.zeros(self.shape, self.dtype)
        return map_file(self.archive.path, dtype=self.dtype, mode="r", offset=self.data_offset,
                         shape=self.shape, order="F" if self.fortran_order else "C")

    def iter_flat(self, block_elems: int | None = None) -> Iterator[np.ndarray]:
        """The member's elements in file order (C or Fortran), as 1-D blocks.

        Stored members are sliced from the memory map; deflated members are decompressed as
        a stream. Each block holds at most ``block_elems`` elements and is a fresh array for
        deflated members (a read-only view for stored ones).
        """
        item = self.dtype.itemsize
        block_elems = block_elems or max(1, STREAM_BYTES // item)
        n = self.size
        if not self.compressed:
            order = "F" if self.fortran_order else "C"
            flat = self.memmap().reshape(-1, order=order) if n else None
            for lo in range(0, n, block_elems):
                yield flat[lo:lo + block_elems]
            return
        with self.archive._zip().open(self.name) as f:
            _skip_npy_header(f, self)
            done = 0
            while done < n:
                k = min(block_elems, n - done)
                buf = np.empty(k, self.dtype)
                view = memoryview(buf).cast("B")
                got = 0
                while got < k * item:
                    r = f.readinto(view[got:])
                    if not r:
                        raise RawDataError(
                            f"Expected {n} elements in member {self.name!r} of "
                            f"{self.archive.path}. It ends after {done + got // item}.")
                    got += r
                done += k
                yield buf

    def iter_rows(self, block_rows: int) -> Iterator[np.ndarray]:
        """Blocks of rows (along axis 0) of a C-order member, streamed."""
        if self.fortran_order and len(self.shape) > 1:
            raise RawDataError(f"Expected a C-order member {self.name!r} in {self.archive.path} "
                               "to stream by rows. It is Fortran-ordered.")
        row = int(np.prod(self.shape[1:], dtype=np.int64))
        if row == 0:
            return
        for blk in self.iter_flat(block_rows * row):
            yield blk.reshape((-1,) + tuple(self.shape[1:]))

    def to_npy(self, path: str | os.PathLike) -> np.memmap:
        """Stream the member into a ``.npy`` file at ``path``; return it memory-mapped read-only.

        Gives random access to a deflated member without holding it in RAM.
        """
        path = os.fspath(path)
        out = open_npy(path + ".partial", mode="w+", dtype=self.dtype,
                                        shape=self.shape, fortran_order=self.fortran_order)
        flat = out.reshape(-1, order="F" if self.fortran_order else "C") if self.size else None
        lo = 0
        for blk in self.iter_flat():
            flat[lo:lo + blk.size] = blk
            lo += blk.size
        out.flush()
        del flat, out
        os.replace(path + ".partial", path)
        return np.load(path, mmap_mode="r")

    def read(self) -> np.ndarray:
        """The whole member in memory: for small members (counts, labels of a split) only."""
        if not self.compressed:
            return np.array(self.memmap())
        out = np.empty(self.size, self.dtype)
        lo = 0
        for blk in self.iter_flat():
            out[lo:lo + blk.size] = blk
            lo += blk.size
        return out.reshape(self.shape, order="F" if self.fortran_order else "C")


class NpzArchive:
    """An ``.npz`` file opened for out-of-core member access.

    Example::

        arc = NpzArchive("raw/data.npz")
        arc["node_feat"].memmap()          # stored member: zero-copy
        for blk in arc["node_feat"].iter_rows(65536): ...
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise RawFileNotFoundError(f"Expected {self.path}. It is missing.")
        try:
            with zipfile.ZipFile(self.path) as zf:
                infos = zf.infolist()
        except (zipfile.BadZipFile, OSError) as e:
            raise RawDataError(f"Expected a zip (.npz) archive at {self.path}: {e}") from e
        self.members: dict[str, NpzMember] = {}
        with open(self.path, "rb") as raw:
            for info in infos:
                if not info.filename.endswith(".npy"):
                    continue
                self.members[info.filename[:-4]] = self._member(raw, info)

    def __repr__(self) -> str:
        return f"NpzArchive({self.path!r}, members={sorted(self.members)})"

    def __contains__(self, name: str) -> bool:
        return name in self.members

    def __getitem__(self, name: str) -> NpzMember:
        if name not in self.members:
            raise RawDataError(f"Expected a member {name!r} in {self.path}. "
                               f"It has {sorted(self.members)}.")
        return self.members[name]

    def _zip(self) -> zipfile.ZipFile:
        return zipfile.ZipFile(self.path)

    def _member(self, raw, info: zipfile.ZipInfo) -> NpzMember:
        if info.compress_type == zipfile.ZIP_STORED:
            raw.seek(info.header_offset)
            head = raw.read(_LOCAL_HEADER.size)
            fields = _LOCAL_HEADER.unpack(head) if len(head) == _LOCAL_HEADER.size else None
            if fields is None or fields[0] != _LOCAL_MAGIC:
                raise RawDataError(f"Expected a zip local header for {info.filename!r} at byte "
                                   f"{info.header_offset} of {self.path}. The archive is damaged.")
            start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
            raw.seek(start)
            shape, fortran, dtype = _read_npy_header(raw, self.path, info.filename)
            m = NpzMember(self, info.filename, shape, dtype, fortran, False, raw.tell())
            self._check_size(m, info, raw.tell() - start)
            return m
        if info.compress_type != zipfile.ZIP_DEFLATED:
            raise RawDataError(f"Expected member {info.filename!r} of {self.path} stored or "
                               f"deflated. Got zip compression type {info.compress_type}.")
        with zipfile.ZipFile(self.path) as zf, zf.open(info) as f:
            shape, fortran, dtype = _read_npy_header(f, self.path, info.filename)
            header = f.tell()
        m = NpzMember(self, info.filename, shape, dtype, fortran, True, None)
        self._check_size(m, info, header)
        return m

    def _check_size(self, m: NpzMember, info: zipfile.ZipInfo, header: int) -> None:
        """The array header's shape against the bytes the archive holds, before anything is
        written from it: a header claiming 2e7 rows over a 21 KB body is refused here."""
        body = info.file_size - header  # uncompressed bytes the zip directory declares
        disk = os.path.getsize(self.path)
        short = (body < m.nbytes
                 or (not m.compressed and m.data_offset + m.nbytes > disk)
                 # deflate expands at most ~1032:1
                 or (m.compressed and info.compress_size * 1032 + 1024 < m.nbytes))
        if short:
            raise RawDataError(
                f"Expected {m.nbytes} bytes for member {info.filename!r} of {self.path} "
                f"(shape {m.shape}, {m.dtype}). The archive holds {max(body, 0)} "
                f"({info.compress_size} compressed): its header's shape is wrong or the file "
                "is truncated.")


def _read_npy_header(f, path: str, member: str):
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except ValueError as e:
        raise RawDataError(f"Expected a .npy member {member!r} in {path}: {e}") from e
    if dtype.hasobject:
        raise RawDataError(f"Expected a numeric member {member!r} in {path}. "
                           f"Got dtype {dtype} (objects are never unpickled).")
    return tuple(int(s) for s in shape), bool(fortran), dtype


def _skip_npy_header(f, m: NpzMember) -> None:
    _read_npy_header(f, m.archive.path, m.name)


class NpzWriter:
    """Writes an ``.npz`` archive member by member, each member streamed in blocks.

    ``compress=False`` stores members (the reader memory-maps them); ``True`` deflates them.
    Use as a context manager; the archive is written to ``path + ".partial"`` and renamed
    into place on a clean exit.
    """

    def __init__(self, path: str | os.PathLike, *, compress: bool = False):
        self.path = os.fspath(path)
        self._tmp = self.path + ".partial"
        self._zf = zipfile.ZipFile(self._tmp, "w",
                                   zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED,
                                   compresslevel=1 if compress else None, allowZip64=True)

    def __enter__(self) -> NpzWriter:
        return self

    def __exit__(self, exc_type, *rest) -> None:
        self._zf.close()
        if exc_type is None:
            os.replace(self._tmp, self.path)
        else:
            os.unlink(self._tmp)

    def write(self, name: str, shape, dtype, blocks) -> None:
        """Write member ``name`` of ``shape``/``dtype`` (C order) from an iterator of blocks.

        The blocks, flattened in order, must hold exactly ``prod(shape)`` elements.
        """
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        want = int(np.prod(shape, dtype=np.int64))
        got = 0
        with self._zf.open(name + ".npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                    "shape": shape})
            for b in blocks:
                b = np.ascontiguousarray(b, dtype=dtype)
                got += b.size
                if got > want:
                    break
                f.write(memoryview(b).cast("B"))
        if got != want:
            raise ValueError(f"Expected {want} elements for member {name!r} of {self.path}. "
                             f"Got {got} instead.")

    def write_array(self, name: str, arr) -> None:
        """Write a (small, in-memory) array as member ``name``."""
        arr = np.asarray(arr)
        self.write(name, arr.shape, arr.dtype, [arr.reshape(-1)])
