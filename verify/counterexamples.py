"""Search participation traces (and problems, and admissible step sizes) for a counterexample to a bound.

``conformance(factory, bound)`` runs a hypothesis search: each example draws a quadratic
problem, a trace and step sizes that satisfy the bound's hypotheses (``strategies.step_sizes``),
runs ``check`` over a few noise seeds and reports the ratio of the lower confidence limit to
the bound to ``hypothesis.target``, which steers the search toward the worst case. An
example whose lower limit exceeds the bound while every hypothesis holds is a
counterexample; hypothesis then shrinks it (fewer clients, rounds and active cells, a
simpler problem) and the minimal one is returned. Derandomised and without a database, so
the same call gives the same answer.

The module is ``verify.counterexamples``; the function is ``verify.conformance`` (one name,
one thing: ``from verify import conformance`` always gives the function).

Theorem 4.1 prescribes η_l ∝ √Δ_f, which is 0 on a problem whose x⁰ is already optimal
(Δ_f = 0): the theorem then prescribes no run at all, and such a draw is skipped (counted in
``ConformanceResult.skipped``), not reported as an error.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, example, given, reject, settings, target
from hypothesis.errors import Unsatisfiable
from hypothesis import strategies as st

import algorithms
from algorithms.problems import Quadratic
from participation import Trace
from participation.delays import delay_metrics

from . import search_spaces, strategies as vst
from .checking import CheckResult, check, resolve_bound, resolve_theorem
from .constants import estimate_constants
from .theorems import THEOREMS
from participation.validation import integer

__all__ = ["conformance", "ConformanceResult"]


@dataclass(frozen=True)
class ConformanceResult:
    """``found``: a counterexample exists among the examples tried. ``trace`` and ``result``
    are the minimal counterexample (after shrinking) when found, else the worst example seen;
    ``ratio`` is its measured/bound, ``worst_ratio`` the largest lower-limit/bound ratio met in
    the search among draws where every hypothesis holds and the theorem covers the algorithm,
    ``examples`` the number of examples evaluated."""

    found: bool
    trace: Trace | None
    ratio: float
    worst_ratio: float
    result: CheckResult | None
    problem: object
    examples: int
    skipped: int = 0
    #: Why the first skipped draw was skipped (a theorem with a plan of its own refuses draws outside its setting).
    skip_reason: str = ""

    def __str__(self) -> str:
        head = "counterexample found" if self.found else "no counterexample"
        text = f"{head} in {self.examples} examples; worst lower-limit/bound ratio {self.worst_ratio:.3g}"
        if self.skipped:
            text += f"; {self.skipped} draws skipped (" + (self.skip_reason or
                                                          "the theorem prescribes no positive step there, e.g. Δ_f = 0") + ")"
        if self.trace is not None:
            text += (f"; {'minimal' if self.found else 'worst'} trace {self.trace.n_rounds}×{self.trace.n_clients} "
                     f"with {int(self.trace.mask.sum())} active cells, ratio {self.ratio:.3g}")
        return text


class _Counterexample(Exception):
    pass


def _count(value, name: str, minimum: int = 1) -> int:
    return integer(value, name, minimum)


def _seed_cases(n_clients, rounds, theorem: str, local_steps: int) -> list[tuple]:
    """Cases tried before the random search (the default problems and traces only): on N = 2
    and 3 one-dimensional quadratics whose optimum is x⁰ = 0 (Δ_f = 0, all the error is client
    drift), client 0 joins every round and the others every other round, at the largest step
    sizes the theorem allows. Unequal participation is where drift-correction bugs show:
    random search met this schedule only near its 200th example. Theorem 4.1's prescribed
    steps vanish with Δ_f, so for it every b_i is shifted by 1 (optimum x* = 1, Δ_f = 1/2)."""
    sizes = [n_clients] if isinstance(n_clients, numbers.Integral) else [2, 3]
    T = rounds if isinstance(rounds, numbers.Integral) else 40
    cases = []
    for n in sizes:
        if n < 2:
            continue
        b = np.concatenate([[1.0], np.full(n - 1, -1.0 / (n - 1))])[:, None]      # Σ_i b_i = 0
        own = theorem not in vst.STEP_SIZE_THEOREMS
        if theorem == "fedsum.theorem_4_1" or own:
            b = b + 1.0
        problem = Quadratic(np.ones((n, 1)), b)
        rows = np.ones((2, n), dtype=bool)
        rows[0, 1:] = False
        trace = Trace(np.resize(rows, (T, n)))
        m = delay_metrics(trace)
        consts = estimate_constants(problem).to_constants(local_steps=local_steps, rounds=T)
        eta_g, eta_l = (None, None) if own else vst.largest_step_sizes(theorem, consts, m.tau_max, m.tau_avg)
        cases.append((problem, trace, eta_g, eta_l))
    return cases


def conformance(algorithm_factory=None, bound: str = "fedsum.lemma_d6", *, max_examples: int = 100,
                n_clients=st.integers(2, 6), rounds=40, seeds: int = 2, problems=None, traces=None,
                local_steps: int = 1, confidence: float = 0.95, shrink: bool = True) -> ConformanceResult:
    """Search for a trace on which ``algorithm_factory`` breaks ``bound``.

    ``algorithm_factory``: an algorithm name or a callable ``(eta_l=, eta_g=, local_steps=)
    -> Algorithm`` (an Algorithm subclass works). ``bound``: a lemma of
    ``strategies.STEP_SIZE_THEOREMS`` (step sizes drawn to meet its conditions) or
    ``"fedsum.theorem_4_1"`` (its prescribed step sizes). ``n_clients``, ``rounds``: values or
    strategies. ``problems``: a function ``n -> strategy of problems`` (default
    ``strategies.quadratic_problems`` with noise ≤ 0.01); ``traces``: a function
    ``(n, T) -> strategy of Traces`` (default: periodic schedules of 1–4 rows, near-full,
    arbitrary and near-empty masks).
    ``seeds``: noise seeds per example. ``shrink=False`` skips shrinking.

    A theorem with a step-size rule of its own (Server momentum, CA-Fed, LOGIT; see
    ``verify.theorems``) is searched over the problems, participation and options its
    assumptions allow (``verify.search_spaces``), at its own step sizes; ``algorithm_factory``
    is then an algorithm name (default: the first it covers when ``None``), and ``problems``
    and ``traces`` do not apply.
    """
    max_examples = _count(max_examples, "max_examples")
    seeds = _count(seeds, "seeds")
    local_steps = _count(local_steps, "local_steps")
    theorem = resolve_theorem(bound)
    if theorem.plan is not None:
        return _search_plan(theorem, algorithm_factory, max_examples=max_examples, n_clients=n_clients, rounds=rounds,
                            seeds=seeds, local_steps=local_steps, confidence=confidence, shrink=shrink,
                            default_search=problems is None and traces is None)
    spec = resolve_bound(theorem)
    drawn = spec.name in vst.STEP_SIZE_THEOREMS
    if spec.name.startswith("fedsum.") and spec.name not in vst.STEP_SIZE_THEOREMS:
        raise ValueError(f"conformance searches FedSUM's {', '.join(vst.STEP_SIZE_THEOREMS)}, not {spec.name}")
    if algorithm_factory is None:
        raise ValueError("give an algorithm name or factory to search")
    default_search = problems is None and traces is None
    if problems is None:
        def problems(n):
            return vst.quadratic_problems(n_clients=n, noise_std=st.floats(0.0, 0.01))
    if traces is None:
        def traces(n, t):
            return st.one_of(vst.traces(n, t, period=st.integers(1, 4)), vst.traces(n, t, fill=True),
                             vst.traces(n, t), vst.traces(n, t, fill=False))

    @st.composite
    def cases(draw):
        n = draw(vst._strategy(n_clients))
        T = draw(vst._strategy(rounds))
        problem = draw(problems(n))
        trace = draw(traces(n, T))

        if not drawn:           # the theorem's own step sizes (Thm 4.1's, or what the bound prescribes)
            return problem, trace, None, None
        m = delay_metrics(trace)
        consts = estimate_constants(problem).to_constants(local_steps=local_steps, rounds=T)
        if not vst.admits_step_sizes(spec.name, consts, m.tau_max, m.tau_avg):
            state["skipped"] += 1
            reject()
        eta_g, eta_l = draw(vst.step_sizes(spec.name, consts, m.tau_max, m.tau_avg))
        return problem, trace, eta_g, eta_l

    state = {"examples": 0, "skipped": 0, "worst": -math.inf, "worst_case": None, "failure": None}

    def evaluate(case) -> CheckResult:
        problem, trace, eta_g, eta_l = case
        if eta_g is None:
            try:
                return check(algorithm_factory, problem, trace, theorem, seeds, confidence=confidence,
                             local_steps=local_steps, step_sizes="theorem")
            except ValueError as err:     # e.g. Δ_f = 0: the theorem prescribes no positive step
                state["skipped"] += 1
                state.setdefault("reason", str(err))
                reject()
        if isinstance(algorithm_factory, str):
            algorithm = algorithms.get(algorithm_factory, eta_l=eta_l, eta_g=eta_g, local_steps=local_steps)
        else:
            algorithm = algorithm_factory(eta_l=eta_l, eta_g=eta_g, local_steps=local_steps)
        step_mode = "theorem" if spec.name == "fedsum.theorem_4_1" else "given"
        return check(algorithm, problem, trace, spec.function, seeds, confidence=confidence, step_sizes=step_mode)

    corpus = _seed_cases(n_clients, rounds, spec.name, local_steps) if default_search else []
    if not drawn:
        corpus = [(problem, trace, None, None) for problem, trace, _, _ in corpus]

    return _search(cases(), corpus, evaluate, state, max_examples=max_examples, shrink=shrink, covered_only=False)


def _search_plan(theorem, algorithm, *, max_examples, n_clients, rounds, seeds, local_steps, confidence, shrink,
                 default_search) -> ConformanceResult:
    """The search of :func:`conformance` for a theorem with a plan of its own."""
    if theorem.space is None:
        raise ValueError(f"{theorem.name} has no search space; conformance searches "
                         f"{', '.join(n for n, t in THEOREMS.items() if t.space is not None)} and the delay bounds")
    if algorithm is None:
        algorithm = theorem.covers[0]
    if not isinstance(algorithm, str):
        raise ValueError(f"{theorem.name} builds its algorithm at its own step sizes: give an algorithm name, "
                         f"not {type(algorithm).__name__}")
    state = {"examples": 0, "worst": -math.inf, "worst_case": None, "failure": None, "skipped": 0}

    def evaluate(case) -> CheckResult:
        problem, source, hparams, T = case
        try:
            return check(algorithm, problem, source, theorem, seeds, rounds=T, local_steps=local_steps,
                         confidence=confidence, hparams=hparams)
        except ValueError as err:   # a draw outside the theorem's setting (e.g. no admissible step): not a case
            state["skipped"] += 1
            state.setdefault("reason", str(err))
            reject()

    corpus = search_spaces.seed_cases(theorem, rounds) if default_search else []
    return _search(search_spaces.cases(theorem, n_clients, rounds), corpus, evaluate, state,
                   max_examples=max_examples, shrink=shrink, covered_only=True)


def _search(cases, corpus, evaluate, state, *, max_examples, shrink, covered_only) -> ConformanceResult:
    """The hypothesis search both kinds of theorem share: ``cases`` a strategy of tuples whose
    first two entries are the problem and the trace (or pattern), ``corpus`` the explicit cases
    tried first, ``evaluate(case) -> CheckResult``. A counterexample is a violated verdict with
    every hypothesis holding (and, with ``covered_only``, an algorithm the theorem covers: a
    plan's runs can leave its setting)."""
    def counts(result) -> bool:
        return result.conditions_hold and (result.covered is not False or not covered_only)

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None, verbosity=Verbosity.quiet,
              phases=(Phase.explicit, Phase.generate, Phase.target) + ((Phase.shrink,) if shrink else ()),
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
    @given(cases)
    def search(case):
        result = evaluate(case)
        state["examples"] += 1
        score = min(result.margin, 1e12)
        target(score, label="lower limit / bound")
        if score > state["worst"] and counts(result):
            state["worst"], state["worst_case"] = score, (case, result)
        if result.verdict == "violated" and counts(result):
            state["failure"] = (case, result)
            raise _Counterexample

    for case in corpus:
        search = example(case)(search)
    try:
        search()
    except (_Counterexample, Unsatisfiable):     # found one; or every draw was skipped
        pass
    found = state["failure"] is not None
    pick = state["failure"] if found else state["worst_case"]
    reason = state.get("reason", "")
    if pick is None:
        return ConformanceResult(False, None, math.nan, state["worst"], None, None, state["examples"], state["skipped"],
                                 reason)
    case, result = pick
    trace = case[1] if isinstance(case[1], Trace) else None
    return ConformanceResult(found, trace, result.ratio, state["worst"], result, case[0], state["examples"],
                             state["skipped"], reason)
