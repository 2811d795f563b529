"""Run a theorem's :class:`~verify.theorems.contract.Plan` and judge it: the left side per run
(or per trace, or without runs for a statement about the problem alone), the bound after the
runs, and the verdict of the one judge, ``verify.verdicts.judge``."""
from __future__ import annotations

import math

import algorithms
from participation.delays import delay_metrics

from ..verdicts import CheckResult, distinct_seeds, judge, noise_free, rounding_tolerance
from .contract import Plan, Setup, Theorem
from .delay import delay_plan

__all__ = ["run_plan", "make_plan"]


def make_plan(theorem: Theorem, setup: Setup) -> Plan:
    """The theorem's plan on ``setup``: its own, or the delay plan of a delay bound
    (:func:`verify.theorems.delay.delay_plan`)."""
    theorem.require_checkable()
    return theorem.plan(setup) if theorem.plan is not None else delay_plan(theorem, setup)


def _plan_algorithm(plan, j: int):
    return plan.algorithm[j] if isinstance(plan.algorithm, (list, tuple)) else plan.algorithm


def run_plan(theorem: Theorem, setup: Setup, *, confidence: float, device=None, const_info: dict | None = None,
             notes: list[str] | None = None, on_run=None) -> CheckResult:
    """Check ``theorem`` on ``setup``: build its plan, run every (trace, seed), measure, judge.

    ``plan.algorithm`` is one Algorithm or one per trace (step sizes that depend on the trace)."""
    theorem.require_checkable()
    distinct_seeds(setup.seeds)
    plan = make_plan(theorem, setup)
    notes = list(notes or []) + list(plan.notes)
    paired = setup.pattern is not None and theorem.expectation == "participation" and len(plan.traces) == len(setup.seeds)
    histories, values, stopped, used, first = [], [], [], [], None
    if plan.values is not None:
        values = [float(v) for v in plan.values()]
    for j, trace in enumerate(plan.traces):
        per = []
        for seed in ([setup.seeds[j]] if paired else setup.seeds):
            alg = _plan_algorithm(plan, j)
            history = algorithms.run(alg, setup.problem, trace, seed=seed, device=device, **plan.run_options)
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
