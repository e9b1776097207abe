"""What the benchmarks run on: the synthetic stores, seed batches and the outside tools.

One data factory, :func:`synthetic_store`, writes the power-law graph of
:func:`loaders.datasets.synthetic.power_law_store` with the row layout of a benchmark (MAG240M's
fp16 x 768, papers100M's fp32 x 128) and reuses it when it is already there. The tools a
benchmark runs in a child process are found here: ``memcap`` (:func:`memcap_command`) and
the DGL environment's interpreter (:func:`run_dgl_peer`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time

import numpy as np

import featurestore as fs

from benchmarks.report import MissingDependencyError

log = logging.getLogger(__name__)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = {"fp16x768": (np.float16, 768), "fp32x128": (np.float32, 128)}


def synthetic_store(workdir: str, nodes: int, edges: int, layout: str = "fp32x128",
                    seed: int = 0) -> str:
    """A power-law graph store with ``layout`` features, 64 classes, 10% train (reused)."""
    dtype, dim = LAYOUTS[layout]
    path = os.path.join(workdir, f"pl-{nodes}-{edges}-{layout}")
    try:
        with fs.open_store(path) as s:
            if s.num_edges() == edges and s.features().shape == (nodes, dim):
                return path
    except fs.FeatureStoreError:
        pass
    from loaders.datasets.synthetic import power_law_store

    log.info("writing %s: %d nodes, %d edges, %s", path, nodes, edges, layout)
    t = time.perf_counter()
    os.makedirs(workdir, exist_ok=True)
    power_law_store(path, num_nodes=nodes, num_edges=edges, feat_dim=dim, dtype=dtype,
                    num_classes=64, train_frac=0.1, seed=seed, mode="w")
    log.info("wrote %s in %.1f s", path, time.perf_counter() - t)
    return path


def seed_batches(store, batch_size: int, count: int, seed: int = 0,
                 ntype: str | None = None) -> list[np.ndarray]:
    """``count`` batches of seeds from the ``train`` split (all nodes without one), shuffled
    epoch after epoch."""
    try:
        pool = np.asarray(store.split("train", ntype), dtype=np.int64)
    except (fs.FeatureStoreError, KeyError):
        pool = np.arange(store.num_nodes(ntype), dtype=np.int64)
    rng = np.random.default_rng(seed)
    need = batch_size * count
    perm = np.concatenate([rng.permutation(pool) for _ in range(-(-need // max(1, pool.size)))])
    return [perm[i * batch_size:(i + 1) * batch_size] for i in range(count)]


def files_under(root: str):
    """Every file below ``root``."""
    for d, _, names in os.walk(root):
        for nm in names:
            yield os.path.join(d, nm)


def memcap_command(size: str, explicit: str | None = None) -> list[str]:
    """``[memcap, SIZE, "--"]``: the tool from ``explicit``, ``$FEATURESTORE_MEMCAP`` or PATH."""
    tool = explicit or os.environ.get("FEATURESTORE_MEMCAP") or shutil.which("memcap")
    if not tool or not os.access(tool, os.X_OK):
        raise MissingDependencyError(
            f"Expected the memcap tool (runs a process in a memory cgroup) to cap a benchmark at "
            f"{size}. Got {tool or 'nothing'} instead: pass --memcap-bin PATH, set "
            f"FEATURESTORE_MEMCAP or put memcap on PATH.")
    return [tool, size, "--"]


def child_env() -> dict:
    """The environment of a child benchmark process: this checkout first on PYTHONPATH."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


def dgl_python() -> str | None:
    """The DGL environment's interpreter (``.venv-dgl``), when it exists."""
    py = os.path.join(ROOT, ".venv-dgl", "bin", "python")
    return py if os.path.exists(py) else None


def run_dgl_peer(path: str, fanouts, batch_size: int, modes, batches: int,
                 seconds: float = 1e9, warmup: int = 2, timeout: float = 900) -> dict:
    """``benchmarks/peers/dgl_peer.py`` on the store at ``path`` in DGL's environment: its
    JSON report, or ``{"skipped": why}`` / ``{"error": why}``."""
    py = dgl_python()
    if py is None:
        return {"skipped": "no .venv-dgl (scripts/dgl-env.sh builds it)"}
    cmd = [py, os.path.join(ROOT, "benchmarks", "peers", "dgl_peer.py"), path,
           "--fanouts", ",".join(map(str, fanouts)), "--batch-size", str(batch_size),
           "--modes", ",".join(modes), "--batches", str(batches), "--seconds", str(seconds),
           "--warmup", str(warmup)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"error": f"rc={p.returncode}: {p.stderr.strip()[-800:]}"}


def run_child(cmd: list[str], cap: list[str] | None = None) -> tuple[dict, str]:
    """Run ``python -m ...`` (``cmd`` after the interpreter) under ``cap``; the JSON of its last
    ``RESULT`` line (``{"error": ...}`` on failure) and memcap's report line."""
    p = subprocess.run((cap or []) + [sys.executable] + cmd, capture_output=True, text=True,
                       cwd=ROOT, env=child_env())
    out: dict = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            out = json.loads(line[7:])
    memcap = next((ln for ln in p.stderr.splitlines() if ln.startswith("memcap:")), "")
    if p.returncode != 0:
        out["error"] = f"rc={p.returncode}: {p.stderr.strip()[-800:]}"
    return out, memcap
