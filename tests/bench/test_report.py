"""The report helpers: trial statistics, tables, JSON, charts and peer ratios."""

from __future__ import annotations

import json
import statistics

from pathlib import Path

import numpy as np
import pytest

from benchmarks import render
from benchmarks.report import (Timing, fmt_rate, md_table, plot_bars, plot_lines, plot_stacked,
                               timed_loop, timed_trials, write_json)

PNG = b"\x89PNG\r\n\x1a\n"


def test_timed_trials_median_p95_and_warmup_not_counted():
    calls = []
    t = timed_trials(lambda st: calls.append(st), trials=5, warmup=2, setup=lambda: "s")
    assert calls == ["s"] * 7 and len(t.times) == 5
    assert t.median == statistics.median(t.times)
    assert t.p95 == pytest.approx(np.percentile(t.times, 95)) and t.p95 <= max(t.times)
    with pytest.raises(ValueError, match="trials >= 1"):
        timed_trials(lambda st: None, trials=0)


def test_timed_trials_fresh_state_per_trial():
    """``fresh``: ``before``, ``setup`` and ``teardown`` around every call (cold trials)."""
    log = []
    t = timed_trials(lambda st: log.append(("call", st)), trials=2, warmup=1, fresh=True,
                     setup=lambda: len(log), teardown=lambda st: log.append(("down", st)),
                     before=lambda: log.append(("before", None)))
    assert len(t.times) == 2
    assert [e[0] for e in log] == ["before", "call", "down"] * 3
    states = [st for kind, st in log if kind == "call"]
    assert len(set(states)) == 3  # a new state each time


def test_timed_loop_stops_at_limit_or_exhaustion():
    it = iter(range(10))
    lp = timed_loop(lambda k: (lambda x: None if x is None else (2, x))(next(it, None)),
                    limit=100, warmup=2)
    assert lp["batches"] == 8 and lp["edges"] == sum(range(2, 10))  # warm-up not counted
    assert lp["seeds"] == 16 and lp["edges_per_batch"] == lp["edges"] / 8
    assert lp["seeds_per_s"] == pytest.approx(16 / lp["seconds"])
    lp = timed_loop(lambda k: (1, 3), limit=5)
    assert lp["batches"] == 5 and lp["edges"] == 15 and lp["batches_per_s"] == 5 / lp["seconds"]


@pytest.mark.parametrize("x, want", [(999, "999"), (1234, "1.23k"), (2.5e6, "2.5M"),
                                     (7e9, "7G"), (0.5, "0.5"), (None, ""), (float("nan"), "")])
def test_fmt_rate(x, want):
    assert fmt_rate(x) == want


def test_md_table_round_trip():
    text = md_table(["a", "b"], [[1, None], ["x|y", "two\nlines"]])
    lines = text.splitlines()
    assert lines[0] == "| a | b |" and lines[1] == "|---|---|"
    assert lines[2] == "| 1 |  |"
    assert lines[3] == "| x\\|y | two lines |"  # pipes escaped, newlines folded: one row


def test_write_json_numpy_values(tmp_path):
    p = write_json({"a": np.int64(3), "b": np.arange(3), "c": np.float32(0.5)},
                   str(tmp_path / "d" / "r.json"))
    assert json.loads(Path(p).read_text()) == {"a": 3, "b": [0, 1, 2], "c": 0.5}
    assert [f.name for f in (tmp_path / "d").iterdir()] == ["r.json"]  # no temporary left


def test_charts_are_png(tmp_path):
    pytest.importorskip("matplotlib")
    a = plot_lines(str(tmp_path / "l.png"), [{"title": "t", "series": [
        {"label": "s", "x": [1000, 10000], "y": [1e5, 2e5]},
        {"label": "limit", "x": [1000, 10000], "y": [3e5, 3e5], "style": "--"}]}],
        "batch size (ids)", "rows/s", "title")
    b = plot_bars(str(tmp_path / "b.png"), ["x", "y"], {"g": [1.0, None]}, "per s", "bars")
    c = plot_stacked(str(tmp_path / "s.png"), [("x", {"a": 1.0, "b": 2.0}), ("y", {"b": 3.0})],
                     "ms", "stages")
    for f in (a, b, c):
        assert Path(f).read_bytes()[:8] == PNG


def _rec(method, cache, sec, batch=1000, layout="float32 x 128"):
    return {"method": method, "cache": cache, "seconds": sec, "batch": batch, "layout": layout,
            "rows_per_s": batch / sec}


def test_peer_ratios_against_hand_computed():
    gather = {"benchmark": "gather", "results": [
        _rec("featurestore", "warm", 0.1), _rec("np.memmap", "warm", 0.2),
        _rec("zarr oindex", "warm", 1.0), _rec("featurestore", "cold", 0.5),
        _rec("np.memmap", "cold", 0.25)]}
    sample = {"benchmark": "sample", "results": [
        {"peer": "featurestore", "batches_per_s": 30.0},
        {"peer": "pyg", "impl": "PyG", "batches_per_s": 10.0, "ours_over_peer": 3.0},
        {"peer": "dgl", "status": "not installed"}]}
    prep = {"benchmark": "preprocess", "results": {"edges": {
        "edges": 100, "ours_edges_per_s": 50.0, "scipy_edges_per_s": 200.0}}}
    got = {(r["workload"], r["peer"]): r.get("ratio")
           for r in render.peer_ratios({"gather": gather, "sample": sample, "preprocess": prep})}
    g = "gather 1,000 ids, float32 x 128, "
    assert got[(g + "warm", "np.memmap")] == pytest.approx(2.0)
    assert got[(g + "warm", "zarr oindex")] == pytest.approx(10.0)
    assert got[(g + "cold", "np.memmap")] == pytest.approx(0.5)
    assert got[("sampling alone", "PyG")] == pytest.approx(3.0)
    assert got[("sampling alone", "dgl")] is None  # not installed: a row, no ratio
    assert got[("COO -> CSC, 100 edges", "scipy tocsc")] == pytest.approx(0.25)
    table = render.peer_table(render.peer_ratios({"sample": sample}))
    assert "not installed" in table and "3.00x" in table


def test_plot_without_matplotlib_is_a_clear_error(monkeypatch):
    import builtins

    from benchmarks.report import MissingDependencyError

    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(MissingDependencyError, match="pip install"):
        plot_bars("unused.png", ["x"], {"g": [1.0]}, "y", "t")


def test_device_share_in_gather_record():
    from benchmarks.gather_bench import _record

    class T:
        layout, row_bytes, shape = "float32 x 128", 512, (10_000, 128)

    limits = {"randread_4k_qd32_iops": 1000.0, "randread_4k_qd1_iops": 100.0}
    r = _record(T, "featurestore", "cold", 500, Timing((0.4, 0.2, 0.3)), 250, limits)
    assert r["seconds"] == 0.3 and r["rows_per_s"] == pytest.approx(500 / 0.3)
    assert r["GBps"] == pytest.approx(500 * 512 / 0.3 / 1e9)
    assert r["device_limit_s"] == pytest.approx(0.25)  # 250 pages at 1000 IOPS
    assert r["share_of_device_limit"] == pytest.approx(0.25 / 0.3)
    assert "device_limit_s" not in _record(T, "featurestore", "warm", 500, Timing((0.1,)), 250,
                                           limits)


def test_preprocess_chart_skips_stages_that_did_not_run(tmp_path):
    pytest.importorskip("matplotlib")
    rep = {"benchmark": "preprocess", "results": {"edges": {"edges": 10, "ours": [
        {"seconds": 1.0, "phases": {"histogram_seconds": 0.5, "spill_seconds": None}}]}}}
    (f,) = render.plots(rep, str(tmp_path))
    assert Path(f).read_bytes()[:8] == PNG


def test_memcap_from_option_env_or_path(tmp_path, monkeypatch):
    from benchmarks.report import MissingDependencyError
    from benchmarks.workload import memcap_command
    from featurestore.errors import FeatureStoreError

    tool = tmp_path / "memcap"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.delenv("FEATURESTORE_MEMCAP", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(MissingDependencyError, match="FEATURESTORE_MEMCAP") as e:
        memcap_command("1G")
    assert isinstance(e.value, FeatureStoreError) and isinstance(e.value, ImportError)
    assert memcap_command("1G", str(tool)) == [str(tool), "1G", "--"]
    monkeypatch.setenv("FEATURESTORE_MEMCAP", str(tool))
    assert memcap_command("2G")[0] == str(tool)
    monkeypatch.delenv("FEATURESTORE_MEMCAP")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert memcap_command("2G")[0] == str(tool)


def test_options_flags_sizes_and_given():
    """Flags come from the option fields; the sizes at a scale, then the flags given, win."""
    import argparse

    from benchmarks.loader_bench import LoaderOptions
    from benchmarks.options import Sizes, add_options, given, sized

    p = argparse.ArgumentParser()
    add_options(p, LoaderOptions)
    ns = p.parse_args(["--fanouts", "5,3", "--batches", "4e1", "--ooc-cache", "none"])
    assert given(ns, LoaderOptions) == {"fanouts": (5, 3), "batches": 40, "ooc_cache": "none"}
    sz = Sizes.at(0.02)
    o = sized(LoaderOptions, sz, batches=7)
    assert (o.nodes, o.edges, o.batches, o.seconds) == (sz.nodes, sz.edges, 7, sz.loader_seconds)
    with pytest.raises(SystemExit):
        p.parse_args(["--ooc-cache", "lfu"])
