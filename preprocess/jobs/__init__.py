"""Resumable jobs: the step runner, its manifest, scratch folders and reports; spec files and
their steps; the edge-list job; and the choice of each step's variant (in this process or Dask)."""
