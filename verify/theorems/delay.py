"""The plan of a bound written in the participation's delays: FedSUM's theorems and users' own.

A delay bound is a function of any of ``constants``, ``tau_max``, ``tau_avg`` (or
``expected_tau_max``, ``expected_tau_avg`` for a bound over the participation too), ``eta_g``,
``eta_l``, ``algorithm``, ``pattern``, returning a ``bounds.core.Bound`` or a number (FedSUM,
arXiv:2512.18275, Thm 4.1, Lemmas C.6, D.6, E.6, Thms C.1, D.1, E.1, Cor 4.1, Cor G.1). Its plan:

* the traces: the fixed trace, or the pattern's trace of ``trace_seed`` for a bound given the
  participation; for a bound in full expectation, traces drawn afresh from the pattern (one per
  seed, or ``n_traces`` that each run every seed), and E[τ_max], E[τ_avg] exact where a formula
  exists, else Monte-Carlo, whose confidence interval widens the bound into a range
  (``Plan.bound_range``). One fixed trace standing for the expectation is marked ``‡``.
* the step sizes, per trace: ``"theorem"``, those the bound prescribes, else FedSUM Thm 4.1's
  (eq. (12)) at the trace's τ; ``"admissible"``, the largest η_l not above those at which every
  hypothesis of the algorithm's lemma (C.6, D.6, E.6) holds, the bound then being the lemma the
  theorem's proof applies at those step sizes (for a theorem whose own step sizes break its
  lemma, as Thm E.1's break E.6's η_l ≤ 1/(10τ̂KL)); ``"given"``, the algorithm's own, marked
  ``†`` when the theorem prescribes others.
* the left side: the theorem's ``measure`` of each run, (1/T) Σ_{t<T} ‖∇f(x_t)‖² by default.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np
import sympy as sp

from bounds import fedsum
from bounds.core import Bound, Condition, Constants, Source
from participation import Trace
from participation.delays import delay_metrics

from .contract import Plan, Setup, Theorem
from .measures import average_grad_norm2

__all__ = ["BoundSpec", "bound_spec", "evaluate", "delay_plan", "lemma_conditions", "prescribed_steps", "STEP_MODES",
           "expected_delays", "uncovered_note", "plan_delays", "REFERENCE_ONLY"]

STEP_MODES = ("theorem", "given", "admissible")
#: The lemma that covers each FedSUM algorithm at arbitrary step sizes (FedSUM Lemmas C.6, D.6, E.6).
LEMMAS = {"fedsum-b": fedsum.lemma_c6, "fedsum": fedsum.lemma_d6, "fedsum-cr": fedsum.lemma_e6}
#: What a verdict outside a theorem's setting is worth (the end of :func:`uncovered_note`).
REFERENCE_ONLY = "the verdict compares numbers for reference and tests no theorem"
#: Replicates of the Monte-Carlo estimate of E[τ_max], E[τ_avg] when no exact formula exists.
MC_REPLICATES = 4000


@dataclass(frozen=True)
class BoundSpec:
    """A delay bound: its name, function and the keywords it takes."""

    name: str
    function: Callable
    params: frozenset[str]

    @property
    def expectation(self) -> bool:
        return "expected_tau_max" in self.params

    @property
    def needs_steps(self) -> bool:
        return "eta_g" in self.params or "eta_l" in self.params


def bound_spec(theorem: Theorem) -> BoundSpec:
    """The delay bound of ``theorem``; a theorem with a plan of its own has none (ValueError)."""
    if not theorem.delay_bound:
        raise ValueError(f"{theorem.name} is not a bound in the trace's delays; check runs it through its own plan")
    try:
        params = frozenset(inspect.signature(theorem.bound).parameters)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read the signature of bound {theorem.name!r}") from None
    return BoundSpec(theorem.name, theorem.bound, params)


def evaluate(spec: BoundSpec, **available) -> Bound:
    """The bound at the keywords it takes among ``available`` (None values left out)."""
    kwargs = {k: v for k, v in available.items() if k in spec.params and v is not None}
    out = spec.function(**kwargs)
    if isinstance(out, Bound):
        return out
    if isinstance(out, numbers.Real) and not isinstance(out, bool):
        try:
            value = float(out)
        except OverflowError:
            text = str(out)
            shown = text if len(text) <= 24 else f"{text[:12]}…({len(text)} digits)"
            raise ValueError(f"bound {spec.name!r} returned {shown}, beyond a float's range (about 1.8e308)") from None
        return Bound(value, {"bound": value}, sp.Float(value), Source("user", spec.name))
    raise ValueError(f"bound {spec.name!r} returned {type(out).__name__}, expected a Bound or a number")


def uncovered_note(theorem: Theorem, algorithm: str | None = None, reason: str | None = None) -> str:
    """The note on a verdict that tests no theorem: ``algorithm`` outside the theorem's ``covers``,
    or (``algorithm`` None) runs that leave its setting, for ``reason`` when given."""
    if algorithm is not None:
        return f"{theorem.name} is proved for {', '.join(theorem.covers)}, not {algorithm}: {REFERENCE_ONLY}"
    return f"these runs leave the setting of {theorem.name}" + (f" ({reason})" if reason else "") + f": {REFERENCE_ONLY}"


def plan_delays(plan: Plan) -> list:
    """``delay_metrics`` of each of ``plan.traces``, computed once per plan and trace (kept on the
    plan; :func:`delay_plan` stores those it computed)."""
    key = tuple(map(id, plan.traces))
    cached = plan.__dict__.get("_delays")
    if cached is None or cached[0] != key:
        cached = (key, [delay_metrics(t) for t in plan.traces])
        plan._delays = cached
    return cached[1]


def _keep_delays(plan: Plan, metrics: list) -> Plan:
    plan._delays = (tuple(map(id, plan.traces)), list(metrics))
    return plan


def lemma_conditions(algorithm: str, consts: Constants, steps: dict, tau_max, tau_avg) -> tuple[Condition, ...]:
    """The hypotheses of the algorithm's lemma (C.6, D.6, E.6) at these step sizes; () for others."""
    if algorithm not in LEMMAS:
        return ()
    return LEMMAS[algorithm](consts, steps["eta_g"], steps["eta_l"], tau_max, tau_avg).conditions


def _steps_of(bound: Bound) -> dict | None:
    s = bound.step_sizes
    if not s:
        return None
    if "eta_g" in s and "eta_l" in s:
        return {"eta_g": float(s["eta_g"]), "eta_l": float(s["eta_l"])}
    if "eta_g_eta_l" in s:                      # only the product is prescribed (FedSUM-B)
        return {"eta_g": 1.0, "eta_l": float(s["eta_g_eta_l"])}
    return None


def prescribed_steps(spec: BoundSpec, consts: Constants, tau_max, tau_avg, algorithm: str | None,
                     prescribes: bool = False) -> tuple[dict, bool]:
    """(η_g, η_l the bound runs at for these delays, whether the statement prescribes them): the
    bound's own when its Bound carries them, else FedSUM Thm 4.1's (eq. (12)), prescribed when the
    theorem declares so (``Theorem.prescribes_steps``)."""
    if not spec.expectation and not spec.needs_steps:
        own = _steps_of(evaluate(spec, constants=consts, tau_max=tau_max, tau_avg=tau_avg,
                                 algorithm=algorithm if algorithm in fedsum.ALGORITHMS else None))
        if own is not None:
            return own, True
    s = fedsum.step_sizes_4_1(consts, tau_max, tau_avg)
    return {"eta_g": s["eta_g"], "eta_l": s["eta_l"]}, prescribes


def _admissible(algorithm: str, consts: Constants, steps: dict, tau_max, tau_avg) -> dict:
    """The largest η_l ≤ ``steps["eta_l"]`` (η_g kept) at which every hypothesis of the lemma holds.
    Each hypothesis of C.6, D.6, E.6 is an upper limit on η_l at fixed η_g, so the largest such η_l
    is the smallest of the limits (each Condition's rhs over its lhs per unit η_l)."""
    conditions = lemma_conditions(algorithm, consts, steps, tau_max, tau_avg)
    eta_l = steps["eta_l"]
    for c in conditions:
        if c.lhs > 0:
            eta_l = min(eta_l, steps["eta_l"] * c.rhs / c.lhs)
    out = {"eta_g": steps["eta_g"], "eta_l": eta_l}
    # rounding can leave the limit a few ulps above: step down until every hypothesis holds
    for _ in range(8):
        if all(c.holds for c in lemma_conditions(algorithm, consts, out, tau_max, tau_avg)):
            return out
        out["eta_l"] = math.nextafter(out["eta_l"], 0.0) * (1 - 1e-12)
    raise ValueError(f"no η_l at which every hypothesis of {algorithm}'s lemma holds was found")


def expected_delays(pattern, rounds: int, seed, confidence: float) -> tuple[float, float, tuple | None, str]:
    """(E[τ_max], E[τ_avg], their one-sided ``confidence`` intervals ((low_max, high_max),
    (low_avg, high_avg)) or None when exact, and how they were obtained)."""
    from participation import expected
    from scipy import stats

    try:
        return expected.exact_tau_max(pattern, rounds), expected.exact_tau_avg(pattern, rounds), None, "exact"
    except ValueError:
        mc = expected.monte_carlo(pattern, rounds, MC_REPLICATES, seed=seed, progress=False)
        z = float(stats.norm.ppf(confidence))
        ranges = tuple((e.mean - z * e.stderr, e.mean + z * e.stderr) for e in (mc.tau_max, mc.tau_avg))
        how = (f"Monte-Carlo ({MC_REPLICATES} traces): E[τ_max] = {mc.tau_max.mean:.4g} ± {mc.tau_max.stderr:.2g}, "
               f"E[τ_avg] = {mc.tau_avg.mean:.4g} ± {mc.tau_avg.stderr:.2g} (standard errors); the bound is judged "
               f"over their {confidence:.0%} range")
        return mc.tau_max.mean, mc.tau_avg.mean, ranges, how


def _has_steps(steps) -> bool:
    return steps is not None and {"eta_g", "eta_l"} <= set(steps)


def delay_plan(theorem: Theorem, setup: Setup) -> Plan:
    """The :class:`Plan` of a delay bound (see the module docstring). On recorded runs
    (``setup.recorded``, ``verify.check_run``): the records' traces at the step sizes each states
    (``setup.recorded_steps``, marked ``†`` where the theorem prescribes others), E[τ_max],
    E[τ_avg] of the header's availability model (``setup.pattern``) or else the mean over the
    records' traces, and no algorithm to build."""
    spec = bound_spec(theorem)
    consts, T, name = setup.constants, setup.rounds, setup.algorithm
    mode = setup.step_mode
    if mode not in STEP_MODES:
        raise ValueError(f"step_sizes must be one of {', '.join(STEP_MODES)}, got {mode!r}")
    recorded = setup.recorded is not None
    fedsum_name = name if name in fedsum.ALGORITHMS else None
    notes: list[str] = []
    extras: dict = {}
    ranges = None
    if not spec.expectation:
        if setup.n_traces not in (None, 1):
            raise ValueError(f"traces={setup.n_traces!r}: a conditional bound is judged on one trace; "
                             "use a bound in full expectation")
        traces, note = setup.unit_traces("noise")
        notes += [note] if note else []
        if any(not np.array_equal(t.mask, traces[0].mask) for t in traces[1:]):
            raise ValueError(f"{theorem.name} is conditional on the participation: the records follow different traces "
                             "(judge them one trace at a time, or use a bound in full expectation such as corollary_4_1)")
    elif recorded:
        traces = list(setup.recorded)
    elif setup.pattern is None:
        traces = [setup.trace]
    else:
        k = len(setup.seeds) if setup.n_traces is None else setup.n_traces
        traces = [Trace(m) for m in setup.pattern.sample_batch(T, k, seed=setup.trace_seed)]
    if spec.expectation and setup.pattern is not None:
        e_max, e_avg, ranges, how = expected_delays(setup.pattern, T, setup.trace_seed, setup.confidence)
    metrics = [delay_metrics(tr) for tr in traces]          # once per trace: the plan keeps them (plan_delays)
    if spec.expectation and setup.pattern is None and recorded:      # a Monte-Carlo estimate over the records
        e_max = float(np.mean([m.tau_max for m in metrics]))
        e_avg = float(np.mean([m.tau_avg for m in metrics]))
        how = (f"the mean over the {len(traces)} records' traces (no availability model in the header): an estimate "
               "without its uncertainty unless many records are given")
    elif spec.expectation and setup.pattern is None:
        m = metrics[0]
        e_max, e_avg, how = float(m.tau_max), float(m.tau_avg), "the one fixed trace's τ (no pattern to average over)"

    prescribed = [prescribed_steps(spec, consts, m.tau_max, m.tau_avg, name, theorem.prescribes_steps) for m in metrics]
    own = prescribed[0][1]
    if mode == "given":         # a record's may be incomplete: the bound and hypotheses that need them are refused
        given = setup.recorded_steps if setup.recorded_steps is not None else [setup.given_steps] * len(metrics)
        steps = [dict(s or {}) for s in given]
    elif mode == "admissible":
        if fedsum_name is None:
            raise ValueError(f"step_sizes='admissible' needs a FedSUM algorithm (its lemma's hypotheses), not {name}")
        steps = [_admissible(name, consts, p, m.tau_max, m.tau_avg) for (p, _), m in zip(prescribed, metrics)]
    else:
        steps = [p for p, _ in prescribed]
    for s in steps:
        if not all(0 < s[k] < math.inf for k in ("eta_g", "eta_l") if k in s):
            raise ValueError(f"the step sizes eta_g={s['eta_g']:.3g}, eta_l={s['eta_l']:.3g} are not positive and finite "
                             f"(L={consts.L:.3g}, sigma2={consts.sigma2:.3g}, delta_f={consts.delta_f:.3g}); "
                             "check the problem's constants")

    # the bound judged: the lemma at admissible step sizes when the theorem prescribes its own
    judged = spec
    if mode == "admissible" and not spec.needs_steps and not spec.expectation:
        lemma = LEMMAS[name]
        judged = BoundSpec(f"{spec.name} via {lemma.__name__}", lemma, frozenset(inspect.signature(lemma).parameters))
        notes.append(f"step sizes: the largest η_l at which every hypothesis of {name}'s lemma holds; the bound is "
                     f"that lemma ({lemma.__name__}) at these step sizes, as the proof of {spec.name} applies it")
    elif mode == "admissible":
        notes.append(f"step sizes: the largest η_l at which every hypothesis of {name}'s lemma holds")
    steps_outside = None
    if recorded and mode == "given":
        steps_outside = _recorded_outside(theorem, spec, setup, prescribed, steps)
    elif mode == "given" and own and not spec.needs_steps:
        p = prescribed[0][0]
        if not all(math.isclose(p[k], steps[0][k], rel_tol=1e-9) for k in ("eta_g", "eta_l")):
            steps_outside = (f"given η_g={steps[0]['eta_g']:.4g}, η_l={steps[0]['eta_l']:.4g}; {spec.name} prescribes "
                             f"η_g={p['eta_g']:.4g}, η_l={p['eta_l']:.4g} and its value assumes those")

    if spec.expectation:
        extras.update({"E[τ_max]": e_max, "E[τ_avg]": e_avg, "E[τ] from": how})
        if setup.pattern is not None:
            of = " of the records' availability model" if recorded else ""
            notes.append(f"E[τ_max], E[τ_avg]{of}: {how}")
        elif recorded:
            notes.append(f"E[τ_max], E[τ_avg]: {how}")
        tau = (e_max, e_avg)
        inputs = dict(expected_tau_max=e_max, expected_tau_avg=e_avg, algorithm=fedsum_name, pattern=setup.pattern)

        def at(tmax, tavg):
            return evaluate(judged, constants=consts, **{**inputs, "expected_tau_max": tmax, "expected_tau_avg": tavg})

        bound_value = at(e_max, e_avg)
        conditions = list(bound_value.conditions)
        if recorded:        # each record at its own step sizes and trace: the first whose hypotheses fail, else the first's
            first = setup.given_steps
            lemmas = [lemma_conditions(name, consts, s if _has_steps(s) else first, m.tau_max, m.tau_avg)
                      for s, m in zip(steps, metrics)] if _has_steps(first) and not spec.needs_steps else [()]
            lemma = next((c for c in lemmas if not all(x.holds for x in c)), lemmas[0])
            conditions = list(lemma) or conditions
        else:
            for j, (m, s) in enumerate(zip(metrics, steps)):
                for c in lemma_conditions(name, consts, s, m.tau_max, m.tau_avg):
                    if not c.holds:
                        conditions.append(dataclasses.replace(c, detail=f"trace {j}" + (f"; {c.detail}" if c.detail else "")))
        if mode == "theorem":
            notes.append("step sizes: Theorem 4.1's for each realised trace (Cor 4.1's oracle)")
        step_report = steps[0] if len(traces) == 1 or mode == "given" else {
            "eta_g": float(np.mean([s["eta_g"] for s in steps])), "eta_l": float(np.mean([s["eta_l"] for s in steps]))}
        bound_range = None
        if ranges is not None:
            ends = (at(ranges[0][0], ranges[1][0]).value, at(ranges[0][1], ranges[1][1]).value)
            bound_range = (float(min(ends)), float(max(ends)))
            extras["bound range"] = f"[{bound_range[0]:.4g}, {bound_range[1]:.4g}]"
    else:
        m, step_report = metrics[0], steps[0]
        tau = (float(m.tau_max), float(m.tau_avg))
        inputs = dict(tau_max=m.tau_max, tau_avg=m.tau_avg, algorithm=fedsum_name, eta_g=step_report.get("eta_g"),
                      eta_l=step_report.get("eta_l"))
        bound_value = evaluate(judged, constants=consts, **inputs)
        if judged.needs_steps or mode == "theorem" or not _has_steps(step_report):
            conditions = list(bound_value.conditions)
        else:       # a theorem at the user's step sizes: the lemma for those step sizes decides
            conditions = list(lemma_conditions(name, consts, step_report, m.tau_max, m.tau_avg)) or list(
                bound_value.conditions)
        if mode == "theorem" and (spec.needs_steps or not own):
            notes.append("step sizes: Theorem 4.1's prescription (step_sizes_4_1) at this trace's τ")
        bound_range = None
    conditions = tuple(conditions)
    bound_value = dataclasses.replace(bound_value, conditions=conditions)
    if recorded:            # as recorded, without their product; E[τ] is in the notes
        step_sizes, extras = {k: float(v) for k, v in (setup.given_steps or {}).items()}, {}
    else:
        step_sizes = {**step_report, "eta_g_eta_l": step_report["eta_g"] * step_report["eta_l"]}

    if theorem.covered(name) is False:
        notes.append(uncovered_note(theorem, name))
    # the algorithm is the caller's to build at each trace's step sizes; recorded runs have run already
    return _keep_delays(Plan(algorithm=None, trace_steps=None if recorded else [dict(s) for s in steps], traces=traces,
                measure=theorem.measure or average_grad_norm2, bound=lambda histories: bound_value,
                step_sizes=step_sizes, extras=lambda histories: dict(extras), tau=tau, notes=notes,
                steps_outside=steps_outside,
                bound_range=None if bound_range is None else (lambda histories: bound_range),
                nonnegative=theorem.nonnegative, bound_inputs=inputs,
                # a record's trace is one sample of the participation, whatever the header's model
                noise_free=False if recorded and spec.expectation else None,
                fixed_trace=spec.expectation and len(traces) == 1 if recorded else None), metrics)


def _recorded_outside(theorem: Theorem, spec: BoundSpec, setup: Setup, prescribed: list, steps: list) -> str | None:
    """Why recorded step sizes are outside the theorem's, or None: a conditional bound's prescribed
    step sizes at the one trace, or Thm 4.1's for each realised trace (a bound in full expectation
    that prescribes them, FedSUM Cor 4.1); the first record outside is named."""
    if spec.needs_steps or not _has_steps(setup.given_steps):
        return None
    if not spec.expectation:
        (p, prescribes), s = prescribed[0], steps[0]
        if prescribes and not all(math.isclose(float(p[k]), float(s[k]), rel_tol=1e-9) for k in ("eta_g", "eta_l")):
            return (f"recorded η_g={float(s['eta_g']):.4g}, η_l={float(s['eta_l']):.4g}; {theorem.name} prescribes "
                    f"η_g={p['eta_g']:.4g}, η_l={p['eta_l']:.4g} and its value assumes those")
        return None
    if not theorem.prescribes_steps:
        return None
    names = setup.recorded_names or (None,) * len(steps)
    for (p, _), s, label in zip(prescribed, steps, names):
        if _has_steps(s) and not all(math.isclose(float(p[k]), float(s[k]), rel_tol=1e-9) for k in ("eta_g", "eta_l")):
            return (f"{label or 'a record'}: recorded η_g={float(s['eta_g']):.4g}, η_l={float(s['eta_l']):.4g}; "
                    f"{theorem.name} takes Thm 4.1's for each realised trace, here η_g={p['eta_g']:.4g}, "
                    f"η_l={p['eta_l']:.4g}, and its value assumes those")
    return None
