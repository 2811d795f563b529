"""Exact delay laws for random server-side sampling (FedSUM Cases 1 and 4; the
deterministic Case 3 is its own expectation)."""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import hypergeom

from ...patterns import Cyclic, ReshuffledCyclic, Uniform
from ._limits import require
from .independent_laws import TAIL


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
    q = 1 - s / n
    steps = min(rounds, math.ceil(math.log(TAIL * (1 - q) / n**2) / math.log(q)) + 1)  # P(u_k > 0) ≤ N q^k
    require(f"exact E[τ_t] for Uniform(N={n}, S={s}) ({steps} coverage steps over {n + 1} states)",
            8 * (n + 1) * (s + 4), steps * (s + 1) * (3e-6 + 4e-9 * n) + (n + 1) * (s + 1) * 2e-6)
    u = np.arange(n + 1)
    newly = np.arange(s + 1)
    step = hypergeom.pmf(newly[None, :], n, u[:, None], s)  # step[u, c] = P(c newly covered | u uncovered)
    law = np.zeros(n + 1)
    law[n] = 1.0
    tail = []
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
    u = N − min(N, (s+1)S) clients of later slots have age s + E − j, with j their slot in
    epoch e − 1. As the two orders are independent, these u clients form a uniform
    u-subset of epoch e − 1's order, so τ_t = s + E − J with J the earliest slot among
    them, P(J ≥ j) = C(N − jS, u)/C(N, u) = Π_{i<jS} (1 − u/(N − i)), and
        E[τ_t] = s + E − Σ_{j=1}^{s+1} P(J ≥ j)      (u > 0; E[τ_t] = s when u = 0).
    [derived; the paper states only the bound 4N/S (Lemma F.3)] For S = 1 the sum is
    E[J] = (N − u)/(u + 1) (the hockey-stick identity). Otherwise each slot's products
    run as cumulative sums of log1p, stopped once (1 − u/N)^{jS}, which bounds P(J ≥ j),
    leaves less than TAIL; only the slots that occur at t ≥ E are computed.
    """
    if pattern.remainder != "short" and pattern.n_clients % pattern.per_round:
        raise ValueError("no exact formula for ReshuffledCyclic with remainder='drop' and S not dividing N; use monte_carlo")
    n, size = pattern.n_clients, pattern.per_round
    epoch = pattern.epoch_rounds
    slots = np.arange(max(0, min(epoch, rounds - epoch)))  # slots seen after the first epoch
    later = n - np.minimum(n, (slots + 1) * size)           # u for each slot
    steady = slots.astype(float)
    active = later > 0
    if size == 1:
        u = later[active].astype(float)
        steady[active] += epoch - (n - u) / (u + 1)
    elif active.any():
        u = later[active].astype(float)
        ratio = np.exp(size * np.log1p(-u / n))              # (1 − u/N)^S ≥ P(J ≥ j + 1)/P(J ≥ j)
        with np.errstate(divide="ignore"):
            cutoff = np.ceil(np.log(TAIL * -np.expm1(size * np.log1p(-u / n))) / np.log(ratio))
        terms = np.minimum(slots[active] + 1, np.where(ratio < 1, cutoff, slots[active] + 1)).astype(np.int64)
        cells = int((terms * size).sum())
        require(f"exact E[τ_t] for ReshuffledCyclic(N={n}, S={size}) over {rounds} rounds ({slots.size} slots, "
                f"{cells} factors)", 8 * 4 * int((terms * size).max()), slots.size * 1e-5 + cells * 3e-8)
        sums = np.empty(u.size)
        for k, (count, missing) in enumerate(zip(terms, u)):
            factors = np.log1p(-missing / (n - np.arange(count * size, dtype=float)))
            sums[k] = np.exp(np.cumsum(factors)[size - 1 :: size]).sum()
        steady[active] += epoch - sums
    t = np.arange(rounds)
    slot = t % epoch
    first = np.where(slot < epoch - 1, t + 1, epoch - 1).astype(float)
    if slots.size == 0:
        return first
    return np.where(t < epoch, first, steady[np.minimum(slot, slots.size - 1)])


def cyclic_tau_t(pattern: Cyclic, rounds: int) -> np.ndarray:
    """τ_t under Case 3 (deterministic, hence its own expectation), in closed form.

    Rounds t − k + 1..t select the consecutive blocks [(t − k + 1)S, (t + 1)S) mod N, kS
    positions of the order, so every client has been selected within the last k rounds
    iff kS ≥ N and k ≤ t + 1. Hence τ_t = t + 1 while (t + 1)S < N (some client not
    selected yet), and τ_t = ⌈N/S⌉ − 1 afterwards. [derived; Lemma F.4 bounds τ_max by 2N/S]
    """
    n, size = pattern.n_clients, pattern.per_round
    t = np.arange(rounds)
    return np.where((t + 1) * size < n, t + 1, -(-n // size) - 1).astype(float)
