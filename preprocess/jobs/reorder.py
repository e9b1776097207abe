"""The ``featurestore preprocess reorder`` job: a store renumbered hot-first, the rest in a
locality order, written as a new store.

One node type is renumbered (by default the one with the most feature bytes). Its new ids
``0 .. hot_rows - 1`` are the rows a ranking puts hottest, hottest first, so that any prefix
is that ranking's top rows (a static cache of the first ``K`` rows is a bounds check); the
other rows follow breadth first from them over the type's own edges
(:mod:`preprocess.steps.reorder`), so the rows one sampling step reads together sit at
adjacent ids and a batch's misses coalesce into longer reads. Rankings:

``presample``
    The loader's static-cache ranking (``NeighborLoader(cache="presample")``): a sampling-only
    pass over an epoch of seed batches counts each row's reads, shrunk towards the mean of
    rows of the same degree. Needs the fanouts, batch size and seeds the training will use.
``degree``
    How often a node is a neighbour (the loader's ``cache="degree"``).
``bfs``
    No hot prefix: breadth first from the smallest ids.

The rankings come from the ``loaders`` package through entry points of the group
:data:`RANKINGS_GROUP` (``pyproject.toml``), as ``preprocess`` imports nothing above it: a
function ``rank(store, ntype, k, **options) -> ids`` (hottest first).

Everything of the renumbered type follows the order: features, values and labels by row,
``orig_id`` (so ``orig_id[new] == old orig_id[perm[new]]``), splits (mapped, sorted), the
sources and destinations of every edge type touching it (neighbour lists sorted again),
edge features and values (in the new CSC edge order) and the id columns of edge splits.
Other node and edge types are copied. The source store is only read; the new store is
written by :class:`~preprocess.jobs.job.Job` (resumable, ``--force``, ``--dry-run``), and
its root attribute ``node_order`` records the order and the hot prefix's length.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import entry_points
from typing import Any
from collections.abc import Callable

import numpy as np

import featurestore as fs
from featurestore.errors import UnsafePathError

from preprocess.errors import ReorderError
from preprocess.jobs.job import Job, StepContext, StepDef
from preprocess.sources.features import FeatureSource
from preprocess.sources.store import StoreRows
from preprocess.steps.features import permuted_blocks, write_features, write_values
from preprocess.steps.reorder import load_order, node_order, relabel_csc

__all__ = ["ORDERS", "RANKINGS_GROUP", "run_reorder", "reorder_steps", "ReorderContext",
           "find_ranking", "hot_count", "default_ntype"]

log = logging.getLogger(__name__)

#: the orders ``--order`` takes
ORDERS = ("presample", "degree", "bfs")
#: the entry-point group of the rankings (``rank(store, ntype, k, **options) -> ids``)
RANKINGS_GROUP = "featurestore.rankings"
#: the default hot prefix: a quarter of the rows (about what an epoch of R-MAT 22 batches
#: touches; docs/preprocess.md)
DEFAULT_HOT = "25%"


def find_ranking(name: str) -> Callable:
    """The ranking function registered as ``name`` in :data:`RANKINGS_GROUP`."""
    found = [ep for ep in entry_points(group=RANKINGS_GROUP) if ep.name == name]
    if not found:
        raise ReorderError(f"Expected a ranking {name!r} registered in the entry-point group "
                           f"{RANKINGS_GROUP!r} (the loaders package). Found none: install "
                           "the package (pip install -e .) so its metadata is there.")
    return found[0].load()


def hot_count(hot, n: int) -> int:
    """Rows in the hot prefix: ``hot`` is a count (``419430``), a share (``"10%"``, ``0.1``)."""
    try:
        if isinstance(hot, str) and hot.strip().endswith("%"):
            k = int(n * float(hot.strip()[:-1]) / 100)
        elif isinstance(hot, float) or (isinstance(hot, str) and "." in hot):
            k = int(n * float(hot))
        else:
            k = int(hot)
    except ValueError as e:
        raise ReorderError(f"Expected --hot as rows (419430) or a share (10%, 0.1). Got "
                           f"{hot!r} instead.") from e
    if k < 0 or k > n:
        raise ReorderError(f"Expected a hot prefix of 0 to {n} rows (the node type's). Got "
                           f"{hot!r} = {k} rows instead.")
    return k


def default_ntype(store) -> str:
    """The node type with the most feature bytes (then the most nodes)."""
    def size(t):
        feats = store.meta.node_types[t].features.values()
        row = sum(int(np.prod(f.shape, dtype=np.int64)) * f.dtype.itemsize for f in feats)
        return (store.num_nodes(t) * row, store.num_nodes(t))

    return max(store.node_types, key=size)


@dataclass
class ReorderContext(StepContext):
    """What the reorder job's steps share: the source store and the options."""

    src: Any = None
    options: dict = field(default_factory=dict)
    budget_bytes: int = 2 << 30
    progress: bool = True
    ranking: Callable | None = None
    _order: tuple | None = None

    @property
    def ntype(self) -> str:
        """The node type renumbered."""
        return self.options["ntype"]

    @property
    def order(self) -> tuple[np.ndarray, np.ndarray]:
        """``(perm, inv)`` of the renumbered type, memory-mapped from the work directory."""
        if self._order is None:
            self._order = load_order(order_dir(self.job))
            if self._order is None:  # the order step finished, its files are gone: a new
                # ranking could differ from the one the rows already written follow
                raise ReorderError(f"Expected the order of {self.ntype!r} in "
                                   f"{order_dir(self.job)}, which the order step writes. It "
                                   "is missing: run the job with --force.")
        return self._order

    def perm_of(self, ntype: str) -> np.ndarray | None:
        """New id -> old id of ``ntype``; None when its ids stay."""
        return self.order[0] if ntype == self.ntype else None

    def inv_of(self, ntype: str) -> np.ndarray | None:
        """Old id -> new id of ``ntype``; None when its ids stay."""
        return self.order[1] if ntype == self.ntype else None


def order_dir(job) -> str:
    """Where the job keeps its node order (``perm.npy``, ``inv.npy``) until it commits."""
    return os.path.join(job.workdir, "order")


def _eids_path(job, et) -> str:
    return os.path.join(job.workdir, "edge-order", f"{et.key()}.npy")


# -- steps -----------------------------------------------------------------------------------
def _order_step(ctx: ReorderContext) -> dict:
    o, src, nt = ctx.options, ctx.src, ctx.ntype
    n = src.num_nodes(nt)
    hot = np.empty(0, np.int64)
    if o["order"] != "bfs" and o["hot_rows"]:
        rank = ctx.ranking or find_ranking(o["order"])
        hot = np.asarray(rank(src, nt, o["hot_rows"], fanouts=o["fanouts"],
                              batch_size=o["batch_size"], input=o["input"],
                              epochs=o["epochs"], seed=o["seed"]), dtype=np.int64)
        if hot.shape != (o["hot_rows"],):
            raise ReorderError(f"Expected {o['hot_rows']} ids from the ranking "
                               f"{o['order']!r}. Got shape {hot.shape} instead.")
    own = [e for e in src.edge_types if e.src == nt and e.dst == nt]
    et = max(own, key=src.num_edges) if own else None
    if et is None:
        log.info("%s: no edge type from %s to itself: the rows after the hot prefix keep "
                 "their id order", src.url, nt)
    stats = node_order(n, hot, src.csc(et) if et is not None else None, order_dir(ctx.job),
                       expand_max_degree=o["expand_max_degree"])
    ctx._order = None
    return {**stats, "bfs_edge_type": list(et) if et is not None else None}


def _nodes(ctx: ReorderContext, ntype: str) -> None:
    orig, perm = ctx.src.orig_ids(ntype), ctx.perm_of(ntype)
    n, step = orig.shape[0], 1 << 20

    def blocks():
        for lo in range(0, n, step):
            yield (np.asarray(orig[lo:lo + step]) if perm is None
                   else np.asarray(orig)[np.asarray(perm[lo:lo + step])])

    ctx.job.writer.add_node_type(ntype, n, orig_ids=blocks())


def _has_edge_data(src, et) -> bool:
    return bool(src.edge_feature_names(et) or src.edge_value_names(et))


def _csc(ctx: ReorderContext, et) -> dict:
    src = ctx.src
    indptr, indices = src.csc(et)
    moved = et.src == ctx.ntype or et.dst == ctx.ntype
    eids = _eids_path(ctx.job, et) if moved and _has_edge_data(src, et) else None
    if eids:
        os.makedirs(os.path.dirname(eids), exist_ok=True)
    return relabel_csc(ctx.job.writer, tuple(et), indptr, indices, ctx.perm_of(et.dst),
                       ctx.inv_of(et.src), tmpdir=ctx.job.tmpdir or ctx.job.workdir,
                       eids_path=eids, budget_bytes=ctx.budget_bytes, progress=ctx.progress)


def _edge_order(ctx: ReorderContext, et) -> np.ndarray | None:
    """The old position of every new edge of ``et`` (None: the edges kept their order)."""
    if et.src != ctx.ntype and et.dst != ctx.ntype:
        return None
    path = _eids_path(ctx.job, et)
    if not os.path.exists(path):  # the csc step finished in a run whose work files are gone
        raise ReorderError(f"Expected the edge order of {tuple(et)} at {path}, which the "
                           "csc step writes. It is missing: run the job with --force.")
    return np.load(path, mmap_mode="r")


def _rows(src_rows: FeatureSource, perm, ctx: ReorderContext):
    """Blocks of ``src_rows`` in the order ``perm`` (None: as they are), within the budget."""
    rows = max(1, ctx.budget_bytes // 4 // max(src_rows.row_bytes, 1))
    if perm is None:
        return src_rows.iter_blocks(rows)
    if isinstance(src_rows, StoreRows) and src_rows.nbytes <= ctx.budget_bytes // 4:
        src_rows = src_rows.load()
    return permuted_blocks(src_rows, perm, rows, budget_bytes=ctx.budget_bytes,
                           tmpdir=ctx.job.tmpdir, progress=ctx.progress)


def _edge_column(ctx: ReorderContext, et, name: str, kind: str) -> dict:
    src, w = ctx.src, ctx.job.writer
    order = _edge_order(ctx, et)
    if kind == "features":
        rows = StoreRows(src.edge_features(et, name))
        w.add_edge_features(et, name, _rows(rows, order, ctx), dtype=rows.dtype,
                            row_shape=rows.row_shape,
                            compressors=_compressors(src.meta.edge_type(et).features, name))
    else:
        rows = FeatureSource.from_array(src.edge_values(et, name), f"{et.key()}/{name}")
        w.add_edge_values(et, name, _rows(rows, order, ctx))
    return {"rows": rows.num_rows}


def _compressors(features, name: str):
    """Zstandard for an array the source store holds compressed (uncompressed stays so)."""
    if features[name].compressed:
        import zarr

        return zarr.codecs.ZstdCodec()
    return None


def _features(ctx: ReorderContext, ntype: str, name: str) -> dict:
    rows = StoreRows(ctx.src.features(ntype, name))
    perm = ctx.perm_of(ntype)
    if perm is not None and rows.nbytes <= ctx.budget_bytes // 4:
        rows = rows.load()
    return write_features(ctx.job.writer, ntype, name, rows, perm=perm,
                          budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir,
                          compressors=_compressors(ctx.src.meta.node_types[ntype].features, name),
                          progress=ctx.progress)


def _values(ctx: ReorderContext, ntype: str, name: str) -> dict:
    vals = FeatureSource.from_array(ctx.src.values(ntype, name), f"{ntype}/{name}")
    return write_values(ctx.job.writer, ntype, name, vals, perm=ctx.perm_of(ntype),
                        budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir,
                        progress=ctx.progress)


def _mapped(ids: np.ndarray, inv) -> np.ndarray:
    ids = np.asarray(ids, dtype=np.int64)
    return ids if inv is None else np.asarray(inv)[ids]


def _split(ctx: ReorderContext, name: str, ntype: str) -> dict:
    ids = _mapped(ctx.src.split(name, ntype), ctx.inv_of(ntype))
    if ctx.inv_of(ntype) is not None:
        ids = np.sort(ids)
    ctx.job.writer.add_split(name, ntype, ids)
    return {"nodes": int(ids.shape[0])}


def _edge_split(ctx: ReorderContext, name: str, et) -> dict:
    ends = {"src": et.src, "dst": et.dst, "neg_dst": et.dst}
    cols = {}
    for col, a in ctx.src.edge_split(name, et).items():
        cols[col] = _mapped(a, ctx.inv_of(ends[col])) if col in ends else np.asarray(a)
    ctx.job.writer.add_edge_split(name, et, **cols)
    return {"pairs": int(cols["src"].shape[0])}


def _node_order(ctx: ReorderContext) -> None:
    o = ctx.options
    ctx.job.writer.set_node_order(ctx.ntype, {
        "order": o["order"], "hot_rows": o["hot_rows"] if o["order"] != "bfs" else 0,
        "cold_order": "bfs", "expand_max_degree": o["expand_max_degree"],
        "fanouts": o["fanouts"], "batch_size": o["batch_size"], "input": o["input"]})


def _plan_bytes(src, ntype: str) -> int:
    """Bytes a node type's rows take in the store (features and values, and orig_id)."""
    nt = src.meta.node_types[ntype]
    row = 8 + sum(int(np.prod(f.shape, dtype=np.int64)) * f.dtype.itemsize
                  for f in nt.features.values())
    row += sum(v.dtype.itemsize for v in nt.values.values())
    return nt.num_nodes * row


def reorder_steps(src, options: dict) -> list[StepDef]:
    """The steps of the reorder job of store ``src``, in the order they run, with plans."""
    nt, meta = options["ntype"], src.meta
    n = src.num_nodes(nt)
    steps = [StepDef(f"order:{nt}", _order_step,
                     {"nodes": n, "hot_rows": options["hot_rows"], "disk_bytes": 16 * n,
                      "memory_bytes": 25 * n})]
    for t in meta.node_types:
        steps.append(StepDef(f"nodes:{t}", partial(_nodes, ntype=t),
                             {"nodes": src.num_nodes(t)}))
    for e in meta.edge_types:
        et = e.etype
        plan = {"edges": e.num_edges, "disk_bytes": e.num_edges * (e.indices_dtype.itemsize + 8)
                + 8 * (src.num_nodes(et.dst) + 1)}
        steps.append(StepDef(f"csc:{et.key()}", partial(_csc, et=et), plan))
        for kind, names in (("features", e.features), ("values", e.values)):
            steps += [StepDef(f"edge_{kind}:{et.key()}/{name}",
                              partial(_edge_column, et=et, name=name, kind=kind),
                              {"rows": e.num_edges}) for name in names]
    for t, spec in meta.node_types.items():
        for name, f in spec.features.items():
            row = int(np.prod(f.shape, dtype=np.int64)) * f.dtype.itemsize
            steps.append(StepDef(f"features:{t}/{name}", partial(_features, ntype=t, name=name),
                                 {"rows": spec.num_nodes,
                                  "disk_bytes": spec.num_nodes * row * (2 if t == nt else 1),
                                  "memory_bytes": options["budget_bytes"]}))
        steps += [StepDef(f"values:{t}/{name}", partial(_values, ntype=t, name=name),
                          {"rows": spec.num_nodes}) for name in spec.values]
    steps += [StepDef(f"split:{name}/{t}", partial(_split, name=name, ntype=t))
              for name, per in meta.splits.items() for t in per]
    steps += [StepDef(f"edge_split:{name}/{et.key()}", partial(_edge_split, name=name, et=et))
              for name, per in meta.edge_splits.items() for et in per]
    steps.append(StepDef(f"node_order:{nt}", _node_order))
    return steps


def _check_paths(src_url: str, dst_url: str) -> None:
    """Refuse an output inside (or equal to) the input store: a store's directory is its
    writer's to manage, and the input must stay as it is."""
    if "://" in src_url or "://" in dst_url:
        return
    a, b = os.path.realpath(src_url), os.path.realpath(dst_url)
    if b == a or b.startswith(a.rstrip(os.sep) + os.sep):
        raise UnsafePathError(f"Expected the output {dst_url} outside the input store "
                              f"{src_url}. Got a path inside it; nothing was written.")


def _options(src, *, order, ntype, hot, fanouts, batch_size, input, epochs, seed,
             expand_max_degree, budget_bytes) -> dict:
    if order not in ORDERS:
        raise ReorderError(f"Expected --order in {ORDERS}. Got {order!r} instead.")
    if ntype is None:
        ntype = default_ntype(src)
    elif ntype not in src.node_types:
        raise ReorderError(f"Expected a node type of {src.url}: {src.node_types}. Got "
                           f"{ntype!r} instead.")
    if input is not None and input not in src.split_names:
        raise ReorderError(f"Expected --input naming a split of {src.url}: "
                           f"{src.split_names}, or 'all' (every node). Got {input!r}.")
    return dict(order=order, ntype=ntype,
                hot_rows=0 if order == "bfs" else hot_count(hot, src.num_nodes(ntype)),
                fanouts=[int(f) for f in fanouts], batch_size=int(batch_size), input=input,
                epochs=int(epochs), seed=int(seed),
                expand_max_degree=None if expand_max_degree is None else int(expand_max_degree),
                budget_bytes=budget_bytes)


def run_reorder(src_url, dst_url, *, order: str = "presample", ntype: str | None = None,
                hot=DEFAULT_HOT, fanouts=(15, 10, 5), batch_size: int = 1024,
                input: str | None = "train", epochs: int = 1, seed: int = 0,
                expand_max_degree: int | None = None, ranking: Callable | None = None,
                force: bool = False, dry_run: bool = False, budget_bytes: int = 2 << 30,
                progress: bool = True, scratch_dir=None) -> Job:
    """Write store ``src_url`` renumbered as ``order`` asks to a new store ``dst_url``.

    ``ntype``: the node type renumbered (default: the one with the most feature bytes).
    ``hot``: rows in the hot prefix (a count, or a share: ``"10%"``); ``fanouts``,
    ``batch_size``, ``input`` (a split of ``ntype``; None: every node), ``epochs`` and
    ``seed``: the presample pass (as the loader's). ``expand_max_degree``: nodes of larger
    in-degree are placed but not expanded by the breadth-first order (None: every node).
    ``ranking``: a ranking function instead of the one registered as ``order``. Returns the
    job (``job.summary()``); the other arguments are :class:`~preprocess.jobs.job.Job`'s.
    """
    src_url, dst_url = os.fspath(src_url), os.fspath(dst_url)
    _check_paths(src_url, dst_url)
    src = fs.open_store(src_url)
    try:
        options = _options(src, order=order, ntype=ntype, hot=hot, fanouts=fanouts,
                           batch_size=batch_size, input=input, epochs=epochs, seed=seed,
                           expand_max_degree=expand_max_degree, budget_bytes=budget_bytes)
        steps = reorder_steps(src, options)
        del options["budget_bytes"]  # not an option of the output: a resume may change it
        inputs = [src_url] if src.loc.is_local else []
        job = Job(dst_url, "reorder", inputs, {**options, "source": src.url}, force=force,
                  dry_run=dry_run, budget_bytes=budget_bytes, progress=progress,
                  scratch_dir=scratch_dir)
        if not dry_run and not job.complete:
            job.check_disk(sum(int(s.plan_for(None).get("disk_bytes", 0)) for s in steps),
                           "the store and its scratch files")
        job.run_steps(steps, ReorderContext(job, src=src, options=options,
                                            budget_bytes=budget_bytes, progress=progress,
                                            ranking=ranking))
        job.commit(source=src.url, generation=src.generation)
    finally:
        src.close()
    return job
