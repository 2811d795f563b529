"""Run a theorem's :class:`~verify.theorems.contract.Plan` and judge it: the left side per run
(or per trace, or without runs for a statement about the problem alone), the bound after the
runs, and the verdict of the one judge, ``verify.verdicts.judge``.

``run_plans`` checks many (theorem, setup) pairs at once: it lists every run they need, runs
those that share an algorithm (up to step sizes), problem and length as batches
(``algorithms.run_batch``), then judges each pair. A run gives the same numbers alone or in a
batch, so the verdicts are those of ``run_plan`` on each pair.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import algorithms
from algorithms.engine import batch_key
from participation.delays import delay_metrics

from ..verdicts import CheckResult, distinct_seeds, judge, noise_free, rounding_tolerance
from .contract import Plan, Setup, Theorem
from .delay import delay_plan

__all__ = ["run_plan", "run_plans", "make_plan", "execute_runs", "one_by_one", "RunRequest", "judge_recorded"]


def make_plan(theorem: Theorem, setup: Setup) -> Plan:
    """The theorem's plan on ``setup``: its own, or the delay plan of a delay bound
    (:func:`verify.theorems.delay.delay_plan`)."""
    theorem.require_checkable()
    return theorem.plan(setup) if theorem.plan is not None else delay_plan(theorem, setup)


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
    plan = make_plan(theorem, setup)
    paired = setup.pattern is not None and theorem.expectation == "participation" and len(plan.traces) == len(setup.seeds)
    requests = [(j, RunRequest(_plan_algorithm(plan, j), setup.problem, trace, seed, dict(plan.run_options)))
                for j, trace in enumerate(plan.traces)
                for seed in ([setup.seeds[j]] if paired else setup.seeds)]
    return _Pending(theorem, setup, plan, paired, requests, kwargs)


def run_plan(theorem: Theorem, setup: Setup, *, confidence: float, device=None, const_info: dict | None = None,
             notes: list[str] | None = None, on_run=None) -> CheckResult:
    """Check ``theorem`` on ``setup``: build its plan, run every (trace, seed), measure, judge.

    ``plan.algorithm`` is one Algorithm or one per trace (step sizes that depend on the trace)."""
    return run_plans([(theorem, setup, dict(confidence=confidence, const_info=const_info, notes=notes,
                                            on_run=on_run))], device=device)[0]


def run_plans(items: list, device=None) -> list[CheckResult]:
    """``run_plan`` of every (theorem, setup, keywords) in ``items`` (keywords: ``confidence``,
    ``const_info``, ``notes``, ``on_run``), with their runs batched together."""
    pending = [_pending(theorem, setup, kwargs) for theorem, setup, kwargs in items]
    flat = [req for p in pending for _, req in p.requests]
    histories = iter(execute_runs(flat, device=device))
    return [_judge(p, [next(histories) for _ in p.requests]) for p in pending]


def judge_recorded(theorem: Theorem, setup: Setup, plan: Plan, histories: list, *, confidence: float,
                   const_info: dict | None = None, notes: list[str] | None = None) -> CheckResult:
    """The verdict of ``plan`` on recorded runs (``verify.check_run``): ``histories[j]`` is the
    run that followed ``plan.traces[j]``, with seed ``setup.seeds[j]``; measured and judged as
    ``run_plan`` measures and judges fedverify's runs."""
    if len(histories) != len(plan.traces) or len(setup.seeds) != len(plan.traces):
        raise ValueError(f"{len(histories)} recorded runs for {len(plan.traces)} traces")
    requests = [(j, RunRequest(_plan_algorithm(plan, j), setup.problem, trace, seed))
                for j, (trace, seed) in enumerate(zip(plan.traces, setup.seeds))]
    pending = _Pending(theorem, setup, plan, False, requests,
                       dict(confidence=confidence, const_info=const_info, notes=notes))
    return _judge(pending, list(histories))


def _judge(pending: _Pending, run_histories: list) -> CheckResult:
    theorem, setup, plan, paired = pending.theorem, pending.setup, pending.plan, pending.paired
    confidence = pending.kwargs["confidence"]
    const_info, on_run = pending.kwargs.get("const_info"), pending.kwargs.get("on_run")
    notes = list(pending.kwargs.get("notes") or []) + list(plan.notes)
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
            per.append(float(plan.measure(history, setup.problem)))
        if theorem.expectation == "participation" and not paired and len(per) > 1:
            # the unit is the trace: seeds on one trace sample the noise, not the participation
            values.append(sum(per) / len(per))
        else:
            values.extend(per)
    if not values:
        raise ValueError(f"{theorem.name}: the plan gave no run and no value to judge")
    # when every run diverged, the bound reads its measured inputs from the first run as far as it got
    bound = plan.bound(histories if histories or plan.values is not None else [first])
    if math.isnan(float(bound.value)):
        raise ValueError(f"the bound of {theorem.name} is NaN at these inputs: a bound must be a number (or inf)")
    consts = setup.constants
    exact = plan.noise_free if plan.noise_free is not None else noise_free(
        consts.sigma2, theorem.expectation, setup.pattern)
    atol = rounding_tolerance(consts)
    bound_range = plan.bound_range(histories) if plan.bound_range is not None else None
    decision = judge(values, bound_range or float(bound.value), confidence=confidence, noise_free=exact, atol=atol,
                     nonnegative=plan.nonnegative)
    notes += list(decision.notes)
    conditions = tuple(bound.conditions)
    if not all(c.holds for c in conditions):
        notes.append("a hypothesis of the bound fails at these step sizes: the verdict does not test the theorem")
    covered = plan.covered(histories) if plan.covered is not None else None
    reason = None
    if isinstance(covered, str):            # not covered, and why
        covered, reason = False, covered
    if covered is None:
        covered = theorem.covered(setup.algorithm)
    if setup.algorithm in theorem.reductions:
        notes.append(f"{setup.algorithm}: {theorem.reductions[setup.algorithm]}")
    if covered is False and not theorem.covered(setup.algorithm):
        notes.append(f"{theorem.name} is proved for {', '.join(theorem.covers)}, not {setup.algorithm}: "
                     "the verdict compares numbers for reference and tests no theorem")
    elif covered is False:
        notes.append(f"these runs leave the setting of {theorem.name}" + (f" ({reason})" if reason else "")
                     + ": the verdict compares numbers for reference and tests no theorem")
    if plan.steps_outside:
        notes.append(f"step sizes outside {theorem.name}'s: {plan.steps_outside}")
    fixed_trace = theorem.expectation == "participation" and setup.pattern is None and bool(plan.traces)
    metrics = [delay_metrics(t) for t in plan.traces]
    tau = plan.tau or (math.nan, math.nan)          # a bound without τ: the delays are not part of it
    extras = plan.extras(histories) if plan.extras is not None and (histories or not plan.traces) else {}
    first_alg = _plan_algorithm(plan, 0) if plan.traces else None
    return CheckResult(
        verdict=decision.verdict, measured=decision.measured, lower=decision.lower, upper=decision.upper,
        confidence=float(confidence), values=tuple(values), seeds=tuple(dict.fromkeys(used)), bound=bound,
        bound_name=theorem.name, algorithm=setup.algorithm, hparams=getattr(first_alg, "hparams", {}) or {},
        step_sizes=dict(plan.step_sizes), conditions=conditions, tau_max=tau[0], tau_avg=tau[1],
        n_clients=setup.n_clients, rounds=setup.rounds, local_steps=setup.local_steps,
        expectation=theorem.expectation == "participation", constants=dict(const_info or {}), stopped=tuple(stopped),
        notes=tuple(dict.fromkeys(notes)), atol=atol,
        per_trace_tau=tuple((int(m.tau_max), float(m.tau_avg)) for m in metrics), first_run=first,
        covered=covered, lhs=theorem.lhs, extras=extras, diverged=decision.diverged,
        steps_outside=plan.steps_outside, fixed_trace=fixed_trace, bound_range=bound_range)
