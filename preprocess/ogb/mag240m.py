"""``featurestore preprocess mag240m ROOT STORE``: MAG240M's official layout into a store.

Output (PyG's ``ToUndirected`` view of ``MAG240MDataset``):

- node types ``paper``, ``author``, ``institution`` with the counts of ``meta.pt``; store id =
  ogb id (``orig_ids`` is the identity);
- edge types ``author-writes-paper``, ``paper-rev_writes-author``,
  ``author-affiliated_with-institution``, ``institution-rev_affiliated_with-author`` and
  ``paper-cites-paper`` symmetrised; every type coalesced (duplicate edges removed);
- ``paper/feat`` (fp16 as given), ``paper`` labels (int64: NaN -> -1, the hidden test
  labels -1 stay -1), ``paper/year``;
- splits ``train``, ``valid``, ``test-dev``, ``test-challenge`` (``test`` split as ogb does:
  position % 5 < 3 is test-dev);
- with ``derive_features="mean"``: ``author/feat`` and ``institution/feat`` as the OGB baseline's
  ``full_feat.npy`` builds them, out of core.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

import featurestore as fs
from preprocess.jobs.variants import build_csc, write_features
from preprocess.sources.features import FeatureSource
from preprocess.sources.npy import from_npy, load_npy
from preprocess.steps.csc import reverse_etype
from preprocess.jobs.paths import local_input

from preprocess.dask.run import check_shared_scratch
from preprocess.jobs.job import Job, StepContext, StepDef

from preprocess.ogb._common import check_ids, labels_to_int, scratch_file
from preprocess.ogb.derive import mean_blocks
from preprocess.ogb.errors import RawDataError
from preprocess.ogb.layout import MAG240M_RELATIONS, MagPaths
from preprocess.ogb.ptload import load_pt

__all__ = ["preprocess_mag240m", "mag_steps", "MagContext", "read_mag_meta", "mag_splits",
           "check_declared_counts"]

log = logging.getLogger(__name__)


#: a declared count above this many times the ids the edges name is refused (phantom nodes).
PHANTOM_FACTOR = 2


def check_declared_counts(paths: MagPaths, meta: dict[str, int], edges: dict,
                          block: int = 1 << 24) -> dict[str, int]:
    """Compare ``meta.pt``'s author and institution counts (nothing else declares them) with
    the largest id the edge files name, before any array is written: a ``meta.pt`` claiming 4M
    authors over edges that name 100k would make 3.9M phantom authors. Returns the largest id
    of each type (-1 when no edge names it)."""
    hi = {nt: -1 for nt in ("author", "institution")}
    for (s, _, d), path in edges.items():
        arr = np.load(path, mmap_mode="r")
        for row, nt in ((0, s), (1, d)):
            if nt not in hi or arr.shape[1] == 0:
                continue
            for lo in range(0, arr.shape[1], block):
                hi[nt] = max(hi[nt], int(np.max(arr[row, lo:lo + block])))
    for nt, m in hi.items():
        if meta[nt] > PHANTOM_FACTOR * (m + 1):
            raise RawDataError(
                f"Expected about as many {nt}s in {paths.meta} as the edge files name. It "
                f"declares {meta[nt]:,}, but the largest {nt} id in the edges is {m:,}: "
                f"{meta[nt] - m - 1:,} {nt}s would exist in no edge. The file is not the "
                "dataset's own meta.pt.")
    return hi


def read_mag_meta(paths: MagPaths) -> dict[str, int]:
    """``meta.pt`` checked: positive ``paper``, ``author``, ``institution``, ``num_classes``."""
    meta = load_pt(paths.meta)
    if not isinstance(meta, dict):
        raise RawDataError(f"Expected a dict in {paths.meta}. Got {type(meta).__name__}.")
    out = {}
    for k in ("paper", "author", "institution", "num_classes"):
        v = meta.get(k)
        try:
            ok = v is not None and int(v) == v and int(v) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise RawDataError(f"Expected a positive integer {k!r} in {paths.meta}. Got {v!r}.")
        out[k] = int(v)
    return out


def mag_splits(paths: MagPaths, num_papers: int) -> dict[str, np.ndarray]:
    """``train``, ``valid``, ``test-dev``, ``test-challenge`` from ``split_dict.pt``.

    ``test`` is divided as ogb's ``MAG240MDataset`` does (position ``% 5 < 3`` is test-dev);
    a dict that already holds ``test-dev`` and ``test-challenge`` is taken as it is.
    """
    sd = load_pt(paths.split_dict)
    if not isinstance(sd, dict):
        raise RawDataError(f"Expected a dict in {paths.split_dict}. Got {type(sd).__name__}.")
    get = {k: np.asarray(v) for k, v in sd.items()}
    out = {}
    for k in ("train", "valid"):
        if k not in get:
            raise RawDataError(f"Expected a {k!r} entry in {paths.split_dict}. "
                               f"It has {sorted(get)}.")
        out[k] = check_ids(get[k], num_papers, paths.split_dict, k)
    if "test" in get:
        test = check_ids(get["test"], num_papers, paths.split_dict, "test")
        pos = np.arange(test.shape[0])
        out["test-dev"] = test[pos % 5 < 3]
        out["test-challenge"] = test[pos % 5 >= 3]
    elif "test-dev" in get and "test-challenge" in get:
        for k in ("test-dev", "test-challenge"):
            out[k] = check_ids(get[k], num_papers, paths.split_dict, k)
    else:
        raise RawDataError(f"Expected a 'test' entry (or 'test-dev' and 'test-challenge') in "
                           f"{paths.split_dict}. It has {sorted(get)}.")
    return out


def _check_layout(paths: MagPaths, meta: dict) -> dict[str, Any]:
    """Open the arrays (memory maps) and check their shapes and dtypes against ``meta.pt``."""
    feat = load_npy(paths.paper("node_feat"), "feature matrix")
    n = meta["paper"]
    if feat.ndim != 2 or feat.shape[0] != n or feat.dtype.kind != "f":
        raise RawDataError(f"Expected float paper features of shape [{n}, dim] (meta.pt) in "
                           f"{paths.paper('node_feat')}. Got {feat.dtype} {feat.shape}.")
    label = load_npy(paths.paper("node_label"), "label array")
    year = load_npy(paths.paper("node_year"), "year array")
    for arr, what in ((label, "node_label"), (year, "node_year")):
        if arr.size != n or arr.ndim not in (1, 2):
            raise RawDataError(f"Expected {n} entries (meta.pt) in {paths.paper(what)}. "
                               f"Got shape {arr.shape}.")
    if year.dtype.kind not in "iu":
        raise RawDataError(f"Expected integer years in {paths.paper('node_year')}. "
                           f"Got {year.dtype}.")
    edges = {}
    for s, r, d in MAG240M_RELATIONS:
        p = paths.edge_index(s, r, d)
        e = load_npy(p, "edge index")
        if e.ndim != 2 or e.shape[0] != 2 or e.dtype.kind not in "iu":
            raise RawDataError(f"Expected an integer edge_index of shape [2, E] in {p}. "
                               f"Got {e.dtype} {e.shape}.")
        edges[(s, r, d)] = p
    return dict(feat=feat, label=label.reshape(-1), year=year.reshape(-1), edges=edges)


@dataclass
class MagContext(StepContext):
    """What the MAG240M steps share: the checked inputs and the job's options."""

    paths: MagPaths = None
    meta: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    splits: dict = field(default_factory=dict)
    budget_bytes: int = 1 << 30
    progress: bool = True
    dask: Any = None  # a distributed.Client: CSC ranges and feature blocks as Dask tasks


def _nodes(ctx: MagContext) -> dict:
    check_declared_counts(ctx.paths, ctx.meta, ctx.arrays["edges"])
    for nt in ("paper", "author", "institution"):
        ctx.job.writer.add_node_type(nt, ctx.meta[nt])
    return dict(ctx.meta)


def _paper_features(ctx: MagContext) -> dict:
    feat = ctx.arrays["feat"]
    if ctx.dask is not None:  # row blocks as Dask tasks: the same array, byte for byte
        src = FeatureSource.from_npy(ctx.paths.paper("node_feat"))
        st = write_features(ctx.job.writer, "paper", "feat", src,
                            budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir,
                            progress=ctx.progress, dask=ctx.dask)
        return dict(rows=feat.shape[0], bytes=int(feat.nbytes), tasks=st.get("tasks", 0),
                    seconds=st["seconds"])
    ctx.job.writer.add_features("paper", "feat", feat)
    return dict(rows=feat.shape[0], bytes=int(feat.nbytes))


def _paper_values(ctx: MagContext) -> dict:
    lab = labels_to_int(_flat_blocks(ctx.arrays["label"]), ctx.meta["paper"],
                        scratch_file(ctx.job, "label.npy"), name=ctx.paths.paper("node_label"),
                        num_classes=ctx.meta["num_classes"])
    ctx.job.writer.add_labels("paper", lab)
    ctx.job.writer.add_values("paper", "year", ctx.arrays["year"])
    return dict(labelled=int(np.count_nonzero(np.asarray(lab) >= 0)))


def _write_splits(ctx: MagContext) -> dict:
    for name, ids in ctx.splits.items():
        ctx.job.writer.add_split(name, "paper", ids)
    return {k: int(v.shape[0]) for k, v in ctx.splits.items()}


def _csc(ctx: MagContext, etype: tuple, rel: tuple, reverse: bool = False) -> dict:
    """``etype``'s CSC from the edge file of relation ``rel`` (reversed, or symmetrised
    when the relation joins one type)."""
    src = from_npy(ctx.arrays["edges"][rel])
    if reverse:
        src = src.reversed()
    kw = {"symmetrize": True} if rel[0] == rel[2] else {}
    return build_csc(ctx.job.writer, etype, src, num_src=ctx.meta[etype[0]],
                     num_dst=ctx.meta[etype[2]], coalesce=True, tmpdir=ctx.job.tmpdir,
                     budget_bytes=ctx.budget_bytes, progress=ctx.progress, dask=ctx.dask, **kw)


def _derive_step(ctx: MagContext, etype: tuple) -> dict:
    return _derive(ctx.job.writer, etype, etype[0], etype[2], ctx.budget_bytes, ctx.progress)


def mag_steps(meta: dict, arrays: dict, splits: dict,
              derive_features: str | None) -> list[StepDef]:
    """The steps of the MAG240M job, in the order they run, with their plans."""
    feat = arrays["feat"]
    steps = [
        StepDef("nodes", _nodes, {k: meta[k] for k in ("paper", "author", "institution")}),
        StepDef("features:paper", _paper_features,
                {"rows": feat.shape[0], "disk_bytes": int(feat.nbytes)}),
        StepDef("labels-years:paper", _paper_values, {"rows": meta["paper"]}),
        StepDef("splits", _write_splits, {k: int(v.shape[0]) for k, v in splits.items()}),
    ]
    for (s, r, d), p in arrays["edges"].items():
        e = int(from_npy(p).num_edges)
        idx = 4 if max(meta[s], meta[d]) < 2**31 - 1 else 8
        if s == d:
            steps.append(StepDef(f"csc:{s}__{r}__{d}", partial(_csc, etype=(s, r, d),
                                                                rel=(s, r, d)),
                                 {"edges": 2 * e, "disk_bytes": 2 * e * idx * 2}))
            continue
        rev = reverse_etype((s, r, d))
        for etype, back in (((s, r, d), False), (rev, True)):
            steps.append(StepDef(f"csc:{'__'.join(etype)}",
                                 partial(_csc, etype=etype, rel=(s, r, d), reverse=back),
                                 {"edges": e, "disk_bytes": e * idx * 2}))
    if derive_features == "mean":
        dim = feat.shape[1]
        for etype in (("paper", "rev_writes", "author"),
                      ("author", "affiliated_with", "institution")):
            nt = etype[2]
            steps.append(StepDef(f"derive:{nt}-feat", partial(_derive_step, etype=etype),
                                 {"rows": meta[nt], "disk_bytes": meta[nt] * dim * 2}))
    return steps


def preprocess_mag240m(root, store, *, derive_features: str | None = None,
                       budget_bytes: int = 1 << 30, force: bool = False, dry_run: bool = False,
                       progress: bool = True, dask=None, scratch_dir=None) -> Job:
    """Turn ``ROOT/mag240m_kddcup2021`` into a store at ``store``.

    Parameters
    ----------
    root
        The directory holding ``mag240m_kddcup2021/`` as the official zip unpacks (or that
        folder itself).
    store
        Where to write the store (local path). An interrupted run is resumed at the step it
        was in when rerun with the same inputs and options.
    derive_features
        ``None`` or ``"mean"`` (author = mean of their papers, institution = mean of their
        authors; fp32 sums, stored fp16).
    budget_bytes
        Anonymous memory each step may hold (edge conversion, derived features).
    force
        Start over even if a store (complete or not) is there.
    dry_run
        Check the inputs and print the plan; write nothing.
    dask
        A ``distributed.Client``: the CSC ranges and the paper feature blocks run as Dask
        tasks (same store).
    scratch_dir
        Scratch and work files (``--scratch``), see :class:`~preprocess.jobs.job.Job`.

    Returns
    -------
    preprocess.jobs.job.Job
        The finished job: ``job.summary()`` is a table of the steps (seconds, edges/s, peak
        memory), ``job.steps`` their statistics.
    """
    if derive_features not in (None, "mean"):
        raise ValueError(f"Expected derive_features None or 'mean'. Got {derive_features!r}.")
    paths = MagPaths.under(local_input(root))
    meta = read_mag_meta(paths)
    arrays = _check_layout(paths, meta)
    splits = mag_splits(paths, meta["paper"])
    inputs = [paths.meta, paths.split_dict] + [paths.paper(w) for w in
                                               ("node_feat", "node_label", "node_year")]
    inputs += list(arrays["edges"].values())
    opts = dict(derive_features=derive_features, coalesce=True, to_undirected=True)
    check_shared_scratch(store, scratch_dir, dask, dry_run)  # before the store is opened
    job = Job(store, "mag240m", inputs, opts, force=force, dry_run=dry_run,
              budget_bytes=budget_bytes, progress=progress, scratch_dir=scratch_dir)
    ctx = MagContext(job, paths=paths, meta=meta, arrays=arrays, splits=splits,
                     budget_bytes=budget_bytes, progress=progress, dask=dask)
    job.run_steps(mag_steps(meta, arrays, splits, derive_features), ctx)
    job.commit()
    return job


def _flat_blocks(arr: np.ndarray, block: int = 1 << 22):
    for lo in range(0, arr.shape[0], block):
        yield arr[lo:lo + block]


def _derive(w, etype, src_type: str, dst_type: str, budget_bytes: int, progress: bool) -> dict:
    """``dst_type/feat`` = mean over ``etype``'s CSC of ``src_type/feat``, streamed."""
    s = fs.open_store(w.url, allow_incomplete=True)
    try:
        indptr, indices = s.csc(etype)
        x = s.features(src_type, "feat")
        blocks = mean_blocks(indptr, indices, x, out_dtype=np.float16,
                             budget_bytes=max(budget_bytes // 2, 32 << 20), progress=progress)
        w.add_features(dst_type, "feat", blocks, dtype=np.float16, row_shape=x.shape[1:])
        return dict(rows=int(indptr.shape[0] - 1), edges=int(indptr[-1]),
                    bytes_gathered=int(indptr[-1]) * x.row_bytes)
    finally:
        s.close()
