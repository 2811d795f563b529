"""Input checks shared by the CA-Fed bounds (notation as in :mod:`bounds.cafed`).

Each check returns the validated value or raises a ValueError naming the argument: target
importance α on the simplex (eq. (1)), availabilities π_k ∈ (0, 1] (defined after eq. (4)),
aggregation weights q ≥ 0 with ‖q‖₁ > 0, signed second eigenvalues λ_k of two-state chains
in the range that keeps (236) stochastic, options, and constants taken from a keyword or
``Constants.extra``. ``_source`` cites the paper in a ``Source``.
"""
from __future__ import annotations

import numpy as np

from participation import markov

from ..core import Constants, Source, positive

PAPER = "CA-Fed"
#: Target weights must sum to 1 within this tolerance.
SIMPLEX_TOL = 1e-9


def _vector(x, name: str, n: int | None = None) -> np.ndarray:
    """A finite 1-D float array (one entry per client), or a ValueError naming it."""
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of real numbers, got {x!r}") from None
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array (one entry per client), got shape {a.shape}")
    if n is not None and a.size != n:
        raise ValueError(f"{name} has {a.size} entries, expected {n} (one per client)")
    bad = ~np.isfinite(a)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {a[i]} is not finite")
    return a


def _first(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


def _simplex(alpha, name: str = "alpha", n: int | None = None) -> np.ndarray:
    a = _vector(alpha, name, n)
    if (a < 0).any():
        i = _first(a < 0)
        raise ValueError(f"{name}[{i}] = {a[i]} is negative; {name} must lie on the probability simplex")
    if abs(a.sum() - 1.0) > SIMPLEX_TOL:
        raise ValueError(f"{name} sums to {float(a.sum())!r}, not 1; {name} must lie on the probability simplex")
    return a


def _availability(pi, n: int | None = None) -> np.ndarray:
    a = _vector(pi, "pi", n)
    bad = ~((a > 0) & (a <= 1))
    if bad.any():
        i = _first(bad)
        raise ValueError(f"pi[{i}] = {a[i]} is outside (0, 1]; availabilities must lie in (0, 1]")
    return a


def _weights(q, n: int | None = None) -> np.ndarray:
    a = _vector(q, "q", n)
    if (a < 0).any():
        i = _first(a < 0)
        raise ValueError(f"q[{i}] = {a[i]} is negative; aggregation weights must be >= 0")
    if a.sum() <= 0:
        raise ValueError("q is all zeros; at least one aggregation weight must be > 0")
    return a


def _nonneg_vector(x, name: str, n: int) -> np.ndarray:
    a = _vector(np.broadcast_to(np.asarray(x, dtype=float), (n,)) if np.ndim(x) == 0 else x, name, n)
    if (a < 0).any():
        i = _first(a < 0)
        raise ValueError(f"{name}[{i}] = {a[i]} is negative; it must be >= 0")
    return a


def _lam(lam, pi: np.ndarray) -> np.ndarray:
    """Signed second eigenvalues λ_k of two-state chains: (236) stochastic and −1 < λ < 1."""
    lam = _vector(lam, "lam", pi.size)
    lower = np.full(pi.size, -1.0)
    inner = pi < 1
    lower[inner] = markov.lambda_lower_bound(pi[inner])
    bad = ~((lam > -1) & (lam < 1) & (lam >= np.maximum(lower, -1.0) - 1e-12))
    if bad.any():
        i = _first(bad)
        raise ValueError(f"lam[{i}] = {lam[i]} is outside the admissible range [{max(lower[i], -1.0):.6g}, 1) "
                         f"for pi = {pi[i]} (eq. (236) stochastic, -1 < lam < 1)")
    return lam


def _lookup(name: str, given, constants: Constants | None, check=positive):
    """An explicit keyword wins, then ``constants.extra[name]``; None when neither is set."""
    if given is None and constants is not None:
        given = constants.extra.get(name)
    return None if given is None else check(given, name)


def _require(name: str, given, constants: Constants | None, check=positive) -> float:
    value = _lookup(name, given, constants, check)
    if value is None:
        raise ValueError(f"this bound needs {name}: pass {name}=... or Constants(extra={{{name!r}: ...}})")
    return value


def _option(value: str, name: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def _source(item: str, where: str = "", note: str = "") -> Source:
    return Source(PAPER, item, where, note)
