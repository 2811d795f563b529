"""Mixing quantities of the client-availability Markov chain (CA-Fed Thm 2, App. B).

``mixing_quantities`` gives ln C_P and T_P (Lemma 16, eqs. (156)–(157)), λ(P) (eq. (229),
App. F1) and the mixing lag 𝒥_T (Definition 1, eq. (132)) of a joint transition matrix, a
stack of independent clients' matrices, a ``ProductChain``, or N two-state clients given as
(π, λ) (eq. (236), App. F3), all computed by ``participation.markov``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from participation import markov

from ..core import count, positive
from ._inputs import _first, _lam, _vector

#: Theorem 2's rounds T must stay below this (the mixing lag 𝒥_t is computed in int64).
ROUNDS_MAX = 2**62


@dataclass(frozen=True)
class Mixing:
    """Mixing quantities of the availability chain for Theorem 2.

    Iterating yields ``(log_cp, tp, J_T)`` = (ln C_P, T_P, 𝒥_T). Also: ``lam_P`` = λ(P) =
    (1 + λ̄₂(P))/2 (eq. (229), App. F1), ``log_M`` = ln M (number of joint states) and
    ``chain`` (the ProductChain or validated matrix used).
    """

    log_cp: float
    tp: int
    J_T: int
    lam_P: float
    log_M: float
    chain: object = field(repr=False, default=None)

    def __iter__(self):
        yield self.log_cp
        yield self.tp
        yield self.J_T

    @property
    def C_P(self) -> float:
        """C_P itself (``inf`` when it overflows a float; use ``log_cp``)."""
        return math.inf if self.log_cp > 709.78 else math.exp(self.log_cp)

    def lag(self, t, H: float):
        """𝒥_t of Definition 1 (eq. (132), App. B2) at round(s) t."""
        return markov.mixing_lag(t, H=H, lam_P=self.lam_P, T_P=self.tp, log_C_P=self.log_cp)


def _chain(P=None, chains=None, keep=None):
    """(chain object, is a product chain) from a matrix / stack / ProductChain or (pi, lam)."""
    if (P is None) == (chains is None):
        raise ValueError("give exactly one of P (a transition matrix or ProductChain) and chains=(pi, lam)")
    if chains is not None:
        try:
            pi, lam = chains
        except (TypeError, ValueError):
            raise ValueError(f"chains must be a pair (pi, lam) of per-client arrays, got {chains!r}") from None
        pi = _vector(pi, "pi")
        bad = ~((pi > 0) & (pi < 1))
        if bad.any():
            i = _first(bad)
            raise ValueError(f"pi[{i}] = {pi[i]} is outside (0, 1); a two-state chain needs 0 < pi < 1")
        P = markov.product_chain(markov.two_state(pi, _lam(lam, pi)))
    elif not isinstance(P, markov.ProductChain):
        array = np.asarray(P, dtype=float)
        P = markov.product_chain(array) if array.ndim == 3 else array
    if keep is not None:
        if not isinstance(P, markov.ProductChain):
            raise ValueError("a reduced chain needs independent clients (a product chain; CA-Fed §III-D, Guideline B)")
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (P.n_clients,) or not keep.any():
            raise ValueError(f"keep must be a boolean mask over {P.n_clients} clients with at least one True")
        factors = P.factors
        P = markov.product_chain(factors[keep] if isinstance(factors, np.ndarray)
                                 else [f for f, k in zip(factors, keep) if k])
    return P


def mixing_quantities(P=None, *, chains=None, H, T, keep=None) -> Mixing:
    """(ln C_P, T_P, 𝒥_T) of the availability chain, via ``participation.markov``.

    ``P`` is a transition matrix over the joint states, an (n, m, m) stack of independent
    clients' matrices, or a ``ProductChain``; ``chains=(pi, lam)`` gives N independent
    two-state clients (eq. (236), App. F3). ``keep`` (product chains only) reduces the
    chain to the clients kept, P' = ⊗_{q_k > 0} P_k (§III-D, before Guideline B).

    C_P, T_P: Lemma 16, eqs. (156)–(157), unit-norm (Kronecker-structured
    for products) eigenvectors, T_P = 0 for diagonalisable chains. C_P is returned as its
    logarithm: for N two-state clients C_P ~ √(2^N), ln C_P ≈ 128.7 at N = 100 (π_k ∈
    {0.1, 0.9} as in §V-A; derived here). 𝒥_T: Definition 1 (eq. (132)) at t = T, in log space.
    """
    H = positive(H, "H")
    T = count(T, "T")
    if T >= ROUNDS_MAX:
        raise ValueError(f"T = {T} rounds: CA-Fed's mixing lag is computed in int64, so T must be below 2**62")
    chain = _chain(P, chains, keep)
    if isinstance(chain, markov.ProductChain):
        log_cp, tp, lam_P = chain.log_cp(), chain.tp(), chain.cafed_lambda()
        log_M = float(sum(math.log(m) for m in chain.sizes))
    else:
        C_P, tp = markov.cp_tp(chain)
        log_cp = math.log(C_P) if C_P > 0 else -math.inf
        lam_P, log_M = markov.cafed_lambda(chain), math.log(chain.shape[0])
    J_T = markov.mixing_lag(T, H=H, lam_P=lam_P, T_P=tp, log_C_P=log_cp)
    return Mixing(float(log_cp), int(tp), int(J_T), float(lam_P), log_M, chain)


def _chain_pi(chain) -> np.ndarray | None:
    """Client availabilities of a two-state product chain, else None."""
    if isinstance(chain, markov.ProductChain) and set(chain.sizes) == {2}:
        return np.asarray(chain.marginals)[:, 1]
    return None
