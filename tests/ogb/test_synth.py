"""The synthetic twins: exact official layouts, the awkward features of real data, determinism."""

from __future__ import annotations

import gzip
import hashlib
import os

import numpy as np
import pytest
import torch

from ogb_helpers import MAG_SPEC, PAPERS_SPEC, read_csv_gz
from preprocess.ogb.layout import MAG240M, PAPERS100M, MagPaths, PapersPaths
from preprocess.ogb.ptload import load_pt
from preprocess.synth import MagSynthSpec, PapersSynthSpec, synth_mag240m, synth_papers100m

MAG_FILES = {"meta.pt", "split_dict.pt", "RELEASE_v1.txt",
             "processed/paper/node_feat.npy", "processed/paper/node_label.npy",
             "processed/paper/node_year.npy",
             "processed/author___writes___paper/edge_index.npy",
             "processed/author___affiliated_with___institution/edge_index.npy",
             "processed/paper___cites___paper/edge_index.npy"}


def _files(root):
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def test_mag_layout_is_exact(mag_root):
    p = MagPaths.under(mag_root)
    assert _files(p.root) == MAG_FILES
    meta = load_pt(p.meta)
    assert meta == {"paper": MAG_SPEC.paper, "author": MAG_SPEC.author,
                    "institution": MAG_SPEC.institution, "num_classes": 153}
    assert all(type(v) is int for v in meta.values())
    feat = np.load(p.paper("node_feat"), mmap_mode="r")
    assert feat.dtype == np.float16 and feat.shape == (MAG_SPEC.paper, MAG_SPEC.feat_dim)
    lab = np.load(p.paper("node_label"))
    year = np.load(p.paper("node_year"))
    assert lab.shape == year.shape == (MAG_SPEC.paper,) and year.dtype == np.int64
    sd = load_pt(p.split_dict)
    assert sorted(sd) == ["test", "train", "valid"]
    assert all(v.dtype == np.int64 and np.all(np.diff(v) > 0) for v in sd.values())
    # NaN = no label, -1 = hidden test label, classes on train/valid
    assert np.isnan(lab).sum() > MAG_SPEC.paper // 2
    assert np.all(lab[sd["test"]] == -1) and (lab == -1).sum() == len(sd["test"])
    for k in ("train", "valid"):
        assert np.all((lab[sd[k]] >= 0) & (lab[sd[k]] < 153))
    assert np.all(year[sd["train"]] < 2018) and np.all(year[sd["valid"]] == 2018)
    assert np.all(year[sd["test"]] == 2019)
    for rel, n in (("author___writes___paper", MAG_SPEC.writes),
                   ("paper___cites___paper", MAG_SPEC.cites)):
        e = np.load(os.path.join(p.root, "processed", rel, "edge_index.npy"), mmap_mode="r")
        assert e.dtype == np.int64 and e.shape == (2, n)


def test_mag_graph_looks_real(mag_root):
    p = MagPaths.under(mag_root)
    n = MAG_SPEC.paper
    c = np.load(p.edge_index("paper", "cites", "paper"))
    indeg = np.bincount(c[1], minlength=n)
    assert indeg.max() > 20 * indeg.mean(), "power-law citations: some papers get most"
    w = np.load(p.edge_index("author", "writes", "paper"))
    touched = np.zeros(n, bool)
    touched[c.ravel()] = True
    touched[w[1]] = True
    assert 0 < (~touched).sum() < n // 10, "a few isolated papers"
    assert (np.bincount(w[0], minlength=MAG_SPEC.author) == 0).any(), "authors without papers"
    for e, nd in ((c, n), (w, n)):
        code = e[0] * nd + e[1]
        assert np.unique(code).size < code.size, "duplicate edges"
    assert (c[0] == c[1]).any(), "self-citations"


def test_papers_layout_is_exact(papers_root):
    p = PapersPaths.under(papers_root)
    assert _files(p.root) == {"RELEASE_v1.txt", "raw/data.npz", "raw/node-label.npz",
                              "split/time/train.csv.gz", "split/time/valid.csv.gz",
                              "split/time/test.csv.gz"}
    z = np.load(p.data)  # what ogb's read_binary_graph_raw does
    assert sorted(z.files) == ["edge_index", "node_feat", "node_year", "num_edges_list",
                               "num_nodes_list"]
    n, e = PAPERS_SPEC.nodes, PAPERS_SPEC.edges
    assert z["edge_index"].shape == (2, e) and z["edge_index"].dtype == np.int64
    assert z["node_feat"].shape == (n, PAPERS_SPEC.feat_dim) and z["node_feat"].dtype == np.float32
    assert z["node_year"].shape == (n, 1) and z["node_year"].dtype == np.int64
    assert z["num_nodes_list"].tolist() == [n] and z["num_edges_list"].tolist() == [e]
    lab = np.load(p.node_label)["node_label"]
    assert lab.shape == (n, 1) and np.isnan(lab).any()
    seen = []
    for k in ("train", "valid", "test"):
        ids = read_csv_gz(p.split(k))
        assert ids.size and np.all(~np.isnan(lab[ids, 0]))
        seen.append(ids)
    allids = np.concatenate(seen)
    assert np.unique(allids).size == allids.size
    indeg = np.bincount(z["edge_index"][1], minlength=n)
    assert indeg.max() > 20 * indeg.mean()


def _digest(root):
    h = hashlib.sha256()
    for f in sorted(_files(root)):
        if f.endswith(".pt"):  # torch.save embeds no timestamps, but compare the content
            obj = load_pt(os.path.join(root, f))
            h.update(repr({k: np.asarray(v).tobytes() for k, v in obj.items()}).encode())
            continue
        with open(os.path.join(root, f), "rb") as fh:
            data = fh.read()
        if f.endswith(".gz"):
            data = gzip.decompress(data)
        if f.endswith(".npz"):
            z = np.load(os.path.join(root, f))
            data = b"".join(z[k].tobytes() for k in sorted(z.files))
        h.update(f.encode() + data)
    return h.hexdigest()


def test_same_seed_same_data_other_seed_other_data(tmp_path):
    spec = MagSynthSpec(paper=500, author=600, institution=9, writes=1500,
                        affiliated_with=400, cites=3000, feat_dim=8)
    a = synth_mag240m(tmp_path / "a", 0, seed=1, progress=False, spec=spec)
    b = synth_mag240m(tmp_path / "b", 0, seed=1, progress=False, spec=spec)
    c = synth_mag240m(tmp_path / "c", 0, seed=2, progress=False, spec=spec)
    assert _digest(a.root) == _digest(b.root) != _digest(c.root)
    ps = PapersSynthSpec(nodes=400, edges=2000, feat_dim=4)
    d = synth_papers100m(tmp_path / "d", 0, seed=1, progress=False, spec=ps)
    e = synth_papers100m(tmp_path / "e", 0, seed=1, compress=True, progress=False, spec=ps)
    assert _digest(d.root) == _digest(e.root)


def test_scale_one_is_the_true_size():
    s = MagSynthSpec.at_scale(1)
    assert (s.paper, s.author, s.institution) == (MAG240M["paper"], MAG240M["author"],
                                                  MAG240M["institution"])
    assert (s.writes, s.affiliated_with, s.cites) == (MAG240M["writes"],
                                                      MAG240M["affiliated_with"], MAG240M["cites"])
    assert s.feat_dim == 768 and s.feature_bytes == MAG240M["paper"] * 768 * 2
    s3 = MagSynthSpec.at_scale(0.03)
    assert 3.6e6 < s3.paper < 3.7e6 and s3.num_edges > 50e6 and 5.5e9 < s3.feature_bytes < 5.7e9
    p = PapersSynthSpec.at_scale(1)
    assert (p.nodes, p.edges, p.feat_dim) == (PAPERS100M["nodes"], PAPERS100M["edges"], 128)
    with pytest.raises(ValueError, match="scale"):
        MagSynthSpec.at_scale(0)


def test_cli_writes_both(tmp_path, capsys):
    from featurestore.cli import main

    assert main(["synth", "mag240m", str(tmp_path), "--scale", "0.00002", "--no-progress"]) == 0
    assert main(["synth", "papers100m", str(tmp_path), "--scale", "0.00002", "--compress",
                 "--no-progress"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert load_pt(MagPaths.under(tmp_path).meta)["paper"] == round(MAG240M["paper"] * 2e-5)
    assert torch.load  # torch is what the official loader uses; our files load with it safely


def test_citing_papers_are_skewed_too(mag_root, papers_root):
    """Both ends of a citation follow a power law (Chung-Lu), at independent ids: sampled
    neighbourhoods have a hot set, as in the real graphs (uniform sources had none)."""
    c = np.load(MagPaths.under(mag_root).edge_index("paper", "cites", "paper"))
    z = np.load(PapersPaths.under(papers_root).data)["edge_index"]
    for e, n in ((c, MAG_SPEC.paper), (z, PAPERS_SPEC.nodes)):
        out = np.bincount(e[0], minlength=n)
        top = np.sort(out)[::-1]
        # alpha 2: the top 1% of the citing ranks draw 10% of the citations (uniform: ~2%)
        assert top[:n // 100].sum() > 0.06 * e.shape[1]
        assert out.max() > 10 * out.mean()
        indeg = np.bincount(e[1], minlength=n)
        hubs_out, hubs_in = np.argsort(out)[-n // 100:], np.argsort(indeg)[-n // 100:]
        assert np.intersect1d(hubs_out, hubs_in).size < n // 200  # different papers


def test_reranked_idmap_keeps_the_active_ids():
    from preprocess.synth._gen import IdMap

    for n, share in ((1000, 0.96), (997, 0.5), (12, 1.0)):
        m = IdMap.make(n, share, 3)
        r = m.reranked(8)
        ranks = np.arange(m.active)
        np.testing.assert_array_equal(np.sort(r(ranks)), np.sort(m(ranks)))
        assert not np.array_equal(r(ranks), m(ranks))
