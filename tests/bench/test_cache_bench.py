"""Cache policies (loaders.memory.trace) against brute-force Python references, and
``featurestore bench cache`` end to end on a tiny store."""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np
import pytest

from benchmarks import cache_sim as sim
from loaders.memory import trace as cp


# -- brute-force references (plain Python, written from the policies' definitions) -------------
def ref_lru(batches, cap):
    c, out = OrderedDict(), []
    for b in batches:
        h = 0
        for x in b:
            if x in c:
                h += 1
                c.move_to_end(x)
            elif cap > 0:
                if len(c) == cap:
                    c.popitem(last=False)
                c[x] = True
        out.append(h)
    return out


def ref_sieve(batches, cap):
    q, vis, hand, out = [], {}, None, []  # q: oldest first; the hand moves toward newer
    for b in batches:
        h = 0
        for x in b:
            if x in vis:
                h += 1
                vis[x] = True
                continue
            if cap == 0:
                continue
            if len(q) == cap:
                i = q.index(hand) if hand is not None else 0
                while vis[q[i]]:
                    vis[q[i]] = False
                    i = i + 1 if i + 1 < len(q) else 0
                hand = q[i + 1] if i + 1 < len(q) else None
                del vis[q[i]]
                q.pop(i)
            q.append(x)
            vis[x] = False
        out.append(h)
    return out


def ref_clock(batches, cap):
    slots, ref, hand, out = [], [], 0, []
    for b in batches:
        h = 0
        for x in b:
            if x in slots:
                h += 1
                ref[slots.index(x)] = True
                continue
            if cap == 0:
                continue
            if len(slots) < cap:
                slots.append(x)
                ref.append(False)
                continue
            while ref[hand]:
                ref[hand] = False
                hand = (hand + 1) % cap
            slots[hand], ref[hand] = x, False
            hand = (hand + 1) % cap
        out.append(h)
    return out


def ref_belady(batches, cap, window):
    """Keys recomputed from scratch at every decision (no incremental bookkeeping)."""
    flat = [x for b in batches for x in b]
    n = len(flat)
    starts = np.cumsum([0] + [len(b) for b in batches])
    nb = len(batches)

    def wend(b):
        return n if b + window >= nb - 1 else int(starts[b + window + 1])

    def next_after(x, pos):
        for j in range(pos + 1, n):
            if flat[j] == x:
                return j
        return n

    cache = {}  # row -> ("pending", first use) or ("read", last read position)
    for i in range(wend(0)):
        if len(cache) == cap:
            break
        if flat[i] not in cache:
            cache[flat[i]] = ("pending", i)

    def key(x, b):
        kind, p = cache[x]
        if kind == "pending":
            return p
        nu = next_after(x, p)
        return nu if nu < wend(b) else 2 * n - p

    out = []
    for b in range(nb):
        h = 0
        for i in range(int(starts[b]), int(starts[b + 1])):
            x = flat[i]
            if x in cache:
                h += 1
                cache[x] = ("read", i)
                continue
            if cap == 0:
                continue
            nu = next_after(x, i)
            kx = nu if nu < wend(b) else 2 * n - i
            if len(cache) < cap:
                cache[x] = ("read", i)
                continue
            victim = max(cache, key=lambda y: key(y, b))
            if kx >= key(victim, b):
                continue
            del cache[victim]
            cache[x] = ("read", i)
        out.append(h)
    return out


def random_trace(seed, num_rows=40, epochs=3, batches=5, skew=1.1):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, num_rows + 1) ** skew
    p = p[rng.permutation(num_rows)]
    p /= p.sum()
    per_epoch = []
    for _ in range(epochs):
        per_epoch.append([rng.choice(num_rows, int(rng.integers(1, 15)), replace=False, p=p)
                          for _ in range(batches)])
    return per_epoch


CAPS = (0, 1, 2, 5, 11, 40, 45)


@pytest.mark.parametrize("seed", range(6))
def test_dynamic_policies_match_references(seed):
    per_epoch = random_trace(seed)
    t = cp.AccessTrace.from_batches(per_epoch, 40)
    batches = [list(map(int, b)) for e in per_epoch for b in e]
    for cap in CAPS:
        assert sim.lru_hits(t.ids, t.batch_ptr, t.num_rows, cap).tolist() == ref_lru(batches, cap)
        assert sim.sieve_hits(t.ids, t.batch_ptr, t.num_rows, cap).tolist() == \
            ref_sieve(batches, cap)
        assert sim.clock_hits(t.ids, t.batch_ptr, t.num_rows, cap).tolist() == \
            ref_clock(batches, cap)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("window", [0, 1, 3, 1000])
def test_belady_matches_reference(seed, window):
    per_epoch = random_trace(seed, epochs=2)
    t = cp.AccessTrace.from_batches(per_epoch, 40)
    batches = [list(map(int, b)) for e in per_epoch for b in e]
    nxt = sim.next_use(t.ids, t.num_rows)
    for cap in CAPS:
        got = sim.belady_hits(t.ids, t.batch_ptr, t.num_rows, cap, window, nxt).tolist()
        assert got == ref_belady(batches, cap, window), (cap, window)


def test_next_use():
    ids = np.array([3, 1, 3, 2, 1, 3])
    assert sim.next_use(ids, 4).tolist() == [2, 4, 5, 6, 6, 6]


@pytest.mark.parametrize("seed", range(5))
def test_replay_static_policies_and_bounds(seed):
    per_epoch = random_trace(seed, num_rows=60, epochs=3, batches=6)
    t = cp.AccessTrace.from_batches(per_epoch, 60)
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, 5, 60)
    caps = [0, 1, 3, 6, 12, 30, 60]
    res = sim.replay(t, caps, degree=deg, window=2)
    assert res.measured_epochs == [1, 2]
    assert res.reads == [sum(len(b) for b in per_epoch[e]) for e in (1, 2)]
    first = [int(x) for b in per_epoch[0] for x in b]
    count0 = {r: first.count(r) for r in range(60)}
    by_pre = sorted(range(60), key=lambda r: (-count0[r], -deg[r], r))
    by_deg = sorted(range(60), key=lambda r: (-deg[r], r))
    for k in caps:
        for name, order in (("presample-static", by_pre), ("degree-static", by_deg)):
            s = set(order[:k])
            assert res.hits[name][k] == [sum(int(x) in s for b in per_epoch[e] for x in b)
                                         for e in (1, 2)], (name, k)
        for j, e in enumerate((1, 2)):
            cnt = np.bincount(np.concatenate(per_epoch[e]), minlength=60)
            opt = int(np.sort(cnt)[::-1][:k].sum())
            assert res.hits["optimal-static"][k][j] == opt
            # the per-epoch optimum bounds every static cache on its own epoch
            assert opt >= res.hits["presample-static"][k][j]
            assert opt >= res.hits["degree-static"][k][j]
        # the dynamic policies replay the first epoch too (warm-up): same per-batch kernels
        batches = [list(map(int, b)) for e in per_epoch for b in e]
        lru = ref_lru(batches, k)
        assert res.hits["lru"][k] == [sum(lru[6:12]), sum(lru[12:18])]


@pytest.mark.parametrize("seed", range(8))
def test_belady_whole_trace_bounds_every_policy(seed):
    # one measured epoch: Belady over it, starting from its own choice of rows, is the optimum
    per_epoch = random_trace(seed, num_rows=50, epochs=2, batches=8)
    t = cp.AccessTrace.from_batches(per_epoch, 50)
    deg = np.random.default_rng(seed).integers(0, 9, 50)
    caps = [1, 2, 5, 10, 25, 50]
    res = sim.replay(t, caps, degree=deg, window=1)
    for k in caps:
        best = res.hits["belady"][k][0]
        for p in sim.REPLAY_POLICIES:
            assert best >= res.hits[p][k][0], (p, k)
        assert best <= res.reads[0]
    full = res.hit_rate("belady", 50)  # every row fits: every read after the first window hits
    assert full == 1.0


def test_replay_rejects_bad_arguments():
    t = cp.AccessTrace.from_batches(random_trace(0, epochs=1), 40)
    with pytest.raises(ValueError, match="presample_epochs"):
        sim.replay(t, [4])
    t = cp.AccessTrace.from_batches(random_trace(0, epochs=2), 40)
    with pytest.raises(ValueError, match="degree"):
        sim.replay(t, [4], policies=("degree-static",))
    with pytest.raises(ValueError, match="policies"):
        sim.replay(t, [4], policies=("fifo",))


def test_replay_kernels_are_compiled():
    # an epoch-sized trace replays with no per-read Python: each policy is a numba kernel
    # compiled in nopython mode (its speed is the cache benchmark's, not a unit test's)
    from numba.core.registry import CPUDispatcher

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, 50).astype(np.int32)
    for fn in (sim.lru_hits, sim.sieve_hits, sim.clock_hits):
        assert isinstance(fn, CPUDispatcher), fn
        fn(ids, np.array([0, 25, 50]), 100, 10)
        assert fn.nopython_signatures, fn


def test_bench_cache_cli_end_to_end(tmp_path, capsys):
    import featurestore as fs
    from featurestore.cli import main
    from loaders.datasets.synthetic import mag_like_store, power_law_store

    homo = power_law_store(tmp_path / "homo", num_nodes=3000, num_edges=30000, feat_dim=8,
                           train_frac=0.2, seed=4)
    het = mag_like_store(tmp_path / "mag", num_papers=1200, num_authors=800,
                         num_institutions=20, feat_dim=8, seed=5)
    out = tmp_path / "out"
    rc = main(["bench", "cache", "--store", str(homo), "--store", str(het), "--input", "train",
               "--fanouts", "5,3", "--batch-size", "128", "--epochs", "3", "--budgets", "5,20",
               "--out", str(out), "--json", str(tmp_path / "c.json")])
    assert rc == 0
    rep = json.loads((out / "cache.json").read_text())
    assert json.loads((tmp_path / "c.json").read_text())["benchmark"] == "cache"
    assert [r["ntype"] for r in rep["results"]] == ["node", "paper"]
    # the report's hit rates are the replay of the same trace, recomputed here
    with fs.open_store(homo) as s:
        tr = cp.record_trace(s, ("node", "train"), [5, 3], batch_size=128, epochs=3)
        res = sim.replay(tr, [150, 600], degree=cp.row_degree(s))
    r0 = rep["results"][0]
    assert r0["batches_per_epoch"] == tr.epoch_ptr[1] == -(-600 // 128)
    got = {(row["policy"], row["capacity_rows"]): row["hit_rate"] for row in r0["table"]}
    for p in sim.REPLAY_POLICIES:
        for k in (150, 600):
            assert got[(p, k)] == pytest.approx(res.hit_rate(p, k))
    assert all(0 <= row["hit_rate"] <= 1 for r in rep["results"] for row in r["table"])
    md = (out / "cache.md").read_text()
    assert "presample static / optimal static" in md and "SIEVE" in md
    assert "| Belady (offline optimum) |" in capsys.readouterr().out


def test_bench_all_runs_the_cache_part(tmp_path):
    from featurestore.cli import main

    out = tmp_path / "out"
    assert main(["bench", "all", "--quick", "--parts", "cache", "--workdir",
                 str(tmp_path / "data"), "--out", str(out)]) == 0
    rep = json.loads((out / "all.json").read_text())
    cache = rep["reports"]["cache"]
    assert cache["benchmark"] == "cache" and cache["results"][0]["table"]
    assert "## Feature-cache policies" in (out / "report.md").read_text()
    assert (out / "cache.json").exists()


def test_bench_cache_exit_status_says_a_store_failed(tmp_path):
    """Issue 23 item 10: a store that failed is recorded in the report and the command exits
    non-zero (it exited 0)."""
    from featurestore.cli import main

    rc = main(["bench", "cache", "--store", str(tmp_path / "nothing"), "--out",
               str(tmp_path / "out")])
    assert rc == 1
    rep = json.loads((tmp_path / "out" / "cache.json").read_text())
    assert "StoreNotFoundError" in rep["results"][0]["error"]
