"""The memory budget: sizes, cgroup limits, the plan's arithmetic by hand, and a budgeted
loader under a real memory cgroup (``memcap``) that must not be OOM-killed or exceed its plan."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from loaders.memory.budget import (MARGIN_MIN, ROWS_HEADROOM, available_memory, cgroup_memory_limit,
                            parse_size, plan_loader)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def memcap_path() -> str | None:
    p = os.environ.get("FEATURESTORE_MEMCAP") or os.path.join(ROOT, "..", "shared", "tools",
                                                              "memcap")
    return p if os.path.exists(p) else None


def run_capped(cap: str, code: str, timeout: int = 120) -> tuple[int, str, str]:
    mc = memcap_path()
    if mc is None:
        pytest.skip("memcap not found (set FEATURESTORE_MEMCAP)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, mc, cap, "--", sys.executable, "-c", code],
                       capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    if p.returncode == 3 and "no memory cgroup" in p.stderr or "cannot make" in p.stderr:
        pytest.skip(f"memcap cannot make a cgroup here: {p.stderr.strip()[-200:]}")
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("text,want", [
    ("1.5GiB", 3 << 29), ("512M", 512 << 20), ("2G", 2 << 30), ("3GB", 3 << 30),
    ("100 MiB", 100 << 20), ("64k", 64 << 10), (12345, 12345), ("7", 7), ("1.5 gib", 3 << 29),
])
def test_parse_size(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("text", ["2GB", "2GiB", "2G", "2gb", "2 GiB", 2 << 30])
def test_gb_is_gib_for_memory_and_preprocess(text):
    """One meaning of "GB" for every entry point: 2**30 bytes, as ``preprocess --memory``."""
    from preprocess import parse_size as preprocess_parse_size

    assert parse_size(text) == preprocess_parse_size(text) == 2 << 30


@pytest.mark.parametrize("text", ["2GB", "2GiB"])
def test_loader_memory_reads_gb_as_gib(homo_store, text):
    from loaders import NeighborLoader

    ld = NeighborLoader(homo_store, num_neighbors=[5, 3], input_nodes="train", batch_size=64,
                        device="cpu", memory=text)
    assert ld.plan.budget == 2 << 30 and ld.plan.budget_source == "memory= argument"


@pytest.mark.parametrize("bad", ["lots", "-1G", "1.5XB", -5])
def test_parse_size_refuses(bad):
    with pytest.raises(ValueError, match="memory size"):
        parse_size(bad)


def _tree(root, files: dict[str, str]):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_cgroup_v1_limit_is_the_tightest_ancestor(tmp_path):
    cg = tmp_path / "cgroup"
    _tree(cg, {"memory/memory.limit_in_bytes": str(2**63 - 4096),
               "memory/job/memory.limit_in_bytes": str(3 << 30),
               "memory/job/step/memory.limit_in_bytes": str(5 << 30)})
    proc = tmp_path / "self_cgroup"
    proc.write_text("12:cpu:/\n4:memory:/job/step\n0::/\n")
    assert cgroup_memory_limit(str(proc), str(cg)) == 3 << 30
    proc.write_text("4:memory:/\n")
    assert cgroup_memory_limit(str(proc), str(cg)) is None  # the root's "no limit" value


def test_cgroup_v2_limit(tmp_path):
    cg = tmp_path / "cgroup"
    _tree(cg, {"cgroup.controllers": "cpu memory", "memory.max": "max",
               "user.slice/memory.max": "max", "user.slice/job/memory.max": str(700 << 20)})
    proc = tmp_path / "self_cgroup"
    proc.write_text("0::/user.slice/job\n")
    assert cgroup_memory_limit(str(proc), str(cg)) == 700 << 20
    proc.write_text("0::/user.slice\n")
    assert cgroup_memory_limit(str(proc), str(cg)) is None
    assert cgroup_memory_limit(str(tmp_path / "missing"), str(cg)) is None


def test_cgroup_cpu_quota_v1_and_v2(tmp_path):
    """The tightest CPU quota of the cgroup and its ancestors, in cores; none where every
    level says "max" (v2) or -1 (v1)."""
    from featurestore.sysmem import cgroup_cpu_quota

    v2 = tmp_path / "v2"
    _tree(v2, {"cgroup.controllers": "cpu memory", "cpu.max": "max 100000",
               "job.slice/cpu.max": "300000 100000", "job.slice/step/cpu.max": "max 100000"})
    proc = tmp_path / "self_cgroup"
    proc.write_text("0::/job.slice/step\n")
    assert cgroup_cpu_quota(str(proc), str(v2)) == 3.0
    proc.write_text("0::/\n")
    assert cgroup_cpu_quota(str(proc), str(v2)) is None
    v1 = tmp_path / "v1"
    _tree(v1, {"cpu,cpuacct/cpu.cfs_quota_us": "-1", "cpu,cpuacct/cpu.cfs_period_us": "100000",
               "cpu,cpuacct/job/cpu.cfs_quota_us": "150000",
               "cpu,cpuacct/job/cpu.cfs_period_us": "100000"})
    proc.write_text("4:cpu,cpuacct:/job\n3:memory:/job\n")
    assert cgroup_cpu_quota(str(proc), str(v1)) == 1.5
    proc.write_text("4:cpu,cpuacct:/\n")
    assert cgroup_cpu_quota(str(proc), str(v1)) is None
    assert cgroup_cpu_quota(str(tmp_path / "missing"), str(v1)) is None


def test_available_cpus_is_the_affinity_capped_by_the_quota(tmp_path):
    from featurestore.sysmem import available_cpus

    cores = len(os.sched_getaffinity(0))
    v2 = tmp_path / "cg"
    _tree(v2, {"cgroup.controllers": "cpu", "a/cpu.max": "150000 100000",
               "b/cpu.max": f"{(cores + 8) * 100000} 100000"})
    proc = tmp_path / "self_cgroup"
    proc.write_text("0::/a\n")
    assert available_cpus(str(proc), str(v2)) == min(cores, 2)  # 1.5 cores: 2 threads
    proc.write_text("0::/b\n")
    assert available_cpus(str(proc), str(v2)) == cores  # a quota above the affinity


def test_the_ranking_is_planned_in_the_cache_bytes():
    """Ranking the cached types' rows runs before the cache is made, in its bytes: 16 bytes a
    row (presample: int32 counts and degrees, float64 scores) or 4 (degree) plus 8 a chosen
    row; a plan whose cache cannot hold the presample ranking ranks by degree (issue 23
    item 6: 512 MiB of ranking arrays on an 8M-row store given 300 MiB)."""
    MiB = 1 << 20
    n = 8_000_000
    common = dict(budget_source="test", feature_row_bytes={"p": 256}, feature_rows={"p": n},
                  topology_bytes=0, num_nodes={"p": n}, batch_rows={"p": 1000},
                  edges_per_batch=10_000, batches_in_flight=1, subgraphs_in_flight=1,
                  topology="mmap")
    fixed = plan_loader(budget=4 << 30, cache=None, **common)
    base = fixed.planned_bytes - fixed.margin  # the working memory, no cache
    for cache_mib, policy in ((400, "presample"), (60, "degree"), (2, "degree")):
        budget = base + 64 * MiB + 4 * n + cache_mib * MiB  # margin, position map, rows
        plan = plan_loader(budget=budget, **common)
        k = plan.cache_rows["p"]
        assert plan.cache_policy == policy and k > 0
        per_row = {"presample": 16, "degree": 4}[policy]
        assert per_row * n + 8 * k <= plan.cache_bytes  # by hand: the ranking fits
        if policy == "degree":  # and presample's would not have
            assert 16 * n + 8 * k > plan.cache_bytes and "ranked by degree" in str(plan)
        assert plan.planned_bytes <= budget


def test_plan_arithmetic_by_hand():
    MiB = 1 << 20
    common = dict(budget_source="test", feature_row_bytes={"p": 1536, "a": 512},
                  feature_rows={"p": 100_000, "a": 50_000}, topology_bytes=10 * MiB,
                  num_nodes={"p": 100_000, "a": 50_000, "i": 1000},
                  batch_rows={"p": 10_000, "a": 2_000}, edges_per_batch=30_000,
                  batches_in_flight=2, subgraphs_in_flight=4, scratch_bytes=3 * MiB)
    # by hand:
    rows_p, rows_a = 10_500, 2_100  # ceil(1.05 * rows)
    assert ROWS_HEADROOM == 1.05 and MARGIN_MIN == 64 * MiB
    batch = rows_p * 1536 + rows_a * 512  # 17,203,200
    sampler = 4 * (30_000 * 40 + (rows_p + rows_a) * 8) + 4 * 151_000  # 5,807,200
    features = 100_000 * 1536 + 50_000 * 512  # 179,200,000
    budget = 200 * MiB
    margin = 64 * MiB  # 3% of 200 MiB is less than the minimum
    plan = plan_loader(budget=budget, **common)
    assert plan.batch_rows == {"p": rows_p, "a": rows_a}
    assert plan.batch_bytes == batch == 17_203_200
    assert plan.sampler_bytes == sampler == 5_807_200
    assert plan.margin == margin
    assert plan.feature_bytes == features
    assert not plan.fits and plan.topology == "memory" and plan.read_path == "direct"
    left = budget - 2 * batch - sampler - 3 * MiB - margin - 10 * MiB
    assert left == 209_715_200 - 34_406_400 - 5_807_200 - 3_145_728 - 67_108_864 - 10_485_760
    # split by batch bytes: p gets 16,128,000 / 17,203,200 of it, a the rest
    share_p = left * (rows_p * 1536) // batch
    share_a = left * (rows_a * 512) // batch
    n_p = (share_p - 4 * 100_000) // 1536
    n_a = (share_a - 4 * 50_000) // 512
    assert plan.cache_rows == {"p": n_p, "a": n_a}
    assert plan.cache_bytes == n_p * 1536 + 400_000 + n_a * 512 + 200_000
    assert plan.planned_bytes <= budget
    assert budget - plan.planned_bytes < 1536 + 512  # all but rounding is spent
    # the whole store fits: no cache, memory-mapped topology, the page cache serves rows
    big = plan_loader(budget=4 << 30, **common)
    assert big.fits and not big.cache_rows and big.topology == "mmap"
    assert big.margin == int(0.03 * (4 << 30))
    # too small for even the buffers: no cache and a note saying so
    tiny = plan_loader(budget=40 * MiB, **common)
    assert not tiny.fits and not tiny.cache_rows and "over budget" in tiny.notes[0]
    # the seed inputs' epoch order is charged before the cache: the cache loses those bytes
    with_order = plan_loader(budget=budget, inputs_bytes=4 * MiB, **common)
    assert with_order.inputs_bytes == 4 * MiB
    assert plan.cache_bytes - with_order.cache_bytes >= 4 * MiB - 2 * (1536 + 512)
    assert with_order.planned_bytes <= budget and "seed inputs" in with_order.table()
    # edge rows: 30,000 edges x 20 bytes, one batch per batch in flight (2 here)
    edged = plan_loader(budget=budget, edge_row_bytes=20, **common)
    assert edged.edge_bytes == 600_000 and edged.buffer_bytes == 2 * batch + 2 * 600_000
    assert plan.cache_bytes - edged.cache_bytes >= 1_200_000 - 2 * (1536 + 512)
    # an explicit memory-mapped topology is not counted in the plan
    mm = plan_loader(budget=budget, topology="mmap", **common)
    assert mm.topology == "mmap" and mm.cache_bytes > plan.cache_bytes


def test_available_memory_follows_the_cgroup_limit():
    assert 0 < available_memory()
    code = ("from loaders.memory.budget import cgroup_memory_limit, available_memory, "
            "process_anon_bytes as a; print(cgroup_memory_limit(), available_memory(), a())")
    rc, out, err = run_capped("900M", code)
    assert rc == 0, err
    lim, avail, anon = (int(x) for x in out.split())
    assert lim == 900 << 20
    assert -(1 << 20) <= lim - avail - anon < 16 << 20  # the limit less what it holds


LOADER_RUN = textwrap.dedent("""
    import json, sys, numpy as np, torch
    import featurestore as fs
    from loaders import NeighborLoader
    from loaders.memory.budget import process_anon_bytes
    s = fs.open_store(sys.argv[1], io_threads=16)
    F = s.features()
    anon0 = process_anon_bytes()
    ld = NeighborLoader(s, num_neighbors=[10, 5], input_nodes="train", batch_size=256,
                        shuffle=True, device="cpu", memory=MEMORY)
    rows = 0
    for ep in range(2):
        for k, mb in enumerate(ld):
            ids = mb.subgraph.node["node"]
            if k < 2:
                ref = F.gather(ids[:500], read_path="direct")
                assert np.array_equal(mb.x["node"][:500].numpy(), ref)
            rows += ids.shape[0]
            del mb
    print("RESULT " + json.dumps(dict(anon0=anon0, plan=ld.plan.as_dict(), rows=rows,
                                      hit_rate=ld.stats.hit_rate, overflows=ld.stats.overflows)))
""").replace("sys.argv[1]", "STORE")


@pytest.fixture(scope="module")
def capped_store(tmp_path_factory):
    """~200 MB of fp16 x 768 features on a skewed graph."""
    from loaders.datasets.synthetic import power_law_store

    return power_law_store(tmp_path_factory.mktemp("capped") / "s", num_nodes=131_072,
                           num_edges=1_200_000, feat_dim=768, dtype=np.float16, num_classes=4,
                           train_frac=0.025, seed=3)


def test_budgeted_loader_stays_in_its_plan_under_memcap(capped_store):
    # the runtime (python, torch, numba) holds ~200 MB; the cap leaves the loader about
    # a quarter of the features' 200 MB for a cache
    code = LOADER_RUN.replace("STORE", repr(str(capped_store)))
    # once without a tight cap first, with a small explicit budget so that it takes the same
    # cached path: numba compiles (and caches) any kernel not yet in its on-disk cache there,
    # so the capped run measures the loader, not LLVM's compile memory (a fresh checkout, as
    # in CI, has no cache)
    run_capped("4G", code.replace("MEMORY", repr("100MB")), timeout=300)
    rc, out, err = run_capped("330M", code.replace("MEMORY", "None"), timeout=180)
    m = re.search(r"memcap: .*peak_anon=([\d.]+)GiB .*oom_kills=(\d+)", err)
    assert m, err[-2000:]
    assert rc == 0 and m.group(2) == "0", err[-2000:]
    res = json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:])
    plan = res["plan"]
    assert not plan["fits"] and plan["cache_rows"]["node"] > 0, plan
    assert plan["topology"] == "memory" and plan["read_path"] == "direct"
    assert res["overflows"] == 0 and res["rows"] > 0 and res["hit_rate"] > 0.2
    peak_anon = float(m.group(1)) * (1 << 30)
    # what the process held before the loader, plus the plan (its margin included), plus
    # memcap's resolution: it prints GiB with two decimals (up to 5.1 MiB rounded up)
    slack = (8 << 20) + (1 << 30) // 200
    assert peak_anon <= res["anon0"] + plan["planned_bytes"] + slack, (peak_anon, res)


@pytest.mark.slow
def test_gigabyte_store_under_a_third_of_its_size(tmp_path):
    """Slow (run by name, ``-m slow``): a 2.5 GB feature store loaded under an 800 MB cgroup:
    no OOM kill, the batches' features equal direct reads, the peak within the plan."""
    from loaders.datasets.synthetic import power_law_store

    path = power_law_store(tmp_path / "big", num_nodes=1_600_000, num_edges=16_000_000,
                           feat_dim=768, dtype=np.float16, num_classes=4, train_frac=0.003,
                           seed=4)
    code = LOADER_RUN.replace("STORE", repr(str(path)))
    run_capped("4G", code.replace("MEMORY", repr("200MB")), timeout=900)  # numba's cache
    rc, out, err = run_capped("800M", code.replace("MEMORY", "None"), timeout=900)
    m = re.search(r"memcap: .*peak_anon=([\d.]+)GiB .*oom_kills=(\d+)", err)
    assert m and rc == 0 and m.group(2) == "0", err[-2000:]
    res = json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:])
    assert not res["plan"]["fits"] and res["rows"] > 0 and res["overflows"] == 0
    peak_anon = float(m.group(1)) * (1 << 30)
    assert peak_anon <= res["anon0"] + res["plan"]["planned_bytes"] + (16 << 20), (peak_anon, res)


def test_over_budget_falls_back_then_names_the_smallest_budget(capped_store):
    """Issue 22: a plan over its budget before any cache falls back (one subgraph prefetched,
    a memory-mapped topology: ``memory=`` leaves the page cache outside the budget) and says
    so; below what even that needs, a named error gives the smallest budget, and that budget
    works (1 MiB less does not), as does the one it gives for ``batches_in_flight=1``."""
    import featurestore as fs
    from loaders import NeighborLoader
    from loaders.errors import LoaderMemoryError

    kw = dict(num_neighbors=[15, 10, 5], input_nodes="train", batch_size=1024, device="cpu",
              cache="degree")
    with fs.open_store(capped_store) as s:
        with pytest.raises(LoaderMemoryError, match="at least .* MiB") as e:
            NeighborLoader(s, memory="70MiB", **kw)
        need = e.value.min_budget
        assert need > 70 << 20 and isinstance(e.value, MemoryError)
        assert e.value.plan.batches_in_flight == 2 and e.value.plan.topology == "memory"
        one = re.search(r"batches_in_flight=1: then ([\d.]+) MiB", str(e.value))
        with pytest.raises(LoaderMemoryError):
            NeighborLoader(s, memory=need - (1 << 20), **kw)
        ld = NeighborLoader(s, memory=need, **kw)
        plan = ld.plan
        assert not plan.over_budget and plan.needed_bytes <= need
        assert (ld.batches_in_flight, ld.prefetch, plan.topology) == (2, 1, "mmap")
        assert any("fell back to one subgraph prefetched" in n for n in plan.notes)
        F = s.features()
        for _, mb in zip(range(2), ld):  # right rows from the memory-mapped topology
            ids = mb.subgraph.node["node"]
            assert np.array_equal(mb.x["node"].numpy(), F.gather(ids, read_path="direct"))
        # the smaller budget the error gave for one batch buffer works with one
        small = int(float(one.group(1)) * (1 << 20)) + (1 << 20)  # printed to 0.01 MiB
        assert small < need
        NeighborLoader(s, memory=small, batches_in_flight=1, **kw)
        # with room for the resident topology's copy, it is copied
        roomier = NeighborLoader(s, memory=need + (16 << 20), **kw)
        assert roomier.plan.topology == "memory" and not roomier.plan.over_budget


def test_over_budget_loader_under_memcap_stops_then_trains(capped_store):
    """Under a cgroup too small for the loader (two batch buffers of ~110 MiB), it stops with
    LoaderMemoryError before its first batch, naming the cgroup limit that works; under that
    limit it trains, not OOM-killed, its peak within 5% of the plan plus what the process
    held before it. (Under a cgroup the topology is not memory-mapped to save budget: its
    pages would be charged there too.)"""
    code = LOADER_RUN.replace("STORE", repr(str(capped_store))).replace(
        "num_neighbors=[10, 5], input_nodes=\"train\", batch_size=256",
        "num_neighbors=[15, 10, 5], input_nodes=\"train\", batch_size=1024")
    assert "[15, 10, 5]" in code
    run_capped("4G", code.replace("MEMORY", repr("400MB")), timeout=300)  # numba's cache
    rc, out, err = run_capped("360M", code.replace("MEMORY", "None"), timeout=300)
    m = re.search(r"memcap: .*oom_kills=(\d+)", err)
    assert m and m.group(1) == "0" and rc == 1 and "LoaderMemoryError" in err, err[-2000:]
    limit = re.search(r"a cgroup limit of about ([\d.]+) MiB", err)
    assert limit, err[-2000:]
    cap = int(float(limit.group(1))) + 2
    rc, out, err = run_capped(f"{cap}M", code.replace("MEMORY", "None"), timeout=300)
    m = re.search(r"memcap: .*peak_anon=([\d.]+)GiB .*oom_kills=(\d+)", err)
    assert m and rc == 0 and m.group(2) == "0", (cap, err[-2000:])
    res = json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:])
    plan = res["plan"]
    assert res["rows"] > 0 and res["overflows"] == 0 and plan["batches_in_flight"] == 2
    peak_anon = float(m.group(1)) * (1 << 30)
    assert peak_anon <= 1.05 * (res["anon0"] + plan["planned_bytes"]), (peak_anon, res)


@pytest.mark.slow
def test_cold_numba_cache_loader_and_job_under_memcap(capped_store, tmp_path, monkeypatch):
    """Slow (run by name, ``-m slow``; issue 22 item 2, issue 19 item 6): from an empty numba
    cache, under memcap, the first budgeted loader run and the first preprocessing job under
    ``--memory`` finish without an OOM kill (numba compiles before the budget is measured)."""
    peaks = {}
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-loader"))
    code = LOADER_RUN.replace("STORE", repr(str(capped_store))).replace("MEMORY", "None")
    rc, out, err = run_capped("330M", code, timeout=1200)
    m = re.search(r"memcap: .*peak_anon=([\d.]+)GiB .*oom_kills=(\d+)", err)
    assert m and rc == 0 and m.group(2) == "0", err[-2000:]
    peaks["loader"] = m.group(0)
    assert os.listdir(tmp_path / "numba-loader")  # it did compile into the empty cache
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-job"))
    rng = np.random.default_rng(0)
    np.save(tmp_path / "e.npy", rng.integers(0, 1_000_000, (2, 4_000_000)).astype(np.int32))
    mc = memcap_path()
    cli = os.path.join(os.path.dirname(sys.executable), "featurestore")
    p = subprocess.run([sys.executable, mc, "400M", "--", cli, "preprocess", "edges",
                        str(tmp_path / "e.npy"), str(tmp_path / "s"), "--memory", "64M",
                        "--no-progress"],
                       capture_output=True, text=True, timeout=1200, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    m = re.search(r"memcap: .*peak_anon=([\d.]+)GiB .*oom_kills=(\d+)", p.stderr)
    assert m and p.returncode == 0 and m.group(2) == "0", p.stderr[-2000:]
    peaks["job"] = m.group(0)
    print(peaks)


def test_plan_lists_the_cache_of_each_batch_buffer_layout(capped_store):
    """With a cache, the plan lists the cache rows of 1, 2 and 3 batch buffers at its budget:
    exactly the cache of the same loader built with that batches_in_flight."""
    import featurestore as fs
    from graph_helpers import probe_plan
    from loaders import NeighborLoader
    from loaders.memory.budget import LAYOUT_BUFFERS

    kw = dict(num_neighbors=[10, 5], input_nodes="train", batch_size=256, device="cpu",
              cache="degree")
    with fs.open_store(capped_store) as s:
        asked = probe_plan(s, **{k: v for k, v in kw.items() if k != "cache"})
        memory = asked.needed_bytes + asked.feature_bytes // 4
        built = {k: NeighborLoader(s, memory=memory, batches_in_flight=k, **kw)
                 for k in LAYOUT_BUFFERS}
        two = built[2].plan
        assert [a["batches_in_flight"] for a in two.alternatives] == list(LAYOUT_BUFFERS)
        for a in two.alternatives:
            assert a["cache_rows"] == sum(built[a["batches_in_flight"]].plan.cache_rows.values())
            assert a["planned"] == (a["batches_in_flight"] == 2)
        rows = [a["cache_rows"] for a in two.alternatives]
        assert rows[0] > rows[1] > rows[2] or rows[2] == 0 < rows[1] < rows[0]
        assert "layouts" in str(two) and f"{rows[0]:,} cache rows" in str(two)
        assert built[1].plan.alternatives == [dict(a, planned=a["batches_in_flight"] == 1)
                                              for a in two.alternatives]


def test_a_batch_past_the_planned_rows_is_counted_and_named(capped_store, monkeypatch, caplog):
    """A batch with more distinct rows than the plan's buffers hold (the measured batches were
    smaller) is counted in ``stats.past_plan_*`` with the bytes past the plan, computed here
    from the batches themselves, and warned of once; the batches' rows stay right."""
    import featurestore as fs
    from graph_helpers import probe_plan
    from loaders import NeighborLoader
    from loaders.loader import planning

    real = planning._measure_batches

    def small(ld, k=8):  # batches measured at a fifth of their rows
        rows, edges, n = real(ld, k)
        return {t: max(1, r // 5) for t, r in rows.items()}, edges, n

    monkeypatch.setattr(planning, "_measure_batches", small)
    kw = dict(num_neighbors=[10, 5], input_nodes="train", batch_size=256, device="cpu",
              cache="degree", batches_in_flight=1, output="pyg")
    with fs.open_store(capped_store) as s:
        asked = probe_plan(s, **{k: v for k, v in kw.items() if k != "cache"})
        ld = NeighborLoader(s, memory=asked.needed_bytes + asked.feature_bytes // 4, **kw)
        assert not ld.plan.fits
        planned = ld.plan.batch_rows["node"]
        feats = s.features("node")
        sizes, ok = [], True
        with caplog.at_level("WARNING", logger="loaders.loader.gather"):
            for b in ld:
                n = b.n_id.shape[0]
                sizes.append(n)
                ids = b.n_id.numpy()
                order = np.argsort(ids)
                want = np.empty((n, feats.shape[1]), feats.dtype)
                want[order] = feats[ids[order]]
                ok &= bool(np.array_equal(b.x.numpy(), want))  # (fp16 rows cast to fp32)
                row_bytes = b.x.element_size() * b.x.shape[1]  # the batch buffer's rows
                del b
        past = [n for n in sizes if n > planned]
        assert past and ok
        st = ld.stats
        assert st.past_plan_batches == len(past)
        assert st.past_plan_bytes == max(past) * row_bytes  # its own buffer, whole
        warned = [r for r in caplog.records if "more than the" in r.getMessage()]
        assert len(warned) == 1 and f"{planned}" in warned[0].getMessage()
