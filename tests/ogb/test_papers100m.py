"""ogbn-papers100M ingest: stored and deflated .npz twins round-trip into the store."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import featurestore as fs
from ogb_helpers import PAPERS_SPEC, assert_same_edges, by_orig, read_csv_gz
from preprocess.ogb.errors import RawDataError
from preprocess.ogb.layout import PapersPaths
from preprocess.ogb.papers100m import preprocess_papers100m


@pytest.fixture(scope="module")
def papers_store(papers_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("pstore") / "store"
    preprocess_papers100m(papers_root, out, budget_bytes=16 << 20, progress=False)
    return fs.open_store(out)


def test_round_trip(papers_store, papers_root):
    p = PapersPaths.under(papers_root)
    z = np.load(p.data)  # the test may load the tiny archive whole: an independent reader
    n = int(z["num_nodes_list"][0])
    s = papers_store
    assert s.node_types == ["paper"] and s.num_nodes("paper") == n
    assert [tuple(e) for e in s.edge_types] == [("paper", "cites", "paper")]
    e = z["edge_index"]
    assert_same_edges(s, ("paper", "cites", "paper"), np.concatenate([e[0], e[1]]),
                      np.concatenate([e[1], e[0]]), n)
    f = s.features("paper", "feat")
    assert f.dtype == np.float32
    np.testing.assert_array_equal(by_orig(s, "paper", f.numpy()), z["node_feat"])
    np.testing.assert_array_equal(by_orig(s, "paper", s.values("paper", "year")),
                                  z["node_year"].reshape(-1))
    raw = np.load(p.node_label)["node_label"].reshape(-1)
    np.testing.assert_array_equal(by_orig(s, "paper", s.labels("paper")),
                                  np.where(np.isnan(raw), -1, raw).astype(np.int64))
    orig = np.asarray(s.orig_ids("paper"))
    assert s.split_names == ["test", "train", "valid"]
    for k in ("train", "valid", "test"):
        want = read_csv_gz(p.split(k))
        assert want.size
        np.testing.assert_array_equal(orig[np.asarray(s.split(k))], want)
        assert np.all(raw[want] >= 0), "split nodes carry labels"


def test_directed_keeps_direction(papers_root, tmp_path):
    p = PapersPaths.under(papers_root)
    preprocess_papers100m(papers_root, tmp_path / "s", directed=True, progress=False)
    s = fs.open_store(tmp_path / "s")
    e = np.load(p.data)["edge_index"]
    assert_same_edges(s, ("paper", "cites", "paper"), e[0], e[1], PAPERS_SPEC.nodes)


def test_dry_run_writes_nothing(papers_root, tmp_path):
    job = preprocess_papers100m(papers_root, tmp_path / "s", dry_run=True, progress=False)
    assert "csc:paper__cites__paper" in job.plan_text()
    assert not os.path.exists(tmp_path / "s" / "zarr.json")


def test_bad_inputs_are_named(papers_root, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(PapersPaths.under(papers_root).root, root / "ogbn_papers100M")
    p = PapersPaths.under(root)
    import gzip

    with gzip.open(p.split("valid"), "wt") as f:
        f.write(f"1\n{PAPERS_SPEC.nodes + 5}\n")
    with pytest.raises(RawDataError, match="valid.csv.gz"):
        preprocess_papers100m(root, tmp_path / "s", progress=False)
    with open(p.data, "r+b") as f:  # not a zip any more
        f.write(b"garbage!" * 8)
        f.truncate(64)
    with pytest.raises(RawDataError, match="data.npz"):
        preprocess_papers100m(root, tmp_path / "s", progress=False)
