"""``loaders.graphbolt`` against GraphBolt itself (run in .venv-dgl).

One small graph is written twice: as a store and as GraphBolt's ``OnDiskDataset`` directory
(``metadata.yaml`` and ``.npy`` files, whose CSC GraphBolt builds in the same order). The same
model, seeded alike, then trains through GraphBolt's real datapipe and through ours with every
neighbour sampled (``-1``, so sampling draws nothing) and the same shuffled order: the blocks
hold the same nodes and edges, and the losses are equal batch by batch over two epochs of
updates. Dropout is off: the non-seed nodes of a block come in another order than GraphBolt's
(its compaction orders them by a hash map), so its masks would fall on other rows.
Then the API (feature store, unsupported steps) and the ported ``node_classification.py``.
"""

from __future__ import annotations

import re
import runpy
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dgl_helpers import csc_of, import_dgl, unported_blob

dgl = import_dgl()

import dgl.graphbolt as dgb  # noqa: E402
import dgl.nn as dglnn  # noqa: E402
import yaml  # noqa: E402

import featurestore as fs  # noqa: E402
import loaders.graphbolt as gb  # noqa: E402
from loaders.errors import UnsupportedArgumentError  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SCRIPT = EXAMPLES / "graphbolt_node_classification.py"
PATCH = EXAMPLES / "graphbolt_node_classification.patch"
UPSTREAM_BLOB = "11a3852513978d3affe63ed272a05f2841480cce"  # v2.1.0:examples/sampling/graphbolt/…
N, M, DIM, CLASSES = 400, 2400, 8, 4


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """``(our dataset, GraphBolt's dataset)`` of one random graph with features, labels and
    train/valid/test splits."""
    root = tmp_path_factory.mktemp("twins")
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, M), rng.integers(0, N, M)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    y = rng.integers(0, CLASSES, N)
    perm = rng.permutation(N)
    splits = {"train": np.sort(perm[:200]), "valid": np.sort(perm[200:300]),
              "test": np.sort(perm[300:])}
    # GraphBolt's CSC keeps each destination's in-edges in input order: a stable sort by dst
    indptr, _ = csc_of(src, dst, N)
    indices = src[np.argsort(dst, kind="stable")]
    w = fs.create_store(root / "store", mode="w")
    w.add_node_type("node", N)
    w.add_edge_type(("node", "to", "node"), indptr, indices)
    w.add_features("node", "feat", x)
    w.add_labels("node", y)
    for name, ids in splits.items():
        w.add_split(name, "node", ids)
    w.commit()
    d = root / "graphbolt"
    d.mkdir()
    np.save(d / "edges.npy", np.stack([src, dst]))
    np.save(d / "feat.npy", x)
    sets = {}
    for name, ids in splits.items():
        np.save(d / f"{name}_nodes.npy", ids)
        np.save(d / f"{name}_labels.npy", y[ids])
        key = "validation_set" if name == "valid" else f"{name}_set"
        sets[key] = [{"data": [
            {"name": "seed_nodes", "format": "numpy", "path": f"{name}_nodes.npy"},
            {"name": "labels", "format": "numpy", "path": f"{name}_labels.npy"}]}]
    meta = {"dataset_name": "twin",
            "graph": {"nodes": [{"num": N}], "edges": [{"format": "numpy", "path": "edges.npy"}]},
            "feature_data": [{"domain": "node", "name": "feat", "format": "numpy",
                              "in_memory": True, "path": "feat.npy"}],
            "tasks": [{"name": "node_classification", "num_classes": CLASSES, **sets}]}
    (d / "metadata.yaml").write_text(yaml.safe_dump(meta))
    theirs = dgb.OnDiskDataset(str(d), force_preprocess=True).load()
    ours = gb.OnDiskDataset(root / "store").load()
    assert torch.equal(theirs.graph.csc_indptr.long(), torch.from_numpy(indptr))
    assert torch.equal(theirs.graph.indices.long(), torch.from_numpy(indices))
    return ours, theirs


class SAGE(torch.nn.Module):
    """The example's GraphSAGE-mean, in two layers (dropout off, see the module)."""

    def __init__(self, hidden=16, dropout=0.0):
        super().__init__()
        self.layers = torch.nn.ModuleList([dglnn.SAGEConv(DIM, hidden, "mean"),
                                           dglnn.SAGEConv(hidden, CLASSES, "mean")])
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, blocks, h):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def _pipeline(lib, dataset, batch_size=64, shuffle=True, fanouts=(-1, -1), rng_seed=3):
    """The example's ``create_dataloader`` chain, through ``lib`` (GraphBolt or ours)."""
    sampler = lib.ItemSampler(dataset.tasks[0].train_set, batch_size=batch_size,
                              shuffle=shuffle)
    if lib is gb:
        sampler.rng = np.random.default_rng(rng_seed)
    else:
        sampler._rng = np.random.default_rng(rng_seed)  # GraphBolt's OS-seeded generator
    pipe = sampler.sample_neighbor(dataset.graph, list(fanouts))
    pipe = pipe.fetch_feature(dataset.feature, node_feature_keys=["feat"]).copy_to("cpu")
    return lib.DataLoader(pipe, num_workers=0)


def _train(lib, dataset, epochs=2):
    """Per batch: the loss, the blocks' (src ids, dst ids, edges as id pairs), the batch's
    features by node id and its seeds and labels."""
    torch.manual_seed(0)
    model = SAGE()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = _pipeline(lib, dataset)
    out = []
    for _ in range(epochs):
        model.train()
        for data in loader:
            loss = F.cross_entropy(model(data.blocks, data.node_features["feat"]), data.labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ids = data.input_nodes.long()
            blocks = []
            for b in data.blocks:
                s, d = b.edges()
                src_ids, dst_ids = ids[: b.num_src_nodes()], ids[: b.num_dst_nodes()]
                blocks.append((src_ids, dst_ids, sorted(zip(src_ids[s].tolist(),
                                                            dst_ids[d].tolist()))))
            feats = dict(zip(ids.tolist(), data.node_features["feat"]))
            out.append((loss.item(), blocks, feats, data.seed_nodes.long(), data.labels))
    return out


def test_same_batches_and_losses_as_graphbolt(twins):
    ours, theirs = twins
    mine, ref = _train(gb, ours), _train(dgb, theirs)
    assert len(mine) == len(ref) == 2 * 4
    for (_, blocks, feats, seeds, labels), (_, r_blocks, r_feats, r_seeds, r_labels) \
            in zip(mine, ref):
        assert torch.equal(seeds, r_seeds) and torch.equal(labels, r_labels.long())
        for (src, dst, edges), (r_src, r_dst, r_edges) in zip(blocks, r_blocks):
            assert set(src.tolist()) == set(r_src.tolist())
            assert torch.equal(dst[: len(seeds)], r_dst[: len(seeds)])  # seeds first, in order
            assert set(dst.tolist()) == set(r_dst.tolist()) and edges == r_edges
        assert feats.keys() == r_feats.keys()
        assert all(torch.equal(feats[k], r_feats[k]) for k in feats)
    # the same model on the same batches: GraphBolt's losses, batch by batch, over two epochs
    assert torch.allclose(torch.tensor([m[0] for m in mine]), torch.tensor([r[0] for r in ref]),
                          rtol=1e-5, atol=1e-6)


def test_layerwise_inference_reads_the_updated_feature(twins):
    """The example's inference: one full-neighbour loader over all nodes, iterated per layer,
    with ``features.update("node", None, "feat", y)`` in between."""
    torch.manual_seed(1)
    model = SAGE().eval()
    results = []
    ours, theirs = twins
    for lib, dataset in ((gb, gb.OnDiskDataset(ours.store).load()), (dgb, theirs)):
        features = dataset.feature
        pipe = lib.ItemSampler(dataset.all_nodes_set, batch_size=128)
        pipe = pipe.sample_neighbor(dataset.graph, [-1]).fetch_feature(
            features, node_feature_keys=["feat"])
        loader = lib.DataLoader(pipe)
        original = features.read("node", None, "feat")
        with torch.no_grad():
            for i, (layer, width) in enumerate(zip(model.layers, (16, CLASSES))):
                y = torch.empty(N, width)
                for data in loader:
                    h = layer(data.blocks[0], data.node_features["feat"])
                    y[data.seed_nodes[0]: data.seed_nodes[-1] + 1] = h
                if i < len(model.layers) - 1:
                    features.update("node", None, "feat", y)
        features.update("node", None, "feat", original)
        results.append(y)
    assert torch.allclose(results[0], results[1], atol=1e-5)


def test_dataset_and_feature_store(twins):
    ours, theirs = twins
    assert ours.tasks[0].metadata["num_classes"] == CLASSES
    assert ours.graph.total_num_nodes == theirs.graph.total_num_nodes == N
    for name in ("train_set", "validation_set", "test_set"):
        a, b = getattr(ours.tasks[0], name), getattr(theirs.tasks[0], name)
        assert a.names == b.names == ("seed_nodes", "labels") and len(a) == len(b)
        assert torch.equal(a._items[0], b._items[0].long())  # the example reads _items
    f = gb.OnDiskDataset(ours.store).load().feature  # its own: updates stay in memory
    assert f.keys() == [("node", None, "feat")]
    assert f.size("node", None, "feat") == theirs.feature.size("node", None, "feat")
    ids = torch.tensor([5, 0, 5, 399])
    assert torch.equal(f.read("node", None, "feat", ids),
                       theirs.feature.read("node", None, "feat", ids))
    with pytest.raises(fs.UnknownFeatureError, match="among"):
        f.read("node", None, "label")
    with pytest.raises(fs.UnknownFeatureError, match="domain 'node'"):
        f.size("edge", None, "feat")
    # rows of a feature still in the (read-only) store cannot be written ...
    with pytest.raises(UnsupportedArgumentError, match="ids=None"):
        f.update("node", None, "feat", torch.zeros(2, DIM), ids=torch.tensor([0, 1]))
    assert not f.writes_to_store
    with pytest.raises(fs.InvalidArgumentError, match="400 rows"):
        f.update("node", None, "feat", torch.zeros(3, DIM))
    # ... once replaced in memory they can, and reads follow; the store is untouched
    original = f.read("node", None, "feat")
    f.update("node", None, "feat", torch.zeros(N, 3))
    f.update("node", None, "feat", torch.ones(2, 3), ids=torch.tensor([1, 7]))
    assert f.size("node", None, "feat") == torch.Size([3])
    assert f.read("node", None, "feat", torch.tensor([7, 2])).tolist() == [[1] * 3, [0] * 3]
    f.update("node", None, "feat", original)
    assert torch.equal(f.read("node", None, "feat"),
                       torch.from_numpy(ours.store.features(None, "feat").gather(np.arange(N))))


def test_unsupported_steps_name_what_is_supported(twins):
    ours, _ = twins
    sampler = gb.ItemSampler(ours.tasks[0].train_set, batch_size=8)
    with pytest.raises(gb.UnsupportedDatapipeError, match="sample_neighbor, .*fetch_feature"):
        sampler.sample_uniform_negative(ours.graph, 1)
    pipe = sampler.sample_neighbor(ours.graph, [2, 2])
    with pytest.raises(AttributeError, match="'to_dgl'"):  # also an AttributeError
        pipe.to_dgl()
    with pytest.raises(gb.UnsupportedDatapipeError, match="prob_name"):
        sampler.sample_neighbor(ours.graph, [2], prob_name="w")
    with pytest.raises(gb.UnsupportedDatapipeError, match="before sample_neighbor"):
        sampler.fetch_feature(ours.feature, ["feat"])
    with pytest.raises(gb.UnsupportedDatapipeError, match="node_pairs"):
        gb.ItemSampler(gb.ItemSet((torch.zeros(3, 2),), names=("node_pairs",)), batch_size=2)
    with pytest.raises(fs.InvalidArgumentError, match="sampling step"):
        gb.DataLoader(sampler)
    with pytest.raises(fs.UnknownFeatureError, match="among"):
        pipe.fetch_feature(ours.feature, node_feature_keys=["x"])
    assert set(gb.SUPPORTED_STEPS) >= {"sample_neighbor", "fetch_feature", "copy_to"}


def test_sampled_batches_and_labor(twins):
    """With fanouts (our draws, not GraphBolt's) and with ``sample_layer_neighbor``: batches
    cover every training seed once, labels match, and features are the store's rows."""
    ours, _ = twins
    train = ours.tasks[0].train_set
    for step in ("sample_neighbor", "sample_layer_neighbor"):
        pipe = getattr(gb.ItemSampler(train, batch_size=50, shuffle=True), step)(
            ours.graph, [3, 3]).fetch_feature(ours.feature, node_feature_keys=["feat"])
        seen = []
        for data in gb.DataLoader(pipe, num_workers=2):
            assert len(data.blocks) == 2 and data.blocks[-1].num_dst_nodes() == 50
            assert torch.equal(data.labels, torch.from_numpy(
                np.asarray(ours.store.labels())[data.seed_nodes.numpy()]))
            assert torch.equal(data.node_features["feat"],
                               ours.feature.read("node", None, "feat", data.input_nodes))
            seen.append(data.seed_nodes)
        assert sorted(torch.cat(seen).tolist()) == sorted(train._items[0].tolist())


def test_port_is_graphbolt_file_plus_patch_and_counts():
    text = SCRIPT.read_text()
    assert text.startswith("# Ported from DGL 2.1.0") and "Apache License" in text
    blob, changed = unported_blob(text, PATCH.read_text(), "# --- end of header ---\n")
    assert blob == UPSTREAM_BLOB
    assert changed == 1 <= 10  # docs/migrate.md lists 1


def test_ported_example_trains(tmp_path, monkeypatch, capsys):
    """The port as DGL wrote it (its torchmetrics accuracy stubbed: not in .venv-dgl) on a
    homophilous graph at datasets/ogbn-arxiv: training, validation, layer-wise inference."""
    from loaders.datasets.synthetic import power_law_store

    power_law_store(tmp_path / "datasets" / "ogbn-arxiv", num_nodes=2000, num_edges=16000,
                    feat_dim=16, num_classes=4, noise=0.5, homophily=0.8, train_frac=0.3,
                    seed=2)
    metrics = types.ModuleType("torchmetrics.functional")
    metrics.accuracy = lambda pred, label, task, num_classes: (
        (pred.argmax(1) == label).float().mean())
    monkeypatch.setitem(sys.modules, "torchmetrics", types.ModuleType("torchmetrics"))
    monkeypatch.setitem(sys.modules, "torchmetrics.functional", metrics)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--dataset", "ogbn-arxiv", "--epochs", "2",
                                      "--batch-size", "256", "--fanout", "5,5,5",
                                      "--lr", "0.01"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"Loss (\d+\.\d+)", out)]
    assert len(losses) == 2 and losses[-1] < losses[0]
    test_acc = float(out.rsplit("Test accuracy", 1)[1].split()[0])
    assert test_acc > 0.5  # chance is 0.25


def test_typed_store(hetero_store_path):
    """A MAG-like store: the task's sets are ItemSetDicts, features keyed by (type, name)."""
    ds = gb.OnDiskDataset(hetero_store_path).load()
    train = ds.tasks[0].train_set
    assert isinstance(train, gb.ItemSetDict) and list(train.keys()) == ["paper"]
    assert ds.feature.keys() == [("node", "paper", "feat")]
    pipe = gb.ItemSampler(train, batch_size=64).sample_neighbor(ds.graph, [2, 2])
    pipe = pipe.fetch_feature(ds.feature, node_feature_keys={"paper": ["feat"]})
    data = next(iter(gb.DataLoader(pipe)))
    assert data.seed_nodes["paper"].shape == (64,) and data.labels["paper"].shape == (64,)
    x = data.node_features[("paper", "feat")]
    assert torch.equal(x, ds.feature.read("node", "paper", "feat", data.input_nodes["paper"]))
    with pytest.raises(fs.InvalidArgumentError, match="ItemSetDict"):
        gb.DataLoader(gb.ItemSampler(train["paper"], batch_size=8).sample_neighbor(ds.graph, [2]))
