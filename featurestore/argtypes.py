"""``argparse`` types for the command line: a bad number is a usage error naming the option
(``error: argument --batch-size: expected an integer >= 1, got '0'``), not a traceback."""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "positive_float", "nonnegative_float", "auto_or_positive_int",
           "fanout_list"]


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return v


def nonnegative_float(text: str) -> float:
    """A finite number >= 0."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return v


def auto_or_positive_int(text: str) -> int | str:
    """``auto``, or an integer >= 1."""
    if text == "auto":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        msg = f"expected 'auto' or an integer >= 1, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def fanout_list(text: str) -> str:
    """Comma-separated fanouts: integers, each >= 0 or -1 (every neighbour)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        ok = bool(parts) and all(int(p) >= 0 or int(p) == -1 for p in parts)
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"expected fanouts such as 15,10,5 (integers >= 0, or "
                                         f"-1 for every neighbour), got {text!r}")
    return text
