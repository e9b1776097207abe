"""``featurestore bench loader --task link`` on tiny stores: the report carries the task and
both sides (ours and PyG's LinkNeighborLoader), its figures agree with its own trials, the
out-of-core part sets ours against ``featurestore plan --task link``'s prediction, and bad
arguments are refused by name. Timings are meaningless at these sizes; nothing is timed."""

from __future__ import annotations

import json
import os
import statistics
import stat

import numpy as np
import pytest

import featurestore as fs
from featurestore.cli import main as cli_main

TINY = ["--nodes", "3000", "--edges", "15000", "--batch-size", "32", "--batches", "2",
        "--seconds", "5"]


def _in_edges_of_train(path: str) -> int:
    """Edges into the train nodes, counted from the CSC by hand."""
    with fs.open_store(path) as s:
        indptr, _ = s.csc()
        train = np.asarray(s.split("train"))
        return int(sum(int(indptr[v + 1] - indptr[v]) for v in train))


@pytest.fixture
def fake_memcap(tmp_path):
    """A memcap stand-in: runs the command uncapped, then prints memcap's report line."""
    tool = tmp_path / "memcap"
    tool.write_text('#!/bin/sh\nshift 2\n"$@"\nrc=$?\necho "memcap: limit=1.50GiB '
                    'peak_anon=0.10GiB oom_kills=0 rc=$rc" >&2\nexit $rc\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return str(tool)


def test_link_in_ram_both_sides_alternating(tmp_path):
    from benchmarks.sample_bench import pyg_missing

    out = tmp_path / "out"
    assert cli_main(["bench", "loader", "--task", "link", "--workdir", str(tmp_path / "w"),
                     *TINY, "--trials", "2", "--parts", "loader,dgl", "--out", str(out)]) == 0
    rep = json.loads((out / "loader.json").read_text())
    res = rep["results"]
    assert rep["task"] == res["task"] == "link" and rep["options"]["task"] == "link"
    assert res["fanouts"] == [10, 5] and res["neg_sampling_ratio"] == 1.0
    assert "skipped" in res["dgl"]  # no DGL peer for link batches
    path = os.path.join(str(tmp_path / "w"), "pl-3000-15000-fp32x128")
    assert res["link_inputs"]["edges"] == _in_edges_of_train(path)
    sides = ["ours_loader"] + ([] if pyg_missing() else ["pyg_loader"])
    for side in sides:
        r = res[side]
        assert len(r["trials"]) == 2  # one per alternating round
        for t in r["trials"]:
            assert t["batches"] == 2 and t["seeds"] == 2 * 32  # positive seed edges
            # 2 x (32 + 32) endpoints, each with up to 10 + 10 * 5 sampled edges
            assert 0 < t["edges_per_batch"] <= 2 * 64 * (10 + 50)
        for key in ("seeds_per_s", "batches_per_s", "edges_per_s"):
            assert r[key] == pytest.approx(statistics.median(t[key] for t in r["trials"]))
    md = (out / "loader.md").read_text()
    assert "Link loader (task link)" in md and "| seed edges/s |" in md
    assert "ours: link loader, features in RAM" in md
    if "pyg_loader" in sides:
        assert res["ours_over_pyg"] == pytest.approx(
            res["ours_loader"]["seeds_per_s"] / res["pyg_loader"]["seeds_per_s"])
        assert "PyG LinkNeighborLoader, features in RAM" in md
        assert "alternating rounds" in md
        # the same sampling on both sides: edges per batch agree within sampling noise
        assert res["pyg_loader"]["edges_per_batch"] == pytest.approx(
            res["ours_loader"]["edges_per_batch"], rel=0.25)


def test_link_out_of_core_against_the_plan(tmp_path, fake_memcap):
    from benchmarks.sample_bench import pyg_missing

    out = tmp_path / "out"
    assert cli_main(["bench", "loader", "--task", "link", "--workdir", str(tmp_path / "w"),
                     *TINY, "--parts", "ooc", "--ooc-epochs", "2", "--read-iops", "50000",
                     "--memcap-bin", fake_memcap, "--out", str(out)]) == 0
    res = json.loads((out / "loader.json").read_text())["results"]
    ours, plan, vs = res["ooc_ours"], res["ooc_plan"], res["ooc_vs_plan"]
    assert "error" not in ours and "error" not in plan, (ours, plan)
    assert [e["epoch"] for e in ours["epochs"]] == [0, 1]
    assert ours["seeds_per_s"] == ours["epochs"][-1]["seeds_per_s"]  # the second epoch
    if pyg_missing():  # CI: torch_geometric without torch-sparse/pyg-lib
        assert res["ooc_pyg"] == {"skipped": pyg_missing()}
    else:
        assert res["ooc_pyg"]["epochs"][-1]["seeds"] == 2 * 32
    assert plan["read_iops"] == 50000 and plan["seed_nodes_per_batch_bound"] == 128
    assert plan["edges_per_s"] == min(x for x in (plan["edges_per_s_io_bound"],
                                                  plan["edges_per_s_sample_bound"]) if x)
    assert vs["measured_edges_per_s"] == ours["seeds_per_s"]
    assert vs["predicted_edges_per_s"] == plan["edges_per_s"]
    assert vs["share"] == pytest.approx(ours["seeds_per_s"] / plan["edges_per_s"])
    assert vs["within_target"] == (vs["share"] >= 0.8)
    assert res["ooc_oom_kills"] == 0
    md = (out / "loader.md").read_text()
    assert "featurestore plan --task link` predicted" in md and "OOM kills under memcap: 0" in md


def test_oom_kills_parsed_from_memcap():
    from benchmarks.loader_bench import oom_kills

    assert oom_kills("memcap: limit=1.00GiB peak_anon=0.99GiB oom_kills=2 rc=137") == 2
    assert oom_kills("") == 0


@pytest.mark.parametrize("bad, match", [({"task": "edge"}, "task"),
                                        ({"neg_sampling_ratio": 0.0}, "neg_sampling_ratio"),
                                        ({"trials": 0}, "trials"),
                                        ({"link_fanouts": (10, 0)}, "link_fanouts")])
def test_bad_link_options_are_named(tmp_path, bad, match):
    from benchmarks.loader_bench import LoaderOptions, run

    with pytest.raises(fs.FeatureStoreError, match=match):
        run(LoaderOptions(workdir=str(tmp_path), **bad))


def test_bad_task_on_the_command_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["bench", "loader", "--task", "edge", "--out", str(tmp_path)])
    assert e.value.code == 2 and "--task" in capsys.readouterr().err
