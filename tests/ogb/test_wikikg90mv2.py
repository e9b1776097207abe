"""WikiKG90Mv2: the synthetic twin's layout and shape, the ingest against the raw files (CSC
with relation ids checked against a stable lexsort of the triples), the dataset view, bad
inputs, and a SIGKILL mid-ingest that resumes to the same store."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import featurestore as fs
from featurestore.verify import verify_store
from loaders.datasets.lsc import WikiKG90Mv2Dataset, WikiKG90Mv2Evaluator
from loaders.datasets.lsc_wikikg import TEST_SIZES
from preprocess.ogb.errors import RawDataError, RawFileNotFoundError
from preprocess.ogb.layout import WIKIKG90MV2, WikiPaths
from preprocess.ogb.ptload import load_pt
from preprocess.ogb.wikikg90mv2 import KG_ETYPE, REV_ETYPE, preprocess_wikikg90mv2
from preprocess.steps import csc
from preprocess.synth import WikiSynthSpec, synth_wikikg90mv2

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "preprocess"))
from pp_helpers import store_snapshot  # noqa: E402

SPEC = WikiSynthSpec(num_entities=3000, num_relations=40, train=30000, valid=500, test_dev=300,
                     test_challenge=200, feat_dim=16, num_types=8)
FILES = {"meta.pt", "RELEASE_v1.txt"} | {f"processed/{k}.npy" for k in (
    "train_hrt", "entity_feat", "relation_feat", "val_hr", "val_t", "test-dev_hr",
    "test-challenge_hr")}


@pytest.fixture(scope="module")
def wiki_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("wiki")
    synth_wikikg90mv2(root, 0, seed=7, progress=False, spec=SPEC)
    return root


@pytest.fixture(scope="module")
def raw(wiki_root):
    p = WikiPaths.under(wiki_root)
    return {k: np.load(p.processed(k)) for k in ("train_hrt", "entity_feat", "relation_feat",
                                                 "val_hr", "val_t", "test-dev_hr",
                                                 "test-challenge_hr")}


@pytest.fixture(scope="module")
def wiki_store(wiki_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("wstore") / "s"
    mp = pytest.MonkeyPatch()
    real = csc.plan_csc  # little room per range: many ranges and the spill pass
    mp.setattr(csc, "plan_csc", lambda *a, **k: dataclasses.replace(real(*a, **k),
                                                                    work_bytes=20000))
    try:
        job = preprocess_wikikg90mv2(wiki_root, out, budget_bytes=16 << 20, progress=False)
    finally:
        mp.undo()
    assert job.steps[4].stats["ranges"] > 3
    return out


def _files(root):
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs_ in os.walk(root)
            for f in fs_}


def test_twin_layout_is_exact(wiki_root, raw):
    p = WikiPaths.under(wiki_root)
    assert _files(p.root) == FILES
    meta = load_pt(p.meta)
    assert meta == {"num_entities": 3000, "num_relations": 40}
    assert all(type(v) is int for v in meta.values())
    assert raw["train_hrt"].dtype == np.int64 and raw["train_hrt"].shape == (30000, 3)
    assert raw["entity_feat"].dtype == np.float16 and raw["entity_feat"].shape == (3000, 16)
    assert raw["relation_feat"].dtype == np.float16 and raw["relation_feat"].shape == (40, 16)
    assert raw["val_hr"].shape == (500, 2) and raw["val_t"].shape == (500,)
    assert raw["test-dev_hr"].shape == (300, 2) and raw["test-challenge_hr"].shape == (200, 2)
    for k in ("train_hrt", "val_hr", "test-dev_hr", "test-challenge_hr"):
        a = raw[k]
        assert a.dtype == np.int64 and a.min() >= 0 and a[:, 0].max() < 3000
        assert a[:, 1].max() < 40
    # the evaluator's sizes hold at every scale; the true counts at scale 1
    full = WikiSynthSpec.at_scale(1)
    assert (full.num_entities, full.num_relations, full.train) == (
        WIKIKG90MV2["num_entities"], 1387, WIKIKG90MV2["train"])
    s = WikiSynthSpec.at_scale(0.01)
    assert (s.test_dev, s.test_challenge, s.valid) == (TEST_SIZES["test-dev"],
                                                       TEST_SIZES["test-challenge"], 15000)
    assert abs(s.feature_bytes - 1.40e9) < 0.01e9 and s.train == 6010628


def test_twin_is_skewed_typed_and_deterministic(wiki_root, raw, tmp_path):
    hrt = raw["train_hrt"]
    deg = np.bincount(np.r_[hrt[:, 0], hrt[:, 2]], minlength=3000)
    top = np.sort(deg)[::-1]
    assert top[:30].sum() > 0.10 * deg.sum()  # top 1% of entities: >10% of the triple ends
    assert deg.max() > 20 * np.median(deg)
    rel = np.sort(np.bincount(hrt[:, 1], minlength=40))[::-1]
    assert rel[0] > 5 * rel[20] > 0  # Zipf: the most frequent relation far ahead
    # features carry the type: a tail's features are closer to its relation's other tails
    x = raw["entity_feat"].astype(np.float32)
    r0 = int(np.argmax(np.bincount(hrt[:, 1])))
    tails = hrt[hrt[:, 1] == r0, 2]
    same = np.corrcoef(x[tails[:200]])[np.triu_indices(min(200, len(tails)), 1)].mean()
    rand = np.corrcoef(x[np.random.default_rng(0).integers(0, 3000, 200)])[
        np.triu_indices(200, 1)].mean()
    assert same > rand + 0.1
    synth_wikikg90mv2(tmp_path, 0, seed=7, progress=False, spec=SPEC)
    for f in FILES - {"meta.pt"}:
        a, b = (_sha(os.path.join(r, "wikikg90m-v2", f)) for r in (wiki_root, tmp_path))
        assert a == b, f


def test_twin_replaces_only_a_twin(wiki_root, tmp_path):
    from preprocess.synth.wikikg import NotATwinError

    real = tmp_path / "wikikg90m-v2"
    (real / "processed").mkdir(parents=True)
    (real / "RELEASE_v1.txt").write_text("WikiKG90Mv2 v1 (the real download)\n")
    np.save(real / "processed" / "train_hrt.npy", np.arange(6).reshape(2, 3))
    with pytest.raises(NotATwinError, match="nothing was written"):
        synth_wikikg90mv2(tmp_path, 0, seed=1, progress=False, spec=SPEC)
    assert _files(real) == {"RELEASE_v1.txt", "processed/train_hrt.npy"}
    np.testing.assert_array_equal(np.load(real / "processed" / "train_hrt.npy"),
                                  np.arange(6).reshape(2, 3))
    synth_wikikg90mv2(tmp_path / "again", 0, seed=1, progress=False, spec=SPEC)
    synth_wikikg90mv2(tmp_path / "again", 0, seed=2, progress=False, spec=SPEC)  # a twin: ok


def _sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).digest()


def _csc_triples(store, etype):
    indptr, indices = store.csc(etype)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(np.asarray(indptr)))
    return np.asarray(indices, np.int64), np.asarray(store.edge_values(etype, "relation")), dst


def test_ingest_holds_every_triple_in_csc_order_with_its_relation(wiki_store, raw):
    s = fs.open_store(wiki_store)
    h, r, t = raw["train_hrt"].T
    assert np.unique(h * 3000 + t).size < h.size  # repeated pairs: their order is tested
    for etype, src, dst in ((KG_ETYPE, h, t), (REV_ETYPE, t, h)):
        order = np.lexsort((src, dst))  # stable: by destination, source, then input order
        got_src, got_rel, got_dst = _csc_triples(s, etype)
        np.testing.assert_array_equal(got_dst, dst[order])
        np.testing.assert_array_equal(got_src, src[order])
        np.testing.assert_array_equal(got_rel, r[order])
        assert s.edge_values(etype, "relation").dtype == np.int32
    assert s.num_nodes("entity") == 3000 and s.num_nodes("relation") == 40
    np.testing.assert_array_equal(s.orig_ids("entity"), np.arange(3000))
    np.testing.assert_array_equal(s.features("entity", "feat").numpy(), raw["entity_feat"])
    np.testing.assert_array_equal(s.features("relation", "feat").numpy(), raw["relation_feat"])
    tr = s.edge_split("train", KG_ETYPE)
    for col, j in (("src", 0), ("relation", 1), ("dst", 2)):
        np.testing.assert_array_equal(tr[col], raw["train_hrt"][:, j])
    va = s.edge_split("valid", KG_ETYPE)
    np.testing.assert_array_equal(np.stack([va["src"], va["relation"]], 1), raw["val_hr"])
    np.testing.assert_array_equal(va["dst"], raw["val_t"])
    for mode in ("test-dev", "test-challenge"):
        c = s.edge_split(mode, KG_ETYPE)
        assert sorted(c) == ["relation", "src"]
        np.testing.assert_array_equal(np.stack([c["src"], c["relation"]], 1),
                                      raw[f"{mode}_hr"])
    assert verify_store(wiki_store, data=True) == []


def test_dataset_answers_as_ogbs_over_the_raw_files(wiki_store, raw):
    d = WikiKG90Mv2Dataset(wiki_store)
    assert (d.num_entities, d.num_relations, d.num_feat_dims) == (3000, 40, 16)
    x = d.entity_feat
    assert not x.flags.owndata and not x.flags.writeable  # a read-only map, not loaded
    np.testing.assert_array_equal(d.entity_feat, raw["entity_feat"])
    np.testing.assert_array_equal(d.relation_feat, raw["relation_feat"])
    np.testing.assert_array_equal(np.asarray(d.train_hrt), raw["train_hrt"])
    ids = np.array([5, 29999, 0, 5])
    np.testing.assert_array_equal(d.train_hrt[ids], raw["train_hrt"][ids])
    np.testing.assert_array_equal(d.train_hrt[:, 1], raw["train_hrt"][:, 1])
    assert d.train_hrt.shape == (30000, 3)
    v = d.valid_dict["h,r->t"]
    np.testing.assert_array_equal(v["hr"], raw["val_hr"])
    np.testing.assert_array_equal(v["t"], raw["val_t"])
    for mode in ("test-dev", "test-challenge"):
        assert list(d.test_dict(mode)["h,r->t"]) == ["hr"]
        np.testing.assert_array_equal(d.test_dict(mode)["h,r->t"]["hr"], raw[f"{mode}_hr"])
    with pytest.raises(AssertionError):
        d.test_dict("test")
    # the true tails in the first slot: MRR 1
    pred = np.stack([raw["val_t"]] + [np.full(500, -1 - i) for i in range(9)], 1)
    assert WikiKG90Mv2Evaluator().eval({"h,r->t": {"t_pred_top10": pred,
                                                   "t": v["t"]}})["mrr"] == 1.0


def _copy_twin(wiki_root, tmp_path):
    dst = tmp_path / "raw"
    shutil.copytree(WikiPaths.under(wiki_root).root, dst / "wikikg90m-v2")
    return dst, WikiPaths.under(dst)


def _rewrite(path, fn):
    a = np.load(path)
    fn(a)
    np.save(path, a)


@pytest.mark.parametrize("case,match", [
    ("relation", r"relation ids in \[0, 40\).*train_hrt.npy. Got 40 at row 123, column 1"),
    ("tail", r"tail ids in \[0, 3,000\).*train_hrt.npy. Got 3000 at row 7, column 2"),
    ("negative", r"head ids in \[0, 3,000\).*train_hrt.npy. Got -1 at row 29999, column 0"),
    ("val_hr", r"head ids in \[0, 3,000\).*val_hr.npy. Got 5000 at row 3"),
    ("meta", r"meta.pt and .*entity_feat.npy to agree: num_entities is 3,001"),
    ("truncated", r"relation_feat.npy"),
    ("shape", r"\[E, 3\].*train_hrt.npy"),
])
def test_bad_input_is_named(wiki_root, tmp_path, case, match):
    import torch

    root, p = _copy_twin(wiki_root, tmp_path)
    if case == "relation":
        _rewrite(p.processed("train_hrt"), lambda a: a.__setitem__((123, 1), 40))
    elif case == "tail":
        _rewrite(p.processed("train_hrt"), lambda a: a.__setitem__((7, 2), 3000))
    elif case == "negative":
        _rewrite(p.processed("train_hrt"), lambda a: a.__setitem__((29999, 0), -1))
    elif case == "val_hr":
        _rewrite(p.processed("val_hr"), lambda a: a.__setitem__((3, 0), 5000))
    elif case == "meta":
        torch.save({"num_entities": 3001, "num_relations": 40}, p.meta)
    elif case == "truncated":
        with open(p.processed("relation_feat"), "r+b") as f:
            f.truncate(os.path.getsize(p.processed("relation_feat")) - 100)
    elif case == "shape":
        np.save(p.processed("train_hrt"), np.zeros((10, 2), np.int64))
    with pytest.raises(RawDataError, match=match):
        preprocess_wikikg90mv2(root, tmp_path / "s", budget_bytes=16 << 20, progress=False)
    with pytest.raises(fs.IncompleteStoreError if os.path.exists(tmp_path / "s")
                       else FileNotFoundError):
        fs.open_store(tmp_path / "s")


def test_int32_and_uint16_inputs(wiki_root, raw, tmp_path):
    """Narrower integer files than the official int64: the same store content (the id
    columns converted in blocks)."""
    root, p = _copy_twin(wiki_root, tmp_path)
    np.save(p.processed("train_hrt"), raw["train_hrt"].astype(np.int32))
    np.save(p.processed("val_hr"), raw["val_hr"].astype(np.uint16))
    preprocess_wikikg90mv2(root, tmp_path / "s", budget_bytes=16 << 20, progress=False)
    s = fs.open_store(tmp_path / "s")
    tr = s.edge_split("train", KG_ETYPE)
    assert tr["src"].dtype == np.int64 and tr["relation"].dtype == np.int32
    for col, j in (("src", 0), ("relation", 1), ("dst", 2)):
        np.testing.assert_array_equal(tr[col], raw["train_hrt"][:, j])
    h, r, t = raw["train_hrt"].T
    order = np.lexsort((h, t))
    for a, want in zip(_csc_triples(s, KG_ETYPE), (h[order], r[order], t[order])):
        np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(s.edge_split("valid", KG_ETYPE)["src"], raw["val_hr"][:, 0])


def test_missing_file_and_dry_run(wiki_root, tmp_path):
    root, p = _copy_twin(wiki_root, tmp_path)
    job = preprocess_wikikg90mv2(root, tmp_path / "dry", dry_run=True, progress=False)
    assert not os.path.exists(tmp_path / "dry")
    text = job.plan_text()
    for step in ("scan:triples", "features:entity", "csc:entity__relation__entity",
                 "relation:entity__relation__entity", "csc:entity__rev_relation__entity",
                 "relation:entity__rev_relation__entity", "edge-split:train",
                 "edge-splits:eval"):
        assert step in text
    os.remove(p.processed("val_t"))
    with pytest.raises(RawFileNotFoundError, match="val_t.npy"):
        preprocess_wikikg90mv2(root, tmp_path / "s", progress=False)


def test_sigkill_mid_ingest_resumes_to_the_same_store(wiki_root, tmp_path):
    clean = tmp_path / "clean"
    preprocess_wikikg90mv2(wiki_root, clean, budget_bytes=16 << 20, progress=False)
    want = store_snapshot(clean)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # array writes: 1-2 orig ids, 3-4 features, 5-6 and 8-9 the CSCs, 7 and 10 their relation
    # values (the rerun reuses the finished edge order), 11-20 the splits
    for k in (3, 7, 9, 10, 12):
        store = tmp_path / f"killed-{k}"
        p = subprocess.run([sys.executable, os.path.join(HERE, "kill_wiki.py"), str(wiki_root),
                            str(store), str(k)], env=env, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == -9, (k, p.stdout[-500:], p.stderr[-2000:])
        with pytest.raises(fs.IncompleteStoreError):
            fs.open_store(store)
        job = preprocess_wikikg90mv2(wiki_root, store, budget_bytes=16 << 20, progress=False)
        assert job.resumed
        assert store_snapshot(store) == want, k


def test_repeated_pairs_keep_their_input_order(wiki_root, tmp_path, monkeypatch):
    """Random triples with repeats (the same triple, one (h, t) under several relations, self
    loops), sorted in many ranges: indices and relation values in the order of a stable
    lexsort by (t, h), as the edge-columns step defines it."""
    root, p = _copy_twin(wiki_root, tmp_path)
    rng = np.random.default_rng(5)
    m = 120_000
    hrt = np.stack([rng.integers(0, 3000, m), rng.integers(0, 40, m),
                    rng.integers(0, 3000, m)], 1)
    hrt[:500] = hrt[500:1000]
    hrt[1000:1500, [0, 2]] = hrt[1500:2000, [0, 2]]
    hrt[2000:2100, 2] = hrt[2000:2100, 0]
    np.save(p.processed("train_hrt"), hrt)
    real = csc.plan_csc
    monkeypatch.setattr(csc, "plan_csc", lambda *a, **k: dataclasses.replace(
        real(*a, **k), work_bytes=50000))
    job = preprocess_wikikg90mv2(root, tmp_path / "s", budget_bytes=16 << 20, progress=False)
    assert job.steps[4].stats["ranges"] > 3
    s = fs.open_store(tmp_path / "s")
    for etype, src, dst in ((KG_ETYPE, hrt[:, 0], hrt[:, 2]), (REV_ETYPE, hrt[:, 2],
                                                                hrt[:, 0])):
        order = np.lexsort((src, dst))
        got = _csc_triples(s, etype)
        for a, want in zip(got, (src[order], hrt[order, 1], dst[order])):
            np.testing.assert_array_equal(a, want)
    assert not os.path.exists(tmp_path / "s" / ".preprocess" / "work")
