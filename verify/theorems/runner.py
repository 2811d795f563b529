"""Run a theorem's :class:`~verify.theorems.contract.Plan` and judge it: the left side per run
(or per trace, or without runs for a statement about the problem alone), the bound after the
runs, and the verdict of the one judge, ``verify.verdicts.judge``.

``run_plans`` checks many (theorem, setup) pairs at once: it lists every run they need, runs
those that share an algorithm (up to step sizes), problem and length as batches
(``algorithms.run_batch``), then judges each pair. A run gives the same numbers alone or in a
batch, so the verdicts are those of ``run_plan`` on each pair.

Each judged row may also carry the exact worst case of its left side over the theorem's class
(``worst_case_column``): at the row's own step sizes and traces, when the run is noise-free
(σ² = 0), the theorem is covered by ``verify.worst_case.coverage`` for the algorithm, and the
programmes are predicted to solve within the row's budget (``AUTO_SECONDS`` by default, the
engine's limit when forced). ``verify.worst_case`` and PEPit are imported only for a row that
gets that far.
"""
from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

import algorithms
from algorithms.engine import batch_key

from ..verdicts import (CheckResult, WorstCaseColumn, distinct_seeds, judge, noise_free, rounding_tolerance,
                        with_worst_case)
from .contract import Plan, Setup, Theorem
from .delay import delay_plan, plan_delays, uncovered_note
from .measures import measured_value

__all__ = ["run_plan", "run_plans", "make_plan", "execute_runs", "one_by_one", "RunRequest", "judge_recorded",
           "worst_case_column", "worst_case_refusal", "worst_case_mode", "known_constants", "attach_worst_case",
           "look_at", "require_number", "AUTO_SECONDS", "WORST_CASE_MODES", "NOISY"]


def make_plan(theorem: Theorem, setup: Setup) -> Plan:
    """The theorem's plan on ``setup``: its own, or the delay plan of a delay bound
    (:func:`verify.theorems.delay.delay_plan`)."""
    theorem.require_checkable()
    return theorem.plan(setup) if theorem.plan is not None else delay_plan(theorem, setup)


def require_number(bound, theorem_name: str) -> None:
    """Refuse a bound whose value is NaN (a bound must be a number, or inf)."""
    if math.isnan(float(bound.value)):
        raise ValueError(f"the bound of {theorem_name} is NaN at these inputs: a bound must be a number (or inf)")


def _plan_algorithm(plan, j: int):
    return plan.algorithm[j] if isinstance(plan.algorithm, (list, tuple)) else plan.algorithm


@dataclass(frozen=True, eq=False)
class RunRequest:
    """One run a plan needs: the algorithm, the problem, the trace, the seed and the keywords of
    ``algorithms.run``."""

    algorithm: object
    problem: object
    trace: object
    seed: int
    options: dict = field(default_factory=dict)


def _options_key(options: dict) -> tuple:
    return tuple(sorted((k, id(v) if callable(v) else repr(v)) for k, v in options.items()))


#: Bytes of per-run state a batch may hold (about eight (N, d) tables a run); larger batches
#: are split, which changes no number.
BATCH_BYTES = 2**29


def _batch_limit(problem) -> int:
    return max(1, BATCH_BYTES // (64 * max(1, problem.n_clients) * max(1, problem.dim)))


_ONE_BY_ONE = [False]


@contextmanager
def one_by_one():
    """Within this block every run is a batch of its own: the same numbers, one run at a time
    (what ``fedverify bench`` measures the batches against)."""
    _ONE_BY_ONE.append(True)
    try:
        yield
    finally:
        _ONE_BY_ONE.pop()


def execute_runs(requests: list, device=None) -> list:
    """The History of every request, in order; requests that can share a batch run as one."""
    if _ONE_BY_ONE[-1]:
        return [algorithms.run(r.algorithm, r.problem, r.trace, seed=r.seed, device=device, **r.options)
                for r in requests]
    groups: dict = {}
    for index, req in enumerate(requests):
        key = (batch_key(req.algorithm), id(req.problem), req.trace.n_rounds, _options_key(req.options))
        groups.setdefault(key, []).append(index)
    out = [None] * len(requests)
    for members in groups.values():
        first = requests[members[0]]
        limit = _batch_limit(first.problem)
        for start in range(0, len(members), limit):
            chunk = members[start:start + limit]
            histories = algorithms.run_batch([requests[i].algorithm for i in chunk], first.problem,
                                             [requests[i].trace for i in chunk], [requests[i].seed for i in chunk],
                                             device=device, **first.options)
            for i, history in zip(chunk, histories):
                out[i] = history
    return out


@dataclass
class _Pending:
    theorem: Theorem
    setup: Setup
    plan: Plan
    paired: bool
    requests: list                       # (trace index j, RunRequest)
    kwargs: dict


def _pending(theorem: Theorem, setup: Setup, kwargs: dict) -> _Pending:
    theorem.require_checkable()
    distinct_seeds(setup.seeds)
    plan = _built(make_plan(theorem, setup), kwargs.get("build"))
    paired = setup.pattern is not None and theorem.expectation == "participation" and len(plan.traces) == len(setup.seeds)
    requests = [(j, RunRequest(_plan_algorithm(plan, j), setup.problem, trace, seed, dict(plan.run_options)))
                for j, trace in enumerate(plan.traces)
                for seed in ([setup.seeds[j]] if paired else setup.seeds)]
    return _Pending(theorem, setup, plan, paired, requests, kwargs)


def _built(plan: Plan, build) -> Plan:
    """``plan`` with its algorithm built by ``build(eta_g, eta_l)`` at each trace's step sizes where
    it leaves it to its caller (``plan.trace_steps``, a delay bound's): one Algorithm per distinct
    step sizes."""
    if plan.algorithm is not None or plan.trace_steps is None:
        return plan
    if build is None:
        raise ValueError("the plan leaves its algorithm to be built at each trace's step sizes: give build")
    built: dict = {}
    for s in plan.trace_steps:
        key = (s["eta_g"], s["eta_l"])
        if key not in built:
            built[key] = build(s["eta_g"], s["eta_l"])
    plan.algorithm = [built[(s["eta_g"], s["eta_l"])] for s in plan.trace_steps]
    return plan


def run_plan(theorem: Theorem, setup: Setup, *, confidence: float, device=None, const_info: dict | None = None,
             notes: list[str] | None = None, on_run=None, worst_case=False, build=None) -> CheckResult:
    """Check ``theorem`` on ``setup``: build its plan, run every (trace, seed), measure, judge.

    ``plan.algorithm`` is one Algorithm or one per trace (step sizes that depend on the trace), or
    None with ``plan.trace_steps`` (a delay bound's): then ``build(eta_g, eta_l) -> Algorithm``
    builds it at each trace's step sizes; ``worst_case``: one of :data:`WORST_CASE_MODES` (see
    :func:`worst_case_column`)."""
    return run_plans([(theorem, setup, dict(confidence=confidence, const_info=const_info, notes=notes,
                                            on_run=on_run, worst_case=worst_case, build=build))], device=device)[0]


def run_plans(items: list, device=None) -> list[CheckResult]:
    """``run_plan`` of every (theorem, setup, keywords) in ``items`` (keywords: ``confidence``,
    ``const_info``, ``notes``, ``on_run``, ``worst_case``, ``build``), with their runs batched together."""
    pending = [_pending(theorem, setup, kwargs) for theorem, setup, kwargs in items]
    flat = [req for p in pending for _, req in p.requests]
    histories = iter(execute_runs(flat, device=device))
    return [_judge(p, [next(histories) for _ in p.requests]) for p in pending]


def judge_recorded(theorem: Theorem, setup: Setup, plan: Plan, histories: list, *, confidence: float,
                   const_info: dict | None = None, notes: list[str] | None = None, worst_case=False,
                   column=None) -> CheckResult:
    """The verdict of ``plan`` on recorded runs (``verify.check_run``): ``histories[j]`` is the
    run that followed ``plan.traces[j]``, with seed ``setup.seeds[j]``; measured and judged as
    ``run_plan`` measures and judges fedverify's runs (with the worst case beside it as ``worst_case`` asks,
    or ``column(result)`` when given: a plan without algorithms to transcribe). Where the records are
    named (``setup.recorded_names``), messages name them, a record whose left side is infinite is
    listed as diverged and one record alone is said to be one sample."""
    if len(histories) != len(plan.traces) or len(setup.seeds) != len(plan.traces):
        raise ValueError(f"{len(histories)} recorded runs for {len(plan.traces)} traces")
    requests = [(j, RunRequest(_plan_algorithm(plan, j), setup.problem, trace, seed))
                for j, (trace, seed) in enumerate(zip(plan.traces, setup.seeds))]
    pending = _Pending(theorem, setup, plan, False, requests,
                       dict(confidence=confidence, const_info=const_info, notes=notes, worst_case=worst_case,
                            column=column))
    return _judge(pending, list(histories))


def _judge(pending: _Pending, run_histories: list) -> CheckResult:
    theorem, setup, plan, paired = pending.theorem, pending.setup, pending.plan, pending.paired
    confidence = pending.kwargs["confidence"]
    const_info, on_run = pending.kwargs.get("const_info"), pending.kwargs.get("on_run")
    notes = list(pending.kwargs.get("notes") or []) + list(plan.notes)
    names = setup.recorded_names
    histories, values, stopped, used, first = [], [], [], [], None
    if plan.values is not None:
        values = [float(v) for v in plan.values()]
    by_trace: dict = {}
    for (j, req), history in zip(pending.requests, run_histories):
        by_trace.setdefault(j, []).append((req, history))
    for j, trace in enumerate(plan.traces):
        per = []
        for req, history in by_trace.get(j, []):
            seed, alg = req.seed, req.algorithm
            if on_run is not None:
                on_run(history, trace, alg, seed)
            first = history if first is None else first
            used.append(seed)
            if history.stopped is not None:
                stopped.append(f"seed {seed}" + (f", trace {j}" if paired or len(plan.traces) > 1 else "")
                               + f": {history.stopped}")
                per.append(math.inf)
                continue
            histories.append(history)
            label = f"seed {seed}" if names is None else names[j] or "a record"
            with np.errstate(over="ignore", invalid="ignore"):
                value = measured_value(plan.measure(history, setup.problem), theorem.name, label)
            if math.isnan(value) and names is not None:     # a record holds finite numbers: NaN is the measure's
                raise ValueError(f"the left side of {theorem.name} measured NaN on {label}: the theorem's measure "
                                 "returned NaN (a measure must give a number for every record)")
            if math.isnan(value):
                raise ValueError(f"the left side of {theorem.name} measured NaN on {label}, a run that did not stop: "
                                 "the theorem's measure returned NaN (a measure must give a number for every finished run)")
            if names is not None and not math.isfinite(value):
                stopped.append(f"{names[j] or f'record {j}'}: diverged")
            per.append(value)
        if theorem.expectation == "participation" and not paired and len(per) > 1:
            # the unit is the trace: seeds on one trace sample the noise, not the participation
            values.append(sum(per) / len(per))
        else:
            values.extend(per)
    if not values:
        raise ValueError(f"{theorem.name}: the plan gave no run and no value to judge")
    # when every run diverged, the bound reads its measured inputs from the first run as far as it got
    bound = plan.bound(histories if histories or plan.values is not None else [first])
    require_number(bound, theorem.name)
    consts = setup.constants
    exact = plan.noise_free if plan.noise_free is not None else noise_free(
        consts.sigma2, theorem.expectation, setup.pattern)
    atol = rounding_tolerance(consts)
    bound_range = plan.bound_range(histories) if plan.bound_range is not None else None
    decision = judge(values, bound_range or float(bound.value), confidence=confidence, noise_free=exact, atol=atol,
                     nonnegative=plan.nonnegative)
    decision = _unrescued(decision, plan, histories, values, confidence, exact, atol, bound)
    notes += list(decision.notes)
    if names is not None and len(values) == 1 and not exact:
        notes.append("one record is one sample: record the same setting with other seeds and judge them together")
    conditions = tuple(bound.conditions)
    if not all(c.holds for c in conditions):
        notes.append(f"a hypothesis of the bound fails at {'these' if names is None else 'the recorded'} step sizes: "
                     "the verdict does not test the theorem")
    covered = plan.covered(histories) if plan.covered is not None else None
    reason = None
    if isinstance(covered, str):            # not covered, and why
        covered, reason = False, covered
    if covered is None:
        covered = theorem.covered(setup.algorithm)
    if setup.algorithm in theorem.reductions:
        notes.append(f"{setup.algorithm}: {theorem.reductions[setup.algorithm]}")
    if covered is False and not theorem.covered(setup.algorithm):
        notes.append(uncovered_note(theorem, setup.algorithm))
    elif covered is False:
        notes.append(uncovered_note(theorem, reason=reason))
    if plan.steps_outside:
        notes.append(f"step sizes outside {theorem.name}'s: {plan.steps_outside}")
    fixed_trace = plan.fixed_trace if plan.fixed_trace is not None else (
        theorem.expectation == "participation" and setup.pattern is None and bool(plan.traces))
    metrics = plan_delays(plan)
    tau = plan.tau or (math.nan, math.nan)          # a bound without τ: the delays are not part of it
    extras = plan.extras(histories) if plan.extras is not None and (histories or not plan.traces) else {}
    first_alg = _plan_algorithm(plan, 0) if plan.traces else None
    result = CheckResult(
        verdict=decision.verdict, measured=decision.measured, lower=decision.lower, upper=decision.upper,
        confidence=float(confidence), values=tuple(values),
        seeds=tuple(used) if setup.recorded is not None else tuple(dict.fromkeys(used)), bound=bound,
        bound_name=theorem.name, algorithm=setup.algorithm, hparams=getattr(first_alg, "hparams", {}) or {},
        step_sizes=dict(plan.step_sizes), conditions=conditions, tau_max=tau[0], tau_avg=tau[1],
        n_clients=setup.n_clients, rounds=setup.rounds, local_steps=setup.local_steps,
        expectation=theorem.expectation == "participation", constants=dict(const_info or {}), stopped=tuple(stopped),
        notes=tuple(dict.fromkeys(notes)), atol=atol,
        per_trace_tau=tuple((int(m.tau_max), float(m.tau_avg)) for m in metrics), first_run=first,
        covered=covered, lhs=theorem.lhs, extras=extras, diverged=decision.diverged,
        steps_outside=plan.steps_outside, fixed_trace=fixed_trace, bound_range=bound_range)
    if pending.kwargs.get("column") is not None:
        column = pending.kwargs["column"](result)
    else:
        column = worst_case_column(theorem.name, [_plan_algorithm(plan, j) for j in range(len(plan.traces))],
                                   plan.traces, consts, mode=pending.kwargs.get("worst_case", False),
                                   measured=result.measured, bound=result.bound_value, extras=extras)
    return attach_worst_case(result, column, lambda: known_constants(setup.problem, histories))


def _unrescued(decision, plan, histories, values, confidence, exact, atol, bound):
    """``decision``, unless constants estimated on the judged runs rescue it: where the runs are
    "violated" against the bound at those constants measured at the runs' start
    (``Plan.start_bound``) but not against the bound read along the runs, the verdict is
    "inconclusive", never "holds" (a diverging run inflates the constants it is judged with)."""
    import dataclasses

    if plan.start_bound is None or decision.verdict == "violated" or not histories:
        return decision
    start = plan.start_bound(histories)
    if start is None or math.isnan(float(start.value)):
        return decision
    cautious = judge(values, float(start.value), confidence=confidence, noise_free=exact, atol=atol,
                     nonnegative=plan.nonnegative)
    if cautious.verdict != "violated":
        return decision
    note = (f"constants estimated on the judged runs rescue them: at the constants of the runs' start the bound is "
            f"{float(start.value):.4g} and the runs are 'violated'; read along the runs the constants raise it to "
            f"{float(bound.value):.4g}, so the verdict is 'inconclusive', never '{decision.verdict}' (give the "
            "constants, or check runs that do not diverge)")
    return dataclasses.replace(decision, verdict="inconclusive", notes=decision.notes + (note,))


def attach_worst_case(result: CheckResult, column: WorstCaseColumn, known) -> CheckResult:
    """``result`` with ``column`` beside it (``verify.verdicts.with_worst_case``); ``known()`` lists
    what the check knows of the class's constants, asked only for a run outside the class."""
    from ..verdicts import beyond_worst_case

    outside = beyond_worst_case(result.measured, column)
    return with_worst_case(result, column, look_at(column, known()) if outside else "")


# ---------------------------------------------------------------------------- worst case

#: What a check does about the worst case: "auto" (solved when predicted to take under
#: ``AUTO_SECONDS`` a row), True (solved up to the engine's limit, ``FEDVERIFY_WORST_CASE_SECONDS``),
#: False (not computed).
WORST_CASE_MODES = ("auto", True, False)
#: Predicted seconds a row's programmes may take when the worst case is on by default ("auto").
AUTO_SECONDS = 5.0
#: Why a noisy run has no worst case beside it.
NOISY = ("σ² > 0: the worst case at σ² = 0 is a lower bound on the class's worst case and a noisy run is not "
         "compared with it")
_SYMBOLS = {"L": "L", "delta_f": "Δ_f", "F0": "F_0", "heterogeneity": "σ_g²", "sigma2": "σ²"}


def worst_case_mode(value):
    """``value`` as one of :data:`WORST_CASE_MODES`, or a one-line ValueError naming it."""
    if value is True or value is False or value == "auto":
        return value
    raise ValueError(f"worst_case must be 'auto', True or False, got {value!r}")


def _engine(algorithm):
    """The algorithm as the worst-case engine transcribes it: a one-stage schedule (server momentum)
    becomes the stage's own (η, β, ν); several stages are refused (the class's measure is one stage's
    average)."""
    schedule = getattr(algorithm, "schedule", None)
    if schedule is None:
        return algorithm
    if schedule.n_stages != 1:
        raise ValueError(f"{algorithm.name} runs a schedule of {schedule.n_stages} stages; the worst case is of one "
                         "stage's (1/T) Σ ‖∇f(x_t)‖² (give one stage)")
    return algorithms.get(algorithm.name, eta_l=schedule.eta_l, eta_g=float(schedule.eta_g[0]),
                          beta=float(schedule.beta[0]), nu=float(schedule.nu[0]), local_steps=algorithm.local_steps)


def _class_constants(entry, constants, extras):
    """``constants`` with σ_g² (``zeta2``) taken from the runs' measured ``extras["sigma_g2"]`` when
    the class bounds the heterogeneity and the constants do not give it."""
    if "heterogeneity" not in entry.constants or constants.zeta2 is not None:
        return constants
    if (constants.extra or {}).get("sigma_g2") is not None:
        return constants
    measured = (extras or {}).get("sigma_g2")
    if isinstance(measured, (int, float)) and not isinstance(measured, bool) and math.isfinite(measured):
        return dataclasses.replace(constants, zeta2=float(measured))
    return constants


def _programmes(entry, plan_algorithms, traces):
    """(engine algorithm, trace) per trace, or the reason the row has none."""
    try:
        engines = [_engine(a) for a in plan_algorithms]
    except ValueError as err:
        return None, f"not covered: {err}"
    names = sorted({a.name for a in engines})
    outside = [n for n in names if n not in entry.algorithms]
    if outside:
        return None, (f"not covered: {entry.theorem}'s worst case runs {', '.join(entry.algorithms)}, "
                      f"not {', '.join(outside)}")
    return list(zip(engines, traces)), None


def _budget(mode, predicted: float):
    """The reason a row's programmes are not solved within its budget, or None."""
    from ..worst_case.programme import _limit

    if mode == "auto":
        if predicted <= AUTO_SECONDS:
            return None
        return (f"would take about {predicted:.0f} s, above the {AUTO_SECONDS:g} s a check spends by default "
                "(--worst-case, worst_case=True: up to FEDVERIFY_WORST_CASE_SECONDS)")
    try:
        limit = _limit(None)
    except ValueError as err:
        return str(err)
    if predicted <= limit:
        return None
    return f"would take about {predicted:.0f} s, above the limit of {limit:g} s (FEDVERIFY_WORST_CASE_SECONDS)"


def worst_case_refusal(theorem_name: str, constants, mode) -> str | None:
    """Why a row of ``theorem_name`` at ``constants`` gets no worst case whatever its runs (``mode``
    False, σ² > 0, the theorem not covered), or None. Nothing of ``verify.worst_case`` is imported
    for a noisy row."""
    mode = worst_case_mode(mode)
    if mode is False:
        return "turned off (--no-worst-case, worst_case=False)"
    if constants.sigma2 != 0:
        return NOISY
    from ..worst_case.coverage import coverage

    try:
        entry = coverage(theorem_name)
    except ValueError as err:
        return f"not covered: {err}"
    return None if entry.covered else f"not covered: {entry.reason}"


def worst_case_column(theorem_name: str, plan_algorithms, traces, constants, *, mode, measured: float,
                      bound: float, extras: dict | None = None) -> WorstCaseColumn:
    """The worst case of the left side of ``theorem_name`` over its class at ``constants``
    (``function_class_for``) for ``plan_algorithms[j]`` (at its own step sizes) on ``traces[j]``:
    the one trace's worst case for a conditional theorem, the mean of the per-trace worst cases for
    a theorem in expectation over the participation (an upper bound on the worst case of the
    expectation). A row that cannot be solved gets the reason (``mode`` False, σ² > 0, not covered,
    a class constant missing, over the time budget, a solver failure), never a blank."""
    refusal = worst_case_refusal(theorem_name, constants, mode)
    if refusal:
        return WorstCaseColumn.missing(refusal)
    from ..worst_case.coverage import coverage, function_class_for

    entry = coverage(theorem_name)
    if not traces:
        return WorstCaseColumn.missing("not covered: the left side is measured without a run")
    pairs, reason = _programmes(entry, plan_algorithms, traces)
    if reason:
        return WorstCaseColumn.missing(reason)
    try:
        fc = function_class_for(theorem_name, _class_constants(entry, constants, extras))
    except ValueError as err:
        return WorstCaseColumn.missing(str(err))
    from ..worst_case.programme import active_sets, programme_size

    predicted = 0.0
    for alg, trace in pairs:
        sets, n = active_sets(trace)
        predicted += programme_size(alg.name, sets, n, alg.local_steps).seconds
    reason = _budget(mode, predicted)
    if reason:
        return WorstCaseColumn.missing(reason, predicted)
    return _solved(entry, fc, pairs, predicted, measured, bound)


def _solved(entry, fc, pairs, predicted: float, measured: float, bound: float) -> WorstCaseColumn:
    """Solve every (algorithm, trace) programme and combine them into the row's column."""
    from ..worst_case import worst_case

    results = []
    for alg, trace in pairs:
        try:
            results.append(worst_case(alg, trace, fc))
        except ValueError as err:
            return WorstCaseColumn.missing(f"the solve failed: {err}", predicted)
    values = [r.value for r in results]
    value = None if any(v is None for v in values) else float(sum(values) / len(values))
    status = next((r.status for r in results if r.status != "optimal"), "optimal")
    accuracies = [r.accuracy for r in results]
    accuracy = None if any(a is None for a in accuracies) else float(max(accuracies))
    if entry.over_traces:
        label = "mean of per-trace worst cases: an upper bound on the worst case of the expectation"
        label += " (one trace)" if len(results) == 1 else f" ({len(results)} traces)"
    else:
        label = "worst case on the trace"
    positive = value is not None and value > 0
    slack = bound / value if positive and math.isfinite(bound) else None
    benign = value / measured if value is not None and math.isfinite(measured) and measured > 0 else None
    return WorstCaseColumn(value=value, label=label, status=status, solver=results[0].solver, accuracy=accuracy,
                           function_class=fc.describe(), relaxation=results[0].relaxation, slack=slack,
                           benignness=benign, reason=None if value is not None else
                           "the programme is unbounded: the class has no finite worst case at these step sizes",
                           predicted=predicted, seconds=float(sum(r.seconds for r in results)), traces=len(results),
                           constants={k: v for k, v in fc.as_dict().items() if v is not None})


def known_constants(problem, histories) -> list[str]:
    """What the check knows of the class's constants besides the given ones, in words: the
    problem's own (``problem.constants()``), else what the runs show (Δ_f ≥ f(x_0) − min_t f(x_t);
    F_0 ≥ ‖∇f(x_0)‖², by Jensen's inequality, as F_0 bounds (1/N) Σ_i ‖∇f_i(x_0)‖²)."""
    import numpy as np

    if problem is not None and hasattr(problem, "constants"):
        try:
            pc = problem.constants()
        except (ValueError, NotImplementedError, RuntimeError):
            pc = None
        if pc is not None:
            own = ", ".join(f"{_SYMBOLS[k]} = {float(getattr(pc, k)):.4g}" for k in ("L", "delta_f", "F0", "sigma2")
                            if getattr(pc, k, None) is not None)
            return [f"the problem's: {own}"] if own else []
    out = []
    losses = [np.asarray(h.loss, dtype=float) for h in histories if h.loss is not None and np.size(h.loss)]
    drops = [float(v[0] - np.nanmin(v)) for v in losses if np.isfinite(v[0])]
    if drops:
        out.append(f"the runs show Δ_f ≥ {max(drops):.4g} (f(x_0) − min_t f(x_t))")
    firsts = [float(np.asarray(h.grad_norm2, dtype=float)[0]) for h in histories if np.size(h.grad_norm2)]
    if firsts and all(math.isfinite(v) for v in firsts):
        out.append(f"the runs show F_0 ≥ {max(firsts):.4g} (‖∇f(x_0)‖²)")
    return out


def look_at(column: WorstCaseColumn, known) -> str:
    """The class's constants as given, then ``known`` (see :func:`known_constants`)."""
    given = ", ".join(f"{_SYMBOLS.get(k, k)} = {v:.4g}" for k, v in (column.constants or {}).items())
    return "; ".join(([f"as given: {given}"] if given else []) + list(known))
