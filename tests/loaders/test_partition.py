"""loaders.sample.partition: the seed split is disjoint, covers the seeds, balanced to +-1, a pure
function of its arguments; on a stochastic block model LDG and Fennel cut far fewer edges than
a random split (edge cut counted by brute force with NumPy over the COO edges) and nearly as
few as the true blocks; a store's split names work as the loader takes them."""

from __future__ import annotations

import numpy as np
import pytest

from featurestore.errors import InvalidIdsError
from loaders import CSCGraph
from loaders.errors import LoaderArgumentError
from loaders.sample.partition import edge_cut, partition_nodes, split_seeds
from preprocess.synth.sbm import SbmSpec, sbm_blocks, sbm_edges

ET = ("node", "to", "node")


def sbm_graph(n=4000, blocks=8, deg_in=10.0, deg_out=2.0, seed=0):
    """A symmetric, coalesced SBM as a CSCGraph (NumPy), and the nodes' blocks."""
    spec = SbmSpec(n, blocks, deg_in, deg_out, seed=seed)
    s, d, _ = sbm_edges(spec, 0, spec.num_edges)
    src = np.concatenate([s, d]).astype(np.int64)
    dst = np.concatenate([d, s]).astype(np.int64)
    key = np.unique(dst * n + src)
    dst, src = key // n, key % n
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return CSCGraph({"node": n}, {ET: (indptr, src.astype(np.int32))}), sbm_blocks(spec)


def brute_cut(graph, part):
    """Share of the (non-loop) CSC entries whose two ends are in different parts."""
    indptr, indices = graph.csc[next(iter(graph.csc))]
    dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    src = np.asarray(indices, np.int64)
    keep = src != dst
    return float(np.mean(part[src[keep]] != part[dst[keep]]))


@pytest.fixture(scope="module")
def sbm():
    g, blk = sbm_graph()
    seeds = np.flatnonzero(np.random.default_rng(1).random(4000) < 0.15)
    return g, blk, seeds


@pytest.mark.parametrize("method", ["ldg", "fennel", "random"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_parts_cover_the_seeds_balanced(sbm, method, k):
    g, _, seeds = sbm
    parts = split_seeds(g, seeds, k, method, passes=3)
    assert len(parts) == k
    allp = np.concatenate(parts)
    assert allp.shape[0] == seeds.shape[0]
    np.testing.assert_array_equal(np.sort(allp), np.sort(seeds))  # disjoint and covering
    sizes = [p.shape[0] for p in parts]
    assert set(sizes) <= {seeds.size // k, seeds.size // k + 1}
    assert sum(s == seeds.size // k + 1 for s in sizes) == seeds.size % k
    assert all(np.all(np.diff(p) > 0) and p.dtype == np.int64 for p in parts)
    eq = split_seeds(g, seeds, k, method, passes=3, drop_remainder=True)
    assert [p.shape[0] for p in eq] == [seeds.size // k] * k
    assert all(np.isin(e, p).all() for e, p in zip(eq, parts))


def test_deterministic_for_a_seed(sbm):
    g, _, seeds = sbm
    for method in ("ldg", "fennel", "random"):
        a = split_seeds(g, seeds, 3, method, seed=5)
        b = split_seeds(g, seeds, 3, method, seed=5)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
        c = split_seeds(g, seeds, 3, method, seed=6)
        assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    # the order the seeds come in does not matter
    rev = split_seeds(g, seeds[::-1].copy(), 3, "ldg", seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(split_seeds(g, seeds, 3, "ldg", seed=5),
                                                    rev))


@pytest.mark.parametrize("method", ["ldg", "fennel"])
def test_streaming_cuts_far_fewer_edges_than_random(sbm, method):
    g, blk, seeds = sbm
    for k in (2, 4):
        _, part = partition_nodes(g, seeds, k, method)
        assert part.dtype == np.int32 and part.min() >= 0 and part.max() < k
        cut = brute_cut(g, part)
        assert edge_cut(g, part) == pytest.approx(cut, abs=1e-12)
        rnd = brute_cut(g, np.random.default_rng(0).integers(0, k, part.shape[0]))
        ideal = brute_cut(g, blk % k)  # 8 blocks dealt to k parts: the planted partition
        assert rnd == pytest.approx(1 - 1 / k, abs=0.02)
        assert cut < 0.5 * rnd, (k, cut, rnd)
        assert cut < 1.5 * ideal, (k, cut, ideal)
        # the seeds of a part are a few blocks: most of each part's seeds in k-th of blocks
        for r in range(k):
            mine = blk[seeds[part[seeds] == r]]
            top = np.sort(np.bincount(mine, minlength=8))[::-1][:8 // k].sum()
            assert top > 0.8 * mine.size


def test_one_pass_and_restreaming(sbm):
    g, _, seeds = sbm
    one = brute_cut(g, partition_nodes(g, seeds, 2, "ldg", passes=1)[1])
    many = brute_cut(g, partition_nodes(g, seeds, 2, "ldg", passes=8)[1])
    assert many < one < 0.5  # one pass already beats random (0.5); restreaming improves it


def test_errors(sbm):
    g, _, seeds = sbm
    with pytest.raises(InvalidIdsError, match="distinct"):
        split_seeds(g, np.array([1, 2, 2]), 2)
    with pytest.raises(InvalidIdsError, match="distinct"):
        split_seeds(g, np.array([1, 2, 2]), 2, "random")
    with pytest.raises(InvalidIdsError, match=r"\[0, 4000\)"):
        split_seeds(g, np.array([1, 4000]), 2)
    with pytest.raises(LoaderArgumentError, match="method"):
        split_seeds(g, seeds, 2, "metis")
    with pytest.raises(LoaderArgumentError, match="world_size"):
        split_seeds(g, seeds, 0)
    with pytest.raises(LoaderArgumentError, match="streaming"):
        partition_nodes(g, seeds, 2, "random")
    hetero = CSCGraph({"a": 3, "b": 2}, {("a", "x", "b"): (np.array([0, 1, 2]),
                                                             np.array([0, 1]))})
    with pytest.raises(LoaderArgumentError, match="one edge type"):
        split_seeds(hetero, ("a", np.array([0, 1])), 2)


def test_store_split_names(tmp_path):
    import featurestore as fs
    from preprocess.jobs.spec_steps import run_spec
    from preprocess.synth.sbm import synth_sbm

    res = synth_sbm(tmp_path / "ds", SbmSpec(2000, 4, 8.0, 1.0, dim=4), progress=False)
    run_spec(res.spec_path, tmp_path / "s.store", progress=False)
    with fs.open_store(tmp_path / "s.store") as s:
        train = np.asarray(s.split("train", "node"))
        parts = split_seeds(s, "train", 2)
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.sort(train))
        same = split_seeds(s, ("node", train), 2)
        assert all(np.array_equal(x, y) for x, y in zip(parts, same))
        blk = np.asarray(s.values("node", "block"))
        for p in parts:  # 4 blocks, 2 ranks: each rank's seeds in 2 blocks
            assert np.sort(np.bincount(blk[p], minlength=4))[::-1][:2].sum() > 0.9 * p.size


def test_partition_bench_smoke(tmp_path):
    from benchmarks.partition_bench import PartitionOptions, run
    from benchmarks.render import markdown

    rep = run(PartitionOptions(workdir=str(tmp_path), nodes=4000, blocks=8, deg_out=1.0,
                               world_sizes=(2,), splits=("loader", "ldg", "blocks"),
                               cache_shares=(0.05,), batch_size=128))
    by = {r["split"]: r for r in rep["results"]}
    assert set(by) == {"loader", "ldg", "blocks"}
    for r in by.values():
        sizes = [x["seeds"] for x in r["ranks"]]
        assert max(sizes) - min(sizes) <= 1
        assert all(0 < t <= 4000 for x in r["ranks"] for t in x["rows_touched"])
    # the locality split touches fewer rows and hits more than the loader's random shares
    assert by["ldg"]["rows_touched_mean"] < 0.8 * by["loader"]["rows_touched_mean"]
    assert by["ldg"]["hit_rate_mean"]["0.05"] > 1.2 * by["loader"]["hit_rate_mean"]["0.05"]
    assert "| 2 | ldg |" in markdown(rep)

    # the bench samples as the loader does: a NeighborLoader over rank 1's part touches the
    # same rows in each epoch
    import featurestore as fs
    from loaders import NeighborLoader

    with fs.open_store(rep["graph"]["store"]) as s:
        part = split_seeds(s, "train", 2, "ldg", seed=0)[1]
        loader = NeighborLoader(s, [10, 5], input_nodes=part, batch_size=128, shuffle=True,
                                output="raw", device="cpu", cache=None)
        for e in range(2):
            seen = np.zeros(4000, bool)
            for batch in loader:
                seen[batch.subgraph.node["node"]] = True
            assert seen.sum() == by["ldg"]["ranks"][1]["rows_touched"][e]
