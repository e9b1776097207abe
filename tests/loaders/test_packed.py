"""Bit-packed resident topology (issue 19 item 4): the packed ids read back as the plain
array, every sampler path samples identically from a packed and a plain topology, and a
budgeted loader packs its resident copy, plans its real size, and serves the same batches."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from featurestore.format.names import EdgeType
from graph_helpers import random_csc, resident_topology_bytes
from loaders import LinkNeighborLoader, NeighborLoader
from loaders.sample.exclude import seed_edge_ids
from loaders.sample.negative import edge_exists, global_uniform_negatives
from loaders.sample.packed import PackedIds, pack_ids
from loaders.sample.sampler import CSCGraph, NeighborSampler


@pytest.mark.parametrize("num_nodes", [1, 2, 3, 1000, 2**22 + 5, 2**31 - 1, 2**45])
@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 3001])
def test_packed_ids_read_back_as_the_plain_array(num_nodes, size):
    rng = np.random.default_rng(size)
    ids = rng.integers(0, num_nodes, size)
    if size:
        ids[-1] = num_nodes - 1  # the widest id, in the last (padded) word
    p = PackedIds.pack(ids, num_nodes)
    assert p.bits == max(1, (num_nodes - 1).bit_length()) and len(p) == size
    assert np.array_equal(np.asarray(p), ids)
    assert p.nbytes == 8 * ((size * p.bits + 63) // 64 + 1)
    # pieces as the resident copy reads them
    q = PackedIds.from_chunks([ids[i:i + 128] for i in range(0, size, 128)], size, p.bits)
    assert np.array_equal(q.words, p.words)
    if size:
        pos = rng.integers(-size, size, 200)
        assert np.array_equal(p[pos], ids[pos])
        assert np.array_equal(p[pos.reshape(10, 20)], ids[pos.reshape(10, 20)])
        assert p[-1] == ids[-1] and p[0] == ids[0]
        assert np.array_equal(p[size // 3:size - 1], ids[size // 3:size - 1])
        assert np.array_equal(p[::7], ids[::7])
        mask = rng.random(size) < 0.3
        assert np.array_equal(p[mask], ids[mask])
        with pytest.raises(IndexError):
            p[size]


def test_packing_refuses_what_would_spill_and_bad_pieces():
    with pytest.raises(ValueError, match=r"ids in \[0, 2\*\*3\)"):
        PackedIds.from_chunks([np.array([1, 8])], 2, 3)
    with pytest.raises(ValueError, match=r"ids in \[0, 2\*\*3\)"):
        PackedIds.from_chunks([np.array([1, -1])], 2, 3)
    with pytest.raises(ValueError, match="multiples of 64"):
        PackedIds.from_chunks([np.zeros(10, np.int64), np.zeros(64, np.int64)], 74, 3)
    with pytest.raises(ValueError, match="Expected 10 ids"):
        PackedIds.from_chunks([np.zeros(9, np.int64)], 10, 3)
    # packing what saves nothing keeps a plain copy
    wide = np.array([0, 2**31 - 2], np.int32)
    assert isinstance(pack_ids(wide, 2**32), np.ndarray)  # 32 bits: as wide as int32


def _same(a, b):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, dict):
            assert x.keys() == y.keys(), f.name
            for k in x:
                assert np.array_equal(np.asarray(x[k]), np.asarray(y[k])), (f.name, k)
        elif isinstance(x, np.ndarray):
            assert np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def _packed(graph: CSCGraph) -> CSCGraph:
    csc = {et: (p, PackedIds.pack(i, graph.num_nodes[et.src])) for et, (p, i) in graph.csc.items()}
    return CSCGraph(dict(graph.num_nodes), csc, validated=True)


@pytest.mark.parametrize("opts", [dict(), dict(replace=True), dict(sampling="labor"),
                                  dict(sampling="labor", layer_dependency=True),
                                  dict(num_neighbors=[-1, 2])])
def test_sampler_samples_identically_from_packed_ids(skewed_graph, opts):
    opts = {"num_neighbors": [6, 4], **opts}
    packed = _packed(skewed_graph)
    assert all(isinstance(i, PackedIds) for _, i in packed.csc.values())
    plain_s, packed_s = NeighborSampler(skewed_graph, **opts), NeighborSampler(packed, **opts)
    rng = np.random.default_rng(3)
    for b in range(4):
        # both the serial kernels and, with 5000 seeds, the parallel ones
        seeds = np.unique(rng.integers(0, 600, 5000 if b == 3 else 50))
        _same(plain_s.sample(seeds, seed=1, batch=b), packed_s.sample(seeds, seed=1, batch=b))


def test_relational_union_samples_identically_from_packed_ids(hetero_store):
    plain = CSCGraph.from_store(hetero_store, "memory")
    packed = CSCGraph.from_store(hetero_store, "packed")
    assert any(isinstance(i, PackedIds) for _, i in packed.csc.values())
    kw = dict(num_neighbors=[4, 3], fanout_per="node")
    seeds = np.arange(0, 1500, 7)
    _same(NeighborSampler(plain, **kw).sample(seeds, "paper", batch=2),
          NeighborSampler(packed, **kw).sample(seeds, "paper", batch=2))


def test_link_kernels_read_packed_ids(homo_store):
    indptr, indices = homo_store.csc()
    n = homo_store.num_nodes()
    packed = pack_ids(indices, n)
    rng = np.random.default_rng(5)
    e = rng.integers(0, indices.shape[0], 300)
    dst = np.searchsorted(indptr, e, side="right") - 1
    src = np.asarray(indices)[e]
    assert np.array_equal(seed_edge_ids(indptr, packed, src, dst),
                          seed_edge_ids(indptr, indices, src, dst))
    s, d = rng.integers(0, n, 500), rng.integers(0, n, 500)
    assert np.array_equal(edge_exists(indptr, packed, s, d), edge_exists(indptr, indices, s, d))
    a = global_uniform_negatives(11, 400, n, n, indptr, packed)
    b = global_uniform_negatives(11, 400, n, n, indptr, indices)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def _fixed_costs_budget(store, kw, extra):
    from graph_helpers import probe_plan
    from loaders.memory.budget import MARGIN_MIN

    p = probe_plan(store, **kw)
    return (p.batch_bytes * 2 + p.sampler_bytes + p.reader_bytes + p.inputs_bytes + p.edge_bytes
            + MARGIN_MIN + resident_topology_bytes(store) + extra)


def test_budgeted_loader_packs_its_resident_copy_and_plans_its_size(homo_store):
    kw = dict(num_neighbors=[5, 3], input_nodes="train", batch_size=64, device="cpu")
    F = homo_store.features().numpy()
    budget = _fixed_costs_budget(homo_store, kw, F.nbytes // 3)
    ld = NeighborLoader(homo_store, memory=budget, **kw)
    plain = NeighborLoader(homo_store, memory=budget, topology="memory", **kw)
    ref = NeighborLoader(homo_store, **kw)  # no budget: memory-mapped, no cache
    g = ld.sampler.graph
    (indptr, ids), = g.csc.values()
    assert isinstance(ids, PackedIds) and ids.bits == (homo_store.num_nodes() - 1).bit_length()
    assert not ld.plan.fits and ld.plan.topology == "memory" and ld.plan.topology_bits == ids.bits
    assert ld.plan.topology_bytes == resident_topology_bytes(homo_store)
    assert f"{ids.bits}-bit packed ids" in str(ld.plan)
    assert ld.plan.planned_bytes <= ld.plan.budget
    # the bytes the packing saves go to the cache
    assert plain.plan.topology_bits == 0
    assert sum(ld.plan.cache_rows.values()) > sum(plain.plan.cache_rows.values())
    for a, b in zip(ld, ref):
        _same(a.subgraph, b.subgraph)
        (t, x), = a.x.items()
        assert np.array_equal(x.numpy(), F[a.subgraph.node[t]])


def test_link_loader_over_a_packed_topology(homo_store):
    kw = dict(num_neighbors=[4, 2], batch_size=32, neg_sampling="binary", device="cpu",
              edge_label_index=None)
    a = LinkNeighborLoader(homo_store, topology="packed", **kw)
    b = LinkNeighborLoader(homo_store, topology="mmap", **kw)
    assert isinstance(next(iter(a.sampler.graph.csc.values()))[1], PackedIds)
    for k, (x, y) in enumerate(zip(a, b)):
        _same(x.subgraph, y.subgraph)
        if k == 3:
            break


def test_topology_argument_is_checked(homo_store):
    from loaders.errors import LoaderArgumentError

    with pytest.raises(LoaderArgumentError, match="'packed'"):
        NeighborLoader(homo_store, [2], "train", topology="bits")
    et = EdgeType("v", "e", "v")
    ip, ix, _, _ = random_csc(np.random.default_rng(0), 10, 10, 40)
    with pytest.raises(LoaderArgumentError, match="'packed'"):
        CSCGraph.from_store(CSCGraph({"v": 10}, {et: (ip, ix)}), "bits")


@pytest.mark.parametrize("topology", ["memory", "packed"])
def test_a_copy_asked_for_is_counted_once(homo_store, monkeypatch, topology):
    """topology='memory'/'packed' is copied at construction, so what the process may still
    use (read after it) already lacks it: the budget gives it back, and the plan counts it
    once (R-MAT 22 under a 1.5 GiB cgroup was refused, 'over budget by 668 MiB')."""
    from loaders.loader import planning

    kw = dict(num_neighbors=[5, 3], input_nodes="train", batch_size=64, device="cpu")
    monkeypatch.setattr(planning, "available_memory", lambda: 200 << 20)
    ld = NeighborLoader(homo_store, topology=topology, **kw)
    topo = sum(p.nbytes + i.nbytes for p, i in ld.sampler.graph.csc.values())
    assert ld.plan.budget == (200 << 20) + topo
    assert ld.plan.topology == "memory" and ld.plan.topology_bytes == topo
    assert isinstance(next(iter(ld.sampler.graph.csc.values()))[1],
                      PackedIds if topology == "packed" else np.ndarray)
