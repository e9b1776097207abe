"""Preprocessing steps, each in bounded memory: COO to CSC, per-edge columns to CSC edge order,
renumbering, feature chunking and casting, their numba kernels, memory and disk accounting.
No step knows of Dask."""
