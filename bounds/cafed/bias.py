"""CA-Fed Theorems 1 and 3: the bias error of aggregation weights q.

With q the server optimises F_B, whose importance is the biased p = π ⊙̃ q (eq. (4)), not the
target α. ``chi2`` (χ²_{α‖p}, Thm 1, eq. (11)) and ``tv`` (d_TV(α, p), Thm 3, eq. (15)) measure
the distance; ``theorem_1`` bounds ε_bias by κ²χ²Γ (11) and, given ε_opt, the total error (10);
``theorem_3`` bounds ε_bias by 4κ²d_TV²Γ' (15).
"""
from __future__ import annotations

import functools
import math

import numpy as np
import sympy as sp

from ..core import Bound, Constants, Formula, at_most, make_bound, nonnegative
from ._inputs import _availability, _require, _simplex, _source, _weights

# ------------------------------------------------------------------------------ divergences
def biased_importance(pi, q) -> np.ndarray:
    """p = π ⊙̃ q, p_k = π_k q_k / Σ_h π_h q_h (eq. (4); ⊙̃ as defined after eq. (20))."""
    pi = _availability(pi)
    q = _weights(q, pi.size)
    return pi * q / (pi @ q)


def chi2(alpha, p) -> float:
    """χ²_{α‖p} = Σ_k (α_k − p_k)²/p_k (Thm 1, eq. (11)); ∞ if some p_k = 0 < α_k.

    Terms with α_k = p_k = 0 count as 0.
    """
    alpha, p = np.asarray(alpha, float), np.asarray(p, float)
    if np.any((p == 0) & (alpha > 0)):
        return math.inf
    keep = p > 0
    return float(np.sum((alpha[keep] - p[keep]) ** 2 / p[keep]))


def tv(alpha, p) -> float:
    """d_TV(α, p) = ½ Σ_k |α_k − p_k| (Thm 3, defined after eq. (15))."""
    return float(0.5 * np.abs(np.asarray(alpha, float) - np.asarray(p, float)).sum())


# ------------------------------------------------------------------------------ Theorems 1 and 3
_L, _mu, _div, _Gam, _eps = sp.symbols("L mu d Gamma epsilon_opt", nonnegative=True)


@functools.lru_cache(maxsize=None)
def _bias_formula(factor: int, total: bool) -> Formula:
    """factor·κ²·d·Γ (alone, or inside 2κ²(ε_opt + ·)) with κ = L/μ."""
    kappa2 = (_L / _mu) ** 2
    bias = factor * kappa2 * _div * _Gam
    if not total:
        return Formula({"bias": bias}, (_L, _mu, _div, _Gam))
    return Formula({"optimisation": 2 * kappa2 * _eps, "bias": 2 * kappa2 * bias}, (_L, _mu, _div, _Gam, _eps))


def _eps_opt(eps_opt) -> float:
    if isinstance(eps_opt, Bound):
        return eps_opt.value
    return nonnegative(eps_opt, "eps_opt")


def _bias_bound(alpha, q, pi, constants, mu, gamma, eps_opt, *, factor, divergence, gamma_name, item, where):
    pi = _availability(pi)
    alpha = _simplex(alpha, n=pi.size)
    p = biased_importance(pi, _weights(q, pi.size))
    mu = _require("mu", mu, constants)
    gamma = _require(gamma_name, gamma, constants, nonnegative)
    d = divergence(alpha, p)
    if gamma == 0 and math.isinf(d):
        d = 0.0  # Γ = 0: every F_k is minimised at w* = w_B*, so ε_bias = 0 (§III-A, after eq. (9))
    total = eps_opt is not None
    values = {_L: constants.L, _mu: mu, _div: d, _Gam: gamma}
    if total:
        values[_eps] = _eps_opt(eps_opt)
    conditions = [at_most("μ ≤ L (Assumptions 3–4)", mu, constants.L)]
    note = "total error (10)" if total else "bias error only"
    return make_bound(_bias_formula(factor, total), values, _source(item, where, note), conditions=conditions,
                      infinite=(_div,))


def theorem_1(alpha, q, pi, constants: Constants, *, mu=None, Gamma=None, eps_opt=None) -> Bound:
    """CA-Fed Thm 1 (eqs. (10)–(11); proof in App. A, eqs. (21)–(37)).

    With κ = L/μ, p = π ⊙̃ q and χ²_{α‖p} = Σ_k (α_k − p_k)²/p_k::

        ε_bias = F(w_B*) − F* ≤ κ² χ²_{α‖p} Γ                          (11)
        ε = F(w) − F* ≤ 2κ² (ε_opt + ε_bias) ≤ 2κ² ε_opt + 2κ⁴ χ² Γ      (10)+(11)

    Without ``eps_opt`` the Bound is (11) alone (term "bias"); with ``eps_opt`` (a number
    F_B(w) − F_B*, or a Bound such as ``theorem_2``'s, whose value is used) it is the total
    (terms "optimisation", "bias"). Γ = max_k F_k(w*) − F_k* (eq. (9)), μ the
    strong-convexity constant; both come from the keywords or ``constants.extra``
    ("mu", "Gamma"). χ² is ∞ when a client with α_k > 0 is excluded (q_k = 0), except that
    Γ = 0 gives a bias of 0 (identical local optima, §III-A after eq. (9)). No variant.
    """
    return _bias_bound(alpha, q, pi, constants, mu, Gamma, eps_opt, factor=1, divergence=chi2,
                       gamma_name="Gamma", item="Thm 1",
                       where="eqs. (10)–(11); proof in App. A")


def theorem_3(alpha, q, pi, constants: Constants, *, mu=None, Gamma_prime=None, eps_opt=None) -> Bound:
    """CA-Fed Thm 3 (eq. (15); proof in App. C, eqs. (188)–(190)).

    With κ = L/μ, p = π ⊙̃ q, d_TV(α, p) = ½ Σ_k |α_k − p_k| and
    Γ' = max_k F_k(w_B*) − F_k* (defined in Thm 3)::

        ε_bias ≤ 4κ² d_TV²(α, p) Γ'                                     (15)

    The ``d`` symbol of the Bound is d_TV². With ``eps_opt`` the Bound is the total error
    2κ²(ε_opt + 4κ² d_TV² Γ') from (10) of Thm 1 with (15) substituted (derived here). Stays
    finite when clients are excluded. Γ' depends on q through w_B*; pass the value for this q. No variant.
    """
    return _bias_bound(alpha, q, pi, constants, mu, Gamma_prime, eps_opt, factor=4,
                       divergence=lambda a, p: tv(a, p) ** 2, gamma_name="Gamma_prime", item="Thm 3",
                       where="eq. (15); proof in App. C")
