"""Each step's variant for a job: in this process, or as Dask tasks when the job has a client.

The steps (:mod:`preprocess.steps`) know nothing of Dask and their Dask variants
(:mod:`preprocess.dask`) build on them; a job's steps call the functions here with the job's
``distributed.Client`` (or None), and get the step's result either way (the store is byte for
byte the same).
"""

from __future__ import annotations

import logging

import numpy as np

from preprocess.dask.csc import DaskCscPasses
from preprocess.dask.features import dask_feature_source, write_features_dask
from preprocess.steps import csc, features

__all__ = ["build_csc", "coo_to_csc", "write_features"]

log = logging.getLogger(__name__)


def _passes(dask) -> csc.CscPasses | None:
    return DaskCscPasses(dask) if dask is not None else None


def coo_to_csc(source, *, dask=None, **kw) -> dict:
    """:func:`preprocess.steps.csc.coo_to_csc` (same arguments); with ``dask`` (a
    ``distributed.Client``) its histogram and range sorts run as Dask tasks
    (:class:`preprocess.dask.csc.DaskCscPasses`; ``tmpdir`` must be storage every worker sees).
    """
    return csc.coo_to_csc(source, passes=_passes(dask), **kw)


def build_csc(writer, etype, source, *, dask=None, **kw) -> dict:
    """:func:`preprocess.steps.csc.build_csc` (same arguments); with ``dask`` (a
    ``distributed.Client``) the passes over the input run as Dask tasks, as in
    :func:`coo_to_csc`."""
    return csc.build_csc(writer, etype, source, passes=_passes(dask), **kw)


def write_features(writer, ntype: str, name: str, source, *, dtype=None,
                   perm: np.ndarray | None = None, budget_bytes: int = 1 << 30, tmpdir=None,
                   compressors=None, progress: bool = True, dask=None) -> dict:
    """:func:`preprocess.steps.features.write_features` (same arguments); with ``dask`` (a
    ``distributed.Client``) the row blocks are Dask tasks
    (:func:`preprocess.dask.features.write_features_dask`; ``tmpdir`` must then be shared by
    the workers when the store is remote) when the source is a memory-mapped ``.npy`` or a
    ``.npy`` on a URL, and there are no ``compressors``; the store is the same.
    """
    kw = dict(dtype=dtype, perm=perm, budget_bytes=budget_bytes, tmpdir=tmpdir,
              compressors=compressors, progress=progress)
    if dask is None or compressors is not None:
        return features.write_features(writer, ntype, name, source, **kw)
    features.check_feature_rows(writer, ntype, name, source)
    out_dtype = np.dtype(dtype) if dtype is not None else source.dtype
    src_file, perm_file, why = dask_feature_source(source, perm)
    if not why:
        return write_features_dask(dask, writer, ntype, name, source, src=src_file,
                                   perm=perm_file, dtype=out_dtype, budget_bytes=budget_bytes,
                                   scratch=tmpdir, progress=progress)
    log.info("%s/%s: written in this process, not as Dask tasks: %s", ntype, name, why)
    return features.write_features(writer, ntype, name, source, **kw)
