"""The loader's memory budget: what the process may use, and a plan of every byte in it.

:func:`available_memory` (:mod:`featurestore.sysmem`, re-exported here) is the memory limit
of the process's own cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``, the tightest of
it and its ancestors) when there is one, as in a container, a scheduler's job or under
``memcap``; else a share of physical memory. What the process already holds (``RssAnon``: the
interpreter, torch, numba) is taken off.

:func:`plan_loader` spends a budget: the topology (copied into the process when the
features do not fit, so feature reads cannot evict it), the batch buffers times the batches
in flight, the sampler's working memory, the reader's scratch, a safety margin, and whatever
is left for the feature cache. When the features fit whole, no cache is planned: the page
cache serves them, as it does without a budget.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from featurestore import units
from featurestore.errors import InvalidArgumentError
from featurestore.sysmem import (
    PHYSICAL_SHARE,
    available_memory,
    cgroup_mapped_file_bytes,
    cgroup_memory_limit,
    physical_memory,
)
from featurestore.sysmem import rss_anon as process_anon_bytes
from featurestore.units import format_size as format_bytes
from loaders.errors import LoaderArgumentError
from loaders.sample.packed import packed_bits, words_for

__all__ = ["parse_size", "cgroup_memory_limit", "process_anon_bytes", "available_memory",
           "LoaderPlan", "plan_loader", "loader_plan_inputs", "format_bytes",
           "limit_allocator_slack", "resident_indptr_dtype", "resident_bytes",
           "PHYSICAL_SHARE", "physical_memory",
           "cgroup_mapped_file_bytes", "LAYOUT_BUFFERS"]

#: bytes per row of a cached type that ranking its rows holds at its peak (before the cache is
#: made), besides ``8 * K`` for the ``K`` ids chosen: ``"presample"`` counts and degrees
#: (int32) and scores (float64), ``"degree"`` the degrees (the loader counts in int64 past
#: ``2**31`` edges or accesses: :func:`loaders.loader.planning.count_dtype`)
RANK_ROW_BYTES = {"presample": 16, "degree": 4}

#: the plan keeps this share of the budget (at least MARGIN_MIN) unspent: allocator slack,
#: the interpreter's growth, the pages of mapped code and libraries, kernel memory. Under a
#: 1.5 GiB cgroup those charges were ~21 MiB besides the loader's anonymous memory, and a
#: 38 MiB margin left a link loader 13 MiB under the limit, where a run thrashed in reclaim
#: (90 edges/s instead of 5.5k): hence a 64 MiB floor. A 6% share cost the R-MAT 22 node
#: loader 10% of its cache and of its speed at that cap, for no measured gain.
MARGIN_SHARE = 0.03
MARGIN_MIN = 64 << 20
#: a batch buffer holds this many times the most distinct rows seen in the sampled batches
ROWS_HEADROOM = 1.05
#: the CPU batch buffers (``batches_in_flight``) whose caches a plan compares: each buffer is
#: cache rows given up (``featurestore plan`` predicts each one's seeds/s)
LAYOUT_BUFFERS = (1, 2, 3)
#: a disjoint sampler's hash id maps per row and sampled edge, at most: keys and values
#: (2 x 8 bytes, twice the entries, rounded up to a power of two) plus nodes and slots
DISJOINT_MAP_BYTES = 96


def parse_size(size) -> int:
    """Bytes of ``size`` (``memory=``): :func:`featurestore.units.parse_size`, whose units are
    all binary (``"2GB" == "2GiB"``), raising :class:`~loaders.errors.LoaderArgumentError`."""
    try:
        return units.parse_size(size)
    except InvalidArgumentError as e:
        raise LoaderArgumentError(str(e)) from e


_SLACK_LIMITED = False


def limit_allocator_slack(mmap_threshold: int = 1 << 20, arenas: int = 2) -> bool:
    """Keep glibc's allocator from holding freed memory (process-wide, once).

    glibc raises its mmap threshold each time a large block is freed, after which blocks of
    that size come from per-thread arenas and stay there when freed: a loader that allocates
    and frees ~100 MB of id arrays per batch on a dozen threads then grew by ~10 MB per
    epoch here, until a capped process had no page cache left. A fixed threshold (blocks from
    1 MiB up are mapped and unmapped) and two arenas keep it flat. No-op off glibc."""
    global _SLACK_LIMITED
    if _SLACK_LIMITED:
        return True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(-3, int(mmap_threshold)) == 1  # M_MMAP_THRESHOLD
        libc.mallopt(-8, int(arenas))  # M_ARENA_MAX
    except (OSError, AttributeError):
        return False
    _SLACK_LIMITED = ok
    return ok


@dataclass
class LoaderPlan:
    """Where a :class:`~loaders.NeighborLoader`'s memory goes (bytes unless said otherwise).

    ``print(loader.plan)`` shows it as a table; :meth:`as_dict` as JSON-ready data.
    """

    budget: int
    budget_source: str
    feature_bytes: int
    topology: str  # "memory" (resident copy) or "mmap"
    topology_bytes: int
    batch_rows: dict[str, int]
    batch_bytes: int
    batches_in_flight: int
    sampler_bytes: int
    reader_bytes: int
    margin: int
    #: the seed inputs the loader holds besides its arrays at planning time: one epoch's
    #: shuffled order (4 or 8 bytes per input), plus the inputs themselves where not yet held
    inputs_bytes: int = 0
    #: the sampled edges' feature and value rows (``edge_attrs``) of a batch, read per batch
    edge_bytes: int = 0
    cache_rows: dict[str, int] = field(default_factory=dict)
    cache_bytes: int = 0
    cache_policy: str | None = None
    read_path: str = "auto"
    fits: bool = True
    sampled_batches: int = 0
    #: bits per neighbour id of a bit-packed resident topology (0: plain integers)
    topology_bits: int = 0
    notes: list[str] = field(default_factory=list)
    #: the cache each of :data:`LAYOUT_BUFFERS` batch buffers would leave at this budget
    #: (``batches_in_flight``, ``cache_rows``, ``planned``); set when the features do not fit
    alternatives: list[dict] = field(default_factory=list)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the planned batch buffers (edge rows too: one batch's at least)."""
        return (self.batch_bytes * self.batches_in_flight
                + self.edge_bytes * max(1, self.batches_in_flight))

    @property
    def needed_bytes(self) -> int:
        """What the plan holds besides the cache: more than ``budget`` when the budget cannot
        hold even the loader's working memory."""
        return self.planned_bytes - self.cache_bytes

    @property
    def over_budget(self) -> bool:
        """True when the working memory alone (no cache) exceeds the budget."""
        return self.needed_bytes > self.budget

    @property
    def planned_bytes(self) -> int:
        """Every byte the plan holds (the resident topology, not a memory-mapped one)."""
        topo = self.topology_bytes if self.topology == "memory" else 0
        return (topo + self.buffer_bytes + self.sampler_bytes + self.reader_bytes
                + self.inputs_bytes + self.cache_bytes + self.margin)

    def as_dict(self) -> dict:
        """The plan as a JSON-ready dict."""
        d = asdict(self)
        d.update(buffer_bytes=self.buffer_bytes, planned_bytes=self.planned_bytes)
        return d

    def table(self) -> str:
        """The plan as a text table (what ``print(loader.plan)`` shows)."""
        f = format_bytes
        topo = "resident copy" if self.topology == "memory" else "memory-mapped (page cache)"
        if self.topology == "memory" and self.topology_bits:
            topo += f", {self.topology_bits}-bit packed ids"
        rows = [
            ("budget", f(self.budget), self.budget_source),
            ("features on disk", f(self.feature_bytes),
             "fit: served by the page cache" if self.fits else "do not fit: cached + read"),
            ("topology", f(self.topology_bytes), topo),
            ("batch buffers", f(self.buffer_bytes),
             f"{self.batches_in_flight} x {f(self.batch_bytes)} "
             f"({', '.join(f'{t}: {n:,} rows' for t, n in self.batch_rows.items())})"
             + (f" + edge rows {f(self.edge_bytes)} a batch" if self.edge_bytes else "")),
            ("sampler", f(self.sampler_bytes), "subgraphs in flight, id maps"),
            ("reader scratch", f(self.reader_bytes), f"read path {self.read_path}"),
            ("seed inputs", f(self.inputs_bytes), "an epoch's shuffled order of the inputs"),
            ("feature cache", f(self.cache_bytes),
             (f"{self.cache_policy}: " + ", ".join(f"{t}: {n:,} rows"
                                                   for t, n in self.cache_rows.items()))
             if self.cache_rows else "none"),
            ("safety margin", f(self.margin), ""),
            ("planned total", f(self.planned_bytes), ""),
        ]
        if self.alternatives:
            rows.append(("layouts", "", "; ".join(
                f"{a['batches_in_flight']} batch buffer(s): {a['cache_rows']:,} cache rows"
                + (" (planned)" if a["planned"] else "") for a in self.alternatives)
                + ". One serves a loop that drops each batch before asking for the next; "
                "`featurestore plan` predicts each one's seeds/s"))
        w = max(len(r[0]) for r in rows)
        lines = [f"{a:<{w}}  {b:>11}  {c}".rstrip() for a, b, c in rows]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _sampler_bytes(subgraphs: int, edges: int, rows: int, num_nodes: dict, disjoint: bool) -> int:
    """The sampler's share of :func:`plan_loader`: subgraphs in flight and id maps."""
    if disjoint:  # node ids and seed indices; hash id maps instead of dense ones
        return subgraphs * (edges * 40 + rows * 16) + DISJOINT_MAP_BYTES * (rows + edges)
    return subgraphs * (edges * 40 + rows * 8) + 4 * sum(num_nodes.values())


def plan_loader(*, budget: int, budget_source: str, feature_row_bytes: dict[str, int],
                feature_rows: dict[str, int], topology_bytes: int, batch_rows: dict[str, int],
                edges_per_batch: int, num_nodes: dict[str, int], batches_in_flight: int = 2,
                subgraphs_in_flight: int = 4, io_threads: int = 32, scratch_bytes: int = 0,
                topology: str | None = None, cache: str | None = "presample",
                sampled_batches: int = 0, inputs_bytes: int = 0, edge_row_bytes: int = 0,
                batch_row_bytes: dict[str, int] | None = None,
                resident_topology_bytes: int | None = None,
                topology_bits: int = 0, disjoint: bool = False) -> LoaderPlan:
    """Spend ``budget`` bytes (see the module doc). All arithmetic is here, on plain numbers:

    * batch bytes = sum over types of ``ceil(ROWS_HEADROOM * batch_rows[t]) * row_bytes[t]``,
      ``row_bytes`` being ``batch_row_bytes`` when batches hold another dtype than the store
      (the loader's ``dtype=``: an fp16 store's rows are twice as wide in an fp32 batch);
    * sampler = ``subgraphs_in_flight * (edges * 40 + rows * 8)`` (sampled edges as
      ``row, col, edge`` int64 plus the PyG/DGL edge tensors; node ids) plus the sampling
      thread's dense id maps (``4 * num_nodes`` per type); ``disjoint`` (one tree per seed):
      ``rows * 16`` per subgraph (node ids and seed indices) and hash id maps of
      ``DISJOINT_MAP_BYTES * (rows + edges)`` instead;
    * reader = ``scratch_bytes`` (the reader threads' aligned scratch);
    * edge rows = ``edges * edge_row_bytes`` per batch (the sampled edges' ``edge_attrs``),
      times ``max(1, batches_in_flight)``;
    * inputs = ``inputs_bytes`` (an epoch's shuffled order of the seed inputs: 40 MB for a
      link loader's 10M seed edges; the inputs too where they are not held yet);
    * margin = ``max(MARGIN_MIN, MARGIN_SHARE * budget)``;
    * features fit when ``feature bytes + topology + the rest <= budget`` (then no cache and
      the topology as asked, memory-mapped by default); else the topology is resident
      (unless ``topology="mmap"`` is asked), at ``resident_topology_bytes`` when given (a
      bit-packed copy of ``topology_bits`` per id), and the cache gets what is left, split
      across types in proportion to their batch bytes.
    """
    batch_rows = {t: int(math.ceil(ROWS_HEADROOM * n)) for t, n in batch_rows.items()}
    brb = batch_row_bytes or feature_row_bytes
    batch_bytes = sum(n * brb[t] for t, n in batch_rows.items())
    rows_total = sum(batch_rows.values())
    sampler = _sampler_bytes(subgraphs_in_flight, edges_per_batch, rows_total, num_nodes,
                             disjoint)
    margin = max(MARGIN_MIN, int(MARGIN_SHARE * budget))
    feature_bytes = sum(feature_row_bytes[t] * feature_rows[t] for t in feature_row_bytes)
    edge_bytes = int(edges_per_batch) * int(edge_row_bytes)
    base = (batch_bytes * batches_in_flight + edge_bytes * max(1, batches_in_flight) + sampler
            + scratch_bytes + inputs_bytes + margin)
    plan = LoaderPlan(budget=budget, budget_source=budget_source, feature_bytes=feature_bytes,
                      topology=topology or "mmap", topology_bytes=topology_bytes,
                      batch_rows=batch_rows, batch_bytes=batch_bytes,
                      batches_in_flight=batches_in_flight, sampler_bytes=sampler,
                      reader_bytes=scratch_bytes, margin=margin, sampled_batches=sampled_batches,
                      inputs_bytes=int(inputs_bytes), edge_bytes=edge_bytes)
    if feature_bytes + topology_bytes + base <= budget or cache is None:
        plan.fits = feature_bytes + topology_bytes + base <= budget
        if not plan.fits:
            plan.notes.append("the features do not fit and cache=None: every row is read "
                              "from the store")
            plan.read_path = "direct"
            plan.topology = topology or "memory"
            _resident(plan, resident_topology_bytes, topology_bits)
        return plan
    plan.fits = False
    plan.topology = topology or "memory"
    _resident(plan, resident_topology_bytes, topology_bits)
    plan.read_path = "direct"
    plan.cache_policy = cache
    left = budget - base - (plan.topology_bytes if plan.topology == "memory" else 0)
    if left <= 0:
        plan.notes.append(f"over budget by {format_bytes(-left)} before any cache: lower "
                          "batch_size or fanouts, or raise the memory budget")
        return plan
    share = {t: batch_rows[t] * feature_row_bytes[t] for t in batch_rows if t in feature_row_bytes}
    tot = sum(share.values()) or 1
    for t, b in share.items():
        pos_map = 4 * feature_rows[t]  # the int32 position map
        n = max(0, (left * b // tot - pos_map) // feature_row_bytes[t])
        n = int(min(n, feature_rows[t]))
        if n:
            plan.cache_rows[t] = n
            plan.cache_bytes += n * feature_row_bytes[t] + pos_map
    _fit_ranking(plan, feature_rows)
    return plan


def ranking_bytes(policy: str, cache_rows: dict[str, int], feature_rows: dict[str, int]) -> int:
    """Peak bytes of ranking the rows of the cached types by ``policy``
    (:data:`RANK_ROW_BYTES` a row, 8 a chosen row)."""
    return sum(RANK_ROW_BYTES[policy] * feature_rows[t] + 8 * k for t, k in cache_rows.items())


def _fit_ranking(plan: LoaderPlan, feature_rows: dict[str, int]) -> None:
    """The ranking runs before the cache is made, in the bytes the cache will take: when
    ``plan.cache_policy`` needs more, rank by degree (one array a row) if that fits, else
    plan no cache (a cache a few percent of a row each cannot be ranked in its own bytes)."""
    if not plan.cache_rows or plan.cache_policy not in RANK_ROW_BYTES:
        return
    need = ranking_bytes(plan.cache_policy, plan.cache_rows, feature_rows)
    if need <= plan.cache_bytes:
        return
    cheap = ranking_bytes("degree", plan.cache_rows, feature_rows)
    if cheap <= plan.cache_bytes:
        plan.notes.append(f"{plan.cache_policy} ranking would hold {format_bytes(need)}, more "
                          f"than the cache's {format_bytes(plan.cache_bytes)}: ranked by degree")
        plan.cache_policy = "degree"
        return
    plan.notes.append(f"no cache: ranking its rows would hold {format_bytes(cheap)}, more than "
                      f"the cache's {format_bytes(plan.cache_bytes)}")
    plan.cache_rows, plan.cache_bytes = {}, 0



def loader_plan_inputs(features: dict, *, cuda: bool, staging_bytes: int, prefetch: int,
                       batches_in_flight: int, batch_dtypes: dict | None = None,
                       casts: bool = False) -> dict:
    """The keywords of :func:`plan_loader` that a loader's features and options give, as the
    loader and ``featurestore plan`` both assemble them: row bytes and rows per type (and the
    batch's row bytes in ``batch_dtypes``, the loader's ``dtype=``), the batches and sampled
    subgraphs in flight (batch buffers: none with CUDA, rows go through staging), and the
    readers' I/O threads and scratch plus the staging chunks (two to a CUDA device; one on the
    host when rows are cast)."""
    staging = 2 * staging_bytes if cuda else (staging_bytes if casts else 0)
    out = dict(feature_row_bytes={t: int(f.row_bytes) for t, f in features.items()},
               feature_rows={t: int(f.shape[0]) for t, f in features.items()},
               batches_in_flight=0 if cuda else int(batches_in_flight),
               subgraphs_in_flight=prefetch + 3,
               io_threads=max([f.reader.io_threads for f in features.values()] + [0]),
               scratch_bytes=sum(f.reader.scratch_bytes() for f in features.values()) + staging)
    if batch_dtypes is not None:
        out["batch_row_bytes"] = {t: int(np.prod(f.shape[1:], dtype=np.int64))
                                  * np.dtype(batch_dtypes[t]).itemsize
                                  for t, f in features.items()}
    return out

def _resident(plan: LoaderPlan, nbytes: int | None, bits: int) -> None:
    """A resident topology's bytes in ``plan``, when given (a packed copy's)."""
    if plan.topology == "memory" and nbytes is not None:
        plan.topology_bytes, plan.topology_bits = int(nbytes), int(bits)


def resident_bytes(graph, pack: bool) -> tuple[int, int]:
    """``(bytes, widest packed bits)`` of the resident copy the loader makes of ``graph``'s
    topology (a :class:`~loaders.sample.sampler.CSCGraph`): each ``indptr`` as
    :func:`resident_indptr_dtype`, each ``indices`` bit-packed when ``pack`` and that is
    smaller (:func:`loaders.sample.packed.packed_bits`; 0 bits: none packed)."""
    nbytes = widest = 0
    for et, (indptr, indices) in graph.csc.items():
        n = int(indices.shape[0])
        bits = packed_bits(indices, graph.num_nodes[et.src]) if pack else 0
        ix = 8 * words_for(n, bits) if bits else n * np.dtype(indices.dtype).itemsize
        nbytes += resident_indptr_dtype(indptr).itemsize * int(indptr.shape[0]) + int(ix)
        widest = max(widest, bits)
    return nbytes, widest


def resident_indptr_dtype(indptr) -> np.dtype:
    """The dtype the loader holds a resident CSC ``indptr`` in: int32 when every offset fits
    (half the bytes), else its own."""
    fits = indptr.shape[0] == 0 or int(indptr[-1]) < 2**31 - 1
    return np.dtype(np.int32) if fits and indptr.dtype.itemsize > 4 else indptr.dtype
