"""CA-Fed Problem (14): weights that trade Theorem 2's optimisation error against the bias.

``solve_weights`` minimises J(q)/S_T + weight·Γ·D(α, π ⊙̃ q) over {q ≥ 0, ‖q‖₁ = Q}, with D
the χ² of Thm 1 (eq. (11)) or the d_TV² of Thm 3 (eq. (15)), by SLSQP from several starts:
for heterogeneous π the problem is not convex (App. D, Proposition 2 claims it is).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from ..core import count, nonnegative
from ._inputs import _option, _simplex
from .weights import WeightProblem, optimal_weights

@dataclass(frozen=True)
class WeightSolution:
    """Best local minimum of the combined objective over several starts.

    ``q``; ``value`` the objective; ``opt`` = J(q)/S_T and ``bias`` = weight·Γ·divergence
    at q; ``local_values`` the best objective reached from each start (the start itself or a
    projected SLSQP end point; distinct values reveal the non-convexity); ``value`` is their
    minimum.
    """

    q: np.ndarray
    value: float
    opt: float
    bias: float
    local_values: tuple[float, ...]


def _chi2_and_grad(q, pi, alpha):
    """χ²(α, π⊙̃q) = Σ α_k² u/(π_k q_k) − 1 and its gradient, u = πᵀq (all q_k > 0)."""
    u = pi @ q
    R = np.sum(alpha**2 / (pi * q))
    return u * R - 1.0, pi * R - alpha**2 * u / (pi * q**2)


def _chi2_value(q, pi, alpha) -> float:
    """χ²(α, π⊙̃q) = u Σ_{q_k>0} α_k²/(π_k q_k) − 1, u = πᵀq, for any q ≥ 0 (Thm 1, eq. (11)).

    ∞ when some q_k = 0 < α_k; terms with α_k = q_k = 0 count as 0 (as in ``chi2``).
    """
    if np.any((q <= 0) & (alpha > 0)):
        return math.inf
    keep = q > 0
    return float((pi @ q) * np.sum(alpha[keep] ** 2 / (pi[keep] * q[keep])) - 1.0)


def _tv2_and_grad(q, pi, alpha):
    """d_TV²(α, π⊙̃q) and a (sub)gradient: ∂p_k/∂q_j = (π_k δ_kj − p_k π_j)/u."""
    u = pi @ q
    p = pi * q / u
    d = 0.5 * np.abs(p - alpha).sum()
    sign = np.sign(p - alpha)
    return d * d, 2 * d * 0.5 * pi * (sign - sign @ p) / u


def _project(q: np.ndarray, Q: float) -> np.ndarray | None:
    """q clipped to q ≥ 0 and rescaled to ‖q‖₁ = Q; None when nothing positive is left."""
    q = np.clip(np.asarray(q, dtype=float), 0.0, None)
    total = q.sum()
    if not (np.all(np.isfinite(q)) and total > 0):
        return None
    return q * (Q / total)


#: SLSQP passes per start: each restarts from the last end point with the objective rescaled by
#: its value there (SLSQP's ftol is absolute, so a start 1e8 above the optimum stops early).
SLSQP_PASSES = 3


def solve_weights(problem: WeightProblem, *, alpha=None, Gamma: float = 0.0, bias: str = "chi2",
                  bias_weight: float = 1.0, starts: int = 8, seed=0) -> WeightSolution:
    """Minimise J(q)/S_T + bias_weight·Γ·D(α, π⊙̃q) over {q ≥ 0, ‖q‖₁ = Q} (Problem (14)).

    Problem (14) (§III-C), with ε̄_opt = J/S_T (Theorem 2, T1) and
    ε̄_bias = χ²_{α‖p}Γ (``bias="chi2"``, Thm 1) or d_TV²(α, p)Γ' (``bias="tv"``, Thm 3;
    pass Γ' as ``Gamma``). As printed (14) adds the two with weight 1 (default); the total
    error bound (10) weighs the bias by κ² (χ²) or 4κ² (TV) instead (derived here from (10)
    with (11) or (15)) — pass ``bias_weight``. Γ' depends on q through w_B*; it is held fixed here.

    Non-convexity: the paper claims (14) is convex (Appendix D, Proposition 2),
    but its proof needs πᵀq constant on the domain while only ‖q‖₁ is: χ²(π⊙̃q) is not
    convex on the simplex for heterogeneous π (found here; a counterexample is in the
    tests), and the TV version is non-smooth and non-convex too (§III-C, after Thm 3). So SLSQP is run
    from several starts — the KKT optimum of J alone, uniform, unbiased q ∝ α/π, and
    ``starts`` random Dirichlet points (``seed``) — and the best point is kept.
    With Γ = 0 (or weight 0) the problem is (212) and agrees with ``optimal_weights``.

    Safeguards: every start is scored itself, and every SLSQP end point is projected back
    onto {q ≥ 0, ‖q‖₁ = Q} (clip, rescale) and scored there whether or not SLSQP reports
    success; the best finite value seen wins, so the result is never worse than any start.
    SLSQP minimises the objective divided by its value at the current start (its ``ftol``
    is absolute) and restarts from its end point with the new value as scale, up to
    ``SLSQP_PASSES`` times. ``local_values`` holds, per start, the best value reached from it.
    """
    _option(bias, "bias", ("chi2", "tv"))
    pi, Q, n = problem.pi, problem.Q, problem.pi.size
    alpha = np.full(n, 1.0 / n) if alpha is None else _simplex(alpha, n=n)
    Gamma, weight = nonnegative(Gamma, "Gamma"), nonnegative(bias_weight, "bias_weight")
    starts = count(starts, "starts", minimum=0)
    coef = weight * Gamma
    interior = bias == "chi2" and coef > 0
    divergence = _chi2_and_grad if bias == "chi2" else _tv2_and_grad

    def parts(q):
        opt = problem.J(q) / problem.S_T
        if coef == 0:
            return opt, 0.0
        return opt, coef * (_chi2_value(q, pi, alpha) if bias == "chi2" else divergence(q, pi, alpha)[0])

    def fun(q):
        value = sum(parts(q))
        return value if math.isfinite(value) else math.inf

    def jac(q):
        g = problem.grad_J(q) / problem.S_T
        return g + coef * divergence(q, pi, alpha)[1] if coef > 0 else g

    rng = np.random.default_rng(seed)
    kkt = optimal_weights(problem).q
    uniform = np.full(n, Q / n)
    candidates = [kkt, uniform, Q * (alpha / pi) / np.sum(alpha / pi)] + [Q * rng.dirichlet(np.ones(n))
                                                                       for _ in range(starts)]
    lower = 1e-9 * Q if interior else 0.0
    bounds = [(lower, Q)] * n
    constraint = {"type": "eq", "fun": lambda q: q.sum() - Q, "jac": lambda q: np.ones(n)}
    best_value, best_q, local_values = math.inf, None, []

    for candidate in candidates:
        seen = []  # (value, q) of every feasible point reached from this start

        def score(q):
            q = _project(q, Q)
            if q is not None:
                value = fun(q)
                if math.isfinite(value):
                    seen.append((value, q))
            return q

        score(candidate)
        x0 = candidate
        if np.any(x0 < lower) or not math.isfinite(fun(x0)):
            x0 = np.clip(0.98 * x0 + 0.02 * uniform if interior else x0, lower, Q)  # off the χ² pole
            score(x0)
        for _ in range(SLSQP_PASSES):
            scale = fun(x0)
            if not (math.isfinite(scale) and scale > 0):
                break
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                res = optimize.minimize(lambda q: fun(q) / scale, x0, jac=lambda q: jac(q) / scale, method="SLSQP",
                                        bounds=bounds, constraints=[constraint],
                                        options={"maxiter": 500, "ftol": 1e-14})
            x = score(res.x)
            if x is None or not fun(x) < scale * (1 - 1e-12):
                break  # no progress: a further rescaled pass would start from the same point
            x0 = np.clip(x, lower, Q)
        if seen:
            value, q = min(seen, key=lambda r: r[0])
            local_values.append(value)
            if value < best_value:
                best_value, best_q = value, q
        else:
            local_values.append(math.inf)
    if best_q is None:
        raise ValueError("no start of solve_weights reached a point with a finite objective")
    opt, b = parts(best_q)
    return WeightSolution(best_q, float(best_value), float(opt), float(b), tuple(float(v) for v in local_values))
