"""Every benchmark in one run: ``featurestore bench all --scale 0.01 --plot``.

``--scale`` sizes the synthetic data against the OGB-LSC datasets the product is built for
(:class:`Sizes`): at scale 1 the gather stores have MAG240M's 121M paper rows (fp16 x 768 and
fp32 x 128), the sampled graph has ogbn-papers100M's 111M nodes (about 15 edges a node) and the
preprocessing run converts 1.6B edges. Scale 0.01 (1.2M rows, 1.1M nodes, 16M edges) runs in
minutes on two cores. The run writes, into ``--out``: ``all.json`` (machine, versions, options
and every trial of every part), ``report.md`` (the tables and the peer ratios), ``summary.md``
(the short version: device, cold gathers against the device limit, peer ratios) and, with
``--plot``, the PNG charts; each part also gets its own ``<part>.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, replace

from . import render
from .report import machine_info, write_json

log = logging.getLogger(__name__)

PARTS = ("device", "gather", "sample", "loader", "preprocess", "cache")
#: smallest file the device is probed through (1 MiB sequential reads need room).
MIN_PROBE_MIB = 4


@dataclass(frozen=True)
class Sizes:
    """Synthetic sizes and run lengths at a scale (1.0 = MAG240M paper rows / papers100M graph)."""

    gather_rows: int
    nodes: int
    edges: int
    prep_edges: int
    prep_nodes: int
    trials: int = 3
    device_seconds: float = 3.0
    probe_mib: int = 1024
    gather_batches: tuple = (1_000, 10_000, 30_000, 100_000, 200_000)
    zarr_batch: int = 10_000
    thread_counts: tuple = (1, 4, 16, 32)
    thread_batch: int = 5_000
    sample_batch_size: int = 1024
    sample_batches: int = 10
    loader_batches: int = 20
    loader_seconds: float = 15.0
    cache_batches: int | None = 20

    @classmethod
    def at(cls, scale: float) -> Sizes:
        if not scale > 0:
            raise ValueError(f"Expected a scale > 0. Got {scale} instead.")
        nodes = max(20_000, round(1.11e8 * scale))
        big = scale > 0.05
        return cls(gather_rows=max(20_000, round(1.21e8 * scale)), nodes=nodes, edges=15 * nodes,
                   prep_edges=max(200_000, round(1.6e9 * scale)), prep_nodes=nodes,
                   device_seconds=10.0 if big else 3.0,
                   thread_counts=(1, 4, 16, 32, 64) if big else (1, 4, 16, 32),
                   thread_batch=30_000 if big else 5_000, sample_batches=20 if big else 10,
                   loader_batches=50 if big else 20, loader_seconds=30.0 if big else 10.0,
                   cache_batches=100 if big else 20)

    @classmethod
    def quick(cls) -> Sizes:
        """Tiny sizes for smoke tests: seconds, not minutes."""
        return cls(gather_rows=20_000, nodes=20_000, edges=200_000, prep_edges=100_000,
                   prep_nodes=10_000, trials=1, device_seconds=0.0, probe_mib=64,
                   gather_batches=(1_000, 3_000), zarr_batch=1_000, thread_counts=(1, 8),
                   thread_batch=2_000, sample_batch_size=256, sample_batches=3,
                   loader_batches=3, loader_seconds=5.0, cache_batches=4)


def ooc_memcap(nodes: int, row_bytes: int = 1536) -> str:
    """The loader's out-of-core memory cap: a quarter of the fp16 x 768 features, and at least
    1.5 GiB, which the batch buffers need (fanouts 15,10,5 x 1024 seeds touch ~250k rows)."""
    return f"{max(1536, nodes * row_bytes // 4 >> 20)}M"


# -- the parts ---------------------------------------------------------------------------------
def run_device(target: str, seconds: float = 5.0, size_mib: int = 1024,
               use_fio: bool | None = None) -> dict:
    """The device's limits under ``target`` (a file, a store or any directory).

    A store or directory is probed through its largest file when that holds at least
    ``size_mib`` MiB, else through a temporary file of that size written there (then removed);
    reads bypass the page cache (``O_DIRECT``), so the file's own cached pages do not count.
    """
    from .device import device_limits

    size_mib = max(size_mib, MIN_PROBE_MIB)
    if use_fio is None:
        use_fio = shutil.which("fio") is not None
    if use_fio:
        seconds = max(1, round(seconds))  # fio's --runtime takes whole seconds
    probe, tmp = _probe_file(target, size_mib)
    try:
        d = device_limits(probe, seconds=seconds, use_fio=use_fio)
    finally:
        if tmp:
            os.remove(tmp)
    d["target"] = os.path.abspath(target)
    d["probe_file"] = "(a temporary file)" if tmp else probe
    d["probe_file_bytes"] = size_mib << 20 if tmp else os.path.getsize(probe)
    return {"benchmark": "device", "machine": machine_info(os.path.dirname(probe)),
            "options": {"target": target, "seconds": seconds, "size_mib": size_mib,
                        "tool": d["tool"]},
            "results": {os.path.abspath(target): d}}


def _probe_file(target: str, size_mib: int) -> tuple[str, str | None]:
    if os.path.isfile(target):
        if os.path.getsize(target) >= MIN_PROBE_MIB << 20:
            return target, None
        target = os.path.dirname(os.path.abspath(target))  # too small: probe beside it
    if not os.path.isdir(target):
        from featurestore.errors import StoreNotFoundError

        raise StoreNotFoundError(f"Expected a file, store or directory to probe at {target}. "
                                 f"It does not exist.")
    best, size = None, -1
    for d, _, names in os.walk(target):
        for n in names:
            p = os.path.join(d, n)
            try:
                s = os.path.getsize(p)
            except OSError:
                continue
            if s > size:
                best, size = p, s
    if best is not None and size >= size_mib << 20:
        return best, None
    fd, tmp = tempfile.mkstemp(prefix=".fs-device-probe-", dir=target)
    block = os.urandom(1 << 20)
    with os.fdopen(fd, "wb") as f:
        for _ in range(size_mib):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    return tmp, tmp


def run_gather(workdir: str, rows: int, store: str | None = None, ntype: str | None = None,
               feature: str = "feat", batches=None, threads=None, trials: int = 3,
               device_seconds: float = 3.0, zarr_batch: int | None = 10_000,
               thread_batch: int = 10_000, use_fio: bool | None = None,
               device: dict | None = None) -> dict:
    """The gather sweep on ``store`` or on the two synthetic layouts with ``rows`` rows."""
    from . import gather_bench, gather_sweep as gs

    if store:
        targets = [gs.GatherTarget(store, ntype, feature)]
    else:
        targets = [gs.GatherTarget(gather_bench.make_store(workdir, lay, rows))
                   for lay in gather_bench.LAYOUTS]
    return gs.run(targets, batches=batches or gs.BATCHES, trials=trials,
                  thread_counts=gs.IO_THREADS if threads is None else threads,
                  thread_batch=thread_batch,
                  zarr_batch=zarr_batch, device_seconds=device_seconds, use_fio=use_fio,
                  device=device)


def run_sample(workdir: str, nodes: int, edges: int, store: str | None = None,
               fanouts=(15, 10, 5), batch_size: int = 1024, batches: int = 20,
               trials: int = 3, peers=None) -> dict:
    """Our sampler against PyG's and DGL's on ``store`` or a synthetic power-law graph."""
    from . import sample_bench

    path = store or sample_bench.make_graph_store(workdir, nodes, edges)
    return sample_bench.run(path, fanouts, batch_size, batches, trials,
                            peers=peers or sample_bench.PEERS)


def loader_args(**overrides) -> argparse.Namespace:
    """The loader benchmark's options: its own defaults, then ``overrides``."""
    from . import loader_bench

    p = argparse.ArgumentParser()
    loader_bench.add_arguments(p)
    ns = p.parse_args([])
    for k, v in overrides.items():
        setattr(ns, k, v)
    return ns


def run_loader(ns: argparse.Namespace) -> dict:
    """:func:`benchmarks.loader_bench.run` wrapped as a report."""
    from . import loader_bench

    ns.nodes, ns.edges = int(ns.nodes), int(ns.edges)
    t = time.perf_counter()
    rep = loader_bench.run(ns)
    opts = {k: v for k, v in vars(ns).items() if k != "func" and not callable(v)}
    return {"benchmark": "loader", "machine": machine_info(ns.workdir), "options": opts,
            "seconds": time.perf_counter() - t, "results": rep}


def run_cache(workdir: str, nodes: int, edges: int, stores=None, inputs=None,
              fanouts=(15, 10, 5), batch_size: int = 1024, epochs: int = 3, budgets=None,
              window: int = 4, max_batches: int | None = None, seed: int = 0) -> dict:
    """Cache policies replayed on ``stores`` (paths; ``inputs`` their ``TYPE:SPLIT``, one for
    all or one each) or on the synthetic power-law graph of ``bench sample``."""
    from . import cache_bench, sample_bench

    stores = list(stores or [sample_bench.make_graph_store(workdir, nodes, edges)])
    inputs = list(inputs or ["train"])
    if len(inputs) == 1:
        inputs *= len(stores)
    if len(inputs) != len(stores):
        raise ValueError(f"Expected one --input for all stores or one per store. "
                         f"Got {len(inputs)} for {len(stores)} stores instead.")
    targets = [cache_bench.Target(s, i) for s, i in zip(stores, inputs)]
    return cache_bench.run(targets, fanouts, batch_size, epochs,
                           tuple(budgets or cache_bench.BUDGETS), window, seed, max_batches)


@dataclass(frozen=True)
class PreprocessOptions:
    """What ``bench preprocess`` asks of :mod:`benchmarks.preprocess_bench`."""

    workdir: str
    edges: int
    nodes: int
    memory: int = 640 << 20
    memcap: str | None = None
    repeat: int = 3
    scipy: bool = True
    feature_rows: int | None = None
    feature_dim: int = 128


def _preprocess_cli(kind: str, argv: list[str], o: PreprocessOptions) -> dict:
    """Run ``python -m benchmarks.preprocess_bench KIND ...`` in this process; its JSON."""
    from . import preprocess_bench as pb

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, f"{kind}.json")
        argv = [kind, "--workdir", o.workdir, "--memory", str(o.memory), "--repeat",
                str(o.repeat), "--json", out] + argv + (["--memcap", o.memcap] if o.memcap else [])
        try:
            rc = pb.main(argv)
        except SystemExit as e:  # argparse refused the options
            return {"error": f"preprocess_bench {' '.join(argv)}: exit {e.code}"}
        except Exception as e:  # noqa: BLE001  (report the failure beside the other results)
            log.exception("preprocess %s benchmark failed", kind)
            return {"error": f"{type(e).__name__}: {e}"}
        if rc != 0 or not os.path.exists(out):
            return {"error": f"preprocess_bench {kind} exited {rc}"}
        with open(out) as f:
            return json.load(f)


def run_preprocess(o: PreprocessOptions) -> dict:
    """:mod:`benchmarks.preprocess_bench`'s edges (and features, with ``feature_rows``) runs."""
    o = replace(o, workdir=os.path.abspath(o.workdir))  # its children run in the repo root
    res = {"edges": _preprocess_cli("edges", ["--edges", str(o.edges), "--nodes", str(o.nodes)]
                                    + (["--scipy"] if o.scipy else []), o)}
    if o.feature_rows:
        try:
            import preprocess.features  # noqa: F401
        except ImportError as e:
            res["features"] = {"error": f"not available: {e}"}
        else:
            res["features"] = _preprocess_cli("features", ["--rows", str(o.feature_rows),
                                                           "--dim", str(o.feature_dim)], o)
    return {"benchmark": "preprocess", "machine": machine_info(o.workdir), "options": asdict(o),
            "results": res}


def _only_device(rep: dict | None) -> dict | None:
    """The limits of a ``device`` report (measured on the workdir's file system)."""
    return next(iter(rep["results"].values())) if rep else None


# -- output ------------------------------------------------------------------------------------
def emit(report: dict, outdir: str, plot: bool, name: str | None = None) -> dict:
    """Write ``<name>.json`` and ``<name>.md`` (and the charts) into ``outdir``; print the table."""
    name = name or report["benchmark"]
    os.makedirs(outdir, exist_ok=True)
    md = render.markdown(report)
    files = {"json": write_json(report, os.path.join(outdir, f"{name}.json"))}
    with open(os.path.join(outdir, f"{name}.md"), "w") as f:
        f.write(md + "\n")
    files["md"] = os.path.join(outdir, f"{name}.md")
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
            if part == "device":
                rep = run_device(workdir, seconds=max(sz.device_seconds, 0.5),
                                 size_mib=sz.probe_mib)
            elif part == "gather":
                rep = run_gather(workdir, sz.gather_rows, trials=trials,
                                 device_seconds=sz.device_seconds, batches=sz.gather_batches,
                                 threads=sz.thread_counts, zarr_batch=sz.zarr_batch,
                                 thread_batch=sz.thread_batch,
                                 device=_only_device(reports.get("device")))
            elif part == "sample":
                rep = run_sample(workdir, sz.nodes, sz.edges, trials=trials,
                                 batch_size=sz.sample_batch_size, batches=sz.sample_batches)
            elif part == "loader":
                rep = run_loader(loader_args(
                    workdir=workdir, nodes=sz.nodes, edges=sz.edges, batches=sz.loader_batches,
                    seconds=sz.loader_seconds, parts="loader,dgl,ooc",
                    batch_size=sz.sample_batch_size, memcap=ooc_memcap(sz.nodes)))
            elif part == "cache":
                rep = run_cache(workdir, sz.nodes, sz.edges, batch_size=sz.sample_batch_size,
                                max_batches=sz.cache_batches)
            elif part == "preprocess":
                rep = run_preprocess(PreprocessOptions(
                    workdir=os.path.join(workdir, "preprocess"), edges=sz.prep_edges,
                    nodes=sz.prep_nodes, repeat=trials,
                    memory=max(64 << 20, sz.prep_edges * 16 // 4)))
            else:
                raise ValueError(f"Expected parts among {PARTS}. Got {part!r} instead.")
        except Exception as e:  # noqa: BLE001  (one failing part must not hide the others)
            log.exception("bench all: %s failed", part)
            errors[part] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
            continue
        finally:
            timings[part] = time.perf_counter() - t
        reports[part] = rep
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
    md = _all_markdown(summary)
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


def _all_markdown(s: dict) -> str:
    o = s["options"]
    out = [f"# featurestore bench all --scale {o['scale']}" + (" (quick)" if o["quick"] else ""),
           "", render.machine_line(s["machine"]), "",
           f"Total {s['seconds']:.0f} s: " + ", ".join(f"{k} {v:.0f} s"
                                                       for k, v in s["part_seconds"].items()),
           "", "## Ours against each peer, measured in the same run", "",
           render.peer_table(s["peer_ratios"]) if s["peer_ratios"] else "(no peer measured)"]
    titles = {"device": "Device limits", "gather": "Row gathers", "sample": "Neighbour sampling",
              "loader": "Loaders", "preprocess": "Preprocessing",
              "cache": "Feature-cache policies (replayed on sampled epochs)"}
    for part, rep in s["reports"].items():
        out += ["", f"## {titles.get(part, part)}", "", render.markdown(rep)]
    for part, err in s["errors"].items():
        out += ["", f"## {titles.get(part, part)}: failed", "", "```", err, "```"]
    if s["charts"]:
        out += ["", "## Charts", ""] + [f"![{c}]({c})" for c in s["charts"]]
    return "\n".join(out) + "\n"
