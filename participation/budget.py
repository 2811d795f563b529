"""How much memory one computation may hold, and the one-line refusal when it needs more.

The limit is ``FEDVERIFY_MEMORY_GB`` gigabytes (2^30 bytes) when that variable is set, else
half of this machine's physical memory. Loaders, exact expectations, Monte-Carlo chunks and
the commands of ``verify`` estimate their largest allocation from the sizes they are given
and call :func:`require_memory` before allocating it. This is the one definition of the rule.
"""
from __future__ import annotations

import math
import os

from .validation import quote

__all__ = ["ENV_MEMORY", "memory_limit", "require_memory", "human_bytes", "human_seconds"]

#: Environment variable holding the memory limit in gigabytes (2^30 bytes).
ENV_MEMORY = "FEDVERIFY_MEMORY_GB"


def positive_setting(name: str, unit: str) -> float | None:
    """The positive, finite number the environment variable ``name`` holds (None when unset);
    anything else is a one-line ValueError naming the variable and the ``unit``."""
    text = os.environ.get(name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number of {unit}, got {quote(text)}") from None
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"{name} must be a positive number of {unit}, got {quote(text)}")
    return value


def memory_limit() -> int:
    """Bytes one computation may hold at once."""
    value = positive_setting(ENV_MEMORY, "gigabytes")
    if value is not None:
        return int(value * 2**30)
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 8 * 2**30
    return physical // 2


def human_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def human_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.0f} days"


def require_memory(nbytes: float, what: str) -> None:
    """A one-line ValueError when ``what`` needs more than :func:`memory_limit` bytes."""
    limit = memory_limit()
    if nbytes > limit:
        source = (f"set by {ENV_MEMORY}" if os.environ.get(ENV_MEMORY) is not None
                  else f"half the machine's memory; set {ENV_MEMORY} to change it")
        raise ValueError(f"{what} needs about {human_bytes(nbytes)}; the memory limit is {human_bytes(limit)} "
                         f"({source})")
