"""Counter-based random numbers for the samplers: splitmix64, in numba and in plain Python.

Every random draw is a pure function of ``(seed, epoch, batch, layer, edge type, position of
the destination node in its frontier, draw number)``, so a batch does not depend on how many
threads sample it or in which order they run. The Python twin (:func:`mix_py` and friends)
defines the same stream for the NumPy reference sampler.
"""

from __future__ import annotations

import numba
import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
MASK = (1 << 64) - 1

_GOLDEN_U = np.uint64(GOLDEN)
_M1_U = np.uint64(_M1)
_M2_U = np.uint64(_M2)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


# -- plain Python twin ---------------------------------------------------------------------
def mix_py(z: int) -> int:
    """splitmix64's finaliser on a Python int (taken modulo 2**64)."""
    z &= MASK
    z = ((z ^ (z >> 30)) * _M1) & MASK
    z = ((z ^ (z >> 27)) * _M2) & MASK
    return z ^ (z >> 31)


def batch_key(seed: int, epoch: int, batch: int) -> int:
    """The key of batch ``batch`` of epoch ``epoch`` of a run seeded with ``seed``."""
    return mix_py(mix_py(mix_py(seed & MASK) ^ (epoch & MASK)) ^ (batch & MASK))


def layer_key(key: int, layer: int, etype_index: int) -> int:
    """The key of one (layer, edge type) sampling step of a batch."""
    return mix_py(key ^ mix_py((layer << 16) | etype_index))


def node_state_py(key: int, i: int) -> int:
    """Start state of the draws for the ``i``-th destination node of a frontier."""
    return mix_py((key + i * GOLDEN) & MASK)


# -- numba ---------------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True, inline="always")
def mix(z):
    """splitmix64's finaliser on a uint64."""
    z = (z ^ (z >> _S30)) * _M1_U
    z = (z ^ (z >> _S27)) * _M2_U
    return z ^ (z >> _S31)


@numba.njit(nogil=True, cache=True, inline="always")
def node_state(key, i):
    """The RNG state of item ``i`` under ``key``."""
    return mix(key + np.uint64(i) * _GOLDEN_U)


@numba.njit(nogil=True, cache=True, inline="always")
def next_below(state, n):
    """Advance ``state``; return ``(new_state, draw in [0, n))``."""
    state = state + _GOLDEN_U
    return state, np.int64(mix(state) % np.uint64(n))
