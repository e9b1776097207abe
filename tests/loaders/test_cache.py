"""The feature cache and the uncached read paths: exact rows against a plain gather, the
presample and degree rankings against NumPy references, and a budgeted loader's batches."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import featurestore as fs
from loaders import NeighborLoader, NeighborSampler
from loaders.memory.budget import MARGIN_MIN
from graph_helpers import probe_plan, resident_topology_bytes
from loaders.memory.cache import (FeatureCache, count_rows, degree_counts, presample_counts,
                           presample_scores, rank_rows, row_order)


@pytest.fixture(scope="module")
def wide_store_path(tmp_path_factory):
    """fp16 x 768 rows (1536 bytes: most straddle a 4 KiB page), a skewed graph."""
    from loaders.datasets.synthetic import power_law_store

    return power_law_store(tmp_path_factory.mktemp("wide") / "s", num_nodes=2500,
                           num_edges=20000, feat_dim=768, dtype=np.float16, num_classes=4,
                           train_frac=0.3, seed=5)


@pytest.fixture
def wide_store(wide_store_path):
    with fs.open_store(wide_store_path, io_threads=8) as s:
        yield s


def _patterns(n: int, cached: np.ndarray, rng) -> dict[str, np.ndarray]:
    uncached = np.setdiff1d(np.arange(n), cached)
    return {
        "random_with_duplicates": rng.integers(0, n, 3000),
        "empty": np.empty(0, np.int64),
        "all_hit": rng.choice(cached, 500),
        "all_miss": rng.permutation(uncached)[:700],
        "sorted_dense_run": np.arange(100, 900),
        "one_row_repeated": np.full(50, n - 1),
        "int32_ids": rng.integers(0, n, 400).astype(np.int32),
        "large_mixed": rng.integers(0, n, 20_000),  # the overlapped path (>= 16k ids)
        "large_all_hit": rng.choice(cached, 17_000),
    }


@pytest.mark.parametrize("policy", ["presample", "degree", "none"])
@pytest.mark.parametrize("read_path", ["direct", "dontneed", "pread"])
def test_cached_gather_returns_the_rows_of_a_plain_gather(wide_store, policy, read_path):
    F = wide_store.features()
    n = F.shape[0]
    rng = np.random.default_rng(0)
    if policy == "degree":
        counts = degree_counts(wide_store, "node")
    elif policy == "presample":
        s = NeighborSampler(wide_store, [5, 3])
        seeds = np.asarray(wide_store.split("train"))
        counts = presample_counts(s, np.array_split(seeds, 4), "node", ["node"],
                                  num_nodes={"node": n})["node"]
    else:
        counts = np.zeros(n, np.int64)
    k = 0 if policy == "none" else n // 5
    cached = rank_rows(counts, k)
    cache = FeatureCache(F, cached, read_path=read_path)
    assert len(cache.hot) == k
    plain = F.numpy()
    for name, ids in _patterns(n, cached if k else np.arange(n), rng).items():
        got = cache.gather(ids)
        assert np.array_equal(got, plain[np.asarray(ids, np.int64)]), name
        out = np.full((len(ids), 768), 7, np.float16)
        assert cache.gather(ids, out=out) is out
        assert np.array_equal(out, plain[np.asarray(ids, np.int64)]), name
    cache.stats.reset()
    ids = rng.integers(0, n, 1000)
    cache.gather(ids)
    hits = int(np.isin(ids, cached).sum())
    assert (cache.stats.hits, cache.stats.misses) == (hits, 1000 - hits)
    if k:
        cache.stats.reset()
        cache.gather(rng.choice(cached, 300))
        assert cache.stats.misses == cache.stats.reads == cache.stats.bytes_read == 0
    assert np.array_equal(cache.hot.lookup(cached[:5]), np.arange(min(5, k)))
    assert (cache.hot.lookup(np.setdiff1d(np.arange(n), cached)[:5]) == -1).all()


def test_empty_hot_tier_holds_no_position_map(wide_store):
    """A type without cached rows holds nothing (issue 23: its int32 map over every row was
    outside the plan), and its gathers, plain and cast, still return the store's rows."""
    F = wide_store.features()
    c = FeatureCache(F, np.empty(0, np.int64))
    assert c.hot.nbytes == 0 and c.hot.pos.shape == (0,)
    ids = np.random.default_rng(1).integers(0, F.shape[0], 5000)
    ref = F.numpy()[ids]
    assert np.array_equal(c.gather(ids), ref)
    out = np.empty(ref.shape, np.float32)
    c.gather(ids, out)
    assert np.array_equal(out, ref.astype(np.float32))
    assert np.array_equal(c.hot.lookup(ids), np.full(ids.shape[0], -1, np.int32))
    c.close()


def test_uncached_reads_scatter_to_given_rows(wide_store):
    F = wide_store.features()
    rows = F.reader
    ids = np.array([9, 3, 9, 2000, 4, 5, 6, 2499], np.int64)
    at = np.array([7, 0, 3, 1, 2, 6, 5, 4], np.int64)
    out = np.zeros((8, 768), np.float16)
    r0 = rows.reads
    rows.read_uncached(ids, out, "direct", at=at)
    ref = F.numpy()
    assert np.array_equal(out[at], ref[ids])
    # 2, 3 dup of 9, then 4..6 merged with 3? no: 3 and 4..6 and 9 are within a span
    assert 1 <= rows.reads - r0 <= 4


def test_count_rows_and_presample_ranking_match_numpy(wide_store):
    n = wide_store.num_nodes()
    s = NeighborSampler(wide_store, [6, 4])
    seeds = np.asarray(wide_store.split("train"))
    batches = np.array_split(seeds, 5)
    counts = presample_counts(s, batches, "node", ["node"], seed=3, epoch=1,
                              num_nodes={"node": n})["node"]
    ids = np.concatenate([s.sample(b, "node", seed=3, epoch=1, batch=k).node["node"]
                          for k, b in enumerate(batches)])
    ref = np.bincount(ids, minlength=n)
    assert np.array_equal(counts, ref)
    deg = degree_counts(wide_store, "node")
    assert np.array_equal(deg, np.bincount(np.asarray(wide_store.csc()[1]), minlength=n))
    for k in (0, 1, 37, 400, n):
        got = rank_rows(counts, k, deg)
        # reference: sort by (-count, -degree, id), take k, sorted by id
        order = sorted(range(n), key=lambda i: (-ref[i], -deg[i], i))[:k]
        assert np.array_equal(got, np.sort(np.asarray(order, np.int64))), k
    c = np.zeros(10, np.int64)
    count_rows(np.array([1, 1, 9, 0, 1]), c)
    assert c.tolist() == [1, 3, 0, 0, 0, 0, 0, 0, 0, 1]


def test_budgeted_loader_batches_equal_the_store(wide_store):
    F = wide_store.features().numpy()
    fbytes = F.nbytes
    # a budget a bit above the fixed costs: the features cannot fit, a cache can
    kw = dict(num_neighbors=[5, 3], input_nodes="train", batch_size=64, device="cpu")
    big = NeighborLoader(wide_store, memory=1 << 40, **kw)
    assert big.plan.fits and not big.caches and big.sampler.graph.csc  # as without a budget
    probe = SimpleNamespace(plan=probe_plan(wide_store, **kw))  # sampled batch sizes
    assert not probe.plan.fits and probe.plan.notes
    fixed = (probe.plan.batch_bytes * 2 + probe.plan.sampler_bytes + probe.plan.reader_bytes
             + MARGIN_MIN + resident_topology_bytes(wide_store))
    for cache, in_flight in (("presample", 2), ("degree", 1), (None, 2)):
        ld = NeighborLoader(wide_store, shuffle=True, memory=fixed + fbytes // 3, cache=cache,
                            batches_in_flight=in_flight, **kw)
        plan = ld.plan
        assert not plan.fits and plan.topology == "memory"
        assert plan.planned_bytes <= plan.budget
        if cache:
            assert 0 < plan.cache_rows["node"] < F.shape[0]
            assert len(ld.caches["node"].hot) == plan.cache_rows["node"]
        rows = 0
        for mb in ld:
            ids = mb.subgraph.node["node"]
            assert torch.equal(mb.x["node"], torch.from_numpy(np.asarray(F[ids])))
            rows += ids.shape[0]
            del mb
        st = ld.stats
        assert st.hits + st.misses == rows
        assert (st.hits > 0) == bool(cache)
        assert st.reads > 0 and st.bytes_read >= st.misses * 1536 // 2
        assert st.overflows == 0
        assert "feature cache" in str(plan)
        assert plan.as_dict()["planned_bytes"] == plan.planned_bytes


def test_presample_scores_shrink_towards_the_degree_bin_mean():
    counts = np.array([0, 4, 2, 0, 6, 1, 0], np.int64)
    deg = np.array([0, 3, 3, 3, 100, 120, 1], np.int64)
    got = presample_scores(counts, deg, weight=2.0)
    # bins of floor(4 * log2(deg + 1)): deg 3 -> 8, 100 -> 26, 120 -> 27, 1 -> 4, 0 -> 0
    prior = {0: 0.0, 8: 2.0, 26: 6.0, 27: 1.0, 4: 0.0}
    bins = [0, 8, 8, 8, 26, 27, 4]
    want = counts + 2.0 * np.array([prior[b] for b in bins])
    assert np.allclose(got, want)
    # a row never seen but of a well-used degree bin outranks a row seen once by chance
    assert got[3] > got[5] - 2.0 and rank_rows(got, 3).tolist() == [1, 2, 4]


def test_rank_rows_is_the_first_k_of_row_order_without_a_sort():
    """The radix select against the sort it replaces (many ties, negative and float scores,
    with and without a tiebreak, every k), and presample_scores against NumPy's formula."""
    rng = np.random.default_rng(0)
    for trial in range(240):
        n = int(rng.integers(1, 300))
        c = [rng.integers(0, 5, n), rng.integers(-3, 3, n), rng.random(n).round(1) * 3 - 1,
             rng.integers(0, 2**40, n)][trial % 4]
        tie = None if trial % 3 == 0 else rng.integers(-2, 4, n)
        for k in (0, 1, n // 3, n - 1, n, int(rng.integers(0, n + 1))):
            want = np.sort(row_order(c, tie)[:k])
            assert np.array_equal(rank_rows(c, k, tie), want), (trial, k)
        counts, deg = rng.integers(0, 50, n), rng.integers(0, 10**6, n)
        b = np.floor(np.log2(deg.astype(np.float64) + 1.0) * 4).astype(np.int64)
        prior = np.bincount(b, weights=counts) / np.maximum(np.bincount(b), 1)
        np.testing.assert_allclose(presample_scores(counts, deg), counts + 2.0 * prior[b],
                                   rtol=0, atol=1e-9)


@pytest.mark.parametrize("read_path", ["direct", "dontneed"])
def test_uncached_reads_at_every_density(wide_store, read_path, monkeypatch):
    import featurestore.rows.local as G

    F = wide_store.features()
    ref = F.numpy()
    rng = np.random.default_rng(4)
    n = F.shape[0]
    monkeypatch.setattr(G, "DENSE_SCRATCH_BYTES", 64 << 10)  # several dense spans here
    for share in (0.002, 0.05, 0.3, 1.0):
        ids = rng.permutation(rng.choice(n, max(1, int(share * n)), replace=False))
        ids = np.concatenate([ids, ids[:7]])  # and repeats
        out = np.empty((ids.size, 768), np.float16)
        F.reader.read_uncached(ids, out, read_path)
        assert np.array_equal(out, ref[ids]), share


def test_plan_spans_matches_a_python_reference():
    from featurestore.gather import plan_spans

    rng = np.random.default_rng(2)
    rows = np.unique(rng.integers(0, 5000, 700)).astype(np.int64)
    rb, gap, span = 100, 450, 3000
    first = plan_spans(rows, rb, gap, span)
    want, i = [], 0
    while i < rows.size:
        j = i + 1
        while (j < rows.size and (rows[j] - rows[j - 1] - 1) * rb <= gap
               and (rows[j] - rows[i] + 1) * rb <= span):
            j += 1
        want.append(i)
        i = j
    assert first.tolist() == want + [rows.size]


def test_budgeted_loader_device_path_and_heterogeneous(hetero_store):
    """The GPU path's chunked gather through the caches (run on the CPU), on a store whose
    features do not fit the budget, with a node type without features."""
    F = hetero_store.features("paper", "feat").numpy()
    kw = dict(num_neighbors=[3, 2], input_nodes=("paper", "train"), batch_size=100,
              device="cpu", staging_bytes=4096)
    probe = SimpleNamespace(plan=probe_plan(hetero_store, **kw))
    fixed = (probe.plan.batch_bytes * 2 + probe.plan.sampler_bytes + probe.plan.reader_bytes
             + MARGIN_MIN + resident_topology_bytes(hetero_store))
    ld = NeighborLoader(hetero_store, memory=fixed + F.nbytes // 2, **kw)
    assert not ld.plan.fits and set(ld.plan.cache_rows) == {"paper"}
    assert 0 < len(ld.caches["paper"].hot) < F.shape[0]
    ld._chunked = True
    n = rows = 0
    for mb in ld:
        ids = mb.subgraph.node["paper"]
        assert set(mb.x) == {"paper"}
        assert torch.equal(mb.x["paper"], torch.from_numpy(np.asarray(F[ids])))
        n += 1
        rows += ids.shape[0]
    assert n == len(ld) and ld.stats.hits + ld.stats.misses == rows and ld.stats.hits > 0
