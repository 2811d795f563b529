"""Which theorems have a worst case, over which class, and why the others do not.

A theorem is covered when its left side at σ² = 0 is a performance measure of a first-order
method that ``verify.worst_case.transcriptions`` writes, and each of its assumptions is a
constraint of a performance-estimation programme (``verify.worst_case.function_class``).
``COVERAGE`` holds one entry per theorem of the four papers; ``function_class_for`` turns a
theorem's ``bounds.Constants`` into its class.

σ² > 0: an exact stochastic worst case would need every realisation of the noise in the
programme. Each of the Σ_t K|S_t| gradient calls of a run branches the trajectory, so a noise
law with r outcomes makes r^(Σ_t K|S_t|) trajectories, each with its own points in the Gram
matrix; PEPit's stochastic examples stay at one step for this reason. The worst case here is the
deterministic one (σ² = 0), which is a lower bound on the worst case at any σ² > 0 (exact
gradients are among the oracles of variance at most σ²): measured sides of noisy runs are not
compared with it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .function_class import FunctionClass

__all__ = ["Coverage", "COVERAGE", "coverage", "function_class_for", "covered_theorems"]


@dataclass(frozen=True)
class Coverage:
    """``theorem``: its name; ``covered``: whether a worst case is computed; ``constants``: the
    class's constants it reads; ``algorithms``: those it transcribes for the theorem (the
    covered ones and the reference baselines); ``over_traces``: True for a bound in
    expectation over the participation (the worst case is then the mean over sampled traces of
    the per-trace worst case, an upper bound on the worst case of the expectation);
    ``reason``: why it is not covered, or what the programme relaxes."""

    theorem: str
    covered: bool
    constants: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = ()
    over_traces: bool = False
    reason: str = ""


_FEDSUM_ALGS = ("fedsum-b", "fedsum", "fedsum-cr", "fedavg", "scaffold")
_MOMENTUM_ALGS = ("fedgm", "fedavgm", "fednag", "qhm")
_FEDSUM_CLASS = ("L", "delta_f", "F0")
_MOMENTUM_CLASS = ("L", "delta_f", "heterogeneity")
_FEDSUM_NOTE = "FedSUM Assumption 1.1 with Δ_f and F_0 (Thm 4.1), at σ² = 0"


def _fedsum(name: str, over_traces: bool = False) -> Coverage:
    return Coverage(f"fedsum.{name}", True, _FEDSUM_CLASS, _FEDSUM_ALGS, over_traces, _FEDSUM_NOTE)


COVERAGE: dict[str, Coverage] = {c.theorem: c for c in (
    _fedsum("theorem_4_1"), _fedsum("theorem_c1"), _fedsum("theorem_d1"), _fedsum("theorem_e1"),
    _fedsum("lemma_c6"), _fedsum("lemma_d6"), _fedsum("lemma_e6"),
    _fedsum("corollary_4_1", over_traces=True), _fedsum("corollary_g1", over_traces=True),
    Coverage("momentum.theorem_4_1", True, _MOMENTUM_CLASS, _MOMENTUM_ALGS + ("fedavg",), False,
             "Server momentum A1 and A3 (σ_g² imposed at the global iterates), σ_l² = 0; one stage, so that Ḡ is "
             "(1/T) Σ ‖∇f(x_t)‖²"),
    Coverage("momentum.theorem_4_6", True, _MOMENTUM_CLASS, _MOMENTUM_ALGS + ("fedavg",), True,
             "as Thm 4.1, over uniformly sampled traces of m clients a round"),
    Coverage("momentum.theorem_5_1", False,
             reason="autonomous clients take a random number of local steps and arrive with random delays; the "
                    "algorithm (fedgm-autonomous) is not transcribed"),
    Coverage("momentum.corollary_g1", False, reason="autonomous clients, as momentum.theorem_5_1"),
    Coverage("cafed.theorem_1", False,
             reason="the left side F(w̄_T) − F* is an expectation over a Markov availability chain, and CA-Fed's "
                    "aggregation weights depend on loss estimates of the run (not a fixed linear method)"),
    Coverage("cafed.theorem_1_bias", False, reason="a statement about the problem's minimisers, not about a method"),
    Coverage("cafed.theorem_2", False, reason="as cafed.theorem_1"),
    Coverage("cafed.theorem_3", False, reason="a statement about the problem's minimisers, not about a method"),
    Coverage("logit.theorem_1", False,
             reason="LOGIT's generated gradients come from a trained network, not from a first-order oracle of "
                    "the class"),
    Coverage("logit.theorem_2", False, reason="as logit.theorem_1"),
    Coverage("logit.inequality_23", False,
             reason="its right side holds the generator error ε measured along the runs (App. A.1, eq. (23)); "
                    "LOGIT's gradients are generated, as logit.theorem_1"),
)}


def covered_theorems() -> tuple[str, ...]:
    return tuple(name for name, c in COVERAGE.items() if c.covered)


def coverage(theorem: str) -> Coverage:
    """The entry of ``theorem`` (its full name, "fedsum.theorem_4_1"); a user's theorem or an
    unknown name has none (ValueError naming the covered ones)."""
    name = getattr(theorem, "name", theorem)
    if name not in COVERAGE:
        raise ValueError(f"no worst-case coverage for {name!r}; covered: {', '.join(covered_theorems())}")
    return COVERAGE[name]


def function_class_for(theorem, constants) -> FunctionClass:
    """The class of ``theorem`` at ``constants`` (``bounds.Constants``): L, Δ_f and, as the
    theorem uses them, F_0 or σ_g² (``zeta2``, or ``extra["sigma_g2"]``). A theorem that is not
    covered, or a constant the class needs that is missing or zero, is a ValueError naming it."""
    entry = coverage(theorem)
    if not entry.covered:
        raise ValueError(f"{entry.theorem} has no worst case: {entry.reason}")
    values = {"L": constants.L, "delta_f": constants.delta_f}
    if "F0" in entry.constants:
        values["F0"] = constants.F0
    if "heterogeneity" in entry.constants:
        het = constants.zeta2 if constants.zeta2 is not None else constants.extra.get("sigma_g2")
        if het is None:
            raise ValueError(f"{entry.theorem}'s class needs σ_g² (Constants.zeta2 or extra['sigma_g2'])")
        values["heterogeneity"] = het
    for key, value in values.items():
        if not value > 0:
            raise ValueError(f"{entry.theorem}'s worst case needs {key} > 0, got {value!r} (a zero constant would "
                             "collapse the class)")
    return FunctionClass(**values)
