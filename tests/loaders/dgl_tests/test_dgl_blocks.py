"""``loaders.dgl.to_dgl``: the blocks against the sampled graph and the store (run in .venv-dgl)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dgl_helpers import hetero_store, homo_store, import_dgl, minibatch, sample

dgl = import_dgl()

from loaders.dgl import to_dgl  # noqa: E402

FANOUTS = [4, 3, -1]


@pytest.fixture(scope="module", params=[("homo", "handmade"), ("hetero", "handmade"),
                                        ("homo", "numba"), ("hetero", "numba")],
                ids="-".join)
def case(request, tmp_path_factory):
    """(store, sampled subgraph, seeds, mini-batch, to_dgl output) from a hand-made NumPy sampler
    (tests/loaders/dgl_tests/dgl_helpers.py) or the package's numba ``NeighborSampler``."""
    graph, sampler = request.param
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp(graph) / "store"
    if graph == "homo":
        store = homo_store(path, rng)
        seed_type = "node"
    else:
        store = hetero_store(path, rng)
        seed_type = "paper"
    seeds = rng.choice(store.split("train", seed_type), 40, replace=False)
    if sampler == "handmade":
        sub = sample(store, seed_type, seeds, FANOUTS, rng)
    else:
        from loaders.sample.sampler import NeighborSampler

        sub = NeighborSampler(store, FANOUTS).sample(seeds, seed_type, seed=1, epoch=2, batch=3)
    batch = minibatch(store, sub)
    yield store, sub, seeds, batch, to_dgl(batch)
    store.close()


def per_type(value, nt, homogeneous):
    """A block's per-type data, whether DGL returned a tensor (one type) or a dict."""
    return value if homogeneous else value[nt]


def test_outputs_are_what_dgl_dataloader_yields(case):
    store, sub, seeds, batch, (input_nodes, output_nodes, blocks) = case
    homo = len(store.node_types) == 1
    assert len(blocks) == len(FANOUTS)
    assert all(b.is_block for b in blocks)
    if homo:
        assert torch.is_tensor(input_nodes) and torch.is_tensor(output_nodes)
        np.testing.assert_array_equal(output_nodes.numpy(), seeds)
    else:
        assert set(input_nodes) == set(store.node_types)
        assert set(output_nodes) == {sub.seed_type}
        np.testing.assert_array_equal(output_nodes[sub.seed_type].numpy(), seeds)
    for nt in store.node_types:
        # blocks[0] takes every sampled node as input; blocks[-1] outputs exactly the seeds
        np.testing.assert_array_equal(per_type(input_nodes, nt, homo).numpy(), sub.node[nt])
        np.testing.assert_array_equal(per_type(blocks[0].srcdata[dgl.NID], nt, homo).numpy(),
                                      sub.node[nt])
    last_dst = per_type(blocks[-1].dstdata[dgl.NID], sub.seed_type, homo).numpy()
    np.testing.assert_array_equal(last_dst, seeds)
    assert sorted(blocks[0].canonical_etypes) == sorted(tuple(et) for et in store.edge_types)


def test_dst_nodes_prefix_src_nodes_and_blocks_chain(case):
    store, sub, _, _, (_, _, blocks) = case
    homo = len(store.node_types) == 1
    for k, b in enumerate(blocks):
        for nt in store.node_types:
            src = per_type(b.srcdata[dgl.NID], nt, homo).numpy()
            dst = per_type(b.dstdata[dgl.NID], nt, homo).numpy()
            assert b.num_src_nodes(nt) == src.size and b.num_dst_nodes(nt) == dst.size
            np.testing.assert_array_equal(src[:dst.size], dst)  # DGL's prefix requirement
            assert len(np.unique(src)) == src.size
            if k + 1 < len(blocks):  # layer k's outputs are layer k+1's inputs
                nxt = per_type(blocks[k + 1].srcdata[dgl.NID], nt, homo).numpy()
                np.testing.assert_array_equal(dst, nxt)


def test_every_block_edge_is_a_store_edge(case):
    store, sub, _, _, (_, _, blocks) = case
    homo = len(store.node_types) == 1
    for b in blocks:
        for cet in b.canonical_etypes:
            indptr, indices = (np.asarray(a) for a in store.csc(cet))
            u, v = (t.numpy() for t in b.edges(etype=cet))
            eid = b.edges[cet].data[dgl.EID].numpy()
            gsrc = per_type(b.srcdata[dgl.NID], cet[0], homo).numpy()[u]
            gdst = per_type(b.dstdata[dgl.NID], cet[2], homo).numpy()[v]
            # the edge id is the position in the store's CSC: it lies in the destination's
            # range and holds the source
            assert np.all(indptr[gdst] <= eid) and np.all(eid < indptr[gdst + 1])
            np.testing.assert_array_equal(indices[eid], gsrc)


def test_block_in_edges_are_the_sampled_neighbourhoods(case):
    """Each dst node of a block has all its sampled in-edges and only those: min(fanout, deg)."""
    store, sub, _, _, (_, _, blocks) = case
    homo = len(store.node_types) == 1
    L = len(FANOUTS)
    for k, b in enumerate(blocks):
        for cet in b.canonical_etypes:
            et = next(e for e in store.edge_types if tuple(e) == cet)
            indptr = np.asarray(store.csc(et)[0])
            dst_g = per_type(b.dstdata[dgl.NID], cet[2], homo).numpy()
            n_dst = dst_g.size
            # the sampled edges into the block's dst nodes, from the sampled graph itself
            mask = sub.col[et] < n_dst
            want = sorted(zip(sub.row[et][mask], sub.col[et][mask], sub.edge[et][mask]))
            u, v = (t.numpy() for t in b.edges(etype=cet))
            got = sorted(zip(u, v, b.edges[cet].data[dgl.EID].numpy()))
            assert got == want
            # a dst node reached at hop h had its neighbours drawn at layer h+1
            hop = np.repeat(np.arange(L + 1), sub.num_sampled_nodes[cet[2]])[:n_dst]
            fan = np.asarray(FANOUTS)[hop]
            deg = indptr[dst_g + 1] - indptr[dst_g]
            expect = np.where(fan < 0, deg, np.minimum(fan, deg))
            np.testing.assert_array_equal(b.in_degrees(etype=cet).numpy(), expect)
            assert len(set(got)) == len(got)  # without replacement: distinct edges
        if k == L - 1:  # the output block holds only the first layer's edges
            total = sum(b.num_edges(cet) for cet in b.canonical_etypes)
            assert total == sum(c[0] for c in sub.num_sampled_edges.values())


def test_features_and_labels_match_the_store(case):
    store, sub, seeds, _, (input_nodes, _, blocks) = case
    homo = len(store.node_types) == 1
    feat = blocks[0].srcdata["feat"]
    for nt in store.node_types:
        ids = per_type(input_nodes, nt, homo).numpy()
        want = np.asarray(store.features(nt, "feat").numpy())[ids]
        got = per_type(feat, nt, homo)
        assert got.dtype == torch.from_numpy(want[:0]).dtype
        np.testing.assert_array_equal(got.numpy(), want)
    label = per_type(blocks[-1].dstdata["label"], sub.seed_type, homo).numpy()
    np.testing.assert_array_equal(label, np.asarray(store.labels(sub.seed_type))[seeds])


def test_message_passing_equals_numpy_mean_over_sampled_neighbours(case):
    """DGL's mean aggregation over blocks[0] equals a NumPy mean over the sampled edges."""
    store, sub, _, batch, (_, _, blocks) = case
    b = blocks[0]
    for cet in b.canonical_etypes:
        et = next(e for e in store.edge_types if tuple(e) == cet)
        if cet[0] not in batch.x:
            continue
        x = batch.x[cet[0]].float()
        h = dgl.ops.copy_u_mean(b[cet], x[:b.num_src_nodes(cet[0])])
        n_dst = b.num_dst_nodes(cet[2])
        r, c = sub.row[et], sub.col[et]
        keep = c < n_dst
        ref = np.zeros((n_dst, x.shape[1]))
        np.add.at(ref, c[keep], x.numpy()[r[keep]])
        cnt = np.bincount(c[keep], minlength=n_dst)
        ref = ref / np.maximum(cnt, 1)[:, None]
        np.testing.assert_allclose(h.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_missing_counts_are_rejected(case):
    from dataclasses import replace

    from loaders.dgl import to_blocks

    _, sub, _, _, _ = case
    nt = sub.seed_type
    bad = dict(sub.num_sampled_nodes)
    bad[nt] = [c + 1 for c in bad[nt]]
    with pytest.raises(ValueError, match="num_sampled_nodes"):
        to_blocks(replace(sub, num_sampled_nodes=bad))


def test_a_device_dgl_cannot_use_is_refused_clearly(case):
    """PyPI's dgl 2.1.0 is CPU-only: asking for blocks on CUDA names the cause and the way out."""
    from loaders.dgl import DGLNotInstalledError, require_dgl, to_blocks

    if torch.cuda.is_available():
        try:
            dgl.graph(([0], [0])).to("cuda")
            pytest.skip("this DGL build has CUDA")
        except Exception:
            pass
    _, sub, _, _, _ = case
    with pytest.raises(DGLNotInstalledError, match="device='cpu'"):
        to_blocks(sub, device="cuda")
    with pytest.raises(DGLNotInstalledError, match="device='cpu'"):
        require_dgl("cuda")
    assert require_dgl("cpu") is dgl


def test_blocks_carry_edge_features_by_eid(tmp_path):
    """Each block's edata holds the loader's edge rows (DGL's prefetch_edge_feats): every edge's
    row encodes its own endpoints and edge type, checked against the block's NID/EID."""
    import featurestore as fs
    import loaders
    from featurestore.format.names import EdgeType

    rng = np.random.default_rng(3)
    n = 200
    w = fs.create_store(tmp_path / "s.store")
    w.add_node_type("n", n)
    w.add_features("n", "feat", rng.standard_normal((n, 4)).astype(np.float32))
    for k, rel in enumerate(("r", "s")):
        dst = np.sort(rng.integers(0, n, 1500))
        src = rng.integers(0, n, 1500)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
        w.add_edge_type(("n", rel, "n"), indptr, src)
        w.add_edge_features(("n", rel, "n"), "w",
                            np.stack([src, dst, np.full_like(src, k)], 1).astype(np.float32))
    w.add_split("train", "n", np.arange(64))
    w.commit()
    with fs.open_store(tmp_path / "s.store") as store:
        ld = loaders.NeighborLoader(store, [3, 2], "train", batch_size=32, output="dgl",
                                    device="cpu")
        _, _, blocks = next(iter(ld))
        for b in blocks:
            for k, rel in enumerate(("r", "s")):
                cet = ("n", rel, "n")
                u, v = b.edges(etype=cet)
                rows = b.edges[cet].data["w"]
                assert rows.shape == (b.num_edges(cet), 3)
                src_id = b.srcnodes["n"].data[dgl.NID][u]
                dst_id = b.dstnodes["n"].data[dgl.NID][v]
                assert torch.equal(rows[:, 0].long(), src_id)
                assert torch.equal(rows[:, 1].long(), dst_id)
                assert (rows[:, 2] == k).all()
                # and by the block's own edge ids, the store's rows
                eid = b.edges[cet].data[dgl.EID].numpy()
                want = np.asarray(store.edge_features(EdgeType("n", rel, "n"), "w").gather(eid))
                assert np.array_equal(rows.numpy(), want)
