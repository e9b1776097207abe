"""Inputs: edge lists and feature matrices streamed in blocks, one module per format.

The contracts are :class:`EdgeSource` (:mod:`preprocess.sources.base`) and
:class:`FeatureSource` (:mod:`preprocess.sources.features`); the edge formats are
:mod:`~preprocess.sources.npy`, :mod:`~preprocess.sources.parquet`,
:mod:`~preprocess.sources.csv` and :mod:`~preprocess.sources.remote` (``.npy`` on fsspec URLs,
read by byte range); :func:`open_edges` picks one by extension. Usage::

    src = from_npy("edges.npy")                    # [2, E] or [E, 2], memory-mapped
    src = from_npy_pair("row.npy", "col.npy")      # two 1-D arrays
    src = from_parquet("cites.parquet", "src", "dst")
    src = from_csv("cites.csv", 0, 1, header=False)
    src = concat(src_a, src_b)                     # one relation spread over files
    for s, d in src.iter_blocks():                 # int64 arrays, at most block_edges long
        ...

This package is also the 0.1 module ``preprocess.edges``.
"""

from preprocess.sources.base import (DEFAULT_BLOCK_EDGES, ArraySource, EdgeSource, as_int64_ids,
                                     concat, from_arrays)
from preprocess.sources.csv import CsvSource, from_csv
from preprocess.sources.dispatch import open_edges
from preprocess.sources.features import FeatureSource
from preprocess.sources.npy import from_npy, from_npy_pair, load_npy
from preprocess.sources.parquet import ParquetSource, from_parquet

__all__ = ["EdgeSource", "DEFAULT_BLOCK_EDGES", "from_arrays", "from_npy", "from_npy_pair",
           "from_parquet", "from_csv", "concat", "open_edges", "FeatureSource", "ArraySource",
           "ParquetSource", "CsvSource", "as_int64_ids", "load_npy"]
