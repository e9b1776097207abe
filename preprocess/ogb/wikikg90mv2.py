"""``featurestore preprocess wikikg90mv2 ROOT STORE``: WikiKG90Mv2's official layout into a store.

Output (``docs/ogb.md``):

- node types ``entity`` (``feat``: fp16 x 768 as given; store id = ogb id) and ``relation``
  (``feat``: the relation features, one row per relation);
- edge types ``("entity", "relation", "entity")`` (h -> t, one edge per training triple, not
  coalesced) and ``("entity", "rev_relation", "entity")`` (t -> h), each with the per-edge
  value ``relation`` (int32 relation id in CSC edge order: PyG's ``edge_type``, DGL's
  ``etype``), carried there by :mod:`preprocess.steps.edge_columns` (repeated pairs keep
  the order of ``train_hrt``);
- edge splits of ``("entity", "relation", "entity")``: ``train`` (``src`` = h, ``dst`` = t,
  ``relation``), ``valid`` (``src``, ``relation``, ``dst`` from ``val_t``), ``test-dev`` and
  ``test-challenge`` (``src``, ``relation``; no answer).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from featurestore.format import names as fmt
from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.jobs.job import Job, StepContext, StepDef
from preprocess.jobs.paths import local_input
from preprocess.ogb._common import scratch_file
from preprocess.ogb.errors import RawDataError, RawFileNotFoundError
from preprocess.ogb.layout import WikiPaths
from preprocess.ogb.ptload import load_pt
from preprocess.progress import bar
from preprocess.sources.base import ArraySource
from preprocess.sources.features import FeatureSource
from preprocess.sources.npy import load_npy
from preprocess.steps.csc import build_csc
from preprocess.steps.diskmap import open_npy
from preprocess.steps.edge_columns import edge_order, write_edge_column

__all__ = ["preprocess_wikikg90mv2", "wiki_steps", "WikiContext", "read_wiki_meta",
           "check_triples", "KG_ETYPE", "REV_ETYPE"]

log = logging.getLogger(__name__)

KG_ETYPE = ("entity", "relation", "entity")
REV_ETYPE = ("entity", "rev_relation", "entity")
#: the evaluation files: (split name, ``hr`` file, ``t`` file or None).
EVAL_FILES = (("valid", "val_hr", "val_t"), ("test-dev", "test-dev_hr", None),
              ("test-challenge", "test-challenge_hr", None))
FILES = ("train_hrt", "entity_feat", "relation_feat", "val_hr", "val_t", "test-dev_hr",
         "test-challenge_hr")


def read_wiki_meta(paths: WikiPaths) -> dict[str, int]:
    """``meta.pt`` checked: positive integers ``num_entities`` and ``num_relations``."""
    meta = load_pt(paths.meta)
    if not isinstance(meta, dict):
        raise RawDataError(f"Expected a dict in {paths.meta}. Got {type(meta).__name__}.")
    out = {}
    for k in ("num_entities", "num_relations"):
        v = meta.get(k)
        try:
            ok = v is not None and int(v) == v and int(v) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise RawDataError(f"Expected a positive integer {k!r} in {paths.meta}. Got {v!r}.")
        out[k] = int(v)
    return out


def _load(path: str, what: str) -> np.ndarray:
    """A memory map of ``path``; a missing or unreadable file named as the OGB errors do."""
    try:
        return load_npy(path, what)
    except InputNotFoundError as e:
        raise RawFileNotFoundError(f"Expected {path} ({what}). It is missing.") from e
    except BadInputError as e:
        raise RawDataError(str(e)) from e


def _check_layout(paths: WikiPaths, meta: dict) -> dict[str, np.ndarray]:
    """Open every array (memory maps) and check shapes and dtypes against ``meta.pt``."""
    n, r = meta["num_entities"], meta["num_relations"]
    a = {k: _load(paths.processed(k), k) for k in FILES}
    hrt = a["train_hrt"]
    if hrt.ndim != 2 or hrt.shape[1] != 3 or hrt.dtype.kind not in "iu":
        raise RawDataError(f"Expected integer triples of shape [E, 3] (head, relation, tail) "
                           f"in {paths.processed('train_hrt')}. Got {hrt.dtype} {hrt.shape}.")
    for k, rows in (("entity_feat", n), ("relation_feat", r)):
        f = a[k]
        if f.ndim != 2 or f.dtype.kind != "f":
            raise RawDataError(f"Expected a float matrix in {paths.processed(k)}. Got "
                               f"{f.dtype} {f.shape}.")
        if f.shape[0] != rows:
            what = "num_entities" if k == "entity_feat" else "num_relations"
            raise RawDataError(f"Expected {paths.meta} and {paths.processed(k)} to agree: "
                               f"{what} is {rows:,} but the file has {f.shape[0]:,} rows.")
    if a["entity_feat"].shape[1] != a["relation_feat"].shape[1]:
        raise RawDataError(f"Expected entity and relation features of one width. Got "
                           f"{a['entity_feat'].shape[1]} and {a['relation_feat'].shape[1]}.")
    for _, hr, t in EVAL_FILES:
        x = a[hr]
        if x.ndim != 2 or x.shape[1] != 2 or x.dtype.kind not in "iu":
            raise RawDataError(f"Expected integer (head, relation) pairs of shape [n, 2] in "
                               f"{paths.processed(hr)}. Got {x.dtype} {x.shape}.")
        if t is not None and (a[t].shape != (x.shape[0],) or a[t].dtype.kind not in "iu"):
            raise RawDataError(f"Expected {x.shape[0]} integer tails (one per row of "
                               f"{paths.processed(hr)}) in {paths.processed(t)}. Got "
                               f"{a[t].dtype} {a[t].shape}.")
    return a


def check_triples(arr: np.ndarray, bounds: tuple, names: tuple, path: str, meta_path: str,
                  block: int = 1 << 20, progress: bool = False) -> np.ndarray:
    """Check every column ``j`` of ``arr`` (``names[j]``: head, relation or tail) against
    ``[0, bounds[j])`` in row blocks; returns the counts of the relation ids (empty without
    a relation column). :class:`RawDataError` names the file, the row, the column and the
    value."""
    nrel = bounds[names.index("relation")] if "relation" in names else 0
    counts = np.zeros(nrel, np.int64)
    with bar(arr.shape[0], f"check {os.path.basename(path)}", progress, unit="row") as pb:
        for lo in range(0, arr.shape[0], block):
            b = np.asarray(arr[lo:lo + block])
            for j, hi in enumerate(bounds):
                col = b[:, j]
                if col.size and (int(col.min()) < 0 or int(col.max()) >= hi):
                    i = int(np.flatnonzero((col < 0) | (col >= hi))[0])
                    what = "relations" if names[j] == "relation" else "entities"
                    raise RawDataError(
                        f"Expected {names[j]} ids in [0, {hi:,}) ({meta_path}: num_{what}) "
                        f"in {path}. Got {int(col[i])} at row {lo + i}, column {j}.")
            if nrel:
                rel = b[:, names.index("relation")].astype(np.int64, copy=False)
                counts += np.bincount(rel, minlength=nrel)
            pb.update(b.shape[0])
    return counts


@dataclass
class WikiContext(StepContext):
    """What the WikiKG90Mv2 steps share: the checked inputs and the job's options."""

    paths: WikiPaths = None
    meta: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    budget_bytes: int = 1 << 30
    progress: bool = True


def _scan(ctx: WikiContext) -> dict:
    n, r = ctx.meta["num_entities"], ctx.meta["num_relations"]
    rows = int(np.clip(ctx.budget_bytes // 128, 1 << 16, 1 << 22))
    counts = check_triples(ctx.arrays["train_hrt"], (n, r, n), ("head", "relation", "tail"),
                           ctx.paths.processed("train_hrt"), ctx.paths.meta, rows, ctx.progress)
    for _, hr, t in EVAL_FILES:
        check_triples(ctx.arrays[hr], (n, r), ("head", "relation"), ctx.paths.processed(hr),
                      ctx.paths.meta)
        if t is not None:
            check_triples(ctx.arrays[t].reshape(-1, 1), (n,), ("tail",),
                          ctx.paths.processed(t), ctx.paths.meta)
    top = np.sort(counts)[::-1]
    return dict(triples=int(counts.sum()), relations_used=int(np.count_nonzero(counts)),
                top10_relation_share=float(top[:10].sum() / max(1, counts.sum())))


def _nodes(ctx: WikiContext) -> dict:
    ctx.job.writer.add_node_type("entity", ctx.meta["num_entities"])
    ctx.job.writer.add_node_type("relation", ctx.meta["num_relations"])
    return dict(ctx.meta)


def _features(ctx: WikiContext, ntype: str, key: str) -> dict:
    f = ctx.arrays[key]
    ctx.job.writer.add_features(ntype, "feat", f)
    return dict(rows=int(f.shape[0]), bytes=int(f.nbytes))


def _edges(ctx: WikiContext, reverse: bool) -> ArraySource:
    """The training triples as edges h -> t (t -> h when ``reverse``), memory-mapped."""
    hrt, path = ctx.arrays["train_hrt"], ctx.paths.processed("train_hrt")
    s, d = (hrt[:, 2], hrt[:, 0]) if reverse else (hrt[:, 0], hrt[:, 2])
    return ArraySource(s, d, path, [path])


def _csc(ctx: WikiContext, etype: tuple, reverse: bool) -> dict:
    n = ctx.meta["num_entities"]
    return build_csc(ctx.job.writer, etype, _edges(ctx, reverse), num_src=n, num_dst=n,
                     coalesce=False, sort_neighbors=True, budget_bytes=ctx.budget_bytes,
                     tmpdir=ctx.job.tmpdir, progress=ctx.progress)


def _relation(ctx: WikiContext, etype: tuple, reverse: bool) -> dict:
    """``etype``'s per-edge ``relation`` (int32) in CSC edge order; the edge order (8 bytes per
    edge) is kept in the job's work folder until the column is written, so a rerun after a
    kill in the column reuses it."""
    path = os.path.join(ctx.job.workdir, f"order-{'__'.join(etype)}.npy")
    order = edge_order(ctx.job.writer, etype, _edges(ctx, reverse), path,
                       budget_bytes=ctx.budget_bytes, tmpdir=ctx.job.tmpdir,
                       progress=ctx.progress)
    rel = FeatureSource.from_array(ctx.arrays["train_hrt"][:, 1],
                                   ctx.paths.processed("train_hrt") + " (relation column)")
    st = write_edge_column(ctx.job.writer, etype, "relation", rel, order, kind="values",
                           dtype=np.int32, budget_bytes=ctx.budget_bytes,
                           tmpdir=ctx.job.tmpdir, progress=ctx.progress)
    for f in (order.path, order.path + ".json"):
        if os.path.exists(f):
            os.remove(f)
    return st


def _column(ctx: WikiContext, arr: np.ndarray, j: int, dtype, name: str) -> np.ndarray:
    """Column ``j`` of ``arr`` as ``dtype``: a view when it already is, else converted in
    blocks into a scratch file (never the whole column in memory)."""
    col = arr[:, j]
    if col.dtype == dtype:
        return col
    path = scratch_file(ctx.job, f"{name}.npy")
    out = open_npy(path, mode="w+", dtype=dtype, shape=col.shape)  # blocks reserved: no SIGBUS
    step = 1 << 22
    for lo in range(0, col.shape[0], step):
        out[lo:lo + step] = col[lo:lo + step]
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def _train_split(ctx: WikiContext) -> dict:
    hrt = ctx.arrays["train_hrt"]
    ctx.job.writer.add_edge_split(
        "train", KG_ETYPE, src=_column(ctx, hrt, 0, np.int64, "train-src"),
        dst=_column(ctx, hrt, 2, np.int64, "train-dst"),
        relation=_column(ctx, hrt, 1, np.int32, "train-relation"))
    return dict(pairs=int(hrt.shape[0]))


def _eval_splits(ctx: WikiContext) -> dict:
    out = {}
    for name, hr, t in EVAL_FILES:
        x = np.asarray(ctx.arrays[hr])
        cols = dict(src=x[:, 0].astype(np.int64), relation=x[:, 1].astype(np.int32))
        if t is not None:
            cols["dst"] = np.asarray(ctx.arrays[t]).astype(np.int64)
        ctx.job.writer.add_edge_split(name, KG_ETYPE, **cols)
        out[name] = int(x.shape[0])
    return out


def wiki_steps(meta: dict, arrays: dict) -> list[StepDef]:
    """The steps of the WikiKG90Mv2 job, in the order they run, with their plans."""
    e = int(arrays["train_hrt"].shape[0])
    ent, rel = arrays["entity_feat"], arrays["relation_feat"]
    idx = fmt.index_dtype(meta["num_entities"]).itemsize
    # store indices; scratch indices and spilled edges (build_csc's own estimate)
    csc_disk = e * 3 * idx + e * 4
    # store values; the edge order (8 B/edge) and edge_order's sort scratch (~20 B/edge)
    rel_disk = e * (4 + 8 + 20)
    steps = [
        StepDef("scan:triples", _scan, {"rows": e, "read_bytes": int(arrays["train_hrt"].nbytes)},
                read_only=True),
        StepDef("nodes", _nodes, dict(meta)),
        StepDef("features:entity", partial(_features, ntype="entity", key="entity_feat"),
                {"rows": ent.shape[0], "disk_bytes": int(ent.nbytes)}),
        StepDef("features:relation", partial(_features, ntype="relation", key="relation_feat"),
                {"rows": rel.shape[0], "disk_bytes": int(rel.nbytes)}),
    ]
    for et, back in ((KG_ETYPE, False), (REV_ETYPE, True)):
        key = "__".join(et)
        steps.append(StepDef(f"csc:{key}", partial(_csc, etype=et, reverse=back),
                             {"edges": e, "disk_bytes": csc_disk}))
        steps.append(StepDef(f"relation:{key}", partial(_relation, etype=et, reverse=back),
                             {"edges": e, "disk_bytes": rel_disk}))
    steps.append(StepDef("edge-split:train", _train_split, {"pairs": e, "disk_bytes": e * 20}))
    steps.append(StepDef("edge-splits:eval", _eval_splits,
                         {n: int(arrays[hr].shape[0]) for n, hr, _ in EVAL_FILES}))
    return steps


def preprocess_wikikg90mv2(root, store, *, budget_bytes: int = 1 << 30, force: bool = False,
                           dry_run: bool = False, progress: bool = True,
                           scratch_dir=None) -> Job:
    """Turn ``ROOT/wikikg90m-v2`` into a store at ``store`` (see the module docstring).

    Parameters
    ----------
    root
        The directory holding ``wikikg90m-v2/`` as the official zip unpacks (or that folder).
    store
        Where to write the store (local path). An interrupted run resumes at the step it was
        in when rerun with the same inputs and options.
    budget_bytes
        Anonymous memory each step may hold (the CSC conversions, the id scan).
    force, dry_run, progress, scratch_dir
        As for :func:`preprocess.ogb.mag240m.preprocess_mag240m`.

    Returns
    -------
    preprocess.jobs.job.Job
        The finished job (``job.summary()``: seconds, edges/s and peak memory per step).
    """
    paths = WikiPaths.under(local_input(root))
    meta = read_wiki_meta(paths)
    arrays = _check_layout(paths, meta)
    inputs = [paths.meta] + [paths.processed(k) for k in FILES]
    opts = dict(coalesce=False, reverse=True, relation_order="csc, then input order")
    job = Job(store, "wikikg90mv2", inputs, opts, force=force, dry_run=dry_run,
              budget_bytes=budget_bytes, progress=progress, scratch_dir=scratch_dir)
    ctx = WikiContext(job, paths=paths, meta=meta, arrays=arrays, budget_bytes=budget_bytes,
                      progress=progress)
    job.run_steps(wiki_steps(meta, arrays), ctx)
    job.commit()
    return job
