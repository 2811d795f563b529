"""A theorem's measured left side against its right-hand side, judged statistically.

``check`` knows theorems only through their contract (``verify.theorems``): it validates the
inputs, builds a :class:`~verify.theorems.contract.Setup` and hands it to the theorem's plan
(its own, or the delay plan of a bound written in the participation's delays,
``verify.theorems.delay``); ``verify.theorems.runner`` runs the plan and the one judge,
``verify.verdicts.judge``, turns the measured values into limits and a verdict:

    "holds"        upper limit ≤ bound
    "violated"     lower limit > bound (or a run diverged)
    "inconclusive" otherwise.

The hypotheses of the theorem at the step sizes actually used are reported beside the verdict
(``conditions``, ``conditions_hold``); a verdict is never hidden because a condition fails.

``worst_case`` ("auto", True, False) puts the exact worst case of the left side over the
theorem's class beside the row (``CheckResult.worst_case``, see
``verify.theorems.runner.worst_case_column``): measured ≤ worst case ≤ bound, and a noise-free
run measuring above its certified worst case is "outside the class". The library's default is
False, so that searches and sweeps running many checks solve no programme they did not ask for;
``fedverify check`` and ``check-run`` default to "auto".
"""
from __future__ import annotations

import dataclasses
import numbers
import warnings

import algorithms
from algorithms import Algorithm
from bounds.core import Constants
from participation import Trace
from participation.patterns import Pattern

from .constants import EstimatedConstants, estimate_constants
from .theorems.contract import Setup, Theorem
from .theorems.delay import STEP_MODES, BoundSpec, bound_spec
from .theorems.runner import run_plans, worst_case_mode
from .verdicts import CheckResult, confidence_limits, distinct_seeds, verdict
from participation.validation import integer

__all__ = ["check", "check_many", "CallError", "CheckResult", "verdict", "confidence_limits", "resolve_bound", "resolve_theorem",
           "covered_algorithms"]


def _theorems() -> dict:
    from .theorems import THEOREMS

    return THEOREMS


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
        for theorem in _theorems().values():       # a paper's bound function names its theorem
            if theorem.bound is bound:
                return theorem
        from .theorems.user import from_callable

        return from_callable(bound)
    raise ValueError(f"bound must be a theorem name ({', '.join(_theorems())}), a Theorem or a callable, got {bound!r}")


def covered_algorithms(bound) -> tuple[str, ...] | None:
    """The algorithm names ``bound`` is proved for (a name, a Theorem or a callable with a
    ``covers`` attribute), or None when it does not say."""
    return resolve_theorem(bound).covers


# ---------------------------------------------------------------------------- inputs


def resolve_bound(bound) -> BoundSpec:
    """The delay bound behind ``bound`` (a name, a Theorem or a callable): name, function and
    the keywords it takes among ``constants``, ``tau_max``, ``tau_avg``, ``eta_g``, ``eta_l``,
    ``algorithm``, ``pattern`` and, for a bound in full expectation, ``expected_tau_max``,
    ``expected_tau_avg``; it returns a ``Bound`` or a number. A theorem with a plan of its own
    (momentum, CA-Fed, LOGIT) has no delay bound: a ValueError says so."""
    return bound_spec(resolve_theorem(bound))


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
    out = tuple(int(s) for s in out)
    distinct_seeds(out)
    return out


def _count(value, name: str, minimum: int = 1) -> int:
    return integer(value, name, minimum)


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


# ---------------------------------------------------------------------------- check


def check(algorithm, problem, trace_or_pattern, theorem=None, seeds=5, *, rounds=None,
          confidence: float = 0.95, traces=None, step_sizes: str | None = None, local_steps: int = 1,
          constants=None, hparams: dict | None = None, trace_seed: int = 0, device=None, on_run=None,
          bound=None, worst_case=False) -> CheckResult:
    """Run ``algorithm`` on ``problem`` and judge the theorem's measured left side ((1/T) Σ_{t<T}
    ‖∇f(x_t)‖² for FedSUM's) against its bound.

    ``algorithm``: a name (built with ``algorithms.get`` at the step sizes, ``local_steps``
    and ``hparams``), an ``Algorithm`` (its own step sizes are used unless
    ``step_sizes="theorem"``), or a factory ``(eta_l=, eta_g=, local_steps=) -> Algorithm``.
    ``trace_or_pattern``: a ``Trace`` or 0/1 mask (truncated to ``rounds``), or a pattern
    (``rounds`` needed; a conditional bound is judged on its trace of seed ``trace_seed``).
    ``theorem``: a theorem name (``fedverify bound --list``; default ``"fedsum.theorem_4_1"``), a
    Theorem or a callable delay bound (see ``resolve_bound``); ``bound`` is its deprecated name (a
    DeprecationWarning; it goes in the next release). ``seeds``: a count or the distinct noise seeds (a repeated seed is
    one sample, not several: refused). ``traces``: for a bound in full expectation, the number of traces
    drawn from the pattern (default: one per seed, paired with it; otherwise every trace
    runs every seed and the unit is the trace's mean). ``step_sizes``: "theorem" (the
    bound's prescribed η_g, η_l, or Theorem 4.1's for a lemma; default for a name or a
    factory), "given" (an Algorithm's own; marked ``†`` where the theorem prescribes others) or
    "admissible" (delay bounds: the largest η_l at which every hypothesis of the FedSUM
    algorithm's lemma holds). ``constants``: ``EstimatedConstants`` or
    ``bounds.Constants`` (default ``estimate_constants(problem)``). ``on_run(history, trace,
    algorithm, seed)`` is called after every run (``fedverify check --record`` writes each run's
    record with it). ``worst_case``: "auto" (the worst case over the theorem's class beside the
    result where the run is noise-free, the theorem covers the algorithm and the programmes are
    predicted to solve within a few seconds), True (up to ``FEDVERIFY_WORST_CASE_SECONDS``) or
    False (default: not computed; ``result.worst_case`` says so).
    """
    theorem = _theorem_argument(theorem, bound)
    theorem, setup, kwargs, device = _prepare(
        algorithm, problem, trace_or_pattern, theorem, seeds, rounds=rounds, confidence=confidence, traces=traces,
        step_sizes=step_sizes, local_steps=local_steps, constants=constants, hparams=hparams, trace_seed=trace_seed,
        device=device, on_run=on_run, worst_case=worst_case)
    return run_plans([(theorem, setup, kwargs)], device=device)[0]


class CallError(ValueError):
    """A call of :func:`check_many` refused: ``index`` is its position, the message says why."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def check_many(calls: list[dict]) -> list[CheckResult]:
    """``check(**call)`` for every keyword dict in ``calls``, their runs batched together
    (``verify.theorems.runner.run_plans``); the results are those of the calls one by one.
    The calls must share one ``device``; a call refused before any run raises
    :class:`CallError` naming its index."""
    prepared = []
    for index, call in enumerate(calls):
        try:
            call = dict(call)
            theorem = _theorem_argument(call.pop("theorem", None), call.pop("bound", None))
            prepared.append(_prepare(**call, theorem=theorem))
        except ValueError as err:
            raise CallError(index, str(err)) from None
    devices = {str(device) for *_, device in prepared}
    if len(devices) > 1:
        raise ValueError(f"check_many runs on one device, got {sorted(devices)}")
    device = prepared[0][3] if prepared else None
    return run_plans([(theorem, setup, kwargs) for theorem, setup, kwargs, _ in prepared], device=device)


def _theorem_argument(theorem, bound):
    """``theorem``, or the deprecated ``bound=`` in its place (with a DeprecationWarning)."""
    if bound is not None:
        warnings.warn("check(bound=) is named theorem=; bound= goes in the next release", DeprecationWarning,
                      stacklevel=3)
        if theorem is not None:
            raise ValueError("give theorem only (bound is its deprecated name)")
        theorem = bound
    return "fedsum.theorem_4_1" if theorem is None else theorem


def _prepare(algorithm, problem, trace_or_pattern, theorem="fedsum.theorem_4_1", seeds=5, *, rounds=None,
             confidence: float = 0.95, traces=None, step_sizes: str | None = None, local_steps: int = 1,
             constants=None, hparams: dict | None = None, trace_seed: int = 0, device=None, on_run=None,
             worst_case=False):
    """The validated (theorem, setup, judge keywords, device) of one ``check`` call."""
    worst_case = worst_case_mode(worst_case)
    if not (hasattr(problem, "n_clients") and hasattr(problem, "stochastic_grads")):
        raise ValueError(f"problem must be an algorithms problem (algorithms.problems: Quadratic, Logistic, "
                         f"Classifier or your own), got {type(problem).__name__}")
    theorem = resolve_theorem(theorem)
    theorem.require_checkable()
    seeds = _seeds(seeds)
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must lie in [0.5, 1), got {confidence!r}")
    local_steps = _count(local_steps, "local_steps")
    options = {k: v for k, v in (hparams or {}).items() if k in theorem.options}
    builder = _Builder(algorithm, local_steps, {k: v for k, v in (hparams or {}).items() if k not in options})
    if step_sizes is None:
        step_sizes = "given" if isinstance(algorithm, Algorithm) else "theorem"
    if step_sizes not in STEP_MODES:
        raise ValueError(f"step_sizes must be one of {', '.join(map(repr, STEP_MODES))}, got {step_sizes!r}")
    if step_sizes == "given" and builder.given is None:
        raise ValueError("step_sizes='given' needs an algorithms.Algorithm (a name or factory has no step sizes of its own)")
    if device is not None:
        from algorithms.devices import resolve_device

        device = resolve_device(device)
    trace, pattern, T = _as_trace(trace_or_pattern, problem.n_clients, rounds)
    K, N = builder.local_steps, problem.n_clients
    consts, const_info, notes = _constants(problem, constants, N, K, T)
    if not theorem.delay_bound:
        if traces not in (None, len(seeds)):
            raise ValueError(f"traces={traces!r}: {theorem.name} draws one trace per seed from the pattern")
        fixed = sorted({"eta_l", "eta_g"} & set(hparams or {}))
        if fixed:
            raise ValueError(f"{theorem.name} chooses {', '.join(fixed)} itself; to run at step sizes of your own, "
                             "pass an algorithms.Algorithm with step_sizes='given'")
        if step_sizes == "admissible":
            raise ValueError(f"step_sizes='admissible' is for delay bounds; {theorem.name} chooses its own step sizes")
    elif traces is not None:
        traces = _count(traces, "traces")
    given = algorithm if isinstance(algorithm, Algorithm) and step_sizes == "given" else None
    setup = Setup(problem=problem, algorithm=builder.name, hparams={**builder.hparams, **options}, given=given,
                  constants=consts, trace=trace, pattern=pattern, seeds=seeds, trace_seed=trace_seed,
                  step_mode=step_sizes, given_steps=builder.given, n_traces=traces, confidence=float(confidence))
    return theorem, setup, dict(confidence=confidence, const_info=const_info, notes=notes, on_run=on_run,
                                worst_case=worst_case, build=builder.build), device


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
