"""Markdown tables and PNG charts of each benchmark's report, and the peer ratios of a run.

``markdown(report)`` and ``plots(report, outdir)`` dispatch on ``report["benchmark"]``
(``device``, ``gather``, ``sample``, ``loader``, ``preprocess``, ``cache``);
``peer_ratios(reports)``
collects "ours against each peer, measured in the same run" from all of them.
"""

from __future__ import annotations

import importlib
import os
import statistics
import textwrap

from benchmarks.report import fmt_rate, md_table, plot_bars, plot_lines, plot_stacked

__all__ = ["markdown", "plots", "peer_ratios", "peer_table", "machine_line", "summary_md", "all_md"]


def machine_line(m: dict) -> str:
    """One line naming the machine and versions of a report."""
    keys = ("numpy", "numba", "zarr", "torch", "torch_geometric", "torch_sparse", "pyg_lib")
    vers = ", ".join(f"{k} {m[k]}" for k in keys if m.get(k))
    return (f"{m.get('time_utc', '')}: {m.get('cpus')} CPUs ({m.get('cpu', '')}), "
            f"{m.get('mem_total_gib')} GiB RAM, load average {m.get('load_average')}; "
            f"Python {m.get('python')}, featurestore {m.get('featurestore')}, {vers}"
            + (f"; {m['fio']}" if m.get("fio") else ""))


# -- device ----------------------------------------------------------------------------------
def _device_md(devices: dict) -> str:
    return md_table(["probed on", "probe file MiB", "tool", "sequential GB/s",
                     "random 4 KiB IOPS, QD1", "random 4 KiB IOPS, QD32", "QD32 GB/s"],
                    [[where, f"{d['probe_file_bytes'] / 2**20:,.0f}"
                      if "probe_file_bytes" in d else None, d["tool"], f"{d['seq_read_GBps']:.2f}",
                      f"{d['randread_4k_qd1_iops']:,.0f}", f"{d['randread_4k_qd32_iops']:,.0f}",
                      f"{d['randread_4k_qd32_iops'] * 4096 / 1e9:.2f}"]
                     for where, d in devices.items()])


# -- gather ----------------------------------------------------------------------------------
def _sweep(report: dict, kind: str | None) -> list[dict]:
    """The gather records of one sweep (``None``: the batch sweep)."""
    return [r for r in report["results"] if r.get("sweep") == kind]


#: gather table columns: header -> (record key, format; None: fmt_rate); no key, no cell
_GATHER_COLS = {
    "row layout": ("layout", "{}"), "batch": ("batch", "{:,}"), "density": ("density", "{:.2%}"),
    "cache": ("cache", "{}"), "read path": ("method", "{}"), "io_threads": ("io_threads", "{}"),
    "numba threads": ("numba_threads", "{}"), "median s": ("seconds", "{:.4f}"),
    "rows/s": ("rows_per_s", None), "GB/s": ("GBps", "{:.3f}"),
    "featurestore speed-up": ("speedup_of_featurestore", "{:.2f}x"),
    "device limit s (random 4 KiB, QD1)": ("device_limit_qd1_s", "{:.4f}"),
    "device limit s (random 4 KiB, QD32)": ("device_limit_s", "{:.4f}"),
    "share of device limit (QD32)": ("share_of_device_limit", "{:.0%}"),
    "same pages sequential s": ("device_seq_limit_s", "{:.4f}")}


def _gather_table(records: list[dict], headers: list[str]) -> str:
    def cell(r, key, f):
        return None if r.get(key) is None else fmt_rate(r[key]) if f is None else f.format(r[key])

    return md_table(headers, [[cell(r, *_GATHER_COLS[h]) for h in headers] for r in records])


def _gather_md(report: dict) -> str:
    times = ["median s", "rows/s", "GB/s"]
    limits = ["device limit s (random 4 KiB, QD32)", "share of device limit (QD32)"]
    out = [_gather_table(_sweep(report, None), ["row layout", "batch", "density", "cache",
                                                "read path", *times, "featurestore speed-up",
                                                *limits, "same pages sequential s"])]
    if _sweep(report, "io_threads"):
        out += ["\nCold gathers by reads in flight (`io_threads`, pread path):\n",
                _gather_table(_sweep(report, "io_threads"),
                              ["row layout", "batch", "io_threads", *times,
                               "device limit s (random 4 KiB, QD1)", *limits])]
    if _sweep(report, "numba_threads"):
        out += ["\nWarm gathers (page cache, memory-map path) by numba threads:\n",
                _gather_table(_sweep(report, "numba_threads"),
                              ["row layout", "batch", "numba threads", *times])]
    if report.get("device"):
        out += ["\nThe device under each store (page cache bypassed):\n",
                _device_md(report["device"])]
    return "\n".join(out)


def _gather_plots(report: dict, outdir: str) -> list[str]:
    files = []
    rows = _sweep(report, None)
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    panels = []
    for lay in layouts:
        series = []
        mine = [r for r in rows if r["layout"] == lay]
        for method in dict.fromkeys(r["method"] for r in mine):
            for cache in ("warm", "cold"):
                pts = sorted((r["batch"], r["rows_per_s"]) for r in mine
                             if r["method"] == method and r["cache"] == cache)
                if pts:
                    style = ("-o" if cache == "warm" else "-s") if len(pts) > 1 else "o"
                    series.append({"label": f"{method}, {cache}", "x": [p[0] for p in pts],
                                   "y": [p[1] for p in pts], "style": style})
        lim = sorted((r["batch"], r["batch"] / r["device_limit_s"]) for r in mine
                     if r["method"] == "featurestore" and r["cache"] == "cold"
                     and r.get("device_limit_s"))
        if lim:
            series.append({"label": "device limit (random 4 KiB, QD32)", "x": [p[0] for p in lim],
                           "y": [p[1] for p in lim], "style": "k--"})
        rb = mine[0].get("row_bytes")
        panels.append({"title": f"{lay} ({rb} B rows), {mine[0]['rows']:,} rows"
                       if rb else lay, "series": series})
    if panels:
        files.append(plot_lines(os.path.join(outdir, "gather-batch.png"), panels,
                                "batch size (ids per gather)", "rows gathered per second",
                                "Row gather throughput against batch size (median of trials)"))
    th = _sweep(report, "io_threads")
    if th:
        panels = []
        for lay in dict.fromkeys(r["layout"] for r in th):
            mine = sorted((r for r in th if r["layout"] == lay), key=lambda r: r["io_threads"])
            xs = [r["io_threads"] for r in mine]
            series = [{"label": "featurestore, cold", "x": xs,
                       "y": [r["rows_per_s"] for r in mine]}]
            for key, lab in (("device_limit_qd1_s", "device limit at QD1"),
                             ("device_limit_s", "device limit at QD32")):
                if key in mine[0]:
                    series.append({"label": lab, "x": [xs[0], xs[-1]],
                                   "y": [mine[0]["batch"] / mine[0][key]] * 2, "style": "--"})
            panels.append({"title": f"{lay}, {mine[0]['batch']:,} random ids of "
                           f"{mine[0]['rows']:,}", "series": series})
        files.append(plot_lines(os.path.join(outdir, "gather-threads.png"), panels,
                                "reads in flight (io_threads)", "rows gathered per second",
                                "Cold gathers against reads in flight", logy=True))
    return files


# -- sample ----------------------------------------------------------------------------------
def _sample_md(report: dict) -> str:
    rows = []
    for r in report["results"]:
        if "batches_per_s" not in r:
            rows.append([r["peer"], r.get("status", ""), None, None, None, None, None,
                         r.get("why", "")])
            continue
        st = r.get("stage_ms", {})
        rows.append([r["peer"], f"{r['batches_per_s']:.1f}", fmt_rate(r["seeds_per_s"]),
                     fmt_rate(r["edges_per_s"]), f"{r['edges_per_batch']:,.0f}",
                     f"{st['sample']:.1f}" if "sample" in st else None,
                     f"{r['ours_over_peer']:.2f}x" if "ours_over_peer" in r else None,
                     r.get("impl", "")])
    o = report["options"]
    head = (f"Sampling: {o['num_nodes']:,} nodes, {o['num_edges']:,} edges, fanouts "
            f"{o['fanouts']}, {o['batch_size']} seeds a batch; median of {o['trials']} trials "
            f"of {o['batches_per_trial']} batches.\n\n")
    return head + md_table(["sampler", "batches/s", "seeds/s", "sampled edges/s", "edges/batch",
                            "ms/batch", "ours / peer (batches/s)", "implementation"], rows)


def _sample_plots(report: dict, outdir: str) -> list[str]:
    ok = [r for r in report["results"] if "batches_per_s" in r]
    if not ok:
        return []
    o = report["options"]
    files = [plot_bars(os.path.join(outdir, "sample-throughput.png"), [r["peer"] for r in ok],
                       {"seeds/s": [r["seeds_per_s"] for r in ok],
                        "sampled edges/s": [r["edges_per_s"] for r in ok]},
                       "per second (log scale)",
                       f"Neighbour sampling, fanouts {o['fanouts']}, batch {o['batch_size']} "
                       f"({o['num_nodes']:,} nodes, {o['num_edges']:,} edges)", logy=True)]
    st = [(r["peer"], r["stage_ms"]) for r in ok if r.get("stage_ms")]
    if st:
        files.append(plot_stacked(os.path.join(outdir, "sample-stages.png"), st,
                                  "milliseconds per batch (median)",
                                  "Time per pipeline stage: sample, then gather the features"))
    return files


# -- loader ----------------------------------------------------------------------------------
LOADER_ROWS = [("ours_loader", "ours: loader, features in RAM"),
               ("pyg_loader", "PyG NeighborLoader, features in RAM"),
               ("ooc_ours", "ours: loader, fp16x768 on disk under memcap"),
               ("ooc_pyg", "PyG NeighborLoader, fp16x768 in RAM")]


def _loader_entries(report: dict) -> list[tuple[str, dict]]:
    rep = report["results"]
    link = rep.get("task") == "link"  # ours: LinkNeighborLoader; PyG's LinkNeighborLoader
    out = [(name.replace("loader,", "link loader,").replace("NeighborLoader", "LinkNeighborLoader")
            if link else name, rep[key])
           for key, name in LOADER_ROWS if isinstance(rep.get(key), dict)]
    dgl = rep.get("dgl")
    if isinstance(dgl, dict):
        for r in dgl.get("results", []):
            out.append((f"DGL {r.get('mode')}", {
                "batches_per_s": r.get("batches_per_s"), "seeds_per_s": r.get("seeds_per_s"),
                "edges_per_batch": r.get("sampled_edges_per_batch"), "batches": r.get("batches"),
                "cpu_ms_per_batch": r.get("cpu_ms_per_batch"),
                **({"error": r["error"]} if "error" in r else {})}))
        if "skipped" in dgl or "error" in dgl:
            out.append(("DGL", {"error": dgl.get("skipped") or dgl.get("error")}))
    if isinstance(rep.get("pyg"), dict) and "skipped" in rep["pyg"]:
        out.append(("PyG", {"error": "not installed: " + rep["pyg"]["skipped"]}))
    return out


def _ooc_md(rep: dict) -> list[str]:
    """The out-of-core runs epoch by epoch: throughput, hit rate, reads; ours' setup and plan."""
    rows, unit = [], _unit(rep)
    for key, name in (("ooc_ours", "ours, under memcap"), ("ooc_pyg", "PyG, in RAM")):
        for e in (rep.get(key) or {}).get("epochs") or []:
            c = e.get("cache") or {}
            hit = c.get("hits") or c.get("misses")
            rows.append([name, e.get("epoch"), fmt_rate(e.get("seeds_per_s")), e.get("batches")]
                        + ([f"{c['hit_rate']:.1%}", f"{c['misses']:,.0f}", f"{c['reads']:,.0f}",
                            f"{c['mb_read']:.0f}"] if hit else [None] * 4))
    if not rows:
        return []
    ours = rep.get("ooc_ours") or {}
    fits = all(r[4] is None for r in rows if str(r[0]).startswith("ours"))
    note = ("; no hit rate: the features fit the budget and the page cache serves them"
            if fits else "")
    out = ["", f"Out of core, epoch by epoch (the first is cold{note}):", "",
           md_table(["loader", "epoch", f"{unit}/s", "batches", "hit rate", "misses/batch",
                     "reads/batch", "MB read/batch"], rows)]
    if ours.get("setup_seconds") is not None:
        out += ["", f"Our loader's setup (plan, presample, cache fill): "
                    f"{ours['setup_seconds']:.1f} s."]
    if ours.get("plan_table"):
        out += ["", "```", ours["plan_table"], "```"]
    return out + _plan_md(rep)


def _unit(rep: dict) -> str:
    """What a loader report's rates count: seeds (node task) or positive seed edges (link)."""
    return "seed edges" if rep.get("task") == "link" else "seeds"


def _plan_md(rep: dict) -> list[str]:
    """Link task, out of core: ours against ``featurestore plan --task link``'s prediction."""
    p, v = rep.get("ooc_plan") or {}, rep.get("ooc_vs_plan") or {}
    out = [] if "ooc_oom_kills" not in rep else ["", f"OOM kills under memcap: "
                                                     f"{rep['ooc_oom_kills']}."]
    if p.get("error") or v.get("error"):
        return out + ["", f"Plan prediction: failed ({p.get('error') or v.get('error')})."]
    if not v:
        return out
    return out + ["", f"`featurestore plan --task link` predicted "
                      f"{fmt_rate(v['predicted_edges_per_s'])} seed edges/s (hit rate "
                      f"{p['hit_rate']:.1%}, {fmt_rate(p.get('read_iops'))} reads/s); ours' "
                      f"last epoch ran {fmt_rate(v['measured_edges_per_s'])}: "
                      f"{v['share']:.0%} of it (target >= {v['target']:.0%}: "
                      f"{'met' if v['within_target'] else 'NOT met'}).",
                  "", "```", p.get("table", ""), "```"]


def _loader_md(report: dict) -> str:
    rep = report["results"]
    rows = []
    for name, r in _loader_entries(report):
        if r.get("error") or not r.get("batches_per_s"):
            rows.append([name, None, None, None, None, None, str(r.get("error", ""))[-200:]])
            continue
        cpu = r.get("cpu_ms_per_batch")
        rows.append([name, f"{r['batches_per_s']:.2f}", fmt_rate(r.get("seeds_per_s")),
                     f"{r.get('edges_per_batch') or 0:,.0f}", r.get("batches"),
                     f"{cpu:.0f}" if cpu is not None else None, r.get("memcap", "")])
    g, link = rep.get("ooc_graph"), rep.get("task") == "link"
    what = (f"Link loader (task link): batch {rep.get('batch_size')} positive seed edges + "
            f"{rep.get('neg_sampling_ratio')} binary negative(s) each"
            + (f", {rep['link_inputs']['edges']:,} input edges" if rep.get("link_inputs")
               else "") if link else f"Loader: batch {rep.get('batch_size')}")
    head = (f"{what}; {rep.get('nodes', 0):,} nodes, {rep.get('edges', 0):,} edges, fanouts "
            f"{rep.get('fanouts')}; {rep.get('cpus')} CPUs"
            + (f"; out of core on {g['store']}: {g['nodes']:,} nodes, {g['edges']:,} edges, "
               f"{g['train']:,} train seeds" if g else "")
            + (f"; load average {rep['ooc_load']}" if rep.get("ooc_load") else "") + ".\n\n")
    stages = [f"{n}: {r['stage_ms_per_batch']}" for n, r in _loader_entries(report)
              if r.get("stage_ms_per_batch")]
    ratio = ([f"\nOurs / PyG LinkNeighborLoader in RAM: {rep['ours_over_pyg']:.2f}x seed "
              f"edges/s (medians of {len(rep['ours_loader']['trials'])} alternating rounds)"]
             if rep.get("ours_over_pyg") else [])
    return "\n".join([head + md_table(["loader", "batches/s", f"{_unit(rep)}/s", "edges/batch",
                                        "batches timed", "CPU ms/batch", "memory cap / note"],
                                       rows)] + ratio
                     + ([f"\nStage busy ms per batch: {'; '.join(stages)}"] if stages else [])
                     + _ooc_md(rep))


def _loader_plots(report: dict, outdir: str) -> list[str]:
    ok = [(n, r) for n, r in _loader_entries(report) if r.get("batches_per_s")]
    if not ok:
        return []
    files = [plot_bars(os.path.join(outdir, "loader-throughput.png"),
                       [textwrap.fill(n, 22) for n, _ in ok],
                       {"batches/s": [r["batches_per_s"] for _, r in ok]}, "batches per second",
                       "Sampler and loader throughput (higher is better)")]
    st = [(textwrap.fill(n, 28), r["stage_ms_per_batch"]) for n, r in ok
          if r.get("stage_ms_per_batch")]
    if st:
        files.append(plot_stacked(os.path.join(outdir, "loader-stages.png"), st,
                                  "milliseconds per batch (stage threads overlap)",
                                  "Our loader: time per pipeline stage"))
    return files


# -- preprocess ------------------------------------------------------------------------------
def _gib(b) -> str:
    return f"{b / 2**30:.2f} GiB" if b else ""


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _preprocess_md(report: dict) -> str:
    res = report["results"]
    rows = []
    e = res.get("edges")
    if isinstance(e, dict) and "ours" in e:
        t, gb = _median(e["ours"], "seconds"), _median(e["ours"], "gb_read")
        rows.append(["COO -> CSC (ours, out of core)", f"{e['edges']:,} edges", f"{t:.2f}",
                     fmt_rate(e["edges"] / t), f"{gb / t:.2f}", _gib(e.get("ours_peak_anon")),
                     e.get("memcap") or ""])
        if e.get("scipy"):
            ts = _median(e["scipy"], "seconds")
            rows.append(["COO -> CSC (scipy tocsc, in RAM)", f"{e['edges']:,} edges",
                         f"{ts:.2f}", fmt_rate(e["edges"] / ts), None,
                         _gib(e.get("scipy_peak_anon")), ""])
    f = res.get("features")
    if isinstance(f, dict) and "runs" in f:
        t = _median(f["runs"], "seconds")
        rows.append(["features fp32 -> fp16 store", f"{f['rows']:,} x {f['dim']}", f"{t:.2f}",
                     fmt_rate(f["rows"] / t) + " rows", f"{f['gb_per_s']:.2f}",
                     _gib(f.get("peak_anon")), f.get("memcap") or ""])
    for k, v in res.items():
        if isinstance(v, dict) and "error" in v:
            rows.append([k, None, None, None, None, None, v["error"][-200:]])
    return md_table(["step", "size", "median s", "per second", "GB/s read", "peak anon memory",
                     "memory cap / note"], rows)


def _preprocess_plots(report: dict, outdir: str) -> list[str]:
    e = report["results"].get("edges")
    if not (isinstance(e, dict) and e.get("ours")):
        return []
    ours = {}
    for k in e["ours"][0].get("phases", {}):
        vals = [r["phases"][k] for r in e["ours"] if r["phases"].get(k) is not None]
        if vals:  # a stage that did not run (e.g. no spill pass) has None
            ours[k.replace("_seconds", "")] = statistics.median(vals)
    bars = [("ours (out of core)", ours)] + ([("scipy tocsc (in RAM)", {"scipy tocsc": _median(
        e["scipy"], "seconds")})] if e.get("scipy") else [])
    return [plot_stacked(os.path.join(outdir, "preprocess-stages.png"), bars,
                         "seconds (median)", f"COO -> CSC of {e['edges']:,} edges: time per stage")]


# -- cache ------------------------------------------------------------------------------------
POLICY_LABELS = {"degree-static": "degree static", "presample-static": "presample static",
                 "sieve": "SIEVE", "clock": "CLOCK", "lru": "LRU",
                 "belady-window": "Belady, {w}-batch lookahead",
                 "belady": "Belady (offline optimum)",
                 "optimal-static": "optimal static (per epoch)"}


def _label(policy: str, window: int) -> str:
    return POLICY_LABELS[policy].format(w=window)


def _cache_md(report: dict) -> str:
    o = report["options"]
    out = []
    for r in report["results"]:
        if "error" in r:
            out += [f"**{r['label']}**: failed: {r['error']}", ""]
            continue
        budgets = sorted({row["budget"] for row in r["table"]})
        out.append(
            f"**{r['label']}** ({r['input']}, {r['num_inputs']:,} seeds; cache of "
            f"`{r['ntype']}` rows: {r['num_rows']:,} x {r['row_bytes']} B): fanouts "
            f"{o['fanouts']}, batch {o['batch_size']}, {r['epochs']} epochs of "
            f"{r['batches_per_epoch']} batches" + ("" if r.get("whole_epochs", True)
                                                   else " (the first batches of each epoch)")
            + f"; {r['reads_per_batch']:,.0f} distinct rows per batch; rows touched per epoch "
            + ", ".join(f"{x / r['num_rows']:.1%}" for x in r["rows_touched_per_epoch"])
            + ". Hit rate (row reads served) over "
            + (f"epochs 2-{r['epochs']}" if r["epochs"] > 2 else "epoch 2")
            + "; the first epoch presamples (static) or warms (dynamic policies).")
        out.append("")
        head = ["policy"] + [f"{b:.0%} ({r['num_rows'] * b * r['row_bytes'] / 2**30:.2f} GiB)"
                             if r['num_rows'] * b * r['row_bytes'] >= 2**28 else f"{b:.0%}"
                             for b in budgets]
        rows = []
        for p in dict.fromkeys(row["policy"] for row in r["table"]):
            cells = {row["budget"]: row for row in r["table"] if row["policy"] == p}
            rows.append([_label(p, o["window_batches"])]
                        + [f"{cells[b]['hit_rate']:.1%}" for b in budgets])
        pre = {row["budget"]: row for row in r["table"] if row["policy"] == "presample-static"}
        if pre:
            rows.append(["presample static / optimal static"]
                        + [f"{pre[b]['of_optimal_static']:.0%}" if pre[b]["of_optimal_static"]
                           else None for b in budgets])
        out += [md_table(head, rows), ""]
        out.append(f"Sampling {r['record_seconds']:.1f} s, degrees {r['degree_seconds']:.1f} s, "
                   f"replays {r['replay_seconds']:.1f} s ({r['row_reads']:,} row reads).")
        out.append("")
    return "\n".join(out).rstrip()


def _cache_plots(report: dict, outdir: str) -> list[str]:
    o = report["options"]
    panels = []
    for r in report["results"]:
        if "error" in r:
            continue
        series = []
        for p in dict.fromkeys(row["policy"] for row in r["table"]):
            pts = sorted((row["budget"] * 100, row["hit_rate"]) for row in r["table"]
                         if row["policy"] == p)
            style = "k--" if p == "optimal-static" else (":" if p == "belady" else "-o")
            series.append({"label": _label(p, o["window_batches"]), "x": [x for x, _ in pts],
                           "y": [y for _, y in pts], "style": style})
        panels.append({"title": f"{r['label']}: {r['num_rows']:,} {r['ntype']} rows, "
                                f"{r['reads_per_batch']:,.0f} reads/batch", "series": series})
    if not panels:
        return []
    return [plot_lines(os.path.join(outdir, "cache-hit-rate.png"), panels,
                       "cache size (% of the rows)", "hit rate (row reads served)",
                       f"Cache policies, fanouts {o['fanouts']}, batch {o['batch_size']}",
                       logx=True, logy=False)]


# -- dispatch --------------------------------------------------------------------------------
_MD = {"device": lambda r: _device_md(r["results"]), "gather": _gather_md, "sample": _sample_md,
       "loader": _loader_md, "preprocess": _preprocess_md, "cache": _cache_md}
_PLOTS = {"gather": _gather_plots, "sample": _sample_plots, "loader": _loader_plots,
          "preprocess": _preprocess_plots, "cache": _cache_plots}


def markdown(report: dict) -> str:
    """The markdown table(s) of one benchmark's report (``remote``, ``partition``: their
    module's ``markdown``)."""
    name = report["benchmark"]
    return (_MD.get(name) or importlib.import_module(f"benchmarks.{name}_bench").markdown)(report)


def plots(report: dict, outdir: str) -> list[str]:
    """Draw the charts of one benchmark's report into ``outdir``; the files written."""
    fn = _PLOTS.get(report["benchmark"])
    return (os.makedirs(outdir, exist_ok=True) or fn(report, outdir)) if fn else []


# -- peers -----------------------------------------------------------------------------------
def _pair(workload: str, peer: str, ours: float, theirs: float, unit: str) -> dict:
    return {"workload": workload, "peer": peer, "ours": ours, "theirs": theirs, "unit": unit,
            "ratio": ours / theirs}


def _gather_ratios(g: dict) -> list[dict]:
    rows = _sweep(g, None)
    # where every peer ran (zarr's batch), and the largest batch
    keep = {r["batch"] for r in rows if r["method"] == "zarr oindex"}
    keep |= {max((r["batch"] for r in rows), default=0)}
    mine = {(x["cache"], x["batch"], x["layout"]): x["rows_per_s"] for x in rows
            if x["method"] == "featurestore"}
    return [_pair(f"gather {r['batch']:,} ids, {r['layout']}, {r['cache']}", r["method"],
                  mine[r["cache"], r["batch"], r["layout"]], r["rows_per_s"], "rows/s")
            for r in rows if r["method"] != "featurestore" and r["batch"] in keep]


def _loader_ratios(rep: dict, sample: dict | None) -> list[dict]:
    link = rep.get("task") == "link"
    out, ram = [], "link loader, features in RAM" if link else "loader, features in RAM"
    peer = "PyG LinkNeighborLoader" if link else "PyG NeighborLoader"
    for a, b, what in (("ours_loader", "pyg_loader", ram),
                       ("ooc_ours", "ooc_pyg", ("link " if link else "")
                        + "loader, fp16x768 (ours on disk under memcap, peer in RAM)")):
        ra, rb = rep.get(a) or {}, rep.get(b) or {}
        key, unit = ("seeds_per_s", "seed edges/s") if link else ("batches_per_s", "batches/s")
        if ra.get(key) and rb.get(key):
            out.append(_pair(what, peer, ra[key], rb[key], unit))
    ours = (rep.get("ours_loader") or {}).get("batches_per_s")
    peers = [(r["peer"], r) for r in (sample or {}).get("results", []) if r.get("whole_loader")]
    peers += [(f"DGL {r['mode']}", r) for r in (rep.get("dgl") or {}).get("results", [])
              if r.get("mode") != "sampler"]
    return out + [_pair(ram, name, ours, r["batches_per_s"], "batches/s")
                  for name, r in peers if ours and r.get("batches_per_s")]


def peer_ratios(reports: dict[str, dict]) -> list[dict]:
    """Ours against every peer measured in the same run: ``{workload, peer, ours, theirs,
    unit, ratio}`` with ratio > 1 when ours is faster."""
    out = _gather_ratios(reports["gather"]) if "gather" in reports else []
    s = reports.get("sample")
    mine = next((r for r in (s or {}).get("results", []) if r["peer"] == "featurestore"), None)
    for r in (s or {}).get("results", []) if mine else []:
        if r["peer"] != "featurestore" and not r.get("whole_loader"):
            out.append({"workload": "sampling alone", "peer": r.get("impl", r["peer"]),
                        "ours": mine["batches_per_s"], "theirs": r.get("batches_per_s"),
                        "unit": "batches/s", "ratio": r.get("ours_over_peer"),
                        "status": r.get("status")})
    if "loader" in reports:
        out += _loader_ratios(reports["loader"]["results"], s)
    e = (reports.get("preprocess") or {}).get("results", {}).get("edges") or {}
    if e.get("scipy_edges_per_s") and e.get("ours_edges_per_s"):
        out.append(_pair(f"COO -> CSC, {e['edges']:,} edges", "scipy tocsc",
                         e["ours_edges_per_s"], e["scipy_edges_per_s"], "edges/s"))
    return out


def peer_table(ratios: list[dict]) -> str:
    """The markdown table of :func:`peer_ratios`."""
    return md_table(["workload", "peer", "ours", "peer's", "unit", "ours / peer"],
                    [[r["workload"], r["peer"], fmt_rate(r["ours"]),
                      fmt_rate(r["theirs"]) if r.get("theirs") else r.get("status"), r["unit"],
                      f"{r['ratio']:.2f}x" if r.get("ratio") else None] for r in ratios])


def cold_vs_device_md(gather: dict) -> str:
    """One row per layout and batch: our warm and cold gathers, the device's limit for the same
    pages, the share reached, and the peers' cold times measured in the same run."""
    rows = _sweep(gather, None)
    out = []
    for lay in dict.fromkeys(r["layout"] for r in rows):
        for b in sorted({r["batch"] for r in rows if r["layout"] == lay}):
            at = {(r["method"], r["cache"]): r for r in rows
                  if r["layout"] == lay and r["batch"] == b}
            w, c = at.get(("featurestore", "warm")), at.get(("featurestore", "cold"))
            if not (w and c):
                continue
            mm = at.get(("np.memmap", "cold"))
            share = c.get("share_of_device_limit")
            out.append([lay, f"{b:,} ({c['density']:.2%})", fmt_rate(w["rows_per_s"]),
                        fmt_rate(c["rows_per_s"]), f"{c['GBps']:.3f}", f"{c['seconds']:.3f}",
                        f"{c['device_limit_s']:.3f}" if "device_limit_s" in c else None,
                        f"{share:.0%}" if share is not None else None,
                        f"{mm['seconds'] / c['seconds']:.2f}x" if mm else None])
    return md_table(["row layout", "batch (density)", "warm rows/s", "cold rows/s", "cold GB/s",
                     "cold s", "device limit s (random 4 KiB, QD32)", "share of device limit",
                     "cold: np.memmap s / ours"], out)


def summary_md(summary: dict) -> str:
    """The short report of ``bench all`` (the README's tables): machine, device, cold gathers
    against the device limit, and ours against each peer."""
    rep = summary["reports"]
    out = [machine_line(summary["machine"]), ""]
    if "device" in rep:
        out += ["Device (page cache bypassed):", "", markdown(rep["device"]), ""]
    if "gather" in rep:
        out += ["Gathers (median of trials; cold = every mapping closed and pages evicted "
                "before each trial):", "", cold_vs_device_md(rep["gather"]), ""]
    if summary.get("peer_ratios"):
        out += ["Ours against each peer, in the same run (ratio > 1: ours faster):", "",
                peer_table(summary["peer_ratios"]), ""]
    return "\n".join(out)


TITLES = {"device": "Device limits", "gather": "Row gathers", "sample": "Neighbour sampling",
          "loader": "Loaders", "preprocess": "Preprocessing",
          "cache": "Feature-cache policies (replayed on sampled epochs)"}


def all_md(s: dict) -> str:
    """The whole report of ``bench all``: every part's tables, the failures and the charts."""
    o = s["options"]
    out = [f"# featurestore bench all --scale {o['scale']}" + (" (quick)" if o["quick"] else ""),
           "", machine_line(s["machine"]), "",
           f"Total {s['seconds']:.0f} s: " + ", ".join(f"{k} {v:.0f} s"
                                                       for k, v in s["part_seconds"].items()),
           "", "## Ours against each peer, measured in the same run", "",
           peer_table(s["peer_ratios"]) if s["peer_ratios"] else "(no peer measured)"]
    for part, rep in s["reports"].items():
        out += ["", f"## {TITLES.get(part, part)}", "", markdown(rep)]
    for part, err in s["errors"].items():
        out += ["", f"## {TITLES.get(part, part)}: failed", "", "```", err, "```"]
    if s["charts"]:
        out += ["", "## Charts", ""] + [f"![{c}]({c})" for c in s["charts"]]
    return "\n".join(out) + "\n"
