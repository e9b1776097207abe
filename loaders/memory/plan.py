"""Capacity planning: what a loader on this store will need and achieve, before training.

:func:`plan` samples batches the way :class:`loaders.NeighborLoader` would (same order, same
draws; no feature is read) and turns what it measured into the numbers a user sizes a machine
with (``featurestore plan`` prints them):

* distinct rows and feature bytes per batch, per node type (what a GPU receives per batch);
* rows touched per epoch: counted when the sampled batches cover a whole epoch, else
  extrapolated from the sampled batches with the incidence-based species estimator of Chao et
  al. (2014), which is exact when every batch is sampled;
* the memory plan: topology (CSC arrays the sampler reads), batch buffers (feature rows plus
  the sampler's output) times the batches in flight, the interpreter, and what is left for
  the feature cache, at the given memory (default: what this process may use, see
  :func:`available_memory`);
* the cache's hit rate at that size: a static cache of the rows most read in a presampled
  epoch (ties by degree, :func:`loaders.memory.cache.row_order`), replayed on the next epoch
  (:mod:`loaders.memory.trace`), the policy of the loader's hot tier;
* row reads per batch left after the cache, and the seeds/s bound they put on the loader at
  the device's random-read rate (``read_iops``, random 4 KiB reads per second at queue depth
  32: ``featurestore bench device`` measures it); and the sampling bound of this machine;
* the same at 1, 2, 5, 10 and 20% of the rows cached (the memory each needs);
* the layouts the loader could run with at this memory, each one's cache, hit rate, reads
  per batch and predicted seeds/s, and the one chosen (``batches_in_flight="auto"``): on the
  CPU, 1, 2 or 3 host batch buffers (each buffer is cache rows given up; with one, the gather
  of the next batch waits for the training loop to drop the last, so a loop that ``holds`` it
  cannot use one); with CUDA, the pinned staging buffer sizes (a bigger chunk merges more
  misses into spans). A batch takes ``max(io, sample, train)`` seconds when its gather
  overlaps the training step (two or more buffers, or CUDA), ``max(io + train, sample)`` with
  one buffer; ``train`` is the training step's time per batch (``train_s``, default 0: the
  loader's own rate).

A row read is one distinct row in one batch. The missed rows of the cached type are read as
the loader reads them: sorted per gather (a batch on the CPU, a staging chunk with CUDA) and
merged into spans (:func:`featurestore.rows.local.plan_spans`: rows at most 16 KiB apart), one
I/O each; a batch then costs ``spans / read_iops`` plus, at ``read_bps`` (the device's
sequential rate), the spans' bytes past their first 4 KiB (without ``read_bps``, the spans
alone). Rows of other types cost ``ceil(row_bytes / 4096)`` I/Os each.

Example::

    p = plan(store, ("paper", "train"), [15, 10, 5], batch_size=1024, memory=16 << 30,
             read_iops=88_000)
    print(p.table())
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from featurestore import sysmem
from featurestore.units import format_size
from loaders.errors import LoaderArgumentError
from loaders.memory import trace as cp
from loaders.memory.budget import LAYOUT_BUFFERS, resident_bytes
from loaders.memory.cache import row_order
from loaders.memory.cast import resolve_dtype
from featurestore.rows.local import (ALIGN, DENSE_SCRATCH_BYTES, SCRATCH_BYTES, SPAN_GAP_BYTES,
                                     dense_ids, span_bytes, plan_spans)
from loaders.sample.sampler import CSCGraph
from loaders.sample.seeds import order_bytes, resolve_input_nodes

__all__ = ["Plan", "plan", "parse_input", "link_input", "split_in_edges", "available_memory",
           "estimate_epoch_rows", "memory_plan", "INTERPRETER_BYTES", "CURVE_SHARES", "TASKS",
           "LOOPS", "STAGING_CHOICES"]

#: memory a Python process holding numpy, numba, torch and the loader takes before any batch
#: (what ``import loaders`` holds, docs/benchmarks.md, and some more for numba's compiled
#: kernels and torch's first allocations)
INTERPRETER_BYTES = 384 << 20
#: the least counted for the interpreter when it is measured (``interpreter_bytes=None``).
MIN_INTERPRETER_BYTES = 128 << 20
#: shares of the rows at which the plan also reports the hit rate and the seeds/s bound.
CURVE_SHARES = (0.01, 0.02, 0.05, 0.10, 0.20)
#: bytes per sampled edge the sampler's output holds (row, col, edge position: int64 each).
EDGE_BYTES = 24
#: bytes per sampled node the sampler's output holds (its store id).
NODE_BYTES = 8
IO_BYTES = 4096
#: what a plan is for: node batches (``NeighborLoader``) or link batches (``LinkNeighborLoader``)
TASKS = ("node", "link")
#: what the training loop does with a batch when it asks for the next: ``"holds"`` it (``for
#: batch in loader:`` keeps the last batch named until ``next()`` returns: two host batches
#: exist at once, so one batch buffer is not enough) or ``"drops"`` it first (``del batch``)
LOOPS = ("holds", "drops")
#: the pinned staging buffer sizes the plan compares with CUDA (no CPU batch buffers there)
STAGING_CHOICES = (16 << 20, 64 << 20, 256 << 20)


def parse_input(store, text) -> tuple[str, str]:
    """``"paper:train"`` -> ``("paper", "train")``; ``"train"`` -> the node type that has the
    split (the only one), as :class:`loaders.NeighborLoader` takes ``input_nodes``."""
    if isinstance(text, tuple):
        return text
    if ":" in text:
        ntype, split = text.split(":", 1)
        return ntype, split
    per = store.schema.get("splits", {}).get(text)
    if per is None:
        from featurestore.errors import UnknownSplitError

        raise UnknownSplitError(f"Expected a split of {store.url}: {store.split_names}. "
                                f"Got {text!r} instead.")
    if len(per) != 1:
        from featurestore.errors import UnknownSplitError

        raise UnknownSplitError(f"Split {text!r} of {store.url} has node types {sorted(per)}: "
                                f"name one as TYPE:{text}.")
    return next(iter(per)), text


def split_in_edges(store, split: str, etype=None) -> np.ndarray:
    """``(2, E)``: the edges of ``etype`` (the only one by default) into the nodes of node
    split ``split``, in CSC order: the seed edges of a link benchmark or plan on a store that
    has node splits only. int32 where every id fits (what a link loader holds), else int64."""
    et = store.edge_types[0] if etype is None and len(store.edge_types) == 1 else etype
    if et is None:
        raise LoaderArgumentError(f"Expected an edge type among {store.edge_types} for the "
                                  f"edges into split {split!r}. Got none.")
    indptr, indices = store.csc(et)
    dst = np.asarray(store.split(split, et[2]), np.int64)
    lo = np.asarray(indptr[dst], np.int64)
    counts = np.asarray(indptr[dst + 1], np.int64) - lo
    starts = np.cumsum(counts) - counts
    pos = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(lo - starts, counts)
    small = max(store.num_nodes(et[0]), store.num_nodes(et[2])) < 2**31
    dt = np.int32 if small else np.int64
    out = np.empty((2, pos.shape[0]), dt)
    out[0] = indices[pos]
    out[1] = np.repeat(dst.astype(dt), counts)
    return out


def link_input(store, text):
    """What ``--input`` names for link batches, as ``LinkNeighborLoader(edge_label_index=)``
    takes it: ``None``/``"all"`` every edge; ``SPLIT`` or ``REL:SPLIT`` an edge split of the
    store (its pairs), else the edges into the nodes of node split ``SPLIT``
    (:func:`split_in_edges`); arrays and tuples as they are."""
    if text is None or (isinstance(text, str) and text == "all"):
        return None
    if not isinstance(text, str):
        return text
    rel, _, name = text.rpartition(":")
    et = None
    if rel:
        hits = [e for e in store.edge_types if e.rel == rel]
        if len(hits) != 1:
            raise LoaderArgumentError(f"Expected REL:SPLIT with REL among "
                                      f"{[e.rel for e in store.edge_types]}. Got {text!r}.")
        et = hits[0]
    if name in store.edge_split_names:
        return name if et is None else (et, name)
    if name in store.split_names:
        pairs = split_in_edges(store, name, et)
        return pairs if et is None else (et, pairs)
    from featurestore.errors import UnknownSplitError

    raise UnknownSplitError(f"Expected an edge split ({store.edge_split_names}), a node split "
                            f"({store.split_names}) or 'all' for link batches of {store.url}. "
                            f"Got {text!r} instead.")


def available_memory() -> tuple[int, str]:
    """``(bytes, where from)``: what this process may use in all (the interpreter included):
    what it may still use (:func:`featurestore.sysmem.available_memory`: its cgroup limit, else
    a share of physical memory, less what it holds) plus what it holds (``RssAnon``)."""
    return int(sysmem.available_memory()) + int(sysmem.rss_anon()), \
        "loaders.memory.budget.available_memory"


def estimate_epoch_rows(counts: np.ndarray, sampled: int, batches: int) -> float:
    """Distinct rows an epoch of ``batches`` batches reads, from ``counts`` (batches of the
    ``sampled`` ones that read each row).

    Chao et al.'s incidence-based extrapolation: with ``Q1``, ``Q2`` the rows read by exactly
    one and two sampled batches, ``Q0 = (t-1)/t * Q1^2 / (2 Q2)`` and
    ``S(t + m) = S_obs + Q0 * (1 - (1 - Q1 / (t Q0 + Q1))^m)``. Exact (``S_obs``) when
    ``sampled >= batches``; at most the number of rows.
    """
    s_obs = int(np.count_nonzero(counts))
    if sampled >= batches or s_obs == 0:
        return float(s_obs)
    q1 = int(np.count_nonzero(counts == 1))
    q2 = int(np.count_nonzero(counts == 2))
    t = sampled
    q0 = (t - 1) / t * (q1 * q1 / (2 * q2) if q2 > 0 else q1 * (q1 - 1) / 2)
    if q0 <= 0 or q1 == 0:
        return float(s_obs)
    m = batches - t
    est = s_obs + q0 * (1 - (1 - q1 / (t * q0 + q1)) ** m)
    return float(min(est, counts.shape[0]))


def memory_plan(memory: int, topology_bytes: int, batch_bytes: int, in_flight: int,
                interpreter_bytes: int = INTERPRETER_BYTES, staging_bytes: int = 0,
                sampler_bytes: int = 0) -> dict:
    """Split ``memory``: topology, ``in_flight`` batch buffers of ``batch_bytes``, the
    sampler's subgraphs in flight, staging, the interpreter, and the rest (never negative) for
    the feature cache. (The plan without :mod:`loaders.memory.budget`.)"""
    fixed = (topology_bytes + in_flight * batch_bytes + sampler_bytes + staging_bytes
             + interpreter_bytes)
    return {"memory": int(memory), "topology": int(topology_bytes),
            "batch_buffers": int(in_flight * batch_bytes + sampler_bytes),
            "in_flight": int(in_flight),
            "staging": int(staging_bytes), "interpreter": int(interpreter_bytes),
            "loader_without_cache": int(fixed), "cache": int(max(0, memory - fixed)),
            "fits": bool(memory >= fixed)}


@dataclass
class Plan:
    """What :func:`plan` measured and derived; :meth:`table` prints it, :meth:`as_dict` is
    its JSON. Byte counts are bytes; per-batch figures are means over the sampled batches
    unless named ``max``."""

    store: str
    seed_type: str
    ntype: str
    fanouts: list
    batch_size: int
    num_inputs: int
    batches_per_epoch: int
    sampled_batches: int
    whole_epoch: bool
    num_rows: int
    row_bytes: int
    distinct_rows_per_batch: dict
    distinct_rows_per_batch_max: dict
    edges_per_batch: float
    feature_bytes_per_batch: int
    rows_touched_per_epoch: float
    rows_touched_measured: bool
    memory: dict
    memory_source: str
    memory_model: str
    cache_rows: int
    hit_rate: float
    reads_per_batch: float
    ios_per_batch: float
    read_iops: float | None
    read_iops_source: str
    seeds_per_s_io_bound: float | None
    sample_s_per_batch: float
    seeds_per_s_sample_bound: float
    seeds_per_s_bound: float | None
    curve: list = field(default_factory=list)
    loader_plan: dict | None = None
    #: ``"node"`` (seeds are nodes) or ``"link"`` (seeds are positive edges: every
    #: ``seeds_per_s`` figure is then positive edges/s, and ``num_inputs`` counts edges)
    task: str = "node"
    neg_sampling_ratio: float | None = None
    #: seed nodes a batch samples from: the bound (``2 * (B + ceil(r * B))`` for link
    #: batches) and the most measured (endpoints repeat)
    seed_nodes_per_batch_bound: int | None = None
    seed_nodes_per_batch_max: int | None = None
    #: the device's sequential read rate the bound counts span bytes at (bytes/s), and the
    #: bytes a batch's reads fetch after the cache (4 KiB aligned spans)
    read_bps: float | None = None
    bytes_per_batch: float = 0.0
    #: the layout planned: CPU batch buffers, pinned staging bytes (CUDA), and whether it was
    #: chosen (``batches_in_flight="auto"``) or given
    batches_in_flight: int = 2
    staging_bytes: int = 0
    chosen: bool = False
    #: the training step's seconds per batch and the loop's kind (:data:`LOOPS`) the choice
    #: was made for, and the layouts compared (each with its predicted seeds/s)
    train_s_per_batch: float = 0.0
    loop: str = "holds"
    alternatives: list = field(default_factory=list)
    #: predicted seeds/s of the planned layout with the training step: ``seeds_per_s_bound``
    #: when ``train_s_per_batch`` is 0
    seeds_per_s_predicted: float | None = None

    @property
    def edges_per_s_bound(self) -> float | None:
        """Positive seed edges/s the loader can reach (link plans; ``None`` for node plans)."""
        return self.seeds_per_s_bound if self.task == "link" else None

    def as_dict(self) -> dict:
        """The plan as a JSON-ready dict (with ``edges_per_s_bound`` for link plans)."""
        return dict(asdict(self), edges_per_s_bound=self.edges_per_s_bound)

    def _seeds_row(self) -> tuple[str, str]:
        head = (f"batch {self.batch_size}, fanouts {self.fanouts}: {self.batches_per_epoch} "
                "batches per epoch")
        if self.task != "link":
            return "seeds", f"{self.num_inputs:,} {self.seed_type} nodes, {head}"
        return "seed edges", (
            f"{self.num_inputs:,} positive edges, {self.neg_sampling_ratio:g} binary "
            f"negative(s) each, {head}; up to {self.seed_nodes_per_batch_bound:,} seed nodes "
            f"per batch (measured max {self.seed_nodes_per_batch_max:,})")

    def table(self) -> str:
        """The plan as a two-column text table."""
        from featurestore.units import format_size as fz

        m = self.memory
        nt = self.ntype
        u = "edges" if self.task == "link" else "seeds"
        rows = [
            ("store", self.store),
            self._seeds_row(),
            ("batches sampled", f"{self.sampled_batches}"
             + (" (a whole epoch)" if self.whole_epoch else "")),
            ("distinct rows per batch", ", ".join(
                f"{t} {v:,.0f} (max {self.distinct_rows_per_batch_max[t]:,})"
                for t, v in self.distinct_rows_per_batch.items())),
            ("sampled edges per batch", f"{self.edges_per_batch:,.0f}"),
            ("feature bytes per batch (to the GPU)", fz(self.feature_bytes_per_batch)),
            (f"{nt} rows touched per epoch", f"{self.rows_touched_per_epoch:,.0f} "
             f"({self.rows_touched_per_epoch / max(1, self.num_rows):.1%} of {self.num_rows:,}"
             f", {'counted' if self.rows_touched_measured else 'estimated'})"),
            ("memory", f"{fz(m['memory'])} ({self.memory_source})"),
            ("  topology", fz(m["topology"])),
            ("  batch buffers + sampler", f"{fz(m['batch_buffers'])} ({m['in_flight']} batches "
             "in flight)"),
            ("  scratch, margin, interpreter", fz(m["staging"] + m["interpreter"])),
            ("  feature cache", f"{fz(m['cache'])}: {self.cache_rows:,} {nt} rows "
             f"({self.cache_rows / max(1, self.num_rows):.1%})"),
            ("memory the loader needs without a cache", fz(m["loader_without_cache"])
             + ("" if m["fits"] else "  (MORE THAN THE MEMORY GIVEN)")),
            ("cache hit rate (presample static)", f"{self.hit_rate:.1%}"),
            ("row reads per batch after the cache", f"{self.reads_per_batch:,.0f} "
             f"({self.ios_per_batch:,.0f} I/Os, {fz(int(self.bytes_per_batch))})"),
            ("device random reads/s", f"{self.read_iops:,.0f} ({self.read_iops_source})"
             if self.read_iops else "not given"),
            ("device sequential read", f"{self.read_bps / 1e9:.2f} GB/s" if self.read_bps
             else "not given (span bytes not counted)"),
            (f"{u}/s bound: device", _rate(self.seeds_per_s_io_bound)),
            (f"{u}/s bound: sampling (this machine)", f"{self.seeds_per_s_sample_bound:,.0f} "
             f"({1e3 * self.sample_s_per_batch:.1f} ms per batch, one sampler thread)"),
            (f"{u}/s bound", _rate(self.seeds_per_s_bound)),
        ]
        if self.train_s_per_batch:
            rows.append((f"{u}/s with a {1e3 * self.train_s_per_batch:g} ms training step",
                         _rate(self.seeds_per_s_predicted)))
        w = max(len(k) for k, _ in rows)
        out = [f"{k:<{w}}  {v}" for k, v in rows]
        if self.alternatives:
            out += ["", self._layouts_head(u)]
            out += [_layout_row(a, u) for a in self.alternatives]
        if self.curve:
            out += ["", f"{'cached rows':>12} {'cache':>10} {'memory needed':>14} {'hit rate':>9} "
                    f"{'reads/batch':>12} {u + '/s (device)':>17}"]
            for c in self.curve:
                out.append(f"{c['share']:>12.0%} {fz(c['cache_bytes'], 1):>10} "
                           f"{fz(c['memory_needed'], 1):>14} {c['hit_rate']:>9.1%} "
                           f"{c['reads_per_batch']:>12,.0f} {_rate(c['seeds_per_s_io_bound']):>17}")
        return "\n".join(out)


    def _layouts_head(self, unit: str) -> str:
        cuda = self.memory["in_flight"] == 0
        what = (f"staging {format_size(self.staging_bytes)}" if cuda
                else f"{self.batches_in_flight} batch buffer(s)")
        how = "chosen for" if self.chosen else "given; compared for"
        train = f"a {1e3 * self.train_s_per_batch:g} ms training step"
        loop = ("holds each batch while asking for the next" if self.loop == "holds"
                else "drops each batch before asking for the next")
        return (f"layouts at this memory ({what} {how} {train} and a loop that {loop}):\n"
                f"{'layout':>22} {'cache rows':>11} {'hit rate':>9} {'reads/batch':>12} "
                f"{unit + '/s':>9}")


def _layout_row(a: dict, unit: str) -> str:
    name = (f"staging {format_size(a['staging_bytes'])}" if a["batches_in_flight"] == 0
            else f"{a['batches_in_flight']} batch buffer(s)")
    tag = "  <- planned" if a["planned"] else (
        "  (not for this loop)" if not a["loop_ok"] else "  (does not fit)" if not a["fits"]
        else "")
    return (f"{name:>22} {a['cache_rows']:>11,} {a['hit_rate']:>9.1%} "
            f"{a['reads_per_batch']:>12,.0f} {_rate(a['seeds_per_s']):>9}{tag}")


def _rate(x) -> str:
    return "not bounded" if x is None else f"{x:,.0f}"


def _ios_per_read(row_bytes: int) -> int:
    return max(1, math.ceil(row_bytes / IO_BYTES))


def plan(store, input_nodes, num_neighbors, *, batch_size: int = 1024, memory: int | None = None,
         read_iops: float | None = None, read_iops_source: str = "given",
         batches: int | None = None, max_whole_epoch: int = 64, prefetch: int = 2,
         batches_in_flight: int | str = "auto", device: str = "cpu",
         interpreter_bytes: int | None = None, staging_bytes: int = 64 << 20,
         feature: str = "feat", ntype: str | None = None, seed: int = 0,
         curve=CURVE_SHARES, use_budget: bool | None = None, task: str = "node",
         neg_sampling_ratio: float = 1.0, sampling: str = "uniform",
         read_bps: float | None = None, output: str = "raw", dtype="auto",
         train_s: float = 0.0, loop: str = "holds") -> Plan:
    """Measure and plan a loader on ``store``: ``task="node"`` a
    :class:`loaders.NeighborLoader`, ``"link"`` a :class:`loaders.LinkNeighborLoader`
    (``input_nodes`` is then its ``edge_label_index``, see :func:`link_input`, with
    ``neg_sampling_ratio`` binary negatives per positive; rates count positive edges), with
    the loader's ``sampling=`` (``"uniform"`` or ``"labor"``).

    Parameters
    ----------
    store
        A :class:`featurestore.Store`.
    input_nodes
        As :class:`loaders.NeighborLoader` takes them (``("paper", "train")``, ``"train"``).
    num_neighbors, batch_size
        The loader's fanouts and batch size.
    memory
        Bytes the loader's process may use in all, like a cgroup limit (default:
        :func:`available_memory`); the loader's own budget is that less
        ``interpreter_bytes`` (to mirror ``NeighborLoader(memory=B)``, pass ``B`` plus
        ``interpreter_bytes``).
    read_iops
        The device's random reads per second (4 KiB, queue depth 32); ``None``: no I/O bound.
    read_bps
        The device's sequential read rate (bytes/s, ``O_DIRECT``): each span's bytes past its
        first 4 KiB cost this on top of its I/O (what a dense batch of misses is bound by);
        ``None``: not counted.
    batches
        Batches sampled per epoch (two epochs: one to rank rows, one to replay the cache on).
        Default: a whole epoch when it has at most ``max_whole_epoch`` batches, else that many.
    prefetch, batches_in_flight, device, output, dtype
        As the loader takes them: ``batches_in_flight`` feature buffers on the CPU (none with
        ``device="cuda"``, where batches live on the GPU and two pinned staging buffers of
        ``staging_bytes`` are held instead), ``prefetch + 3`` sampled subgraphs; rows in the
        batch's dtype. ``"auto"``: the layout (buffers; CUDA: staging) of most predicted
        seeds/s with a ``train_s`` seconds training step and a ``loop`` (:data:`LOOPS`).
    interpreter_bytes, staging_bytes
        Memory counted for the interpreter and each of the loader's staging buffers. By
        default the interpreter is what this process holds when the plan starts (``RssAnon``:
        Python, torch, numba, as in a training process that imported ``loaders``), at least
        ``MIN_INTERPRETER_BYTES``; that is what the loader's own budget leaves out.
    ntype
        The node type whose rows the cache holds (default: the seed type when it has
        ``feature``, else the only type that has it).
    use_budget
        Size the cache with the loader's own arithmetic, :func:`loaders.memory.budget.plan_loader`
        (default: when that module is there), so that the plan predicts the cache the loader
        will really hold; ``False``: with :func:`memory_plan`. Either way ``memory`` counts
        the interpreter (``interpreter_bytes``) too.
    """
    if interpreter_bytes is None:
        interpreter_bytes = max(MIN_INTERPRETER_BYTES, sysmem.rss_anon())
    # before sampling: the store pages it maps are not the loader's
    memory, source = available_memory() if memory is None else (memory, "given")
    if task not in TASKS:
        raise LoaderArgumentError(f"Expected task in {TASKS}. Got {task!r} instead.")
    _check_layout(batches_in_flight, staging_bytes, train_s, loop)
    link = _link_loader(store, input_nodes, num_neighbors, batch_size, neg_sampling_ratio,
                        feature, seed, sampling) if task == "link" else None
    if link is None and isinstance(input_nodes, str):
        input_nodes = parse_input(store, input_nodes)
    m = _measure(store, input_nodes, num_neighbors, batch_size, batches, max_whole_epoch,
                 feature, ntype, seed, link, sampling)
    alts = _layouts(store, m, int(memory), source, device=device, prefetch=prefetch,
                    staging_bytes=int(staging_bytes), interpreter_bytes=interpreter_bytes,
                    use_budget=use_budget, read_iops=read_iops, read_bps=read_bps,
                    train_s=float(train_s), loop=loop, given=batches_in_flight,
                    batch_dtype=(dtype, output))
    return _assemble_layout(store, num_neighbors, batch_size, m, alts, source, read_iops,
                            read_iops_source, curve, batches_in_flight == "auto",
                            float(train_s), loop)


def _assemble_layout(store, num_neighbors, batch_size, m, alts, source, read_iops,
                     read_iops_source, curve, auto: bool, train_s: float, loop: str) -> Plan:
    """The :class:`Plan` of the layout chosen among ``alts`` (``auto``) or given."""
    pick = _choose(alts) if auto else next(a for a in alts if a["given"])
    pick["planned"] = True
    mem, cache_rows, model, lp, r = pick["_plan"]
    for a in alts:
        del a["_plan"], a["given"]
    p = _assemble(store, num_neighbors, batch_size, m, r, mem,
                  cache_rows, model, lp, source, read_iops, read_iops_source, curve)
    p.batches_in_flight, p.staging_bytes = pick["batches_in_flight"], pick["staging_bytes"]
    p.chosen, p.train_s_per_batch, p.loop, p.alternatives = auto, train_s, loop, alts
    p.seeds_per_s_predicted = pick["seeds_per_s"]
    return p


def _check_layout(batches_in_flight, staging_bytes, train_s, loop) -> None:
    """:func:`plan`'s layout arguments, or :class:`LoaderArgumentError` naming the bad one."""
    if loop not in LOOPS:
        raise LoaderArgumentError(f"Expected loop in {LOOPS}. Got {loop!r} instead.")
    if not (isinstance(train_s, (int, float)) and train_s >= 0):
        raise LoaderArgumentError(f"Expected train_s >= 0 (seconds per batch). Got {train_s!r}.")
    if int(staging_bytes) < 1:
        raise LoaderArgumentError(f"Expected staging_bytes >= 1. Got {staging_bytes!r}.")
    if batches_in_flight != "auto" and not (isinstance(batches_in_flight, int)
                                            and batches_in_flight >= 1):
        raise LoaderArgumentError(f"Expected batches_in_flight 'auto' or an int >= 1. Got "
                                  f"{batches_in_flight!r} instead.")


def _layouts(store, m: _Measured, memory: int, source: str, *, device, prefetch, staging_bytes,
             interpreter_bytes, use_budget, read_iops, read_bps, train_s, loop,
             given, batch_dtype) -> list[dict]:
    """Each layout the loader could run with at ``memory`` (see the module doc): its plan,
    cache, replayed hit rate and reads, and predicted seeds/s (``given``: the one asked for,
    ``"auto"`` for none)."""
    cuda = str(device).startswith("cuda")
    layouts = ([(0, st) for st in sorted(set(STAGING_CHOICES) | {staging_bytes})] if cuda
               else [(k, staging_bytes)
                     for k in sorted(set(LAYOUT_BUFFERS) | ({given} - {"auto"}))])
    # as the loader holds it resident (int32 offsets whenever they fit, packed ids): once
    resident = resident_bytes(CSCGraph.from_store(store), pack=True)
    replays: dict = {}
    alts = []
    for k, st in layouts:
        mem, cache_rows, model, lp = _memory_plan(
            store, m, memory, source, device=device, batches_in_flight=max(k, 1),
            prefetch=prefetch, staging_bytes=st, interpreter_bytes=interpreter_bytes,
            use_budget=use_budget, batch_dtype=batch_dtype, resident=resident)
        chunk = max(1, st // m.row_bytes[m.ntype]) if cuda else None
        if chunk not in replays:
            replays[chunk] = _Replay(store, m, read_iops, read_bps, chunk)
        r = replays[chunk]
        at = r.at(cache_rows)
        alts.append(dict(batches_in_flight=k, staging_bytes=st, cache_rows=cache_rows,
                         hit_rate=at["hit_rate"], reads_per_batch=at["reads_per_batch"],
                         seeds_per_s=_layout_rate(r, at, k, train_s),
                         loop_ok=cuda or k >= 2 or loop == "drops", fits=bool(mem["fits"]),
                         planned=False, given=given != "auto"
                         and (st == staging_bytes if cuda else k == given),
                         _plan=(mem, cache_rows, model, lp, r)))
    return alts


def _layout_rate(r: _Replay, at: dict, in_flight: int, train_s: float) -> float | None:
    """Predicted seeds/s of a layout (see the module doc): ``None`` when nothing bounds it."""
    io = at["seeds_per_s_io_bound"]
    t_io = r.seeds_pb / io if io else 0.0
    t = max(t_io + train_s, r.samp) if in_flight == 1 else max(t_io, r.samp, train_s)
    return r.seeds_pb / t if t > 0 else None


def _choose(alts: list) -> dict:
    """The layout with the most predicted seeds/s (then the best hit rate, then the fewest
    buffers) among those that fit and suit the loop; when none fits, the one that needs the
    least memory among those that suit the loop."""
    ok = [a for a in alts if a["loop_ok"]]
    good = [a for a in ok if a["fits"]]
    if not good:
        return ok[0]  # the fewest buffers / smallest staging: the least memory
    return max(good, key=lambda a: (a["seeds_per_s"] or 0.0, a["hit_rate"],
                                    -a["batches_in_flight"], -a["staging_bytes"]))


def _assemble(store, num_neighbors, batch_size, m, r, mem, cache_rows, model, lp, source,
              read_iops, read_iops_source, curve) -> Plan:
    """The :class:`Plan` of what was measured (``m``), replayed (``r``) and planned."""
    now = r.at(cache_rows)
    rb = m.row_bytes[m.ntype]
    pts = [{"share": share, "cache_bytes": k * rb,
            "memory_needed": mem["loader_without_cache"] + k * rb, **r.at(k)}
           for share in curve for k in (int(round(share * m.num_rows)),)]
    touched = estimate_epoch_rows(m.trace.counts(1), r.nb1, m.per_epoch)
    io = now["seeds_per_s_io_bound"]
    return Plan(store=str(store.url), seed_type=m.seed_type, ntype=m.ntype,
                fanouts=list(num_neighbors) if not isinstance(num_neighbors, dict)
                else {str(k): list(v) for k, v in num_neighbors.items()},
                batch_size=int(batch_size), num_inputs=int(m.inputs.shape[0]),
                batches_per_epoch=int(m.per_epoch), sampled_batches=int(r.nb1),
                whole_epoch=bool(r.nb1 >= m.per_epoch), num_rows=int(m.num_rows), row_bytes=rb,
                distinct_rows_per_batch=m.mean_rows, distinct_rows_per_batch_max=m.max_rows,
                edges_per_batch=float(np.mean(m.edges)), feature_bytes_per_batch=m.feat_bytes,
                rows_touched_per_epoch=touched, rows_touched_measured=bool(r.nb1 >= m.per_epoch),
                memory=mem, memory_source=source, memory_model=model, cache_rows=cache_rows,
                hit_rate=now["hit_rate"], reads_per_batch=now["reads_per_batch"],
                ios_per_batch=now["ios_per_batch"],
                read_iops=float(read_iops) if read_iops else None,
                read_iops_source=read_iops_source if read_iops else "none",
                seeds_per_s_io_bound=io, sample_s_per_batch=r.samp,
                seeds_per_s_sample_bound=r.sample_bound,
                seeds_per_s_bound=min(x for x in (io, r.sample_bound) if x is not None),
                curve=pts, loader_plan=lp.as_dict() if lp is not None else None,
                task=m.task, neg_sampling_ratio=m.ratio,
                seed_nodes_per_batch_bound=m.seed_bound,
                seed_nodes_per_batch_max=int(max(m.seed_nodes)),
                read_bps=float(r.read_bps) if r.read_bps else None,
                bytes_per_batch=float(now["bytes_per_batch"]))


@dataclass
class _Measured:
    """What sampling ``2 x batches`` batches (no features read) measured."""

    seed_type: str
    inputs: np.ndarray
    ntype: str
    per_epoch: int
    featured: dict
    row_bytes: dict
    mean_rows: dict
    max_rows: dict
    edges: list
    timings: list
    trace: cp.AccessTrace
    feat_bytes: int
    num_rows: int
    seed_nodes: list
    seed_bound: int
    task: str = "node"
    ratio: float | None = None


def _link_loader(store, edge_label_index, num_neighbors, batch_size, ratio, feature, seed,
                 sampling="uniform"):
    """The :class:`loaders.LinkNeighborLoader` whose batches a link plan samples (no budget,
    no cache: nothing read at construction)."""
    from loaders.loader.link import LinkNeighborLoader

    return LinkNeighborLoader(store, num_neighbors, link_input(store, edge_label_index),
                              neg_sampling_ratio=ratio, batch_size=batch_size, shuffle=True,
                              seed=seed, memory=None, cache=None, output="raw", device="cpu",
                              feature=feature, edge_attrs=(), sampling=sampling)


def _measure(store, input_nodes, num_neighbors, batch_size, batches, max_whole_epoch,
             feature, ntype, seed, link=None, sampling="uniform") -> _Measured:
    """Sample two epochs' worth of batches as the loader would (``link``: that link loader's
    batches), recording rows and timings."""
    if link is None:
        seed_type, inputs = resolve_input_nodes(store, input_nodes)
        bound = {seed_type: batch_size}
    else:
        seed_type, inputs, bound = link.seed_type, link.input_nodes, link.max_batch_seeds()
    ntype = ntype or cp.feature_type(store, seed_type, feature)
    per_epoch = -(-inputs.shape[0] // batch_size)
    b = per_epoch if batches is None and per_epoch <= max_whole_epoch else \
        min(per_epoch, batches or max_whole_epoch)
    featured = {t: store.features(t, feature) for t in store.node_types
                if feature in store.feature_names(t)}
    rows_of = {t: [] for t in featured}
    edges: list[int] = []
    seed_nodes: list[int] = []

    def on_batch(sub):
        for t in featured:
            rows_of[t].append(int(sub.node[t].shape[0]))
        edges.append(sub.num_edges)
        seed_nodes.append(sum(int(v[0]) for v in sub.num_sampled_nodes.values() if v))

    timings: list[float] = []
    if link is None:
        from loaders.sample.sampler import NeighborSampler

        trace = cp.record_trace(store, input_nodes, num_neighbors, batch_size=batch_size,
                                epochs=2, ntype=ntype, seed=seed, max_batches=b,
                                timings=timings, on_batch=on_batch,
                                sampler=NeighborSampler(store, num_neighbors, sampling=sampling))
    else:
        trace = cp.record_loader_trace(link, epochs=2, ntype=ntype, max_batches=b,
                                       timings=timings, on_batch=on_batch)
    row_bytes = {t: int(f.row_bytes) for t, f in featured.items()}
    mean_rows = {t: float(np.mean(v)) for t, v in rows_of.items()}
    neg = None if link is None else link.neg_sampling
    return _Measured(seed_type, inputs, ntype, per_epoch, featured, row_bytes, mean_rows,
                     {t: int(np.max(v)) for t, v in rows_of.items()}, edges, timings, trace,
                     int(round(sum(mean_rows[t] * row_bytes[t] for t in featured))),
                     trace.num_rows, seed_nodes, sum(bound.values()),
                     "node" if link is None else "link",
                     None if neg is None else float(neg.amount))


def _inputs_bytes(m: _Measured) -> int:
    """The seed inputs a loader holds: its input nodes (a link loader's pairs: twice its
    sources) and one epoch's order of them."""
    n = int(m.inputs.shape[0])
    return (2 if m.task == "link" else 1) * int(m.inputs.nbytes) + order_bytes(n)


def _memory_plan(store, m: _Measured, memory: int, source: str, *, device, batches_in_flight,
                 prefetch, staging_bytes, interpreter_bytes, use_budget, batch_dtype,
                 resident: tuple[int, int]):
    """``(memory split, cache rows, model name, LoaderPlan or None)`` at ``memory``, batch
    buffers holding rows in the dtype the loader's ``(dtype, output)`` gives; ``resident``:
    the topology's ``(bytes, bits)`` as the loader holds it (:func:`resident_bytes`)."""
    dtype, output = batch_dtype
    batch_dtypes = {t: resolve_dtype(dtype, f.dtype, f"{t!r} features", output) or f.dtype
                    for t, f in m.featured.items()}
    topo, bits = resident
    cuda = str(device).startswith("cuda")
    in_flight = 0 if cuda else int(batches_in_flight)
    staging = 2 * int(staging_bytes) if cuda else 0
    subgraphs = prefetch + 3
    featured, max_rows = m.featured, m.max_rows
    budget_mod = _budget_module() if use_budget is not False else None
    if use_budget and budget_mod is None:
        raise LoaderArgumentError(
            "Expected loaders.memory.budget for use_budget=True. It is not there.")
    if budget_mod is None:
        sampler = subgraphs * (int(max(m.edges)) * EDGE_BYTES
                               + NODE_BYTES * sum(max_rows.values()))
        batch_bytes = sum(max_rows[t] * _row_bytes(f, batch_dtypes[t])
                          for t, f in featured.items())
        mem = memory_plan(memory, topo, batch_bytes, in_flight, interpreter_bytes, staging,
                          sampler)
        rows = int(min(m.num_rows, mem["cache"] // max(1, m.row_bytes[m.ntype])))
        return mem, rows, "loaders.memory.plan.memory_plan", None
    lp = budget_mod.plan_loader(
        budget=max(0, memory - interpreter_bytes), budget_source=source,
        topology_bytes=topo, batch_rows=max_rows, edges_per_batch=int(max(m.edges)),
        num_nodes={t: store.num_nodes(t) for t in store.node_types},
        sampled_batches=len(m.timings), inputs_bytes=_inputs_bytes(m),
        resident_topology_bytes=topo, topology_bits=bits,
        **budget_mod.loader_plan_inputs(featured, cuda=cuda, staging_bytes=int(staging_bytes),
                                        prefetch=prefetch, batches_in_flight=batches_in_flight,
                                        batch_dtypes=batch_dtypes,
                                        casts=any(batch_dtypes[t] != f.dtype
                                                  for t, f in featured.items())))
    fixed = lp.planned_bytes - lp.cache_bytes + interpreter_bytes
    mem = {"memory": memory, "topology": int(topo), "topology_resident":
           lp.topology == "memory", "batch_buffers": int(lp.buffer_bytes + lp.sampler_bytes),
           "in_flight": int(lp.batches_in_flight),
           "staging": int(lp.reader_bytes + lp.margin), "interpreter": int(interpreter_bytes),
           "loader_without_cache": int(fixed), "cache": int(lp.cache_bytes),
           "fits": bool(memory >= fixed)}
    rows = int(m.num_rows if lp.fits else lp.cache_rows.get(m.ntype, 0))
    return mem, rows, "loaders.memory.budget.plan_loader", lp


def _row_bytes(f, dtype) -> int:
    """Bytes of one row of feature ``f`` in ``dtype``."""
    return int(np.prod(f.shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize


class _Replay:
    """The static cache ranked on the first sampled epoch, replayed on the second."""

    def __init__(self, store, m: _Measured, read_iops, read_bps=None, chunk_rows=None):
        trace, featured = m.trace, m.featured
        self.order = row_order(trace.counts(0), cp.row_degree(store, m.ntype))
        e1 = slice(int(trace.epoch_ptr[1]), int(trace.epoch_ptr[2]))
        self.ids1 = trace.ids[trace.batch_ptr[e1.start]:trace.batch_ptr[e1.stop]]
        self.ptr1 = trace.batch_ptr[e1.start:e1.stop + 1] - trace.batch_ptr[e1.start]
        self.reads1 = int(self.ids1.shape[0])
        self.other_reads = sum(m.mean_rows[t] for t in featured if t != m.ntype)
        self.other_ios = sum(m.mean_rows[t] * _ios_per_read(m.row_bytes[t])
                             for t in featured if t != m.ntype)
        self.nb1 = self.ptr1.shape[0] - 1
        self.seeds_pb = float(np.mean(trace.seeds_per_batch[e1]))
        t = m.timings
        self.samp = float(np.median(t[1:] if len(t) > 1 else t))
        self.sample_bound = self.seeds_pb / self.samp if self.samp > 0 else float("inf")
        self.read_iops, self.rb, self.n_rows = read_iops, m.row_bytes[m.ntype], m.num_rows
        self.read_bps = read_bps
        # each gather's ids sorted once (a batch, or a staging chunk of it): the loader's
        # reads are spans of its sorted misses
        cuts = [np.arange(self.ptr1[b], self.ptr1[b + 1], chunk_rows or 1 << 62)
                for b in range(self.nb1)]
        self.gptr = np.unique(np.concatenate(cuts + [self.ptr1[-1:]]))
        self.sorted1 = np.concatenate([np.sort(self.ids1[a:b]) for a, b in
                                       zip(self.gptr[:-1], self.gptr[1:])] or [self.ids1[:0]])

    def _spans(self, mask) -> tuple[int, int]:
        """I/Os and bytes of the loader's reads of the rows ``mask`` does not hold, over the
        replayed epoch (its span rules: :func:`featurestore.rows.local.plan_spans`)."""
        rb, n_io, nbytes = self.rb, 0, 0
        for a, b in zip(self.gptr[:-1].tolist(), self.gptr[1:].tolist()):
            ids = self.sorted1[a:b]
            miss = ids[~mask[ids]]
            if not miss.size:
                continue
            dense = dense_ids(miss.size, miss[0], miss[-1], rb)
            span = max(DENSE_SCRATCH_BYTES if dense else SCRATCH_BYTES, rb + 2 * ALIGN) - 2 * ALIGN
            first = plan_spans(np.ascontiguousarray(miss, np.int64), rb, SPAN_GAP_BYTES, span)
            n_io += first.shape[0] - 1
            nbytes += span_bytes(miss, first, rb, ALIGN)
        return n_io, nbytes

    def at(self, cache_rows: int) -> dict:
        """Hit rate, reads and I/Os per batch, and the device bound with ``cache_rows``."""
        mask = cp.static_mask(self.order, cache_rows, self.n_rows)
        hits = int(cp.static_hits(self.ids1, self.ptr1, mask).sum())
        hr = hits / self.reads1 if self.reads1 else 1.0
        miss = (self.reads1 - hits) / self.nb1 + self.other_reads
        spans, nbytes = self._spans(mask)
        ios = spans / self.nb1 + self.other_ios
        # an I/O's first 4 KiB at the random-read rate, the rest of its span at the
        # sequential rate (R-MAT 22's 6 KiB spans are IOPS-bound, a power law's 35 KiB ones
        # mostly bandwidth: 100-111% of the measured seeds/s either way, docs/benchmarks.md)
        more = max(0, nbytes - spans * IO_BYTES) / self.nb1
        secs = (ios / self.read_iops if self.read_iops else 0.0) + (
            more / self.read_bps if self.read_iops and self.read_bps else 0.0)
        io_bound = self.seeds_pb / secs if self.read_iops and secs > 0 else None
        return {"cache_rows": cache_rows, "hit_rate": hr, "reads_per_batch": miss,
                "ios_per_batch": ios, "bytes_per_batch": nbytes / self.nb1,
                "seeds_per_s_io_bound": io_bound}


def _budget_module():
    """:mod:`loaders.memory.budget` when it is there (the loader's memory arithmetic)."""
    try:
        from loaders.memory import budget
    except ImportError:
        return None
    return budget if hasattr(budget, "plan_loader") else None
