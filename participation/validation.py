"""Argument checks shared by every package: each bad value is one ValueError that names it.

The lowest package holds them, so that participation, bounds, algorithms and verify word the
same mistake the same way: ``n_clients must be an integer ≥ 1, got 0``.
"""
from __future__ import annotations

import math
import numbers

__all__ = ["QUOTE_CHARS", "quote", "integer", "finite_real", "path_text"]

#: A value quoted in an error message is cut to about this many characters.
QUOTE_CHARS = 40


def quote(value, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters + "…" (a file's
    megabyte entry must not become a megabyte error line). A string is cut before it is
    quoted, so the quote stays readable."""
    if isinstance(value, str):
        return repr(value[:limit]) + ("…" if len(value) > limit else "")
    try:
        text = repr(value)
    except ValueError:                     # an int too long to print
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


def integer(value, name: str, minimum: int = 1) -> int:
    """``value`` as an int when it is an integer (any ``numbers.Integral`` but bool) of at
    least ``minimum``; otherwise ``{name} must be an integer ≥ {minimum}, got {value}``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {quote(value)}")
    return int(value)


def finite_real(value, name: str, *, above: float | None = None, at_least: float | None = None) -> float:
    """``value`` as a float when it is a finite real number (not bool), greater than ``above``
    and at least ``at_least`` where given; otherwise ``{name} must be a finite number > above``
    (or ``≥ at_least``)."""
    if above is not None and at_least is not None:
        raise ValueError("give one of above and at_least")
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    ok = ok and (above is None or value > above) and (at_least is None or value >= at_least)
    if not ok:
        limit = f" > {above:g}" if above is not None else f" ≥ {at_least:g}" if at_least is not None else ""
        raise ValueError(f"{name} must be a finite number{limit}, got {quote(value)}")
    return float(value)


def path_text(text, flag: str | None = None) -> str:
    """``text`` (as a str) when it can name a file: refused when empty or blank (it would
    silently mean the current folder) and when it holds a NUL character. ``flag`` names the
    option the path was given to, if any."""
    text = str(text)
    if not text.strip():
        raise ValueError(f"{flag} is an empty path; give a file or folder name" if flag
                         else "the path is empty; give a file or folder name")
    if "\0" in text:
        raise ValueError(f"{flag or 'the path'} {quote(text)} holds a NUL character")
    return text
