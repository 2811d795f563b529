"""Exact delay laws for availability models: never-available clients and on/off cycles.

Never-available clients. If some client i is never in S_t over rounds 0..T−1 (p_i = 0
under independent participation, a_i = 0 in :class:`OnOffCycles`, or either under
:class:`Selected`), then a_{i,t} = −1, so τ_t = t − min_j a_{j,t} = t + 1 in every round,
whatever the other clients do (τ_t ≤ t + 1 always). Hence, exactly and almost surely,
τ_t = t + 1, τ_max = T and τ_avg = (T + 1)/2: the delays grow with T without bound.

On/off cycles with random phases (:class:`OnOffCycles`, ``phases=None``; derived here).
Client i with a_i ≥ 1 active rounds out of C, phase φ, is on at t iff r = (t + φ) mod C
< a_i. Off at t, its last selection is d = r − a_i + 1 rounds back if that round is ≥ 0,
so its age is A_i(t) = 0 (r < a_i), d (r ≥ a_i, d ≤ t) or t + 1 (never selected yet).
As φ runs over {0, …, C−1}, so does r, whatever t: hence for 1 ≤ k ≤ t + 1

    P(A_i(t) < k) = min(a_i + k − 1, C) / C      (a_i ≥ 1; it is 0 for a_i = 0),

independent of t. Phases are independent across clients, so
P(τ_t < k) = Π_i min(a_i + k − 1, C)/C and

    E[τ_t] = Σ_{k=1}^{min(t+1, C)} (1 − Π_i min(a_i + k − 1, C)/C),

the terms vanishing for k > C − min_i a_i + 1. For τ_max: τ_max = max_t max_i A_i(t) =
max_i m_i(φ_i), where m_i(φ) is the longest absence run of client i in rounds 0..T−1
(the run before its first selection included). Every absence of a client is a stretch of
C − a rounds between two active stretches, cut by the horizon, except the leading one:

* φ < a (on at round 0): the first absence starts at t_1 = a − φ;
* φ ≥ a (off at round 0): the leading run lasts min(C − φ, T) rounds (its ages are t + 1),
  and the next absence starts at t_1 = C − φ + a;

so m(φ) = max(leading run, min(C − a, T − t_1) if t_1 < T), a closed form in O(C) per
distinct a, and

    P(τ_max < l) = Π_i #{φ : m_i(φ) < l} / C,    E[τ_max] = Σ_{l=1}^{T} P(τ_max ≥ l),

the counts read from the sorted m values.
"""
from __future__ import annotations

import numpy as np

from ...patterns import IndependentPattern, OnOffCycles, Pattern, Selected
from ._limits import require
from .units import known_constant, probability_chunks


def never_available_clients(pattern: Pattern, rounds: int) -> np.ndarray:
    """Indices of the clients that ``pattern`` never lets take part in rounds 0..rounds−1
    (by construction: p_i^t = 0 for every t, or a_i = 0); empty when there are none or
    the pattern cannot say."""
    if isinstance(pattern, IndependentPattern):
        known = known_constant(pattern)
        if known is not None:
            return np.flatnonzero(known == 0)
        never = np.ones(pattern.n_clients, dtype=bool)
        for _, p in probability_chunks(pattern, rounds):  # never one (T, N) array
            never &= (p == 0).all(axis=0)
            if not never.any():
                break
        return np.flatnonzero(never)
    if isinstance(pattern, OnOffCycles):
        return np.flatnonzero(pattern.active == 0)
    if isinstance(pattern, Selected):
        return never_available_clients(pattern.availability, rounds)
    return np.zeros(0, dtype=np.int64)


def never_available_tau_t(rounds: int) -> np.ndarray:
    """E[τ_t] = t + 1 (τ_t = t + 1 almost surely) when some client is never available."""
    return np.arange(1, rounds + 1, dtype=float)


def never_available_tau_max_tail(rounds: int) -> np.ndarray:
    """P(τ_max ≥ l) = 1 for l = 1..T (τ_max = T almost surely)."""
    return np.ones(rounds)


def _active_classes(pattern: OnOffCycles) -> tuple[np.ndarray, np.ndarray]:
    return np.unique(pattern.active, return_counts=True)


def on_off_tau_t(pattern: OnOffCycles, rounds: int) -> np.ndarray:
    """E[τ_t], t = 0..rounds−1, under uniformly random independent phases (module docstring)."""
    values, counts = _active_classes(pattern)
    if values[0] == 0:
        return never_available_tau_t(rounds)
    period = pattern.period
    require(f"exact E[τ_t] for OnOffCycles with period {period} ({values.size} distinct active lengths)",
            8 * (4 * min(values.size, 1 << 20) * period + rounds), values.size * period * 2e-8)
    k = np.arange(1, period + 1)
    log_below = counts @ np.log(np.minimum(values[:, None] + k[None, :] - 1, period) / period)
    tail = -np.expm1(log_below)  # P(τ_t ≥ k) for k ≤ t + 1
    return np.cumsum(tail)[np.minimum(np.arange(rounds), period - 1)]


def on_off_longest_absence(active: np.ndarray, period: int, rounds: int) -> np.ndarray:
    """m(φ) for each a in ``active`` and φ = 0..C−1: the longest absence run over rounds
    0..rounds−1, shape (len(active), C), in closed form (module docstring). a = 0 gives ``rounds``."""
    a = np.asarray(active, dtype=np.int64)[:, None]
    phase = np.arange(period, dtype=np.int64)[None, :]
    on_first = phase < a
    leading = np.where(on_first, 0, np.minimum(period - phase, rounds))
    next_off = np.where(on_first, a - phase, period - phase + a)
    stretch = np.where(next_off < rounds, np.minimum(period - a, rounds - next_off), 0)
    longest = np.maximum(leading, stretch)
    return np.where(a == 0, rounds, longest)


def on_off_tau_max_tail(pattern: OnOffCycles, rounds: int) -> np.ndarray:
    """P(τ_max ≥ l), l = 1..rounds, under uniformly random independent phases."""
    values, counts = _active_classes(pattern)
    if values[0] == 0:
        return never_available_tau_max_tail(rounds)
    period = pattern.period
    require(f"exact E[τ_max] for OnOffCycles with period {period} ({values.size} distinct active lengths)",
            8 * (6 * values.size * period + rounds), values.size * period * 1e-7)
    longest = np.sort(on_off_longest_absence(values, period, rounds), axis=1)  # (G, C), entries ≤ min(C, T)
    top = int(longest[:, -1].max())
    tail = np.zeros(rounds)
    if top == 0:
        return tail
    l = np.arange(1, top + 1)
    log_below = np.zeros(top)
    with np.errstate(divide="ignore"):
        for g in range(values.size):  # #{φ : m(φ) < l} from the sorted m
            log_below += counts[g] * np.log(np.searchsorted(longest[g], l, side="left") / period)
    tail[:top] = -np.expm1(log_below)
    return tail
