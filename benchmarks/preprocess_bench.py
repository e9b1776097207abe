"""``bench preprocess``: COO to CSC (against scipy) and feature chunking, out of core.

Generates its inputs (streamed to disk, never held in RAM), runs each conversion in a child
process (under ``memcap`` with ``--memcap SIZE``) and reports edges/s, GB/s and peak anonymous
memory; scipy's in-memory ``tocsc`` runs on the same edges, alternating with ours (its time
excludes loading the arrays). ``--verify`` checks results against a scan of the inputs::

    featurestore bench preprocess --edges 400M --nodes 50M --memory 700MiB --memcap 1G --verify
    featurestore bench preprocess --parts features --feature-rows 16M --memcap 1G --permute
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from featurestore.device import evict
from preprocess.steps.memory import format_size, parse_size

from benchmarks.options import opt
from benchmarks.report import MissingDependencyError, machine_info
from benchmarks.workload import memcap_command, run_child

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreprocessOptions:
    """COO to CSC (vs scipy) and feature chunking: edges/s, GB/s, memory."""

    workdir: str = opt("bench-data/preprocess", "where inputs and stores go")
    parts: str = opt("edges,features", "comma-separated among edges, features")
    edges: int = opt(16_000_000, "edges of the COO input", size="prep_edges")
    nodes: int = opt(1_110_000, "nodes of the COO input", size="prep_nodes")
    memory: int | None = opt(None, "the job's memory budget (default: a quarter of the COO)",
                             type=parse_size)
    memcap: str | None = opt(None, "run ours under memcap SIZE (e.g. 1G)")
    memcap_bin: str | None = opt(None, "the memcap tool (default: $FEATURESTORE_MEMCAP, PATH)")
    repeat: int = opt(3, "runs of each conversion", flag="--trials", size="trials")
    scipy: bool = opt(True, "also run scipy's tocsc on the same edges, alternating")
    feature_rows: int | None = opt(None, "also convert this many fp32 rows to an fp16 store")
    feature_dim: int = opt(128, "columns of the feature input")
    permute: bool = opt(False, "apply a random row permutation to the features")
    verify: bool = opt(False, "check the results against a scan of the inputs")
    cold: bool = opt(False, "evict the input from the page cache before each of our runs")
    delete_inputs: bool = opt(False, "remove the generated inputs afterwards")
    seed: int = opt(0, "seed of the generated inputs")

    @property
    def budget(self) -> int:
        """The job's memory budget, bytes."""
        return self.memory or max(64 << 20, self.edges * 16 // 4)


# -- inputs ------------------------------------------------------------------------------
def _generate(path: str, shape: tuple[int, int], dtype, fill, n: int, block: int) -> str:
    """A ``.npy`` of ``shape`` written by ``fill(out, lo, hi)`` for blocks of ``range(n)``."""
    if os.path.exists(path):
        a = np.load(path, mmap_mode="r")
        if a.shape == shape and a.dtype == dtype:
            return path
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".partial"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
    for lo in range(0, n, block):
        fill(out, lo, min(n, lo + block))
        out.flush()
        evict(tmp)  # generating big inputs must not fill the page cache
    del out
    os.replace(tmp, path)
    return path


def generate_edges(path: str, num_edges: int, num_nodes: int, seed: int = 0) -> str:
    """An int64 ``[2, E]`` ``.npy`` of uniform random edges, written block by block."""
    rng = np.random.default_rng(seed)

    def fill(out, lo, hi):
        out[0, lo:hi] = rng.integers(0, num_nodes, hi - lo)
        out[1, lo:hi] = rng.integers(0, num_nodes, hi - lo)

    return _generate(path, (2, num_edges), np.int64, fill, num_edges, 1 << 24)


def generate_features(path: str, rows: int, dim: int, seed: int = 0) -> str:
    """A float32 ``[rows, dim]`` ``.npy`` of random values, written block by block."""
    rng = np.random.default_rng(seed)

    def fill(out, lo, hi):
        out[lo:hi] = rng.standard_normal((hi - lo, dim), dtype=np.float32)

    return _generate(path, (rows, dim), np.float32, fill, rows, max(1, (64 << 20) // (dim * 4)))


# -- children: one measurement each, a RESULT line on stdout ----------------------------
def child_ours_edges(inp: str, store: str, nodes: int, memory: int, perm=None) -> dict:
    """Our out-of-core COO -> CSC of ``inp`` into a new store."""
    import featurestore as fs
    from preprocess import build_csc, from_npy

    shutil.rmtree(store, ignore_errors=True)
    w = fs.create_store(store, mode="w")
    w.add_node_type("node", nodes)
    stats = build_csc(w, ("node", "to", "node"), from_npy(inp), num_src=nodes, num_dst=nodes,
                      coalesce=True, budget_bytes=memory, tmpdir=store + ".tmp", progress=False)
    w.commit()
    return {"seconds": stats["seconds"], "edges": stats["edges_in"],
            "edges_out": stats["edges_out"], "gb_read": stats["bytes_read"] / 1e9,
            "passes": stats["passes"], "ranges": stats["ranges"],
            "peak_anon": stats["peak_anon_bytes"],
            "phases": {k: stats.get(k) for k in ("histogram_seconds", "spill_seconds",
                                                 "partition_seconds", "finish_seconds",
                                                 "write_seconds")}}


def child_scipy(inp: str, store: str, nodes: int, memory: int, perm=None) -> dict:
    """The peer: scipy's in-memory ``coo_matrix(...).tocsc()`` of the same edges."""
    import scipy.sparse as sp

    from preprocess.steps.memory import PeakMemory

    with PeakMemory() as mem:
        a = np.load(inp)  # into RAM: scipy works in memory
        data = np.ones(a.shape[1], np.int8)
        t = time.perf_counter()
        m = sp.coo_matrix((data, (a[0], a[1])), shape=(nodes, nodes)).tocsc()
        dt = time.perf_counter() - t
        nnz = int(m.nnz)
        del m
    return {"seconds": dt, "edges": int(a.shape[1]), "edges_out": nnz,
            "gb_read": a.nbytes / 1e9, "peak_anon": mem.peak}


def child_ours_features(inp: str, store: str, nodes: int, memory: int, perm=None) -> dict:
    """Our fp32 ``.npy`` -> fp16 store features (through ``perm`` when given)."""
    import featurestore as fs
    from preprocess.steps.features import FeatureSource, write_features

    shutil.rmtree(store, ignore_errors=True)
    feat = FeatureSource.from_npy(inp)
    w = fs.create_store(store, mode="w")
    w.add_node_type("node", feat.num_rows)
    stats = write_features(w, "node", "feat", feat, dtype=np.float16,
                           perm=np.load(perm, mmap_mode="r") if perm else None,
                           budget_bytes=memory, tmpdir=store + ".tmp", progress=False)
    w.commit()
    return {"seconds": stats["seconds"], "rows": feat.num_rows,
            "gb_read": stats["bytes_read"] / 1e9, "gb_written": stats["bytes_written"] / 1e9,
            "peak_anon": stats["peak_anon_bytes"]}


CHILDREN = {"ours-edges": child_ours_edges, "scipy": child_scipy,
            "ours-features": child_ours_features}


def _child(kind: str, o: PreprocessOptions, inp: str, store: str, nodes: int,
           perm: str | None = None, ours: bool = True) -> dict:
    """Run one measurement in a fresh interpreter; ours under memcap with ``o.memcap``, after
    evicting the input with ``o.cold``."""
    if ours and o.cold:
        evict(inp)
    cap = memcap_command(o.memcap, o.memcap_bin) if o.memcap and ours else None
    res, memcap = run_child(["-m", "benchmarks.preprocess_bench", kind, inp, store, str(nodes),
                             str(o.budget)] + ([perm] if perm else []), cap)
    if "error" in res:
        raise RuntimeError(f"{kind} failed ({res['error']})")
    res["kind"] = kind
    if memcap:
        res["memcap"] = memcap
        m = re.search(r"peak_anon=([\d.]+)GiB", memcap)
        if m:
            res["memcap_peak_anon"] = float(m.group(1)) * (1 << 30)
    log.info("%s: %.2f s %s", kind, res["seconds"], memcap)
    return res


def verify_sample(store_path: str, input_path: str, samples: int = 500, seed: int = 0) -> int:
    """Check the CSC of ``samples`` random destinations against a streaming scan of the input
    (sorted, deduplicated sources); returns the number of edges checked."""
    import featurestore as fs

    with fs.open_store(store_path) as st:
        indptr, indices = st.csc()
        n = indptr.shape[0] - 1
        want_d = np.unique(np.random.default_rng(seed).integers(0, n, samples))
        a = np.load(input_path, mmap_mode="r")
        found_s, found_d = [], []
        for lo in range(0, a.shape[1], 1 << 24):
            d = np.asarray(a[1, lo:lo + (1 << 24)])
            m = np.isin(d, want_d)
            found_s.append(np.asarray(a[0, lo:lo + (1 << 24)])[m])
            found_d.append(d[m])
        pairs = np.unique(np.stack([np.concatenate(found_d), np.concatenate(found_s)]), axis=1)
        checked = 0
        for v in want_d:
            got = np.asarray(indices[indptr[v]:indptr[v + 1]])
            exp = pairs[1][pairs[0] == v]
            if not np.array_equal(got, exp):
                raise AssertionError(f"destination {v}: store has {got[:10]}..., input "
                                     f"{exp[:10]}...")
            checked += exp.shape[0]
        if int(indptr[-1]) != indices.shape[0] or np.any(
                np.diff(np.asarray(indptr[::max(1, n // 4096)])) < 0):
            raise AssertionError("indptr is inconsistent")
    return checked


def verify_features(store_path: str, input_path: str, perm_path: str | None,
                    samples: int = 2000, seed: int = 0) -> None:
    """Random rows of the store's feature against the input (through the permutation)."""
    import featurestore as fs

    with fs.open_store(store_path) as st:
        f = st.features("node", "feat")
        x = np.load(input_path, mmap_mode="r")
        rows = np.sort(np.random.default_rng(seed).integers(0, f.shape[0], samples))
        src = rows if perm_path is None else np.asarray(np.load(perm_path, mmap_mode="r")[rows])
        if not np.array_equal(f.gather(rows), np.asarray(x[src]).astype(np.float16)):
            raise AssertionError("feature rows differ from the input")


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _peak(runs: list[dict]) -> float:
    return max(r.get("memcap_peak_anon", r["peak_anon"]) for r in runs)


def bench_edges(o: PreprocessOptions) -> dict:
    """Ours (and scipy's, alternating) COO -> CSC, ``o.repeat`` times each."""
    inp = generate_edges(os.path.join(o.workdir, f"edges-{o.edges}-{o.nodes}.npy"), o.edges,
                         o.nodes, o.seed)
    store = os.path.join(o.workdir, "csc-store")
    log.info("edge list: %s (%s edges, %s nodes); budget %s", inp, f"{o.edges:,}",
             f"{o.nodes:,}", format_size(o.budget))
    ours, theirs = [], []
    for _ in range(o.repeat):
        ours.append(_child("ours-edges", o, inp, store, o.nodes))
        if o.scipy:
            theirs.append(_child("scipy", o, inp, store, o.nodes, ours=False))
    out = {"bench": "edges", "edges": o.edges, "nodes": o.nodes, "budget": o.budget,
           "memcap": o.memcap, "ours": ours, "scipy": theirs}
    if o.verify:
        out["verified_edges"] = verify_sample(store, inp)
    shutil.rmtree(store, ignore_errors=True)
    t, pk = _median(ours, "seconds"), _peak(ours)
    out.update(ours_edges_per_s=o.edges / t, ours_peak_anon=pk)
    if theirs:
        ts, pks = _median(theirs, "seconds"), _median(theirs, "peak_anon")
        out.update(scipy_edges_per_s=o.edges / ts, scipy_peak_anon=pks, speed_ratio=ts / t,
                   memory_ratio=pk / pks)
    if o.delete_inputs:
        os.remove(inp)
    return out


def bench_features(o: PreprocessOptions) -> dict:
    """Our fp32 -> fp16 feature conversion, ``o.repeat`` times."""
    rows, dim = o.feature_rows, o.feature_dim
    inp = generate_features(os.path.join(o.workdir, f"feat-{rows}x{dim}.npy"), rows, dim, o.seed)
    store, perm = os.path.join(o.workdir, "feat-store"), None
    if o.permute:  # a random permutation, as renumbering or reordering would apply
        perm = os.path.join(o.workdir, f"perm-{rows}.npy")
        np.save(perm, np.random.default_rng(o.seed).permutation(rows))
    runs = [_child("ours-features", o, inp, store, rows, perm) for _ in range(o.repeat)]
    out = {"bench": "features", "rows": rows, "dim": dim, "budget": o.budget,
           "memcap": o.memcap, "runs": runs,
           "gb_per_s": rows * dim * 4 / 1e9 / _median(runs, "seconds"), "peak_anon": _peak(runs)}
    if o.verify:
        verify_features(store, inp, perm)
        out["verified_rows"] = 2000
    shutil.rmtree(store, ignore_errors=True)
    for f in [perm] + ([inp] if o.delete_inputs else []):
        if f:
            os.remove(f)
    return out


def run(o: PreprocessOptions) -> dict:
    """The ``edges`` and (with ``feature_rows``) ``features`` parts; one failing part is
    recorded as ``{"error": ...}`` beside the other."""
    o = replace(o, workdir=os.path.abspath(o.workdir), memory=o.budget)  # children: repo root
    parts = {"edges": bench_edges, "features": bench_features}
    res = {}
    for name in o.parts.split(","):
        if name == "features" and not o.feature_rows:
            continue
        try:
            res[name] = parts[name](o)
        except (RuntimeError, MissingDependencyError, OSError, KeyError) as e:
            log.exception("preprocess %s benchmark failed", name)
            res[name] = {"error": f"{type(e).__name__}: {e}"}
    return {"benchmark": "preprocess", "machine": machine_info(o.workdir), "options": asdict(o),
            "results": res}


def main(argv: list[str] | None = None) -> int:
    """A child: ``KIND INPUT STORE NODES MEMORY [PERM]``; prints ``RESULT {json}``."""
    kind, inp, store, nodes, memory, *perm = argv if argv is not None else sys.argv[1:]
    res = CHILDREN[kind](inp, store, int(nodes), int(memory), perm[0] if perm else None)
    print("RESULT " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
