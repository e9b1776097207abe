"""A store on S3: written with the writer API, read with ``open_store``, produced by
``featurestore preprocess``, and fed to the loader, against moto's S3 server on loopback.

Needs the ``s3`` extra (``pip install -e '.[s3]'``: s3fs and ``moto[server]``); skipped
without it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

import featurestore as fs  # noqa: E402
from featurestore.remote.lock import LOCK_NAME  # noqa: E402
from featurestore.testing.loopback import serve_s3  # noqa: E402
from graph_helpers import random_csc  # noqa: E402

N_PAPER, N_AUTHOR, DIM = 1200, 500, 24
BUCKET = "graphs"
KEY, SECRET = "testing-key", "testing-secret"


@pytest.fixture(scope="module")
def s3():
    """(endpoint URL, storage_options) of a moto S3 server on 127.0.0.1 (a free port) with
    an empty bucket; stopped after the module."""
    opts, stop = serve_s3(BUCKET, key=KEY, secret=SECRET)
    try:
        yield opts["endpoint_url"], opts
    finally:
        stop()


def build(url, storage_options, rng_seed=7):
    """A heterogeneous store at ``url``; returns the arrays it was built from."""
    rng = np.random.default_rng(rng_seed)
    ref = {}
    w = fs.create_store(url, mode="w", storage_options=storage_options)
    ref["orig_paper"] = rng.permutation(10 * N_PAPER)[:N_PAPER].astype(np.int64) + 10**12
    w.add_node_type("paper", N_PAPER, orig_ids=ref["orig_paper"])
    w.add_node_type("author", N_AUTHOR)
    ref["cites"] = random_csc(rng, N_PAPER, N_PAPER, 9000)
    ref["writes"] = random_csc(rng, N_AUTHOR, N_PAPER, 3000)
    ref["rev_writes"] = random_csc(rng, N_PAPER, N_AUTHOR, 3000)
    w.add_edge_type(("paper", "cites", "paper"), *ref["cites"][:2])
    w.add_edge_type(("author", "writes", "paper"), *ref["writes"][:2])
    w.add_edge_type(("paper", "rev_writes", "author"), *ref["rev_writes"][:2])
    ref["x32"] = rng.standard_normal((N_PAPER, DIM)).astype(np.float32)
    w.add_features("paper", "feat", ref["x32"])
    w.add_features("paper", "zstd", ref["x32"], compressors=zarr.codecs.ZstdCodec())
    ref["x16"] = rng.standard_normal((N_AUTHOR, 2 * DIM)).astype(np.float16)
    w.add_features("author", "feat", ref["x16"])
    ref["label"] = rng.integers(0, 5, N_PAPER)
    w.add_labels("paper", ref["label"])
    ref["train"] = np.sort(rng.choice(N_PAPER, 400, replace=False))
    w.add_split("train", "paper", ref["train"])
    w.commit()
    return ref


@pytest.fixture(scope="module")
def stores(s3, tmp_path_factory):
    """The same store written twice with the writer API: to S3 and to a local directory."""
    _, opts = s3
    url = f"s3://{BUCKET}/path/to/store"
    local = str(tmp_path_factory.mktemp("s3-local") / "store")
    ref = build(url, opts)
    build(local, None)
    return url, local, opts, ref


def test_writer_writes_the_local_layout_to_s3(stores):
    import s3fs

    url, local, opts, _ = stores
    s3 = s3fs.S3FileSystem(**opts)
    remote = {p.split("path/to/store/", 1)[1] for p in s3.find(url)}
    here = {os.path.relpath(os.path.join(d, f), local).replace(os.sep, "/")
            for d, _, files in os.walk(local) for f in files}
    here.discard(LOCK_NAME)  # a local store keeps its (unlocked) fcntl lock file
    assert remote == here  # the same objects; the lock object is gone, no temporary file
    for key in sorted(here):
        if key.endswith("zarr.json"):
            continue  # metadata holds the write time and generation id
        with open(os.path.join(local, key), "rb") as f:
            assert s3.cat_file(f"{url}/{key}") == f.read(), key


def test_open_store_on_s3_reads_what_was_written(stores):
    url, local, opts, ref = stores
    with fs.open_store(url, storage_options=opts) as s, fs.open_store(local) as loc:
        assert s.node_types == loc.node_types == ["author", "paper"]
        assert set(s.edge_types) == set(loc.edge_types)
        assert s.feature_names("paper") == ["feat", "zstd"]
        assert s.num_edges(("paper", "cites", "paper")) == 9000
        for et, key in ((("paper", "cites", "paper"), "cites"),
                        (("author", "writes", "paper"), "writes"),
                        (("paper", "rev_writes", "author"), "rev_writes")):
            indptr, indices = s.csc(et)
            np.testing.assert_array_equal(np.asarray(indptr), ref[key][0])
            np.testing.assert_array_equal(np.asarray(indices), ref[key][1])
        np.testing.assert_array_equal(np.asarray(s.labels("paper")), ref["label"])
        np.testing.assert_array_equal(np.asarray(s.split("train")), ref["train"])
        np.testing.assert_array_equal(np.asarray(s.orig_ids("paper")), ref["orig_paper"])
        np.testing.assert_array_equal(np.asarray(s.orig_ids("author")), np.arange(N_AUTHOR))


@pytest.mark.parametrize("kind", ["random", "unsorted-repeated", "sorted", "empty", "all"])
def test_gathers_from_s3_equal_the_local_store(stores, kind):
    url, local, opts, ref = stores
    rng = np.random.default_rng(3)
    with fs.open_store(url, storage_options=opts) as s, fs.open_store(local) as loc:
        for nt, name, X in (("paper", "feat", ref["x32"]), ("paper", "zstd", ref["x32"]),
                            ("author", "feat", ref["x16"])):
            n = X.shape[0]
            ids = {"random": rng.integers(0, n, 300),
                   "unsorted-repeated": np.repeat(rng.integers(0, n, 40), 3)[::-1],
                   "sorted": np.sort(rng.choice(n, 200, replace=False)),
                   "empty": np.zeros(0, np.int64),
                   "all": np.arange(n)}[kind]
            F = s.features(nt, name)
            assert F.shape == X.shape and F.dtype == X.dtype
            got = F.gather(ids)
            np.testing.assert_array_equal(got, X[ids])
            np.testing.assert_array_equal(got, loc.features(nt, name).gather(ids))
            out = np.full((ids.size,) + X.shape[1:], 7, X.dtype)
            assert F.gather(ids, out=out) is out
            np.testing.assert_array_equal(out, X[ids])


def test_missing_s3_store_is_a_named_error(s3):
    _, opts = s3
    url = f"s3://{BUCKET}/no/store/here"
    with pytest.raises(fs.FeatureStoreError, match="no/store/here"):
        fs.open_store(url, storage_options=opts)


def test_preprocess_edges_cli_writes_to_s3(s3, tmp_path, monkeypatch):
    """``featurestore preprocess edges EDGES s3://...`` with the endpoint and credentials in
    the standard AWS environment variables (the CLI has no storage options) equals the same
    command's local store and a NumPy CSC."""
    import s3fs

    from featurestore.cli import main

    endpoint, opts = s3
    rng = np.random.default_rng(5)
    n, m = 700, 6000
    edges = rng.integers(0, n, (2, m))
    np.save(tmp_path / "edges.npy", edges)
    for k, v in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": KEY,
                 "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    s3fs.S3FileSystem.clear_instance_cache()  # a fresh client reads the environment
    url = f"s3://{BUCKET}/edges/store"
    common = ["--num-nodes", str(n), "--no-progress", "--memory", "64MiB"]
    try:
        assert main(["preprocess", "edges", str(tmp_path / "edges.npy"), url, *common]) == 0
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
    assert main(["preprocess", "edges", str(tmp_path / "edges.npy"), str(tmp_path / "local"),
                 *common]) == 0
    src, dst = edges
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    with fs.open_store(url, storage_options=opts) as s, \
            fs.open_store(str(tmp_path / "local")) as loc:
        assert s.num_nodes() == n and s.num_edges() == m
        p, i = (np.asarray(a) for a in s.csc())
        lp, li = (np.asarray(a) for a in loc.csc())
        np.testing.assert_array_equal(p, indptr)
        np.testing.assert_array_equal(p, lp)
        np.testing.assert_array_equal(i, li)
        for v in range(0, n, 37):  # each destination's sources, as a multiset
            np.testing.assert_array_equal(np.sort(i[p[v]:p[v + 1]]),
                                          np.sort(src[order][indptr[v]:indptr[v + 1]]))


def test_loader_batches_from_s3_equal_the_local_copy(stores):
    """Same seed, same batches: sampled ids, edges, edge ids, features and labels, for
    rank 1 of 2 (the share a data-parallel rank reads)."""
    import torch

    from loaders import NeighborLoader

    url, local, opts, ref = stores
    with fs.open_store(url, storage_options=opts) as s, fs.open_store(local) as loc:
        kw = dict(batch_size=64, shuffle=True, seed=11, device="cpu", rank=1, world_size=2)
        got = list(NeighborLoader(s, [4, 3], ("paper", "train"), **kw))
        want = list(NeighborLoader(loc, [4, 3], ("paper", "train"), **kw))
    assert len(got) == len(want) == -(-200 // 64)
    for a, b in zip(got, want):
        sa, sb = a.subgraph, b.subgraph
        assert sa.batch_size == sb.batch_size
        np.testing.assert_array_equal(sa.seeds, sb.seeds)
        for t in ("paper", "author"):
            np.testing.assert_array_equal(sa.node[t], sb.node[t])
            assert torch.equal(a.x[t], b.x[t])
        np.testing.assert_array_equal(a.x["paper"].numpy(), ref["x32"][sa.node["paper"]])
        np.testing.assert_array_equal(a.x["author"].numpy(), ref["x16"][sa.node["author"]])
        np.testing.assert_array_equal(a.y.numpy(), ref["label"][sa.seeds])
        assert set(sa.row) == set(sb.row) and len(sa.row) == 3
        for et in sa.row:
            for f in ("row", "col", "edge"):
                np.testing.assert_array_equal(getattr(sa, f)[et], getattr(sb, f)[et])
