"""Preprocessing steps, each in bounded memory: COO to CSC, renumbering, feature chunking and
casting, their numba kernels, memory and disk accounting. No step knows of Dask."""
