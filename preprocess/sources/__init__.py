"""Inputs: edge lists (``.npy``, parquet, CSV, arrays, remote URLs) streamed in blocks."""
