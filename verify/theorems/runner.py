"""Run a theorem's :class:`~verify.theorems.contract.Plan` and judge it: the left side per run
(or per trace), one-sided Student-t limits, the bound after the runs, the verdict."""
from __future__ import annotations

import math

import numpy as np

import algorithms
from participation.delays import delay_metrics

from ..verdicts import CheckResult, confidence_limits, rounding_tolerance, verdict
from .contract import Setup, Theorem

__all__ = ["run_plan"]


def run_plan(theorem: Theorem, setup: Setup, *, confidence: float, device=None, const_info: dict | None = None,
             notes: list[str] | None = None, on_run=None) -> CheckResult:
    """Check ``theorem`` on ``setup``: build its plan, run every (trace, seed), measure, judge."""
    theorem.require_checkable()
    plan = theorem.plan(setup)
    notes = list(notes or []) + list(plan.notes)
    paired = setup.pattern is not None and theorem.expectation == "participation" and len(plan.traces) == len(setup.seeds)
    histories, values, stopped, used, first = [], [], [], [], None
    for j, trace in enumerate(plan.traces):
        for seed in ([setup.seeds[j]] if paired else setup.seeds):
            history = algorithms.run(plan.algorithm, setup.problem, trace, seed=seed, device=device, **plan.run_options)
            if on_run is not None:
                on_run(history, trace, plan.algorithm, seed)
            first = history if first is None else first
            used.append(seed)
            if history.stopped is not None:
                stopped.append(f"seed {seed}" + (f", trace {j}" if paired else "") + f": {history.stopped}")
                values.append(math.inf)
                continue
            histories.append(history)
            values.append(float(plan.measure(history, setup.problem)))
    if not histories:
        raise ValueError(f"every run of {setup.algorithm} stopped ({stopped[0]}); {theorem.name} cannot be judged")
    bound = plan.bound(histories)
    consts = setup.constants
    noise_free = consts.sigma2 == 0 and (theorem.expectation == "noise" or setup.pattern is None
                                         or getattr(setup.pattern, "deterministic", False))
    mean, lower, upper = confidence_limits(values, confidence, exact=noise_free and len(values) == 1)
    if noise_free and len(values) > 1 and np.ptp(values) == 0:
        lower = upper = mean
    atol = rounding_tolerance(consts)
    outcome = verdict(lower, upper, float(bound.value), atol)
    conditions = tuple(bound.conditions)
    if not all(c.holds for c in conditions):
        notes.append("a hypothesis of the bound fails at these step sizes: the verdict does not test the theorem")
    if len(values) == 1 and not math.isfinite(upper - lower) and math.isfinite(mean):
        notes.append("one run gives no confidence interval (no spread to estimate): the verdict is inconclusive "
                     "unless the run is noise-free; use 2 or more seeds")
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
    metrics = [delay_metrics(t) for t in plan.traces]
    tau = plan.tau or (math.nan, math.nan)          # a bound without τ: the delays are not part of it
    extras = plan.extras(histories) if plan.extras is not None else {}
    return CheckResult(
        verdict=outcome, measured=mean, lower=lower, upper=upper, confidence=float(confidence), values=tuple(values),
        seeds=tuple(dict.fromkeys(used)), bound=bound, bound_name=theorem.name, algorithm=setup.algorithm,
        hparams=plan.algorithm.hparams, step_sizes=dict(plan.step_sizes), conditions=conditions,
        tau_max=tau[0], tau_avg=tau[1], n_clients=setup.n_clients, rounds=setup.rounds,
        local_steps=setup.local_steps, expectation=theorem.expectation == "participation",
        constants=dict(const_info or {}), stopped=tuple(stopped), notes=tuple(dict.fromkeys(notes)), atol=atol,
        per_trace_tau=tuple((int(m.tau_max), float(m.tau_avg)) for m in metrics), first_run=first,
        covered=covered, lhs=theorem.lhs, extras=extras)
