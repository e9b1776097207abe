"""tqdm bars for long steps, off when ``progress=False`` or when stderr is not a terminal."""

from __future__ import annotations

import contextlib
import sys

__all__ = ["bar"]


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass


@contextlib.contextmanager
def bar(total: int | None, desc: str, enabled: bool = True, unit: str = "edge"):
    """A tqdm bar (``unit_scale`` on), or a no-op object with the same ``update`` method."""
    if not enabled:
        yield _NoBar()
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False,
              disable=None if not sys.stderr.isatty() else False, mininterval=0.5) as pb:
        yield pb
