"""The rows of ``fedverify bench``: a measured ratio, or a row that could not be measured here."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Ratio", "Skipped", "duration"]


@dataclass(frozen=True)
class Ratio:
    """``baseline_seconds / fast_seconds`` on one workload; ``baseline`` names the slower
    side, ``note`` carries what else was measured alongside (a line of its own)."""

    name: str
    workload: str
    baseline_seconds: float
    fast_seconds: float
    baseline: str = "straightforward"
    note: str = ""

    @property
    def speedup(self) -> float:
        return self.baseline_seconds / self.fast_seconds

    def report(self) -> str:
        return (f"{self.name}: {self.speedup:.1f}x  ({self.workload}; {self.baseline} "
                f"{duration(self.baseline_seconds)}, fedverify {duration(self.fast_seconds)})")


@dataclass(frozen=True)
class Skipped:
    """A row that could not be measured here, and why."""

    name: str
    reason: str

    def report(self) -> str:
        return f"{self.name}: skipped ({self.reason})"


def duration(seconds: float) -> str:
    """Seconds as a bench line prints them: milliseconds below 10 s."""
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"
