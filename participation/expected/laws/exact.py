"""Exact E[τ_t] and law of τ_max: one ordered table of the pattern families with a formula.

Each family says whether it covers a pattern (``applies`` returns what its formulas need,
its *law*, or None) and gives E[τ_t] and/or P(τ_max ≥ l) from that law. Both quantities
walk the same table, in its order, and the first family that covers the pattern and has
a formula for the quantity answers; a family without a formula for one quantity is
skipped for it. Anything no family covers is a ValueError pointing to ``monte_carlo``.

The order matters where families overlap: a deterministic pattern is its own expectation
whatever its class, and a never-available client fixes τ_t = t + 1 before any formula of
the rest of the pattern is looked at.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...delays import per_round_delay
from ...patterns import Cyclic, OnOffCycles, Pattern, ReshuffledCyclic, Uniform
from ...patterns.base import require_pattern
from ...validation import integer
from . import availability_laws, independent_laws, reshuffled, sampling_laws
from ._limits import require
from .units import units_of


@dataclass(frozen=True)
class ExactFamily:
    """Patterns with an exact formula: ``applies(pattern, rounds)`` is their law or None;
    ``tau_t(pattern, rounds, law)`` is E[τ_t] for t < rounds and ``tau_max_tail(pattern,
    rounds, law)`` is P(τ_max ≥ l) for l = 1..rounds (None: no formula for that quantity)."""

    name: str
    applies: Callable[[Pattern, int], object]
    tau_t: Callable[[Pattern, int, object], np.ndarray] | None
    tau_max_tail: Callable[[Pattern, int, object], np.ndarray] | None


def _deterministic_delays(pattern: Pattern, rounds: int) -> np.ndarray:
    """τ_t of a pattern that draws nothing (Cyclic, Replay): its own expectation. Cyclic has
    a closed form; any other is sampled once (its T × N mask, checked against the budget)."""
    if isinstance(pattern, Cyclic):
        return sampling_laws.cyclic_tau_t(pattern, rounds)
    n = pattern.n_clients
    require(f"the delays of {type(pattern).__name__} over {rounds} rounds ({rounds} × {n} trace)",
            rounds * (n + 32 * -(-n // 64) + 16), rounds * n * 2e-9)
    return per_round_delay(pattern.sample(rounds).mask)


def _instance_of(cls) -> Callable[[Pattern, int], Pattern | None]:
    """``applies`` of a family defined by its class: the pattern itself is the law."""
    return lambda pattern, rounds: pattern if isinstance(pattern, cls) else None


def _never_available(pattern: Pattern, rounds: int):
    clients = availability_laws.never_available_clients(pattern, rounds)
    return clients if clients.size else None


def _own_reshuffled(pattern: Pattern, rounds: int) -> Pattern | None:
    """``ReshuffledCyclic`` drawing its own orders (a subclass may draw otherwise)."""
    own = isinstance(pattern, ReshuffledCyclic) and type(pattern)._generate is ReshuffledCyclic._generate
    return pattern if own else None


#: The families, in the order both quantities try them.
FAMILIES = (
    ExactFamily("deterministic",
                lambda pattern, rounds: _deterministic_delays(pattern, rounds) if pattern.deterministic else None,
                lambda pattern, rounds, delays: delays.astype(float),
                lambda pattern, rounds, delays: (np.arange(1, rounds + 1) <= delays.max()).astype(float)),
    ExactFamily("never-available client", _never_available,
                lambda pattern, rounds, clients: availability_laws.never_available_tau_t(rounds),
                lambda pattern, rounds, clients: availability_laws.never_available_tau_max_tail(rounds)),
    ExactFamily("independent units", units_of,
                lambda pattern, rounds, units: independent_laws.expected_tau_t(
                    units, f"exact E[τ_t] for {type(pattern).__name__} at T={rounds}"),
                lambda pattern, rounds, units: independent_laws.tau_max_tail(
                    units, f"exact E[τ_max] for {type(pattern).__name__}")),
    ExactFamily("on/off cycles", _instance_of(OnOffCycles),
                lambda pattern, rounds, _: availability_laws.on_off_tau_t(pattern, rounds),
                lambda pattern, rounds, _: availability_laws.on_off_tau_max_tail(pattern, rounds)),
    ExactFamily("uniform", _instance_of(Uniform),
                lambda pattern, rounds, _: sampling_laws.uniform_tau_t(pattern, rounds), None),
    ExactFamily("reshuffled cyclic", _instance_of(ReshuffledCyclic),
                lambda pattern, rounds, _: sampling_laws.reshuffled_tau_t(pattern, rounds), None),
    ExactFamily("reshuffled cyclic, own draws", _own_reshuffled,
                None, lambda pattern, rounds, _: reshuffled.reshuffled_tau_max_tail(pattern, rounds)),
)


def _no_formula(pattern: Pattern, what: str) -> ValueError:
    return ValueError(f"no exact formula for {what} under {type(pattern).__name__}; use monte_carlo(pattern, rounds, reps)")


def _walk(pattern: Pattern, rounds, quantity: str, what: str) -> np.ndarray:
    """``quantity`` ("tau_t" or "tau_max_tail") by the first family of ``FAMILIES`` that
    has a formula for it and covers ``pattern``."""
    require_pattern(pattern)
    rounds = integer(rounds, "rounds")
    for family in FAMILIES:
        formula = getattr(family, quantity)
        if formula is None:
            continue
        law = family.applies(pattern, rounds)
        if law is not None:
            return formula(pattern, rounds, law)
    raise _no_formula(pattern, what)


def exact_tau_t(pattern: Pattern, rounds: int) -> np.ndarray:
    """E[τ_t] for t = 0..rounds−1 (FedSUM eq. (4); the exact laws are derived
    here)."""
    return _walk(pattern, rounds, "tau_t", "E[τ_t]")


def exact_tau_avg(pattern: Pattern, rounds: int) -> float:
    """E[τ_avg] = (1/T) Σ_{t<T} E[τ_t] (FedSUM §2.2)."""
    return float(exact_tau_t(pattern, rounds).mean())


def exact_tau_max_tail(pattern: Pattern, rounds: int) -> np.ndarray:
    """P(τ_max ≥ l) for l = 1..rounds (τ_max over t = 0..T−1, the range of FedSUM
    App. B and the proof of Lemma F.3)."""
    return _walk(pattern, rounds, "tau_max_tail", "the law of τ_max")


def exact_tau_max(pattern: Pattern, rounds: int) -> float:
    """E[τ_max] = Σ_{l≥1} P(τ_max ≥ l) (FedSUM eq. (109), with the exact tail)."""
    return float(exact_tau_max_tail(pattern, rounds).sum())
