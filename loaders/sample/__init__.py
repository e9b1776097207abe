"""Sampling: the numba neighbour sampler, its RNG, its plain-NumPy reference twin, relational
views of typed graphs, and seed partitioning."""
