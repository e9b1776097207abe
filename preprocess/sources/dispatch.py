"""Which source reads an edge file: chosen by its extension (``.npy``, ``.parquet``,
``.csv``/``.tsv``)."""

from __future__ import annotations

import os

from preprocess.errors import BadInputError, InputNotFoundError
from preprocess.sources.base import EdgeSource
from preprocess.sources.csv import from_csv
from preprocess.sources.npy import from_npy
from preprocess.sources.parquet import from_parquet
from preprocess.sources.remote import is_remote

__all__ = ["open_edges"]


def open_edges(path, src_col="src", dst_col="dst", *, header: bool = True,
               delimiter: str | None = None) -> EdgeSource:
    """An edge source for a file by its extension: ``.npy``, ``.parquet``, ``.csv``/``.tsv``."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        return from_npy(path)
    if is_remote(path):
        raise InputNotFoundError(
            f"Expected a .npy edge list for the URL {path}: parquet and CSV edge files are "
            "read from a local path or a file system every worker mounts; copy it there first.")
    if ext in (".parquet", ".pq") or os.path.isdir(path):
        return from_parquet(path, src_col, dst_col)
    if ext in (".csv", ".tsv", ".txt"):
        delim = delimiter or ("\t" if ext == ".tsv" else ",")
        return from_csv(path, src_col, dst_col, header=header, delimiter=delim)
    raise BadInputError(f"Expected an edge file ending .npy, .parquet, .csv or .tsv. "
                        f"Got {path} instead.")
