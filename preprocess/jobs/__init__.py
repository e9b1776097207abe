"""Resumable jobs: manifest and step runner, spec files and their steps, the edge-list job."""
