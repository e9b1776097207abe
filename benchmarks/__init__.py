"""Benchmarks of the feature store, the preprocessing jobs and the loaders against peers."""
