"""FedSUM Appendix F: the paper's bounds on E[τ_max], with the intermediate steps of
the same proofs (Lemmas F.1–F.4; eqs. (109)–(112)).

Appendices F/G call deterministic cyclic "Case 4" and reshuffled cyclic "Case 3"; the
bounds here are attached to the pattern, following Section 2's numbering.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field


from ..patterns import Cyclic, IndependentPattern, Pattern, ReshuffledCyclic, Uniform
from .laws.availability_laws import never_available_clients
from .laws.units import known_constant, probability_chunks
from ..validation import integer


@dataclass(frozen=True)
class PaperBound:
    """The lemma's stated bound in ``value``, every proof step in ``steps`` (label →
    value, tightest first), and where it comes from."""

    lemma: str
    value: float
    steps: dict[str, float] = field(default_factory=dict)
    source: str = ""
    note: str = ""


def _capped_geometric_sum(scale: float, p: float, rounds: int, log_p: float | None = None) -> float:
    """Σ_{l=1}^{T} min{1, scale·p^l} in closed form (no array of T terms): the terms are 1 up
    to l_1 = the last l with scale·p^l ≥ 1, then a geometric series. ``log_p`` = ln p when
    known more precisely than from p (p within rounding of 1)."""
    log_p = math.log(p) if log_p is None else log_p
    term = lambda l: scale * math.exp(l * log_p)  # noqa: E731
    guess = math.log(scale) / -log_p  # +∞ when ln p is subnormal
    ones = rounds if guess >= rounds else max(0, math.floor(guess))
    while ones < rounds and term(ones + 1) >= 1.0:
        ones += 1
    while ones > 0 and term(ones) < 1.0:
        ones -= 1
    if ones == rounds:
        return float(rounds)
    return ones + term(ones + 1) * -math.expm1((rounds - ones) * log_p) / -math.expm1(log_p)


def _union_bound_chain(n: int, rounds: int, present: float, lemma: str, delta_slack: float,
                       tags: tuple[int, int]) -> dict[str, float]:
    """Steps 2–4 of Lemmas F.1/F.2 for the per-round absence probability p = 1 − ``present``,
    ``present`` ∈ (0, 1) (S/N for F.1, δ for F.2).

    ``tags`` are the lemma's own equation numbers for steps 2 and 3: (109), (110) in the
    proof of F.1 and (111), (112) in that of F.2.

    step 2 (eq. (109)/(111)): Σ_{l=1}^{T} min{1, N T p^l};
    step 3 (eq. (110)/(112)): m + N T p^{m+1}/(1 − p), m = ⌈log_p((1 − p)/(N T p))⌉;
    step 4: ln(N T p / (1 − p)) / ln(1/p) + 2, the closed form before the final
    relaxation (F.1 uses p/(1−p) ≤ N, F.2 uses p/(1−p) ≤ 1/δ; ``delta_slack`` is that
    bound, giving the relaxed form ln(N T · slack)/ln(1/p) + 2).

    Every step is taken in logarithms with ln p = log1p(−present), so that a rare client
    (δ = 1e−200, where 1 − δ rounds to 1) still gives finite steps.
    """
    scale, log_p = n * rounds, math.log1p(-present)
    log_ratio = math.log(present) - math.log(scale) - log_p       # ln((1 − p)/(N T p))
    tail_sum = _capped_geometric_sum(scale, 1.0 - present, rounds, log_p)
    m = log_ratio / log_p
    eq110 = math.ceil(m) + scale * math.exp((math.ceil(m) + 1) * log_p) / present if math.isfinite(m) else math.inf
    closed = -log_ratio / -log_p + 2
    relaxed = (math.log(scale) + math.log(delta_slack)) / -log_p + 2
    return {f"{lemma} step 2: tail sum (eq. {tags[0]})": tail_sum, f"{lemma} step 3 (eq. {tags[1]})": eq110,
            f"{lemma} step 4: closed form": closed, f"{lemma} step 4 relaxed": relaxed}


def _min_probability(pattern: IndependentPattern, rounds: int) -> float:
    """δ = min_{i, t<rounds} p_i^t, read in chunks of rounds (never one rounds × clients array)."""
    known = known_constant(pattern)
    if known is not None:
        return float(known.min())
    return min(float(p.min()) for _, p in probability_chunks(pattern, rounds))


def paper_tau_max_bound(pattern: Pattern, rounds: int) -> PaperBound:
    """The FedSUM bound on E[τ_max] for ``pattern`` over ``rounds`` rounds.

    * Uniform (Lemma F.1): 4N/S · ln(NT), needs S < N.
    * Independent (Lemma F.2): (4/δ) max{ln(NT), ln(1/δ)} with δ = min p_i^t; a client
      with p = 0 (never available) has no bound: τ_t = t + 1, and a ValueError says so.
      The lemma assumes time-constant p_i; the union bound holds unchanged for
      time-varying p_i^t ≥ δ (derived here: a run of l absences has probability ≤ (1 − δ)^l),
      which covers P3 and H.8.
    * Reshuffled cyclic (Lemma F.3): 4N/S, via τ_max ≤ 2⌊N/S⌋ (a.s.) in its proof, where an
      epoch of N/S rounds has every client join once (S | N). When S ∤ N,
      ``remainder="short"`` keeps one join per client per epoch of ⌈N/S⌉ rounds, so
      τ_max ≤ 2⌈N/S⌉ − 2 ≤ 2N/S a.s. (two joins at most 2⌈N/S⌉ − 1 rounds apart; derived
      here) and 4N/S still holds; ``remainder="drop"`` leaves the N mod S clients at the
      end of each epoch's order out of that epoch, so a client can miss any number of
      consecutive epochs (each with probability (N mod S)/N, independently): τ_max = T
      has positive probability, the lemma's proof does not apply, and a ValueError says so.
    * Deterministic cyclic (Lemma F.4): 2N/S (deterministic).
    """
    n_rounds = integer(rounds, "rounds")
    never = never_available_clients(pattern, n_rounds)
    if never.size:
        raise ValueError(f"client {int(never[0])} has p = 0: it is never available, so τ_t = t + 1 grows with T without "
                         "bound (τ_max = T) and no bound applies (FedSUM Lemma F.2 needs δ = min p > 0)")
    if isinstance(pattern, Uniform):
        n, s = pattern.n_clients, pattern.per_round
        if s >= n:
            raise ValueError(f"Lemma F.1 needs S < N, got S={s}, N={n} (τ_max = 0 then)")
        steps = _union_bound_chain(n, n_rounds, s / n, "F.1", delta_slack=n, tags=(109, 110))
        stated = 4 * n / s * math.log(n * n_rounds)
        steps["F.1 stated: 4N/S ln(NT)"] = stated
        return PaperBound("FedSUM Lemma F.1", stated, steps, "FedSUM App. F, proof of Lemma F.1, eqs. (109)–(110)")
    if isinstance(pattern, IndependentPattern):
        n = pattern.n_clients
        delta = _min_probability(pattern, n_rounds)
        if delta <= 0:
            raise ValueError("Lemma F.2 needs δ = min p > 0; this pattern has a zero participation probability")
        stated = 4 / delta * max(math.log(n * n_rounds), -math.log(delta))
        steps = {}
        if delta < 1:
            steps = _union_bound_chain(n, n_rounds, delta, "F.2", delta_slack=1 / delta, tags=(111, 112))
            steps["F.2 after eq. (112): ln(NT)/δ + ln(1/δ)/δ + 2"] = math.log(n * n_rounds) / delta - math.log(delta) / delta + 2
        steps["F.2 stated: (4/δ) max{ln NT, ln 1/δ}"] = stated
        return PaperBound("FedSUM Lemma F.2", stated, steps, "FedSUM App. F, proof of Lemma F.2, eqs. (111)–(112)", note=f"δ = {delta:.6g}")
    if isinstance(pattern, ReshuffledCyclic):
        n, s = pattern.n_clients, pattern.per_round
        left = n % s
        if left and pattern.remainder == "drop":
            raise ValueError(f"FedSUM Lemma F.3 does not cover ReshuffledCyclic(N={n}, S={s}, remainder='drop'): "
                             f"the N mod S = {left} clients left at the end of each epoch's order sit that epoch out, "
                             "so a client can miss any number of consecutive epochs and τ_max has no almost-sure "
                             "bound short of T (the lemma's proof has every client join once per epoch; remainder='short' "
                             "keeps it); participation.expected.laws.reshuffled.reshuffled_tau_max_bound(pattern, rounds) bounds "
                             "E[τ_max], exact_tau_max(pattern, rounds) gives it where N mod S is small, "
                             "monte_carlo(pattern, rounds, reps) estimates it")
        if left:  # "short": epochs of ⌈N/S⌉ rounds, the last one with the N mod S clients left over
            steps = {"F.3 proof for S ∤ N, 'short' epochs of ⌈N/S⌉ rounds: 2⌈N/S⌉ − 2": 2 * -(-n // s) - 2}
        else:
            steps = {"F.3 proof: 2⌊N/S⌋": 2 * (n // s)}
        steps["F.3 stated: 4N/S"] = 4 * n / s
        return PaperBound("FedSUM Lemma F.3", 4 * n / s, steps, "FedSUM App. F, Lemma F.3 and its proof",
                          note="holds almost surely; the paper calls this pattern Case 3")
    if isinstance(pattern, Cyclic):
        n, s = pattern.n_clients, pattern.per_round
        return PaperBound("FedSUM Lemma F.4", 2 * n / s, {"F.4 stated: 2N/S": 2 * n / s},
                          "FedSUM App. F, Lemma F.4 and its proof", note="deterministic; the paper calls this pattern Case 4")
    raise ValueError(f"the papers give no bound on E[τ_max] for {type(pattern).__name__}")
