"""FedSUM (arXiv:2512.18275) as checkable theorems: bounds on (1/T) Σ_{t<T} E‖∇f(x_t)‖² written in
the participation's delays τ_max, τ_avg (Thm 4.1, Lemmas C.6, D.6, E.6, Thms C.1, D.1, E.1,
conditional on {S_t}) or their expectations (Cor 4.1, Cor G.1, over {S_t} too).

They run on ``check``'s delay path: Thm 4.1's step sizes (eq. (12)) at the trace's τ unless the
bound prescribes its own; the lemmas hold at any step sizes satisfying their hypotheses.
"""
from __future__ import annotations

from bounds import fedsum as bf
from participation import patterns

from ..verdicts import AVERAGE_GRAD_NORM2, AVERAGE_GRAD_NORM2_LATEX
from .contract import Theorem
from .measures import average_grad_norm2

__all__ = ["THEOREMS", "corollary_g1_for_pattern"]

_STEPS_41 = "FedSUM Thm 4.1's η_g, η_l (eq. (12)) at the trace's τ_max, τ_avg"


def corollary_g1_for_pattern(constants, pattern, expected_tau_max=None, expected_tau_avg=None):
    """FedSUM Cor G.1 (App. G) for the Section 2.1 case ``pattern`` belongs to: Uniform (Case 1,
    S = per_round), Bernoulli with constant p (Case 2, δ = min_i p_i), Cyclic (Case 3),
    ReshuffledCyclic (Case 4). Any other pattern is a ValueError naming the assumption."""
    if isinstance(pattern, patterns.Uniform):
        return bf.corollary_g1(constants, 1, per_round=pattern.per_round)
    if isinstance(pattern, patterns.Bernoulli):
        p = pattern.constant_probabilities(constants.rounds)
        return bf.corollary_g1(constants, 2, delta=float(p.min()))
    if isinstance(pattern, patterns.ReshuffledCyclic):
        return bf.corollary_g1(constants, 4, per_round=pattern.per_round)
    if isinstance(pattern, patterns.Cyclic):
        return bf.corollary_g1(constants, 3, per_round=pattern.per_round)
    raise ValueError(f"fedsum.corollary_g1 covers the participation cases of FedSUM Section 2.1 (Uniform, Bernoulli, "
                     f"Cyclic, ReshuffledCyclic), not {type(pattern).__name__}")


corollary_g1_for_pattern.__name__ = "corollary_g1"


#: The algorithms every FedSUM table runs: the family and the two baselines it is compared with.
ALGORITHMS = ("fedsum-b", "fedsum", "fedsum-cr", "fedavg", "scaffold")
#: A working ``fedverify bound`` line: the constants, then the delays and step sizes each bound takes.
_BASE = "--L 1 --sigma2 1 --delta-f 20 --F0 13 --N 20 --K 5 --T 400"
_TRACE = _BASE + " --tau-max 30 --tau-avg 14.2"


def _theorem(name, bound, covers, expectation, steps, example, assumptions="any problem, any trace or pattern",
             patterns=("P1", "P2", "P3"), formula=None, prescribes_steps=True) -> Theorem:
    return Theorem(name=f"fedsum.{name}", bound=bound, lhs=AVERAGE_GRAD_NORM2, lhs_latex=AVERAGE_GRAD_NORM2_LATEX, expectation=expectation,
                   covers=covers, steps=steps, plan=None, delay_bound=True, measure=average_grad_norm2,
                   assumptions=assumptions, example=example, patterns=patterns, algorithms=ALGORITHMS, formula=formula,
                   prescribes_steps=prescribes_steps)


_LEMMA_STEPS = "any η_g, η_l satisfying the lemma's hypotheses (by default Thm 4.1's)"
THEOREMS = {
    "fedsum.lemma_c6": _theorem("lemma_c6", bf.lemma_c6, ("fedsum-b",), "noise", _LEMMA_STEPS,
                                _TRACE + " --eta-g 0.18 --eta-l 0.0036", prescribes_steps=False),
    "fedsum.lemma_d6": _theorem("lemma_d6", bf.lemma_d6, ("fedsum",), "noise", _LEMMA_STEPS,
                                _TRACE + " --eta-g 0.18 --eta-l 0.0036", prescribes_steps=False),
    "fedsum.lemma_e6": _theorem("lemma_e6", bf.lemma_e6, ("fedsum-cr",), "noise", _LEMMA_STEPS,
                                _TRACE + " --eta-g 0.18 --eta-l 0.0006", prescribes_steps=False),
    "fedsum.theorem_4_1": _theorem("theorem_4_1", bf.theorem_4_1, bf.ALGORITHMS, "noise", _STEPS_41, _TRACE),
    "fedsum.theorem_c1": _theorem("theorem_c1", bf.theorem_c1, ("fedsum-b",), "noise", "Thm C.1's own", _TRACE),
    "fedsum.theorem_d1": _theorem("theorem_d1", bf.theorem_d1, ("fedsum",), "noise", "Thm D.1's own", _TRACE),
    "fedsum.theorem_e1": _theorem("theorem_e1", bf.theorem_e1, ("fedsum-cr",), "noise", "Thm E.1's own", _TRACE),
    "fedsum.corollary_4_1": _theorem("corollary_4_1", bf.corollary_4_1, bf.ALGORITHMS, "participation",
                                     "Thm 4.1's for each realised trace (Cor 4.1's oracle)",
                                     _BASE + " --tau-max 49.1 --tau-avg 22.7", "a pattern (traces drawn afresh per seed)"),
    "fedsum.corollary_g1": _theorem("corollary_g1", corollary_g1_for_pattern, bf.ALGORITHMS, "participation",
                                    "Thm 4.1's for each realised trace", _BASE + " --set case=1 --set per_round=4",
                                    "a Section 2.1 case: Uniform, Bernoulli, Cyclic or ReshuffledCyclic",
                                    patterns=("P1", "P2", "case3", "case4"), formula=bf.corollary_g1),
}
