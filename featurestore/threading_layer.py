"""numba's threading layer for this project's kernels: fork-safe by default.

numba picks its threading layer when the first parallel kernel runs: TBB, else GNU OpenMP,
else its own ``workqueue``. GNU OpenMP does not survive ``fork``: a PyTorch ``DataLoader``
worker forked after the parent ran a torch CPU op (torch's OpenMP pool) or a parallel numba
kernel hangs, or dies with "fork() called from a process already using GNU OpenMP". And
``workqueue`` aborts the process on concurrent parallel regions, so every kernel that may run
beside another (the gather, the sampler, the cache, the casts, the negative draws) runs its
serial twin under it (:func:`parallel_safe`).

:func:`choose` (run by ``import featurestore``, which ``loaders`` and ``preprocess`` import
first) therefore asks numba for its ``"forksafe"`` layer,
which is TBB, falling back to ``workqueue`` where TBB cannot be loaded. TBB comes from the
``tbb`` wheel (a dependency of this package); pip installs its ``libtbb.so.12`` under
``<prefix>/lib``, which is not on the dynamic loader's path, so it is loaded here by full path
first (numba's ``tbbpool`` extension then links against it by name).

A user's own choice wins: with ``NUMBA_THREADING_LAYER`` set in the environment (or
``numba.config.THREADING_LAYER`` set before ``import featurestore``), or once a parallel
kernel has run (the layer is then fixed for the process), nothing is changed.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading

import numba
import numpy as np

__all__ = ["choose", "tbb_loadable", "parallel_safe", "DEFAULT_LAYER"]

log = logging.getLogger(__name__)

#: what the package asks numba for when the user did not choose: TBB, else workqueue.
DEFAULT_LAYER = "forksafe"

_LIB = "libtbb.so.12" if sys.platform.startswith("linux") else None


def _candidate_dirs():
    """Where pip puts the tbb wheel's libraries: ``<prefix>/lib``, else (a ``--user`` or
    ``--target`` install) where the wheel's RECORD says (read only when needed)."""
    seen = set()
    for d in (os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")):
        if d not in seen:
            seen.add(d)
            yield d
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        files = distribution("tbb").files or ()
    except (ImportError, PackageNotFoundError):
        return
    for f in files:
        if f.name == _LIB:
            d = str(f.locate().parent)
            if d not in seen:
                seen.add(d)
                yield d


def tbb_loadable() -> bool:
    """Whether numba's TBB layer can load, loading pip's ``libtbb`` by path if needed."""
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401
        return True
    except ImportError:
        pass
    if _LIB is None:
        return False
    for d in _candidate_dirs():
        path = os.path.join(d, _LIB)
        if not os.path.exists(path):
            continue
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            from numba.np.ufunc import tbbpool  # noqa: F401,F811
            return True
        except (OSError, ImportError) as e:
            log.debug("TBB at %s did not load: %s", path, e)
    return False


def _launched() -> bool:
    from numba.np.ufunc import parallel

    return bool(getattr(parallel, "_is_initialized", False))


def choose() -> str | None:
    """Set numba's threading layer to :data:`DEFAULT_LAYER` unless the user chose one.

    Returns the layer asked for, or ``None`` when it was left alone (``NUMBA_THREADING_LAYER``
    set, or the layer already running).
    """
    tbb_loadable()  # also when the user asked for tbb (or "safe"): pip's libtbb is off the path
    # set in the environment, in code or in .numba_config.yaml
    if os.environ.get("NUMBA_THREADING_LAYER") or \
            str(numba.config.THREADING_LAYER).lower() not in ("default", ""):
        return None
    if _launched():
        try:
            layer = numba.threading_layer()
        except ValueError:  # pragma: no cover
            layer = "?"
        if layer == "omp":
            log.warning("numba's threading layer is already GNU OpenMP (a parallel kernel ran "
                        "before 'import featurestore'): DataLoader workers forked from this "
                        "process may hang. Import featurestore first, or set "
                        "NUMBA_THREADING_LAYER=tbb.")
        return None
    numba.config.THREADING_LAYER = DEFAULT_LAYER
    return DEFAULT_LAYER


_SAFE: bool | None = None
_PROBE_LOCK = threading.Lock()


@numba.njit(nogil=True, parallel=True, cache=True)
def _probe(x):
    for i in numba.prange(x.shape[0]):
        x[i] = i


def parallel_safe() -> bool:
    """Whether parallel kernels may run from several threads at once.

    False under numba's ``workqueue`` layer (no TBB: a platform without the ``tbb`` wheel),
    which aborts the process on concurrent parallel regions ("Concurrent access has been
    detected"): two loaders iterated together, or a loader's stages overlapping. Callers then
    run their serial kernels. The first call starts numba's pool (fixing the layer).
    """
    global _SAFE
    if _SAFE is None:
        with _PROBE_LOCK:  # two threads probing at once would be the concurrent access itself
            if _SAFE is None:
                _probe(np.zeros(2, np.int64))
                _SAFE = numba.threading_layer() != "workqueue"
    return _SAFE
