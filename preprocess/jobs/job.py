"""Resumable preprocessing jobs: a manifest of inputs, options and finished steps.

Every job (the spec-file job, the OGB jobs, a user's script) writes its store through a
:class:`Job`::

    job = Job("out/store", "my-dataset", inputs=["edges.npy", "feat.npy"],
              options={"coalesce": True}, budget_bytes=parse_size("2GiB"))
    with job.step("nodes:paper") as st:
        if st.todo:
            job.writer.add_node_type("paper", n)
    with job.step("csc:paper__cites__paper", plan={"edges": e}) as st:
        if st.todo:
            st.stats = build_csc(job.writer, ("paper", "cites", "paper"), src, ...)
    job.commit()            # marks the store complete; job.summary() is a table of the steps

The jobs of this package declare their steps instead: a list of :class:`StepDef` (a name,
a plan, a function of a context) that :meth:`Job.run_steps` runs in order through
:meth:`Job.step`, so a ``--dry-run`` walks the same list and lists every step with its plan
without calling the steps' functions::

    steps = [StepDef("nodes:paper", add_papers, plan={"nodes": n}),
             StepDef("csc:paper__cites__paper", paper_csc, plan=csc_plan)]
    job.run_steps(steps, StepContext(job))
    job.commit()

The manifest (``<store>/.preprocess/manifest.json``, written atomically after each step)
records the inputs (paths, sizes, mtimes), the options and the finished steps with their
statistics. Running the same job again skips finished steps, so a job killed at any point
(even with SIGKILL) resumes at the step it was in; arrays are renamed into place only when
whole, so the store ends identical to an uninterrupted run. Changed inputs or options raise
:class:`ManifestMismatchError` unless ``force=True``, which starts over. With ``dry_run=True``
nothing is written: steps report ``todo == False`` and :meth:`Job.plan_text` lists what would
run, with the sizes, disk and memory each step declared.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterable, Sequence

from featurestore import __version__
from featurestore.fileio import is_disk_full
from featurestore.remote.location import Location
from featurestore.errors import LockUnavailableError, StoreExistsError
from featurestore.remote.lock import WriteLock
from featurestore.writer import StoreWriter

from preprocess.errors import BudgetTooSmallError, ManifestMismatchError, NotEnoughDiskError
from preprocess.jobs.manifest import (MANIFEST_KEY, check_inputs_outside, input_record, jsonable,
                                      manifest_diffs, now, read_manifest, save_manifest)
from preprocess.jobs.report import plan_table, summary_table
from preprocess.jobs.scratch import scratch_root, step_tmpdir, work_dir
from preprocess.steps.csc import MIN_BUDGET_BYTES
from preprocess.steps.diskmap import disk_full_error
from preprocess.steps.memory import PeakMemory, format_size, free_disk_bytes

__all__ = ["Job", "Step", "StepDef", "StepContext", "MANIFEST_KEY", "input_record"]

log = logging.getLogger(__name__)



@dataclass
class Step:
    """One step of a job, as the ``with job.step(...)`` block sees it.

    ``todo`` is False when the step finished in an earlier run (or in a dry run); the block
    then does nothing. Put the step's statistics (a dict, e.g. what :func:`build_csc`
    returns) in ``stats``: they go into the manifest and the summary.
    """

    name: str
    todo: bool
    plan: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    seconds: float = 0.0
    peak_anon_bytes: int = 0
    status: str = "todo"

    def __bool__(self) -> bool:
        return self.todo


@dataclass(frozen=True)
class StepDef:
    """One declared step of a job: its name, its plan and the function that runs it.

    Parameters
    ----------
    name
        The step's name in the manifest (``csc:paper__cites__paper``).
    run
        ``run(ctx)`` does the step and returns its statistics (a dict, or None).
    plan
        What the step will do (``edges``, ``disk_bytes``, ``memory_bytes``, ...) for
        :meth:`Job.plan_text`; a dict, or a function of the context when it depends on
        what earlier steps found (a node count).
    read_only
        The step only reads its inputs, and later plans need its statistics: a dry run
        runs it too (a dry run's disk estimate needs the node count a scan finds).
    """

    name: str
    run: Callable[[Any], dict | None]
    plan: dict | Callable[[Any], dict] = field(default_factory=dict)
    read_only: bool = False

    def plan_for(self, ctx) -> dict:
        """The step's plan in context ``ctx`` (evaluated when the runner reaches it)."""
        return dict(self.plan(ctx) if callable(self.plan) else self.plan)


@dataclass
class StepContext:
    """What the steps of a job share: the job, and the statistics of the steps run so far.

    Jobs subclass it to carry their inputs; ``stats[name]`` is what step ``name`` returned
    (in this run or, when it finished before, in the run that did it).
    """

    job: Job
    stats: dict[str, dict] = field(default_factory=dict)


class Job:
    """A resumable job writing one store. See the module docstring for the protocol.

    Parameters
    ----------
    store_url
        Where the store goes (a local directory or fsspec URL).
    name
        The job's name (``spec``, ``mag240m``, ...), recorded in the manifest.
    inputs
        Input files (or directories); their sizes and mtimes are recorded and compared on resume.
    options
        Everything that changes the output (JSON-serialisable). Resuming with other options
        raises :class:`ManifestMismatchError` unless ``force``.
    force
        Start over even if a finished or partial store with another manifest is there.
    dry_run
        Write nothing; steps are not run, only planned.
    budget_bytes
        The memory budget the job's steps should honour (not part of ``options``: changing it
        does not invalidate finished steps).
    scratch_dir
        Where the scratch and work files go (``--scratch DIR``), in a folder named after the
        store; by default inside a local store, or the system's temp directory for a remote
        one. Dask workers must see it (a shared file system), like the store.
    """

    def __init__(self, store_url, name: str, inputs: Iterable = (), options: dict | None = None,
                 *, force: bool = False, dry_run: bool = False, budget_bytes: int = 1 << 30,
                 progress: bool = True, storage_options: dict | None = None,
                 scratch_dir: str | os.PathLike | None = None):
        self.store_url = os.fspath(store_url)
        self.scratch_dir = (os.path.abspath(os.fspath(scratch_dir)) if scratch_dir is not None
                            else None)
        self.name = name
        self.options = jsonable(dict(options or {}))
        self.inputs = [input_record(p) for p in inputs]
        self.force, self.dry_run = force, dry_run
        self.budget_bytes = int(budget_bytes)
        if self.budget_bytes < MIN_BUDGET_BYTES:  # before anything is written
            raise BudgetTooSmallError(
                f"Expected a memory budget of at least {format_size(MIN_BUDGET_BYTES)} for job "
                f"{name!r}. Got {format_size(self.budget_bytes)}; nothing was written.")
        self.progress = progress
        self.loc = Location(self.store_url, storage_options)
        check_inputs_outside(self.loc, self.inputs, self.store_url)
        self.storage_options = storage_options
        self.steps: list[Step] = []
        self._writer: StoreWriter | None = None
        self.t0 = time.perf_counter()
        old = read_manifest(self.loc)
        self.complete = False
        if old is not None and not force:
            diffs = manifest_diffs(old, name, self.inputs, self.options)
            if diffs:
                self._refuse_if_written()
                raise ManifestMismatchError(
                    f"Expected the inputs and options of the run that started {self.store_url}. "
                    f"Got: {'; '.join(diffs)}. Re-run with --force (force=True) to start over.")
            self.manifest = old
            # the store's own flag decides: a kill between its commit and the manifest's
            # update leaves a complete store with a manifest not yet marked complete
            self.complete = self._store_complete()
        else:
            self.manifest = None
        if self.complete and not dry_run and not self.manifest.get("complete"):
            self._finish()  # killed between the store's commit and the manifest's update
        self.resumed = self.manifest is not None and bool(self.manifest.get("steps"))
        if self.manifest is None:
            self.manifest = {"job": name, "tool": f"featurestore {__version__}",
                             "started": now(), "inputs": self.inputs, "options": self.options,
                             "steps": {}, "complete": False}
        self._keep_scratch()
        if old is None and not force and self._store_exists():
            self._refuse_if_written()
            raise StoreExistsError(
                f"Expected no store, or one this job started, at {self.store_url}. A store "
                "without a job manifest is there; pass --force (force=True) to replace it.")
        if not dry_run and not self.complete:
            with self._disk_full_named():
                self._open_writer(fresh=old is None or force or not self._store_exists())

    # -- store and manifest ---------------------------------------------------------
    def _keep_scratch(self) -> None:
        """A resumed job keeps the scratch directory its finished steps' work files are in
        (taken from the manifest when not given; another one is refused)."""
        had = self.manifest.get("scratch_dir")
        if self.resumed and had != self.scratch_dir:
            if self.scratch_dir is not None:
                raise ManifestMismatchError(
                    f"Expected the scratch directory of the run that started {self.store_url} "
                    f"({had or 'inside the store'}), where its work files are. Got "
                    f"{self.scratch_dir}. Pass the same --scratch, or --force to start over.")
            self.scratch_dir = had
        self.manifest["scratch_dir"] = self.scratch_dir

    def _refuse_if_written(self) -> None:
        """Raise :class:`StoreLockedError` naming the holder when a live process holds the
        store's write lock: a job still writing it (the same job started twice), whose store
        must not be called foreign or mismatched ("pass --force" would destroy its work)."""
        if not self.loc.is_local or not os.path.isdir(self.loc.path("")):
            return
        lock = WriteLock(self.loc)
        try:
            lock.acquire()
        except LockUnavailableError:
            return  # no lock to ask: the error about the store stands
        lock.release()

    def _store_exists(self) -> bool:
        return self.loc.exists("zarr.json")

    def _store_complete(self) -> bool:
        try:
            return bool(self.loc.read_json("zarr.json").get("attributes", {}).get("complete"))
        except (FileNotFoundError, ValueError):
            return False

    def _open_writer(self, fresh: bool) -> None:
        if fresh:
            # "w": the writer replaces only a store of this package (or a killed job's
            # manifest), and refuses any other files (featurestore.writer._inspect)
            self._writer = StoreWriter(self.store_url, mode="w",
                                       storage_options=self.storage_options)
            self.manifest["steps"] = {}
            self.manifest["complete"] = False
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            self._writer = StoreWriter(self.store_url, mode="a",
                                       storage_options=self.storage_options)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        self._save()

    def _save(self) -> None:
        if not self.dry_run:
            with self._disk_full_named():
                save_manifest(self.loc, self.manifest)

    @contextlib.contextmanager
    def _disk_full_named(self):
        """A full disk met in the block (``ENOSPC``, a short write) is a ``DiskFullError``
        naming the file when the error does, else the store: never a bare ``OSError``."""
        try:
            yield
        except OSError as e:
            if not is_disk_full(e):
                raise
            raise disk_full_error(e.filename or self.store_url, None, e) from e

    @property
    def writer(self) -> StoreWriter:
        """The store's writer (mode ``"w"`` on a fresh run, ``"a"`` when resuming)."""
        if self._writer is None:
            raise RuntimeError(f"Job {self.name!r} has no writer: "
                               + ("it is a dry run." if self.dry_run else "the store is complete."))
        return self._writer

    @property
    def tmpdir(self) -> str | None:
        """Scratch directory of one step (``scratch_dir``, else inside the store when local);
        emptied when a run starts, removed by :meth:`commit`. ``None`` (the system's) for a
        remote store without ``scratch_dir``."""
        return step_tmpdir(self.loc, self.scratch_dir)

    @property
    def workdir(self) -> str:
        """A local directory for files that later steps read (id maps, renumbered edges).

        Kept across runs, so a resumed job finds what finished steps left; removed by
        :meth:`commit`. Inside the store when local, else under the system's temp directory.
        """
        path = work_dir(self.loc, self.scratch_dir)
        if not self.dry_run:
            os.makedirs(path, exist_ok=True)
        return path

    # -- steps ----------------------------------------------------------------------
    def done(self, name: str) -> bool:
        """Whether step ``name`` finished in this or an earlier run."""
        return name in self.manifest["steps"]

    @contextlib.contextmanager
    def step(self, name: str, plan: dict | None = None):
        """Run the block as step ``name`` unless it is done (see :class:`Step`).

        ``plan``: what the step will do, for :meth:`plan_text` (e.g. ``edges``, ``disk_bytes``,
        ``memory_bytes``). On normal exit the step is recorded as finished in the manifest.
        """
        st = Step(name, todo=not (self.dry_run or self.complete or self.done(name)),
                  plan=dict(plan or {}))
        self.steps.append(st)
        if not st.todo:
            st.status = "planned" if self.dry_run and not self.done(name) else "done before"
            prev = self.manifest["steps"].get(name, {})
            st.stats = prev.get("stats", {})
            st.seconds = prev.get("seconds", 0.0)
            yield st
            return
        if st.plan.get("disk_bytes"):  # what this step still needs, checked before it starts
            self.check_disk(int(st.plan["disk_bytes"]), f"step {name}")
        log.info("step %s: start", name)
        t = time.perf_counter()
        with PeakMemory() as mem, self._disk_full_named():
            yield st
        st.seconds = time.perf_counter() - t
        st.peak_anon_bytes = mem.peak
        st.status = "ran"
        self.manifest["steps"][name] = {"finished": now(), "seconds": round(st.seconds, 3),
                                        "peak_anon_bytes": mem.peak,
                                        "stats": jsonable(st.stats)}
        self._save()
        log.info("step %s: done in %.1f s", name, st.seconds)

    def run_step(self, name: str, fn: Callable[[], dict | None], plan: dict | None = None):
        """``fn()`` as step ``name`` unless done; its returned dict becomes the step's stats."""
        with self.step(name, plan) as st:
            if st.todo:
                st.stats = fn() or {}
        return st.stats

    def run_steps(self, steps: Sequence[StepDef], ctx: StepContext) -> dict[str, dict]:
        """Run the declared ``steps`` in order (each through :meth:`step`); return their stats.

        A finished step is skipped (its statistics come from the manifest); in a dry run no
        step runs except the ``read_only`` ones not finished before, so that later plans see
        their statistics. ``ctx.stats`` gets each step's statistics as the runner passes it.
        """
        for sd in steps:
            with self.step(sd.name, sd.plan_for(ctx)) as st:
                if st.todo:
                    st.stats = sd.run(ctx) or {}
            stats = st.stats
            if self.dry_run and sd.read_only and not self.done(sd.name):
                stats = sd.run(ctx) or {}
            ctx.stats[sd.name] = stats
        return ctx.stats

    def check_disk(self, need_bytes: int, what: str = "the store") -> None:
        """Raise :class:`NotEnoughDiskError` if the store's file system lacks ``need_bytes``.

        A resumed job needs only what is left: the bytes its store already holds count
        toward ``need_bytes`` (for a whole-job estimate; a step's own ``disk_bytes`` plan is
        checked when the step starts)."""
        if not self.loc.is_local:
            return
        if self.resumed and what.startswith("the store") and self.loc.exists():
            need_bytes = max(0, need_bytes - self.loc.disk_usage())
        free = free_disk_bytes(self.loc.root)
        if need_bytes > free:
            raise NotEnoughDiskError(f"Expected {format_size(need_bytes)} free for {what} at "
                                     f"{self.store_url}. Got {format_size(free)} instead.")

    def commit(self, **provenance: Any) -> None:
        """Record the job in the store's provenance, mark it complete, drop scratch files."""
        if self.dry_run or self.complete:
            return
        with self._disk_full_named():
            self.writer.add_provenance(f"preprocess {self.name}", inputs=self.inputs,
                                       options=self.options, **jsonable(provenance))
            self.writer.commit()
        self._finish()

    def _finish(self) -> None:
        """Mark the manifest complete and remove the scratch and work files (the store has
        committed)."""
        self.manifest["complete"] = True
        self.manifest.setdefault("finished", now())
        self._save()
        self.complete = True
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.scratch_dir is not None:
            shutil.rmtree(scratch_root(self.loc, self.scratch_dir), ignore_errors=True)

    def close(self) -> None:
        """Stop writing without committing: release the store's write lock. The store stays
        incomplete and the job resumes on its next run (as after a crash)."""
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reporting ------------------------------------------------------------------
    def summary(self) -> str:
        """A table of the steps: status, seconds, edges/s, GB/s, peak anonymous memory."""
        return summary_table(self.steps, time.perf_counter() - self.t0, self.budget_bytes)

    def plan_text(self) -> str:
        """What a run would do (for ``--dry-run``): each step with its declared plan."""
        free = free_disk_bytes(self.loc.root) if self.loc.is_local else None
        return plan_table(self.steps, self.done, free, self.budget_bytes)
