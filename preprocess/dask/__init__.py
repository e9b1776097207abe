"""The Dask variants of the steps (imported lazily: ``pip install graph-featurestore[dask]``)."""
