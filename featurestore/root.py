"""The root ``zarr.json`` of an open store: read and parsed once at open, then read again to
notice that the store was rewritten (its generation changed) while a reader held it."""

from __future__ import annotations

import json
import time
from typing import Any

from featurestore.errors import IncompleteStoreError, NotAStoreError, StoreChangedError
from featurestore.format.schema import StoreSchema, parse_root
from featurestore.remote.location import Location

__all__ = ["RootFile"]


class RootFile:
    """The root ``zarr.json`` of the store at ``loc``, parsed into :attr:`meta`.

    Parameters
    ----------
    loc
        The store's location (known to exist).
    allow_incomplete
        Accept a store whose writer never committed.

    Raises
    ------
    NotAStoreError
        No root ``zarr.json``, or not one of a feature store.
    IncompleteStoreError
        The writer never committed, and ``allow_incomplete`` is false.
    """

    #: implicit generation checks of a remote store (one request each) at most this often.
    REMOTE_RECHECK_S = 1.0

    def __init__(self, loc: Location, allow_incomplete: bool = False):
        self.loc, self.url = loc, loc.url
        self.file = loc.path("zarr.json")
        try:
            raw = self.read()
        except FileNotFoundError as e:
            raise NotAStoreError(f"Expected a zarr v3 group (zarr.json) at {self.url}. "
                                 "Found none: this is not a feature store.") from e
        attrs, meta = parse_root(raw, self.url, self.file)
        if not meta.complete and not allow_incomplete:
            raise IncompleteStoreError(
                f"The store at {self.url} is incomplete: its writer never committed (it crashed "
                "or is still running). Re-run the job that writes it; it resumes where it stopped.")
        self.raw = raw
        #: the raw root attributes, and the same checked and typed
        self.attrs: dict[str, Any] = attrs
        self.meta: StoreSchema = meta
        self.generation: str | None = meta.generation
        self._checked_at = time.monotonic()

    def read(self) -> bytes:
        """The bytes of the root ``zarr.json`` now."""
        with self.loc.fs.open(self.file, "rb") as f:
            return f.read()

    def check_generation(self) -> None:
        """Raise ``StoreChangedError`` if the store was rewritten since it was parsed.

        Costs one read of the root ``zarr.json`` (parsed only when its bytes changed).
        """
        try:
            raw = self.read()
        except FileNotFoundError as e:
            raise StoreChangedError(f"The store {self.url} was removed or is being rewritten "
                                    f"({self.file} is gone) since this reader opened it. "
                                    "Open it again.") from e
        if raw == self.raw:
            return
        try:
            attrs = json.loads(raw).get("attributes", {})
            gen, complete = attrs.get("generation"), attrs.get("complete")
        except (ValueError, AttributeError):
            gen, complete = "(unreadable)", False
        if gen != self.generation or gen is None or complete is not True:
            raise StoreChangedError(
                f"The store {self.url} was rewritten since this reader opened it (generation "
                f"{self.generation!r}, now {gen!r}{'' if complete else ', not complete'}). "
                "Open it again.")

    def due(self) -> bool:
        """Whether an implicit check is due: always when local (one small local read), at
        most once per ``REMOTE_RECHECK_S`` when remote (one request)."""
        if self.loc.is_local:
            return True
        now = time.monotonic()
        if now - self._checked_at < self.REMOTE_RECHECK_S:
            return False
        self._checked_at = now
        return True
