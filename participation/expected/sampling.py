"""Exact delay laws for random server-side sampling (FedSUM Cases 1 and 4; the
deterministic Case 3 is its own expectation)."""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import hypergeom

from ..patterns import ReshuffledCyclic, Uniform
from .independent import TAIL


def uniform_tau_t(pattern: Uniform, rounds: int) -> np.ndarray:
    """E[τ_t] under Case 1 (uniform S-subsets, independent rounds).

    P(τ_t ≥ k) = 1 − P_cov(k) for k ≤ t + 1, where P_cov(k) is the probability that k
    independent uniform S-subsets cover all N clients (derived here; not in the paper). P_cov is
    computed by a DP on the number u of clients not yet covered, u → u − c with the
    hypergeometric probability Hyp(c; N, u, S): all terms are non-negative, so unlike
    inclusion–exclusion it is stable for N = 100 and beyond; P(u_k > 0) is summed
    directly rather than taken as 1 − P_cov. The recursion stops once P(u_k > 0) < 1e-16
    (the neglected tail of E[τ_t] is then below 1e-13).
    """
    n, s = pattern.n_clients, pattern.per_round
    if s == n:
        return np.zeros(rounds)
    u = np.arange(n + 1)
    newly = np.arange(s + 1)
    step = hypergeom.pmf(newly[None, :], n, u[:, None], s)  # step[u, c] = P(c newly covered | u uncovered)
    law = np.zeros(n + 1)
    law[n] = 1.0
    tail = []
    q = 1 - s / n
    while len(tail) < rounds:
        moved = np.zeros(n + 1)
        for c in newly:
            moved[: n + 1 - c] += (law * step[:, c])[c:]
        law = moved
        uncovered = law[1:].sum()
        tail.append(uncovered)
        if uncovered * n < TAIL * (1 - q):
            break
    tail = np.array(tail)
    cumulative = np.cumsum(tail)
    return cumulative[np.minimum(np.arange(rounds), tail.size - 1)]


def reshuffled_tau_t(pattern: ReshuffledCyclic, rounds: int) -> np.ndarray:
    """E[τ_t] under Case 4 with one new uniform order per epoch (``remainder="short"``,
    which is the only reshuffling when S divides N).

    Let E = ⌈N/S⌉ rounds per epoch, t = eE + s. In epoch 0, clients of later slots have
    never been selected: τ_t = t + 1 for s < E − 1 and τ_t = E − 1 at s = E − 1. For
    e ≥ 1, the clients of slots ≤ s have age ≤ s (the slot-0 block has age s), and the
    u = N − min(N, (s+1)S) clients of later slots have age s + E − j', with j' their
    slot in epoch e − 1. As the two orders are independent, these u clients form a
    uniform u-subset independent of epoch e − 1, so for k > s
        P(τ_t < k) = C(V_m, u) / C(N, u),  V_m = #clients in slots ≥ m = s + E − k + 1
    of epoch e − 1, and E[τ_t] = s + Σ_{k=s+1}^{s+E} (1 − P(τ_t < k)). [derived; the
    paper states only the bound 4N/S (Lemma F.3)]
    """
    if pattern.remainder != "short" and pattern.n_clients % pattern.per_round:
        raise ValueError("no exact formula for ReshuffledCyclic with remainder='drop' and S not dividing N; use monte_carlo")
    n, s_size = pattern.n_clients, pattern.per_round
    epoch = pattern.epoch_rounds

    def later(slot):  # clients in slots ≥ slot
        return n - min(n, max(slot, 0) * s_size)

    steady = np.empty(epoch)
    for s in range(epoch):
        u = later(s + 1)
        expectation = float(s)
        for k in range(s + 1, s + epoch + 1):
            v = later(s + epoch - k + 1)
            expectation += 1.0 - (math.comb(v, u) / math.comb(n, u) if u else 1.0)
        steady[s] = expectation
    t = np.arange(rounds)
    slot = t % epoch
    first = np.where(slot < epoch - 1, t + 1, epoch - 1).astype(float)
    return np.where(t < epoch, first, steady[slot])
