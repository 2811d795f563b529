"""Throughput ratios, each measured within one run against a straightforward form.

Ratios (not seconds) are what the project tracks: both sides run on the same machine,
on the same input, interleaved, and the best of several repetitions is kept.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from participation.delays import per_round_delay
from participation.expected import monte_carlo
from participation.patterns import Bernoulli


@dataclass(frozen=True)
class Ratio:
    name: str
    workload: str
    baseline_seconds: float
    fast_seconds: float

    @property
    def speedup(self) -> float:
        return self.baseline_seconds / self.fast_seconds

    def report(self) -> str:
        return (f"{self.name}: {self.speedup:.1f}x  ({self.workload}; straightforward {self.baseline_seconds * 1e3:.1f} ms,"
                f" fedverify {self.fast_seconds * 1e3:.1f} ms)")


def straightforward_per_round_delay(mask: np.ndarray) -> np.ndarray:
    """τ_t via a masked index array and ``np.maximum.accumulate`` (the plain numpy form)."""
    rounds = np.arange(mask.shape[-2])
    last = np.maximum.accumulate(np.where(mask, rounds[:, None], -1), axis=-2)
    return rounds - last.min(axis=-1)


def _best_of(fn, arg, repeats: int) -> tuple[float, np.ndarray]:
    best, result = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(arg)
        best = min(best, time.perf_counter() - start)
    return best, result


def delay_metrics_ratio(quick: bool = False, density: float = 0.2, seed: int = 0) -> Ratio:
    """Delay metrics on a dense trace (10^4 × 10^4; 2000 × 1000 with ``quick``)."""
    rounds, clients = (2000, 1000) if quick else (10_000, 10_000)
    mask = np.random.default_rng(seed).random((rounds, clients)) < density
    repeats = 3
    base, expected = _best_of(straightforward_per_round_delay, mask, repeats)
    fast, got = _best_of(per_round_delay, mask, repeats)
    if not np.array_equal(expected, got):
        raise AssertionError("per_round_delay disagrees with the straightforward form")
    return Ratio("delay metrics", f"dense {rounds}x{clients} trace, density {density}", base, fast)


def _straightforward_monte_carlo(rounds: int, n_clients: int, p: float, reps: int, seed: int = 0) -> np.ndarray:
    """A fresh Bernoulli matrix per replicate, then the straightforward delay form."""
    rng = np.random.default_rng(seed)
    return np.array([straightforward_per_round_delay(rng.random((rounds, n_clients)) < p).max() for _ in range(reps)])


def monte_carlo_ratios(quick: bool = False, workers: int = 1) -> list[Ratio]:
    """Replicate throughput of Monte-Carlo E[τ_max], Case 2 (N=100, p=0.2, T=2000)."""
    rounds, n, p = 2000, 100, 0.2
    reps = 100 if quick else 400
    pattern = Bernoulli(p, n)
    timings = {}
    for name, run in {
        "straightforward": lambda: _straightforward_monte_carlo(rounds, n, p, reps),
        "gaps": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method="gaps"),
        "trace": lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, method="trace"),
    }.items():
        timings[name] = min(_timed(run) for _ in range(2))
    workload = f"Case 2, N={n}, p={p}, T={rounds}, {reps} replicates"
    ratios = [Ratio("Monte-Carlo E[tau_max], gap sampling", workload, timings["straightforward"], timings["gaps"]),
              Ratio("Monte-Carlo E[tau_max], whole traces", workload, timings["straightforward"], timings["trace"])]
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as pool:
            parallel = min(_timed(lambda: monte_carlo(pattern, rounds, reps, seed=0, progress=False, executor=pool,
                                                      )) for _ in range(2))
        ratios.append(Ratio(f"Monte-Carlo E[tau_max], gap sampling, {workers} processes", workload, timings["straightforward"], parallel))
    return ratios


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_all(quick: bool = False, workers: int = 1) -> list[Ratio]:
    return [delay_metrics_ratio(quick=quick), *monte_carlo_ratios(quick=quick, workers=workers)]
