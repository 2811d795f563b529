"""CA-Fed's client-exclusion heuristic (Algorithm 1, §IV).

``proxy_objective`` is the estimate (20) of the proxy error (16); ``greedy_weights`` starts
from the unbiased weights q = α/π and excludes clients one at a time while (20) drops:
first by decreasing |λ_k| (Guideline B), then by increasing π_k (Guideline A, §III-D).
"""
from __future__ import annotations

import functools

import numpy as np

from ..core import nonnegative
from ._inputs import _availability, _lam, _nonneg_vector, _simplex, _weights
from .bias import tv

def proxy_objective(q, alpha, pi, loss_gap, *, Gamma_prime=None, kappa2_bar: float = 1.0) -> float:
    """CA-Fed's estimate (20) of the proxy (16) (§IV and §IV-B, eqs. (18)–(20))::

        ε̂(q) = ⟨F̂ − F̂*, π ⊙̃ q⟩ + 4κ̄² d_TV²(α, π ⊙̃ q) Γ̂'

    ``loss_gap`` = F̂ − F̂* ≥ 0 per client; Γ̂' defaults to max_k loss_gap_k (19).
    """
    pi = _availability(pi)
    alpha = _simplex(alpha, n=pi.size)
    gap = _nonneg_vector(loss_gap, "loss_gap", pi.size)
    gp = float(gap.max()) if Gamma_prime is None else nonnegative(Gamma_prime, "Gamma_prime")
    k2 = nonnegative(kappa2_bar, "kappa2_bar")
    return _proxy(_weights(q, pi.size), alpha, pi, gap, gp, k2)


def _proxy(q, alpha, pi, gap, gamma_prime, kappa2_bar) -> float:
    p = pi * q / (pi @ q)
    return float(gap @ p + 4 * kappa2_bar * tv(alpha, p) ** 2 * gamma_prime)


def _get(q, order, objective, tau):
    """Function ``get`` of Algorithm 1 (lines 13–21) with the missing q⁺ ← q and q ← q⁺."""
    eps = objective(q)
    for k in order:
        if q[k] == 0 or q.sum() - q[k] <= 0:
            continue  # already excluded, or would exclude everyone (π ⊙̃ 0 is undefined)
        trial = q.copy()
        trial[k] = 0.0
        eps_trial = objective(trial)
        if eps - eps_trial >= tau:
            q, eps = trial, eps_trial
    return q


def greedy_weights(alpha, pi, lam, loss_gap, *, Gamma_prime=None, kappa2_bar: float = 1.0,
                   tau: float = 0.0) -> np.ndarray:
    """CA-Fed's client exclusion (Algorithm 1; §IV-A).

    Start from the unbiased weights q = α/π (Algorithm 1, line 5, which prints α/σ̂, a typo). Then two
    greedy passes of ``get`` over all clients, each excluding client k (q_k ← 0) when the
    proxy ε̂ of (20) drops by at least ``tau`` (ties count when tau = 0), otherwise leaving
    q unchanged (accept-or-revert: Algorithm 1, lines 17–20, read with the q⁺ ← q / q ← q⁺ it omits):

    1. Guideline B: clients by decreasing |λ_k| (ties: lower π first). The ordering uses the
       modulus, λ(P_k) = (1 + |λ_k|)/2, not the signed λ_k (a choice made here: Algorithm 1 sorts by λ̂,
       lines 6 and 14, and Guideline B, §III-D, is about λ(P_k));
    2. Guideline A: clients by increasing π_k (ties: larger |λ_k| first).

    A step that would exclude every client is skipped. The kept weights stay α_k/π_k
    (unnormalised: ε̂ depends on q only through π ⊙̃ q). ``lam`` are the signed second
    eigenvalues λ_k of the two-state chains (eq. (238)), validated against (236).
    Returns q.
    """
    pi = _availability(pi)
    alpha = _simplex(alpha, n=pi.size)
    lam = _lam(lam, pi)
    gap = _nonneg_vector(loss_gap, "loss_gap", pi.size)
    gp = float(gap.max()) if Gamma_prime is None else nonnegative(Gamma_prime, "Gamma_prime")
    k2, tau = nonnegative(kappa2_bar, "kappa2_bar"), nonnegative(tau, "tau")
    if not np.any(alpha > 0):
        raise ValueError("alpha has no positive entry")
    objective = functools.partial(_proxy, alpha=alpha, pi=pi, gap=gap, gamma_prime=gp, kappa2_bar=k2)
    q = alpha / pi
    q = _get(q, np.lexsort((pi, -np.abs(lam))), objective, tau)
    return _get(q, np.lexsort((-np.abs(lam), pi)), objective, tau)
