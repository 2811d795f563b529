"""The bench row of mistake latency: how long ``fedverify`` takes to answer a mistyped command
line (a theorem name that does not exist, a trace file that is not there), against
``fedverify --help`` on the same machine in the same run, each in a fresh interpreter as a
user starts it. Both are answered before torch and the engine load, so the ratio is about 1;
the note gives the interpreter's own start (``python -c pass``) beside them.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time

from .rows import Ratio, duration

__all__ = ["MISTAKES", "mistake_latency_ratio"]

#: The mistakes the row times: the command line after ``fedverify``, and what the answer names.
MISTAKES = ((("check", "--theorem", "fedsum.theorem_41"), "did you mean fedsum.theorem_4_1?"),
            (("check", "--patterns", "missing.npz"), "trace file 'missing.npz' does not exist"))


def _run(argv, folder) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=folder, capture_output=True, text=True)
    return time.perf_counter() - start, done


def _best(argv, folder, repeats: int) -> tuple[float, subprocess.CompletedProcess]:
    """The quickest of ``repeats`` runs of ``python argv`` in ``folder``, and its result."""
    runs = [_run(argv, folder) for _ in range(repeats)]
    return min(runs, key=lambda run: run[0])


def _answered(done: subprocess.CompletedProcess, words: str) -> bool:
    """Whether a run ended as a mistake should: exit 2 and one line on stderr naming it."""
    lines = done.stderr.strip().splitlines()
    return done.returncode == 2 and len(lines) == 1 and words in lines[0]


def mistake_latency_ratio(quick: bool = False, repeats: int | None = None) -> Ratio:
    """``fedverify --help`` against the slowest of :data:`MISTAKES`, the best of ``repeats`` runs
    each (3; 1 with ``quick``), in an empty folder. The note gives each mistake's time, whether
    it was answered as it should (exit 2, one line naming it) and ``python -c pass``."""
    repeats = repeats or (1 if quick else 3)
    with tempfile.TemporaryDirectory(prefix="fedverify-bench-") as folder:
        plain, _ = _best(["-c", "pass"], folder, repeats)
        helped, _ = _best(["-m", "verify", "--help"], folder, repeats)
        answers = [(argv, *_best(["-m", "verify", *argv], folder, repeats), words) for argv, words in MISTAKES]
    slowest = max(seconds for _, seconds, _, _ in answers)
    each = "; ".join(f"{' '.join(argv)}: {duration(seconds)}"
                     + ("" if _answered(done, words) else f" (NOT answered as a mistake: exit {done.returncode})")
                     for argv, seconds, done, words in answers)
    return Ratio("mistake latency", "a mistyped theorem and a missing trace file, each in a fresh interpreter",
                 helped, slowest, baseline="fedverify --help",
                 note=f"{each}; python -c pass {duration(plain)} (the mistake takes {slowest / plain:.1f}x that)")
