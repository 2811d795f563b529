"""What one exact computation of :mod:`participation.expected` may spend, and its refusal.

Every exact formula estimates its memory and time from the sizes it is given (rounds,
units, rows of its recursions) before it allocates anything, and refuses with a one-line
ValueError naming both estimates when either is over its limit:

* memory: :func:`participation.budget.memory_limit`, i.e. ``FEDVERIFY_MEMORY_GB`` gigabytes
  when set, else half of this machine's physical memory;
* time: ``FEDVERIFY_EXACT_SECONDS`` seconds when set, else :data:`EXACT_SECONDS`.

The time estimates are deliberately rough (unit costs measured on a busy two-core machine);
they exist so that a size that would run for hours says so at once.
"""
from __future__ import annotations

from ...budget import human_bytes, human_seconds, memory_limit, positive_setting

__all__ = ["EXACT_SECONDS", "ENV_SECONDS", "time_limit", "require", "human_bytes", "human_seconds"]

#: Seconds an exact computation may take unless ``FEDVERIFY_EXACT_SECONDS`` says otherwise.
EXACT_SECONDS = 60.0
ENV_SECONDS = "FEDVERIFY_EXACT_SECONDS"


def time_limit() -> float:
    """Seconds one exact computation may take."""
    value = positive_setting(ENV_SECONDS, "seconds")
    return EXACT_SECONDS if value is None else value


def require(what: str, nbytes: float, seconds: float, advice: str = "use monte_carlo(pattern, rounds, reps)") -> None:
    """A one-line ValueError when ``what`` needs more than the memory or time limit."""
    memory, limit = memory_limit(), time_limit()
    if nbytes > memory or seconds > limit:
        need = " / ".join(([f"~{human_bytes(nbytes)}"] if nbytes else []) + ([f"~{human_seconds(seconds)}"] if seconds else []))
        raise ValueError(f"{what} needs {need}, over the limit of {human_bytes(memory)} / {human_seconds(limit)} "
                         f"(FEDVERIFY_MEMORY_GB, {ENV_SECONDS}); {advice}")
