"""The capacity planner (loaders.memory.plan, ``featurestore plan``) against hand / brute-force
computations on a tiny graph, and the access traces it is built on."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import featurestore as fs
from loaders.memory import trace as cp
from loaders.errors import LoaderArgumentError
from loaders.memory import plan as P

# A tiny directed graph: CSC in-neighbours of each destination (node v's sources).
IN = {0: [1, 2], 1: [3], 2: [4, 5], 3: [6], 4: [], 5: [7], 6: [0], 7: [2, 3],
      8: [9], 9: [8]}
N = 10
TRAIN = [0, 1, 2, 3]
DIM = 8  # fp16 x 8 = 16-byte rows


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "tiny"
    indptr = np.zeros(N + 1, np.int64)
    indptr[1:] = np.cumsum([len(IN[v]) for v in range(N)])
    indices = np.array([u for v in range(N) for u in IN[v]], np.int32)
    w = fs.create_store(path)
    w.add_node_type("node", N)
    w.add_edge_type(("node", "to", "node"), indptr, indices)
    w.add_features("node", "feat", np.arange(N * DIM, dtype=np.float16).reshape(N, DIM))
    w.add_labels("node", np.zeros(N, np.int64))
    w.add_split("train", "node", np.array(TRAIN))
    w.commit()
    return str(path)


def brute_batch(seeds, hops):
    """Distinct rows and sampled edges of a batch with all neighbours taken, PyG-style (each
    node expanded once)."""
    seen = list(seeds)
    frontier = list(seeds)
    edges = 0
    for _ in range(hops):
        new = []
        for v in frontier:
            edges += len(IN[v])
            for u in IN[v]:
                if u not in seen:
                    seen.append(u)
                    new.append(u)
        frontier = new
    return seen, edges


def brute_batches(epoch, batch_size=2, hops=2):
    perm = np.random.default_rng([0, epoch]).permutation(len(TRAIN))  # the loader's order
    seeds = np.array(TRAIN)[perm]
    return [brute_batch(list(seeds[i:i + batch_size]), hops)
            for i in range(0, len(TRAIN), batch_size)]


def test_trace_is_what_the_loader_reads(homo_store):
    from loaders import NeighborLoader

    ld = NeighborLoader(homo_store, input_nodes="train", num_neighbors=[5, 3], batch_size=128,
                        shuffle=True, seed=3,
                        output="raw", device="cpu")
    tr = cp.record_trace(homo_store, "train", [5, 3], batch_size=128, epochs=2, seed=3)
    for e in range(2):
        ld.set_epoch(e)
        got = [b.subgraph.node["node"] for b in ld]
        b0 = int(tr.epoch_ptr[e])
        assert len(got) == tr.epoch_ptr[e + 1] - b0
        for k, ids in enumerate(got):
            lo, hi = tr.batch_ptr[b0 + k], tr.batch_ptr[b0 + k + 1]
            np.testing.assert_array_equal(tr.ids[lo:hi], ids)


def test_trace_of_the_tiny_graph_by_brute_force(tiny):
    with fs.open_store(tiny) as s:
        tr = cp.record_trace(s, "train", [-1, -1], batch_size=2, epochs=2)
        for e in range(2):
            want = brute_batches(e)
            for k, (rows, _) in enumerate(want):
                b = int(tr.epoch_ptr[e]) + k
                assert sorted(tr.ids[tr.batch_ptr[b]:tr.batch_ptr[b + 1]].tolist()) == \
                    sorted(rows)
        np.testing.assert_array_equal(cp.row_degree(s), np.bincount(
            [u for v in IN for u in IN[v]], minlength=N))


def test_plan_against_a_hand_computation(tiny):
    row_bytes = DIM * 2
    b0, b1 = brute_batches(0), brute_batches(1)
    rows = [len(r) for r, _ in b0 + b1]
    edges = [e for _, e in b0 + b1]
    # int32 offsets and ids of ceil(log2 N) bits in 64-bit words (plus one), as the loader
    # holds them
    num_e, bits = sum(len(v) for v in IN.values()), (N - 1).bit_length()
    indptr_b, indices_b = (N + 1) * 4, ((num_e * bits + 63) // 64 + 1) * 8
    topo = indptr_b + indices_b
    batch_bytes = max(rows) * row_bytes  # feature buffers, 2 in flight (CPU)
    sampler = 5 * (max(edges) * 24 + max(rows) * 8)  # prefetch + 3 subgraphs: row/col/edge, ids
    interp, staging = 1000, 100  # staging buffers: only with CUDA
    cache_rows = 3
    fixed = topo + 2 * batch_bytes + sampler + interp
    memory = fixed + cache_rows * row_bytes + 5
    # presample static: rank by epoch-0 counts, ties by degree (descending), then id
    deg = np.bincount([u for v in IN for u in IN[v]], minlength=N)
    c0 = np.zeros(N, int)
    for r, _ in b0:
        c0[r] += 1
    order = sorted(range(N), key=lambda v: (-c0[v], -deg[v], v))
    cached = set(order[:cache_rows])
    reads1 = sum(len(r) for r, _ in b1)
    hits = sum(v in cached for r, _ in b1 for v in r)
    missed_per_batch = (reads1 - hits) / len(b1)
    iops = 1000.0
    with fs.open_store(tiny) as s:
        p = P.plan(s, "train", [-1, -1], batch_size=2, memory=memory, read_iops=iops,
                   interpreter_bytes=interp, staging_bytes=staging, use_budget=False)
    assert p.memory_model == "loaders.memory.plan.memory_plan"
    assert p.batches_per_epoch == 2 and p.sampled_batches == 2 and p.whole_epoch
    assert p.distinct_rows_per_batch == {"node": pytest.approx(np.mean(rows))}
    assert p.distinct_rows_per_batch_max == {"node": max(rows)}
    assert p.edges_per_batch == pytest.approx(np.mean(edges))
    assert p.feature_bytes_per_batch == round(np.mean(rows) * row_bytes)
    assert p.memory["topology"] == topo
    assert p.memory["batch_buffers"] == 2 * batch_bytes + sampler
    assert p.memory["cache"] == cache_rows * row_bytes + 5
    assert p.memory["loader_without_cache"] == fixed
    assert p.cache_rows == cache_rows
    assert p.hit_rate == pytest.approx(hits / reads1)
    assert p.reads_per_batch == pytest.approx(missed_per_batch)
    # the loader's reads: each batch's misses sorted, rows at most 16 KiB apart one span
    # (these 16-byte rows: every batch's misses are one span of one 4 KiB block)
    spans = []
    for r, _ in b1:
        miss = sorted({v for v in r if v not in cached})
        runs = [[miss[0]]] if miss else []
        for v in miss[1:]:
            if (v - runs[-1][-1] - 1) * row_bytes <= 16 << 10:
                runs[-1].append(v)
            else:
                runs.append([v])
        spans += [(-(-(run[-1] + 1) * row_bytes // 4096) - run[0] * row_bytes // 4096) * 4096
                  for run in runs]
    ios = len(spans) / len(b1)
    assert p.ios_per_batch == pytest.approx(ios)
    assert p.bytes_per_batch == pytest.approx(sum(spans) / len(b1))
    assert p.seeds_per_s_io_bound == pytest.approx(iops * 2 / ios)
    with fs.open_store(tiny) as s:  # a sequential rate: each span's bytes cost it too
        q = P.plan(s, "train", [-1, -1], batch_size=2, memory=memory, read_iops=iops,
                   read_bps=1e6, interpreter_bytes=interp, staging_bytes=staging,
                   use_budget=False)
    more = sum(b - 4096 for b in spans) / len(b1)  # past each read's first 4 KiB
    assert q.seeds_per_s_io_bound == pytest.approx(2 / (ios / iops + more / 1e6))
    assert p.rows_touched_per_epoch == len({v for r, _ in b1 for v in r})
    assert p.rows_touched_measured
    assert p.seeds_per_s_bound == min(p.seeds_per_s_io_bound, p.seeds_per_s_sample_bound)
    # the curve: 10% and 20% of 10 rows = 1 and 2 cached rows
    for c in p.curve:
        k = int(round(c["share"] * N))
        s = set(order[:k])
        assert c["cache_rows"] == k
        assert c["hit_rate"] == pytest.approx(sum(v in s for r, _ in b1 for v in r) / reads1)
        assert c["memory_needed"] == p.memory["loader_without_cache"] + k * row_bytes
    assert "cache hit rate" in p.table()


def test_plan_sizes_the_cache_as_the_loader_does(homo_store):
    budget = pytest.importorskip("loaders.memory.budget")
    mem = 600 << 20
    p = P.plan(homo_store, "train", [5, 3], batch_size=256, memory=mem, read_iops=1e5,
               interpreter_bytes=100 << 20)
    assert p.memory_model == "loaders.memory.budget.plan_loader"
    edges = []
    cp.record_trace(homo_store, "train", [5, 3], batch_size=256, epochs=2,
                    on_batch=lambda sub: edges.append(sub.num_edges))
    lp = budget.plan_loader(
        budget=mem - (100 << 20), budget_source="given", feature_row_bytes={"node": 64},
        feature_rows={"node": 3000}, topology_bytes=p.memory["topology"],
        batch_rows=p.distinct_rows_per_batch_max, edges_per_batch=max(edges),
        num_nodes={"node": 3000}, batches_in_flight=2, subgraphs_in_flight=5, io_threads=32,
        scratch_bytes=homo_store.features().reader.scratch_bytes())
    assert p.cache_rows == (3000 if lp.fits else lp.cache_rows.get("node", 0))
    # a budget too small for the whole store: the loader's cache, and the hit rate at it
    small = (100 << 20) + p.loader_plan["planned_bytes"] + p.memory["topology"] + 100_000
    q = P.plan(homo_store, "train", [5, 3], batch_size=256, memory=small, read_iops=1e5,
               interpreter_bytes=100 << 20)
    assert not q.loader_plan["fits"]
    assert 0 < q.cache_rows == q.loader_plan["cache_rows"]["node"] < 3000
    assert q.hit_rate < p.hit_rate == 1


def test_plan_chooses_the_layout_with_the_most_seeds_per_s(homo_store):
    """``batches_in_flight="auto"``: each layout's cache and hit rate are those of the plan
    given that layout; its seeds/s is the module doc's batch time (the gather overlapping the
    training step with two or more buffers, not with one) worked out here by hand; the choice
    is the fastest layout that fits and suits the loop."""
    kw = dict(batch_size=256, read_iops=2e4, interpreter_bytes=100 << 20)
    whole = P.plan(homo_store, "train", [5, 3], memory=600 << 20, **kw)
    mem = (100 << 20) + whole.loader_plan["planned_bytes"] + whole.memory["topology"] + 20_000
    given = {k: P.plan(homo_store, "train", [5, 3], memory=mem, batches_in_flight=k, **kw)
             for k in (1, 2, 3)}
    assert given[1].cache_rows > given[2].cache_rows  # a buffer is cache rows given up
    assert given[1].ios_per_batch > 0  # even one buffer leaves rows to read

    def by_hand(k, train, p):
        g = given[k]  # its reads; the sampling time is the plan's own measurement
        t_s = p.sample_s_per_batch
        seeds = p.seeds_per_s_sample_bound * t_s  # seeds per batch
        # the I/O bound: an I/O a 1/read_iops (no read_bps given), none when all is cached
        t_io = g.ios_per_batch / kw["read_iops"]
        assert g.seeds_per_s_io_bound is None if t_io == 0 else \
            g.seeds_per_s_io_bound == pytest.approx(seeds / t_io)
        t = max(t_io + train, t_s) if k == 1 else max(t_io, t_s, train)
        return seeds / t

    for loop, train in (("drops", 0.0), ("holds", 0.0), ("drops", 10.0), ("holds", 10.0)):
        p = P.plan(homo_store, "train", [5, 3], memory=mem, loop=loop, train_s=train, **kw)
        alts = {a["batches_in_flight"]: a for a in p.alternatives}
        assert sorted(alts) == [1, 2, 3]
        for k, a in alts.items():
            assert a["cache_rows"] == given[k].cache_rows
            assert a["hit_rate"] == pytest.approx(given[k].hit_rate)
            assert a["seeds_per_s"] == pytest.approx(by_hand(k, train, p))
            assert a["loop_ok"] == (k >= 2 or loop == "drops")
        ok = [k for k in alts if alts[k]["loop_ok"] and alts[k]["fits"]]
        best = max(ok, key=lambda k: (by_hand(k, train, p), given[k].hit_rate, -k))
        assert p.chosen and p.batches_in_flight == best
        assert [a["planned"] for a in p.alternatives] == [k == best for k in (1, 2, 3)]
        assert p.cache_rows == given[best].cache_rows
        assert p.seeds_per_s_predicted == pytest.approx(by_hand(best, train, p))
        if loop == "holds":
            assert best != 1  # two host batches exist at once in a loop that holds one
    # with no training step a drop-first loop is fastest on one buffer (the most cache); a
    # step longer than the gather makes the overlap of two buffers worth their cache
    assert P.plan(homo_store, "train", [5, 3], memory=mem, loop="drops", **kw) \
        .batches_in_flight == 1
    assert P.plan(homo_store, "train", [5, 3], memory=mem, loop="drops", train_s=10.0, **kw) \
        .batches_in_flight == 2
    assert "<- planned" in given[2].table() and not given[2].chosen
    with pytest.raises(LoaderArgumentError, match="loop"):
        P.plan(homo_store, "train", [5, 3], loop="keeps")
    with pytest.raises(LoaderArgumentError, match="batches_in_flight"):
        P.plan(homo_store, "train", [5, 3], batches_in_flight=0)


def test_plan_compares_staging_sizes_with_cuda(homo_store):
    """With CUDA there are no CPU batch buffers: the layouts are the staging sizes, each
    replayed with its own chunks (a chunk's misses merge into spans)."""
    mem = 600 << 20
    p = P.plan(homo_store, "train", [5, 3], batch_size=256, memory=mem, read_iops=2e4,
               interpreter_bytes=100 << 20, device="cuda", staging_bytes=1 << 20)
    sizes = [a["staging_bytes"] for a in p.alternatives]
    assert sizes == sorted(set(P.STAGING_CHOICES) | {1 << 20})
    assert all(a["batches_in_flight"] == 0 for a in p.alternatives)
    for a in p.alternatives:
        q = P.plan(homo_store, "train", [5, 3], batch_size=256, memory=mem, read_iops=2e4,
                   interpreter_bytes=100 << 20, device="cuda", staging_bytes=a["staging_bytes"],
                   batches_in_flight=2)
        assert a["cache_rows"] == q.cache_rows and not q.chosen
        assert a["reads_per_batch"] == pytest.approx(q.reads_per_batch)
        seeds = p.seeds_per_s_sample_bound * p.sample_s_per_batch  # per batch
        assert a["seeds_per_s"] == pytest.approx(
            seeds / max(q.ios_per_batch / 2e4, p.sample_s_per_batch))
    assert p.staging_bytes == max(p.alternatives, key=lambda a: (
        a["seeds_per_s"] or 0, a["hit_rate"], -a["staging_bytes"]))["staging_bytes"]


def test_plan_samples_as_the_loaders_sampling(homo_store):
    """``sampling="labor"``: the plan's rows per batch are those of the LABOR loader's own
    batches (the same seeds and draws), fewer than uniform sampling's."""
    from loaders import NeighborLoader

    kw = dict(batch_size=64, memory=2 << 30, read_iops=None, batches=4, seed=2)
    uni = P.plan(homo_store, "train", [6, 4], **kw)
    lab = P.plan(homo_store, "train", [6, 4], sampling="labor", **kw)
    ld = NeighborLoader(homo_store, [6, 4], "train", batch_size=64, shuffle=True, seed=2,
                        device="cpu", output="raw", sampling="labor")
    rows = [int(ld.sample_batch(0, k, pos).node["node"].shape[0])
            for k, pos in enumerate(ld.batch_order(0)[:4])]
    assert lab.distinct_rows_per_batch["node"] <= max(rows)
    assert lab.distinct_rows_per_batch["node"] < uni.distinct_rows_per_batch["node"]


def test_plan_on_a_heterogeneous_store(hetero_store):
    p = P.plan(hetero_store, "paper:train", [4, 2], batch_size=256, memory=2 << 30,
               read_iops=None, batches=3)
    assert p.ntype == "paper" and p.seed_type == "paper"
    assert set(p.distinct_rows_per_batch) == {"paper"}  # only papers have features
    assert p.sampled_batches == 3 and not p.whole_epoch
    assert p.seeds_per_s_io_bound is None
    assert 0 < p.rows_touched_per_epoch <= hetero_store.num_nodes("paper")


def test_memory_plan_never_negative():
    m = P.memory_plan(100, 50, 20, 4, 10, 5)
    assert m["cache"] == 0 and not m["fits"] and m["loader_without_cache"] == 145


def test_estimate_epoch_rows():
    counts = np.array([0, 1, 2, 3, 1, 0])
    assert P.estimate_epoch_rows(counts, 5, 5) == 4  # the whole epoch: counted
    # independent batches of uniform rows: E[distinct after B] = n (1 - (1 - p)^B)
    rng = np.random.default_rng(0)
    n, p, B, t = 200_000, 0.01, 40, 8
    c = np.zeros(n, np.int64)
    for _ in range(t):
        c[rng.random(n) < p] += 1
    want = n * (1 - (1 - p) ** B)
    assert P.estimate_epoch_rows(c, t, B) == pytest.approx(want, rel=0.1)
    assert P.estimate_epoch_rows(c, t, B) > np.count_nonzero(c)


def test_parse_input(hetero_store):
    assert P.parse_input(hetero_store, "paper:train") == ("paper", "train")
    assert P.parse_input(hetero_store, "train") == ("paper", "train")
    with pytest.raises(fs.FeatureStoreError, match="nope"):
        P.parse_input(hetero_store, "nope")


def test_plan_cli_end_to_end(tiny, capsys):
    from featurestore.cli import main

    args = ["plan", tiny, "--input", "node:train", "--fanouts=-1,-1", "--batch-size", "2",
            "--memory", "1MiB", "--read-iops", "500", "--interpreter", "1KiB"]
    assert main(args + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    with fs.open_store(tiny) as s:
        p = P.plan(s, ("node", "train"), [-1, -1], batch_size=2, memory=1 << 20,
                   read_iops=500, interpreter_bytes=1024)
    for k in ("distinct_rows_per_batch", "hit_rate", "reads_per_batch", "cache_rows",
              "seeds_per_s_io_bound", "rows_touched_per_epoch", "memory"):
        assert d[k] == pytest.approx(p.as_dict()[k]) if isinstance(d[k], float) else \
            d[k] == p.as_dict()[k], k
    assert d["read_iops_source"] == "--read-iops"
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "seeds/s bound" in out and "distinct rows per batch" in out
    assert main(["plan", tiny, "--input", "nope", "--no-probe"]) == 2
    for bad in (["--batches-in-flight", "0"], ["--batches-in-flight", "two"],
                ["--train-ms", "-1"], ["--loop", "keeps"]):
        with pytest.raises(SystemExit) as e:
            main(args + bad)
        assert e.value.code == 2
    assert main(args + ["--batches-in-flight", "1", "--loop", "drops", "--train-ms", "5",
                        "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["batches_in_flight"] == 1 and d["loop"] == "drops" and not d["chosen"]
    assert d["train_s_per_batch"] == pytest.approx(0.005)


# -- link batches (--task link) ----------------------------------------------------------------
def brute_hops(seeds, hops):
    """Every node within ``hops`` in-hops of ``seeds`` (all neighbours taken)."""
    seen, frontier = set(seeds), set(seeds)
    for _ in range(hops):
        frontier = {u for v in frontier for u in IN[v]} - seen
        seen |= frontier
    return seen


def test_split_in_edges_by_brute_force(tiny):
    with fs.open_store(tiny) as s:
        got = P.split_in_edges(s, "train")
    want = sorted((u, v) for v in TRAIN for u in IN[v])
    assert sorted(zip(got[0].tolist(), got[1].tolist())) == want


def test_link_plan_counts_the_link_batches_nodes(tiny):
    """Each link batch of 2 positives and 2 binary negatives samples from up to 8 endpoints;
    the plan's rows per batch are those of the link loader's own batches, counted by brute
    force from their endpoints."""
    from loaders import LinkNeighborLoader

    with fs.open_store(tiny) as s:
        p = P.plan(s, "train", [-1, -1], batch_size=2, memory=1 << 20, read_iops=100.0,
                   interpreter_bytes=1000, task="link", neg_sampling_ratio=1.0)
        ld = LinkNeighborLoader(s, [-1, -1], P.split_in_edges(s, "train"),
                                neg_sampling_ratio=1.0, batch_size=2, shuffle=True,
                                output="raw", device="cpu")
        rows, ends = [], []
        for e in range(2):
            ld.set_epoch(e)
            for b in ld:
                sub = b.subgraph
                pairs = sub.node["node"][sub.link["edge_label_index"]]  # store ids
                assert pairs.shape == (2, 4)  # 2 positives, then 2 negatives
                want = brute_hops(set(pairs.ravel().tolist()), 2)
                assert set(sub.node["node"].tolist()) == want
                rows.append(len(want))
                ends.append(len(set(pairs.ravel().tolist())))
    assert p.task == "link" and p.neg_sampling_ratio == 1.0
    assert p.num_inputs == 6 and p.batches_per_epoch == 3  # edges into train: 6
    assert p.seed_nodes_per_batch_bound == 2 * (2 + 2)
    assert p.seed_nodes_per_batch_max == max(ends)
    assert p.distinct_rows_per_batch_max == {"node": max(rows)}
    assert p.distinct_rows_per_batch == {"node": pytest.approx(np.mean(rows))}
    # rates count positive edges: 2 per batch
    assert p.seeds_per_s_sample_bound == pytest.approx(2 / p.sample_s_per_batch)
    assert p.edges_per_s_bound == p.seeds_per_s_bound == min(
        x for x in (p.seeds_per_s_io_bound, p.seeds_per_s_sample_bound) if x is not None)
    assert p.as_dict()["edges_per_s_bound"] == p.edges_per_s_bound
    table = p.table()
    assert "edges/s bound" in table and "up to 8 seed nodes per batch" in table


def test_link_loader_plan_sizes_buffers_for_its_endpoints(homo_store):
    """Without sampling, the loader's plan bounds a link batch by its 2 * (B + rB) endpoints,
    not by B seeds: a sampled batch's distinct nodes (counted by np.unique) exceed the
    B-seed bound and stay within the plan's buffers."""
    from loaders import LinkNeighborLoader
    from loaders.memory.budget import ROWS_HEADROOM

    ld = LinkNeighborLoader(homo_store, [2, 1], P.split_in_edges(homo_store, "train"),
                            neg_sampling_ratio=1.0, batch_size=8, shuffle=True, output="raw",
                            device="cpu", memory="8GiB")
    mult = (1 + 2) * (1 + 1)
    assert ld.max_batch_seeds() == {"node": 2 * (8 + 8)}
    assert ld.plan.fits and ld.plan.batch_rows["node"] == math.ceil(ROWS_HEADROOM * 32 * mult)
    most = 0
    for k, pos in enumerate(ld.batch_order(0)[:20]):
        sub = ld.sample_batch(0, k, pos)
        most = max(most, np.unique(sub.node["node"]).shape[0])
    assert 8 * mult < most <= ld.plan.batch_rows["node"]


def test_link_plan_refuses_bad_arguments(tiny):
    from loaders.errors import LoaderArgumentError

    with fs.open_store(tiny) as s:
        with pytest.raises(LoaderArgumentError, match="task"):
            P.plan(s, "train", [2], task="edge")
        with pytest.raises(LoaderArgumentError, match="neg_sampling_ratio"):
            P.plan(s, "train", [2], task="link", neg_sampling_ratio=0)
        with pytest.raises(fs.FeatureStoreError, match="'nope'"):
            P.plan(s, "nope", [2], task="link")
        with pytest.raises(LoaderArgumentError, match="REL:SPLIT"):
            P.plan(s, "cites:train", [2], task="link")


def test_link_plan_cli(tiny, capsys):
    from featurestore.cli import main

    args = ["plan", tiny, "--task", "link", "--fanouts=-1,-1", "--batch-size", "2",
            "--memory", "1MiB", "--read-iops", "500", "--interpreter", "1KiB"]
    assert main(args + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["task"] == "link" and d["num_inputs"] == 6 and d["neg_sampling_ratio"] == 1.0
    assert d["edges_per_s_bound"] == d["seeds_per_s_bound"] > 0
    assert main(args + ["--neg-sampling-ratio", "2"]) == 0
    out = capsys.readouterr().out
    assert "edges/s bound" in out and "up to 12 seed nodes per batch" in out  # 2 * (2 + 4)
    assert main(args + ["--input", "nope"]) == 2  # names the edge and node splits
    assert "Expected an edge split" in capsys.readouterr().err
    for bad in (["--task", "edge"], ["--neg-sampling-ratio", "0"]):  # usage errors
        with pytest.raises(SystemExit) as e:
            main(args + bad)
        assert e.value.code == 2
        assert bad[0] in capsys.readouterr().err
