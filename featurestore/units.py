"""Human-readable byte counts, shared by the CLI and the jobs."""

from __future__ import annotations


def format_size(n: float, digits: int = 2) -> str:
    """``1536`` -> ``"1.50 KiB"``; bytes are printed whole."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.{digits}f} {unit}"
        n /= 1024
    raise AssertionError
