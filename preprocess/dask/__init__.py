"""The Dask variants of the steps (CSC, features, renumbering) and the client they run on
(``distributed`` is imported only when a job has one: ``pip install graph-featurestore[dask]``)."""
