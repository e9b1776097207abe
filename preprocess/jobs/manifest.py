"""The job manifest (``<store>/.preprocess/manifest.json``): what a run records (inputs with
their sizes and mtimes, options, finished steps with their statistics) and what a resumed run
is checked against."""

from __future__ import annotations

import datetime as _dt
import os

from featurestore.errors import UnsafePathError

from preprocess.errors import InputNotFoundError
from preprocess.sources.remote import is_remote, remote_input_record

__all__ = ["MANIFEST_KEY", "input_record", "read_manifest", "save_manifest", "manifest_diffs",
           "check_inputs_outside", "now", "jsonable"]

MANIFEST_KEY = ".preprocess/manifest.json"


def input_record(path: str | os.PathLike) -> dict:
    """``{"path", "size", "mtime_ns"}`` of an input file (a directory: total size, newest mtime;
    an fsspec URL: its size and modification time as the file system reports them)."""
    if is_remote(path):
        return remote_input_record(os.fspath(path))
    p = os.path.abspath(os.fspath(path))
    if not os.path.exists(p):
        raise InputNotFoundError(f"Expected an input file at {p}. Nothing is there.")
    if os.path.isdir(p):
        size = mtime = 0
        for root, _, files in os.walk(p):
            for f in files:
                st = os.stat(os.path.join(root, f))
                size += st.st_size
                mtime = max(mtime, st.st_mtime_ns)
    else:
        st = os.stat(p)
        size, mtime = st.st_size, st.st_mtime_ns
    return {"path": p, "size": int(size), "mtime_ns": int(mtime)}


def now() -> str:
    """The time now (UTC, ISO 8601, seconds), as the manifest records it."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def read_manifest(loc) -> dict | None:
    """The manifest of the store at ``loc`` (a :class:`~featurestore.remote.location.Location`),
    or None when there is none."""
    try:
        return loc.read_json(MANIFEST_KEY)
    except FileNotFoundError:
        return None
    except ValueError:  # a torn manifest cannot happen (atomic writes); treat as absent
        return None


def save_manifest(loc, manifest: dict) -> None:
    """Write ``manifest`` into the store at ``loc``, atomically."""
    if loc.is_local:
        os.makedirs(os.path.dirname(loc.path(MANIFEST_KEY)), exist_ok=True)
    loc.write_json_atomic(MANIFEST_KEY, manifest)


def manifest_diffs(old: dict, name: str, inputs: list[dict], options: dict) -> list[str]:
    """What differs between the run that wrote manifest ``old`` and this one (job name,
    inputs' sizes, mtimes and ETags, options), one line each."""
    diffs = []
    if old.get("job") != name:
        diffs.append(f"job {old.get('job')!r} -> {name!r}")
    old_in = {r["path"]: r for r in old.get("inputs", [])}
    new_in = {r["path"]: r for r in inputs}
    for p in sorted(set(old_in) | set(new_in)):
        a, b = old_in.get(p), new_in.get(p)
        if a is None or b is None:
            diffs.append(f"input {p} {'added' if a is None else 'removed'}")
        elif (a["size"], a["mtime_ns"]) != (b["size"], b["mtime_ns"]):
            diffs.append(f"input {p} changed (size {a['size']} -> {b['size']}, "
                         f"mtime {a['mtime_ns']} -> {b['mtime_ns']})")
        elif a.get("etag") and b.get("etag") and a["etag"] != b["etag"]:
            diffs.append(f"input {p} changed (ETag {a['etag']} -> {b['etag']})")
    oo, no = old.get("options", {}), options
    for k in sorted(set(oo) | set(no)):
        if oo.get(k) != no.get(k):
            diffs.append(f"option {k}: {oo.get(k)!r} -> {no.get(k)!r}")
    return diffs


def check_inputs_outside(loc, inputs: list[dict], store_url: str) -> None:
    """Refuse inputs inside the output directory: replacing or cleaning the store could
    remove them, and a store's directory is the package's to manage."""
    if not loc.is_local:
        return
    root = os.path.realpath(loc.root)
    for rec in inputs:
        if is_remote(rec["path"]):
            continue
        p = os.path.realpath(rec["path"])
        if p == root or p.startswith(root.rstrip(os.sep) + os.sep):
            raise UnsafePathError(
                f"Expected the inputs outside the output directory {store_url}. "
                f"Got the input {rec['path']} inside it; move the input or choose "
                "another output. Nothing was written.")


def jsonable(obj):
    """Plain JSON types (NumPy scalars and tuples converted)."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.dtype):
        return obj.name
    if isinstance(obj, (os.PathLike,)):
        return os.fspath(obj)
    return obj
