"""Every benchmark in one run: ``featurestore bench all --scale 0.01 --plot``.

``--scale`` sizes the synthetic data against the OGB-LSC datasets the product is built for
(:class:`benchmarks.options.Sizes`): at scale 1 the gather stores have MAG240M's 121M paper
rows (fp16 x 768 and fp32 x 128), the sampled graph has ogbn-papers100M's 111M nodes (about 15
edges a node) and the preprocessing run converts 1.6B edges. Scale 0.01 (1.2M rows, 1.1M nodes,
16M edges) runs in minutes on two cores. The run writes, into ``--out``: ``all.json`` (machine,
versions, options and every trial of every part), ``report.md`` (the tables and the peer
ratios), ``summary.md`` (the short version: device, cold gathers against the device limit, peer
ratios) and, with ``--plot``, the PNG charts; each part also gets its own ``<part>.json``.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import traceback
from dataclasses import asdict, replace

from . import cache_bench, device, gather_bench, loader_bench, preprocess_bench, render
from . import sample_bench
from .options import Sizes
from .report import machine_info, write_json

log = logging.getLogger(__name__)

PARTS = ("device", "gather", "sample", "loader", "preprocess", "cache")


def part_report(part: str, sz: Sizes, workdir: str, trials: int, reports: dict) -> dict:
    """Run one part of ``bench all`` at sizes ``sz``; its report."""
    if part == "device":
        return device.run(device.DeviceOptions(target=workdir, size_mib=sz.probe_mib,
                                               seconds=max(sz.device_seconds, 0.5)))
    if part == "gather":
        limits = next(iter(reports["device"]["results"].values())) if "device" in reports else None
        return gather_bench.run(replace(gather_bench.GatherOptions.at(sz, workdir), trials=trials),
                                device=limits)
    if part == "sample":
        return sample_bench.run(replace(sample_bench.SampleOptions.at(sz, workdir), trials=trials))
    if part == "loader":
        return loader_bench.run(replace(loader_bench.LoaderOptions.at(sz, workdir),
                                        parts="loader,dgl,ooc"))
    if part == "cache":
        return cache_bench.run(cache_bench.CacheOptions.at(sz, workdir))
    if part == "preprocess":
        return preprocess_bench.run(replace(preprocess_bench.PreprocessOptions.at(sz, workdir),
                                            repeat=trials))
    raise ValueError(f"Expected parts among {PARTS}. Got {part!r} instead.")


def emit(report: dict, outdir: str, plot: bool, name: str | None = None) -> dict:
    """Write ``<name>.json`` and ``<name>.md`` (and the charts) into ``outdir``; print the table."""
    name = name or report["benchmark"]
    os.makedirs(outdir, exist_ok=True)
    md = render.markdown(report)
    files = {"json": write_json(report, os.path.join(outdir, f"{name}.json")),
             "md": os.path.join(outdir, f"{name}.md")}
    with open(files["md"], "w") as f:
        f.write(md + "\n")
    if plot:
        files["png"] = render.plots(report, outdir)
    print(md)
    print(f"\nwrote {', '.join([files['json'], files['md']] + files.get('png', []))}")
    return files


def run_all(scale: float, workdir: str, outdir: str, plot: bool = False, parts=PARTS,
            quick: bool = False, trials: int | None = None, keep_data: bool = True) -> int:
    """Run every part, write ``all.json``, ``report.md`` and the charts; 0 when all succeeded."""
    sz = Sizes.quick() if quick else Sizes.at(scale)
    trials = trials or sz.trials
    os.makedirs(workdir, exist_ok=True)
    os.makedirs(outdir, exist_ok=True)
    t_all = time.perf_counter()
    reports, errors, timings, charts = {}, {}, {}, []
    for part in parts:
        t = time.perf_counter()
        log.info("bench all: %s", part)
        try:
            rep = reports[part] = part_report(part, sz, workdir, trials, reports)
        except Exception as e:  # noqa: BLE001  (one failing part must not hide the others)
            log.exception("bench all: %s failed", part)
            errors[part] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
            continue
        finally:
            timings[part] = time.perf_counter() - t
        write_json(rep, os.path.join(outdir, f"{part}.json"))
        if plot:
            try:
                charts += render.plots(rep, outdir)
            except Exception as e:  # noqa: BLE001  (a chart must not lose the measurements)
                log.exception("bench all: charts of %s failed", part)
                errors[f"{part} charts"] = f"{type(e).__name__}: {e}"
    total = time.perf_counter() - t_all
    summary = {"benchmark": "all", "machine": machine_info(workdir),
               "options": {"scale": scale, "quick": quick, "trials": trials, "parts": list(parts),
                           "workdir": os.path.abspath(workdir), "sizes": asdict(sz)},
               "seconds": total, "part_seconds": timings, "errors": errors,
               "peer_ratios": render.peer_ratios(reports), "reports": reports,
               "charts": [os.path.basename(c) for c in charts]}
    write_json(summary, os.path.join(outdir, "all.json"))
    md = render.all_md(summary)
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write(md)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(render.summary_md(summary))
    print(md)
    print(f"wrote {outdir}/all.json, {outdir}/report.md"
          + (f" and {len(charts)} charts" if charts else "") + f" in {total:.0f} s")
    if not keep_data:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if errors else 0
