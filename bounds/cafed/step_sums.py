"""Sums over rounds in CA-Fed Theorem 2 (eq. (13), constants (176)–(179)).

For steps η_t = η_1 t^(−a) or an explicit η_1..η_T: S_T = Σ_{t≤T} η_t, S₂ = Σ η_t², Σ 1/t²,
the burn-in sum Σ_{t<T_P} η_t (178), Φ = Σ_t max(ln(2C_P H t), 0) η²_{t−𝒥_t} (179) and the
𝒥-sum Σ_t 𝒥_t η²_{t−𝒥_t} (141), to T or to ∞. Long horizons use closed forms (Hurwitz zeta
differences) and sums in chunks; the infinite Φ and 𝒥-sum end in a closed-form upper bound
on their tails.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from ..core import nonnegative, positive, power_sum
from ._inputs import _first, _vector
from .mixing import Mixing

#: The explicit part of Φ's infinite sum stops at most here (a tail bound covers the rest).
TAIL_START_MAX = 2**26
#: Up to this many rounds the sums over t ≤ T are taken over one (T,) array;
#: above it S_T, Σ η_t², Σ 1/t² are Hurwitz zeta differences and Φ, the 𝒥-sum go in chunks.
DENSE_ROUNDS = 2**20
#: Most rounds horizon="finite" sums Φ and the 𝒥-sum over, one by one (they have no closed form:
#: 𝒥_t is a ceiling); the same budget as the explicit part of the infinite sums.
FINITE_ROUNDS_MAX = TAIL_START_MAX


@dataclass(frozen=True)
class _Steps:
    eta1: float
    S_T: float        # Σ_{t≤T} η_t
    S2: float         # Σ η_t² (to ∞ or T)
    Z2: float         # Σ 1/t² (π²/6 or to T)
    pre: float        # Σ_{t<T_P} η_t
    Phi: float        # Σ max(ln(2C_P H t), 0) η²_{t−𝒥_t}
    Jsum: float       # Σ 𝒥_t η²_{t−𝒥_t}
    monotone: bool


class _Schedule:
    """η_t = η_1 t^(−a) (``eta`` a number) or an explicit η_1..η_T (``eta`` an array); η_0 given."""

    def __init__(self, eta, decay, eta0, T):
        if np.ndim(eta) == 0:
            self.eta1 = positive(eta, "eta")
            self.decay = nonnegative(decay, "decay")
            if self.decay > 1:
                raise ValueError(f"decay must lie in [0, 1] (eta_t = eta * t**-decay), got {self.decay}")
            self.array = None
        else:
            self.array = _vector(eta, "eta", T)
            if (self.array <= 0).any():
                i = _first(self.array <= 0)
                raise ValueError(f"eta[{i}] = {self.array[i]} must be > 0")
            self.eta1, self.decay = float(self.array[0]), None
        self.eta0 = self.eta1 if eta0 is None else positive(eta0, "eta0")
        if self.eta0 < self.eta1:
            raise ValueError(f"eta0 = {self.eta0} must be >= eta_1 = {self.eta1} (non-increasing steps, T5)")

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """η_t for integer t ≥ 0 (η_0 = eta0)."""
        t = np.asarray(t, dtype=np.int64)
        if self.array is None:
            out = self.eta1 * np.power(np.maximum(t, 1).astype(float), -self.decay)
        else:
            out = self.array[np.maximum(t, 1) - 1]
        return np.where(t == 0, self.eta0, out)

    def partial_sum(self, n: int) -> float:
        """Σ_{t=1}^{n} η_t: over an (n,) array up to DENSE_ROUNDS, else η_1·Σ t^(−a) in closed form."""
        if n <= 0:
            return 0.0
        if n <= DENSE_ROUNDS or self.array is not None:
            return float(self(np.arange(1, n + 1)).sum())
        return self.eta1 * power_sum(self.decay, 1, n)

    def square_sum(self, n: int) -> float:
        """Σ_{t=1}^{n} η_t² (n > DENSE_ROUNDS, scalar schedule): η_1²·Σ t^(−2a) in closed form."""
        return _square(self.eta1) * power_sum(2 * self.decay, 1, n)


def _square(x: float) -> float:
    """x² as ``x**2``, inf where that overflows."""
    try:
        return x**2
    except OverflowError:
        return math.inf


def _chunked_lag_terms(first: int, last: int, mix: Mixing, H: float, eta: _Schedule) -> tuple[float, float]:
    """The Φ and 𝒥 summands of :func:`_lag_terms` summed over t = first..last in chunks of 2^20."""
    phi = jsum = 0.0
    for start in range(first, last + 1, 2**20):
        t = np.arange(start, min(start + 2**20, last + 1), dtype=np.int64)
        a, b = _lag_terms(t, mix, H, eta)
        phi, jsum = phi + a, jsum + b
    return phi, jsum


def _lag_terms(t, mix: Mixing, H: float, eta: _Schedule):
    J = mix.lag(t, H)
    with np.errstate(over="ignore"):
        shifted = eta(t - J) ** 2
    log_term = np.maximum(_log_2h(H) + mix.log_cp + np.log(t.astype(float)), 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        return float((log_term * shifted).sum()), float((J * shifted).sum())


def _log_2h(H: float) -> float:
    """ln(2H), also where 2H overflows float64 (H > 9e307)."""
    return math.log(2 * H) if 2 * H < math.inf else math.log(2.0) + math.log(H)


def _infinite_lag_sums(mix: Mixing, H: float, eta: _Schedule) -> tuple[float, float]:
    """Σ_{t≥1} of the Φ and 𝒥 summands: explicit to t0, then an upper bound on the tail.

    For t > t0 with c = 2C_P H, ℓ = ln(1/λ(P)), s = 2a: 𝒥_t ≤ g(t) = ln(ct)/ℓ + 1 + T_P and
    r = g(t0)/t0 < 1 (g(t)/t decreases once ct ≥ e), so t − 𝒥_t ≥ (1 − r)t and each tail
    sum is at most η_1²(1 − r)^(−s) ∫_{t0}^∞ w(x) x^(−s) dx with w = ln(cx) or g, which is
    closed form. The result is therefore an upper bound on the infinite sums.
    """
    ell, log_c, s = -math.log(mix.lam_P), _log_2h(H) + mix.log_cp, 2 * eta.decay
    t0 = 2**16
    while True:
        g = (log_c + math.log(t0)) / ell + 1 + mix.tp
        r = g / t0
        if (log_c + math.log(t0) >= max(1.0, 1 / s) and r <= 0.05) or t0 >= TAIL_START_MAX:
            break
        t0 *= 2
    if not (r < 1 and log_c + math.log(t0) >= max(1.0, 1 / s)):
        raise ValueError(f"the chain mixes too slowly (lambda(P) = {mix.lam_P}) to bound the infinite sums; "
                         "use horizon='finite'")
    phi, jsum = _chunked_lag_terms(1, t0, mix, H, eta)
    base = _square(eta.eta1) * (1 - r) ** (-s) * t0 ** (1 - s)
    int_log = (log_c + math.log(t0)) / (s - 1) + 1 / (s - 1) ** 2
    int_one = 1 / (s - 1)
    return phi + base * int_log, jsum + base * (int_log / ell + (1 + mix.tp) * int_one)


def _step_sums(eta: _Schedule, T: int, mix: Mixing, H: float, horizon: str) -> _Steps:
    """The sums over rounds of Theorem 2.

    Up to DENSE_ROUNDS rounds (or for an explicit step-size array) every sum is taken over
    the (T,) array of rounds. Above, with η_t = η_1 t^(−a): S_T = η_1 Σ t^(−a),
    Σ η_t² = η_1² Σ t^(−2a) and Σ 1/t² are Hurwitz zeta differences (:func:`bounds.core.power_sum`),
    the steps are non-increasing (a ≥ 0), and the finite-horizon Φ and 𝒥-sum are summed in chunks
    of 2^20 rounds, refused above FINITE_ROUNDS_MAX rounds (ValueError naming the cost)."""
    if horizon == "finite" and T > FINITE_ROUNDS_MAX:
        raise ValueError(f"horizon='finite' sums Phi and the J-sum round by round (no closed form: J_t is a "
                         f"ceiling): T = {T} rounds is above FINITE_ROUNDS_MAX = 2**26; use horizon='infinite'")
    pre = eta.partial_sum(mix.tp - 1)
    if T <= DENSE_ROUNDS or eta.array is not None:
        t = np.arange(1, T + 1, dtype=np.int64)
        steps = eta(t)
        with np.errstate(over="ignore"):
            S_T = float(steps.sum())
        monotone = bool(np.all(np.diff(steps) <= 0)) and eta.eta0 >= eta.eta1
        if horizon == "finite":
            phi, jsum = _lag_terms(t, mix, H, eta) if T <= DENSE_ROUNDS else _chunked_lag_terms(1, T, mix, H, eta)
            with np.errstate(over="ignore"):
                S2 = float((steps**2).sum())
            return _Steps(eta.eta1, S_T, S2, float((1.0 / t.astype(float) ** 2).sum()), pre, phi, jsum, monotone)
    else:
        S_T = eta.partial_sum(T)
        monotone = eta.eta0 >= eta.eta1  # η_1 t^(−a) with a ≥ 0 never increases
        if horizon == "finite":
            phi, jsum = _chunked_lag_terms(1, T, mix, H, eta)
            return _Steps(eta.eta1, S_T, eta.square_sum(T), power_sum(2, 1, T), pre, phi, jsum, monotone)
    if eta.array is not None:
        raise ValueError("an explicit step-size array only covers t <= T; use horizon='finite' or eta=<eta_1>")
    if not 0.5 < eta.decay <= 1:
        raise ValueError(f"decay = {eta.decay} makes sum(eta_t**2) diverge; horizon='infinite' needs 1/2 < decay <= 1")
    phi, jsum = _infinite_lag_sums(mix, H, eta)
    S2 = _square(eta.eta1) * float(special.zeta(2 * eta.decay))
    return _Steps(eta.eta1, S_T, S2, math.pi**2 / 6, pre, phi, jsum, monotone)
