"""A theorem's bound beside the exact worst case at its step sizes: the slack of the theorem.

For a covered theorem, an algorithm, one trace (or sampled traces, for a bound in expectation
over the participation) and the constants at σ² = 0, ``against`` computes

* the step sizes: the theorem's prescription unless given —
  FedSUM (arXiv:2512.18275) Thm 4.1, eq. (12): η_g = 1/√τ̂, η_l = 1/(10 √τ̂ K L) at σ² = 0 with
  τ̂ = max{1, τ_max} of each trace (``bounds.fedsum.step_sizes_4_1``, the corrected variant);
  Cor 4.1 uses Thm 4.1's step sizes on each realised trace (its oracle);
  Server momentum (Sun, Wu, Huang, Zhang, AAAI 2024, arXiv:2312.12670) Thms 4.1 and 4.6: one
  stage with the algorithm's β, ν and η = 1, η_l the largest value at which every hypothesis of
  the theorem holds (the plan of ``verify.theorems.momentum``);
* the bound at those step sizes: at σ² = 0 FedSUM Thm 4.1, eq. (12) is 20 τ̂ (L Δ_f + F_0)/T,
  Cor 4.1, eq. (13) is 20 E[τ_max] (L Δ_f + F_0)/T; Server momentum Thm 4.1 and Thm 4.6 (one
  stage, σ_l² = 0) bound Ḡ = (1/T) Σ_t ‖∇f(x_t)‖² in Δ_f, L, σ_g², η, η_l, K, β, ν (and m);
* the worst case of (1/T) Σ_{t<T} ‖∇f(x_t)‖² over the theorem's class
  (``verify.worst_case.worst_case``): on the trace for a conditional theorem; for a theorem in
  expectation over the participation, the mean over the traces of the per-trace worst cases,
  E_S[max_f (·)] ≥ max_f E_S[(·)], an upper bound on the worst case of the expectation;
* the ratio bound / worst case: the theorem's slack on this instance (≥ 1 when the theorem
  holds over the class; the relaxation of f* can only raise the worst case, so lower the ratio).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from participation import Trace
from participation.delays import delay_metrics

from .coverage import COVERAGE, coverage, function_class_for
from .function_class import FunctionClass
from .programme import Size, WorstCase, _limit, active_sets, programme_size, worst_case
from ..theorems import get
from ..theorems.contract import Setup

__all__ = ["Against", "PerTrace", "against", "THEOREMS", "EXPECTATION_LABEL", "default_theorem", "resolve_theorem", "pattern_for", "default_per_round", "sizes",
           "refuse_above_limit"]

#: The theorems ``against`` compares, each with whether it is in expectation over the participation.
THEOREMS = {"fedsum.theorem_4_1": False, "fedsum.corollary_4_1": True,
            "momentum.theorem_4_1": False, "momentum.theorem_4_6": True}
EXPECTATION_LABEL = "mean of per-trace worst cases: an upper bound on the worst case of the expectation"
_MOMENTUM_ENGINE = ("fedgm", "qhm")


@dataclass(frozen=True)
class PerTrace:
    """One trace's τ_max, τ_avg, step sizes (η_l, η_g of the engine's algorithm) and worst case."""

    tau_max: int
    tau_avg: float
    step_sizes: dict
    worst_case: WorstCase

    def as_dict(self) -> dict:
        return {"tau_max": self.tau_max, "tau_avg": self.tau_avg, "step_sizes": dict(self.step_sizes),
                "worst_case": self.worst_case.value, "status": self.worst_case.status,
                "accuracy": self.worst_case.accuracy, "seconds": self.worst_case.seconds}


@dataclass(frozen=True)
class Against:
    """A theorem's bound against the worst case over its class.

    ``bound``: the theorem's value at ``step_sizes`` (σ² = 0); ``bound_valid``: whether every
    hypothesis of the theorem holds there (``violated`` names the others); ``worst_case``: the
    worst case (one trace) or the mean of the per-trace worst cases (``label`` says which),
    None when a programme is unbounded; ``ratio``: bound / worst case; ``status``, ``solver``,
    ``accuracy``: the solver's word (the least accurate trace's), its name and the largest
    relative duality gap; ``steps``: "prescribed" or "given"."""

    theorem: str
    algorithm: str
    hparams: dict
    function_class: FunctionClass
    relaxation: str
    n_clients: int
    rounds: int
    local_steps: int
    step_sizes: dict
    steps: str
    bound: float
    bound_valid: bool
    violated: tuple[str, ...]
    worst_case: float | None
    label: str
    status: str
    solver: str
    accuracy: float | None
    ratio: float | None
    covered: bool
    per_trace: tuple[PerTrace, ...]
    seconds: float
    expected_tau: tuple[float, float] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return {"theorem": self.theorem, "algorithm": self.algorithm, "hparams": _plain(self.hparams),
                "worst_case": self.worst_case, "label": self.label, "status": self.status, "solver": self.solver,
                "accuracy": self.accuracy, "bound": self.bound, "bound_valid": self.bound_valid,
                "violated": list(self.violated), "ratio": self.ratio, "covered": self.covered,
                "class": self.function_class.as_dict(), "class_description": self.function_class.describe(),
                "relaxation": self.relaxation, "n_clients": self.n_clients, "rounds": self.rounds,
                "local_steps": self.local_steps, "step_sizes": dict(self.step_sizes), "steps": self.steps,
                "expected_tau": None if self.expected_tau is None else list(self.expected_tau),
                "traces": [t.as_dict() for t in self.per_trace], "seconds": self.seconds, "notes": list(self.notes)}


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return value


def default_per_round(n_clients: int) -> int:
    """Clients a round of a sampling preset for a worst case: ⌊2N/3⌋, at least 1 (2 of 3: partial
    participation at the sizes a programme solves in seconds)."""
    return max(1, (2 * int(n_clients)) // 3)


def pattern_for(name: str, n_clients: int, per_round: int | None = None):
    """(pattern, label): preset ``name`` with ``n_clients`` clients and ``per_round`` of them a round
    (default ``default_per_round``) where it samples; a one-line ValueError for an unknown name, or
    a ``per_round`` given to a preset that takes none."""
    from participation.patterns import preset, preset_aliases, preset_names

    key = preset_aliases().get(name, name)
    if key not in preset_names():
        raise ValueError(f"unknown pattern {name!r}; presets: {', '.join(preset_names())}")
    size = per_round or default_per_round(n_clients)
    try:
        return preset(key, n_clients=n_clients, per_round=size), f"{key} ({size} of {n_clients} clients a round"
    except ValueError as err:
        if per_round is not None:
            why = (f"exceeds the number of clients, {n_clients}" if "exceeds" in str(err) else
                   f"preset {key} takes no clients-a-round" if "no setting 'per_round'" in str(err) else str(err))
            raise ValueError(f"per_round {per_round}: {why}") from None
    try:
        return preset(key, n_clients=n_clients), f"{key} ({n_clients} clients"
    except ValueError:
        raise ValueError(f"preset {key!r} cannot be scaled to {n_clients} clients") from None


def default_theorem(algorithm: str, full_participation: bool) -> str:
    """FedSUM Thm 4.1 for the FedSUM family, FedAvg and SCAFFOLD; server momentum Thm 4.1 (full
    participation) or Thm 4.6 (partial) for the momentum family."""
    if algorithm in COVERAGE["momentum.theorem_4_1"].algorithms and algorithm != "fedavg":
        return "momentum.theorem_4_1" if full_participation else "momentum.theorem_4_6"
    return "fedsum.theorem_4_1"


def resolve_theorem(theorem) -> str:
    """The full name of a theorem ``against`` compares ("theorem_4_1" is FedSUM's), or a one-line
    ValueError saying why not, naming those it does."""
    name = getattr(theorem, "name", theorem)
    if not isinstance(name, str):
        raise ValueError(f"a theorem name must be a string, got {name!r}")
    key = name.strip().lower()
    key = key if "." in key else f"fedsum.{key}"
    if key in THEOREMS:
        return key
    covered = ", ".join(THEOREMS)
    if key in COVERAGE and not COVERAGE[key].covered:
        raise ValueError(f"{key} has no worst case ({COVERAGE[key].reason}); the comparison covers {covered}")
    if key in COVERAGE:
        raise ValueError(f"{key} has a worst case (verify.worst_case.worst_case over function_class_for({key!r}, …)) "
                         f"but no comparison with its bound here; the comparison covers {covered}")
    raise ValueError(f"unknown theorem {name!r}; the comparison covers {covered}")


def sizes(algorithm: str, traces, local_steps: int) -> list[Size]:
    """The programme's size and predicted solve time on each trace (``programme_size``), before
    anything is built; ``algorithm`` is the registered name."""
    out = []
    for trace in traces:
        sets, n = active_sets(trace)
        out.append(programme_size(algorithm, sets, n, local_steps))
    return out


def refuse_above_limit(algorithm: str, traces, local_steps: int, max_seconds=None) -> list[Size]:
    """``sizes``, or the one-line ValueError of ``worst_case`` for the first trace predicted to take
    longer than ``max_seconds`` (default 120 s or ``FEDVERIFY_WORST_CASE_SECONDS``), before any solve."""
    found = sizes(algorithm, traces, local_steps)
    limit = _limit(max_seconds)
    for trace, size in zip(traces, found):
        if size.seconds > limit:
            raise ValueError(f"the worst-case programme of {algorithm} with N={trace.n_clients}, T={trace.n_rounds}, "
                             f"K={local_steps} ({size.gram}x{size.gram} Gram matrix, {size.constraints} constraints) "
                             f"would take about {size.seconds:.0f} s, above the limit of {limit:.0f} s "
                             "(FEDVERIFY_WORST_CASE_SECONDS); choose a shorter trace or fewer clients")
    return found


def _traces(traces, n_clients):
    if isinstance(traces, (Trace, np.ndarray)):
        traces = [traces]
    out = []
    for t in traces:
        if isinstance(t, Trace):
            out.append(t)
        else:
            sets, n = active_sets(t, n_clients)
            out.append(Trace.from_sets(sets, n))
    if not out:
        raise ValueError("no trace given; a worst case needs one trace (or several, for a bound in expectation)")
    shapes = {(t.n_rounds, t.n_clients) for t in out}
    if len(shapes) > 1:
        raise ValueError(f"the traces differ in shape (T, N): {sorted(shapes)}; sampled traces share T and N")
    return out


def _constants(constants, n: int, rounds: int, sigma_g2):
    from bounds import Constants

    if not isinstance(constants, Constants):
        raise ValueError(f"constants must be a bounds.Constants, got {type(constants).__name__}")
    changes = {"sigma2": 0.0, "n_clients": n, "rounds": rounds}
    if sigma_g2 is not None:
        changes["zeta2"] = float(sigma_g2)
    return dataclasses.replace(constants, **changes)


def _given(step_sizes) -> dict:
    if step_sizes is None:
        return {}
    out = {}
    for key, value in dict(step_sizes).items():
        if key not in ("eta_l", "eta_g"):
            raise ValueError(f"step_sizes takes eta_l and eta_g, got {key!r}")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{key} must be a finite number > 0, got {value!r}")
        out[key] = float(value)
    return out


def against(theorem, algorithm: str, traces, constants, *, hparams=None, step_sizes=None, sigma_g2=None,
            expected_tau=None, pattern=None, solver: str = "clarabel", max_seconds=None, n_clients=None) -> Against:
    """The bound of ``theorem`` against the worst case of ``algorithm`` (a registered name, with
    ``hparams`` such as β, ν) on ``traces`` (a Trace, a (T, N) mask or a list of them; several
    only for a bound in expectation over the participation) over the theorem's class at
    ``constants`` (``bounds.Constants``; σ² is set to 0, N and T to the traces').

    ``step_sizes``: {"eta_l", "eta_g"} (the engine's, as ``algorithms.get`` takes them), a
    missing one prescribed; None: the theorem's own. ``sigma_g2``: σ_g² of the momentum
    theorems (else ``constants.zeta2``). ``expected_tau``: (E[τ_max], E[τ_avg]) for FedSUM
    Cor 4.1; else exact or Monte-Carlo from ``pattern`` (``verify.theorems.delay.expected_delays``),
    else the mean over ``traces``. A theorem, algorithm or value outside these is a one-line
    ValueError naming it."""
    name = resolve_theorem(theorem)
    expectation = THEOREMS[name]
    entry = coverage(name)
    import algorithms

    registered = algorithms.get(algorithm).name if isinstance(algorithm, str) else getattr(algorithm, "name", None)
    if registered not in entry.algorithms:
        raise ValueError(f"{name}'s worst case runs {', '.join(entry.algorithms)}, not {algorithm!r}")
    traces = _traces(traces, n_clients)
    if len(traces) > 1 and not expectation:
        raise ValueError(f"{name} is conditional on the trace: give one trace, not {len(traces)}")
    first = traces[0]
    consts = _constants(constants, first.n_clients, first.n_rounds, sigma_g2)
    refuse_above_limit(registered, traces, consts.local_steps, max_seconds)
    fc = function_class_for(name, consts)
    given = _given(step_sizes)
    hparams = dict(hparams or {})
    if name.startswith("fedsum."):
        return _fedsum(name, registered, traces, consts, fc, hparams, given, expected_tau, pattern, solver,
                       max_seconds)
    return _momentum(name, registered, traces, consts, fc, hparams, given, solver, max_seconds)


def _combine(name, algorithm, hparams, fc, consts, cases, bound, steps_mode, expectation, notes, covered,
             expected_tau=None) -> Against:
    results = [c.worst_case for c in cases]
    values = [w.value for w in results]
    value = None if any(v is None for v in values) else float(np.mean(values))
    statuses = [w.status for w in results]
    status = next((s for s in statuses if s != "optimal"), "optimal")
    accuracies = [w.accuracy for w in results if w.accuracy is not None]
    ratio = bound.value / value if value is not None and value > 0 and math.isfinite(bound.value) else None
    label = EXPECTATION_LABEL if expectation else "worst case on the trace"
    if len(cases) == 1 and expectation:
        notes = notes + ["one trace stands for the expectation over the participation"]
    step_report = cases[0].step_sizes if len(cases) == 1 else {
        k: float(np.mean([c.step_sizes[k] for c in cases])) for k in cases[0].step_sizes}
    return Against(theorem=name, algorithm=algorithm, hparams=hparams, function_class=fc,
                   relaxation=results[0].relaxation, n_clients=consts.n_clients, rounds=consts.rounds,
                   local_steps=consts.local_steps, step_sizes=step_report, steps=steps_mode, bound=float(bound.value),
                   bound_valid=bool(bound.valid), violated=tuple(c.name for c in bound.violated), worst_case=value,
                   label=label, status=status, solver=results[0].solver,
                   accuracy=max(accuracies) if len(accuracies) == len(results) else None, ratio=ratio,
                   covered=covered, per_trace=tuple(cases), seconds=float(sum(w.seconds for w in results)),
                   expected_tau=expected_tau, notes=tuple(dict.fromkeys(notes)))


def _fedsum(name, algorithm, traces, consts, fc, hparams, given, expected_tau, pattern, solver, max_seconds):
    """FedSUM Thm 4.1, eq. (12) at each trace's τ, or Cor 4.1, eq. (13) at E[τ]."""
    import algorithms
    from bounds import fedsum

    lemma_name = algorithm if algorithm in fedsum.ALGORITHMS else "fedsum-b"
    notes = []
    if algorithm not in fedsum.ALGORITHMS:
        notes.append(f"{name} is proved for {', '.join(fedsum.ALGORITHMS)}, not {algorithm}: it runs at FedSUM-B's "
                     "step sizes and is compared for reference")
    cases, bounds_per_trace = [], []
    for trace in traces:
        m = delay_metrics(trace)
        b = fedsum.theorem_4_1(consts, m.tau_max, m.tau_avg, algorithm=lemma_name)
        steps = {"eta_l": given.get("eta_l", b.step_sizes["eta_l"]), "eta_g": given.get("eta_g", b.step_sizes["eta_g"])}
        alg = algorithms.get(algorithm, local_steps=consts.local_steps, **{**hparams, **steps})
        wc = worst_case(alg, trace, fc, solver=solver, max_seconds=max_seconds)
        cases.append(PerTrace(int(m.tau_max), float(m.tau_avg), steps, wc))
        bounds_per_trace.append(b)
    steps_mode = "given" if given else "prescribed"
    if given:
        notes.append(f"step sizes given ({', '.join(sorted(given))}); the theorem's value assumes its own "
                     "(Thm 4.1's at the trace's τ), so the bound is a reference, not a theorem, at these")
    if name == "fedsum.theorem_4_1":
        bound = bounds_per_trace[0]
        return _combine(name, algorithm, hparams, fc, consts, cases, bound, steps_mode, False, notes,
                        algorithm in fedsum.ALGORITHMS)
    if expected_tau is not None:
        e_max, e_avg = (float(x) for x in expected_tau)
        notes.append("E[τ_max], E[τ_avg]: given")
    elif pattern is not None:
        from ..theorems.delay import expected_delays

        e_max, e_avg, _, how = expected_delays(pattern, consts.rounds, 0, 0.95)
        notes.append(f"E[τ_max], E[τ_avg]: {how}")
    else:
        e_max = float(np.mean([c.tau_max for c in cases]))
        e_avg = float(np.mean([c.tau_avg for c in cases]))
        notes.append(f"E[τ_max], E[τ_avg]: the mean over the {len(cases)} traces")
    bound = fedsum.corollary_4_1(consts, e_max, e_avg)
    if not given:
        notes.append("step sizes: Theorem 4.1's for each realised trace (Cor 4.1's oracle); the mean is shown")
    return _combine(name, algorithm, hparams, fc, consts, cases, bound, steps_mode, True, notes,
                    algorithm in fedsum.ALGORITHMS, expected_tau=(float(e_max), float(e_avg)))


def _momentum_setup(name, algorithm, trace, consts, hparams, given_alg):
    return get(name).plan(Setup(problem=None, algorithm=algorithm, hparams=hparams, given=given_alg, constants=consts,
                                trace=trace, pattern=None, seeds=(0,)))


def _engine(plan_algorithm, consts):
    """The plan's algorithm as the worst-case engine transcribes it: FedGM and QHM with one stage's
    (η, β, ν) as their own (a one-stage schedule runs the same rounds)."""
    import algorithms

    schedule = getattr(plan_algorithm, "schedule", None)
    if schedule is None:
        return plan_algorithm
    if schedule.n_stages != 1:
        raise ValueError("a multistage schedule has no worst case here; give one stage (no stages=)")
    return algorithms.get(plan_algorithm.name, eta_l=schedule.eta_l, eta_g=float(schedule.eta_g[0]),
                          beta=float(schedule.beta[0]), nu=float(schedule.nu[0]), local_steps=consts.local_steps)


def _momentum(name, algorithm, traces, consts, fc, hparams, given, solver, max_seconds):
    """Server momentum Thm 4.1 (full participation) and Thm 4.6 (m of N uniformly, each round)."""
    import algorithms

    if hparams.get("stages") is not None or hparams.get("schedule") is not None:
        raise ValueError("a multistage schedule has no worst case here; give one stage (no stages=)")
    options = {k: v for k, v in hparams.items() if k not in ("eta_l", "eta_g")}
    from algorithms.registry import algorithm_class

    takes = {f.name for f in dataclasses.fields(algorithm_class(algorithm))}
    unknown = sorted(set(options) - takes)
    if unknown:
        raise ValueError(f"{algorithm} has no hyper-parameter {', '.join(map(repr, unknown))}; it takes "
                         f"{', '.join(sorted(takes - {'eta_l', 'eta_g', 'local_steps', 'schedule'}))}")
    given_alg = None
    if "eta_l" in given:
        probe = _engine(_momentum_setup(name, algorithm, traces[0], consts, options, None).algorithm, consts)
        eta_g = given.get("eta_g", probe.eta_g)
        given_alg = algorithms.get(algorithm, eta_l=given["eta_l"], eta_g=eta_g, local_steps=consts.local_steps,
                                   **{k: v for k, v in probe.hparams.items()
                                      if k not in ("eta_l", "eta_g", "local_steps", "schedule")})
    elif "eta_g" in given:
        probe = algorithms.get(algorithm, local_steps=consts.local_steps, **options)
        beta = float(getattr(probe, "beta", 0.0) or 0.0)
        options["eta_g"] = given["eta_g"] / (1 - beta) if algorithm in ("fedavgm", "fednag") else given["eta_g"]
    sizes = {int(n) for t in traces for n in t.mask.sum(axis=1)}
    if name == "momentum.theorem_4_6" and len(sizes) != 1:
        raise ValueError(f"{name} assumes the same number m ≥ 1 of clients every round (Server momentum footnote 4); "
                         f"the traces have {', '.join(map(str, sorted(sizes)[:5]))} clients in different rounds")
    plan = _momentum_setup(name, algorithm, traces[0], consts, options, given_alg)
    engine = _engine(plan.algorithm, consts)
    bound = plan.bound([])
    steps = {"eta_l": float(engine.eta_l), "eta_g": float(engine.eta_g)}
    cases = []
    for trace in traces:
        m = delay_metrics(trace)
        wc = worst_case(engine, trace, fc, solver=solver, max_seconds=max_seconds)
        cases.append(PerTrace(int(m.tau_max), float(m.tau_avg), steps, wc))
    notes = [n for n in plan.notes if not n.startswith("bound in expectation over the participation")]
    return _combine(name, algorithm, {**hparams, **{k: v for k, v in engine.hparams.items()
                                                    if k in ("beta", "nu")}}, fc, consts, cases, bound,
                    "given" if given else "prescribed", THEOREMS[name], notes, True)
