"""Store.metadata() and Store.num_classes(): PyG's (node_types, edge_types) and the class count,
against a brute-force expectation, on a local and a memory:// store."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import featurestore as fs
from featurestore.errors import FeatureStoreError, UnknownFeatureError, UnknownNodeTypeError
from graph_helpers import random_csc

N_PAPER, N_AUTHOR, N_FIELD = 700, 300, 40
EDGES = [("author", "writes", "paper"), ("paper", "cites", "paper"),
         ("field", "has", "paper"), ("paper", "rev_writes", "author")]
SIZES = {"paper": N_PAPER, "author": N_AUTHOR, "field": N_FIELD}


def build(url, rng):
    """Papers labelled in [0, 13) with -1 holes, authors without labels, fields all -1."""
    w = fs.create_store(url, mode="w")
    for t in ("paper", "author", "field"):
        w.add_node_type(t, SIZES[t])
    for src, rel, dst in EDGES:
        indptr, indices = random_csc(rng, SIZES[src], SIZES[dst], 2000)[:2]
        w.add_edge_type((src, rel, dst), indptr, indices)
    label = rng.integers(-1, 13, N_PAPER)
    label[label == 12] = -1  # the largest drawn class is unlabelled: num_classes is 12, not 13
    w.add_labels("paper", label)
    w.add_labels("field", np.full(N_FIELD, -1, np.int64))
    w.add_values("author", "year", rng.integers(1990, 2020, N_AUTHOR))
    w.commit()
    return label


def brute_num_classes(labels) -> int:
    top = -1
    for v in labels.tolist():
        if v >= 0 and v > top:
            top = v
    return top + 1


@pytest.fixture(params=["local", "memory"])
def built(request, tmp_path):
    url = (str(tmp_path / "store") if request.param == "local"
           else f"memory://fs-meta-{uuid.uuid4().hex}")
    label = build(url, np.random.default_rng(3))
    s = fs.open_store(url)
    yield s, label
    s.close()


def test_metadata_matches_pyg(built):
    s, _ = built
    nts, ets = s.metadata()
    assert nts == sorted(SIZES)
    assert sorted(ets) == sorted(EDGES)
    assert all(type(e) is tuple and len(e) == 3 for e in ets)  # plain tuples, as PyG's
    pyg = pytest.importorskip("torch_geometric.data")
    h = pyg.HeteroData()
    for t in nts:
        h[t].num_nodes = SIZES[t]
    for e in ets:
        h[e].edge_index = np.zeros((2, 0), np.int64)
    assert h.metadata() == (nts, ets)


def test_num_classes_brute_force(built):
    s, label = built
    assert s.num_classes("paper") == brute_num_classes(label) == 12
    with pytest.raises(UnknownNodeTypeError, match=r"\['field', 'paper'\]"):
        s.num_classes()  # two node types carry a label array
    with pytest.raises(UnknownFeatureError, match="author.*no 'label'"):
        s.num_classes("author")
    with pytest.raises(UnknownFeatureError, match="All 40 labels are negative"):
        s.num_classes("field")
    with pytest.raises(UnknownNodeTypeError, match="venue"):
        s.num_classes("venue")
    assert issubclass(UnknownFeatureError, FeatureStoreError)


@pytest.mark.parametrize("shift", [0, 5])
def test_num_classes_single_labelled_type(tmp_path, shift):
    """ntype=None: the only node type, or the only one with labels; unsigned labels too."""
    rng = np.random.default_rng(shift)
    for hetero in (False, True):
        url = str(tmp_path / f"s{int(hetero)}")
        w = fs.create_store(url, mode="w")
        w.add_node_type("paper", 500)
        indptr, indices = random_csc(rng, 500, 500, 1500)[:2]
        w.add_edge_type(("paper", "cites", "paper"), indptr, indices)
        if hetero:
            w.add_node_type("author", 50)
            indptr, indices = random_csc(rng, 50, 500, 200)[:2]
            w.add_edge_type(("author", "writes", "paper"), indptr, indices)
        label = rng.integers(0, 7 + shift, 500).astype(np.uint16)
        w.add_labels("paper", label)
        w.commit()
        with fs.open_store(url) as s:
            assert s.num_classes() == s.num_classes("paper") == brute_num_classes(label)
            if not hetero:
                assert s.metadata() == (["paper"], [("paper", "cites", "paper")])


def test_num_classes_of_an_empty_type(tmp_path):
    w = fs.create_store(str(tmp_path / "e"), mode="w")
    w.add_node_type("paper", 0)
    w.add_edge_type(("paper", "cites", "paper"), np.zeros(1, np.int64), np.zeros(0, np.int64))
    w.add_labels("paper", np.zeros(0, np.int64))
    w.commit()
    with fs.open_store(str(tmp_path / "e")) as s, \
            pytest.raises(UnknownFeatureError, match="All 0 labels"):
        s.num_classes()
