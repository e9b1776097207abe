"""Byte counts as people write them: :func:`parse_size` reads ``"2GiB"``, :func:`format_size`
writes ``"2.00 GiB"``. The one reading of sizes for every entry point (``featurestore
preprocess --memory``, ``NeighborLoader(memory=)``, ``featurestore plan --memory``).

Every unit is a power of 1024: ``K``, ``KB`` and ``KiB`` all mean 2**10 bytes, ``G``, ``GB`` and
``GiB`` all mean 2**30 (``"2GB"`` is ``"2GiB"``: what a user of ``--memory 2G`` expects, and
what a memory cgroup or ``free -g`` counts in).
"""

from __future__ import annotations

import re

from featurestore.errors import InvalidArgumentError

__all__ = ["parse_size", "format_size"]

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)\s*", re.I)


def parse_size(size: str | int | float) -> int:
    """Bytes of ``size``: a number of bytes, or text like ``"1.5GiB"``, ``"512M"``, ``"2GB"``.

    Units are case-insensitive and binary whatever their spelling: ``K``/``KB``/``KiB`` =
    2**10, ``M``/``MB``/``MiB`` = 2**20, ``G``/``GB``/``GiB`` = 2**30, ``T``/``TB``/``TiB`` =
    2**40 (so ``"2GB" == "2GiB" == 2 * 2**30``); no unit (or ``B``) means bytes.

    Parameters
    ----------
    size
        An int or float (bytes, at least 0) or a string as above.

    Returns
    -------
    int
        The size in bytes (fractions of a byte dropped).

    Raises
    ------
    InvalidArgumentError
        ``size`` is negative or not a size (a ``ValueError``).

    Examples
    --------
    >>> parse_size("2GB") == parse_size("2GiB") == 2 << 30
    True
    >>> parse_size("1.5 gib"), parse_size("512M"), parse_size(4096)
    (1610612736, 536870912, 4096)
    """
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        if size < 0:
            raise InvalidArgumentError(f"Expected a memory size >= 0. Got {size!r} instead.")
        return int(size)
    m = _SIZE.fullmatch(str(size))
    if not m:
        raise InvalidArgumentError(f"Expected a memory size such as 1.5GiB, 512M or 2000000000. "
                                   f"Got {size!r} instead.")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n: float, digits: int = 2) -> str:
    """``1536`` -> ``"1.50 KiB"``; bytes are printed whole (binary units, as :func:`parse_size`
    reads them)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.{digits}f} {unit}"
        n /= 1024
    raise AssertionError
