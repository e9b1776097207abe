"""The numba sampler against the graph itself (brute force) and against the Python reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import featurestore as fs
from featurestore.format.names import EdgeType
from loaders.errors import LoaderArgumentError
from loaders.sample.reference import reference_sample
from loaders.sample.sampler import CSCGraph, Fanouts, NeighborSampler


def same(a, b) -> bool:
    return (a.seed_type == b.seed_type and a.batch_size == b.batch_size
            and a.num_sampled_nodes == b.num_sampled_nodes
            and a.num_sampled_edges == b.num_sampled_edges
            and all(np.array_equal(a.node[t], b.node[t]) for t in b.node)
            and all(np.array_equal(getattr(a, f)[et], getattr(b, f)[et])
                    for f in ("row", "col", "edge") for et in b.row))


def check_invariants(g: CSCGraph, sub, fanouts: Fanouts, replace: bool, seeds) -> None:
    """Every property a batch must have, checked edge by edge against the CSC arrays."""
    L = fanouts.num_layers
    # seeds first, in order; per-hop counts add up; non-seed nodes are unique
    assert np.array_equal(sub.node[sub.seed_type][: len(seeds)], seeds)
    for t, nodes in sub.node.items():
        assert len(sub.num_sampled_nodes[t]) == L + 1
        assert sum(sub.num_sampled_nodes[t]) == nodes.shape[0]
        rest = nodes[len(seeds):] if t == sub.seed_type else nodes
        assert np.unique(rest).shape[0] == rest.shape[0]
        assert not np.isin(rest, seeds).any() if t == sub.seed_type else True
    hop_end = {t: np.cumsum(c) for t, c in sub.num_sampled_nodes.items()}
    for et in g.edge_types:
        indptr, indices = g.csc[et]
        row, col, eid = sub.row[et], sub.col[et], sub.edge[et]
        assert len(sub.num_sampled_edges[et]) == L
        assert sum(sub.num_sampled_edges[et]) == row.shape[0] == col.shape[0] == eid.shape[0]
        src = sub.node[et.src][row]
        dst = sub.node[et.dst][col]
        # the edge exists: its CSC position lies in dst's range and holds src
        assert np.all(indices[eid] == src)
        assert np.all((indptr[dst] <= eid) & (eid < indptr[dst + 1]))
        lo = 0
        for layer, m in enumerate(sub.num_sampled_edges[et]):
            c, r = col[lo:lo + m], row[lo:lo + m]
            # destinations of layer l are the nodes of hop l; sources are within hops 0..l+1
            first = 0 if layer == 0 else hop_end[et.dst][layer - 1]
            assert np.all((c >= first) & (c < hop_end[et.dst][layer]))
            assert np.all(r < hop_end[et.src][layer + 1])
            f = fanouts.per_etype[et][layer]
            front = np.arange(first, hop_end[et.dst][layer])
            d = indptr[sub.node[et.dst][front] + 1] - indptr[sub.node[et.dst][front]]
            got = np.bincount(c - first, minlength=front.shape[0])
            if f < 0:
                want = d
            elif replace:
                want = np.where(d > 0, f, 0)
            else:
                want = np.minimum(f, d)
            assert np.array_equal(got, want), (et, layer)
            if not replace:  # distinct neighbours (CSC positions) per destination
                e = eid[lo:lo + m]
                assert np.unique(np.stack([c, e]), axis=1).shape[1] == m
            lo += m


FANOUTS = [[15, 10, 5], [-1, 3], [100, 70], [2, 2, 2, 2], [0, 4]]


@pytest.fixture(params=["direct-serial", "hash-parallel"])
def kernel_mode(request, monkeypatch):
    """Both id maps (dense array, hash table) and both kernel twins (serial, parallel)."""
    import loaders.sample.kernels as K
    import loaders.sample.sampler as S

    if request.param == "hash-parallel":
        monkeypatch.setattr(S, "DIRECT_MAP_BYTES", 0)
        monkeypatch.setattr(K, "PARALLEL_MIN", 1)
    else:
        monkeypatch.setattr(K, "PARALLEL_MIN", 1 << 62)
    return request.param


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fan", FANOUTS)
def test_homogeneous_matches_reference_and_graph(skewed_graph, fan, replace, kernel_mode):
    g = skewed_graph
    rest = np.random.default_rng(0).choice(np.arange(5, 600), 59, replace=False)
    seeds = np.r_[np.arange(5), rest]
    s = NeighborSampler(g, fan, replace=replace)
    sub = s.sample(seeds, seed=3, epoch=1, batch=4)
    ref = reference_sample(g, fan, seeds, replace=replace, seed=3, epoch=1, batch=4)
    assert same(sub, ref)
    check_invariants(g, sub, s.fanouts, replace, seeds)


@pytest.mark.parametrize("replace", [False, True])
def test_heterogeneous_store(hetero_store, replace, kernel_mode):
    fan = {("paper", "cites", "paper"): [6, 3], ("author", "writes", "paper"): [4, 2],
           "rev_writes": [3, 3], "affiliated_with": [1, 1], "rev_affiliated_with": [2, 2]}
    seeds = hetero_store.split("train", "paper")[:100]
    s = NeighborSampler(hetero_store, fan, replace=replace)
    sub = s.sample(seeds, "paper", seed=5, batch=2)
    assert same(sub, reference_sample(hetero_store, fan, seeds, "paper", replace=replace,
                                      seed=5, batch=2))
    check_invariants(s.graph, sub, s.fanouts, replace, seeds)
    # authors are reached from papers at layer 1, institutions only from authors at layer 2
    assert sub.num_sampled_nodes["author"][1] > 0
    assert sub.num_sampled_nodes["institution"][1] == 0
    assert sub.num_sampled_nodes["institution"][2] > 0


def test_one_list_for_all_relations(hetero_store):
    seeds = hetero_store.split("valid", "paper")[:50]
    s = NeighborSampler(hetero_store, [5, 5])
    sub = s.sample(seeds, "paper")
    assert set(s.fanouts.per_etype.values()) == {(5, 5)}
    check_invariants(s.graph, sub, s.fanouts, False, seeds)


def test_same_batches_with_one_and_two_threads(skewed_graph, monkeypatch):
    import loaders.sample.kernels as K

    monkeypatch.setattr(K, "PARALLEL_MIN", 1)  # the parallel twins, on this small graph
    seeds = np.arange(0, 600, 3)
    out = []
    for threads in (1, 2):
        s = NeighborSampler(skewed_graph, [15, 10, 5], num_threads=threads)
        out.append(s.sample(seeds, seed=11, epoch=2, batch=7))
    assert same(out[0], out[1])
    s = NeighborSampler(skewed_graph, [15, 10, 5])
    other = s.sample(seeds, seed=11, epoch=2, batch=8)  # another batch index: other draws
    assert not same(out[0], other)


def test_num_threads_leaves_the_callers_count(skewed_graph):
    """num_threads= applies to the sampler's kernels only: the caller's numba thread count is
    the same after a batch as before."""
    import numba

    before = numba.get_num_threads()
    s = NeighborSampler(skewed_graph, [5, 5], num_threads=1)
    s.sample(np.arange(10), seed=1)
    assert numba.get_num_threads() == before


def test_reused_workspace_gives_fresh_batches(skewed_graph, kernel_mode):
    s = NeighborSampler(skewed_graph, [8, 4])
    seeds = np.arange(100, 300)
    a = s.sample(seeds, batch=1)
    s.sample(np.arange(5, 50), batch=2)  # dirties and grows the hash tables
    s.sample(np.arange(0, 600), batch=3)
    assert same(a, s.sample(seeds, batch=1))


def test_repeated_seeds_stay_in_place(skewed_graph, kernel_mode):
    seeds = np.array([7, 7, 9, 7])
    s = NeighborSampler(skewed_graph, [3])
    sub = s.sample(seeds)
    assert np.array_equal(sub.node["v"][:4], seeds)
    assert same(sub, reference_sample(skewed_graph, [3], seeds))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), avg=st.integers(0, 8), fan=st.lists(st.integers(-1, 9), min_size=1,
       max_size=3), replace=st.booleans(), seed=st.integers(0, 2**63), data=st.data())
def test_random_graphs_match_reference(n, avg, fan, replace, seed, data):
    rng = np.random.default_rng(seed % 2**32)
    deg = rng.integers(0, 2 * avg + 1, n)
    indptr = np.concatenate([[0], np.cumsum(deg)])
    g = CSCGraph({"v": n}, {EdgeType("v", "e", "v"): (indptr, rng.integers(0, n, indptr[-1]))})
    seeds = np.asarray(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n,
                                          unique=True)))
    sub = NeighborSampler(g, fan, replace=replace).sample(seeds, seed=seed, epoch=1)
    assert same(sub, reference_sample(g, fan, seeds, replace=replace, seed=seed, epoch=1))
    check_invariants(g, sub, Fanouts.parse(fan, g.edge_types), replace, seeds)


def test_bad_input_is_named(skewed_graph, hetero_store):
    s = NeighborSampler(skewed_graph, [2])
    with pytest.raises(fs.IdsOutOfRangeError, match=r"\[0, 600\)"):  # an IndexError too
        s.sample([0, 600])
    for bad in ([1.7, 2.2], [True, False], np.array([1.0])):  # never truncated into ids
        with pytest.raises(fs.InvalidIdsError, match="integer"):
            s.sample(bad)
    with pytest.raises(fs.UnknownNodeTypeError, match="nope"):
        s.sample([0], "nope")
    with pytest.raises(LoaderArgumentError, match=">= -1"):  # a ValueError too
        NeighborSampler(skewed_graph, [2, -3])
    with pytest.raises(fs.UnknownEdgeTypeError, match="edge types"):  # a KeyError too
        NeighborSampler(hetero_store, {"nope": [1]})
    with pytest.raises(LoaderArgumentError, match="same number of layers"):
        NeighborSampler(hetero_store, {"cites": [1], "writes": [1, 2]})
    with pytest.raises(LoaderArgumentError, match="seed_type"):
        NeighborSampler(hetero_store, [1]).sample([0])


def test_fractional_fanouts_are_refused_not_truncated(skewed_graph, hetero_store):
    """Issue 10 item 12: a fanout of 2.7 (or True, or "3") given to the sampler itself was
    truncated or parsed into an integer (the loader refused it, the sampler did not)."""
    torch = pytest.importorskip("torch")
    for bad in ([2.7], [np.float32(2.0)], [True], [np.True_], ["3"], "3", [2, 1.5]):
        with pytest.raises(LoaderArgumentError, match="integer fanouts"):
            NeighborSampler(skewed_graph, bad)
    with pytest.raises(LoaderArgumentError, match="integer fanouts"):
        NeighborSampler(hetero_store, {"cites": [1.5], "writes": [1]})
    for good in ([np.int64(3), -1], (2, 1), np.array([3, 2]), torch.tensor([3, 2])):
        assert NeighborSampler(skewed_graph, good).fanouts.num_layers == 2


def test_topology_in_memory_samples_the_same(hetero_store):
    seeds = hetero_store.split("train", "paper")[:80]
    a = NeighborSampler(hetero_store, [4, 3]).sample(seeds, "paper", batch=5)
    mem = NeighborSampler(hetero_store, [4, 3], topology="memory")
    assert not any(isinstance(p, np.memmap) for p, _ in mem.graph.csc.values())
    assert same(a, mem.sample(seeds, "paper", batch=5))
    with pytest.raises(LoaderArgumentError, match="topology"):
        NeighborSampler(hetero_store, [4], topology="disk")


# -- fanout_per="node": one fanout per node over all its edge types (the relational view) ----
def check_union_counts(g: CSCGraph, sub, fanouts: Fanouts, replace: bool) -> None:
    """Per destination node and layer, the edges drawn over all the edge types into its type
    number min(fanout, total in-degree) (fanout with replacement, all for -1)."""
    for t in g.node_types:
        into = [et for et in g.edge_types if et.dst == t]
        hop_end = np.cumsum(sub.num_sampled_nodes[t])
        los = {et: np.r_[0, np.cumsum(sub.num_sampled_edges[et])] for et in into}
        for layer in range(fanouts.num_layers):
            active = [et for et in into if fanouts.per_etype[et][layer] != 0]
            if not active:
                continue
            f = fanouts.per_etype[active[0]][layer]
            first = 0 if layer == 0 else hop_end[layer - 1]
            front = sub.node[t][first:hop_end[layer]]
            total = sum(g.csc[et][0][front + 1] - g.csc[et][0][front] for et in active)
            got = sum(np.bincount(sub.col[et][los[et][layer]:los[et][layer + 1]] - first,
                                  minlength=front.shape[0]) for et in active)
            want = total if f < 0 else (np.where(total > 0, f, 0) if replace
                                        else np.minimum(total, f))
            assert np.array_equal(got, want), (t, layer)


@pytest.mark.parametrize("replace", [False, True])
def test_union_fanouts_match_reference(hetero_store, replace, kernel_mode):
    seeds = hetero_store.split("train", "paper")[:120]
    # into paper: cites + writes; into author: rev_writes + rev_affiliated_with
    for fan in ([4, 3], [-1, 2], {"cites": [5, 0], "writes": [5, 3], "rev_writes": [2, 2],
                                  "rev_affiliated_with": [2, 0], "affiliated_with": [1, 1]}):
        s = NeighborSampler(hetero_store, fan, replace=replace, fanout_per="node")
        sub = s.sample(seeds, "paper", seed=5, batch=2)
        assert same(sub, reference_sample(hetero_store, fan, seeds, "paper", replace=replace,
                                          seed=5, batch=2, fanout_per="node"))
        check_union_counts(s.graph, sub, s.fanouts, replace)
        # every edge exists; hops and node uniqueness as in the per-edge-type mode
        check_invariants_shape(s.graph, sub, seeds)


def check_invariants_shape(g, sub, seeds) -> None:
    assert np.array_equal(sub.node[sub.seed_type][: len(seeds)], seeds)
    for et in g.edge_types:
        indptr, indices = g.csc[et]
        src, dst, eid = sub.node[et.src][sub.row[et]], sub.node[et.dst][sub.col[et]], sub.edge[et]
        assert np.all(indices[eid] == src)
        assert np.all((indptr[dst] <= eid) & (eid < indptr[dst + 1]))


def _multi_relation_graph(rng, n, avg, relations):
    csc = {}
    for r in range(relations):
        deg = rng.integers(0, 2 * avg + 1, n)
        indptr = np.concatenate([[0], np.cumsum(deg)])
        csc[EdgeType("v", f"e{r}", "v")] = (indptr, rng.integers(0, n, indptr[-1]))
    return CSCGraph({"v": n}, csc)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 50), avg=st.integers(0, 6), relations=st.integers(1, 3),
       fan=st.lists(st.integers(-1, 9), min_size=1, max_size=3), replace=st.booleans(),
       seed=st.integers(0, 2**63), data=st.data())
def test_union_random_graphs_match_reference(n, avg, relations, fan, replace, seed, data):
    g = _multi_relation_graph(np.random.default_rng(seed % 2**32), n, avg, relations)
    seeds = np.asarray(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n,
                                          unique=True)))
    s = NeighborSampler(g, fan, replace=replace, fanout_per="node")
    sub = s.sample(seeds, seed=seed, epoch=1)
    assert same(sub, reference_sample(g, fan, seeds, replace=replace, seed=seed, epoch=1,
                                      fanout_per="node"))
    check_union_counts(g, sub, s.fanouts, replace)
    if not replace:  # distinct in-edges of each node over the union
        for et in g.edge_types:
            pairs = np.stack([sub.col[et], sub.edge[et]])
            assert np.unique(pairs, axis=1).shape[1] == pairs.shape[1]


def test_union_draws_are_uniform_over_all_in_edges():
    """A node with 1 in-edge of one type and 99 of another: with fanout 10 per node each of
    its 100 in-edges is drawn with probability 10/100 (brute force over 2000 batches), where
    per edge type the lone edge is always drawn."""
    a = EdgeType("v", "a", "v")
    b = EdgeType("v", "b", "v")
    n = 100
    ia = np.zeros(n + 1, np.int64)
    ia[1:] = 1  # node 0 has one 'a' in-edge (from node 1)
    ib = np.zeros(n + 1, np.int64)
    ib[1:] = 99  # and 99 'b' in-edges (from nodes 1..99)
    g = CSCGraph({"v": n}, {a: (ia, np.array([1])), b: (ib, np.arange(1, 100))})
    hits = np.zeros(100, np.int64)  # edge 0: the 'a' edge; 1..99: the 'b' edges
    s = NeighborSampler(g, [10], fanout_per="node")
    per_type = NeighborSampler(g, [10])
    lone = 0
    trials = 2000
    for k in range(trials):
        sub = s.sample([0], batch=k)
        hits[0] += sub.edge[a].shape[0]
        np.add.at(hits, 1 + sub.edge[b], 1)
        lone += per_type.sample([0], batch=k).edge[a].shape[0]
    assert hits.sum() == 10 * trials
    p = 0.1
    sd = np.sqrt(trials * p * (1 - p))
    assert np.all(np.abs(hits - trials * p) < 5 * sd), hits
    assert lone == trials


def test_union_fanouts_must_agree_per_node_type(hetero_store):
    with pytest.raises(LoaderArgumentError, match="one fanout per layer"):
        NeighborSampler(hetero_store, {"cites": [5], "writes": [3], "rev_writes": [1],
                                       "affiliated_with": [1], "rev_affiliated_with": [1]},
                        fanout_per="node")
    with pytest.raises(LoaderArgumentError, match="fanout_per"):
        NeighborSampler(hetero_store, [1], fanout_per="relation")


def test_fanouts_from_a_generator_are_read_once(homo_store):
    """A generator of fanouts is read whole (a check that consumed it left no layers)."""
    from loaders.sample.sampler import NeighborSampler

    a = NeighborSampler(homo_store, (k for k in [3, 2]))
    b = NeighborSampler(homo_store, [3, 2])
    assert a.fanouts.num_layers == b.fanouts.num_layers == 2
    assert a.fanouts.per_etype == b.fanouts.per_etype
