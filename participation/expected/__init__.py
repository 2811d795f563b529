"""Expected delays per participation case: exact values, Monte-Carlo, paper bounds.

``exact_tau_t``, ``exact_tau_avg``, ``exact_tau_max`` (and the exact law
``exact_tau_max_tail``) cover every pattern with a formula: independent clients
(Bernoulli with homogeneous, per-client or time-varying p; Sine/P3; H.8; LOGIT's
setting), CA-Fed Markov availability (per client or per cluster), uniform sampling
(E[τ_t] and E[τ_avg]), deterministic cyclic, reshuffled cyclic (E[τ_t], E[τ_avg]),
on/off cycles with random phases, and any pattern with a never-available client
(τ_t = t + 1 exactly; :mod:`.availability`). Anything else raises a ValueError that
points to ``monte_carlo``.

Each computation estimates its memory and time from the sizes before it starts and
refuses, with a one-line ValueError naming both, what would exceed the limits of
:mod:`._budget` (``FEDVERIFY_MEMORY_GB`` or half the machine's memory;
``FEDVERIFY_EXACT_SECONDS`` or 60 s).
"""
from __future__ import annotations

import numpy as np

from ..patterns import Cyclic, OnOffCycles, Pattern, ReshuffledCyclic, Uniform
from ..patterns.base import check_count, require_pattern
from ..delays import per_round_delay
from . import availability, independent, reshuffled, sampling
from ._budget import require
from .montecarlo import Estimate, MonteCarloResult, check_monte_carlo, monte_carlo
from .paper_bounds import PaperBound, paper_tau_max_bound
from .units import units_of

__all__ = ["exact_tau_t", "exact_tau_avg", "exact_tau_max", "exact_tau_max_tail", "paper_tau_max_bound",
           "PaperBound", "monte_carlo", "check_monte_carlo", "MonteCarloResult", "Estimate"]


def _no_formula(pattern: Pattern, what: str) -> ValueError:
    return ValueError(f"no exact formula for {what} under {type(pattern).__name__}; use monte_carlo(pattern, rounds, reps)")


def _deterministic_delays(pattern: Pattern, rounds: int) -> np.ndarray:
    """τ_t of a pattern that draws nothing (Cyclic, Replay): its own expectation. Cyclic has
    a closed form; any other is sampled once (its T × N mask, checked against the budget)."""
    if isinstance(pattern, Cyclic):
        return sampling.cyclic_tau_t(pattern, rounds)
    n = pattern.n_clients
    require(f"the delays of {type(pattern).__name__} over {rounds} rounds ({rounds} × {n} trace)",
            rounds * (n + 32 * -(-n // 64) + 16), rounds * n * 2e-9)
    return per_round_delay(pattern.sample(rounds).mask)


def exact_tau_t(pattern: Pattern, rounds: int) -> np.ndarray:
    """E[τ_t] for t = 0..rounds−1 (FedSUM eq. (4); the exact laws are derived
    here)."""
    require_pattern(pattern)
    rounds = check_count(rounds, "rounds")
    if pattern.deterministic:
        return _deterministic_delays(pattern, rounds).astype(float)
    if availability.never_available_clients(pattern, rounds).size:
        return availability.never_available_tau_t(rounds)
    units = units_of(pattern, rounds)
    if units is not None:
        return independent.expected_tau_t(units, f"exact E[τ_t] for {type(pattern).__name__} at T={rounds}")
    if isinstance(pattern, OnOffCycles):
        return availability.on_off_tau_t(pattern, rounds)
    if isinstance(pattern, Uniform):
        return sampling.uniform_tau_t(pattern, rounds)
    if isinstance(pattern, ReshuffledCyclic):
        return sampling.reshuffled_tau_t(pattern, rounds)
    raise _no_formula(pattern, "E[τ_t]")


def exact_tau_avg(pattern: Pattern, rounds: int) -> float:
    """E[τ_avg] = (1/T) Σ_{t<T} E[τ_t] (FedSUM §2.2)."""
    return float(exact_tau_t(pattern, rounds).mean())


def exact_tau_max_tail(pattern: Pattern, rounds: int) -> np.ndarray:
    """P(τ_max ≥ l) for l = 1..rounds (τ_max over t = 0..T−1, the range of FedSUM
    App. B and the proof of Lemma F.3)."""
    require_pattern(pattern)
    rounds = check_count(rounds, "rounds")
    if pattern.deterministic:
        return (np.arange(1, rounds + 1) <= _deterministic_delays(pattern, rounds).max()).astype(float)
    if availability.never_available_clients(pattern, rounds).size:
        return availability.never_available_tau_max_tail(rounds)
    units = units_of(pattern, rounds)
    if units is not None:
        return independent.tau_max_tail(units, f"exact E[τ_max] for {type(pattern).__name__}")
    if isinstance(pattern, OnOffCycles):
        return availability.on_off_tau_max_tail(pattern, rounds)
    if isinstance(pattern, ReshuffledCyclic) and type(pattern)._generate is ReshuffledCyclic._generate:
        return reshuffled.reshuffled_tau_max_tail(pattern, rounds)
    raise _no_formula(pattern, "the law of τ_max")


def exact_tau_max(pattern: Pattern, rounds: int) -> float:
    """E[τ_max] = Σ_{l≥1} P(τ_max ≥ l) (FedSUM eq. (109), with the exact tail)."""
    return float(exact_tau_max_tail(pattern, rounds).sum())
