"""``featurestore preprocess reorder``: a store renumbered hot-first and breadth first.

The reordered store is checked against the source store read on its own: per original id
(found through ``orig_id``, which the source holds distinct) the same feature rows, labels,
values, split membership and neighbour multisets (as original ids), edge features and values
on the same edges, and edge split pairs; the hot prefix against the loader's ranking
recomputed by a sort; the kernels against NumPy twins; memory under ``memcap``; a SIGKILL
and a resume; the errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import featurestore as fs
from featurestore.errors import StoreExistsError, UnsafePathError
from featurestore.format.names import EdgeType
from featurestore.verify import verify_store
from preprocess.errors import ManifestMismatchError, ReorderError
from preprocess.jobs.reorder import find_ranking, hot_count, run_reorder
from preprocess.steps.reorder import bfs_fill, mark_prefix, relabel_block

from loaders.memory.cache import degree_counts, presample_counts, presample_scores, row_order
from loaders.ranking import degree_ranking, presample_ranking
from loaders.sample.sampler import NeighborSampler
from loaders.sample.seeds import epoch_order

from tests.preprocess.pp_helpers import store_snapshot

HERE = os.path.dirname(os.path.abspath(__file__))
MEMCAP = "/work/shared/tools/memcap"
CITES = EdgeType("paper", "cites", "paper")
WRITES = EdgeType("author", "writes", "paper")
REV = EdgeType("paper", "rev_writes", "author")


# -- stores ------------------------------------------------------------------------------------
def _csc(rng, num_src, num_dst, e, skew=True):
    """A skewed CSC (Zipf sources, sorted lists, duplicates kept) and its (src, dst) edges."""
    src = (rng.zipf(1.6, e) * 7919 % num_src) if skew else rng.integers(0, num_src, e)
    dst = rng.integers(0, num_dst, e)
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, src[order].astype(np.int64)


def homo_store(path, n=3000, e=40_000, dim=24, seed=0):
    rng = np.random.default_rng(seed)
    w = fs.create_store(path, mode="w")
    w.add_node_type("node", n, orig_ids=rng.permutation(n) * 5 + 11)  # distinct, not ids
    w.add_edge_type(("node", "to", "node"), *_csc(rng, n, n, e))
    feat = rng.standard_normal((n, dim)).astype(np.float16)
    w.add_features("node", "feat", feat)
    w.add_labels("node", rng.integers(-1, 7, n))
    w.add_values("node", "year", rng.integers(1990, 2024, n).astype(np.int16))
    w.add_split("train", "node", np.sort(rng.choice(n, n // 8, replace=False)))
    w.add_split("valid", "node", np.sort(rng.choice(n, n // 30, replace=False)))
    w.commit()
    return path


def hetero_store(path, seed=1):
    """Papers (features, labels, a split), authors (features), cites with an edge feature,
    writes with per-edge values and its reverse, an edge split of cites."""
    rng = np.random.default_rng(seed)
    npap, nau = 2000, 700
    w = fs.create_store(path, mode="w")
    w.add_node_type("paper", npap, orig_ids=rng.permutation(npap) + 100)
    w.add_node_type("author", nau, orig_ids=np.arange(nau) * 2)
    ptr, ind = _csc(rng, npap, npap, 20_000)
    w.add_edge_type(CITES, ptr, ind)
    w.add_edge_features(CITES, "edge_attr", np.arange(ind.shape[0] * 2, dtype=np.float32)
                        .reshape(-1, 2))  # row = old edge position, twice
    wp, wi = _csc(rng, nau, npap, 6000, skew=False)
    w.add_edge_type(WRITES, wp, wi)
    w.add_edge_values(WRITES, "pos", np.arange(wi.shape[0], dtype=np.int64))
    rp, ri = _csc(rng, npap, nau, 6000)
    w.add_edge_type(REV, rp, ri)
    w.add_features("paper", "feat", rng.standard_normal((npap, 32)).astype(np.float32))
    w.add_features("author", "feat", rng.standard_normal((nau, 8)).astype(np.float32))
    w.add_labels("paper", rng.integers(0, 5, npap))
    w.add_split("train", "paper", np.sort(rng.choice(npap, 300, replace=False)))
    w.add_edge_split("valid", CITES, src=rng.integers(0, npap, 50),
                     dst=rng.integers(0, npap, 50), neg_dst=rng.integers(0, npap, (50, 3)),
                     label=rng.integers(0, 2, 50))
    w.commit()
    return path


@pytest.fixture(scope="module")
def homo(tmp_path_factory):
    d = tmp_path_factory.mktemp("reorder")
    src = homo_store(d / "src")
    run_reorder(src, d / "dst", hot=300, batch_size=64, budget_bytes=16 << 20,
                progress=False, ranking=presample_ranking)
    return d


# -- the reference checks ----------------------------------------------------------------------
def old_ids(src, dst, ntype=None) -> np.ndarray:
    """new id -> old id, through orig_id alone (distinct in the source)."""
    so, do = np.asarray(src.orig_ids(ntype)), np.asarray(dst.orig_ids(ntype))
    back = np.argsort(so)
    pos = np.searchsorted(so, do, sorter=back)
    assert np.array_equal(so[back[pos]], do), "orig_id values are not the source's"
    old = back[pos]
    assert np.array_equal(np.sort(old), np.arange(so.shape[0]))  # a permutation
    return old


def edge_list(store, etype, src_map=None, dst_map=None) -> np.ndarray:
    """The edges as (dst, src) rows, mapped to old ids, lexsorted: a multiset."""
    ptr, ind = (np.asarray(a) for a in store.csc(etype))
    dst = np.repeat(np.arange(ptr.shape[0] - 1), np.diff(ptr))
    src = ind.astype(np.int64)
    if dst_map is not None:
        dst = dst_map[dst]
    if src_map is not None:
        src = src_map[src]
    e = np.stack([dst, src], 1)
    return e[np.lexsort((e[:, 1], e[:, 0]))]


def check_same_graph(src, dst, ntype):
    """Everything of ``dst`` per original id equals ``src``'s."""
    old = {t: (old_ids(src, dst, t) if t == ntype else np.arange(src.num_nodes(t)))
           for t in src.node_types}
    for t in src.node_types:
        np.testing.assert_array_equal(dst.orig_ids(t), np.asarray(src.orig_ids(t))[old[t]])
        for name in src.feature_names(t):
            n = src.num_nodes(t)
            np.testing.assert_array_equal(dst.features(t, name).gather(np.arange(n)),
                                          src.features(t, name).gather(old[t]))
        for name in src.value_names(t):
            np.testing.assert_array_equal(dst.values(t, name), src.values(t, name)[old[t]])
    for name in src.split_names:
        for t in src.meta.splits[name]:
            new = np.asarray(dst.split(name, t))
            assert np.all(np.diff(new) > 0), "splits are sorted and distinct"
            np.testing.assert_array_equal(np.sort(old[t][new]), np.sort(src.split(name, t)))
    for et in src.edge_types:
        a = edge_list(dst, et, old[et.src], old[et.dst])
        np.testing.assert_array_equal(a, edge_list(src, et))
        ptr, ind = (np.asarray(x) for x in dst.csc(et))
        seg = np.repeat(np.arange(ptr.shape[0] - 1), np.diff(ptr))
        assert np.all((np.diff(ind.astype(np.int64)) >= 0) | (np.diff(seg) > 0)), \
            "each neighbour list sorted"
    return old


def test_reordered_store_holds_the_same_data_per_original_id(homo):
    src, dst = fs.open_store(homo / "src"), fs.open_store(homo / "dst")
    check_same_graph(src, dst, "node")
    assert verify_store(homo / "dst", data=True) == []
    assert dst.node_order("node")["hot_rows"] == 300
    assert dst.node_order("node")["order"] == "presample"
    assert dst.provenance[-1]["step"] == "preprocess reorder"


def test_hot_prefix_is_the_loaders_presample_ranking(homo):
    """The first rows are the top of the loader's ranking, recomputed here by its sort
    (row_order) over the same sampling-only pass, in ranking order."""
    src, dst = fs.open_store(homo / "src"), fs.open_store(homo / "dst")
    seeds = np.asarray(src.split("train"))
    sampler = NeighborSampler(src, [15, 10, 5])
    counts = presample_counts(sampler, (seeds[p] for p in epoch_order(len(seeds), 64, 0)),
                              "node", ["node"], num_nodes={"node": src.num_nodes()})["node"]
    deg = degree_counts(src, "node")
    want = row_order(presample_scores(counts, deg), deg)[:300]
    np.testing.assert_array_equal(old_ids(src, dst)[:300], want)


def test_degree_order_and_heterogeneous_store(tmp_path):
    """A heterogeneous store: papers renumbered by degree (the type with the most feature
    bytes), authors copied; edge features and values follow their edges, edge split ids
    map; the prefix is the degree ranking."""
    src_path = hetero_store(tmp_path / "src")
    run_reorder(src_path, tmp_path / "dst", order="degree", hot="25%", budget_bytes=16 << 20,
                progress=False, ranking=degree_ranking)
    src, dst = fs.open_store(src_path), fs.open_store(tmp_path / "dst")
    old = check_same_graph(src, dst, "paper")
    deg = degree_counts(src, "paper")
    np.testing.assert_array_equal(old["paper"][:500], row_order(deg, deg)[:500])
    # edge data: row i of the new store is the old edge at position pos[i]
    for et, pos in ((CITES, np.asarray(dst.edge_features(CITES).gather(
            np.arange(dst.num_edges(CITES))))[:, 0].astype(np.int64) // 2),
                    (WRITES, np.asarray(dst.edge_values(WRITES, "pos")))):
        ptr, ind = (np.asarray(a) for a in dst.csc(et))
        nd = old[et.dst][np.repeat(np.arange(ptr.shape[0] - 1), np.diff(ptr))]
        ns = old[et.src][ind.astype(np.int64)]
        optr, oind = (np.asarray(a) for a in src.csc(et))
        od = np.repeat(np.arange(optr.shape[0] - 1), np.diff(optr))
        np.testing.assert_array_equal(nd, od[pos])
        np.testing.assert_array_equal(ns, np.asarray(oind)[pos])
        np.testing.assert_array_equal(np.sort(pos), np.arange(optr[-1]))
    ns, os_ = dst.edge_split("valid", CITES), src.edge_split("valid", CITES)
    for col in ("src", "dst", "neg_dst"):
        np.testing.assert_array_equal(old["paper"][np.asarray(ns[col])], os_[col])
    np.testing.assert_array_equal(ns["label"], os_["label"])
    assert verify_store(tmp_path / "dst", data=True) == []
    assert dst.node_order("paper")["order"] == "degree" and dst.node_order("author") is None


def test_bfs_order_has_no_hot_prefix(tmp_path):
    src_path = homo_store(tmp_path / "src", n=800, e=5000)
    run_reorder(src_path, tmp_path / "dst", order="bfs", budget_bytes=16 << 20,
                progress=False)
    src, dst = fs.open_store(src_path), fs.open_store(tmp_path / "dst")
    old = check_same_graph(src, dst, "node")
    assert dst.node_order()["hot_rows"] == 0
    ptr, ind = (np.asarray(a) for a in src.csc())
    want = reference_bfs(ptr, ind, np.empty(0, np.int64), None)
    np.testing.assert_array_equal(old["node"], want)


# -- the kernels against NumPy twins -----------------------------------------------------------
def reference_bfs(indptr, indices, hot, max_degree):
    """Breadth first from ``hot`` (then from the smallest unseen id), plain Python."""
    n = indptr.shape[0] - 1
    seen = np.zeros(n, bool)
    seen[hot] = True
    out = list(hot)
    head = 0
    while len(out) < n:
        if head == len(out):
            r = int(np.flatnonzero(~seen)[0])
            seen[r] = True
            out.append(r)
        v = out[head]
        head += 1
        nb = indices[indptr[v]:indptr[v + 1]]
        if max_degree is not None and len(nb) > max_degree:
            continue
        for u in nb:
            if not seen[u]:
                seen[u] = True
                out.append(int(u))
    return np.asarray(out, np.int64)


@pytest.mark.parametrize("max_degree", [None, 3])
def test_bfs_kernel_matches_its_twin(max_degree):
    rng = np.random.default_rng(3)
    n = 500
    ptr, ind = _csc(rng, n, n, 1200)
    hot = rng.choice(n, 20, replace=False)
    perm = np.empty(n, np.int64)
    seen = np.zeros(n, np.uint8)
    assert mark_prefix(hot, perm, seen) == -1
    cap = np.iinfo(np.int64).max if max_degree is None else max_degree
    bfs_fill(ptr, ind, perm, 20, seen, cap)
    np.testing.assert_array_equal(perm, reference_bfs(ptr, ind, hot, max_degree))
    assert mark_prefix(np.array([1, 2, 1]), np.empty(3, np.int64), np.zeros(5, np.uint8)) == 2
    assert mark_prefix(np.array([1, 9]), np.empty(2, np.int64), np.zeros(5, np.uint8)) == 1


def test_relabel_kernel_matches_its_twin():
    rng = np.random.default_rng(4)
    n, m = 300, 200
    ptr, ind = _csc(rng, m, n, 3000)
    dperm, sperm = rng.permutation(n), rng.permutation(m)
    sinv = np.argsort(sperm)
    lo, hi = 50, 260
    deg = np.diff(ptr)[dperm]
    newp = np.concatenate([[0], np.cumsum(deg)])[lo:hi + 1]
    out = np.empty(newp[-1] - newp[0], np.int64)
    eids = np.empty_like(out)
    relabel_block(ptr, ind, dperm, sinv, lo, hi, newp, out, eids)
    want_s, want_e = [], []
    for v in range(lo, hi):  # the twin: each old list mapped, stably sorted
        pos = np.arange(ptr[dperm[v]], ptr[dperm[v] + 1])
        s = sinv[ind[pos]]
        o = np.argsort(s, kind="stable")
        want_s.append(s[o])
        want_e.append(pos[o])
    np.testing.assert_array_equal(out, np.concatenate(want_s))
    np.testing.assert_array_equal(eids, np.concatenate(want_e))
    out2 = np.empty_like(out)  # destinations only: lists copied as they are, no sort
    none = np.empty(0, np.int64)
    relabel_block(ptr, ind, dperm, none, lo, hi, newp, out2, none)
    np.testing.assert_array_equal(out2, np.concatenate(
        [ind[ptr[dperm[v]]:ptr[dperm[v] + 1]] for v in range(lo, hi)]))


# -- resuming, memory, errors ------------------------------------------------------------------
def test_killed_job_resumes_to_the_same_store(tmp_path):
    src = homo_store(tmp_path / "src", n=2000, e=20_000)
    run_reorder(src, tmp_path / "ref", order="degree", hot=200, budget_bytes=16 << 20,
                progress=False, ranking=degree_ranking)
    want = store_snapshot(tmp_path / "ref")
    for k in (2, 4):  # killed in the CSC's indices, then in the features
        out = tmp_path / f"dst{k}"
        p = subprocess.run([sys.executable, os.path.join(HERE, "kill_reorder_run.py"),
                            str(src), str(out), str(k)], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": _pythonpath()})
        assert p.returncode == -9, p.stderr[-2000:]
        with pytest.raises(fs.IncompleteStoreError):
            fs.open_store(out)
        job = run_reorder(src, out, order="degree", hot=200, budget_bytes=16 << 20,
                          progress=False, ranking=degree_ranking)
        assert job.resumed and any(s.status == "done before" for s in job.steps)
        assert store_snapshot(out) == want


def test_resumed_job_refuses_a_lost_order(tmp_path):
    """A killed job whose work files lost the order (perm/inv) stops with ReorderError on
    resume, not a new ranking the rows already written do not follow."""
    import shutil

    from preprocess.errors import ReorderError

    src = homo_store(tmp_path / "src", n=2000, e=20_000)
    out = tmp_path / "dst"
    p = subprocess.run([sys.executable, os.path.join(HERE, "kill_reorder_run.py"),
                        str(src), str(out), "4"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": _pythonpath()})
    assert p.returncode == -9, p.stderr[-2000:]
    dirs = [d for d, _, files in os.walk(tmp_path)
            if os.path.basename(d) == "order" and "perm.npy" in files]
    assert len(dirs) == 1, dirs
    shutil.rmtree(dirs[0])
    with pytest.raises(ReorderError, match="--force"):
        run_reorder(src, out, order="degree", hot=200, budget_bytes=16 << 20,
                    progress=False, ranking=degree_ranking)


def _pythonpath() -> str:
    root = os.path.dirname(os.path.dirname(HERE))
    return os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p])


@pytest.mark.skipif(not os.path.exists(MEMCAP), reason="no memcap tool")
def test_reorder_stays_in_the_budget_under_memcap(tmp_path):
    """Features 8x the 32 MiB budget (and 2/3 of the cap, page cache included): each step
    adds at most the budget (plus 16 MiB) to the interpreter's anonymous memory."""
    p = subprocess.run([MEMCAP, "400M", "--", sys.executable,
                        os.path.join(HERE, "reorder_run.py"), str(tmp_path), "32"],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": _pythonpath()})
    if p.returncode == 3 and "memcap" in p.stderr:
        pytest.skip("memcap cannot make a memory cgroup here")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "oom_kills=0" in p.stderr
    added = json.loads(p.stdout.strip().splitlines()[-1])
    assert added and max(added.values()) <= 32 + 16, added
    src, dst = fs.open_store(tmp_path / "src"), fs.open_store(tmp_path / "dst")
    old = old_ids(src, dst)
    rows = np.random.default_rng(0).integers(0, src.num_nodes(), 2000)
    np.testing.assert_array_equal(dst.features().gather(rows), src.features().gather(old[rows]))


def test_errors(homo, tmp_path):
    src = homo / "src"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(StoreExistsError):  # a directory with someone else's files
        run_reorder(src, other, order="bfs", progress=False)
    assert (other / "notes.txt").read_text() == "mine"
    homo_store(tmp_path / "plain", n=50, e=100)  # a store no job wrote
    with pytest.raises(StoreExistsError, match="without a job manifest"):
        run_reorder(src, tmp_path / "plain", order="bfs", progress=False)
    with pytest.raises(ReorderError, match="Expected --order in"):
        run_reorder(src, tmp_path / "x", order="random", progress=False)
    with pytest.raises(ReorderError, match="node type"):
        run_reorder(src, tmp_path / "x", ntype="paper", progress=False)
    with pytest.raises(ReorderError, match="--input"):
        run_reorder(src, tmp_path / "x", input="nope", progress=False)
    with pytest.raises(ReorderError, match="hot prefix of 0 to 3000"):
        run_reorder(src, tmp_path / "x", hot=5000, progress=False)
    with pytest.raises(UnsafePathError, match="outside the input store"):
        run_reorder(src, src / "inner", order="bfs", progress=False)
    with pytest.raises(fs.StoreNotFoundError):
        run_reorder(tmp_path / "missing", tmp_path / "x", order="bfs", progress=False)
    assert not (tmp_path / "x").exists() and not (src / "inner").exists()
    with pytest.raises(ManifestMismatchError, match="hot_rows"):  # a finished job, other options
        run_reorder(src, homo / "dst", hot=200, batch_size=64, budget_bytes=16 << 20,
                    progress=False, ranking=presample_ranking)
    with pytest.raises(ReorderError, match="Expected 300 ids"):
        run_reorder(src, tmp_path / "y", hot=300, progress=False,
                    ranking=lambda *a, **k: np.arange(10))
    with pytest.raises(fs.FeatureStoreError, match="distinct hot ids"):
        run_reorder(src, tmp_path / "z", hot=3, progress=False, force=True,
                    ranking=lambda *a, **k: np.array([1, 2, 1]))
    assert hot_count("10%", 3000) == 300 and hot_count("0.5", 10) == 5
    with pytest.raises(ReorderError, match="--hot as rows"):
        hot_count("many", 10)


def test_cli_and_registered_rankings(homo, tmp_path):
    """The command line (bfs: no ranking) and the rankings the job finds by name (the
    package's entry points: ``pip install -e .`` puts them in its metadata)."""
    from featurestore.cli import main

    assert main(["preprocess", "reorder", str(homo / "src"), str(tmp_path / "cli"),
                 "--order", "bfs", "--memory", "16MiB", "--no-progress"]) == 0
    assert fs.open_store(tmp_path / "cli").node_order()["order"] == "bfs"
    with pytest.raises(SystemExit):
        main(["preprocess", "reorder", str(homo / "src"), str(tmp_path / "c2"),
              "--order", "random"])
    assert find_ranking("presample") is presample_ranking
    assert find_ranking("degree") is degree_ranking
    with pytest.raises(ReorderError, match="pip install -e"):
        find_ranking("nope")
