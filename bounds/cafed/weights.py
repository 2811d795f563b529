"""CA-Fed Problem (212): the aggregation weights that minimise Theorem 2's bound (App. E).

``weight_problem`` reads A, B, C and S_T of J(q) = (½qᵀAq + B)/πᵀq + C (eqs. (208)–(212))
off Theorem 2's formula; ``optimal_weights`` solves (212) in closed form from its KKT
conditions (eqs. (215)–(227)), in a centred form that stays accurate when B holds M = 2^N.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core import Constants, check_variant, nonnegative, positive
from ._inputs import _availability, _first, _option, _vector
from .optimisation import THEOREM_2_VARIANTS, _Pi, _ST, _V, _theorem_2_formula, _theorem_2_inputs

@dataclass(frozen=True)
class WeightProblem:
    """Problem (212): min_q J(q) = (½qᵀAq + B)/πᵀq + C s.t. q ≥ 0, ‖q‖₁ = Q.

    Appendix E, eqs. (208)–(212): A = Σ = diag(A_kk) (209), B = υ (210), C = ψ + φ/ln(1/λ(P))
    (211). ``S_T`` divides J to give Theorem 2's bound, J(q)/S_T (needed when J is added
    to a bias term, T1). ``A`` is the diagonal as a vector; every A_kk must be > 0.
    """

    pi: np.ndarray
    A: np.ndarray
    B: float
    C: float = 0.0
    Q: float = 1.0
    S_T: float = 1.0

    def __post_init__(self):
        pi = _availability(self.pi)
        A = _vector(self.A, "A", pi.size)
        if (A <= 0).any():
            i = _first(A <= 0)
            raise ValueError(f"A[{i}] = {A[i]} must be > 0 (it is 2(E+1) pi_k sigma_k^2 S_2; sigma_k^2 > 0 needed)")
        object.__setattr__(self, "pi", pi)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "B", positive(self.B, "B"))
        object.__setattr__(self, "C", nonnegative(self.C, "C"))
        object.__setattr__(self, "Q", positive(self.Q, "Q"))
        object.__setattr__(self, "S_T", positive(self.S_T, "S_T"))

    def J(self, q) -> float:
        """J(q) of (212a)."""
        q = np.asarray(q, dtype=float)
        return float((0.5 * np.sum(self.A * q**2) + self.B) / (self.pi @ q) + self.C)

    def grad_J(self, q) -> np.ndarray:
        """∇J(q) = Aq/u − (½qᵀAq + B)π/u², u = πᵀq."""
        q = np.asarray(q, dtype=float)
        u = self.pi @ q
        return self.A * q / u - (0.5 * np.sum(self.A * q**2) + self.B) * self.pi / u**2


def weight_problem(Q, constants: Constants, *, eta, P=None, chains=None, pi=None, sigma2=None, Gamma=None, D=None,
                   G=None, H=None, diam=None, T=None, decay=1.0, eta0=None, variant: str = "corrected",
                   correlation: str = "log", horizon: str = "infinite") -> WeightProblem:
    """Problem (212) for total weight Q, with Theorem 2's constants (same keywords and variants).

    A_kk = 2(E+1)π_k σ_k² S₂, B = υ, C = ψ + φ/ln(1/λ(P)) (or the 𝒥-form, (211)), and
    S_T. They are read off Theorem 2's one sympy definition (evaluated at πᵀq = 1, S_T = 1),
    so J(q)/S_T equals ``theorem_2(q, ...).value`` for every q with ‖q‖₁ = Q. As in the
    Remark after (212) (App. E) the chain is not reduced when clients are excluded (C constant).
    B holds M = 2^N as a float: beyond about N = 1000 clients it overflows (ValueError).
    """
    gamma_coef = THEOREM_2_VARIANTS[check_variant(variant, tuple(THEOREM_2_VARIANTS))]
    _option(correlation, "correlation", ("log", "J"))
    Q = positive(Q, "Q")
    inputs = _theorem_2_inputs(None, constants, eta=eta, P=P, chains=chains, pi=pi, sigma2=sigma2, Gamma=Gamma,
                               D=D, G=G, H=H, diam=diam, T=T, decay=decay, eta0=eta0, horizon=horizon,
                               reduced=False, Q=Q)
    values = dict(inputs.values)
    values.update({_Pi: 1.0, _V: 1.0, _ST: 1.0})
    _, terms, _ = _theorem_2_formula(gamma_coef, correlation, False).evaluate(values)
    B = terms["initial distance"] + terms["state space"]
    if not math.isfinite(B):
        raise ValueError("B = upsilon overflows a float (M = 2^N too large); Problem (212) is vacuous here")
    C = terms["heterogeneity"] + terms["client drift"] + terms["burn-in"] + terms["correlation"]
    A = 2 * terms["variance"] * inputs.pi * inputs.sigma2
    return WeightProblem(inputs.pi, A, B, C, Q, inputs.steps.S_T)


@dataclass(frozen=True)
class KKTSolution:
    """Closed-form optimum of (212): q* and the multipliers of (215).

    q_k* = (ι*π_k − θ*)/A_kk on the support, 0 elsewhere (224); ``value`` = J(q*) = ι* + C;
    ``bound`` = value/S_T (Theorem 2 at q*); ``support`` a boolean mask.
    """

    q: np.ndarray
    iota: float
    theta: float
    support: np.ndarray
    value: float
    bound: float


#: ``optimal_weights`` checks ‖q*‖₁ = Q and J(q*) = ι* + C to this relative tolerance.
KKT_RTOL = 1e-9


def _kkt_candidate(pi: np.ndarray, w: np.ndarray, B: float, Q: float, S: np.ndarray):
    """(ι, θ, r, scale) of the KKT system of (212) on support S (a boolean mask), centred form.

    With w_k = 1/A_kk, a = Σ_S w_k, b = Σ_S π_k w_k, π̄ = b/a and V = Σ_S w_k(π_k − π̄)² (all
    sums of non-negative terms), q_k = r_k/A_kk (224), ‖q‖₁ = Q (226) and ∂𝓛/∂s = 0, i.e.
    ι πᵀq = ½qᵀAq + B (App. E2–E3, eqs. (215)–(227)), reduce to

        r_k := ι π_k − θ = Q/a + ι(π_k − π̄),     aV·ι² + 2Qb·ι − (Q² + 2aB) = 0.

    The quadratic has one positive root, ι = R²/(Qb + √(Q²b² + aV R²)) with R² = Q² + 2aB
    (no cancellation; R and the square root are formed with ``hypot``, so 2aB cannot
    overflow). π_k − π̄ is taken as (π_k − π_max) − (π̄ − π_max), differences of nearby
    numbers, so its error scales with the spread of π, not with π. θ = ιπ̄ − Q/a; ``scale``
    is Q/a + ι|π_k − π̄|, the size of the terms in r_k. None when ι overflows a float.
    """
    d = pi - pi.max()                                  # ≤ 0; exact when π_k is near π_max
    a = math.fsum(w[S])
    b = math.fsum(pi[S] * w[S])
    dbar = math.fsum(d[S] * w[S]) / a
    dev = d - dbar                                     # π_k − π̄
    V = math.fsum(w[S] * dev[S] ** 2)
    R = math.hypot(Q, math.sqrt(2 * a) * math.sqrt(B))
    iota = R * (R / (Q * b + math.hypot(Q * b, math.sqrt(a * V) * R)))
    if not (math.isfinite(iota) and iota > 0):
        return None  # ι* ≥ J(q*) − C overflows a float
    r = Q / a + iota * dev
    theta = iota * (pi.max() + dbar) - Q / a
    scale = Q / a + iota * np.abs(dev)                 # size of the terms summed in r_k
    return iota, theta, r, scale


def optimal_weights(problem: WeightProblem) -> KKTSolution:
    """Closed-form KKT solution of Problem (212) (App. E, eqs. (212)–(227); the closed form is derived here).

    J is convex on {q ≥ 0, πᵀq > 0} (quadratic-over-linear plus B/πᵀq), so the KKT point is
    the global minimum. From (224), q_k* = (ι*π_k − θ*)/A_kk where positive, so the support
    is S = {k : π_k > θ*/ι*}, a top-m set by π (all clients when θ* ≤ 0). For each candidate
    S, with a = Σ_S 1/A_kk, b = Σ_S π_k/A_kk, c = Σ_S π_k²/A_kk, the constraint ‖q‖₁ = Q
    (226) and ∂𝓛/∂s = 0 (i.e. ι*πᵀq = ½qᵀAq + B) give

        ι = (Q + θa)/b,     a(ac − b²)θ² + 2Qac·θ + (cQ² − 2Bb²) = 0,

    (linear when π is constant on S). The root kept has q_S > 0, ι > 0 and ι π_k ≤ θ off S
    (dual feasibility); then J(q*) = ι* + C. The paper stops at (227), which still contains
    s*; this closes it. Note q_k* = (ι* − θ*/π_k)/(2(E+1)σ_k²S₂) grows with π_k only when
    θ* > 0 (Guideline A, §III-D, holds only then: its q_k* = a(ι*π_k − θ*) drops the π_k in
    A_kk; derived here).

    Numerics: the θ-form above cancels catastrophically when B is large (B = υ holds
    M = 2^N, ~1e29 at N = 100, and θ ≈ ιπ_max ~ B), so it is evaluated in the equivalent
    centred form, with π̄ = b/a, V = Σ_S (π_k − π̄)²/A_kk (so ac − b² = aV)::

        aV·ι² + 2Qb·ι − (Q² + 2aB) = 0 (positive root),   q_k = (Q/a + ι(π_k − π̄))/A_kk on S,

    which satisfies Σ_S q_k = Q identically and subtracts no large nearly-equal numbers
    (``_kkt_candidate``). The result is checked: ‖q*‖₁ = Q and J(q*) = ι* + C to a relative
    ``KKT_RTOL``; a ValueError is raised when no candidate support passes.
    """
    pi, A, B, Q = problem.pi, problem.A, problem.B, problem.Q
    w = 1.0 / A
    order = np.argsort(-pi, kind="stable")
    ranked = pi[order]
    best, overflow = None, False
    for m in range(1, pi.size + 1):
        if m < pi.size and ranked[m - 1] == ranked[m]:
            continue  # equal availabilities are in or out together
        S = np.zeros(pi.size, dtype=bool)
        S[order[:m]] = True
        candidate = _kkt_candidate(pi, w, B, Q, S)
        if candidate is None:
            overflow = True
            continue
        iota, theta, r, scale = candidate
        tol = 1e-9 * scale
        if np.any(r[S] < -tol[S]) or np.any(r[~S] > tol[~S]):
            continue  # primal (q_S ≥ 0) or dual (ιπ_k ≤ θ off S) feasibility fails
        q = np.where(S, np.maximum(r, 0.0) * w, 0.0)
        total = math.fsum(q)
        if not (total > 0 and abs(total - Q) <= KKT_RTOL * Q):
            continue
        value = problem.J(q)
        if not (math.isfinite(value) and abs(value - (iota + problem.C)) <= KKT_RTOL * (iota + problem.C)):
            continue
        if best is None or value < best[0]:
            best = (value, q, iota, theta)
    if best is None and overflow:
        raise ValueError(f"the optimum of Problem (212) overflows a float (iota* = J(q*) - C > 1.8e308 with "
                         f"B = {B!r}); the bound is vacuous here")
    if best is None:
        raise ValueError(f"no KKT point of Problem (212) satisfies ||q||_1 = Q = {Q!r} and J(q) = iota + C to "
                         f"relative {KKT_RTOL:g}; the inputs (B = {B!r}) may be numerically degenerate")
    value, q, iota, theta = best
    return KKTSolution(q, float(iota), float(theta), q > 0, value, value / problem.S_T)
