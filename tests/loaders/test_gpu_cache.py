"""The GPU tier (loaders.memory.gpu_cache) on the CPU: the rows it returns against plain
indexing of the feature matrix, its hit counts against a brute-force count, bad rows refused."""

import numpy as np
import pytest
import torch

from loaders.memory.gpu_cache import GpuTier, gpu_tier_rows
from graph_helpers import probe_plan


def _feature(n=1000, d=8, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32))


def _fill_from(x):
    def fill(ids, out):
        out.copy_(x[torch.from_numpy(np.asarray(ids, dtype=np.int64))])
    return fill


@pytest.mark.parametrize("k", [0, 1, 37, 1000])
def test_gather_equals_indexing(k):
    x = _feature()
    rng = np.random.default_rng(k)
    rows = rng.permutation(x.shape[0])[:k]
    tier = GpuTier(x.shape[0], rows, _fill_from(x), (8,), torch.float32, "cpu", chunk_rows=16)
    assert len(tier) == k and tier.nbytes == k * 8 * 4
    ids = rng.integers(0, x.shape[0], 5000)
    out = torch.full((ids.size, 8), float("nan"))
    filled = []

    def fill_misses(miss_ids, miss_out):
        filled.append(miss_ids.copy())
        _fill_from(x)(miss_ids, miss_out)

    tier.gather(ids, out, fill_misses)
    assert torch.equal(out, x[torch.from_numpy(ids)])
    held = np.isin(ids, rows)
    assert tier.stats.hits == int(held.sum()) and tier.stats.misses == int((~held).sum())
    assert tier.stats.saved_bytes == int(held.sum()) * 32
    missed = np.concatenate(filled) if filled else np.empty(0, np.int64)
    assert np.array_equal(np.sort(missed), np.sort(ids[~held]))  # only misses cross the link
    assert np.array_equal(tier.lookup(rows), np.arange(k))


def test_bad_rows_refused():
    x = _feature(10)
    with pytest.raises(IndexError):
        GpuTier(10, np.array([3, 10]), _fill_from(x), (8,), torch.float32, "cpu")
    with pytest.raises(ValueError):
        GpuTier(10, np.array([3, 3]), _fill_from(x), (8,), torch.float32, "cpu")


def test_tier_rows_from_budget():
    assert gpu_tier_rows(0, 1536, 100) == 0
    assert gpu_tier_rows(1536 * 10 + 5, 1536, 100) == 10
    assert gpu_tier_rows(1 << 40, 1536, 100) == 100
    with pytest.raises(ValueError):
        gpu_tier_rows(-1, 4, 10)


# -- in the loader: the device path (run on the CPU) with and without the tier --------------
@pytest.mark.parametrize("budget,dtype,memory", [("40KiB", None, None), (10**9, None, None),
                                                 ("40KiB", torch.float16, None),
                                                 ("40KiB", None, "half the features")])
def test_loader_batches_equal_with_tier(homo_store, budget, dtype, memory):
    """Batches through the device sink with a GPU tier equal the plain loader's (features,
    labels, edges), the tier serves hits, and only its misses are copied host to device."""
    from loaders import NeighborLoader

    kw = dict(batch_size=200, shuffle=True, seed=3, device="cpu", dtype=dtype)
    if memory:  # the features do not fit: the loader's own needs plus half of them
        plan = probe_plan(homo_store, [5, 3], "train", **kw)
        memory = plan.needed_bytes + plan.feature_bytes // 2
    kw["memory"] = memory
    ld = NeighborLoader(homo_store, [5, 3], "train", gpu_cache_bytes=budget, **kw)
    ld._chunked = True
    plain = NeighborLoader(homo_store, [5, 3], "train", **kw)
    plain._chunked = True
    ref = NeighborLoader(homo_store, [5, 3], "train", **kw)  # host path, no tier
    tier = ld.gatherer.gpu_tiers["node"]
    F = torch.from_numpy(np.array(homo_store.features(None, "feat").numpy()))
    want_rows = min(F.shape[0], (40 << 10) // (F.shape[1] * (2 if dtype else 4))
                    if budget == "40KiB" else F.shape[0])
    assert len(tier) == want_rows
    for a, b, c in zip(ld, plain, ref):
        ids = torch.from_numpy(a.subgraph.node["node"])
        assert torch.equal(a.x["node"], F[ids].to(a.x["node"].dtype))
        assert torch.equal(a.x["node"], c.x["node"]) and torch.equal(b.x["node"], c.x["node"])
        assert torch.equal(a.y, c.y)
        assert np.array_equal(a.subgraph.row[("node", "to", "node")],
                              c.subgraph.row[("node", "to", "node")])
    s, row = ld.stats, F.shape[1] * F.element_size()  # staged rows: the store's dtype
    assert s.gpu_hits > 0 and s.h2d_bytes == s.gpu_misses * row
    assert plain.stats.h2d_bytes == (s.gpu_hits + s.gpu_misses) * row
    assert s.gpu_saved_bytes == s.gpu_hits * tier.row_bytes
    if want_rows == F.shape[0]:
        assert s.gpu_misses == 0 and s.h2d_bytes == 0


def test_fp16_rows_stay_fp16_in_the_tier_of_an_fp32_batch(hetero_store):
    """The default cast of an fp16 store for a PyG batch (float32) happens as hits leave the
    tier: the tier holds fp16 rows, twice as many in the same bytes, and the batches equal the
    tierless loader's and numpy's cast of the store's rows."""
    from loaders import NeighborLoader

    kw = dict(batch_size=100, shuffle=True, seed=3, device="cpu", output="pyg")
    ld = NeighborLoader(hetero_store, [3, 2], ("paper", "train"), gpu_cache_bytes="40KiB", **kw)
    ld._chunked = True
    ref = NeighborLoader(hetero_store, [3, 2], ("paper", "train"), **kw)
    F = np.asarray(hetero_store.features("paper", "feat").numpy())
    tier = ld.gatherer.gpu_tiers["paper"]
    assert tier.data.dtype == torch.float16
    assert len(tier) == min(F.shape[0], (40 << 10) // (F.shape[1] * 2))
    n = 0
    for a, b in zip(ld, ref):
        x = a["paper"].x
        assert x.dtype == torch.float32
        np.testing.assert_array_equal(x.numpy(), F[a["paper"].n_id.numpy()].astype(np.float32))
        assert torch.equal(x, b["paper"].x)
        n += 1
    assert n > 1 and ld.stats.gpu_hits > 0 and ld.stats.gpu_misses > 0
