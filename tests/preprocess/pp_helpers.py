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
    """Everything a store holds except timestamps, the generation id (and the topology
    record that carries it and file mtimes) and the lock: schema,
    array list, every file's bytes."""
    import json
    import os

    out = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".preprocess"]
        for f in files:
            if f == ".featurestore.lock":  # the writer lock: pid and time of the last writer
                continue
            full = os.path.join(root, f)
            rel = os.path.relpath(full, path)
            with open(full, "rb") as fh:
                data = fh.read()
            if rel == "zarr.json":
                attrs = json.loads(data)["attributes"]
                for p in attrs.get("provenance", []):
                    p.pop("time", None)
                attrs.pop("generation", None)  # a fresh id at every commit
                attrs.pop("topology_checks", None)  # holds the generation and file mtimes
                data = json.dumps(attrs, sort_keys=True).encode()
            out[rel] = data
    return out


TOY_SPEC = """
name: toy
reorder: {reorder}
nodes:
  paper:
    ids: paper_ids.npy
    features:
      feat: {{path: feat.npy, dtype: float16}}
    values:
      year: year.npy
    labels: label.npy
  author:
    id_kind: string
    ids: {{path: authors.parquet, column: name}}
    features:
      emb: {{path: author_feat.parquet, column: emb}}
  venue:
    count: 7
edges:
  - relation: [paper, cites, paper]
    paths: [cites.parquet, cites2.npy]
    undirected: true
  - relation: author:writes:paper
    path: writes.csv
    src: author
    dst: paper
    reverse: true
  - relation: [paper, in, venue]
    path: venue.npy
splits:
  train: {{paper: train.npy}}
  valid: {{paper: valid.npy}}
options:
  coalesce: true
"""


def make_toy_dataset(root, reorder: str = "degree", seed: int = 0, n_paper: int = 400,
                     n_author: int = 150, n_cites: int = 3000):
    """A heterogeneous dataset with sparse int64 paper ids and string author ids; returns
    (spec path, the raw data as a dict)."""
    import os

    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(seed)
    pid = rng.choice(10**12, n_paper, replace=False).astype(np.int64)
    np.save(os.path.join(root, "paper_ids.npy"), pid)
    aid = [f"author-{i}" for i in rng.permutation(n_author)]
    pq.write_table(pa.table({"name": aid}), os.path.join(root, "authors.parquet"))
    cs = pid[rng.integers(0, n_paper, n_cites)]
    cd = pid[rng.integers(0, n_paper, n_cites)]
    half = n_cites // 2
    pq.write_table(pa.table({"src": cs[:half], "dst": cd[:half]}),
                   os.path.join(root, "cites.parquet"), row_group_size=500)
    np.save(os.path.join(root, "cites2.npy"), np.stack([cs[half:], cd[half:]]))
    wa = [aid[i] for i in rng.integers(0, n_author, 900)]
    wp = pid[rng.integers(0, n_paper, 900)]
    pcsv.write_csv(pa.table({"author": wa, "paper": wp}), os.path.join(root, "writes.csv"))
    venue = np.stack([pid[rng.integers(0, n_paper, 300)], rng.integers(0, 7, 300)])
    np.save(os.path.join(root, "venue.npy"), venue)
    feat = rng.standard_normal((n_paper, 8)).astype(np.float32)
    np.save(os.path.join(root, "feat.npy"), feat)
    year = rng.integers(1990, 2020, n_paper)
    np.save(os.path.join(root, "year.npy"), year)
    label = rng.integers(0, 5, n_paper).astype(np.float64)
    label[::3] = np.nan
    np.save(os.path.join(root, "label.npy"), label)
    af = rng.standard_normal((n_author, 4)).astype(np.float32)
    pq.write_table(pa.table({"name": aid, "emb": pa.FixedSizeListArray.from_arrays(
        pa.array(af.reshape(-1)), 4)}), os.path.join(root, "author_feat.parquet"))
    np.save(os.path.join(root, "train.npy"), pid[:60])
    np.save(os.path.join(root, "valid.npy"), pid[60:80])
    spec = os.path.join(root, "spec.yaml")
    with open(spec, "w") as f:
        f.write(TOY_SPEC.format(reorder=reorder))
    raw = dict(pid=pid, aid=aid, cites=(cs, cd), writes=(wa, wp), venue=venue, feat=feat,
               year=year, label=label, af=af)
    return spec, raw
