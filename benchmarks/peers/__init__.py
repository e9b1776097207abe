"""Peer benchmark scripts, run by path in the peers' own environments (``.venv-dgl`` for DGL) as
subprocesses of the benchmarks; each prints one JSON report on stdout."""
