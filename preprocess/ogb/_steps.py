"""A resumable list of named steps writing one store.

Local stand-in until ``preprocess.job.Job`` lands: the manifest (input sizes and mtimes,
options) sits in the store's root attributes, each finished step is a provenance entry,
and a rerun on an incomplete store with the same manifest skips the finished steps.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

import featurestore as fs
from featurestore.errors import StoreExistsError

from .errors import RawFileNotFoundError

log = logging.getLogger(__name__)

try:  # the engine's error when it exists, so callers catch one class
    from preprocess.errors import ManifestMismatchError
except ImportError:  # pragma: no cover
    class ManifestMismatchError(fs.FeatureStoreError, RuntimeError):
        """A job is resumed with other inputs or options than the run that started it."""


def file_facts(paths: list[str]) -> dict[str, list]:
    """``{path: [size, mtime_ns]}``: what the manifest compares (never the content)."""
    out = {}
    for p in paths:
        try:
            st = os.stat(p)
        except FileNotFoundError as e:
            raise RawFileNotFoundError(f"Expected {p}. It is missing.") from e
        out[os.path.abspath(p)] = [st.st_size, st.st_mtime_ns]
    return out


class StepRunner:
    """Runs named steps into a store, skipping the ones a previous run finished."""

    def __init__(self, store, *, job: str, inputs: list[str], options: dict, force: bool = False):
        self.url = os.fspath(store)
        manifest = {"job": job, "inputs": file_facts(inputs), "options": options}
        if force:
            self.writer = fs.create_store(self.url, mode="w")
        else:
            try:
                self.writer = fs.create_store(self.url, mode="w-")
            except StoreExistsError:
                self.writer = fs.create_store(self.url, mode="a")  # refuses complete stores
                old = self.writer.attrs.get("job_manifest")
                if old is not None and old != manifest:
                    raise ManifestMismatchError(
                        f"Expected the inputs and options of the run that started {self.url} "
                        f"({old}). Got {manifest} instead. Pass --force to start over.")
        self.writer.attrs["job_manifest"] = manifest
        self.writer._save()
        self.timings: dict[str, dict] = {}

    def done(self, name: str) -> bool:
        return any(p.get("step") == name for p in self.writer.attrs.get("provenance", []))

    def run(self, name: str, fn: Callable[[], dict | None]) -> dict[str, Any]:
        if self.done(name):
            log.info("%s: done in an earlier run, skipped", name)
            self.timings[name] = {"skipped": True}
            return self.timings[name]
        t = time.perf_counter()
        info = dict(fn() or {})
        info["seconds"] = round(time.perf_counter() - t, 3)
        self.writer.add_provenance(name, **_jsonable(info))
        self.timings[name] = info
        log.info("%s: %.1f s", name, info["seconds"])
        return info

    def commit(self) -> None:
        self.writer.commit()


def _jsonable(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if hasattr(v, "item"):
            v = v.item()
        elif isinstance(v, dict):
            v = _jsonable(v)
        out[k] = v
    return out
