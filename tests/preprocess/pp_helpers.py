"""Plain NumPy / scipy references for the preprocessing tests."""

from __future__ import annotations

import numpy as np


def reference_csc(src, dst, num_src, num_dst, *, coalesce=False, drop_self_loops=False,
                  symmetrize=False):
    """(indptr, indices) by scipy: sources of each destination, sorted, optionally deduplicated."""
    import scipy.sparse as sp

    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if symmetrize:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    if drop_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    if coalesce:
        m = sp.coo_matrix((np.ones(src.shape[0], np.int8), (src, dst)),
                          shape=(num_src, num_dst)).tocsc()
        m.sort_indices()
        return m.indptr.astype(np.int64), m.indices.astype(np.int64)
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, src[order]


def csc_of(store, etype=None):
    indptr, indices = store.csc(etype)
    return np.asarray(indptr), np.asarray(indices).astype(np.int64)


def store_snapshot(path) -> dict:
    """Everything a store holds except timestamps: schema, array list, every file's bytes."""
    import json
    import os

    out = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".preprocess"]
        for f in files:
            full = os.path.join(root, f)
            rel = os.path.relpath(full, path)
            with open(full, "rb") as fh:
                data = fh.read()
            if rel == "zarr.json":
                attrs = json.loads(data)["attributes"]
                for p in attrs.get("provenance", []):
                    p.pop("time", None)
                data = json.dumps(attrs, sort_keys=True).encode()
            out[rel] = data
    return out
