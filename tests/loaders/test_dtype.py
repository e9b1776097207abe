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
