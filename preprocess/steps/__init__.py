"""Preprocessing steps, each in bounded memory: COO to CSC, renumbering, feature chunking,
their numba kernels, memory and disk accounting."""
