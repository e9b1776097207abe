"""Helpers of the DGL tests: tiny stores and a hand-made NumPy neighbour sampler.

The sampler here is deliberately naive (a Python loop per destination node) and independent of
``loaders.sample.sampler``: it builds :class:`MiniBatch` objects with PyG's hop/layer ordering so
the
DGL adapter is tested against a sampled graph we can check by hand.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch

import featurestore as fs
from featurestore import EdgeType


def import_dgl():
    """``dgl``, or a skip; a failure when ``FEATURESTORE_REQUIRE_DGL=1`` (set by the DGL run)."""
    from loaders.dgl import DGLNotInstalledError, require_dgl

    try:
        return require_dgl()
    except DGLNotInstalledError:
        if os.environ.get("FEATURESTORE_REQUIRE_DGL") == "1":
            raise  # fail loudly: this run must test DGL
        pytest.skip("DGL tests run in .venv-dgl (scripts/dgl-env.sh)", allow_module_level=True)


try:  # the real types once the sampler package provides them
    from loaders.sample.sampler import MiniBatch, SampledSubgraph
except ImportError:  # pragma: no cover - before loaders/sample/sampler.py landed
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class SampledSubgraph:  # same fields as loaders.sample.sampler.SampledSubgraph
        seed_type: str
        node: dict
        row: dict
        col: dict
        edge: dict
        num_sampled_nodes: dict
        num_sampled_edges: dict
        batch_size: int
        input_id: np.ndarray

    @dataclass
    class MiniBatch:
        subgraph: SampledSubgraph
        x: dict
        y: torch.Tensor | None
        device: torch.device


def csc_of(src: np.ndarray, dst: np.ndarray, num_dst: int):
    """(indptr, indices) of edges src->dst, sources sorted per destination."""
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, src[order].astype(np.int64)


def homo_store(path, rng, n=600, avg_deg=6, dim=8, num_classes=5):
    """A one-type store: ``node`` with ``feat`` (fp32), ``label`` and a ``train`` split."""
    m = n * avg_deg
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    indptr, indices = csc_of(src, dst, n)
    w = fs.create_store(path, mode="w")
    w.add_node_type("node", n)
    w.add_edge_type(("node", "to", "node"), indptr, indices)
    w.add_features("node", "feat", rng.standard_normal((n, dim)).astype(np.float32))
    w.add_labels("node", rng.integers(0, num_classes, n))
    w.add_split("train", "node", rng.choice(n, n // 2, replace=False))
    w.commit()
    return fs.open_store(path)


def hetero_store(path, rng, n_paper=500, n_author=300):
    """paper/author store with three relations, fp32 paper and fp16 author features."""
    w = fs.create_store(path, mode="w")
    w.add_node_type("paper", n_paper)
    w.add_node_type("author", n_author)
    s, d = rng.integers(0, n_paper, 4 * n_paper), rng.integers(0, n_paper, 4 * n_paper)
    w.add_edge_type(("paper", "cites", "paper"), *csc_of(s, d, n_paper))
    a, p = rng.integers(0, n_author, 3 * n_paper), rng.integers(0, n_paper, 3 * n_paper)
    w.add_edge_type(("author", "writes", "paper"), *csc_of(a, p, n_paper))
    w.add_edge_type(("paper", "rev_writes", "author"), *csc_of(p, a, n_author))
    w.add_features("paper", "feat", rng.standard_normal((n_paper, 6)).astype(np.float32))
    w.add_features("author", "feat", rng.standard_normal((n_author, 4)).astype(np.float16))
    w.add_labels("paper", rng.integers(0, 7, n_paper))
    w.add_split("train", "paper", np.arange(0, n_paper, 3))
    w.commit()
    return fs.open_store(path)


def sample(store, seed_type: str, seeds: np.ndarray, fanouts: list[int], rng) -> SampledSubgraph:
    """Uniform sampling without replacement, PyG's ordering (nodes by hop, edges by layer).

    At layer ``l`` every node first reached at hop ``l-1`` gets ``min(fanout, degree)`` distinct
    in-neighbours per edge type (all of them for fanout -1).
    """
    ets = store.edge_types
    csc = {et: store.csc(et) for et in ets}
    ntypes = store.node_types
    node = {nt: [] for nt in ntypes}
    local = {nt: {} for nt in ntypes}
    nsn = {nt: [0] * (len(fanouts) + 1) for nt in ntypes}
    row, col, edge = ({et: [] for et in ets} for _ in range(3))
    nse = {et: [0] * len(fanouts) for et in ets}

    def add(nt, gid, hop):
        if gid not in local[nt]:
            local[nt][gid] = len(node[nt])
            node[nt].append(gid)
            nsn[nt][hop] += 1
        return local[nt][gid]

    for s in seeds:
        add(seed_type, int(s), 0)
    frontier = {nt: list(node[nt]) for nt in ntypes}
    for layer, fanout in enumerate(fanouts, start=1):
        for et in ets:
            indptr, indices = csc[et]
            for v in frontier[et.dst]:
                lo, hi = int(indptr[v]), int(indptr[v + 1])
                k = hi - lo if fanout < 0 else min(fanout, hi - lo)
                for e in lo + rng.choice(hi - lo, k, replace=False):
                    u = add(et.src, int(indices[e]), layer)
                    row[et].append(u)
                    col[et].append(local[et.dst][v])
                    edge[et].append(int(e))
                    nse[et][layer - 1] += 1
        start = {nt: len(node[nt]) - nsn[nt][layer] for nt in ntypes}
        frontier = {nt: node[nt][start[nt]:] for nt in ntypes}
    arr = lambda a: np.asarray(a, dtype=np.int64)  # noqa: E731
    return SampledSubgraph(
        seed_type=seed_type, node={nt: arr(v) for nt, v in node.items()},
        row={et: arr(v) for et, v in row.items()}, col={et: arr(v) for et, v in col.items()},
        edge={et: arr(v) for et, v in edge.items()}, num_sampled_nodes=nsn,
        num_sampled_edges=nse, batch_size=len(seeds), input_id=np.arange(len(seeds)))


def minibatch(store, sub: SampledSubgraph, device="cpu") -> MiniBatch:
    """Features of every sampled node and labels of the seeds, read from the store."""
    x = {nt: torch.from_numpy(store.features(nt, "feat").gather(ids)).to(device)
         for nt, ids in sub.node.items() if "feat" in store.feature_names(nt)}
    seeds = sub.node[sub.seed_type][:sub.batch_size]
    y = torch.from_numpy(np.asarray(store.labels(sub.seed_type))[seeds].astype(np.int64)).to(device)
    return MiniBatch(subgraph=sub, x=x, y=y, device=torch.device(device))


__all__ = ["EdgeType", "MiniBatch", "SampledSubgraph", "csc_of", "homo_store", "hetero_store",
           "sample", "minibatch", "import_dgl", "patch_hunks", "unport", "unported_blob"]


def patch_hunks(patch: str) -> list[tuple[int, int, list[str], list[str]]]:
    """``(old start, new start, removed lines, added lines)`` of a ``diff -U0`` patch."""
    out = []
    for line in patch.splitlines(keepends=True)[2:]:
        m = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
        if m:
            out.append((int(m[1]), int(m[2]), [], []))
        else:
            out[-1][2 if line[0] == "-" else 3].append(line[1:])
    return out


def unport(body: list[str], hunks) -> list[str]:
    """The original of ``body``: each hunk's added lines back to its removed ones."""
    lines = list(body)
    for _, new, removed, added in reversed(hunks):
        at = new - 1 if added else new  # diff's start of an empty range is the line before
        assert lines[at: at + len(added)] == added
        lines[at: at + len(added)] = removed
    return lines


def unported_blob(script: str, patch: str, header_end: str) -> tuple[str, int]:
    """``(git blob id of the original, changed lines)`` of a port: ``script``'s text below
    ``header_end`` with ``patch``'s hunks undone; a hunk counts the larger of its removed and
    added lines."""
    import hashlib

    body = script.split(header_end, 1)[1].splitlines(keepends=True)
    hunks = patch_hunks(patch)
    original = "".join(unport(body, hunks)).encode()
    blob = hashlib.sha1(b"blob %d\0" % len(original) + original).hexdigest()
    return blob, sum(max(len(r), len(a)) for _, _, r, a in hunks)
