"""The spec-file job end to end: checked through orig_id against the raw files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import featurestore as fs
from preprocess.errors import InputNotFoundError, SpecError
from preprocess.steps.renumber import string_keys
from preprocess.jobs.spec import load_spec
from preprocess.jobs.spec_steps import run_spec

from pp_helpers import make_toy_dataset


def _edges_by_orig(store, etype, src_orig, dst_orig):
    indptr, indices = store.csc(etype)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return {(src_orig[s], dst_orig[d]) for s, d in zip(np.asarray(indices), dst)}


@pytest.mark.parametrize("reorder", ["none", "degree"])
def test_toy_spec(tmp_path, reorder):
    spec, raw = make_toy_dataset(tmp_path / "data", reorder=reorder)
    job = run_spec(spec, tmp_path / "store", budget_bytes=16 << 20, progress=False)
    assert "csc:paper__cites__paper" in job.summary()
    s = fs.open_store(tmp_path / "store")
    pid = raw["pid"]
    porig = np.asarray(s.orig_ids("paper"))
    assert sorted(porig) == sorted(pid)
    row = {int(v): i for i, v in enumerate(pid)}  # paper id -> row of the raw files
    rows = np.array([row[int(v)] for v in porig])
    key_to_name = dict(zip(string_keys(raw["aid"])[0].tolist(), raw["aid"]))
    aorig = [key_to_name[int(k)] for k in np.asarray(s.orig_ids("author"))]
    assert sorted(aorig) == sorted(raw["aid"])
    vorig = np.asarray(s.orig_ids("venue"))  # contiguous ids: orig_id is the input id
    np.testing.assert_array_equal(np.sort(vorig), np.arange(7))
    if reorder == "none":
        np.testing.assert_array_equal(vorig, np.arange(7))
    # topology, by original ids
    cs, cd = raw["cites"]
    want = {(a, b) for a, b in zip(cs, cd)} | {(b, a) for a, b in zip(cs, cd)}
    assert _edges_by_orig(s, ("paper", "cites", "paper"), porig, porig) == want
    wa, wp = raw["writes"]
    assert _edges_by_orig(s, ("author", "writes", "paper"), aorig, porig) == set(zip(wa, wp))
    assert _edges_by_orig(s, ("paper", "rev_writes", "author"), porig, aorig) == \
        set(zip(wp, wa))
    assert _edges_by_orig(s, ("paper", "in", "venue"), porig, vorig) == \
        set(zip(raw["venue"][0], raw["venue"][1]))
    # features, values, labels follow the nodes
    np.testing.assert_array_equal(s.features("paper", "feat").numpy(),
                                  raw["feat"][rows].astype(np.float16))
    np.testing.assert_array_equal(s.values("paper", "year"), raw["year"][rows])
    lab = raw["label"][rows]
    np.testing.assert_array_equal(s.labels("paper"), np.where(np.isnan(lab), -1, lab))
    arow = {n: i for i, n in enumerate(raw["aid"])}
    np.testing.assert_array_equal(s.features("author", "emb").numpy(),
                                  raw["af"][[arow[n] for n in aorig]])
    np.testing.assert_array_equal(porig[s.split("train", "paper")], pid[:60])
    np.testing.assert_array_equal(porig[s.split("valid", "paper")], pid[60:80])
    if reorder == "degree":  # highest in-degree first (edges into paper, before coalescing)
        from collections import Counter

        deg = Counter(list(cs) + list(cd) + list(wp))
        d = np.array([deg[v] for v in porig])
        assert np.all(np.diff(d) <= 0)


def test_spec_errors_name_the_entry(tmp_path):
    spec, _ = make_toy_dataset(tmp_path / "d")
    text = Path(spec).read_text()
    bad = tmp_path / "d" / "missing.yaml"
    bad.write_text(text.replace("feat.npy", "nofeat.npy"))
    with pytest.raises(InputNotFoundError, match="nodes.paper.features.feat.*nofeat.npy"):
        load_spec(bad)
    bad.write_text(text.replace("author:writes:paper", "author:writes:journal"))
    with pytest.raises(SpecError, match="edges\\[1\\].relation.*'journal'"):
        load_spec(bad)
    bad.write_text(text.replace("coalesce: true", "colesce: true"))
    with pytest.raises(SpecError, match="options.*colesce"):
        load_spec(bad)
    bad.write_text("nodes: [1, 2]")
    with pytest.raises(SpecError, match="nodes"):
        load_spec(bad)
    with pytest.raises(InputNotFoundError, match="nothere.yaml"):
        load_spec(tmp_path / "nothere.yaml")


def test_dry_run_writes_nothing(tmp_path):
    spec, _ = make_toy_dataset(tmp_path / "d")
    job = run_spec(spec, tmp_path / "store", dry_run=True, progress=False)
    text = job.plan_text()
    assert "csc:paper__cites__paper" in text and "memory budget" in text
    assert not (tmp_path / "store").exists()


def test_to_undirected_option(tmp_path):
    spec, raw = make_toy_dataset(tmp_path / "d", reorder="none")
    text = Path(spec).read_text().replace("    undirected: true\n", "").replace(
        "    reverse: true\n", "").replace("coalesce: true",
                                        "coalesce: true\n  to_undirected: true")
    (tmp_path / "d" / "u.yaml").write_text(text)
    run_spec(tmp_path / "d" / "u.yaml", tmp_path / "store", progress=False)
    s = fs.open_store(tmp_path / "store")
    names = {tuple(e) for e in s.edge_types}
    assert ("paper", "rev_writes", "author") in names and ("venue", "rev_in", "paper") in names
    porig = np.asarray(s.orig_ids("paper"))
    cs, cd = raw["cites"]
    assert _edges_by_orig(s, ("paper", "cites", "paper"), porig, porig) == \
        {(a, b) for a, b in zip(cs, cd)} | {(b, a) for a, b in zip(cs, cd)}
