"""The reader/writer contract, one suite run against a local, a memory:// and an HTTP store."""

from __future__ import annotations

import pickle
import uuid

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import featurestore as fs
from graph_helpers import random_csc

N_PAPER, N_AUTHOR, DIM = 3000, 1100, 24


def build(url, rng):
    """A heterogeneous store; returns the reference arrays it was built from."""
    ref = {}
    w = fs.create_store(url, mode="w")
    ref["orig_paper"] = rng.permutation(10 * N_PAPER)[:N_PAPER].astype(np.int64) + 10**12
    w.add_node_type("paper", N_PAPER, orig_ids=ref["orig_paper"])
    w.add_node_type("author", N_AUTHOR)
    w.add_node_type("empty", 0)
    ref["cites"] = random_csc(rng, N_PAPER, N_PAPER, 20000)
    ref["writes"] = random_csc(rng, N_AUTHOR, N_PAPER, 7000)
    w.add_edge_type(("paper", "cites", "paper"), *ref["cites"][:2])
    # indices given as an iterator of blocks
    ind = ref["writes"][1]
    w.add_edge_type(("author", "writes", "paper"), ref["writes"][0],
                    (ind[i:i + 999] for i in range(0, ind.size, 999)))
    w.add_edge_type(("empty", "to", "author"), np.zeros(N_AUTHOR + 1, np.int64),
                    np.zeros(0, np.int64))
    ref["x32"] = rng.standard_normal((N_PAPER, DIM)).astype(np.float32)
    w.add_features("paper", "feat", ref["x32"])
    ref["x16"] = rng.standard_normal((N_AUTHOR, 3 * DIM)).astype(np.float16)
    w.add_features("author", "feat", (ref["x16"][i:i + 100] for i in range(0, N_AUTHOR, 100)))
    w.add_features("paper", "half", ref["x32"], dtype=np.float16)  # cast while writing
    w.add_features("paper", "zstd", ref["x32"], compressors=zarr.codecs.ZstdCodec())
    ref["label"] = rng.integers(-1, 10, N_PAPER)
    w.add_labels("paper", ref["label"])
    ref["year"] = rng.integers(1990, 2021, N_PAPER).astype(np.int16)
    w.add_values("paper", "year", ref["year"])
    ref["train"] = rng.choice(N_PAPER, 500, replace=False)
    w.add_split("train", "paper", ref["train"])
    w.add_split("test", "paper", np.zeros(0, np.int64))
    w.add_provenance("test-build", note="built by the contract suite")
    w.commit()
    return ref


class StoreContract:
    """Subclasses say where the store lives."""

    read_paths = (None,)

    def url(self, tmp_path) -> str:  # where to write
        raise NotImplementedError

    def read_url(self, url) -> str:  # where to read (HTTP: the served copy)
        return url

    @pytest.fixture
    def built(self, tmp_path):
        rng = np.random.default_rng(7)
        url = self.url(tmp_path)
        ref = build(url, rng)
        store = fs.open_store(self.read_url(url))
        yield store, ref
        store.close()

    def test_schema(self, built):
        s, _ = built
        assert s.node_types == ["author", "empty", "paper"]
        assert set(s.edge_types) == {("paper", "cites", "paper"), ("author", "writes", "paper"),
                                     ("empty", "to", "author")}
        assert s.num_nodes("paper") == N_PAPER and s.num_nodes("empty") == 0
        assert s.num_edges(("paper", "cites", "paper")) == 20000
        assert s.num_edges("writes") == 7000
        assert s.feature_names("paper") == ["feat", "half", "zstd"]
        assert s.split_names == ["test", "train"]
        assert s.provenance[-1]["step"] == "test-build"

    def test_csc_matches_scipy(self, built):
        s, ref = built
        for et, key, n_src in ((("paper", "cites", "paper"), "cites", N_PAPER),
                               (("author", "writes", "paper"), "writes", N_AUTHOR)):
            indptr, indices = s.csc(et)
            _, _, src, dst = ref[key]
            m = sp.coo_matrix((np.ones(src.size), (src, dst)), shape=(n_src, N_PAPER)).tocsc()
            m.sum_duplicates()
            got = sp.csc_matrix((np.ones(indices.size), np.array(indices), np.array(indptr)),
                                shape=(n_src, N_PAPER))
            got.sum_duplicates()
            assert (got != m).nnz == 0
            assert indices.dtype == np.int32
        indptr, indices = s.csc(("empty", "to", "author"))
        assert indices.size == 0 and indptr.shape == (N_AUTHOR + 1,)

    @pytest.mark.parametrize("kind", ["random", "unsorted-repeated", "sorted", "empty", "int32",
                                      "uint32", "all", "one"])
    def test_gather_equals_numpy(self, built, kind):
        s, ref = built
        rng = np.random.default_rng(1)
        for nt, name, X in (("paper", "feat", ref["x32"]), ("author", "feat", ref["x16"]),
                            ("paper", "half", ref["x32"].astype(np.float16)),
                            ("paper", "zstd", ref["x32"])):
            n = X.shape[0]
            ids = {"random": rng.integers(0, n, 700),
                   "unsorted-repeated": np.repeat(rng.integers(0, n, 50), 3)[::-1],
                   "sorted": np.sort(rng.choice(n, 300, replace=False)),
                   "empty": np.zeros(0, np.int64),
                   "int32": rng.integers(0, n, 400).astype(np.int32),
                   "uint32": rng.integers(0, n, 400).astype(np.uint32),
                   "all": np.arange(n),
                   "one": np.array([n - 1])}[kind]
            F = s.features(nt, name)
            assert F.shape == X.shape and F.dtype == X.dtype
            for rp in self.read_paths:
                got = F.gather(ids, read_path=rp)
                np.testing.assert_array_equal(got, X[ids])
                out = np.full((ids.size,) + X.shape[1:], 7, X.dtype)
                assert F.gather(ids, out=out, read_path=rp) is out
                np.testing.assert_array_equal(out, X[ids])

    def test_gather_into_torch_buffer(self, built):
        torch = pytest.importorskip("torch")
        s, ref = built
        ids = np.array([5, 1, 5, 2999])
        out = torch.empty((4, DIM), dtype=torch.float32)
        s.features("paper").gather(ids, out=out)
        np.testing.assert_array_equal(out.numpy(), ref["x32"][ids])

    def test_values_labels_splits_orig_ids(self, built):
        s, ref = built
        np.testing.assert_array_equal(s.orig_ids("paper"), ref["orig_paper"])
        np.testing.assert_array_equal(s.orig_ids("author"), np.arange(N_AUTHOR))
        assert s.orig_ids("empty").size == 0
        np.testing.assert_array_equal(s.labels("paper"), ref["label"])
        y = s.values("paper", "year")
        assert y.dtype == np.int16
        np.testing.assert_array_equal(y, ref["year"])
        np.testing.assert_array_equal(s.split("train"), ref["train"])
        np.testing.assert_array_equal(s.split("train", "paper"), ref["train"])
        assert s.split("test", "paper").size == 0

    def test_split_is_the_callers_writable_array(self, built):
        """torch takes a split without its read-only warning, and writing to it changes
        neither the store nor the next split() (on a local store the file is mapped)."""
        import warnings

        torch = pytest.importorskip("torch")
        s, ref = built
        ids = s.split("train")
        assert ids.flags.writeable
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            t = torch.from_numpy(s.split("train", "paper"))
        assert np.array_equal(t.numpy(), ref["train"])
        ids[:] = -1
        np.testing.assert_array_equal(s.split("train"), ref["train"])

    def test_errors(self, built):
        s, _ = built
        with pytest.raises(fs.UnknownNodeTypeError, match="'venue'"):
            s.num_nodes("venue")
        with pytest.raises(KeyError):  # also a KeyError
            s.features("venue")
        with pytest.raises(fs.UnknownNodeTypeError, match="Expected a node type"):
            s.num_nodes()  # ambiguous: three node types
        with pytest.raises(fs.UnknownEdgeTypeError):
            s.csc(("paper", "cited_by", "paper"))
        with pytest.raises(fs.UnknownEdgeTypeError):
            s.csc()
        with pytest.raises(fs.UnknownFeatureError, match="'emb'"):
            s.features("paper", "emb")
        with pytest.raises(fs.UnknownSplitError):
            s.split("valid", "paper")
        F = s.features("paper")
        with pytest.raises(fs.IdsOutOfRangeError, match=f"{N_PAPER}"):
            F.gather([0, N_PAPER])
        with pytest.raises(IndexError, match="-1"):
            F.gather([3, -1])
        with pytest.raises(fs.InvalidIdsError, match="float"):
            F.gather(np.array([1.0, 2.0]))
        with pytest.raises(TypeError, match="1-D"):
            F.gather(np.zeros((2, 2), np.int64))
        with pytest.raises(fs.SchemaError, match="out"):
            F.gather([1, 2], out=np.empty((3, DIM), np.float32))
        with pytest.raises(fs.SchemaError, match="out"):
            F.gather([1, 2], out=np.empty((2, DIM), np.float64))

    def test_pickle_reopens(self, built):
        s, ref = built
        s2 = pickle.loads(pickle.dumps(s))
        np.testing.assert_array_equal(s2.features("paper").gather([3, 2]), ref["x32"][[3, 2]])
        s2.close()

    def test_zarr_reads_the_store(self, built):
        """Format v1 is plain zarr v3: zarr-python reads every array."""
        s, ref = built
        g = zarr.open_group(s.loc.zarr_store(read_only=True), mode="r")
        np.testing.assert_array_equal(g["nodes/paper/features/feat"][:], ref["x32"])
        np.testing.assert_array_equal(g["nodes/author/features/feat"][5:17], ref["x16"][5:17])
        np.testing.assert_array_equal(g["edges/paper__cites__paper/indptr"][:],
                                      ref["cites"][0])


class TestLocalStore(StoreContract):
    read_paths = (None, "auto", "mmap", "pread")

    def url(self, tmp_path):
        return str(tmp_path / "store")

    def test_csc_is_memory_mapped(self, built):
        s, _ = built
        indptr, indices = s.csc(("paper", "cites", "paper"))
        assert not indices.flags.owndata and not indices.flags.writeable


class TestMemoryStore(StoreContract):
    def url(self, tmp_path):
        return f"memory://fs-test-{uuid.uuid4().hex}"


class TestHTTPStore(StoreContract):
    @pytest.fixture(autouse=True)
    def _server(self, http_root):
        self.http = http_root

    def url(self, tmp_path):
        self.name = f"s-{uuid.uuid4().hex}"
        return str(self.http[0] / self.name)

    def read_url(self, url):
        return f"{self.http[1]}/{self.name}"
