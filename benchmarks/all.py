"""``bench all``: every benchmark at one ``--scale`` into one report.

Sizes are set against the OGB-LSC datasets (:class:`benchmarks.options.Sizes`). The run writes
into ``--out``: ``all.json`` (machine, versions, options and every trial of every part),
``report.md`` (every table and the peer ratios), ``summary.md`` (device, cold gathers against
the device limit, peer ratios), ``<part>.json`` and, with ``--plot``, the PNG charts.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from dataclasses import asdict, dataclass

from featurestore.errors import InvalidArgumentError

from benchmarks import cache_bench, device, gather_bench, loader_bench, preprocess_bench, render
from benchmarks import sample_bench
from benchmarks.options import Sizes, opt, sized
from benchmarks.report import machine_info, write_json

log = logging.getLogger(__name__)

PARTS = ("device", "gather", "sample", "loader", "preprocess", "cache")


@dataclass(frozen=True)
class AllOptions:
    """Every benchmark at one scale: all.json, report.md, charts."""

    scale: float = opt(0.01, "1.0 = MAG240M paper rows / papers100M graph; 0.01 runs in minutes")
    workdir: str = opt("bench-data", "where synthetic data is made")
    parts: str = opt(",".join(PARTS), f"comma-separated among {PARTS}")
    trials: int | None = opt(None, "trials per measurement (default 3, --quick 1)")
    quick: bool = opt(False, "tiny sizes: a smoke run of every part")


def part_report(part: str, sz: Sizes, workdir: str, trials: int, reports: dict) -> dict:
    """Run one part of ``bench all`` at sizes ``sz``; its report."""
    if part == "device":
        return device.run(device.DeviceOptions(target=workdir, size_mib=sz.probe_mib,
                                               seconds=max(sz.device_seconds, 0.5)))
    if part == "gather":
        limits = next(iter(reports["device"]["results"].values())) if "device" in reports else None
        return gather_bench.run(sized(gather_bench.GatherOptions, sz, workdir=workdir,
                                      trials=trials), device=limits)
    if part == "sample":
        return sample_bench.run(sized(sample_bench.SampleOptions, sz, workdir=workdir,
                                      trials=trials))
    if part == "loader":
        return loader_bench.run(sized(loader_bench.LoaderOptions, sz, workdir=workdir))
    if part == "cache":
        return cache_bench.run(sized(cache_bench.CacheOptions, sz, workdir=workdir))
    if part == "preprocess":
        return preprocess_bench.run(sized(preprocess_bench.PreprocessOptions, sz, repeat=trials,
                                          workdir=os.path.join(workdir, "preprocess")))
    raise InvalidArgumentError(f"Expected parts among {PARTS}. Got {part!r} instead.")


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


def run_all(o: AllOptions, outdir: str, plot: bool = False) -> int:
    """Run every part, write ``all.json``, ``report.md`` and the charts; 0 when all succeeded."""
    sz = Sizes.quick() if o.quick else Sizes.at(o.scale)
    trials, workdir = o.trials or sz.trials, o.workdir
    parts = [p.strip() for p in o.parts.split(",") if p.strip()]
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
               "options": {"scale": o.scale, "quick": o.quick, "trials": trials, "parts": parts,
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
    return 1 if errors else 0
