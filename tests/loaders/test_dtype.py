"""``dtype=``: an fp16 store's rows reach the batch cast, equal to numpy's ``astype`` of the
same rows, through every gather path (plain, cached hits and misses, chunked device path)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from loaders import NeighborLoader
from loaders.memory.cast import cast_rows, resolve_dtype
from loaders.memory.budget import MARGIN_MIN
from graph_helpers import probe_plan, resident_topology_bytes
from loaders.memory.cache import FeatureCache
from loaders.errors import LoaderArgumentError


@pytest.mark.parametrize("src,dst", [(np.float16, np.float32), (np.float16, np.float64),
                                     (np.float32, np.float64), (np.int8, np.float32),
                                     (np.float32, np.float16), (np.float64, np.float32)])
@pytest.mark.parametrize("n", [50, 40000])
@pytest.mark.parametrize("parallel", [False, True])
def test_cast_rows_matches_numpy(src, dst, n, parallel, monkeypatch):
    import loaders.memory.cast as c

    monkeypatch.setattr(c, "_PARALLEL_MIN_BYTES", 0 if parallel else 1 << 60)
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((300, 3, 4)) * 50).astype(src)
    if src == np.float16:  # every special value too: inf, nan, subnormals, -0
        a.reshape(-1)[:6] = np.array([np.inf, -np.inf, np.nan, 6e-8, -0.0, 65504], np.float16)
    pos = rng.integers(-1, 300, n).astype(np.int32)
    out = np.full((n, 3, 4), 7, dst)
    cast_rows(a, pos, out)
    want = np.full((n, 3, 4), 7, dst)
    want[pos >= 0] = a[pos[pos >= 0]].astype(dst)
    np.testing.assert_array_equal(out, want)  # nan == nan here, -0.0 == 0.0 sign checked below
    assert np.array_equal(np.signbit(out), np.signbit(want))
    at = rng.permutation(n)
    out2 = np.zeros((n, 3, 4), dst)
    cast_rows(a, pos.astype(np.int64), out2, at)
    want2 = np.zeros((n, 3, 4), dst)
    want2[at[pos >= 0]] = a[pos[pos >= 0]].astype(dst)
    np.testing.assert_array_equal(out2, want2)


def test_dtype_argument_forms_and_refusals():
    f16 = np.dtype(np.float16)
    for d in (torch.float32, np.float32, "float32", np.dtype("float32")):
        assert resolve_dtype(d, f16, "x") == np.float32
    assert resolve_dtype(None, f16, "x") is None and resolve_dtype("float16", f16, "x") is None
    big = resolve_dtype(">f4", f16, "x")  # another byte order: torch takes native only
    assert big == np.float32 and big.isnative
    for bad in (torch.int64, np.int32, "bool", torch.bool, np.complex64, torch.bfloat16, "nope"):
        with pytest.raises(LoaderArgumentError, match="dtype"):
            resolve_dtype(bad, f16, "x")


def _loader_kw():
    return dict(num_neighbors=[3, 2], input_nodes=("paper", "train"), batch_size=100,
                device="cpu", staging_bytes=4096, dtype=torch.float32)


def _check(ld, F):
    rows = 0
    for mb in ld:
        ids = mb.subgraph.node["paper"]
        x = mb.x["paper"]
        assert x.dtype == torch.float32
        np.testing.assert_array_equal(x.numpy(), F[ids].astype(np.float32))
        rows += ids.shape[0]
    return rows


@pytest.mark.parametrize("chunked", [False, True])
def test_fp16_store_reaches_the_batch_as_fp32(hetero_store, chunked):
    F = hetero_store.features("paper", "feat").numpy()
    assert F.dtype == np.float16
    ld = NeighborLoader(hetero_store, **_loader_kw())
    ld._chunked = chunked  # the device path's staging ring, on the CPU
    assert _check(ld, F) > 0 and ld.feature_dtypes == {"paper": np.float32}
    # the pyg output too, and a loader without the cast stays fp16
    batch = next(iter(NeighborLoader(hetero_store, output="pyg", **_loader_kw())))
    assert batch["paper"].x.dtype == torch.float32
    batch = next(iter(NeighborLoader(hetero_store, **{**_loader_kw(), "dtype": None})))
    assert batch.x["paper"].dtype == torch.float16


@pytest.mark.parametrize("cache", ["presample", None])
@pytest.mark.parametrize("chunked", [False, True])
def test_fp16_cached_hits_and_misses_cast(hetero_store, cache, chunked):
    F = hetero_store.features("paper", "feat").numpy()
    kw = _loader_kw()
    probe = SimpleNamespace(plan=probe_plan(hetero_store, **kw))
    fixed = (probe.plan.batch_bytes * 2 + probe.plan.sampler_bytes + probe.plan.reader_bytes
             + MARGIN_MIN + resident_topology_bytes(hetero_store))
    ld = NeighborLoader(hetero_store, memory=fixed + F.nbytes // 2, cache=cache, **kw)
    assert not ld.plan.fits and "paper" in ld.caches
    ld._chunked = chunked
    rows = _check(ld, F)
    st = ld.stats
    assert st.hits + st.misses == rows and st.misses > 0 and (st.hits > 0) == bool(cache)


def test_feature_cache_casts_large_batches(hetero_store):
    """The large-batch branch: misses read on the helper thread, hits cast in parallel."""
    f = hetero_store.features("paper", "feat")
    F = f.numpy()
    rng = np.random.default_rng(3)
    c = FeatureCache(f, np.sort(rng.choice(F.shape[0], F.shape[0] // 2, replace=False)))
    ids = rng.integers(0, F.shape[0], 40000)
    for stage in (None, np.empty((37,) + F.shape[1:], F.dtype)):
        out = np.empty((ids.shape[0],) + F.shape[1:], np.float32)
        c.gather(ids, out, stage=stage)
        np.testing.assert_array_equal(out, F[ids].astype(np.float32))
    assert c.stats.hits > 0 and c.stats.misses > 0
    c.close()


def test_the_memory_plan_counts_batches_in_the_cast_dtype(hetero_store):
    """fp16 rows cast to fp32 take twice the batch buffer memory; the cache's rows stay fp16."""
    kw = _loader_kw()
    a = probe_plan(hetero_store, **{**kw, "dtype": None})
    b = probe_plan(hetero_store, **kw)
    assert b.batch_bytes == 2 * a.batch_bytes and b.feature_bytes == a.feature_bytes


def test_pyg_and_model_batches_get_fp32_by_default(hetero_store, homo_store):
    """The default ``dtype="auto"``: an fp16 store's rows reach a ``"pyg"`` batch as float32
    (a PyG model's layers are float32: fp16 input fails in its first matmul), equal to
    numpy's cast; ``"raw"`` batches and ``dtype=None`` keep fp16; an fp32 store is not cast."""
    F = hetero_store.features("paper", "feat").numpy()
    kw = dict(num_neighbors=[3, 2], input_nodes=("paper", "train"), batch_size=100,
              device="cpu")
    ld = NeighborLoader(hetero_store, output="pyg", **kw)
    assert ld.feature_dtypes == {"paper": np.float32}
    batch = next(iter(ld))
    x = batch["paper"].x
    assert x.dtype == torch.float32
    np.testing.assert_array_equal(x.numpy(), F[batch["paper"].n_id.numpy()].astype(np.float32))
    layer = torch.nn.Linear(F.shape[1], 4)  # a layer as PyG's and DGL's make them: fp32
    assert layer(x).dtype == torch.float32
    with pytest.raises(RuntimeError):  # what the fp16 batch met before
        layer(x.half())
    raw = next(iter(NeighborLoader(hetero_store, output="raw", **kw)))
    assert raw.x["paper"].dtype == torch.float16
    kept = next(iter(NeighborLoader(hetero_store, output="pyg", dtype=None, **kw)))
    assert kept["paper"].x.dtype == torch.float16
    homo = NeighborLoader(homo_store, [3, 2], "train", batch_size=64, device="cpu",
                          output="pyg")
    assert homo.gatherer.casts == {"node": None}
    assert next(iter(homo)).x.dtype == torch.float32


def test_auto_casts_fp16_for_model_outputs_only():
    f16, f32, f64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
    assert resolve_dtype("auto", f16, "x", "pyg") == resolve_dtype("auto", f16, "x", "dgl") == f32
    assert resolve_dtype("auto", f16, "x", "raw") is None
    assert resolve_dtype("auto", f32, "x", "pyg") is None
    assert resolve_dtype("auto", f64, "x", "dgl") is None


def test_pyg_views_default_to_fp32(hetero_store_path):
    """A PyG view (``OGB_MAG(...)[0]``) makes ``output="pyg"`` the default: fp32 too."""
    from loaders.datasets import StoreData

    import featurestore as fs

    with fs.open_store(hetero_store_path) as s:
        ld = NeighborLoader(StoreData(s), [3, 2], ("paper", "train"), batch_size=50,
                            device="cpu")
        assert next(iter(ld))["paper"].x.dtype == torch.float32


def test_the_default_cast_is_planned_at_its_width(hetero_store):
    """The loader's plan counts the default cast's batch buffers at fp32 (twice the store's
    fp16 rows) and the cache's rows at fp16; ``featurestore plan`` counts the same."""
    from loaders.memory import plan as P

    kw = dict(num_neighbors=[3, 2], input_nodes=("paper", "train"), batch_size=100,
              device="cpu")
    raw = probe_plan(hetero_store, output="raw", **kw)
    pyg = probe_plan(hetero_store, output="pyg", **kw)
    kept = probe_plan(hetero_store, output="pyg", dtype=None, **kw)
    assert pyg.batch_bytes == 2 * raw.batch_bytes == 2 * kept.batch_bytes
    assert pyg.feature_bytes == raw.feature_bytes
    dim = hetero_store.features("paper", "feat").shape[1]
    common = dict(batch_size=256, memory=2 << 30, read_iops=None, interpreter_bytes=0,
                  batches=4)
    p = {o: P.plan(hetero_store, "paper:train", [4, 2], output=o, **common).loader_plan
         for o in ("raw", "pyg")}
    rows = p["raw"]["batch_rows"]
    assert set(rows) == {"paper"} and p["pyg"]["batch_rows"] == rows  # fp16 x dim, fp32 x dim
    assert p["raw"]["batch_bytes"] == rows["paper"] * dim * 2
    assert p["pyg"]["batch_bytes"] == rows["paper"] * dim * 4
