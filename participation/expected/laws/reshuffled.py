"""τ_max under FedSUM Case 4, reshuffled cyclic (``ReshuffledCyclic``): its exact law, in
closed form when every client joins once per epoch and by a small Markov chain when a few
clients sit each epoch out, and a proved bound on E[τ_max] for the sizes the chain cannot
reach.

References: R. You, S. Pu, "FedSUM Family: Efficient Federated Learning Methods under
Arbitrary Client Participation", arXiv:2512.18275, §2.1 Case 4 (the pattern), §2.2 (τ_t,
τ_max) and Lemma F.3 in App. F (τ_max ≤ 4N/S almost surely, via τ_max ≤ 2⌊N/S⌋ in its
proof, for S | N; App. F calls this pattern "Case 3"). Everything below is derived here.

Setting (``participation/patterns/sampling.py``): epoch e draws a uniform permutation of
the N clients, independently of the other epochs; the client at position p of it is
selected in slot ⌊p/S⌋ of the epoch, i.e. round eE + ⌊p/S⌋, when that slot is < E. With
``remainder="short"`` (or S | N) E = ⌈N/S⌉ and every client joins exactly once per epoch
(the last slot holds the N mod S clients left over when S ∤ N); with ``remainder="drop"``
E = ⌊N/S⌋ and the R = N mod S clients at the end of the order sit the epoch out. τ_max
over rounds 0..T−1 is the longest run of consecutive absences of any client, the run
before its first selection and the run after its last one (cut at T − 1) included
(:mod:`participation.delays`). Throughout T = KE + r with 0 ≤ r < E.

1. Every client once per epoch (S | N, or ``remainder="short"``): closed form
-----------------------------------------------------------------------------
If T < E the clients of slot E − 1 are never selected and τ_max = T. Otherwise, with
b_k(i) the slot of client i in epoch k, the runs of client i are

* before its first selection: b_0(i) ≤ E − 1, with equality for the clients of slot E − 1;
* between its selections in epochs k and k + 1: E − 1 + b_{k+1}(i) − b_k(i);
* after its last selection: r − 1 − b_K(i) ≤ E − 2 if b_K(i) < r (it joined the partial
  epoch K; the run before is the previous bullet), else E − 1 + r − b_{K−1}(i), which is
  E − 1 + min(b_K(i), r) − b_{K−1}(i); with r = 0 it is E − 1 − b_{K−1}(i) ≤ E − 1.

Let D_k = max_i (b_{k+1}(i) − b_k(i)) for k ≤ K − 2 and D'_{K−1} = max_i (min(b_K(i), r)
− b_{K−1}(i)) when r > 0. Each is ≥ 0 (take a client of slot 0 in the earlier epoch), so
the leading run (≤ E − 1, and = E − 1) and the trailing runs never exceed E − 1 + D:

    τ_max = E − 1 + max(D_0, …, D_{K−2}, D'_{K−1})      (T ≥ E; no D' when r = 0).

The leading run does depend on epoch 0, as D_0 does, but it is dominated, so it drops out.
Independence: given epochs 0..k, epoch k + 1 is a uniform permutation independent of them;
relabelling the clients so that b_k becomes a fixed reference assignment maps it to a
uniform permutation, so the conditional law of D_k (or D'_k) does not depend on epochs
0..k. As D_0..D_{k−1} are functions of epochs 0..k, the D_k are i.i.d. and D'_{K−1} is
independent of them.

Counting: fix b (s_j clients in slot j). The event {D' ≤ m} (horizon r; r = E − 1 gives
D, as min(b', E − 1) = b') says that every client of slot j with j + m < r goes to a slot
≤ j + m of the uniform assignment b'. Match the N clients uniformly to the N positions of
the new order: the allowed positions of the slot-j clients are the first (j + m + 1)S,
nested prefixes growing with j, so (a Ferrers board) the number of matchings is the
product over the constrained clients, taken in increasing j, of (allowed positions −
clients already placed). For 0 ≤ m < r,

    G_r(m) := P(D' ≤ m) = Π_{j=0}^{r−m−1} Π_{u=0}^{S−1} ((m+1)S − u) / (N − jS − u)
            = [((m+1)S)! / (mS)!]^{r−m} · (N − (r−m)S)! / N!,

and G_r(m) = 1 for m ≥ r (only full slots j ≤ r − 1 ≤ E − 2 and positions in full slots
enter, so a short last slot changes nothing). With F = G_{E−1}:

    P(τ_max ≤ E − 1 + m) = F(m)^{K−1} · G_r(m)   (m = 0..E − 1; G_0 ≡ 1),
    E[τ_max] = E − 1 + Σ_{m=0}^{E−2} (1 − F(m)^{K−1} G_r(m)).

S = 1 recovers the classical count (m+1)^{N−m−1}(m+1)! of permutations with σ(i) ≤ i + m.
Hence E − 1 ≤ τ_max ≤ 2E − 2 almost surely (Lemma F.3's proof has 2⌊N/S⌋ for S | N).

Numerics: G_r(m) is formed exactly as a ratio of integers and its logarithm taken to a
few ulps *relative* (log1p of the exact 1 − G when G > 1/2, else after an exact
power-of-two scaling), so x_m = (K−1) ln F(m) + ln G_r(m) has a relative error of a few
ulps and 1 − e^{x_m} = −expm1(x_m) an absolute one below 4·2^−53, whatever K: E[τ_max] is
within (E + 1)·1e-15, each probability within 1e-15 (checked against exact rationals in
the tests; ``exact=True`` gives Fractions). Cost: O(E) big-integer products of
O(N log N) bits, independent of T: 0.1 ms for N = 100, S = 20; 24 ms for N = 1000,
S = 1; 2 s for N = 5000, S = 1.

2. ``remainder="drop"`` with S ∤ N: an exact chain over the R oldest runs
------------------------------------------------------------------------
τ_max ≥ E once T ≥ E (epoch 0's R left-out clients). Fix m ≥ E; call a client's current
run at an epoch's start its age. After epoch 0 the ages are: S clients at each age
0..E − 1 (slot j of the last epoch leaves E − 1 − j) and the R clients that sat it out,
aged ≥ E. In the next epoch τ_max stays ≤ m iff every client of age a placed in slot j
has a + j ≤ m and every client left out has a + E ≤ m. So a client with a + E ≤ m may
take any of the N positions of the order, and any other only the first S(m − a + 1):
nested prefixes again, and placing the restricted clients first, oldest first,

    P(survive) = Π_k (c_k − k)/(N − k)   (c_k = S(m − a_k + 1), k < number restricted),

while every R-subset of the U unrestricted clients is equally likely to be the one left
out (each is completed by the same number of placements). The next state is the multiset
{a + E : a left out} ⊂ [E, m]. Multisets of R ages thus form a Markov chain killed at
failure; epoch 0 (all ages 0) leads to (E, …, E); a partial last epoch of r rounds needs
a slot j ≤ min(m − a, r − 1) from every client with a + r > m (a prefix again, the
others free). P(τ_max ≤ m) is the chain's survival through the K full epochs and the
partial one; 1 − P is summed from the failure mass of every epoch (non-negative terms),
so its relative error is about K·2^−52. There are C(m − E + R, R) states per threshold m,
and thresholds run up to the L of :func:`reshuffled_tau_max_bound` (the neglected tail
Σ_{l>L} P(τ_max ≥ l) is below 1e-13), so this is for small R: N = 10, S = 4 (R = 2),
T = 1000 takes 0.7 s; N = 11, S = 4 (R = 3) about a minute, and is refused under the
default time limit (:mod:`._limits`) with a pointer to the bound.

3. A bound for every case: :func:`reshuffled_tau_max_bound` (proof in its docstring)
------------------------------------------------------------------------------------
E[τ_max] ≤ Σ_l min(1, N·q_l), q_l = P(one given client has an absence run ≥ l), exact
for one client, whose slots are i.i.d. over epochs. It is never above the epoch-level
union bound E(2 + Σ_k min(1, N n_e ρ^k)) − 2 (:func:`epoch_union_bound`).
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from ...patterns import ReshuffledCyclic
from ._limits import require
from ...validation import integer

__all__ = ["TauMaxLaw", "reshuffled_tau_max_law", "reshuffled_exact_tau_max", "reshuffled_tau_max_tail",
           "reshuffled_tau_max_bound", "epoch_union_bound"]

#: Neglected mass of the tail sums (the drop chain's and the bound's; the bound adds it back).
TAIL = 1e-13
#: Relative margin added to the floating-point bound (its rounding is far smaller).
BOUND_MARGIN = 1e-12
_LN2 = math.log(2.0)


class TauMaxLaw(NamedTuple):
    """The law of τ_max: ``values`` (int64, increasing) and ``probabilities`` (float64, or
    Fractions in an object array with ``exact=True``); zero-probability values may appear."""

    values: np.ndarray
    probabilities: np.ndarray


def _check(pattern, rounds) -> int:
    if not isinstance(pattern, ReshuffledCyclic):
        raise ValueError(f"pattern must be a ReshuffledCyclic (FedSUM Case 4), got {type(pattern).__name__}")
    if type(pattern)._generate is not ReshuffledCyclic._generate:
        raise ValueError(f"pattern {type(pattern).__name__} overrides ReshuffledCyclic's draw; its law is not Case 4's")
    return integer(rounds, "rounds")


def _once_per_epoch(pattern: ReshuffledCyclic) -> bool:
    return pattern.n_clients % pattern.per_round == 0 or pattern.remainder == "short"


def _g(n: int, s: int, r: int, m: int) -> tuple[int, int]:
    """G_r(m) = [((m+1)S)!/(mS)!]^{r−m} · (N − (r−m)S)!/N! as (numerator, denominator)."""
    k = r - m
    if k <= 0:
        return 1, 1
    return math.perm((m + 1) * s, s) ** k, math.perm(n, k * s)


def _log_ratio(num: int, den: int) -> float:
    """ln(num/den) for 0 < num ≤ den, to a few ulps relative."""
    if 2 * num > den:
        return math.log1p(-((den - num) / den))       # int / int is correctly rounded
    shift = den.bit_length() - num.bit_length()
    return math.log((num << shift) / den) - shift * _LN2  # (num·2^shift)/den ∈ (1/2, 2)


def _shape(pattern: ReshuffledCyclic, rounds: int) -> tuple[int, int, int, int, int]:
    n, s, epoch = pattern.n_clients, pattern.per_round, pattern.epoch_rounds
    full, r = divmod(rounds, epoch)
    return n, s, epoch, full, r


def reshuffled_tau_max_tail(pattern: ReshuffledCyclic, rounds: int) -> np.ndarray:
    """P(τ_max ≥ l) for l = 1..T (the layout of ``exact_tau_max_tail``), from
    :func:`reshuffled_tau_max_law`; under "drop" with S ∤ N the rows past L, whose sum is
    below 1e-13, are 0."""
    law = reshuffled_tau_max_law(pattern, rounds)
    above = np.minimum(1.0, np.cumsum(law.probabilities[::-1])[::-1])   # P(τ_max ≥ values[i])
    tail = np.zeros(rounds)
    tail[: max(0, law.values[0] - 1)] = 1.0
    inside = (law.values >= 1) & (law.values <= rounds)                  # P(τ_max > T) = 0
    tail[law.values[inside] - 1] = above[inside]
    return tail


def reshuffled_tau_max_law(pattern: ReshuffledCyclic, rounds: int, *, exact: bool = False) -> TauMaxLaw:
    """The exact law of τ_max over rounds 0..T−1 under FedSUM Case 4 (§2.1; τ_max as in
    §2.2 and the proof of Lemma F.3), T = KE + r with E rounds per epoch, 0 ≤ r < E.

    * T < E: τ_max = T.
    * Every client once per epoch (S | N, or ``remainder="short"``): τ_max ∈ {E − 1, …,
      2E − 2} and

          P(τ_max ≤ E − 1 + m) = F(m)^{K−1} · G_r(m),
          G_r(m) = [((m+1)S)!/(mS)!]^{r−m} (N − (r−m)S)!/N!  (m < r),  1  (m ≥ r),
          F = G_{E−1}:

      F(m) is the probability that a fresh uniform epoch puts no client more than m
      slots later than the previous epoch did (i.i.d. over consecutive epochs), G_r(m) the
      same for the partial last epoch cut after r rounds. This sharpens the almost-sure
      2⌊N/S⌋ of Lemma F.3's proof to 2E − 2.
    * ``remainder="drop"`` with S ∤ N: the killed Markov chain over the multiset of the R
      oldest runs (module docstring, section 2), for values E..L; the last value stands
      for τ_max ≥ L, which differs from τ_max = L by less than 1e-13 (with ``exact=True``
      L = T: no truncation). Refused, with a ValueError pointing to
      :func:`reshuffled_tau_max_bound`, when the chain exceeds the limits of
      :mod:`._limits` (R ≥ 3 mostly).

    ``exact=True`` gives Fractions (big integers of about K·log2(N!) bits: for small
    cases). Floats: each probability within 1e-15 in the first case, and within about
    K·1e-16 in the "drop" chain. Zero-probability values may appear. Raises ValueError for
    a non-ReshuffledCyclic pattern or rounds < 1.
    """
    rounds = _check(pattern, rounds)
    n, s, epoch, full, r = _shape(pattern, rounds)
    kind = object if exact else float
    if rounds < epoch:
        return TauMaxLaw(np.array([rounds], dtype=np.int64), np.array([Fraction(1) if exact else 1.0], dtype=kind))
    if not _once_per_epoch(pattern):
        tail, _ = _drop_tail(pattern, rounds, exact, rows=rounds if exact else None)
        values = np.arange(epoch, len(tail) + 1, dtype=np.int64)
        above = tail[epoch - 1 :]                        # P(τ_max ≥ v) for v = E..L
        probs = [a - b for a, b in zip(above, above[1:])] + [above[-1]]
        probs = np.array(probs, dtype=kind)
        return TauMaxLaw(values, probs if exact else np.maximum(probs, 0.0))
    _require(pattern, rounds, "the law of τ_max", exact)
    values = np.arange(epoch - 1, 2 * epoch - 1, dtype=np.int64)
    if exact:
        cdf = []
        for m in range(epoch - 1):
            f, g = _g(n, s, epoch - 1, m), _g(n, s, r, m)
            cdf.append(Fraction(*f) ** (full - 1) * Fraction(*g))
        cdf.append(Fraction(1))
        probs = np.array([cdf[0]] + [b - a for a, b in zip(cdf, cdf[1:])], dtype=object)
        return TauMaxLaw(values, probs)
    x = _log_cdf(n, s, epoch, full, r)
    below = np.append(np.exp(x), 1.0)          # P(τ_max ≤ E − 1 + m), m = 0..E − 1
    above = np.append(-np.expm1(x), 0.0)       # P(τ_max > E − 1 + m)
    probs = np.empty(epoch)
    probs[0] = below[0]
    if epoch > 1:
        # the difference of whichever side is small: an absolute error of a few ulps of ½ at most
        probs[1:] = np.where(below[1:] < 0.5, below[1:] - below[:-1], above[:-1] - above[1:])
    return TauMaxLaw(values, np.maximum(probs, 0.0))


def reshuffled_exact_tau_max(pattern: ReshuffledCyclic, rounds: int) -> float:
    """E[τ_max] under FedSUM Case 4, exactly (FedSUM Lemma F.3 bounds it by 4N/S for S | N):

        E[τ_max] = T                                               (T < E),
        E[τ_max] = E − 1 + Σ_{m=0}^{E−2} (1 − F(m)^{K−1} G_r(m))   (T = KE + r ≥ E),

    the latter when every client joins once per epoch (S | N, or ``remainder="short"``),
    with F, G_r as in :func:`reshuffled_tau_max_law`; each term is −expm1 of a logarithm
    accurate to a few ulps relative, so the absolute error is below (E + 1)·1e-15. Under
    ``remainder="drop"`` with S ∤ N, E[τ_max] = Σ_{l≥1} P(τ_max ≥ l) from the chain of the
    module docstring (section 2), within 1e-13 + L·K·1e-16; refused (ValueError pointing
    to :func:`reshuffled_tau_max_bound`) where that chain is over budget.
    """
    rounds = _check(pattern, rounds)
    n, s, epoch, full, r = _shape(pattern, rounds)
    if rounds < epoch:
        return float(rounds)
    if not _once_per_epoch(pattern):
        tail, _ = _drop_tail(pattern, rounds, False)
        return math.fsum(tail)
    _require(pattern, rounds, "exact E[τ_max]", False)
    return (epoch - 1) + math.fsum(-np.expm1(_log_cdf(n, s, epoch, full, r)))


def _require(pattern: ReshuffledCyclic, rounds: int, what: str, exact: bool) -> None:
    """The budget rule of :mod:`._limits`: E values, each a few products of big integers of
    b = log2(N!) bits (and, with ``exact``, Fractions of about K·b bits)."""
    n, s, epoch, full, _ = _shape(pattern, rounds)
    bits = math.lgamma(n + 1) / _LN2
    size = bits * (full + 1) if exact else bits
    require(f"{what} for ReshuffledCyclic(N={n}, S={s}) over {rounds} rounds ({epoch} values"
            f"{', in Fractions' if exact else ''})",
            6 * epoch * size / 8, epoch * (5e-6 + 2e-9 * size * math.log2(2 + size)))


def _log_cdf(n: int, s: int, epoch: int, full: int, r: int) -> np.ndarray:
    """x_m = (K − 1) ln F(m) + ln G_r(m) for m = 0..E − 2 (F, G_r > 0 there)."""
    x = np.empty(epoch - 1)
    for m in range(epoch - 1):
        value = 0.0
        if full > 1:
            value += (full - 1) * _log_ratio(*_g(n, s, epoch - 1, m))
        if m < r:
            value += _log_ratio(*_g(n, s, r, m))
        x[m] = value
    return x


def _slot_weights(pattern: ReshuffledCyclic) -> tuple[np.ndarray, float]:
    """A fixed client's slot law in one epoch: P(slot j) = s_j/N for j < E, and P(sits
    out) = ρ = (N mod S)/N under ``"drop"`` (0 otherwise)."""
    n, s, epoch = pattern.n_clients, pattern.per_round, pattern.epoch_rounds
    sizes = np.full(epoch, s, dtype=float)
    sizes[-1] = n - (epoch - 1) * s if pattern.remainder == "short" else s
    return sizes / n, (n - epoch * s) / n if pattern.remainder == "drop" else 0.0


def epoch_union_bound(pattern: ReshuffledCyclic, rounds: int) -> float:
    """The epoch-level union bound E[τ_max] ≤ E(2 + Σ_{k≥1} min(1, N·n_e·ρ^k)) − 2, with
    E rounds per epoch (⌊N/S⌋ under ``"drop"``), ρ = (N mod S)/N under ``"drop"`` (else 0:
    the bound is then the almost-sure 2E − 2), n_e = ⌈T/E⌉ epochs. Valid (proof in
    :func:`reshuffled_tau_max_bound`, step 5), and never below that function's bound
    (up to its 1e-12 relative margin)."""
    rounds = _check(pattern, rounds)
    n, epoch = pattern.n_clients, pattern.epoch_rounds
    _, rho = _slot_weights(pattern)
    total = 0.0
    if rho > 0:
        scale, k = n * -(-rounds // epoch), 1
        while scale * rho**k >= 1:
            total, k = total + 1, k + 1
        total += scale * rho**k / (1 - rho)      # the geometric rest, every term below 1
    return epoch * (2 + total) - 2


def _bound_rows(pattern: ReshuffledCyclic, rounds: int) -> tuple[int, float]:
    """(L, rest): the rows l = 1..L computed, and a bound on Σ_{l>L} N·q_l (see step 4)."""
    n, epoch = pattern.n_clients, pattern.epoch_rounds
    _, rho = _slot_weights(pattern)
    if rho == 0:
        return min(rounds, 2 * epoch - 2), 0.0
    epochs = -(-rounds // epoch)
    k0 = 0
    while epoch * n * epochs * rho ** (k0 + 1) / (1 - rho) > TAIL:
        k0 += 1
    last = (k0 + 2) * epoch - 2
    if last >= rounds:
        return rounds, 0.0
    return last, epoch * n * epochs * rho ** (k0 + 1) / (1 - rho)


def _run_probabilities(pattern: ReshuffledCyclic, rounds: int, rows: int) -> np.ndarray:
    """q_l = P(a fixed client has an absence run of ≥ l rounds within 0..T−1), l = 1..rows.

    First-passage recursion over epochs, for every l at once: ``alive[l−1, a]`` is the
    probability that no run ≥ l has occurred and the client's current run (rounds absent
    since its last selection, or since round 0) is a at the start of the epoch. In an
    epoch, slot j (probability w_j) ends the run at length a + j (a failure if ≥ l) and
    starts a new one of E − 1 − j rounds at the epoch's end; sitting out (probability ρ)
    makes it a + E. In a partial last epoch of r rounds, slot j < r ends it at a + j and
    leaves r − 1 − j absent rounds; otherwise the run reaches a + r. The failure mass is
    summed from prefix and suffix sums of non-negative numbers (no cancellation).
    """
    weights, rho = _slot_weights(pattern)
    epoch = weights.size
    full, r = divmod(rounds, epoch)
    L = rows
    ls = np.arange(1, L + 1)
    alive = np.zeros((L, L))
    alive[:, 0] = 1.0
    failed = np.zeros(L)
    valid = np.arange(L)[None, :] < ls[:, None]             # ages a < l
    j = np.arange(epoch)
    cut = np.clip(ls[:, None] - j[None, :], 0, L)           # (L, E): survive iff a < l − j
    row = np.arange(L)[:, None]
    age = epoch - 1 - j                                      # the run that starts after slot j
    inside = age < L

    def sums(p):
        below = np.zeros((L, L + 1))
        np.cumsum(p, axis=1, out=below[:, 1:])               # below[:, x] = Σ_{a<x}
        above = np.zeros((L, L + 1))
        above[:, :L] = np.cumsum(p[:, ::-1], axis=1)[:, ::-1]  # above[:, x] = Σ_{a≥x}
        return below, above

    for _ in range(full):
        below, above = sums(alive)
        ok = below[row, cut] * weights                       # (L, E): selected at j, run a + j < l
        failed += (above[row, cut] * weights).sum(axis=1)
        failed += (ok * (age[None, :] >= ls[:, None])).sum(axis=1)   # the new run alone reaches l
        if rho:
            failed += rho * above[np.arange(L), np.clip(ls - epoch, 0, L)]  # sits out: a + E ≥ l
        new = np.zeros((L, L))
        if epoch < L:
            new[:, epoch:] = rho * alive[:, : L - epoch]
        new[:, age[inside]] = ok[:, inside]
        new[~valid] = 0.0                                    # counted as failures above
        alive = new
    if r:
        below, above = sums(alive)
        ok = below[row, cut[:, :r]] * weights[:r]
        failed += (above[row, cut[:, :r]] * weights[:r]).sum(axis=1)
        failed += (ok * ((r - 1 - j[:r])[None, :] >= ls[:, None])).sum(axis=1)
        failed += (rho + weights[r:].sum()) * above[np.arange(L), np.clip(ls - r, 0, L)]
    return failed


def reshuffled_tau_max_bound(pattern: ReshuffledCyclic, rounds: int) -> float:
    """An upper bound on E[τ_max] under Case 4 that holds whatever the remainder rule; it
    is meant for ``remainder="drop"`` with S ∤ N, where FedSUM Lemma F.3 (τ_max ≤ 4N/S
    a.s., App. F) does not apply and the exact chain of :func:`reshuffled_tau_max_law` is
    over budget (R = N mod S ≥ 3, mostly):

        E[τ_max] ≤ Σ_{l=1}^{L} min(1, N·q_l) + N·E·n_e·ρ^{k0+1}/(1 − ρ),

    q_l = P(a fixed client has an absence run ≥ l in rounds 0..T−1), computed exactly by a
    recursion over epochs; ρ = (N mod S)/N, E = ⌊N/S⌋, n_e = ⌈T/E⌉, L = min(T, (k0+2)E − 2)
    with k0 the least k ≥ 0 making the last term ≤ 1e-13 (it is 0 when L = T).

    Proof. (1) For a fixed client i, its slots in epochs 0, 1, … are i.i.d. (one uniform
    permutation per epoch): slot j with probability s_j/N (s_j clients in slot j), out
    with probability ρ.
    So q_l is the same for every client, and the recursion of :func:`_run_probabilities`
    gives it exactly (the client's current run length is a Markov chain over epochs).
    (2) τ_max ≥ l iff some client has a run ≥ l (:mod:`participation.delays`), so by the
    union bound P(τ_max ≥ l) ≤ min(1, N q_l), and E[τ_max] = Σ_{l=1}^{T} P(τ_max ≥ l).
    (3) Let M_i be client i's longest streak of consecutive epochs sat out (within the
    n_e epochs that meet rounds 0..T−1). Every run of client i is at most (M_i + 2)E − 2:
    between selections in epochs a < a' (J = a' − a − 1 ≤ M_i epochs missed between) the
    run is (a' − a)E + b' − b − 1 ≤ (J + 2)E − 2; a leading run is a'E + b ≤ (J + 1)E − 1;
    a trailing run, cut at T − 1, is at most (J + 1)E + r − 1 ≤ (J + 2)E − 2 (r ≤ E − 1
    rounds of a partial last epoch), and a never-selected client sat out all epochs but
    perhaps a partial last one, so M_i ≥ n_e − 1 (n_e when E = 1) and T ≤ (M_i + 2)E − 2.
    (4) So a
    run ≥ l needs M_i ≥ k(l) = ⌈(l + 2)/E⌉ − 2, and P(M_i ≥ k) ≤ n_e ρ^k (a streak of k
    starts in one of ≤ n_e epochs; epochs are independent). For l > (k0 + 2)E − 2,
    k(l) ≥ k0 + 1 and each k covers E values of l: Σ_{l>L} N q_l ≤ E N n_e Σ_{k>k0} ρ^k,
    the added term. (5) The same facts give the epoch-level bound of
    :func:`epoch_union_bound`: τ_max ≤ (M + 2)E − 2 with M = max_i M_i, P(M ≥ k) ≤
    min(1, N n_e ρ^k), so E[τ_max] ≤ E(2 + Σ_{k≥1} min(1, N n_e ρ^k)) − 2. That bound (the
    one derived earlier for "drop") is correct with n_e = ⌈T/E⌉, but this one is never
    larger: min(1, N q_l) ≤ min(1, N P(M_i ≥ k(l))) termwise, the l ≤ 2E − 2 terms are ≤ 1,
    and the remaining l come in blocks of E per k. ∎

    When every client joins once per epoch (ρ = 0) the bound is still valid (compare
    :func:`reshuffled_exact_tau_max`). Floating point: q_l is summed from non-negative
    terms (relative error ≲ 1e-14); the result is raised by a relative 1e-12 to cover it.
    Cost: n_e epochs of O(L²) work, L ≈ E·(k0 + 2).
    Raises ValueError for a non-ReshuffledCyclic pattern or rounds < 1.
    """
    rounds = _check(pattern, rounds)
    n, s, epoch = pattern.n_clients, pattern.per_round, pattern.epoch_rounds
    rows, rest = _bound_rows(pattern, rounds)
    if rows == 0:
        return rest
    epochs = -(-rounds // epoch)
    require(f"the τ_max bound for ReshuffledCyclic(N={n}, S={s}, remainder={pattern.remainder!r}) over {rounds} "
            f"rounds ({epochs} epochs × {rows}² states)",
            8 * 8 * rows * (rows + 1) + 16 * rows * epoch, epochs * (3e-5 + rows * (2.5e-8 * rows + 1e-8 * epoch)))
    q = _run_probabilities(pattern, rounds, rows)
    return (math.fsum(np.minimum(1.0, n * q)) + rest) * (1 + BOUND_MARGIN)


# ---------------------------------------------------------------- "drop" with S ∤ N: an exact chain for small R


def _ages_of(state: tuple[int, ...], epoch: int, s: int) -> dict[int, int]:
    """Every client's current run at an epoch's start after epoch 0: S clients at each age
    0..E − 1 (slot j of the last epoch leaves E − 1 − j) and the R clients that sat it out."""
    ages = dict.fromkeys(range(epoch), s)
    for a in state:
        ages[a] = ages.get(a, 0) + 1
    return ages


def _survival(ages: dict[int, int], n: int, allowed) -> tuple[int, int]:
    """P(no run exceeds m in this epoch) as (numerator, denominator): the clients whose age
    restricts them may take the first ``allowed(a)`` positions of the order only (nested
    prefixes, growing as the age falls), the others any position; placing the restricted
    ones first, oldest first, gives Π_k (c_k − k)/(N − k)."""
    num = den = 1
    k = 0
    for a in sorted(ages, reverse=True):
        c = allowed(a)
        if c is None:
            continue
        for _ in range(ages[a]):
            if c - k <= 0:
                return 0, 1
            num, den, k = num * (c - k), den * (n - k), k + 1
    return num, den


def _compositions(groups: list[tuple[int, int]], size: int):
    """(counts, Π C(cnt_g, x_g)) for every way to take ``size`` clients from the groups."""
    if not groups:
        if size == 0:
            yield (), 1
        return
    (_, count), rest = groups[0], groups[1:]
    for x in range(min(count, size) + 1):
        for tail, weight in _compositions(rest, size - x):
            yield (x,) + tail, math.comb(count, x) * weight


def _drop_step(state, m: int, n: int, s: int, epoch: int):
    """One full epoch from ``state`` at threshold m: (survival (num, den), [(next state,
    (num, den))]). The R clients sitting out must have age a ≤ m − E (else their run passes
    m); a client of age a in slot j needs a + j ≤ m. Every position is open to the
    clients with a + E ≤ m, so given survival the R sitting out are a uniform R-subset of
    them, U in all: P = U!·W/N! and the next state is {a + E : a sits out}."""
    ages = _ages_of(state, epoch, s)
    keep = n - epoch * s
    num, den = _survival(ages, n, lambda a: None if a + epoch <= m else s * (m - a + 1))
    if num == 0:
        return (0, 1), []
    free = sorted((a, c) for a, c in ages.items() if a + epoch <= m)
    total = math.comb(sum(c for _, c in free), keep)
    moves = []
    for counts, weight in _compositions(free, keep):
        nxt = tuple(sorted(a + epoch for (a, _), x in zip(free, counts) for _ in range(x)))
        moves.append((nxt, (num * weight, den * total)))
    return (num, den), moves


def _drop_states(m: int, epoch: int, keep: int) -> list[tuple[int, ...]]:
    """The chain's states at threshold m: multisets of R ages in [E, m]."""
    return list(itertools.combinations_with_replacement(range(epoch, m + 1), keep))


def _drop_cost(pattern: ReshuffledCyclic, rounds: int, rows: int) -> tuple[float, float]:
    """(bytes, seconds) of the chain up to threshold rows − 1: Σ_m C(m − E + R, R) states,
    each with at most C(E + 2R − 1, R) moves (R left out of ≤ E + R age groups), built in
    Python (about 1e-5 + 4e-6 per move, measured); K epochs of sparse products per m."""
    n, s, epoch = pattern.n_clients, pattern.per_round, pattern.epoch_rounds
    keep, full = n - epoch * s, rounds // epoch
    moves = math.comb(epoch + 2 * keep - 1, keep)
    sizes = [math.comb(m - epoch + keep, keep) for m in range(epoch, rows)] or [0]
    states = sum(sizes)
    return (150.0 * max(sizes) * moves,
            states * (1e-5 + 4e-6 * moves) + full * (6e-6 * len(sizes) + 5e-9 * states * moves))


def _drop_tail(pattern: ReshuffledCyclic, rounds: int, exact: bool, rows: int | None = None):
    """P(τ_max ≥ l) for l = 1..L and the bound ``rest`` on Σ_{l>L} P(τ_max ≥ l), under
    ``"drop"`` with S ∤ N, by the chain of :func:`_drop_step` (T ≥ E). L is that of
    :func:`_bound_rows` unless ``rows`` is given (``rows = T``: no truncation)."""
    from scipy import sparse

    n, s, epoch, full, r = _shape(pattern, rounds)
    keep = n - epoch * s
    rows, rest = _bound_rows(pattern, rounds) if rows is None else (rows, 0.0)
    nbytes, seconds = _drop_cost(pattern, rounds, rows)
    require(f"the exact law of τ_max for ReshuffledCyclic(N={n}, S={s}, remainder='drop') over {rounds} rounds "
            f"(R = {keep} ages tracked up to {rows})", nbytes, seconds * (30 if exact else 1),
            advice="use reshuffled_tau_max_bound(pattern, rounds) or monte_carlo(pattern, rounds, reps)")
    zero, one = (Fraction(0), Fraction(1)) if exact else (0.0, 1.0)
    as_number = (lambda nd: Fraction(*nd)) if exact else (lambda nd: nd[0] / nd[1])
    failing = (lambda nd: Fraction(nd[1] - nd[0], nd[1])) if exact else (lambda nd: (nd[1] - nd[0]) / nd[1])
    tail = [one] * min(epoch, rows)                      # τ_max ≥ E: the R left out of epoch 0
    for m in range(epoch, rows):
        states = _drop_states(m, epoch, keep)
        index = {st: i for i, st in enumerate(states)}
        fail_full = [zero] * len(states)
        fail_part = [zero] * len(states)
        cols, rws, vals = [], [], []
        for i, st in enumerate(states):
            if full > 1:
                surv, moves = _drop_step(st, m, n, s, epoch)
                fail_full[i] = failing(surv)
                for nxt, nd in moves:
                    rws.append(i)
                    cols.append(index[nxt])
                    vals.append(as_number(nd))
            if r:
                surv = _survival(_ages_of(st, epoch, s), n, lambda a: None if a + r <= m else s * min(m - a + 1, r))
                fail_part[i] = failing(surv)
        start = index[(epoch,) * keep]                   # epoch 0 from age 0: everyone may sit out
        failed = zero
        if exact:
            step: dict[int, dict[int, Fraction]] = {}
            for i, j, v in zip(rws, cols, vals):
                step.setdefault(i, {})[j] = step.get(i, {}).get(j, zero) + v
            v = {start: one}
            for _ in range(full - 1):
                failed += sum(p * fail_full[i] for i, p in v.items())
                nxt: dict[int, Fraction] = {}
                for i, p in v.items():
                    for j, w in step.get(i, {}).items():
                        nxt[j] = nxt.get(j, zero) + p * w
                v = nxt
            if r:
                failed += sum(p * fail_part[i] for i, p in v.items())
        else:
            matrix = sparse.csr_matrix((vals, (cols, rws)), shape=(len(states),) * 2)  # transposed: v ← Pᵀ v
            v = np.zeros(len(states))
            v[start] = 1.0
            fail_full, fail_part = np.array(fail_full), np.array(fail_part)
            for _ in range(full - 1):
                failed += float(v @ fail_full)
                v = matrix @ v
            if r:
                failed += float(v @ fail_part)
        tail.append(failed)
    return tail, rest
