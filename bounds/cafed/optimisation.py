"""CA-Fed Theorem 2: optimisation error of FedAvg with weights q under Markov availability.

``theorem_2`` evaluates the right-hand side of eq. (13) with the constants (176)–(179)
(App. B3) as one sympy ``Formula`` of named terms. ``_theorem_2_inputs`` validates the
inputs and computes the value of every symbol that does not depend on q; Problem (212)
(:mod:`bounds.cafed.weights`) is built from the same values and formula.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..core import (Bound, Condition, Constants, Formula, Magnitude, at_most, check_variant, count, make_bound,
                    nonnegative, positive)
from ._inputs import _availability, _lookup, _nonneg_vector, _option, _require, _source, _weights
from .bias import _Gam, _L  # the symbols L and Γ of Theorems 1 and 3
from .mixing import Mixing, _chain, _chain_pi, mixing_quantities
from .step_sums import _Schedule, _square, _step_sums, _Steps

#: Theorem 2 variants: coefficient of L(1+EQ)Γ in ψ (printed 4, eq. (178); 8 derived here from
#: the recursion (122) in the proof of Lemma 11, see ``theorem_2``).
THEOREM_2_VARIANTS = {"corrected": 8, "printed": 4}


(_E, _Q, _Pi, _V, _S2, _Z2, _ST, _diam, _lnM, _Phi, _ell, _Jsum, _pre, _G, _D, _H) = sp.symbols(
    "E Q Pi V S_2 Z_2 S_T diam ln_M Phi ell J_sum eta_pre G D H", nonnegative=True)
_THM2_SYMBOLS = (_E, _L, _Gam, _G, _D, _H, _Q, _Pi, _V, _S2, _Z2, _ST, _diam, _lnM, _Phi, _ell, _Jsum, _pre)


@functools.lru_cache(maxsize=None)
def _theorem_2_formula(gamma_coef: int, correlation: str, log_space: bool) -> Formula:
    """The right-hand side of (13) as named terms (see ``theorem_2``)."""
    if correlation == "log":
        corr = 2 * _E * _D * _G * _Q * _Phi / (_ell * _ST)
    else:
        corr = 2 * _E * _D * _G * _Q * _Jsum / _ST
    terms = {
        "variance": (_E + 1) * _S2 * _V / (_Pi * _ST),                       # ½qᵀΣq / πᵀq
        "initial distance": 2 * _diam**2 / (_E * _Pi * _ST),                  # υ, first part
        "state space": sp.exp(_lnM) * _Q * (_S2 + _Z2) / (4 * _Pi * _ST),     # υ, MQ/4 part
        "heterogeneity": gamma_coef * _L * (1 + _E * _Q) * _Gam * _S2 / _ST,  # ψ
        "client drift": 2 * _E**2 * _G**2 * _S2 / _ST,                       # ψ
        "burn-in": _H * _pre / _ST,                                          # ψ
        "correlation": corr,                                                 # φ / ln(1/λ(P))
    }
    return Formula(terms, _THM2_SYMBOLS, log_space=log_space)


@dataclass(frozen=True)
class _Thm2Inputs:
    values: dict
    conditions: list
    mixing: Mixing
    steps: _Steps
    pi: np.ndarray
    sigma2: np.ndarray
    eta_max: float


def _theorem_2_inputs(q, constants, *, eta, P, chains, pi, sigma2, Gamma, D, G, H, diam, T, decay, eta0,
                      horizon, reduced, Q=None) -> _Thm2Inputs:
    """Validate Theorem 2's inputs and compute every symbol's value except the q-dependent ones."""
    _option(horizon, "horizon", ("infinite", "finite"))
    T = constants.rounds if T is None else count(T, "T")
    E = constants.local_steps
    pi_given = None if pi is None else _availability(pi)
    n = pi_given.size if pi_given is not None else None
    if q is not None:
        q = _weights(q, n)
        n = q.size
    keep = (q > 0) if (reduced and q is not None) else None
    if reduced and q is None:
        raise ValueError("reduced=True needs the weights q (the chain keeps the clients with q_k > 0)")
    D_ = _lookup("D", D, constants)
    diam_ = _lookup("diam", diam, constants, nonnegative)
    if D_ is None and diam_ is not None:
        D_ = constants.L * diam_  # [derived] D ≤ L·diam(W) when every w_k* ∈ W (42)
        if not math.isfinite(D_):
            raise ValueError(f"D = L*diam = {constants.L!r}*{diam_!r} overflows float64; pass D=...")
    if D_ is None:
        raise ValueError("this bound needs D: pass D=... (or diam=..., giving D = L*diam) "
                         "or Constants(extra={'D': ...})")
    if diam_ is None:
        raise ValueError("this bound needs diam: pass diam=... or Constants(extra={'diam': ...})")
    H_ = _lookup("H", H, constants)
    if H_ is None:
        H_ = D_ * diam_  # [derived] Lemma 12: |F_k(w) − F_k(w_B*)| ≤ D‖w − w_B*‖ ≤ D·diam(W)
        if H_ <= 0:
            raise ValueError("H = D*diam is 0; pass H=... > 0")
        if not math.isfinite(H_):
            raise ValueError(f"H = D*diam = {D_!r}*{diam_!r} overflows float64; pass H=...")
    Gamma_ = _require("Gamma", Gamma, constants, nonnegative)
    mix = mixing_quantities(P, chains=chains, H=H_, T=T, keep=keep)
    chain_pi = _chain_pi(mix.chain if keep is None else _chain(P, chains))
    if pi_given is None:
        if chain_pi is None:
            raise ValueError("pi is needed: the client availabilities cannot be read off a general matrix P")
        pi_ = chain_pi
    else:
        pi_ = pi_given
        if chain_pi is not None and (chain_pi.size != pi_.size or not np.allclose(chain_pi, pi_, atol=1e-9)):
            raise ValueError("pi does not match the stationary availabilities of the given chains")
    n = pi_.size
    if q is not None and q.size != n:
        raise ValueError(f"q has {q.size} entries, expected {n} (one per client)")
    sig = _nonneg_vector(constants.sigma2 if sigma2 is None else sigma2, "sigma2", n)
    G_ = _lookup("G", G, constants)
    if G_ is None and constants.G2 is not None:
        G_ = math.sqrt(constants.G2)
    if G_ is None:
        G_ = math.sqrt(_square(D_) + float(sig.max()))  # Lemma 1, eq. (43): G² = D² + max_k σ_k²
        if not math.isfinite(G_):
            G_ = math.hypot(D_, math.sqrt(float(sig.max())))  # the same G where D² overflows float64
    schedule = _Schedule(eta, decay, eta0, T)
    steps = _step_sums(schedule, T, mix, H_, horizon)
    Qv = float(q.sum()) if q is not None else positive(Q, "Q")
    eta_max = 1.0 / (2 * Magnitude.of(constants.L) * (1 + 2 * E * Qv))  # exact where float64 underflows
    conditions = [
        at_most("(12) η_1 ≤ 1/(2L(1+2EQ))", Magnitude.of(schedule.eta1), eta_max),
        at_most("T_P ≤ T", mix.tp, T),
        Condition("(12) diminishing steps (non-increasing; a ∈ (1/2, 1] for η_1 t^-a)",
                  steps.monotone and (schedule.decay is None or 0.5 < schedule.decay <= 1),
                  float(schedule.decay) if schedule.decay is not None else 0.0, 1.0),
    ]
    values = {_E: E, _L: constants.L, _Gam: Gamma_, _G: G_, _D: D_, _H: H_, _Q: Qv, _S2: steps.S2, _Z2: steps.Z2,
              _ST: steps.S_T, _diam: diam_, _lnM: mix.log_M, _Phi: steps.Phi, _ell: -math.log(mix.lam_P),
              _Jsum: steps.Jsum, _pre: steps.pre}
    return _Thm2Inputs(values, conditions, mix, steps, pi_, sig, float(eta_max))


def theorem_2(q, constants: Constants, *, eta, P=None, chains=None, pi=None, sigma2=None, Gamma=None, D=None,
              G=None, H=None, diam=None, T=None, decay=1.0, eta0=None, variant: str = "corrected",
              correlation: str = "log", horizon: str = "infinite", reduced: bool = False,
              log_space: bool = True) -> Bound:
    """CA-Fed Thm 2 (statement in App. B3: eq. (13), constants (176)–(179); main-text statement in §III-B).

    Optimisation error of FedAvg with weights q under Markov availability (A1–A3, A5,
    convex F_k, step sizes (12), T ≥ T_P)::

        E[F_B(w̄_T) − F_B*] ≤ (1/S_T) [ (½qᵀΣq + υ)/πᵀq + ψ + φ/ln(1/λ(P)) ]          (13)

        ½qᵀΣq = (E+1) S₂ Σ_k π_k σ_k² q_k²                                        (176)
        υ = (2/E) diam(W)² + (MQ/4)(S₂ + Σ 1/t²)                                 (177)
        ψ = (c·L(1+EQ)Γ + 2E²G²) S₂ + H Σ_{t<T_P} η_t                           (178)
        φ = 2EDGQ Σ_t ln(2C_P H t) η²_{t−𝒥_t}                                   (179)

    with S_T = Σ_{t≤T} η_t, S₂ = Σ_t η_t², Q = ‖q‖₁, E = ``constants.local_steps``,
    T = ``T`` or ``constants.rounds``. Terms: "variance", "initial distance", "state space"
    (the M = 2^N term), "heterogeneity", "client drift", "burn-in", "correlation".

    Decisions made here, each checked against the paper (tags T1, T2, T3, T5 as in the Bound's ``note``):

    * the division by S_T is always applied: the appendix statement of (13) (App. B3), (207)
      (App. E) and the last step of the proof of Thm 2 (dividing (186)–(187)) have it; the
      main-text copy of (13) (§III-B) drops it (T1);
    * ``variant="corrected"`` (default): c = 8. The recursion (122) (proof of Lemma 11) carries
      4η_t²LE(1+EQ)ΓΠ; dividing by ½η_tE (as done for the (E+1) and 2E²G² terms) gives
      8L(1+EQ)Γ, while (123)–(183) and the main text print 4 (T2; re-derived from the proof).
      ``variant="printed"``: c = 4 as printed. The two differ only in "heterogeneity" (×2);
    * ``correlation="log"`` (default): φ/ln(1/λ(P)) as in (13); ``"J"``: the quantity the
      proof actually bounds at (141), 2EDGQ Σ_t 𝒥_t η²_{t−𝒥_t} (the form of (211)). Usually
      smaller, but not always: (142) replaces 𝒥_t by ln(2C_P H t)/ln(1/λ(P)), which the
      ceiling of (132) can exceed, so with small 2C_P H the J-form is larger (e.g. ×1.25 at
      λ = 0.2, H = 0.01) and (211)'s "=" is not an identity. The log form is the paper's;
    * ``horizon="infinite"`` (default, as printed): Σ_t to ∞ (S₂ = η_1² ζ(2a), Σ1/t² = π²/6,
      not π/6 as the end of the proof of Lemma 18 prints, T3; Φ and the 𝒥-sum summed to
      t0 ≥ 2^16 plus a closed-form upper bound on the tail); ``"finite"``: all sums to T
      (valid: the proof only sums to T, (123), (141), (173)), the only choice for constant or
      explicit step sizes;
    * η_0 := η_1 (``eta0`` may set any η_0 ≥ η_1) since 𝒥_t = t needs η_0 (T5);
    * ln(2C_P H t) < 0 terms of Φ are clamped to 0; 𝒥_t follows (132) literally
      (``participation.markov.mixing_lag``);
    * ``reduced=True`` uses P' = ⊗_{q_k>0} P_k (§III-D; product chains only); default P.

    Step sizes: ``eta`` = η_1 with η_t = η_1 t^(−decay) (decay ∈ (1/2, 1] for (12)), or an
    array η_1..η_T (finite horizon). The chain: ``P`` (matrix / stack / ProductChain; give
    ``pi``) or ``chains=(pi, lam)`` (two-state clients, π read from them). D, G, H, Γ,
    diam(W) come from keywords or ``constants.extra``; D defaults to L·diam(W), G to
    √(D² + max σ_k²) (43), H to D·diam(W) (Lemma 12) — choices derived here (proof of Lemma 1,
    eqs. (42)–(43); Lemma 12, eq. (125)).
    σ_k² is ``sigma2`` (per client) or ``constants.sigma2``.

    Log space (default ``log_space=True``): M = 2^N and C_P ~ √(2^N) overflow floats for
    large N, so every term is evaluated as a logarithm (ln M and ln C_P are exact inputs)
    and combined by log-sum-exp; ``value`` may be inf while ``log_value`` stays finite.
    ``conditions``: η_1 ≤ 1/(2L(1+2EQ)), T_P ≤ T, diminishing steps; ``step_sizes``
    reports η_1 and its maximum.
    """
    gamma_coef = THEOREM_2_VARIANTS[check_variant(variant, tuple(THEOREM_2_VARIANTS))]
    _option(correlation, "correlation", ("log", "J"))
    inputs = _theorem_2_inputs(q, constants, eta=eta, P=P, chains=chains, pi=pi, sigma2=sigma2, Gamma=Gamma, D=D,
                               G=G, H=H, diam=diam, T=T, decay=decay, eta0=eta0, horizon=horizon,
                               reduced=reduced)
    q = np.asarray(q, dtype=float)
    pi = inputs.pi
    values = dict(inputs.values)
    with np.errstate(over="ignore"):
        values[_Pi] = float(pi @ q)
        values[_V] = float(np.sum(pi * inputs.sigma2 * q**2))
    note = (f"c = {gamma_coef} in ψ (T2); 1/S_T applied (T1); correlation={correlation}; horizon={horizon}; "
            f"η_0 = {'η_1' if eta0 is None else eta0}" + ("; reduced chain" if reduced else ""))
    return make_bound(_theorem_2_formula(gamma_coef, correlation, bool(log_space)), values,
                      _source("Thm 2", "eq. (13) with (176)–(179), App. B3", note), conditions=inputs.conditions,
                      step_sizes={"eta_1": inputs.steps.eta1, "eta_1_max": inputs.eta_max}, variant=variant)
