"""The relational view with ``output="dgl"`` against ``dgl.to_homogeneous`` of the whole store
built as a DGL heterograph in memory (run in .venv-dgl)."""

from __future__ import annotations

import numpy as np
import pytest

from dgl_helpers import import_dgl

dgl = import_dgl()

import torch  # noqa: E402

import featurestore as fs  # noqa: E402
from loaders import NeighborLoader  # noqa: E402
from loaders.datasets.synthetic import mag_like_store  # noqa: E402


@pytest.fixture(scope="module")
def rel_store(tmp_path_factory):
    path = mag_like_store(tmp_path_factory.mktemp("dgl-rel") / "s", num_papers=500,
                          num_authors=300, num_institutions=20, feat_dim=8, seed=9,
                          derive_features=True)
    with fs.open_store(path) as s:
        yield s


def test_dgl_blocks_match_to_homogeneous(rel_store):
    s = rel_store
    data = {}
    for et in s.edge_types:
        indptr, indices = s.csc(et)
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        data[tuple(et)] = (torch.from_numpy(np.asarray(indices, np.int64)), torch.from_numpy(dst))
    g = dgl.heterograph(data, num_nodes_dict={t: s.num_nodes(t) for t in s.node_types})
    for t in s.node_types:
        g.nodes[t].data["feat"] = torch.from_numpy(s.features(t, "feat").numpy().astype(np.float32))
    hg = dgl.to_homogeneous(g, ndata=["feat"])
    assert g.ntypes == list(s.node_types)  # DGL numbers node types as the store orders them
    # DGL's edge type j is g.canonical_etypes[j]; ours k is store.edge_types[k]
    ours_to_dgl = np.array([g.canonical_etypes.index(tuple(et)) for et in s.edge_types])
    u, v = hg.edges()
    N = hg.num_nodes()
    key = set(((u * N + v) * 16 + hg.edata[dgl.ETYPE]).tolist())
    ld = NeighborLoader(s, [3, 4], ("paper", "train"), batch_size=40, output="dgl",
                        device="cpu", homogeneous=True, dtype=torch.float32)
    for input_nodes, output_nodes, blocks in ld:
        assert torch.equal(blocks[0].srcdata["feat"], hg.ndata["feat"][input_nodes])
        assert (hg.ndata[dgl.NTYPE][output_nodes] == g.ntypes.index("paper")).all()
        for b in blocks:
            src_ids, dst_ids = b.srcdata[dgl.NID], b.dstdata[dgl.NID]
            assert torch.equal(dst_ids, src_ids[: b.num_dst_nodes()])
            assert torch.equal(b.srcdata[dgl.NTYPE], hg.ndata[dgl.NTYPE][src_ids])
            assert torch.equal(b.edata["etype"], b.edata[dgl.ETYPE])
            bu, bv = b.edges()
            et = torch.from_numpy(ours_to_dgl[b.edata["etype"].numpy()])
            got = ((src_ids[bu] * N + dst_ids[bv]) * 16 + et).tolist()
            assert got and set(got) <= key
        assert blocks[-1].dstdata["label"].shape[0] == output_nodes.shape[0]


def test_node_collator_in_a_dataloader_with_workers(rel_store):
    """loaders.dgl.NodeCollator (DGL's NodeCollator call) inside a PyTorch DataLoader with two
    worker processes: seeds, prefix blocks, etypes and NTYPE against the store."""
    import pickle

    from loaders.dgl import NodeCollator
    from loaders.sample.relational import HomogeneousGraph

    s = rel_store
    g = HomogeneousGraph(s)
    off = dict(zip(g.node_types, g.offsets.tolist()))
    keys = set()
    for k, et in enumerate(s.edge_types):
        indptr, indices = s.csc(et)
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        keys |= set(zip((np.asarray(indices) + off[et.src]).tolist(),
                        (dst + off[et.dst]).tolist(), [k] * len(dst)))
    indeg = torch.zeros(g.num_nodes(), dtype=torch.int64)  # in the homogeneous graph
    for et in s.edge_types:
        d = np.diff(s.csc(et)[0]).astype(np.int64)
        indeg[off[et.dst]:off[et.dst] + d.shape[0]] += torch.from_numpy(d)
    idx = torch.from_numpy(np.asarray(s.split("train", "paper")) + off["paper"])
    col = NodeCollator(g, idx, dgl.dataloading.MultiLayerNeighborSampler([3, 5]))
    pickle.loads(pickle.dumps(col))
    dl = torch.utils.data.DataLoader(col.dataset, batch_size=50, collate_fn=col.collate,
                                     num_workers=2)
    seen = []
    for input_nodes, output_nodes, blocks in dl:
        seen.append(output_nodes)
        assert torch.equal(input_nodes[: output_nodes.numel()], output_nodes)
        for b in blocks:
            sid, did = b.srcdata[dgl.NID], b.dstdata[dgl.NID]
            kind = np.searchsorted(g.offsets, sid.numpy(), side="right") - 1
            assert (b.srcdata[dgl.NTYPE].numpy() == kind).all()
            u, v = b.edges()
            got = set(zip(sid[u].tolist(), did[v].tolist(), b.edata["etype"].tolist()))
            assert got and got <= keys
        # DGL's order: the seeds' layer (last) draws 5 in-edges per seed over all relations,
        # as DGL's sampler on the to_homogeneous graph does: min(5, homogeneous in-degree)
        _, v = blocks[-1].edges()
        got = torch.bincount(v, minlength=blocks[-1].num_dst_nodes())
        assert torch.equal(got, torch.clamp(indeg[blocks[-1].dstdata[dgl.NID]], max=5))
    assert torch.equal(torch.cat(seen), idx)
