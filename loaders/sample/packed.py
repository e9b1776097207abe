"""Bit-packed neighbour ids: a resident CSC ``indices`` in ``ceil(log2 N)`` bits per id.

R-MAT scale 22 has 4.2M nodes, so an id needs 22 bits, not 32: a packed copy of its 134M
``indices`` holds 369 MB instead of 537 MB, and the loader's budget gives the difference to
the feature cache. An id is read in O(1): id ``j`` is bits ``[j * b, (j + 1) * b)`` of a
little-endian ``uint64`` word array, so it lies in at most two words.

Kernels take ``indices`` as either a plain integer array or the tuple :attr:`PackedIds.kernel`
(``(words, bits)``) and read an id with :func:`nbr`, which numba specialises per type: the
plain path compiles to ``indices[j]`` as before.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from featurestore.threading_layer import parallel_safe

#: ids packed per parallel block: 64 ids of ``b`` bits fill exactly ``b`` words, so blocks
#: never share a word and pack without races.
BLOCK = 64
#: ids read per piece when a copy is packed (a multiple of :data:`BLOCK`)
PIECE = BLOCK << 18


def bits_for(num_nodes: int) -> int:
    """Bits per id for ids in ``[0, num_nodes)`` (at least 1)."""
    return max(1, int(num_nodes - 1).bit_length())


def nbr(indices, j):
    """Id ``j`` of ``indices`` (a plain array or :attr:`PackedIds.kernel`); numba only."""
    raise NotImplementedError("nbr is compiled by numba; use PackedIds[j] from Python")


@overload(nbr, inline="always", jit_options={"nogil": True})
def _nbr(indices, j):
    if isinstance(indices, types.Array):
        return lambda indices, j: np.int64(indices[j])
    if isinstance(indices, types.BaseTuple):
        def get(indices, j):
            words, bits = indices
            p = np.uint64(j) * np.uint64(bits)
            w = p >> np.uint64(6)
            o = p & np.uint64(63)
            # the second word's part, shifted in two steps so o == 0 shifts by 64 safely
            hi = (words[w + np.uint64(1)] << np.uint64(1)) << (np.uint64(63) - o)
            v = (words[w] >> o) | hi
            return np.int64(v & ((np.uint64(1) << np.uint64(bits)) - np.uint64(1)))
        return get
    return None


@numba.njit(nogil=True, cache=True, inline="always")
def _pack_block(ids, words, bits, b, first_word):
    lo = b * BLOCK
    hi = min(lo + BLOCK, ids.shape[0])
    ubits = np.uint64(bits)
    for k in range(lo, hi):
        v = np.uint64(ids[k])
        p = np.uint64(k - lo) * ubits
        w = np.uint64(first_word + b * bits) + (p >> np.uint64(6))
        o = p & np.uint64(63)
        words[w] |= v << o
        if o + ubits > np.uint64(64):
            words[w + np.uint64(1)] |= v >> (np.uint64(64) - o)


@numba.njit(nogil=True, parallel=True, cache=True)
def _pack_par(ids, words, bits, first_word):
    for b in numba.prange((ids.shape[0] + BLOCK - 1) // BLOCK):
        _pack_block(ids, words, bits, b, first_word)


@numba.njit(nogil=True, cache=True)
def _pack_ser(ids, words, bits, first_word):
    for b in range((ids.shape[0] + BLOCK - 1) // BLOCK):
        _pack_block(ids, words, bits, b, first_word)


@numba.njit(nogil=True, parallel=True, cache=True)
def _unpack_par(packed, pos, out):
    for i in numba.prange(pos.shape[0]):
        out[i] = nbr(packed, pos[i])


@numba.njit(nogil=True, cache=True)
def _unpack_ser(packed, pos, out):
    for i in range(pos.shape[0]):
        out[i] = nbr(packed, pos[i])


@numba.njit(nogil=True, parallel=True, cache=True)
def _unpack_range_par(packed, lo, out):
    for i in numba.prange(out.shape[0]):
        out[i] = nbr(packed, lo + i)


@numba.njit(nogil=True, cache=True)
def _unpack_range_ser(packed, lo, out):
    for i in range(out.shape[0]):
        out[i] = nbr(packed, lo + i)


class PackedIds:
    """A read-only int array of ``size`` ids of ``bits`` bits each, packed in ``words``.

    Reads like the array it packs: ``len``, ``shape``, ``x[j]``, ``x[lo:hi]``, ``x[ids]``
    and ``np.asarray(x)`` (which unpacks it whole: a full copy). :attr:`kernel` is the form
    numba kernels take (see :func:`nbr`).
    """

    __slots__ = ("words", "bits", "size")

    def __init__(self, words: np.ndarray, bits: int, size: int):
        need = words_for(size, bits)
        if words.dtype != np.uint64 or words.ndim != 1 or words.shape[0] != need:
            raise ValueError(f"Expected {need} uint64 words for {size} ids of {bits} bits. "
                             f"Got {words.dtype} of shape {words.shape} instead.")
        if not 1 <= bits <= 63:
            raise ValueError(f"Expected 1 to 63 bits per id. Got {bits} instead.")
        self.words, self.bits, self.size = words, int(bits), int(size)

    @classmethod
    def from_chunks(cls, chunks, size: int, bits: int) -> PackedIds:
        """Pack ``size`` ids arriving as arrays in order (each but the last a multiple of
        :data:`BLOCK` long), so the plain array is never held whole. An id outside
        ``[0, 2**bits)`` raises ``ValueError`` (it would spill into its neighbours' bits)."""
        words = np.zeros(words_for(size, bits), np.uint64)
        at = 0
        for c in chunks:
            c = np.ascontiguousarray(c)
            if at % BLOCK:
                raise ValueError(f"Expected chunks of multiples of {BLOCK} ids before the "
                                 f"last. Got one ending at id {at} instead.")
            if at + c.shape[0] > size:
                raise ValueError(f"Expected {size} ids. Got more instead.")
            if c.shape[0] and (int(c.min()) < 0 or int(c.max()) >> bits):
                raise ValueError(f"Expected ids in [0, 2**{bits}). Got [{int(c.min())}, "
                                 f"{int(c.max())}] among ids {at} to {at + c.shape[0]} instead.")
            fn = _pack_par if c.shape[0] >= 1 << 16 and parallel_safe() else _pack_ser
            fn(c, words, np.int64(bits), np.int64(at // BLOCK * bits))
            at += c.shape[0]
        if at != size:
            raise ValueError(f"Expected {size} ids. Got {at} instead.")
        return cls(words, bits, size)

    @classmethod
    def pack(cls, ids: np.ndarray, num_nodes: int) -> PackedIds:
        """``ids`` (all in ``[0, num_nodes)``) packed in :func:`bits_for` ``(num_nodes)`` bits."""
        ids = np.asarray(ids)
        return cls.from_chunks([ids], ids.shape[0], bits_for(num_nodes))

    @property
    def kernel(self) -> tuple:
        """``(words, bits)``: what numba kernels take (see :func:`nbr`)."""
        return (self.words, np.int64(self.bits))

    @property
    def shape(self) -> tuple[int]:
        """``(size,)``, as the plain array's."""
        return (self.size,)

    @property
    def ndim(self) -> int:
        """1."""
        return 1

    @property
    def dtype(self) -> np.dtype:
        """int64: what reads return."""
        return np.dtype(np.int64)

    @property
    def nbytes(self) -> int:
        """Bytes held (the words)."""
        return self.words.nbytes

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo, hi, step = key.indices(self.size)
            if step != 1:
                return self[np.arange(lo, hi, step)]
            out = np.empty(max(hi - lo, 0), np.int64)
            if out.shape[0]:
                fn = (_unpack_range_par if out.shape[0] >= 1 << 16 and parallel_safe()
                      else _unpack_range_ser)
                fn(self.kernel, np.int64(lo), out)
            return out
        if np.ndim(key) == 0:
            j = int(key)
            j = j + self.size if j < 0 else j
            if not 0 <= j < self.size:
                raise IndexError(f"index {int(key)} is out of bounds for {self.size} ids")
            out = np.empty(1, np.int64)
            _unpack_ser(self.kernel, np.array([j], np.int64), out)
            return out[0]
        pos = np.asarray(key)
        if pos.dtype == np.bool_:
            pos = np.flatnonzero(pos)
        pos = pos.astype(np.int64, copy=False).ravel()
        pos = np.where(pos < 0, pos + self.size, pos)
        if pos.size and (pos.min() < 0 or pos.max() >= self.size):
            raise IndexError(f"Expected positions in [0, {self.size}). Got "
                             f"[{pos.min()}, {pos.max()}] instead.")
        out = np.empty(pos.shape[0], np.int64)
        fn = _unpack_par if pos.shape[0] >= 1 << 16 and parallel_safe() else _unpack_ser
        fn(self.kernel, np.ascontiguousarray(pos), out)
        return out.reshape(np.shape(key)) if np.ndim(key) > 1 else out

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"PackedIds(size={self.size}, bits={self.bits}, nbytes={self.nbytes})"


def words_for(size: int, bits: int) -> int:
    """Words holding ``size`` ids of ``bits`` bits, plus the one :func:`nbr` may read past."""
    return (size * bits + 63) // 64 + 1


def packed_bits(indices, num_nodes: int) -> int:
    """Bits per id of a packed copy of ``indices`` (ids in ``[0, num_nodes)``), or 0 when
    packing saves nothing against the array's own dtype (or it is packed already)."""
    if not hasattr(indices, "dtype") or isinstance(indices, PackedIds):
        return 0
    bits = bits_for(num_nodes)
    return bits if bits < 8 * np.dtype(indices.dtype).itemsize else 0


def pack_ids(indices, num_nodes: int, read=None):
    """A packed copy of ``indices`` (ids in ``[0, num_nodes)``: an array or a memory map),
    read :data:`PIECE` ids at a time by ``read(lo, hi)`` (default: slicing ``indices``), or a
    plain copy when packing saves nothing (:func:`packed_bits`)."""
    bits = packed_bits(indices, num_nodes)
    if not bits:
        return np.array(indices)
    n = int(indices.shape[0])
    read = read or (lambda lo, hi: np.asarray(indices[lo:hi]))
    return PackedIds.from_chunks((read(lo, min(lo + PIECE, n)) for lo in range(0, n, PIECE)),
                                 n, bits)


def kernel_ids(indices):
    """What a kernel takes for ``indices``: the array itself, or a packed copy's tuple."""
    return indices.kernel if isinstance(indices, PackedIds) else indices
