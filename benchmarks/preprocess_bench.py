"""Preprocessing throughput and memory: COO to CSC and feature chunking, out of core.

Generates its inputs (streamed to disk, never held in RAM), runs each conversion in a child
process (optionally under ``../shared/tools/memcap``) and reports edges/s, GB/s and peak
anonymous memory. ``edges --scipy`` also runs scipy's in-memory
``coo_matrix((data, (row, col))).tocsc()`` on the same edges, alternating with ours, and
prints the ratios of the medians::

    python -m benchmarks.preprocess_bench edges --edges 100M --nodes 10M --memory 640MiB --scipy
    python -m benchmarks.preprocess_bench edges --edges 400M --nodes 50M --memory 700MiB --memcap 1G
    python -m benchmarks.preprocess_bench features --rows 16M --dim 128 --memory 512MiB --memcap 1G
    python -m benchmarks.preprocess_bench edges --edges 1M --nodes 100k --scipy --repeat 1  # quick

Our side reads the edge list from a memory-mapped ``.npy`` and writes a store, so its time
includes the input passes and the output; scipy's time covers the conversion of arrays
already in memory (loading them is not timed), and its data array is one byte per edge (its
smallest footprint). Both coalesce (scipy's ``tocsc`` sums duplicates) and sort neighbours.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks.device import evict

DEFAULT_WORKDIR = "/work/bigdata/preprocess"
MEMCAP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                      "shared", "tools", "memcap")
_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9}


def count(text: str) -> int:
    """``"100M"`` -> 100_000_000 (decimal suffixes K, M, G/B)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGB]?)\s*", str(text), re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a count such as 400M, got {text!r}")
    return int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])


# -- inputs ------------------------------------------------------------------------------
def generate_edges(path: str, num_edges: int, num_nodes: int, seed: int = 0,
                   block: int = 1 << 24) -> str:
    """An int64 ``[2, E]`` ``.npy`` of uniform random edges, written block by block."""
    if os.path.exists(path):
        a = np.load(path, mmap_mode="r")
        if a.shape == (2, num_edges):
            return path
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".partial"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.int64, shape=(2, num_edges))
    rng = np.random.default_rng(seed)
    for lo in range(0, num_edges, block):
        k = min(block, num_edges - lo)
        out[0, lo:lo + k] = rng.integers(0, num_nodes, k)
        out[1, lo:lo + k] = rng.integers(0, num_nodes, k)
        out.flush()
        evict(tmp)  # generating big inputs must not fill the page cache
    del out
    os.replace(tmp, path)
    return path


def generate_features(path: str, rows: int, dim: int, seed: int = 0,
                      block_bytes: int = 64 << 20) -> str:
    """A float32 ``[rows, dim]`` ``.npy`` of random values, written block by block."""
    if os.path.exists(path):
        a = np.load(path, mmap_mode="r")
        if a.shape == (rows, dim) and a.dtype == np.float32:
            return path
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".partial"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(rows, dim))
    rng = np.random.default_rng(seed)
    step = max(1, block_bytes // (dim * 4))
    for lo in range(0, rows, step):
        k = min(step, rows - lo)
        out[lo:lo + k] = rng.standard_normal((k, dim), dtype=np.float32)
        out.flush()
        evict(tmp)  # generating big inputs must not fill the page cache
    del out
    os.replace(tmp, path)
    return path


# -- children: one measurement each, a JSON line on stdout -------------------------------
def child_ours_edges(args) -> dict:
    import featurestore as fs
    from preprocess import build_csc, from_npy

    src = from_npy(args.input)
    n = args.nodes
    shutil.rmtree(args.store, ignore_errors=True)
    w = fs.create_store(args.store, mode="w")
    w.add_node_type("node", n)
    stats = build_csc(w, ("node", "to", "node"), src, num_src=n, num_dst=n, coalesce=True,
                      budget_bytes=args.memory, tmpdir=args.store + ".tmp",
                      progress=False)
    w.commit()
    return {"seconds": stats["seconds"], "edges": stats["edges_in"],
            "edges_out": stats["edges_out"], "gb_read": stats["bytes_read"] / 1e9,
            "passes": stats["passes"], "ranges": stats["ranges"],
            "peak_anon": stats["peak_anon_bytes"],
            "phases": {k: stats.get(k) for k in ("histogram_seconds", "spill_seconds", "partition_seconds",
                                             "finish_seconds", "write_seconds")}}


def child_scipy(args) -> dict:
    import scipy.sparse as sp

    from preprocess.memory import PeakMemory

    with PeakMemory() as mem:
        a = np.load(args.input)  # into RAM: scipy works in memory
        n = args.nodes
        data = np.ones(a.shape[1], np.int8)
        t = time.perf_counter()
        m = sp.coo_matrix((data, (a[0], a[1])), shape=(n, n)).tocsc()
        dt = time.perf_counter() - t
        nnz = int(m.nnz)
        del m
    return {"seconds": dt, "edges": int(a.shape[1]), "edges_out": nnz,
            "gb_read": a.nbytes / 1e9, "peak_anon": mem.peak}


def child_ours_features(args) -> dict:
    import featurestore as fs
    from preprocess.features import FeatureSource, write_features

    shutil.rmtree(args.store, ignore_errors=True)
    feat = FeatureSource.from_npy(args.input)
    perm = np.load(args.perm, mmap_mode="r") if args.perm else None
    w = fs.create_store(args.store, mode="w")
    w.add_node_type("node", feat.num_rows)
    stats = write_features(w, "node", "feat", feat, dtype=np.float16, perm=perm,
                           budget_bytes=args.memory, tmpdir=args.store + ".tmp",
                           progress=False)
    w.commit()
    return {"seconds": stats["seconds"], "rows": feat.num_rows,
            "gb_read": stats["bytes_read"] / 1e9, "gb_written": stats["bytes_written"] / 1e9,
            "peak_anon": stats["peak_anon_bytes"]}


CHILDREN = {"ours-edges": child_ours_edges, "scipy": child_scipy,
            "ours-features": child_ours_features}


def run_child(kind: str, args, memcap: str | None) -> dict:
    """Run one measurement in a fresh interpreter (under memcap when asked)."""
    cmd = [sys.executable, "-m", "benchmarks.preprocess_bench", "_child", kind,
           "--input", args.input, "--store", args.store, "--nodes", str(args.nodes),
           "--memory", str(args.memory)]
    if getattr(args, "perm", None):
        cmd += ["--perm", args.perm]
    if memcap:
        cmd = [MEMCAP, memcap, "--"] + cmd
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env)
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            res = json.loads(line)
    cap = re.search(r"memcap: .*", p.stderr)
    if res is None or p.returncode != 0:
        raise RuntimeError(f"{kind} failed (rc={p.returncode}): {p.stderr[-3000:]}")
    res["kind"] = kind
    if cap:
        res["memcap"] = cap.group(0)
        m = re.search(r"peak_anon=([\d.]+)GiB", cap.group(0))
        if m:
            res["memcap_peak_anon"] = float(m.group(1)) * (1 << 30)
    return res


def verify_sample(store_path: str, input_path: str, samples: int = 500, seed: int = 0) -> int:
    """Check the CSC of ``samples`` random destinations against a streaming scan of the input
    (sorted, deduplicated sources); returns the number of edges checked."""
    import featurestore as fs

    st = fs.open_store(store_path)
    indptr, indices = st.csc()
    n = indptr.shape[0] - 1
    rng = np.random.default_rng(seed)
    want_d = np.unique(rng.integers(0, n, samples))
    a = np.load(input_path, mmap_mode="r")
    found_s, found_d = [], []
    step = 1 << 24
    for lo in range(0, a.shape[1], step):
        d = np.asarray(a[1, lo:lo + step])
        m = np.isin(d, want_d)
        found_s.append(np.asarray(a[0, lo:lo + step])[m])
        found_d.append(d[m])
    s = np.concatenate(found_s)
    d = np.concatenate(found_d)
    pairs = np.unique(np.stack([d, s]), axis=1)
    checked = 0
    for v in want_d:
        got = np.asarray(indices[indptr[v]:indptr[v + 1]])
        exp = pairs[1][pairs[0] == v]
        if not np.array_equal(got, exp):
            raise AssertionError(f"destination {v}: store has {got[:10]}..., input {exp[:10]}...")
        checked += exp.shape[0]
    if int(indptr[-1]) != indices.shape[0] or np.any(np.diff(np.asarray(indptr[::max(1, n // 4096)])) < 0):
        raise AssertionError("indptr is inconsistent")
    st.close()
    return checked


def verify_features(store_path: str, input_path: str, perm_path: str | None,
                    samples: int = 2000, seed: int = 0) -> None:
    """Random rows of the store's feature against the input (through the permutation)."""
    import featurestore as fs

    st = fs.open_store(store_path)
    f = st.features("node", "feat")
    x = np.load(input_path, mmap_mode="r")
    rows = np.sort(np.random.default_rng(seed).integers(0, f.shape[0], samples))
    src = rows if perm_path is None else np.asarray(np.load(perm_path, mmap_mode="r")[rows])
    got = f.gather(rows)
    want = np.asarray(x[src]).astype(np.float16)
    if not np.array_equal(got, want):
        raise AssertionError("feature rows differ from the input")
    st.close()


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def bench_edges(args) -> dict:
    from preprocess.memory import format_size

    args.input = generate_edges(os.path.join(args.workdir, f"edges-{args.edges}-{args.nodes}.npy"),
                                args.edges, args.nodes, args.seed)
    args.store = os.path.join(args.workdir, "csc-store")
    gb = args.edges * 16 / 1e9
    print(f"edge list: {args.input} ({args.edges:,} edges, {gb:.2f} GB int64 COO, "
          f"{args.nodes:,} nodes); budget {format_size(args.memory)}"
          + (f"; memcap {args.memcap}" if args.memcap else ""))
    ours, theirs = [], []
    for i in range(args.repeat):
        if args.cold:
            evict(args.input)
        ours.append(run_child("ours-edges", args, args.memcap))
        r = ours[-1]
        print(f"  ours  #{i}: {r['seconds']:.2f} s, {r['edges'] / r['seconds'] / 1e6:.2f}M edges/s, "
              f"{r['gb_read'] / r['seconds']:.2f} GB/s over {r['passes']} passes "
              f"({r['ranges']} ranges), peak "
              f"{format_size(r['peak_anon'])} {r.get('memcap', '')} {r['phases']}", flush=True)
        if args.scipy:
            theirs.append(run_child("scipy", args, None))
            r = theirs[-1]
            print(f"  scipy #{i}: {r['seconds']:.2f} s, {r['edges'] / r['seconds'] / 1e6:.2f}M "
                  f"edges/s, peak {format_size(r['peak_anon'])}", flush=True)
    if args.verify:
        checked = verify_sample(args.store, args.input)
        print(f"verified: {checked} edges of 500 random destinations match a scan of the input")
    shutil.rmtree(args.store, ignore_errors=True)
    out = {"bench": "edges", "edges": args.edges, "nodes": args.nodes, "budget": args.memory,
           "memcap": args.memcap, "ours": ours, "scipy": theirs}
    t = _median(ours, "seconds")
    pk = max(r.get("memcap_peak_anon", r["peak_anon"]) for r in ours)
    print(f"ours:  median {t:.2f} s = {args.edges / t / 1e6:.2f}M edges/s, "
          f"{_median(ours, 'gb_read') / t:.2f} GB/s read, peak anon {format_size(pk)}")
    out.update(ours_edges_per_s=args.edges / t, ours_peak_anon=pk)
    if theirs:
        ts = _median(theirs, "seconds")
        pks = statistics.median(r["peak_anon"] for r in theirs)
        print(f"scipy: median {ts:.2f} s = {args.edges / ts / 1e6:.2f}M edges/s, "
              f"peak anon {format_size(pks)}")
        print(f"ratio: speed ours/scipy = {ts / t:.2f}x, memory ours/scipy = {pk / pks:.3f}")
        out.update(scipy_edges_per_s=args.edges / ts, scipy_peak_anon=pks,
                   speed_ratio=ts / t, memory_ratio=pk / pks)
    return out


def bench_features(args) -> dict:
    from preprocess.memory import format_size

    args.input = generate_features(
        os.path.join(args.workdir, f"feat-{args.rows}x{args.dim}.npy"), args.rows, args.dim,
        args.seed)
    args.store = os.path.join(args.workdir, "feat-store")
    args.nodes = args.rows
    args.perm = None
    if args.permute:  # a random permutation, as renumbering or reordering would apply
        args.perm = os.path.join(args.workdir, f"perm-{args.rows}.npy")
        np.save(args.perm, np.random.default_rng(args.seed).permutation(args.rows))
    gb = args.rows * args.dim * 4 / 1e9
    print(f"features: {args.input} ({args.rows:,} x {args.dim} fp32 = {gb:.2f} GB) -> fp16"
          f"{', permuted' if args.perm else ''}; "
          f"budget {format_size(args.memory)}" + (f"; memcap {args.memcap}" if args.memcap else ""))
    runs = []
    for i in range(args.repeat):
        if args.cold:
            evict(args.input)
        r = run_child("ours-features", args, args.memcap)
        runs.append(r)
        print(f"  #{i}: {r['seconds']:.2f} s, {r['gb_read'] / r['seconds']:.2f} GB/s read, "
              f"{r['rows'] / r['seconds'] / 1e6:.2f}M rows/s, peak {format_size(r['peak_anon'])} "
              f"{r.get('memcap', '')}", flush=True)
    if args.verify:
        verify_features(args.store, args.input, args.perm)
        print("verified: 2000 random rows equal the input cast to fp16")
    shutil.rmtree(args.store, ignore_errors=True)
    if args.perm:
        os.remove(args.perm)
    t = _median(runs, "seconds")
    pk = max(r.get("memcap_peak_anon", r["peak_anon"]) for r in runs)
    print(f"median {t:.2f} s = {gb / t:.2f} GB/s read, peak anon {format_size(pk)}")
    return {"bench": "features", "rows": args.rows, "dim": args.dim, "budget": args.memory,
            "memcap": args.memcap, "runs": runs, "gb_per_s": gb / t, "peak_anon": pk}


def main(argv: list[str] | None = None) -> int:
    from preprocess.memory import parse_size

    p = argparse.ArgumentParser(prog="python -m benchmarks.preprocess_bench",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{edges,features}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workdir", default=DEFAULT_WORKDIR, help="where inputs and stores go")
    common.add_argument("--memory", type=parse_size, default=parse_size("640MiB"),
                        help="the job's memory budget")
    common.add_argument("--memcap", default=None, help="run our side under memcap SIZE (e.g. 1G)")
    common.add_argument("--repeat", type=int, default=3)
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--json", default=None, help="write the results here")
    common.add_argument("--cold", action="store_true",
                        help="evict the input from the page cache before each of our runs")
    common.add_argument("--delete-inputs", action="store_true",
                        help="remove the generated input afterwards")
    e = sub.add_parser("edges", parents=[common], help="COO to CSC (optionally vs scipy)")
    e.add_argument("--edges", type=count, default=count("100M"))
    e.add_argument("--nodes", type=count, default=count("10M"))
    e.add_argument("--scipy", action="store_true", help="also run scipy's tocsc, alternating")
    e.add_argument("--verify", action="store_true",
                   help="check 500 random destinations of the result against a scan of the input")
    f = sub.add_parser("features", parents=[common], help="fp32 .npy to fp16 store features")
    f.add_argument("--rows", type=count, default=count("16M"))
    f.add_argument("--dim", type=int, default=128)
    f.add_argument("--permute", action="store_true",
                   help="apply a random row permutation (the external bucket permutation)")
    f.add_argument("--verify", action="store_true", help="check 2000 random rows afterwards")
    c = sub.add_parser("_child", help=argparse.SUPPRESS)
    c.add_argument("kind", choices=sorted(CHILDREN))
    c.add_argument("--input")
    c.add_argument("--store")
    c.add_argument("--nodes", type=int)
    c.add_argument("--memory", type=int)
    c.add_argument("--perm", default=None)
    args = p.parse_args(argv)
    if args.cmd == "_child":
        print(json.dumps(CHILDREN[args.kind](args)))
        return 0
    res = bench_edges(args) if args.cmd == "edges" else bench_features(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)
    if args.delete_inputs:
        os.remove(args.input)
    return 0


if __name__ == "__main__":
    sys.exit(main())
