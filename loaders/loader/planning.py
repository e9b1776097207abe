"""The loader's memory plan at setup: its inputs, the batches measured for it, the topology
held resident when the features do not fit, and the feature caches it sizes.

:func:`plan_memory` is the glue between a loader being built and
:mod:`loaders.memory` (whose :func:`~loaders.memory.budget.plan_loader` does the arithmetic
and :mod:`~loaders.memory.cache` the caches). It reads the loader's sampler, features and
options, and sets its ``plan``, its caches and, for a resident topology, a new sampler.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import torch

from featurestore.format import names as fmt
from loaders.errors import LoaderMemoryError
from loaders.memory.budget import (
    LAYOUT_BUFFERS,
    MARGIN_MIN,
    MARGIN_SHARE,
    available_memory,
    cgroup_memory_limit,
    format_bytes,
    limit_allocator_slack,
    loader_plan_inputs,
    parse_size,
    plan_loader,
    resident_bytes,
    resident_indptr_dtype,
)
from loaders.memory.cache import (
    PARALLEL_GATHER_ROWS,
    FeatureCache,
    degree_counts,
    presample_counts,
    presample_scores,
    rank_rows,
)
from loaders.memory.gpu_cache import GpuTier, gpu_tier_rows
from loaders.sample.packed import PackedIds, pack_ids, packed_bits
from loaders.sample.seeds import order_bytes
from loaders.sample.sampler import CSCGraph, NeighborSampler

__all__ = ["plan_memory", "build_gpu_tiers", "max_batch_seeds", "resident_topology"]


def in_thread(fn, *args):
    """``fn(*args)`` on a thread of its own (joined): what it keeps per thread (the sampler's
    id maps) is freed when it ends."""
    box: dict = {}

    def body():
        try:
            box["out"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["exc"] = e

    t = threading.Thread(target=body, name="loader-plan", daemon=True)
    t.start()
    t.join()
    if "exc" in box:
        raise box["exc"]
    return box["out"]


def plan_memory(ld, memory, cache, topology, staging_bytes: int, presample_epochs: int) -> None:
    """Make ``ld.plan``; when the features do not fit, hold the topology resident and build
    the feature caches (see :mod:`loaders.memory.budget`). ``ld``: the loader being built."""
    if memory is None and cache is None:
        return  # no budget asked and no cache wanted: the page cache decides, as before
    limit_allocator_slack()  # the compile pass's freed buffers go back to the system
    in_thread(_compile_kernels, ld)  # before the budget is read: compiled code is counted
    if memory is None:
        budget, source = available_memory(), "available to this process (cgroup or RAM)"
        if topology in ("memory", "packed"):  # the copy asked for is held already, so in
            # what available_memory() took off; the plan counts it itself
            budget += _topology_bytes(ld.sampler.graph)
    else:
        budget, source = parse_size(memory), "memory= argument"
    lim = cgroup_memory_limit() if memory is None else None
    held = None if lim is None else max(0, lim - budget)  # before this loader's own arrays
    policy = None if cache is None else ("presample" if cache == "auto" else cache)
    g, gather = ld.sampler.graph, ld.gatherer
    # a resident copy made here packs its neighbour ids; one asked for is already made
    resident = (resident_bytes(g, pack=True) if topology is None
                else (_topology_bytes(g), _graph_bits(g)))
    common = dict(
        budget=budget, budget_source=source, topology_bytes=_topology_bytes(g),
        resident_topology_bytes=resident[0], topology_bits=resident[1],
        inputs_bytes=order_bytes(ld.input_nodes.shape[0]),  # the inputs are held already
        edge_row_bytes=gather.edge_attrs.row_bytes(),
        num_nodes=dict(g.num_nodes), cache=policy, disjoint=ld.sampler.disjoint,
        topology="memory" if topology == "packed" else topology,
        **loader_plan_inputs(gather.features, cuda=ld.device.type == "cuda",
                             staging_bytes=staging_bytes, prefetch=ld.prefetch,
                             batches_in_flight=ld.batches_in_flight,
                             batch_dtypes=gather.feature_dtypes,
                             casts=any(c is not None for c in gather.casts.values())))
    rows, edges = _bound(ld, common["feature_row_bytes"])
    measured = dict(batch_rows=rows, edges_per_batch=edges)
    plan = plan_loader(**measured, **common)
    if not plan.fits:
        plan, measured = _measured_plan(ld, plan, common, memory, topology)
    if not plan.fits and plan.over_budget:
        plan = _fall_back(ld, plan, common, measured, memory, topology, held)
    if not plan.fits and policy is not None and common["batches_in_flight"] > 0:
        # the trade of batch buffers against cache rows (29% -> 67% hits on R-MAT 22 at
        # 1.5 GiB with one buffer instead of two); `featurestore plan` predicts their seeds/s
        plan.alternatives = [
            {"batches_in_flight": k, "planned": k == plan.batches_in_flight,
             "cache_rows": sum((plan if k == plan.batches_in_flight else plan_loader(
                 **measured, **dict(common, batches_in_flight=k))).cache_rows.values())}
            for k in LAYOUT_BUFFERS]
    ld.plan = plan
    if not plan.fits:
        _build_caches(ld, plan, policy, presample_epochs)


def _topology_bytes(graph: CSCGraph) -> int:
    return sum(p.nbytes + i.nbytes for p, i in graph.csc.values())


def _graph_bits(graph: CSCGraph) -> int:
    """The widest packed ids of ``graph``'s edge types (0: none packed)."""
    return max([i.bits for _, i in graph.csc.values() if isinstance(i, PackedIds)], default=0)


def max_batch_seeds(ld) -> dict[str, int]:
    """The most seed nodes a batch of loader ``ld`` samples from, per node type: its
    ``max_batch_seeds()`` (a link loader's endpoints: up to ``2 * (B + ceil(r * B))``), else
    ``batch_size`` of the seed type."""
    own = getattr(ld, "max_batch_seeds", None)
    return own() if own is not None else {ld.seed_type: ld.batch_size}


def _bound(ld, row_bytes: dict) -> tuple[dict[str, int], int]:
    """A bound without sampling: every type at its most rows per batch, and edges, from the
    most seed nodes a batch has (:func:`max_batch_seeds`: a link batch's endpoints). A type's
    node count bounds its rows unless the sampler is disjoint (a node once per tree)."""
    g, mult, fan = ld.sampler.graph, 1, ld.sampler.fanouts
    disjoint = ld.sampler.disjoint
    for layer in range(fan.num_layers):
        widest = max(abs(v[layer]) if v[layer] >= 0 else 10**9 for v in fan.per_etype.values())
        mult *= 1 + max(widest, 0)
    seeds = sum(max_batch_seeds(ld).values())
    bound = {t: seeds * mult if disjoint else min(n, seeds * mult)
             for t, n in g.num_nodes.items() if t in row_bytes}
    return bound, seeds * mult * max(len(g.edge_types), 1)


def _measured_plan(ld, plan, common: dict, memory, topology):
    """``(plan, its batch figures)`` from measured batches, the topology made resident first
    when the bound's plan holds it so (and it fits the budget with room to spare)."""
    limit_allocator_slack()  # freed batch arrays go back to the system, not to arenas
    resident = (plan.topology == "memory" and topology is None
                and common["resident_topology_bytes"] + plan.margin <= common["budget"])
    if not resident and topology is None and not _page_cache_counts(memory):
        common["topology"] = "mmap"  # under a cgroup it stays counted: the plan is over
    if resident:
        # resident first (read around the page cache), so that measuring batches and
        # ranking rows charge no page cache to a capped process
        t0 = time.perf_counter()
        resident_topology(ld, pack=True)
        common["topology"] = "memory"
        common["topology_bytes"] = _topology_bytes(ld.sampler.graph)
        common["resident_topology_bytes"] = common["topology_bytes"]
        common["topology_bits"] = _graph_bits(ld.sampler.graph)
        if memory is None:  # again, now that the mapped pages are gone; the resident
            # copy is in what the process holds, and the plan counts it itself
            common["budget"] = available_memory() + common["topology_bytes"]
        resident_s = time.perf_counter() - t0
    # batches for the real numbers (MEASURED_BATCHES), on a short-lived thread: the sampler's
    # per-thread id maps go with it
    rows, edges, k = in_thread(_measure_batches, ld)
    measured = dict(batch_rows=rows, edges_per_batch=edges, sampled_batches=k)
    plan = plan_loader(**measured, **common)
    if resident:
        plan.notes.append(f"topology copied in {resident_s:.1f} s")
    elif topology is None and common.get("topology") == "mmap" and plan.topology == "mmap":
        plan.notes.append("topology memory-mapped: a resident copy would not fit the budget")
    return plan, measured


def _page_cache_counts(memory) -> bool:
    """True when the budget is this process's cgroup limit: the pages of a memory-mapped
    topology are then charged to it too, so mapping it instead of copying saves nothing (and
    sampling from pages the cgroup keeps evicting crawls: 10 s a batch on R-MAT 22 at 1 GiB)."""
    return memory is None and cgroup_memory_limit() is not None


def _min_budget(plan) -> int:
    """The smallest budget B with the plan's working memory (no cache) and its margin,
    ``max(MARGIN_MIN, MARGIN_SHARE * B)``, within B."""
    fixed = plan.needed_bytes - plan.margin
    return max(fixed + MARGIN_MIN, -(-fixed * 100 // int(round((1 - MARGIN_SHARE) * 100))))


def _fall_back(ld, plan, common: dict, measured: dict, memory, topology, held):
    """A plan whose working memory fits the budget, or :class:`LoaderMemoryError`.

    In turn, while the plan is over budget: one subgraph prefetched (``prefetch=1``), then the
    topology memory-mapped instead of copied (only when the page cache is outside the budget:
    ``memory=`` given; not under a cgroup, see :func:`_page_cache_counts`; not when
    ``topology="memory"`` was asked). Each step taken is a note in the plan. The batch buffers
    stay: with one, a loop that holds a batch while asking for the next makes another past
    the plan, so that is the caller's choice (``batches_in_flight=1``). When nothing fits, the
    error, raised before the topology is copied or any batch buffer made, states the smallest
    budget that works, and the one with ``batches_in_flight=1``."""
    over, asked = plan.needed_bytes - plan.budget, plan
    kept = [n for n in plan.notes if not n.startswith("over budget")]
    taken = []
    if ld.prefetch > 1:
        ld.prefetch = 1
        common["subgraphs_in_flight"] = 1 + 3
        taken.append("one subgraph prefetched (prefetch=1)")
        plan = plan_loader(**measured, **common)
    if (plan.over_budget and topology is None and plan.topology == "memory"
            and not _page_cache_counts(memory)):
        ld.sampler = NeighborSampler(ld.store, topology="mmap", **ld.sampler_options)
        common["topology"] = "mmap"
        taken.append("the topology memory-mapped instead of copied")
        plan = plan_loader(**measured, **common)
    if plan.over_budget:
        need = _min_budget(plan)
        alt = ""
        if common["batches_in_flight"] > 1:
            one = plan_loader(**measured, **dict(common, batches_in_flight=1))
            alt = (f" A training loop that drops each batch before asking for the next can "
                   f"pass batches_in_flight=1: then {format_bytes(_min_budget(one))}.")
        limit = "" if held is None else (
            f" This process held {format_bytes(held)} before it (and the pages of its code): "
            f"a cgroup limit of about {format_bytes(need + held)}.")
        raise LoaderMemoryError(
            f"Expected a memory budget of at least {format_bytes(need)} for this loader over "
            f"{ld.store.url} (batch_size={ld.batch_size}, num_neighbors="
            f"{ld.sampler_options['num_neighbors']}, {common['batches_in_flight']} batch "
            f"buffers, prefetch=1, the topology {plan.topology}, no cache). Got "
            f"{format_bytes(plan.budget)} ({plan.budget_source}). Raise the budget (memory=, the "
            f"cgroup limit), or lower batch_size or the fanouts.{limit}{alt}\n{plan}",
            need, asked)
    plan.notes = kept + [f"over budget by {format_bytes(over)} as asked: fell back to "
                         + ", ".join(taken)]
    return plan


def _build_caches(ld, plan, policy, presample_epochs: int) -> None:
    """The hot tiers the plan sizes (ranked by ``policy``), and a cache without one for every
    other type: read around the page cache."""
    features, caches = ld.gatherer.features, ld.gatherer.caches
    policy = plan.cache_policy if policy is not None else None  # the plan may pick degree
    if policy is not None and plan.cache_rows:
        t0 = time.perf_counter()
        scores = in_thread(_rank_scores, ld, policy, presample_epochs, plan.cache_rows)
        plan.notes.append(f"{policy} ranking took {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        ids = {}
        for t, n in plan.cache_rows.items():  # every ranking freed before any cache is made
            score, deg = scores.pop(t)
            ids[t] = rank_rows(score, n, deg)
            del score, deg
        for t in plan.cache_rows:
            caches[t] = FeatureCache(features[t], ids.pop(t), pin=ld.pin,
                                     read_path=plan.read_path)
        plan.notes.append(f"cache filled in {time.perf_counter() - t0:.1f} s")
    for t, f in features.items():  # types without a hot tier: read around the cache
        if t not in caches:
            caches[t] = FeatureCache(f, np.empty(0, np.int64), pin=ld.pin,
                                     read_path=plan.read_path)


def _compile_kernels(ld) -> None:
    """Compile (or load from numba's cache) what the plan's passes and a batch run: one
    small batch sampled, the gather's kernels on a few rows."""
    order = ld.batch_order(0)
    if order:
        ld.sample_batch(0, 0, order[0][:64])
    _compile_gather(ld, "direct")


def _compile_gather(ld, read_path: str) -> None:
    """Run a batch's gather kernels once on a few rows (a tiny cache, the serial and the
    parallel variants, the cast when ``dtype=`` asks one) before the caches and batch buffers
    take the budget. Compiled at the first batch instead, over a budget planned to the byte,
    numba's compiler pushed a capped process with a cold kernel cache into thrashing (the
    first R-MAT 22 run under memcap after the layout change: anon at the cap for minutes)."""
    g = ld.gatherer
    for t, f in g.features.items():
        k = min(int(f.shape[0]), PARALLEL_GATHER_ROWS)
        if k < 4 or not f.reader.is_local:  # a remote store: no reads at construction
            continue
        ids = np.resize(np.arange(4, dtype=np.int64), k)  # 2 hits, 2 misses: 2 rows read
        c = FeatureCache(f, ids[:2], pin=False, read_path=read_path)
        try:
            out = np.empty((k,) + tuple(f.shape[1:]), dtype=g.feature_dtypes[t])
            stage = (np.empty((min(k, 256),) + tuple(f.shape[1:]), f.dtype)
                     if g.casts[t] is not None else None)
            for n in sorted({4, k}):  # the serial and (for k large enough) parallel kernels
                c.gather(ids[:n], out=out[:n], stage=stage)
        finally:
            c.close()


#: batches of epoch 0 (evenly spaced; all of a shorter epoch) whose most distinct rows size
#: the batch buffers. 8 missed a batch of hub seeds among 29 (issue 23 item 6): a batch past
#: the plan's rows is counted in ``stats.past_plan_*`` and warned of. 32 costs ~1.8 s on
#: R-MAT 22 (57 ms a batch, sampling only).
MEASURED_BATCHES = 32


def _measure_batches(ld, k: int = MEASURED_BATCHES) -> tuple[dict[str, int], int, int]:
    """Most distinct rows per type and most edges over ``k`` batches of epoch 0."""
    order = ld.batch_order(0)
    pick = np.linspace(0, len(order) - 1, min(k, len(order))).astype(int) if order else []
    rows = {t: 0 for t in ld.gatherer.features}
    edges = 0
    for j in sorted(set(int(i) for i in pick)):
        sub = ld.sample_batch(0, j, order[j])
        for t in rows:
            rows[t] = max(rows[t], int(sub.node[t].shape[0]))
        edges = max(edges, sub.num_edges)
    return rows, edges, len(pick)


def resident_topology(ld, pack: bool) -> None:
    """Copy the CSC arrays into the process, reading around the page cache, and sample
    from the copy; ``pack``: neighbour ids bit-packed where that is smaller (read in
    pieces, so the plain array is never held whole)."""
    store, g = ld.store, ld.sampler.graph
    csc = {}
    for et, (p, i) in g.csc.items():
        arrs = []
        bits = packed_bits(i, g.num_nodes[et.src]) if pack else 0
        for name, a in (("indptr", p), ("indices", i)):
            rows = (store.row_reader(fmt.edge_key(et, name))
                    if hasattr(store, "row_reader") else None)
            local = rows is not None and rows.is_local
            if name == "indices" and bits:
                arrs.append(pack_ids(a, g.num_nodes[et.src],
                                     read=rows.read_range if local else None))
            elif local:
                arrs.append(rows.read_all())
            else:
                arrs.append(np.array(a))
            if local:
                rows.release_pages()  # pages a validation pass read through the map
        arrs[0] = arrs[0].astype(resident_indptr_dtype(arrs[0]), copy=False)
        csc[et] = tuple(arrs)
    # the same files the store validated (its csc() gave the sampler's graph): no second pass
    graph = CSCGraph(dict(g.num_nodes), csc, validated=True)
    ld.sampler = NeighborSampler(graph, **ld.sampler_options)


def count_dtype(graph, ld, epochs) -> np.dtype:
    """int32 for the ranking's degrees and access counts when no count can reach ``2**31``
    (edges, and the rows ``epochs`` presampled epochs can touch), else int64."""
    edges = sum(int(i.shape[0]) for _, i in graph.csc.values())
    if ld.plan is None or not ld.plan.batch_rows:  # no measured batch size: stay wide
        return np.dtype(np.int64)
    rows = sum(ld.plan.batch_rows.values())
    batches = len(ld.batch_order(0)) * max(1, int(epochs))
    return np.dtype(np.int32 if max(edges, rows * batches) < 2**31 - 1 else np.int64)


def _rank_scores(ld, policy, epochs, cache_rows) -> dict:
    """Per type: ``(score, degree)``: the rank of each row (ties broken by degree).

    ``"degree"``: how often the node is a neighbour. ``"presample"``: accesses counted by
    a sampling-only pass over ``epochs`` epochs of batches (the first ones this loader
    will run), shrunk towards the mean count of nodes of the same degree
    (:func:`~loaders.memory.cache.presample_scores`), so that rows seen once by chance do not
    outrank rows the next epochs will need.
    """
    ntypes = list(cache_rows)
    g = ld.sampler.graph
    dt = count_dtype(g, ld, epochs)
    deg = {t: degree_counts(g, t, dt) for t in ntypes}
    if policy == "degree":
        return {t: (deg[t], deg[t]) for t in ntypes}
    counts, nn = None, dict(g.num_nodes)
    for e in range(max(1, int(epochs))):
        order = ld.batch_order(e)
        c = presample_counts(ld.sampler, (ld.batch_seeds(p) for p in order),
                             ld.seed_type, ntypes, seed=ld.seed, epoch=e, num_nodes=nn,
                             dtype=dt)
        if counts is None:
            counts = c
        else:
            for t in ntypes:
                counts[t] += c[t]
        del c
    # counts, degrees and scores: RANK_ROW_BYTES["presample"] a row at the peak
    return {t: (presample_scores(counts.pop(t), deg[t]), deg[t]) for t in ntypes}


def build_gpu_tiers(ld, gpu_cache_bytes: int, presample_epochs: int) -> None:
    """The GPU tiers of ``gpu_cache_bytes`` (shared by the node types in proportion to their
    feature bytes): each type's hottest rows by the presample ranking (every row when they
    all fit), filled through the loader's own reads (cache included). Rows are held in the
    narrower of the store's and the batch's dtype (an fp16 store's rows stay fp16 for fp32
    batches, cast on the device as they are copied out: twice the rows in the same bytes)."""
    g = ld.gatherer
    held = {t: min(np.dtype(g.feature_dtypes[t]), np.dtype(f.dtype), key=lambda d: d.itemsize)
            for t, f in g.features.items()}
    row_bytes = {t: int(held[t].itemsize * np.prod(f.shape[1:]))
                 for t, f in g.features.items()}
    total = sum(f.shape[0] * row_bytes[t] for t, f in g.features.items())
    if not total:
        return
    rows = {t: gpu_tier_rows(gpu_cache_bytes * (f.shape[0] * row_bytes[t]) // total,
                             row_bytes[t], f.shape[0]) for t, f in g.features.items()}
    rows = {t: k for t, k in rows.items() if k}
    partial = {t: k for t, k in rows.items() if k < g.features[t].shape[0]}
    scores = in_thread(_rank_scores, ld, "presample", presample_epochs, partial) if partial else {}
    t0 = time.perf_counter()
    for t, k in rows.items():
        f = g.features[t]
        if t in scores:
            score, deg = scores.pop(t)
            ids = rank_rows(score, k, deg)
        else:
            ids = np.arange(k, dtype=np.int64)

        def fill(ids, out, t=t, f=f):
            buf = np.empty((ids.shape[0],) + f.shape[1:], f.dtype)
            g._read(t, np.ascontiguousarray(ids), buf)
            out.copy_(torch.from_numpy(buf))

        step = max(1, (16 << 20) // max(1, f.row_bytes))
        g.gpu_tiers[t] = GpuTier(f.shape[0], ids, fill, f.shape[1:],
                                 torch.from_numpy(np.empty(0, held[t])).dtype,
                                 ld.device, chunk_rows=step)
    ld.stats.reset()  # the fill's cache reads are not the batches'
    if ld.plan is not None:
        ld.plan.notes.append(f"GPU tier: {sum(rows.values()):,} rows filled in "
                             f"{time.perf_counter() - t0:.1f} s")
