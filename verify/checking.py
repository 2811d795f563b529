"""A theorem's measured left side against its right-hand side, judged statistically.

``check`` knows theorems only through their contract (``verify.theorems``): a theorem with a
plan of its own (Server momentum, CA-Fed, LOGIT) runs through ``verify.theorems.runner``; a bound
written in the participation's delays τ_max, τ_avg and the step sizes η_g, η_l (FedSUM,
arXiv:2512.18275, Thm 4.1, Lemmas C.6, D.6, E.6, Cor 4.1, Cor G.1, and most users' bounds) runs on
the delay path below: (1/T) Σ_{t<T} ‖∇f(x_t)‖² (or the theorem's own measure) is estimated by
independent runs — noise seeds on one trace for a conditional bound; freshly sampled traces from
the pattern for a bound in full expectation — and compared with the bound through the one-sided
Student-t confidence limits of the mean (``verify.verdicts``):

    "holds"        upper limit ≤ bound
    "violated"     lower limit > bound
    "inconclusive" otherwise.

The hypotheses of the theorem at the step sizes actually used are reported beside the verdict
(``conditions``, ``conditions_hold``); a verdict is never hidden because a condition fails.
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

import algorithms
from algorithms import Algorithm
from bounds import fedsum
from bounds.core import Bound, Condition, Constants, Source
from participation import Trace
from participation.delays import delay_metrics
from participation.patterns import Pattern

from .constants import EstimatedConstants, estimate_constants
from .theorems.contract import Setup, Theorem
from .verdicts import CheckResult, confidence_limits, rounding_tolerance, verdict

__all__ = ["check", "CheckResult", "verdict", "confidence_limits", "resolve_bound", "resolve_theorem", "covered_algorithms",
           "BOUNDS", "COVERS"]

def _theorems() -> dict:
    from .theorems import THEOREMS

    return THEOREMS


#: FedSUM's bounds by name ("fedsum.lemma_d6", ...), the delay bounds ``check`` runs on its delay path.
BOUNDS: dict[str, Callable[..., Bound]] = {
    f"fedsum.{name}": getattr(fedsum, name)
    for name in ("theorem_4_1", "corollary_4_1", "lemma_c6", "lemma_d6", "lemma_e6", "theorem_c1", "theorem_d1", "theorem_e1")
}
#: The lemma that covers each FedSUM algorithm at arbitrary step sizes.
LEMMAS = {"fedsum-b": fedsum.lemma_c6, "fedsum": fedsum.lemma_d6, "fedsum-cr": fedsum.lemma_e6}


#: The algorithms each theorem of the four papers is proved for.
COVERS: dict[str, tuple[str, ...] | None] = {k: t.covers for k, t in _theorems().items()}


def resolve_theorem(bound) -> Theorem:
    """A :class:`~verify.theorems.contract.Theorem` from a name (as ``fedverify bound --list``
    prints it; a bare name is FedSUM's), a Theorem, or a callable delay bound (see
    :func:`verify.theorems.user_theorem`; its ``covers`` attribute names the algorithms)."""
    from . import theorems

    if isinstance(bound, Theorem):
        return bound
    if isinstance(bound, str):
        return theorems.get(bound)
    if callable(bound):
        if getattr(bound, "__module__", None) == fedsum.__name__ and f"fedsum.{bound.__name__}" in _theorems():
            return _theorems()[f"fedsum.{bound.__name__}"]
        from .theorems.user import from_callable

        return from_callable(bound)
    raise ValueError(f"bound must be a theorem name ({', '.join(_theorems())}), a Theorem or a callable, got {bound!r}")


def covered_algorithms(bound) -> tuple[str, ...] | None:
    """The algorithm names ``bound`` is proved for (a name, a Theorem or a callable with a
    ``covers`` attribute), or None when it does not say."""
    return resolve_theorem(bound).covers


# ---------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class _BoundSpec:
    name: str
    function: Callable
    params: frozenset[str]
    theorem: Theorem | None = None

    @property
    def expectation(self) -> bool:
        return "expected_tau_max" in self.params

    @property
    def needs_steps(self) -> bool:
        return "eta_g" in self.params or "eta_l" in self.params


def resolve_bound(bound) -> _BoundSpec:
    """The delay bound behind ``bound`` (a name, a Theorem or a callable): name, function and
    the keywords it takes among ``constants``, ``tau_max``, ``tau_avg``, ``eta_g``, ``eta_l``,
    ``algorithm``, ``pattern`` and, for a bound in full expectation, ``expected_tau_max``,
    ``expected_tau_avg``; it returns a ``Bound`` or a number. A theorem with a plan of its own
    (momentum, CA-Fed, LOGIT) has no delay bound: a ValueError says so."""
    theorem = resolve_theorem(bound)
    if not theorem.delay_bound:
        raise ValueError(f"{theorem.name} is not a bound in the trace's delays; check runs it through its own plan")
    try:
        params = frozenset(inspect.signature(theorem.bound).parameters)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read the signature of bound {theorem.name!r}") from None
    return _BoundSpec(theorem.name, theorem.bound, params, theorem)


def _evaluate(spec: _BoundSpec, **available) -> Bound:
    kwargs = {k: v for k, v in available.items() if k in spec.params and v is not None}
    out = spec.function(**kwargs)
    if isinstance(out, Bound):
        return out
    if isinstance(out, numbers.Real) and not isinstance(out, bool):
        value = float(out)
        return Bound(value, {"bound": value}, sp.Float(value), Source("user", spec.name))
    raise ValueError(f"bound {spec.name!r} returned {type(out).__name__}, expected a Bound or a number")


def _seeds(seeds) -> tuple[int, ...]:
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a sequence of seeds, got {seeds!r}")
        return tuple(range(int(seeds)))
    try:
        out = tuple(seeds)
    except TypeError:
        raise ValueError(f"seeds must be a positive count or a sequence of seeds, got {seeds!r}") from None
    if not out or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0 for s in out):
        raise ValueError(f"seeds must be a non-empty sequence of integers ≥ 0, got {seeds!r}")
    return tuple(int(s) for s in out)


def _count(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return int(value)


class _Builder:
    """Turns ``algorithm`` (a name, an Algorithm or a factory) into an Algorithm at given step sizes."""

    def __init__(self, algorithm, local_steps: int, hparams: dict | None):
        self.source = algorithm
        self.hparams = dict(hparams or {})
        if isinstance(algorithm, Algorithm):
            self.local_steps = algorithm.local_steps
            self.name = algorithm.name
        elif isinstance(algorithm, str):
            self.local_steps = local_steps
            self.name = algorithms.get(algorithm, local_steps=local_steps, **self.hparams).name
        elif callable(algorithm):
            self.local_steps = local_steps
            probe = algorithm(eta_l=1e-3, eta_g=1.0, local_steps=local_steps, **self.hparams)
            if not isinstance(probe, Algorithm):
                raise ValueError(f"the algorithm factory returned {type(probe).__name__}, not an algorithms.Algorithm")
            self.name = probe.name
        else:
            raise ValueError(f"algorithm must be a name, an algorithms.Algorithm or a factory, got {algorithm!r}")

    @property
    def given(self) -> dict | None:
        return ({"eta_g": self.source.eta_g, "eta_l": self.source.eta_l} if isinstance(self.source, Algorithm) else None)

    def build(self, eta_g: float, eta_l: float) -> Algorithm:
        if isinstance(self.source, Algorithm):
            return dataclasses.replace(self.source, eta_g=eta_g, eta_l=eta_l)
        if isinstance(self.source, str):
            return algorithms.get(self.source, eta_l=eta_l, eta_g=eta_g, local_steps=self.local_steps, **self.hparams)
        return self.source(eta_l=eta_l, eta_g=eta_g, local_steps=self.local_steps, **self.hparams)


def _as_trace(value, n_clients: int, rounds) -> tuple[Trace | None, Pattern | None, int]:
    if isinstance(value, Pattern):
        if value.n_clients != n_clients:
            raise ValueError(f"the pattern has {value.n_clients} clients but the problem has {n_clients}")
        if rounds is None:
            raise ValueError("rounds is needed with a pattern")
        return None, value, _count(rounds, "rounds")
    if not isinstance(value, Trace):
        try:
            value = Trace(value)
        except (ValueError, TypeError) as err:
            raise ValueError(f"trace_or_pattern must be a Trace, a 0/1 mask or a pattern: {err}") from None
    if value.n_clients != n_clients:
        raise ValueError(f"the trace has {value.n_clients} clients but the problem has {n_clients}")
    if rounds is not None:
        rounds = _count(rounds, "rounds")
        if rounds > value.n_rounds:
            raise ValueError(f"rounds={rounds} exceeds the trace's {value.n_rounds} rounds")
        value = Trace(value.mask[:rounds])
    return value, None, value.n_rounds


def _expected_delays(pattern: Pattern, rounds: int, seed) -> tuple[float, float, str]:
    from participation import expected

    try:
        return expected.exact_tau_max(pattern, rounds), expected.exact_tau_avg(pattern, rounds), "exact"
    except ValueError:
        mc = expected.monte_carlo(pattern, rounds, 4000, seed=seed, progress=False)
        return mc.tau_max.mean, mc.tau_avg.mean, (f"Monte-Carlo (4000 traces; E[τ_max] = {mc.tau_max.mean:.4g} "
                                                  f"± {mc.tau_max.stderr:.2g})")


def _conditions_at(algorithm_name: str, consts: Constants, steps: dict, tau_max, tau_avg) -> tuple[Condition, ...]:
    """The lemma's hypotheses (C.6, D.6, E.6) for a FedSUM algorithm at these step sizes."""
    if algorithm_name not in LEMMAS:
        return ()
    return LEMMAS[algorithm_name](consts, steps["eta_g"], steps["eta_l"], tau_max, tau_avg).conditions


def _steps_of(bound: Bound) -> dict | None:
    s = bound.step_sizes
    if not s:
        return None
    if "eta_g" in s and "eta_l" in s:
        return {"eta_g": float(s["eta_g"]), "eta_l": float(s["eta_l"])}
    if "eta_g_eta_l" in s:                      # only the product is prescribed (FedSUM-B)
        return {"eta_g": 1.0, "eta_l": float(s["eta_g_eta_l"])}
    return None


# ---------------------------------------------------------------------------- check


def check(algorithm, problem, trace_or_pattern, bound="fedsum.theorem_4_1", seeds=5, *, rounds=None,
          confidence: float = 0.95, traces=None, step_sizes: str | None = None, local_steps: int = 1,
          constants=None, hparams: dict | None = None, trace_seed: int = 0, device=None, on_run=None) -> CheckResult:
    """Run ``algorithm`` on ``problem`` and compare (1/T) Σ_{t<T} ‖∇f(x_t)‖² with ``bound``.

    ``algorithm``: a name (built with ``algorithms.get`` at the step sizes, ``local_steps``
    and ``hparams``), an ``Algorithm`` (its own step sizes are used unless
    ``step_sizes="theorem"``), or a factory ``(eta_l=, eta_g=, local_steps=) -> Algorithm``.
    ``trace_or_pattern``: a ``Trace`` or 0/1 mask (truncated to ``rounds``), or a pattern
    (``rounds`` needed; a conditional bound is judged on its trace of seed ``trace_seed``).
    ``bound``: a name in ``BOUNDS`` or a callable (see ``resolve_bound``). ``seeds``: a count
    or the noise seeds. ``traces``: for a bound in full expectation, the number of traces
    drawn from the pattern (default: one per seed, paired with it; otherwise every trace
    runs every seed and the unit is the trace's mean). ``step_sizes``: "theorem" (the
    bound's prescribed η_g, η_l, or Theorem 4.1's for a lemma; default for a name or a
    factory) or "given" (an Algorithm's own). ``constants``: ``EstimatedConstants`` or
    ``bounds.Constants`` (default ``estimate_constants(problem)``). ``on_run(history, trace,
    algorithm, seed)`` is called after every run (``fedverify check --record`` writes each run's
    record with it).
    """
    theorem = resolve_theorem(bound)
    theorem.require_checkable()
    seeds = _seeds(seeds)
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must lie in [0.5, 1), got {confidence!r}")
    local_steps = _count(local_steps, "local_steps")
    options = {k: v for k, v in (hparams or {}).items() if k in theorem.options}
    builder = _Builder(algorithm, local_steps, {k: v for k, v in (hparams or {}).items() if k not in options})
    if step_sizes is None:
        step_sizes = "given" if isinstance(algorithm, Algorithm) else "theorem"
    if step_sizes not in ("theorem", "given"):
        raise ValueError(f"step_sizes must be 'theorem' or 'given', got {step_sizes!r}")
    if step_sizes == "given" and builder.given is None:
        raise ValueError("step_sizes='given' needs an algorithms.Algorithm (a name or factory has no step sizes of its own)")
    trace, pattern, T = _as_trace(trace_or_pattern, problem.n_clients, rounds)
    K, N = builder.local_steps, problem.n_clients
    consts, const_info, notes = _constants(problem, constants, N, K, T)
    if theorem.plan is not None:
        from .theorems.runner import run_plan

        if traces not in (None, len(seeds)):
            raise ValueError(f"traces={traces!r}: {theorem.name} draws one trace per seed from the pattern")
        fixed = sorted({"eta_l", "eta_g"} & set(hparams or {}))
        if fixed:
            raise ValueError(f"{theorem.name} chooses {', '.join(fixed)} itself; to run at step sizes of your own, "
                             "pass an algorithms.Algorithm with step_sizes='given'")
        given = algorithm if isinstance(algorithm, Algorithm) and step_sizes == "given" else None
        setup = Setup(problem=problem, algorithm=builder.name, hparams={**builder.hparams, **options}, given=given, constants=consts,
                      trace=trace, pattern=pattern, seeds=seeds, trace_seed=trace_seed)
        return run_plan(theorem, setup, confidence=confidence, device=device, const_info=const_info, notes=notes,
                        on_run=on_run)
    spec = resolve_bound(theorem)
    measure = theorem.measure or (lambda history, problem: history.mean_grad_norm2)
    fedsum_name = builder.name if builder.name in fedsum.ALGORITHMS else None
    expectation = spec.expectation

    if not expectation and trace is None:
        trace = pattern.sample(T, seed=trace_seed)
        notes.append(f"conditional bound: judged on the trace of seed {trace_seed} drawn from {type(pattern).__name__}")

    # --- the trace(s) and their delays
    if expectation:
        if pattern is None:
            unit_traces = [trace]
            e_max, e_avg = float(delay_metrics(trace).tau_max), float(delay_metrics(trace).tau_avg)
            notes.append("bound in full expectation given one fixed trace: E[τ] are that trace's τ")
            how = "fixed trace"
        else:
            k = len(seeds) if traces is None else _count(traces, "traces")
            unit_traces = [Trace(m) for m in pattern.sample_batch(T, k, seed=trace_seed)]
            e_max, e_avg, how = _expected_delays(pattern, T, trace_seed)
            notes.append(f"E[τ_max], E[τ_avg]: {how}")
    else:
        if traces not in (None, 1):
            raise ValueError(f"traces={traces!r}: a conditional bound is judged on one trace; use a bound in full expectation")
        unit_traces = [trace]
    metrics = [delay_metrics(tr) for tr in unit_traces]
    per_trace_tau = tuple((int(m.tau_max), float(m.tau_avg)) for m in metrics)

    # --- step sizes, the bound, the conditions (per trace when the step sizes depend on it)
    def prescribed(m) -> dict:
        if step_sizes == "given":
            return dict(builder.given)
        if not expectation and not spec.needs_steps:
            b = _evaluate(spec, constants=consts, tau_max=m.tau_max, tau_avg=m.tau_avg, algorithm=fedsum_name)
            steps = _steps_of(b)
            if steps is not None:
                return steps
        s = fedsum.step_sizes_4_1(consts, m.tau_max, m.tau_avg)     # FedSUM Thm 4.1
        return {"eta_g": s["eta_g"], "eta_l": s["eta_l"]}

    steps_per_trace = [prescribed(m) for m in metrics]
    for s in steps_per_trace:
        if not all(0 < s[k] < math.inf for k in ("eta_g", "eta_l")):
            raise ValueError(f"the step sizes eta_g={s['eta_g']:.3g}, eta_l={s['eta_l']:.3g} are not positive and finite "
                             f"(L={consts.L:.3g}, sigma2={consts.sigma2:.3g}, delta_f={consts.delta_f:.3g}); "
                             "check the problem's constants")
    if expectation:
        tau_max, tau_avg = e_max, e_avg
        result_bound = _evaluate(spec, constants=consts, expected_tau_max=e_max, expected_tau_avg=e_avg,
                                 algorithm=fedsum_name, pattern=pattern)
        conditions = list(result_bound.conditions)
        for j, (m, s) in enumerate(zip(metrics, steps_per_trace)):
            for c in _conditions_at(builder.name, consts, s, m.tau_max, m.tau_avg):
                if not c.holds:
                    conditions.append(dataclasses.replace(c, detail=f"trace {j}" + (f"; {c.detail}" if c.detail else "")))
        if step_sizes == "theorem":
            notes.append("step sizes: Theorem 4.1's for each realised trace (Cor 4.1's oracle)")
        step_report = steps_per_trace[0] if len(unit_traces) == 1 or step_sizes == "given" else {
            "eta_g": float(np.mean([s["eta_g"] for s in steps_per_trace])),
            "eta_l": float(np.mean([s["eta_l"] for s in steps_per_trace]))}
    else:
        m, step_report = metrics[0], steps_per_trace[0]
        tau_max, tau_avg = float(m.tau_max), float(m.tau_avg)
        result_bound = _evaluate(spec, constants=consts, tau_max=m.tau_max, tau_avg=m.tau_avg, algorithm=fedsum_name,
                                 eta_g=step_report["eta_g"], eta_l=step_report["eta_l"])
        if spec.needs_steps or step_sizes == "theorem":
            conditions = list(result_bound.conditions)
        else:   # a theorem at the user's step sizes: the lemma for those step sizes decides
            conditions = list(_conditions_at(builder.name, consts, step_report, m.tau_max, m.tau_avg)) or list(result_bound.conditions)
            own = _steps_of(result_bound)
            if own and not all(math.isclose(own[k], step_report[k], rel_tol=1e-9) for k in own):
                notes.append(f"given step sizes differ from those {spec.name} prescribes "
                             f"(η_g={own['eta_g']:.4g}, η_l={own['eta_l']:.4g}); its value assumes those")
        if step_sizes == "theorem" and (spec.needs_steps or _steps_of(result_bound) is None):
            notes.append("step sizes: Theorem 4.1's prescription (step_sizes_4_1) at this trace's τ")

    # --- the runs
    values, stopped, used = [], [], []
    first_run = None
    built = {}
    for j, tr in enumerate(unit_traces):
        key = tuple(sorted(steps_per_trace[j].items()))
        if key not in built:
            built[key] = builder.build(steps_per_trace[j]["eta_g"], steps_per_trace[j]["eta_l"])
        alg = built[key]
        run_seeds = [seeds[j]] if expectation and len(unit_traces) == len(seeds) else list(seeds)
        per = []
        for s in run_seeds:
            h = algorithms.run(alg, problem, tr, seed=s, device=device)
            if on_run is not None:
                on_run(h, tr, alg, s)
            first_run = h if first_run is None else first_run
            if h.stopped is not None:
                stopped.append(f"seed {s}" + (f", trace {j}" if expectation else "") + f": {h.stopped}")
                per.append(math.inf)
            else:
                per.append(float(measure(h, problem)))
            used.append(s)
        if expectation and len(run_seeds) > 1:
            values.append(float(np.mean(per)))   # the unit is the trace
        else:
            values.extend(per)
    noise_free = consts.sigma2 == 0 and (not expectation or pattern is None or pattern.deterministic)
    mean, lower, upper = confidence_limits(values, confidence, exact=noise_free and len(values) == 1)
    if noise_free and len(values) > 1 and np.ptp(values) == 0:
        lower = upper = mean
    # rounding tolerance: 1e-12 of the problem's gradient scale F_0 + L·Δ_f + σ²
    atol = rounding_tolerance(consts)
    outcome = verdict(lower, upper, float(result_bound.value), atol)
    if not all(c.holds for c in conditions):
        notes.append("a hypothesis of the bound fails at these step sizes: the verdict does not test the theorem")
    if len(values) == 1 and not math.isfinite(upper - lower) and math.isfinite(mean):
        notes.append("one run gives no confidence interval (no spread to estimate): the verdict is inconclusive "
                     "unless the run is noise-free; use 2 or more seeds")
    covers = theorem.covers
    covered = theorem.covered(builder.name)
    if covered is False:
        notes.append(f"{spec.name} is proved for {', '.join(covers)}, not {builder.name}: "
                     "the verdict compares numbers for reference and tests no theorem")
    return CheckResult(
        verdict=outcome, measured=mean, lower=lower, upper=upper, confidence=float(confidence), values=tuple(values),
        seeds=tuple(dict.fromkeys(used)), bound=result_bound, bound_name=spec.name, algorithm=builder.name,
        hparams=built[next(iter(built))].hparams, step_sizes={**step_report, "eta_g_eta_l": step_report["eta_g"] * step_report["eta_l"]},
        conditions=tuple(conditions), tau_max=tau_max, tau_avg=tau_avg, n_clients=N, rounds=T, local_steps=K,
        expectation=expectation, constants=const_info, stopped=tuple(stopped), notes=tuple(notes), atol=atol,
        per_trace_tau=per_trace_tau, first_run=first_run, covered=covered, lhs=theorem.lhs)


def _constants(problem, constants, N: int, K: int, T: int) -> tuple[Constants, dict, list[str]]:
    notes: list[str] = []
    if constants is None:
        constants = estimate_constants(problem)
    if isinstance(constants, EstimatedConstants):
        info = {name: {"value": q["value"], "exact": q["exact"], "uncertainty": q["uncertainty"]}
                for name, q in constants.to_dict().items()}
        if constants.estimated:
            notes.append("estimated constants: " + ", ".join(constants.estimated))
        return constants.to_constants(local_steps=K, rounds=T, n_clients=N), info, notes
    if isinstance(constants, Constants):
        for name, want in (("n_clients", N), ("local_steps", K), ("rounds", T)):
            if getattr(constants, name) != want:
                raise ValueError(f"constants.{name}={getattr(constants, name)} but the run has {want}")
        info = {name: {"value": getattr(constants, name), "exact": None} for name in ("L", "sigma2", "delta_f", "F0")}
        return constants, info, notes
    raise ValueError(f"constants must be verify.EstimatedConstants or bounds.Constants, got {type(constants).__name__}")
