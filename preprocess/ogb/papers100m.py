"""``featurestore preprocess papers100m ROOT STORE``: ogbn-papers100M's binary layout into a store.

Input: ``ogbn_papers100M/raw/data.npz`` (``edge_index`` [2, E], ``node_feat`` [N, 128],
``node_year`` [N, 1], ``num_nodes_list``, ``num_edges_list``), ``raw/node-label.npz``
(``node_label`` [N, 1], NaN = none) and ``split/time/{train,valid,test}.csv.gz``.
The ``.npz`` members are never loaded whole: stored members are memory-mapped inside the
zip, deflated ones streamed (``edge_index`` into a scratch ``.npy``, since the CSC conversion
reads it several times).

Output: node type ``paper`` (store id = ogb node id), ``paper/feat`` as given (fp32),
labels (int64, NaN -> -1), ``paper/year``, splits ``train``/``valid``/``test`` and the edge
type ``paper-cites-paper``, symmetrised (PyG's ``ToUndirected``) and coalesced; with
``directed=True`` the citations keep their direction (still coalesced).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np

from preprocess.steps.csc import build_csc
from preprocess.sources.base import from_arrays

from preprocess.jobs.job import Job, StepContext, StepDef

from preprocess.ogb._common import check_ids, labels_to_int, scratch_file
from preprocess.ogb.errors import RawDataError, RawFileNotFoundError
from preprocess.ogb.layout import PAPERS100M_SPLITS, PapersPaths
from preprocess.ogb.npz import NpzArchive

__all__ = ["preprocess_papers100m", "papers_steps", "PapersContext", "read_split_csv"]

log = logging.getLogger(__name__)

#: rows per block when streaming a deflated feature member.
FEAT_BLOCK_BYTES = 64 << 20


def read_split_csv(path: str, n: int) -> np.ndarray:
    """One id per line of a (gzipped) CSV without header, checked to lie in ``[0, n)``."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    if not os.path.exists(path):
        raise RawFileNotFoundError(f"Expected {path}. It is missing.")
    try:
        t = pcsv.read_csv(path, read_options=pcsv.ReadOptions(autogenerate_column_names=True),
                          convert_options=pcsv.ConvertOptions(column_types={"f0": pa.int64()}))
    except (pa.ArrowInvalid, OSError) as e:
        raise RawDataError(f"Expected one integer id per line in {path}: {e}") from e
    if t.num_columns != 1:
        raise RawDataError(f"Expected one column of ids in {path}. Got {t.num_columns}.")
    col = t.column(0)
    if col.null_count:
        raise RawDataError(f"Expected an id on every line of {path}. {col.null_count} are empty.")
    return check_ids(col.to_numpy(), n, path, "split ids")


def _scalar(arc: NpzArchive, name: str) -> int:
    v = arc[name].read().reshape(-1)
    if v.size != 1 or v.dtype.kind not in "iu":
        raise RawDataError(f"Expected one integer in member {name!r} of {arc.path} (one graph). "
                           f"Got {v.dtype} of shape {v.shape}.")
    return int(v[0])


@dataclass
class PapersContext(StepContext):
    """What the ogbn-papers100M steps share: the archive members, splits and options."""

    paths: PapersPaths = None
    members: dict = field(default_factory=dict)
    splits: dict = field(default_factory=dict)
    directed: bool = False
    budget_bytes: int = 1 << 30
    progress: bool = True

    @property
    def n(self) -> int:
        """The node count (``num_nodes_list``)."""
        return self.members["node_feat"].shape[0]


def _nodes(ctx: PapersContext) -> dict:
    ctx.job.writer.add_node_type("paper", ctx.n)
    return dict(nodes=ctx.n, edges=ctx.members["edge_index"].shape[1])


def _features(ctx: PapersContext) -> dict:
    nf = ctx.members["node_feat"]
    dim = nf.shape[1]
    if nf.compressed:
        rows = max(1, FEAT_BLOCK_BYTES // (dim * nf.dtype.itemsize))
        ctx.job.writer.add_features("paper", "feat", nf.iter_rows(rows), dtype=nf.dtype,
                                    row_shape=(dim,))
    else:
        ctx.job.writer.add_features("paper", "feat", nf.memmap())
    return dict(rows=ctx.n, bytes=nf.nbytes, compressed=nf.compressed)


def _values(ctx: PapersContext) -> dict:
    nl, ny, job = ctx.members["node_label"], ctx.members["node_year"], ctx.job
    lab = labels_to_int(nl.iter_flat(), ctx.n, scratch_file(job, "label.npy"),
                        name=f"{ctx.paths.node_label}:node_label")
    job.writer.add_labels("paper", lab)
    year = (ny.memmap().reshape(-1) if not ny.compressed
            else ny.to_npy(scratch_file(job, "year.npy")).reshape(-1))
    job.writer.add_values("paper", "year", year)
    return dict(labelled=int(np.count_nonzero(np.asarray(lab) >= 0)))


def _write_splits(ctx: PapersContext) -> dict:
    for k, ids in ctx.splits.items():
        ctx.job.writer.add_split(k, "paper", ids)
    return {k: int(v.shape[0]) for k, v in ctx.splits.items()}


def _edges(ctx: PapersContext) -> dict:
    ei, n = ctx.members["edge_index"], ctx.n
    arr = (ei.memmap() if not ei.compressed
           else ei.to_npy(scratch_file(ctx.job, "edge_index.npy")))
    src = from_arrays(arr[0], arr[1], name=f"{ctx.paths.data}:edge_index")
    return build_csc(ctx.job.writer, ("paper", "cites", "paper"), src, num_src=n, num_dst=n,
                     coalesce=True, symmetrize=not ctx.directed, budget_bytes=ctx.budget_bytes,
                     tmpdir=ctx.job.tmpdir, progress=ctx.progress)


def papers_steps(members: dict, splits: dict, directed: bool) -> list[StepDef]:
    """The steps of the ogbn-papers100M job, in the order they run, with their plans."""
    ei, nf = members["edge_index"], members["node_feat"]
    n, e = nf.shape[0], ei.shape[1]
    idx = 4 if n < 2**31 - 1 else 8
    e_out = e if directed else 2 * e
    return [
        StepDef("nodes", _nodes, {"nodes": n}),
        StepDef("features:paper", _features, {"rows": n, "disk_bytes": nf.nbytes,
                                              "compressed": nf.compressed}),
        StepDef("labels-years:paper", _values, {"rows": n}),
        StepDef("splits", _write_splits, {k: int(v.shape[0]) for k, v in splits.items()}),
        StepDef("csc:paper__cites__paper", _edges,
                {"edges": e_out, "disk_bytes": e_out * idx * 2
                 + (ei.nbytes if ei.compressed else 0)}),
    ]


def _open_members(paths: PapersPaths) -> dict:
    """The archive members, checked against ``num_nodes_list`` and ``num_edges_list``."""
    data = NpzArchive(paths.data)
    labels = NpzArchive(paths.node_label)
    n = _scalar(data, "num_nodes_list")
    e = _scalar(data, "num_edges_list")
    ei, nf, ny = data["edge_index"], data["node_feat"], data["node_year"]
    nl = labels["node_label"]
    if ei.shape != (2, e) or ei.dtype.kind not in "iu" or ei.fortran_order:
        raise RawDataError(f"Expected a C-order integer edge_index of shape (2, {e}) "
                           f"(num_edges_list) in {paths.data}. Got {ei.dtype} {ei.shape}.")
    if len(nf.shape) != 2 or nf.shape[0] != n or nf.dtype.kind != "f":
        raise RawDataError(f"Expected float node_feat of shape ({n}, dim) (num_nodes_list) in "
                           f"{paths.data}. Got {nf.dtype} {nf.shape}.")
    for m, where in ((ny, paths.data), (nl, paths.node_label)):
        if m.size != n:
            raise RawDataError(f"Expected {n} entries in member {m.name!r} of {where}. "
                               f"Got shape {m.shape}.")
    if ny.dtype.kind not in "iu":
        raise RawDataError(f"Expected integer node_year in {paths.data}. Got {ny.dtype}.")
    return dict(edge_index=ei, node_feat=nf, node_year=ny, node_label=nl)


def preprocess_papers100m(root, store, *, directed: bool = False, budget_bytes: int = 1 << 30,
                          force: bool = False, dry_run: bool = False,
                          progress: bool = True) -> Job:
    """Turn ``ROOT/ogbn_papers100M`` into a store at ``store``.

    Parameters
    ----------
    root
        The directory holding ``ogbn_papers100M/`` (or that folder itself).
    store
        Where to write the store (local path); an interrupted run is resumed.
    directed
        Keep citations directed instead of symmetrising them.
    budget_bytes
        Anonymous memory the edge conversion may hold.
    force
        Start over even if a store is there.
    dry_run
        Check the inputs and print the plan; write nothing.

    Returns
    -------
    preprocess.jobs.job.Job
        The finished job (``job.summary()``: the steps' seconds, edges/s, peak memory).
    """
    paths = PapersPaths.under(root)
    members = _open_members(paths)
    n = members["node_feat"].shape[0]
    splits = {k: read_split_csv(paths.split(k), n) for k in PAPERS100M_SPLITS}
    inputs = [paths.data, paths.node_label] + [paths.split(k) for k in PAPERS100M_SPLITS]
    job = Job(store, "papers100m", inputs, dict(directed=directed, coalesce=True),
              force=force, dry_run=dry_run, budget_bytes=budget_bytes, progress=progress)
    ctx = PapersContext(job, paths=paths, members=members, splits=splits, directed=directed,
                        budget_bytes=budget_bytes, progress=progress)
    job.run_steps(papers_steps(members, splits, directed), ctx)
    job.commit()
    return job
