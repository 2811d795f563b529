"""LOGIT: convergence bounds under arbitrary client unavailability.

Anonymous authors, "LOGIT: Learning to Generate Gradients for Federated Learning with
Arbitrary Client Unavailability", ICLR 2026 submission (OpenReview km8rXu0RnF), cited
below as LOGIT: Thms 1–2 (Section 4) and their proofs (Appendices A.1–A.2).

Model (Section 3.3, eqs. (7)–(9)): every client runs I local SGD steps each round; client n's
upload arrives with probability p_n^t; a missing upload is replaced by a generated
surrogate. Notation of the bounds (Assumptions 1–4; aggregates defined after Thms 1 and 2
and after eq. (33)):

* Δ = f(x₀) − f*  → ``Constants.delta_f``; L → ``Constants.L``; N, I, T →
  ``n_clients``, ``local_steps``, ``rounds``;
* σ₁² (stochastic-gradient variance, A2) → ``Constants.sigma2``;
* σ₂² (surrogate-gradient variance, A3) → ``Constants.extra["sigma2_surrogate"]``;
* σ₃² (local/global gradient divergence, A4) → ``Constants.zeta2``;
* p̄ = (1/TN) Σ_t Σ_n p_n^t, q̄ = 1 − p̄, p̄_min = (1/N) Σ_n min_t p_n^t,
  p_min = min_n p_n (Theorem 2), τ̄_max = (1/N) Σ_n max_t τ_n^t;
* ε̄* = (1/TN) Σ_t Σ_n (1 − p_n^t) ε*_{n,t}: the user gives ε*_{n,t} (``eps_star``,
  a number or an array over clients / rounds × clients), the (1 − p) weight is applied
  here; C₁ (``C1``) is the ERM-rate constant of Assumption 5 (eq. (31)).

Decisions where the paper disagrees with itself (the readings are this project's):

* Step-size cap: printed 1/(2√(30LI)) (Thm 1; App. A.1 after (21) and before (34)); the
  algebra of (21)→(22) needs 30L²I²η² ≤ 1/4, i.e. η ≤ 1/(2√30·LI), so ``variant="corrected"``
  (default) uses 1/(2√30·LI) and 1/(√30·LI) (the hypothesis stated after (18), printed
  1/√(30LI)); ``"printed"`` keeps the literal forms, under which the proof's step is not
  justified when LI > 1.
* Theorem 2's staleness term: (11)/(39) print (1 − p_min)^{3/2}/(√T p_min) but the last
  line of (38) and the discussion after Thm 2 have √p_min; the corrected variant uses
  √p_min (what is proved).
* The line before the last of (38) prints 8C₁/√(TN)·Σ_n; 4C₁/(TN)·2√T gives
  8C₁/(N√T)·Σ_n. ``staleness="per_client"`` uses the corrected prefactor, or the
  printed one under ``variant="printed"``.

The O(·) statements (10)/(11) are made explicit with the constants of (23), valid for any
0 < η ≤ 1/(2√30·LI) and I ≥ 1, with ε bounded by (33); this explicit form is derived here.

Cost (the rule here): no theorem builds the (T, N) array of p_n^t when the user gave less.
Up to :data:`DENSE_LIMIT` = 2^22 entries T·N the averages are taken over the broadcast
(T, N) array as they always were; above it they are reduced over the arrays as given, in
O(their size): p̄ is the mean of the given p, p̄_min the mean over clients of its minimum
over rounds, and ε̄* the mean of (1 − p)·ε* over the two arrays broadcast together — or,
when p varies only over rounds and ε* only over clients (an outer product), the product of
their means (broadcasting repeats every entry equally often, so these are the same means).
Σ_{t≤T} t^(−1/2) is a Hurwitz zeta difference (:func:`bounds.core.power_sum`). Theorem 2's
"exact_mean" form loops over the clients as before up to :data:`EXACT_MEAN_LOOP` clients and
DENSE_LIMIT entries; beyond, it sums each distinct p_n explicitly only while (1 − p_n)^(t−1)
matters (:func:`exact_mean_sum`) and refuses more than :data:`EXACT_MEAN_BUDGET` explicit terms;
:func:`generator_error`'s "trace" form reduces a (T, N) array and refuses T·N above
:data:`TRACE_BUDGET`. Each refusal is a one-line ValueError naming the cost.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import sympy as sp

from participation.delays import last_selection

from .core import (Bound, Constants, Formula, Magnitude, Source, at_most, check_variant, make_bound,
                   nonnegative, positive, power_sum)

VARIANTS = ("corrected", "printed")
#: T·N up to which the (T, N) statistics are computed over the broadcast array (as before).
DENSE_LIMIT = 2**22
#: Most explicit terms Theorem 2's "exact_mean" form sums (over the distinct p_n together).
EXACT_MEAN_BUDGET = 2**26
#: Most clients the "exact_mean" form loops over one by one (as before); above, distinct p_n are grouped.
EXACT_MEAN_LOOP = 4096
#: Most entries T·N of ``tau`` that generator_error reduces (512 MiB of float64).
TRACE_BUDGET = 2**26
STALENESS_FORMS = ("p_min", "per_client", "exact_mean")
GENERATOR_FORMS = ("closed", "cauchy_schwarz", "trace")
SURROGATE_KEY = "sigma2_surrogate"

# ------------------------------------------------------------------------------ symbols

DELTA = sp.Symbol("Delta", nonnegative=True)
L = sp.Symbol("L", positive=True)
ETA = sp.Symbol("eta", positive=True)
I = sp.Symbol("I", positive=True)
T = sp.Symbol("T", positive=True)
N = sp.Symbol("N", positive=True)
SIGMA1 = sp.Symbol("sigma_1^2", nonnegative=True)
SIGMA2 = sp.Symbol("sigma_2^2", nonnegative=True)
SIGMA3 = sp.Symbol("sigma_3^2", nonnegative=True)
P_BAR = sp.Symbol(r"\bar{p}", positive=True)
P_BAR_MIN = sp.Symbol(r"\bar{p}_{\min}", positive=True)
P_MIN = sp.Symbol(r"p_{\min}", positive=True)
EPS_BAR = sp.Symbol(r"\bar{\epsilon}^{*}", nonnegative=True)
C1_SYM = sp.Symbol("C_1", nonnegative=True)
TAU_MAX = sp.Symbol(r"\bar{\tau}_{\max}", nonnegative=True)
#: Σ_{t≤T} t^{-1/2} (step (j) of (33) before the 2√T bound).
S_T = sp.Symbol("S_T", positive=True)
#: (1/N) Σ_n (1 − p_n)^{3/2} / √p_n (the per-client form of (38)).
H_BAR = sp.Symbol(r"\bar{h}", nonnegative=True)
#: (1/N) Σ_n (1 − p_n) Σ_t √(E[τ_n^t] / t) (the exact-mean form of (38)).
M_BAR = sp.Symbol(r"\bar{m}", nonnegative=True)
#: (1/TN) Σ_t Σ_n (1 − p_n^t) √(τ_n^t / t) (the trace-level first line of (33)).
XI = sp.Symbol(r"\Xi", nonnegative=True)
#: the gradient-generation error ε of (23), as a user number.
EPS = sp.Symbol(r"\epsilon", nonnegative=True)
#: ‖∇f(x_t)‖² in the drift bound (19).
GRAD2 = sp.Symbol(r"\|\nabla f\|^{2}", nonnegative=True)

SYMBOLS = {name: s for name, s in globals().items() if isinstance(s, sp.Symbol)}

# ------------------------------------------------------------------------------ step sizes


def _cap(L_value: float, I_value: int, variant: str, *, half: bool = True) -> Magnitude:
    """1/(2√30·LI) (corrected) or 1/(2√(30LI)) (printed); without the 2 when ``half=False``.
    A :class:`~bounds.core.Magnitude`, exact where float64 over- or underflows."""
    L_value = Magnitude.of(L_value)
    root = float(np.sqrt(30.0)) * L_value * I_value if variant == "corrected" else (30.0 * L_value * I_value).sqrt()
    return 1.0 / ((2.0 if half else 1.0) * root)


def _step_size(c: Constants, variant: str) -> Magnitude:
    return min(1.0 / (Magnitude.of(float(c.local_steps)) * float(c.rounds)).sqrt(), _cap(c.L, c.local_steps, variant))


def step_size(c: Constants, variant: str = "corrected") -> float:
    """Theorem 1's step size η = min{1/√(IT), 1/(2√30·LI)} (Thm 1; restated before (34)).

    ``variant="printed"`` gives the literal min{1/√(IT), 1/(2√(30LI))}. With the corrected
    cap the first branch is active exactly when T ≥ 120·L²·I (derived here). I·T is formed
    in float64 (I and T may be any integers up to 1.8e308).
    """
    check_variant(variant, VARIANTS)
    return float(_step_size(c, variant))


def step_size_conditions(c: Constants, eta: float, variant: str = "corrected"):
    """The three step-size hypotheses of the proof of Thm 1 (App. A.1).

    1. η ≤ 1/(LI) (stated before (16); makes the (1 − LηI) term of (16) non-positive);
    2. η ≤ 1/(√30·LI) (stated after (18), printed 1/√(30LI); unrolls recursion (18) into (19));
    3. η ≤ 1/(2√30·LI) (stated after (21), printed 1/(2√(30LI)); gives the factor 4 of (22)).
    Condition 3 implies 1 and 2 in the corrected variant.
    """
    check_variant(variant, VARIANTS)
    eta = Magnitude.of(positive(eta, "eta") if not isinstance(eta, Magnitude) else eta)
    L_value, I_value = c.L, c.local_steps
    note = "" if variant == "corrected" else ", as printed (the proof needs the corrected cap)"
    return (
        at_most("eta <= 1/(L I)", eta, 1.0 / (Magnitude.of(L_value) * I_value), "App. A.1, hypothesis of (16)"),
        at_most("eta <= 1/(sqrt(30) L I)" if variant == "corrected" else "eta <= 1/sqrt(30 L I)",
                eta, _cap(L_value, I_value, variant, half=False), f"App. A.1, hypothesis of (19){note}"),
        at_most("eta <= 1/(2 sqrt(30) L I)" if variant == "corrected" else "eta <= 1/(2 sqrt(30 L I))",
                eta, _cap(L_value, I_value, variant), f"App. A.1, hypothesis of (22){note}"),
    )


# ------------------------------------------------------------------------------ inputs


def _array(value, name: str, shape: tuple[int, ...], *, low: float = 0.0, high: float = math.inf,
           open_low: bool = False) -> np.ndarray:
    """``value`` (a number or an array) broadcast to ``shape``, every entry finite and in
    [low, high] ((low, high] with ``open_low``); otherwise a ValueError naming the entry."""
    array = _given(value, name, shape, low=low, high=high, open_low=open_low)
    try:
        return np.broadcast_to(array, shape)
    except (ValueError, OverflowError):
        raise ValueError(f"{name}: numpy cannot form an array of shape {shape}") from None


def _given(value, name: str, shape: tuple[int, ...], *, low: float = 0.0, high: float = math.inf,
           open_low: bool = False) -> np.ndarray:
    """``value`` as the array given (not broadcast), checked as :func:`_array` checks it."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {value!r}") from None
    if array.ndim > len(shape) or not all(g in (1, n) for g, n in zip(array.shape[::-1], shape[::-1])):
        raise ValueError(f"{name} must broadcast to shape {shape}, got shape {array.shape}")
    _reject(array, ~np.isfinite(array), f"{name} must be finite")
    if open_low:
        _reject(array, (array <= low) | (array > high), f"{name} must lie in ({low:g}, {high:g}]")
    else:
        _reject(array, (array < low) | (array > high), f"{name} must be ≥ {low:g}")
    return array


def _reject(array: np.ndarray, bad: np.ndarray, message: str) -> None:
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{message}, got {array[where]}" + (f" at index {where}" if where else ""))


def probabilities(p, c: Constants, *, constant_in_time: bool = False) -> np.ndarray:
    """p_n^t as a (T, N) array: ``p`` is a number, per-client (N,) or (T, N); each in (0, 1].

    With ``constant_in_time`` (Theorem 2) ``p`` is a number or (N,), returned as (N,)."""
    shape = (c.n_clients,) if constant_in_time else (c.rounds, c.n_clients)
    return _array(p, "p", shape, high=1.0, open_low=True)


def eps_bar(eps_star, p: np.ndarray) -> float:
    """ε̄* = (1/TN) Σ_t Σ_n (1 − p_n^t) ε*_{n,t} (defined after Thm 1); ``p`` of shape (T, N) or (N,)."""
    eps = _array(eps_star, "eps_star", p.shape)
    with np.errstate(over="ignore"):
        return float(np.mean((1.0 - p) * eps))


def tau_max_bar(tau_max, c: Constants) -> float:
    """τ̄_max = (1/N) Σ_n τ_{n,max}: ``tau_max`` is τ̄_max itself or the per-client (N,) maxima."""
    shape = (c.n_clients,) if np.ndim(tau_max) else ()
    return _mean(_given(tau_max, "tau_max", shape), shape)


# ------------------------------------------------------------------------------ statistics in O(input)


def _dense(shape) -> bool:
    """Whether ``shape`` is small enough (≤ DENSE_LIMIT entries) to be reduced as a broadcast array."""
    return math.prod(shape) <= DENSE_LIMIT


def _as_2d(a: np.ndarray) -> np.ndarray:
    """``a`` (ndim ≤ 2) as (rounds or 1, clients or 1)."""
    return a.reshape((1,) * (2 - a.ndim) + a.shape)


def _mean(given: np.ndarray, shape) -> float:
    """The mean of ``given`` broadcast to ``shape``: over the broadcast up to DENSE_LIMIT entries,
    else over ``given`` itself (broadcasting repeats every entry equally often)."""
    with np.errstate(over="ignore"):
        if _dense(shape):
            return float(np.mean(np.broadcast_to(given, shape)))
        return float(np.mean(given))


def _mean_min_over_rounds(given: np.ndarray, shape) -> float:
    """(1/N) Σ_n min_t of ``given`` broadcast to (T, N) (p̄_min, defined after Thm 1)."""
    if _dense(shape):
        return float(np.broadcast_to(given, shape).min(axis=0).mean())
    return float(_as_2d(given).min(axis=0).mean())


def _weighted_eps_bar(eps: np.ndarray, p: np.ndarray, shape) -> float:
    """ε̄* = mean over (T, N) of (1 − p_n^t) ε*_{n,t}, from the arrays as given.

    Up to DENSE_LIMIT entries it is :func:`eps_bar` on the broadcast arrays. Above, the mean is
    taken over the two arrays broadcast together (each entry of (T, N) repeats one of theirs
    equally often); when that is an outer product (p over rounds only, ε* over clients only)
    the mean factorises into mean(1 − p)·mean(ε*)."""
    if _dense(shape):
        return eps_bar(np.broadcast_to(eps, shape), np.broadcast_to(p, shape))
    p2, e2 = _as_2d(p), _as_2d(eps)
    joint = tuple(max(a, b) for a, b in zip(p2.shape, e2.shape))
    with np.errstate(over="ignore"):
        if math.prod(joint) <= p2.size + e2.size:
            return float(np.mean((1.0 - p2) * e2))
        return float(np.mean(1.0 - p2) * np.mean(e2))


def staleness(x, *, paper_start: bool = True) -> np.ndarray:
    """τ_n^t of a participation mask (T, N) (or a batch (reps, T, N)), same shape.

    τ_n^t = (1 − 𝕀_n^t)(τ_n^{t−1} + 1): rounds since client n's last received upload
    (defined after eq. (5); recursion behind (35)). ``paper_start=True`` counts the
    first round as received by every client, τ_n^1 = 0, as (36) assumes;
    ``False`` puts a virtual full upload before the first round instead.
    """
    last = last_selection(x)
    rounds = np.arange(last.shape[-2])[:, None]
    return rounds - (np.maximum(last, 0) if paper_start else last)


def trace_tau_max_bar(x, *, paper_start: bool = True) -> float:
    """τ̄_max = (1/N) Σ_n max_t τ_n^t of a realised trace (defined after Thm 1); a batch
    (reps, T, N) gives the mean over replicates."""
    return float(staleness(x, paper_start=paper_start).max(axis=-2).mean())


#: Below this p, E[τ^t] is formed as (1 − p)·r_t with r_t = −expm1((t − 1)·log1p(−p))/p:
#: 1 − (1 − p)^{t−1} cancels there (it is 0 in float64 once 1 − p rounds to 1, e.g. p = 1e-17).
_SMALL_P = 1e-3


def _staleness_ratio(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """r_t = (1 − (1 − p)^{t−1})/p without cancellation (≈ t − 1 for tiny p)."""
    with np.errstate(under="ignore"):
        return -np.expm1((t - 1) * np.log1p(-p)) / p


def expected_staleness(p, rounds: int) -> np.ndarray:
    """E[τ_n^t] = (1 − p_n)/p_n · (1 − (1 − p_n)^{t−1}), t = 1..T, shape (T, N) (eq. (36)).

    For p_n < 1e-3 it is evaluated as (1 − p_n)·r_t, r_t = −expm1((t − 1)·log1p(−p_n))/p_n, which
    does not cancel (the printed form gives 0 once 1 − p_n rounds to 1)."""
    p = np.atleast_1d(np.asarray(p, dtype=float))
    t = np.arange(1, rounds + 1)[:, None]
    small = p < _SMALL_P
    with np.errstate(over="ignore", invalid="ignore"):
        direct = (1.0 - p) / p * (1.0 - (1.0 - p) ** (t - 1))
    if not small.any():
        return direct
    return np.where(small, (1.0 - p) * _staleness_ratio(np.where(small, p, 0.5), t), direct)


def _surrogate_variance(c: Constants) -> float:
    return nonnegative(c.require(SURROGATE_KEY), f"extra[{SURROGATE_KEY!r}]")


def _eta(c: Constants, eta, variant: str) -> Magnitude:
    return _step_size(c, variant) if eta is None else Magnitude.of(positive(eta, "eta"))


def _problem_values(c: Constants, eta: float) -> dict:
    return {DELTA: c.delta_f, L: c.L, ETA: eta, I: c.local_steps, T: c.rounds, N: c.n_clients,
            SIGMA1: c.sigma2, SIGMA2: _surrogate_variance(c), SIGMA3: nonnegative(c.require("zeta2"), "zeta2")}


# ------------------------------------------------------------------------------ formulas


def _optimisation_terms() -> dict:
    """The first four terms of (23), with (1/TN²)ΣΣ p_n^t = p̄/N."""
    return {
        "optimization": 4 * DELTA / (ETA * I * T),
        "variance": 2 * L * ETA * (SIGMA1 * P_BAR + SIGMA2 * (1 - P_BAR)) / N,
        "drift_noise": 20 * L**2 * I * ETA**2 * SIGMA1,
        "drift_heterogeneity": 120 * L**2 * I**2 * ETA**2 * SIGMA3,
    }


def _staleness_1() -> sp.Expr:
    """8C₁√(τ̄_max(1 − p̄_min))/√T: step (k) of (33)."""
    return 8 * C1_SYM * sp.sqrt(TAU_MAX * (1 - P_BAR_MIN)) / sp.sqrt(T)


def _staleness_2(variant: str, form: str) -> sp.Expr:
    """The staleness part of (38) in the chosen form and variant."""
    if form == "p_min":
        denominator = sp.sqrt(P_MIN) if variant == "corrected" else P_MIN
        return 8 * C1_SYM * (1 - P_MIN) ** sp.Rational(3, 2) / (sp.sqrt(T) * denominator)
    if form == "per_client":
        prefactor = 8 * C1_SYM / sp.sqrt(T) if variant == "corrected" else 8 * C1_SYM * sp.sqrt(N) / sp.sqrt(T)
        return prefactor * H_BAR
    return 4 * C1_SYM * M_BAR / T


def _generator_staleness(form: str) -> sp.Expr:
    """The C₁ part of (33) in its three successive forms."""
    if form == "trace":
        return 4 * C1_SYM * XI
    if form == "cauchy_schwarz":
        return 4 * C1_SYM * S_T * sp.sqrt(1 - P_BAR_MIN) * sp.sqrt(TAU_MAX) / T
    return _staleness_1()


def _formula(terms: dict) -> Formula:
    expr = sp.Add(*terms.values())
    ordered = sorted(expr.free_symbols, key=lambda s: s.name)
    return Formula(terms, ordered)


@lru_cache(maxsize=None)
def theorem_1_formula() -> Formula:
    """Theorem 1, explicit constants: (23) with (33), derived here."""
    return _formula({**_optimisation_terms(), "generator_floor": 4 * EPS_BAR, "staleness": _staleness_1()})


@lru_cache(maxsize=None)
def theorem_2_formula(variant: str = "corrected", form: str = "p_min") -> Formula:
    """Theorem 2: Theorem 1 with the staleness term of (38)."""
    return _formula({**_optimisation_terms(), "generator_floor": 4 * EPS_BAR,
                     "staleness": _staleness_2(variant, form)})


@lru_cache(maxsize=None)
def _generator_formula(form: str) -> Formula:
    return _formula({"generator_floor": 4 * EPS_BAR, "staleness": _generator_staleness(form)})


@lru_cache(maxsize=None)
def _averaged_formula() -> Formula:
    return _formula({**_optimisation_terms(), "generation_error": EPS})


@lru_cache(maxsize=None)
def _drift_formula() -> Formula:
    return _formula({"noise": 5 * I * ETA**2 * SIGMA1, "heterogeneity": 30 * I**2 * ETA**2 * SIGMA3,
                     "gradient": 30 * I**2 * ETA**2 * GRAD2})


# ------------------------------------------------------------------------------ theorems


def theorem_1(c: Constants, p, tau_max, eps_star, C1: float, *, eta: float | None = None,
              variant: str = "corrected") -> Bound:
    """LOGIT Thm 1, eq. (10) (proof in App. A.1, ending in (34)).

    General time-varying p_n^t. Explicit form of (10), from (23) and (33):

        (1/T)Σ_t E‖∇f(x_t)‖² ≤ 4Δ/(ηIT) + (2Lη/N)(σ₁²p̄ + σ₂²q̄) + 20L²Iη²σ₁²
                               + 120L²I²η²σ₃² + 4ε̄* + 8C₁√(τ̄_max(1 − p̄_min))/√T,

    at η = min{1/√(IT), 1/(2√30·LI)} unless ``eta`` is given (any 0 < η ≤ 1/(2√30·LI)).
    ``p``: p_n^t as a number, (N,) or (T, N); ``tau_max``: τ̄_max or per-client (N,)
    maxima τ_{n,max} (defined after Thm 1; a realised trace gives them via
    :func:`trace_tau_max_bar`); ``eps_star``: ε*_{n,t} ≥ 0; ``C1``: C₁ ≥ 0.
    ``variant``: "corrected" (default) or "printed" step-size cap (module docstring);
    the right-hand side is the same, only η and the conditions change.

    Noted here, not in the paper: equality (b) of (15) (App. A.1) drops the cross terms
    E⟨g_n(x^n_{t,j}) − ∇F_n(x^n_{t,j}), ∇F_n(x^n_{t,i})⟩, j < i, which need not vanish
    (x^n_{t,i} depends on the earlier noise); the usual fix ‖a + b‖² ≤ 2‖a‖² + 2‖b‖²
    would double the variance coefficient and halve the cap of condition 1. The
    constants here are the paper's.
    """
    check_variant(variant, VARIANTS)
    shape = (c.rounds, c.n_clients)
    probs = _given(p, "p", shape, high=1.0, open_low=True)
    eta_value = _eta(c, eta, variant)
    values = {**_problem_values(c, float(eta_value)), P_BAR: _mean(probs, shape),
              P_BAR_MIN: _mean_min_over_rounds(probs, shape),
              EPS_BAR: _weighted_eps_bar(_given(eps_star, "eps_star", shape), probs, shape),
              C1_SYM: nonnegative(C1, "C1"), TAU_MAX: tau_max_bar(tau_max, c)}
    source = Source("LOGIT", "Thm 1", "eq. (10); proof in App. A.1, eq. (34)",
                    "explicit constants from (23) and (33)")
    return make_bound(theorem_1_formula(), values, source, conditions=step_size_conditions(c, eta_value, variant),
                      step_sizes={"eta": step_size(c, variant)}, variant=variant)


def theorem_2(c: Constants, p, eps_star, C1: float, *, eta: float | None = None,
              variant: str = "corrected", staleness: str = "p_min") -> Bound:
    """LOGIT Thm 2, eq. (11) (proof in App. A.2, eqs. (35)–(39)).

    Constant p_n^t = p_n ∈ (0, 1], Bernoulli i.i.d. over rounds. Theorem 1's first five
    terms (with p̄ = (1/N)Σ_n p_n) plus a staleness term from (36)–(38):

    * ``staleness="p_min"`` (the theorem as stated): 8C₁(1 − p_min)^{3/2}/(√T·√p_min);
      ``variant="printed"`` has p_min for √p_min in the denominator ((11), (39));
    * ``"per_client"``: (8C₁/(N√T)) Σ_n (1 − p_n)^{3/2}/√p_n (the line before the last of
      (38), with the prefactor corrected; "printed" keeps 8C₁/√(TN));
    * ``"exact_mean"``: (4C₁/(TN)) Σ_n (1 − p_n) Σ_t √(E[τ_n^t]/t) with E[τ_n^t] from
      (36), before the 2√T step (derived here from (36); corrected variant only).

    In the corrected variant exact_mean ≤ per_client ≤ p_min (E[τ_n^t] ≤ (1 − p_n)/p_n,
    Σ_t t^{-1/2} ≤ 2√T, and h(p) = (1 − p)^{3/2}/√p decreases on (0, 1]). Step size and conditions as in
    :func:`theorem_1`.

    Noted here, not in the paper: step (f) of (17) (App. A.1) takes E[(1 − 𝕀_n^t)·err] =
    (1 − p_n)·E[err], but via (32) the error depends on τ_n^t, which is 0 exactly when
    𝕀_n^t = 1; conditioning on 𝕀_n^t = 0 gives E[τ_n^t | 𝕀_n^t = 0] ≤ 1/p_n and a
    staleness term with (1 − p)/√p, not (1 − p)^{3/2}/√p. This module evaluates (38) as
    the paper derives it.
    """
    check_variant(variant, VARIANTS)
    if staleness not in STALENESS_FORMS:
        raise ValueError(f"staleness must be one of {', '.join(map(repr, STALENESS_FORMS))}, got {staleness!r}")
    if staleness == "exact_mean" and variant == "printed":
        raise ValueError("staleness='exact_mean' has no printed form; use variant='corrected'")
    clients, shape = (c.n_clients,), (c.rounds, c.n_clients)
    probs = _given(p, "p", clients, high=1.0, open_low=True)
    eta_value = _eta(c, eta, variant)
    values = {**_problem_values(c, float(eta_value)), P_BAR: _mean(probs, clients), P_MIN: float(probs.min()),
              EPS_BAR: _weighted_eps_bar(_given(eps_star, "eps_star", shape), probs, shape),
              C1_SYM: nonnegative(C1, "C1")}
    if staleness == "per_client":
        values[H_BAR] = _mean((1 - probs) ** 1.5 / np.sqrt(probs), clients)
    elif staleness == "exact_mean":
        values[M_BAR] = (_exact_mean_factor(np.broadcast_to(probs, clients), c.rounds)
                         if _dense(shape) and c.n_clients <= EXACT_MEAN_LOOP
                         else exact_mean_factor(probs, c.n_clients, c.rounds))
    formula = theorem_2_formula(variant, staleness)
    source = Source("LOGIT", "Thm 2", "eq. (11); proof in App. A.2, eqs. (38)–(39)",
                    f"staleness term from (38), form {staleness!r}")
    return make_bound(formula, {s: values[s] for s in formula.symbols}, source,
                      conditions=step_size_conditions(c, eta_value, variant),
                      step_sizes={"eta": step_size(c, variant)}, variant=variant)


def _root_sum(rounds: int) -> float:
    """Σ_{t≤T} t^{−1/2} (step (j) of (33)): over a (T,) array up to DENSE_LIMIT rounds, else
    the Hurwitz zeta difference of :func:`bounds.core.power_sum`."""
    if rounds <= DENSE_LIMIT:
        return float(np.sum(1 / np.sqrt(np.arange(1, rounds + 1)[:, None])))
    return power_sum(0.5, 1, rounds)


def _exact_mean_factor(probs: np.ndarray, rounds: int) -> float:
    """(1/N) Σ_n (1 − p_n) Σ_{t≤T} √(E[τ_n^t]/t), client by client over (T,) arrays (T·N ≤ DENSE_LIMIT)."""
    root_t = np.sqrt(np.arange(1, rounds + 1))
    total = sum((1 - q) * np.sum(np.sqrt(expected_staleness(q, rounds)[:, 0]) / root_t) for q in probs)
    return float(total / probs.size)


#: Relative accuracy at which exact_mean_sum stops summing (1 − p)^(t−1) explicitly.
_EXACT_MEAN_RTOL = 1e-17
#: Explicit terms each distinct p_n counts for in EXACT_MEAN_BUDGET beyond its own (its fixed cost).
_PER_VALUE_COST = 256


def _explicit_rounds(p: float, rounds: int) -> int:
    """How many leading rounds :func:`exact_mean_sum` sums explicitly for this p: t₁ with
    √2·(1 − p)^{t₁}/p^{3/2} ≤ 1e-17 (the tail bound there), or all T when T ≤ 2t₁."""
    if p >= 1.0:
        return 0
    need = (math.log(_EXACT_MEAN_RTOL) + 1.5 * math.log(p) - 0.5 * math.log(2.0)) / math.log1p(-p)
    return rounds if 2 * (need + 1) >= rounds else max(1, math.ceil(need) + 1)


def exact_mean_sum(p: float, rounds: int, *, root_sum: float | None = None) -> float:
    """Σ_{t=1}^{T} √(E[τ^t]/t) for one client, E[τ^t] = ((1 − p)/p)(1 − (1 − p)^{t−1}) (eq. (36)).

    Derived here: the sum is √((1 − p)/p)·Σ_t t^{−1/2}√(1 − q^{t−1}), q = 1 − p. Its first t₁
    rounds (:func:`_explicit_rounds`) are summed explicitly, in chunks, as √(q·r_t/t) with
    r_t = −expm1((t − 1)·log1p(−p))/p (no cancellation at tiny p). After them
    0 ≤ 1 − √(1 − q^{t−1}) ≤ q^{t−1}, so replacing √(1 − q^{t−1}) by 1 changes the rest by at
    most Σ_{t>t₁} t^{−1/2} q^{t−1} ≤ q^{t₁}/p, below 1e-17 of the sum (its t = 2 term is
    √(p/2)); the rest is then Σ_{t₁<t≤T} t^{−1/2} = H(T) − H(t₁), H(n) = Σ_{t≤n} t^{−1/2}, with
    H(T) a Hurwitz zeta difference (:func:`bounds.core.power_sum`, or ``root_sum``) and H(t₁)
    summed with the head (T > 2t₁ there, so the difference loses no digits). Cost O(t₁),
    independent of T.
    """
    if p >= 1.0:
        return 0.0
    head, chunk, q = _explicit_rounds(p, rounds), 2**20, 1.0 - p
    weighted, plain = [], []
    for start in range(1, head + 1, chunk):
        t = np.arange(start, min(start + chunk, head + 1), dtype=float)
        root = 1.0 / np.sqrt(t)
        weighted.append(float(np.sum(np.sqrt(q * _staleness_ratio(p, t)) * root)))   # √(E[τ^t]/t)
        plain.append(float(np.sum(root)))
    total = math.fsum(weighted)
    if head < rounds:
        total += math.sqrt(q / p) * ((power_sum(0.5, 1, rounds) if root_sum is None else root_sum) - math.fsum(plain))
    return total


def exact_mean_factor(p, n_clients: int, rounds: int) -> float:
    """M̄ = (1/N) Σ_n (1 − p_n) Σ_{t≤T} √(E[τ_n^t]/t) (Theorem 2's "exact_mean" staleness, (38)
    before the 2√T step), over the distinct p_n with their multiplicities: O(Σ t₁), not O(TN).

    ``p`` is a number or (N,). The cost is the explicit terms (:func:`_explicit_rounds`) plus
    256 for each distinct p_n; a ValueError names it when it exceeds EXACT_MEAN_BUDGET."""
    probs = np.asarray(p, dtype=float).reshape(-1)
    if probs.size == 1:
        values, counts = probs, np.array([n_clients])
    else:
        values, counts = np.unique(probs, return_counts=True)
    cost = sum(_explicit_rounds(float(v), rounds) + _PER_VALUE_COST for v in values)
    if cost > EXACT_MEAN_BUDGET:
        raise ValueError(f"staleness='exact_mean' costs {cost} explicit terms at T={rounds} ({values.size} distinct "
                         f"p_n, smallest {values.min():.3g}); the budget is EXACT_MEAN_BUDGET = 2**26; "
                         "use staleness='per_client' (an upper bound on it)")
    root_sum = power_sum(0.5, 1, rounds)
    sums = [(1.0 - float(v)) * exact_mean_sum(float(v), rounds, root_sum=root_sum) for v in values]
    return math.fsum(w / n_clients * x for w, x in zip(counts.tolist(), sums))


# ------------------------------------------------------------------------------ intermediate bounds


def generator_error(c: Constants, p, eps_star, C1: float, *, tau_max=None, tau=None,
                    form: str = "closed") -> Bound:
    """LOGIT eq. (33), gradient-generation error ε (App. A.1).

    Three successively looser forms, each a valid bound on ε of (23):

    * ``"trace"``: 4ε̄* + (4C₁/TN) Σ_t Σ_n (1 − p_n^t) √(τ_n^t/t), from a (T, N) array
      ``tau`` of staleness values (realised, :func:`staleness`, or expected,
      :func:`expected_staleness`);
    * ``"cauchy_schwarz"`` (step (j)): 4ε̄* + (4C₁/T)(Σ_t t^{-1/2})√(1 − p̄_min)√τ̄_max;
    * ``"closed"`` (step (k)): 4ε̄* + 8C₁√(τ̄_max(1 − p̄_min))/√T (Theorem 1's last terms).

    (30)–(32) (Lemma 3 with Assumption 5) give E‖∇F̃_n − ∇F_n‖² ≤ ε*_{n,t} + C₁√(τ_n^t/t).
    ``tau_max`` defaults to (1/N)Σ_n max_t τ_n^t of ``tau`` when ``tau`` is given.
    """
    if form not in GENERATOR_FORMS:
        raise ValueError(f"form must be one of {', '.join(map(repr, GENERATOR_FORMS))}, got {form!r}")
    shape = (c.rounds, c.n_clients)
    given = _given(p, "p", shape, high=1.0, open_low=True)
    if tau is not None:
        if math.prod(shape) > TRACE_BUDGET:
            raise ValueError(f"generator_error reduces tau over T·N = {math.prod(shape)} entries, above "
                             f"TRACE_BUDGET = 2**26; give tau_max (per-client maxima) and form='closed' "
                             "or 'cauchy_schwarz' instead of tau")
        tau = _array(tau, "tau", shape)
        tau_max = tau.max(axis=0) if tau_max is None else tau_max
    if tau_max is None or (form == "trace" and tau is None):
        raise ValueError(f"generator_error(form={form!r}) needs " + ("tau" if form == "trace" else "tau_max or tau"))
    values = {EPS_BAR: _weighted_eps_bar(_given(eps_star, "eps_star", shape), given, shape),
              C1_SYM: nonnegative(C1, "C1"), T: c.rounds,
              P_BAR_MIN: _mean_min_over_rounds(given, shape), TAU_MAX: tau_max_bar(tau_max, c),
              S_T: _root_sum(c.rounds), XI: 0.0}
    if tau is not None:
        t = np.arange(1, c.rounds + 1)[:, None]
        values[XI] = float(np.mean((1 - np.broadcast_to(given, shape)) * np.sqrt(tau / t)))
    formula = _generator_formula(form)
    source = Source("LOGIT", "eq. (33)", "App. A.1, from (30)–(32)", f"form {form!r}")
    return make_bound(formula, {s: values[s] for s in formula.symbols}, source)


def averaged_bound(c: Constants, p, generation_error: float, *, eta: float | None = None,
                   variant: str = "corrected") -> Bound:
    """LOGIT eq. (23), averaged descent with ε as a number (App. A.1).

        (1/T)Σ_t E‖∇f(x_t)‖² ≤ 4Δ/(ηIT) + (2Lη/N)(σ₁²p̄ + σ₂²q̄) + 20L²Iη²σ₁²
                               + 120L²I²η²σ₃² + ε,

    valid for η ≤ 1/(2√30·LI); ε is the generation error (e.g. a measured proxy, or
    :func:`generator_error`'s value). Theorem 1 is this with ε bounded by (33).
    """
    check_variant(variant, VARIANTS)
    shape = (c.rounds, c.n_clients)
    eta_value = _eta(c, eta, variant)
    given = _given(p, "p", shape, high=1.0, open_low=True)
    values = {**_problem_values(c, float(eta_value)), P_BAR: _mean(given, shape),
              EPS: nonnegative(generation_error, "generation_error")}
    source = Source("LOGIT", "eq. (23)", "App. A.1, proof of Thm 1")
    return make_bound(_averaged_formula(), values, source, conditions=step_size_conditions(c, eta_value, variant),
                      step_sizes={"eta": step_size(c, variant)}, variant=variant)


def inequality_23(c: Constants, p, epsilon: float, *, eta: float | None = None,
                  variant: str = "corrected") -> Bound:
    """LOGIT eq. (23) (App. A.1, proof of Thm 1) with the gradient-generation error ε a number.

        (1/T)Σ_t E‖∇f(x_t)‖² ≤ 4Δ/(ηIT) + (2Lη/N)(σ₁²p̄ + σ₂²q̄) + 20L²Iη²σ₁²
                               + 120L²I²η²σ₃² + ε,

    ε = (4/(TNI)) Σ_t Σ_n Σ_{i<I} (1 − p_n^t) E‖∇F̃_n(x^n_{t,i}) − ∇F_n(x^n_{t,i})‖², given
    (e.g. measured along runs), not bounded through Assumption 5: Thms 1 and 2 are this
    inequality with ε bounded by (33) and (38). ``p``: p_n^t as a number, (N,) or (T, N) (only
    p̄ enters); η = min{1/√(IT), 1/(2√30·LI)} unless ``eta`` is given (any 0 < η ≤ 1/(2√30·LI)).
    The value is :func:`averaged_bound`'s, equal to :func:`theorem_1` with C₁ = 0 and
    4ε̄* = ε."""
    return averaged_bound(c, p, epsilon, eta=eta, variant=variant)


def client_drift(c: Constants, eta: float, grad_norm2: float, *, variant: str = "corrected") -> Bound:
    """LOGIT eq. (19), client drift (App. A.1, proof of Thm 1).

        E‖x^n_{t,i} − x_t‖² ≤ 5Iη²(σ₁² + 6Iσ₃²) + 30I²η²‖∇f(x_t)‖²   for every i ≤ I,

    under η ≤ 1/(√30·LI) (printed 1/√(30LI), stated after (18)). The paper prints ‖f(x_t)‖²
    for ‖∇f(x_t)‖² in (19) ((18) and (21) have ‖∇f(x_t)‖²). ``grad_norm2`` is
    ‖∇f(x_t)‖² ≥ 0.
    """
    check_variant(variant, VARIANTS)
    eta_value = positive(eta, "eta")
    values = {ETA: eta_value, I: c.local_steps, SIGMA1: c.sigma2,
              SIGMA3: nonnegative(c.require("zeta2"), "zeta2"), GRAD2: nonnegative(grad_norm2, "grad_norm2")}
    source = Source("LOGIT", "eq. (19)", "App. A.1, from recursion (18)")
    return make_bound(_drift_formula(), values, source,
                      conditions=step_size_conditions(c, eta_value, variant)[1:2], variant=variant)


__all__ = ["theorem_1", "theorem_2", "inequality_23", "generator_error", "averaged_bound", "client_drift", "step_size",
           "step_size_conditions", "probabilities", "eps_bar", "tau_max_bar", "staleness",
           "trace_tau_max_bar", "expected_staleness", "theorem_1_formula", "theorem_2_formula",
           "exact_mean_sum", "exact_mean_factor", "SYMBOLS", "VARIANTS", "STALENESS_FORMS", "GENERATOR_FORMS",
           "SURROGATE_KEY", "DENSE_LIMIT", "EXACT_MEAN_BUDGET", "EXACT_MEAN_LOOP", "TRACE_BUDGET"]
