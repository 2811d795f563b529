"""Server momentum (Sun, Wu, Huang, Zhang, AAAI 2024, arXiv:2312.12670) as checkable theorems.

Every theorem bounds the stage-weighted average Ḡ = (1/S) Σ_s (1/T_s) Σ_{t in stage s}
E‖∇f(x_t)‖² (Sec. 4.2) of multistage FedGM (Algorithm 3), measured per run by
:func:`~verify.theorems.measures.stage_average`.

* Thm 4.1: full participation; FedGM and its presets (FedAvgM is ν = 1, FedNAG ν = β, QHM is
  FedGM itself; FedAvg is ν = 0, Sec. 3 after eq. (2)). Expectation over the noise.
* Thm 4.6: m clients drawn uniformly without replacement each round (footnote 4): over the
  noise and the sampling, so every seed runs on its own trace drawn from the pattern.
* Thm 5.1: autonomous clients (Algorithm 4), uniform arrival; Cor G.1 (Cor 5.4): any rule for who
  arrives, m arrivals per server step (a round here), so the participation gives m ≥ 1 clients
  every round (a round without arrivals is no server step of Algorithm 4).
  Their φ_1, φ_2, φ_3 are taken from the local steps K_{t,i} the runs logged (footnote 5),
  pooled over the runs, and τ = ``max_delay`` − 1.

The schedule: one stage (η = ``eta_g`` 1.0, the algorithm's β and ν) unless ``hparams``
gives ``stages`` (server rates η_1 ≥ η_2 ≥ …, the "constant and drop" schedule of Sec. 4.1 with
β_1 = β) or a ``schedule``. η_l: the largest value at which every hypothesis of the theorem
holds (the conditions are upper limits on η_l; found by bisection to 1e-3 relative), or the
given algorithm's own.

σ_g² (Assumption A3, (1/n) Σ_i ‖∇f_i(x) − ∇f(x)‖² ≤ σ_g² for all x) is the largest value the
runs observed at their iterates unless ``constants.extra["sigma_g2"]`` (or ``zeta2``) gives it:
the proofs use A3 only at the iterates, so the measured value is the one they need.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

import algorithms
from bounds import momentum as bm
from participation import Trace
from participation.patterns import Cyclic, ReshuffledCyclic, Uniform

from .contract import Plan, RecordReading, Setup, Theorem, option_number, option_numbers
from .search import space
from .measures import observed_first, observed_max, pooled, stage_average

__all__ = ["THEOREMS", "largest_admissible", "Statement", "declare"]

FAMILY = ("fedgm", "fedavgm", "fednag", "qhm")
#: (β, ν) as a function of β for the presets that fix ν (Sec. 3, after eq. (2)).
_NU = {"fedavgm": lambda beta: 1.0, "fednag": lambda beta: beta}
REDUCTIONS = {
    "fedavgm": "FedAvgM(η', β) is FedGM(η = η'/(1−β), β, ν = 1) (Server momentum Sec. 3); run as FedAvgM",
    "fednag": "FedNAG(η', β) is FedGM(η = η'/(1−β), β, ν = β) (Server momentum Sec. 3); run as FedNAG",
    "qhm": "QHM is FedGM with β = 0.999, ν = 0.7 (Server momentum Sec. 3)",
    "fedavg": "FedAvg is FedGM with ν = 0 (Server momentum Sec. 3); run as FedAvg with η_g = η",
}


def largest_admissible(valid, start: float, rtol: float = 1e-3) -> float:
    """The largest η in (0, start] with ``valid(η)``, for a condition set that holds below a
    threshold: halve from ``start`` until valid, then bisect to ``rtol``."""
    eta = start
    for _ in range(200):
        if valid(eta):
            break
        eta /= 2
    else:
        raise ValueError("no admissible step size above 2^-200 times the start")
    if eta == start:
        return eta
    low, high = eta, 2 * eta
    while high - low > rtol * low:
        mid = (low + high) / 2
        low, high = (mid, high) if valid(mid) else (low, mid)
    return low


def _defaults(name: str) -> tuple[float, float]:
    """(β, ν) of ``algorithms.get(name)`` at its defaults (ν of FedAvgM and FedNAG is fixed by β,
    :data:`_NU`; FedAvg is β = ν = 0)."""
    if name == "fedavg":
        return 0.0, 0.0
    alg = algorithms.get(name)
    return float(alg.beta), float(getattr(alg, "nu", None) or 0.0)


def _schedule(setup: Setup, eta_l: float) -> bm.StageSchedule:
    hp = dict(setup.hparams)
    if hp.get("schedule") is not None:
        s = hp["schedule"]
        return bm.StageSchedule(s.lengths, s.eta_g, eta_l, s.beta, s.nu)
    name = setup.algorithm
    default_beta, default_nu = _defaults(name)
    beta = option_number(hp, "beta", default_beta)
    nu = option_number(hp, "nu", _NU[name](beta) if name in _NU else default_nu)
    if name == "fedavg":
        beta, nu = 0.0, 0.0
    stages = option_numbers(hp, "stages")
    if stages is not None and name == "fednag":
        raise ValueError("fednag with stages: FedNAG's ν = β would change with β_s, which the constant-and-drop "
                         "schedule (Server momentum Sec. 4.1) keeps fixed; use fedgm with nu=")
    if stages is None:
        return bm.single_stage(setup.rounds, option_number(hp, "eta_g", 1.0), eta_l, beta=beta, nu=nu)
    return bm.constant_and_drop(stages, setup.rounds, eta_l, nu=nu, beta1=beta)


def _given_schedule(setup: Setup) -> bm.StageSchedule | None:
    alg = setup.given
    if alg is None:
        return None
    if getattr(alg, "schedule", None) is not None:
        return alg.schedule
    beta = float(getattr(alg, "beta", 0.0))
    if alg.name in _NU:       # η' of the classical forms is η(1 − β)
        return bm.single_stage(setup.rounds, alg.eta_g / (1 - beta), alg.eta_l, beta=beta, nu=_NU[alg.name](beta))
    return bm.single_stage(setup.rounds, alg.eta_g, alg.eta_l, beta=beta, nu=float(getattr(alg, "nu", 0.0)))


def _build(setup: Setup, schedule: bm.StageSchedule, autonomous: bool):
    if setup.given is not None:
        return setup.given
    K = setup.local_steps
    extra = {k: v for k, v in setup.hparams.items() if k in ("max_delay", "max_epochs")}
    if autonomous:
        return algorithms.get("fedgm-autonomous", schedule=schedule, local_steps=K, **extra)
    if setup.algorithm in _NU and schedule.n_stages == 1:
        beta = schedule.beta[0]
        return algorithms.get(setup.algorithm, eta_l=schedule.eta_l, eta_g=schedule.eta_g[0] * (1 - beta), beta=beta,
                              local_steps=K)
    if setup.algorithm == "fedavg" and schedule.n_stages == 1:
        return algorithms.get("fedavg", eta_l=schedule.eta_l, eta_g=schedule.eta_g[0], local_steps=K)
    name = "qhm" if setup.algorithm == "qhm" else "fedgm"
    return algorithms.get(name, schedule=schedule, local_steps=K)


def _sigma_g2(setup: Setup, histories) -> tuple[float, str]:
    extra = setup.constants.extra or {}
    for key in ("sigma_g2", "zeta2"):
        if extra.get(key) is not None:
            return float(extra[key]), "given"
    if setup.constants.zeta2 is not None:
        return float(setup.constants.zeta2), "given"
    return observed_max(histories, "heterogeneity"), "measured: max over the runs' iterates"


def _constants(setup: Setup, sigma_g2: float):
    return dataclasses.replace(setup.constants, zeta2=sigma_g2)


def _uniform_m(setup: Setup, name: str, any_rule: bool = False) -> int:
    """m of uniform sampling without replacement: from a Uniform pattern, or a trace whose rounds all
    have m clients. ``any_rule``: any pattern that gives m clients every round (Cor G.1: any rule
    for who arrives, but every server step takes m arrivals, Algorithm 4)."""
    if setup.pattern is not None:
        if any_rule and isinstance(setup.pattern, (Uniform, Cyclic, ReshuffledCyclic)):
            return setup.pattern.per_round
        if any_rule:
            raise ValueError(f"{name}: every server step takes m arrivals (Algorithm 4), so the participation must "
                             f"give the same m ≥ 1 clients each round (Uniform, Cyclic, ReshuffledCyclic or such a "
                             f"trace), not {type(setup.pattern).__name__}")
        if not isinstance(setup.pattern, Uniform):
            raise ValueError(f"{name} assumes m clients drawn uniformly without replacement each round "
                             f"(Server momentum footnote 4); give a Uniform pattern (P1), not {type(setup.pattern).__name__}")
        return setup.pattern.per_round
    sizes = np.unique(setup.trace.mask.sum(axis=1))
    if sizes.size != 1 or sizes[0] == 0:
        raise ValueError(f"{name} assumes the same number m ≥ 1 of clients every round; the trace has "
                         f"{', '.join(map(str, sizes[:5]))} clients in different rounds")
    return int(sizes[0])


def _stats(histories, k_max: float) -> bm.LocalStepStats:
    """φ_1, φ_2, φ_3 (footnote 5) from the logged K_{t,i}, pooled over the runs' rounds with arrivals."""
    rows = [r for r in pooled(histories, "local_steps") if r.size]
    if not rows:
        return bm.LocalStepStats.constant(int(k_max))
    phi1 = float(np.mean([r.mean() for r in rows]))
    phi2 = float(np.mean([(r ** 2).mean() for r in rows]))
    phi3 = float(np.mean([(1 / r).mean() for r in rows]))
    return bm.LocalStepStats(phi1, phi2, phi3, float(max(k_max, max(r.max() for r in rows))))


@dataclass(frozen=True)
class Statement:
    """What one Server momentum statement fixes beyond the plan they share: the participation it
    assumes (``"full"``: every client every round, Thm 4.1; ``"uniform"``: m clients drawn
    uniformly without replacement, footnote 4; ``"m-per-round"``: any rule giving m ≥ 1 arrivals
    every server step, Cor G.1 with Algorithm 4), whether the clients are autonomous (Algorithm 4:
    delays and local steps K_{t,i} of their own), and its formula in ``bounds.momentum``, called
    as ``formula(constants, schedule)`` under full participation, ``formula(constants, schedule,
    m)`` under sampling and ``formula(constants, schedule, m, tau, stats)`` for autonomous clients."""

    participation: str
    autonomous: bool
    formula: Callable

    def __post_init__(self):
        if self.participation not in ("full", "uniform", "m-per-round"):
            raise ValueError(f"participation must be 'full', 'uniform' or 'm-per-round', got {self.participation!r}")

    @property
    def expectation(self) -> str:
        """Over the noise given the participation (full participation), else over both."""
        return "noise" if self.participation == "full" else "participation"

    def bound(self, consts, schedule, m: int, tau: int, stats):
        if self.autonomous:
            return self.formula(consts, schedule, m, tau, stats)
        return self.formula(consts, schedule) if self.participation == "full" else self.formula(consts, schedule, m)


def _plan(setup: Setup, *, name: str, statement: Statement) -> Plan:
    autonomous = statement.autonomous
    allowed = ("fedgm-autonomous",) if autonomous else FAMILY + ("fedavg",)
    if setup.given is None and setup.algorithm not in allowed:
        raise ValueError(f"{name} runs {', '.join(allowed)} at its own step sizes, not {setup.algorithm}")
    traces, note = setup.unit_traces(statement.expectation)
    if statement.participation == "full":
        left_out = sum(int((~t.mask).sum()) for t in traces)
        if left_out:
            raise ValueError(f"{name} assumes full participation (every client every round); the trace leaves "
                             f"{left_out} client-rounds out; use momentum.theorem_4_6")
        m = setup.n_clients
    else:
        m = _uniform_m(setup, name, any_rule=statement.participation == "m-per-round")
    K = setup.local_steps
    if autonomous:
        probe = setup.given or algorithms.get("fedgm-autonomous", local_steps=K,
                                              **{k: v for k, v in setup.hparams.items() if k in ("max_delay", "max_epochs")})
        max_delay, max_epochs = probe.max_delay, probe.max_epochs
    else:
        max_delay, max_epochs = 1, 1
    tau = max_delay - 1
    consts0 = _constants(setup, 1.0)      # σ_g² does not enter any condition

    def bound_at(schedule, stats=None, consts=consts0):
        return statement.bound(consts, schedule, m, tau, stats or bm.LocalStepStats.constant(K * max_epochs))

    schedule = _given_schedule(setup)
    if schedule is None:
        start = 1 / (8 * K * max_epochs * setup.constants.L)
        eta_l = largest_admissible(lambda e: bound_at(_schedule(setup, e)).valid, start)
        schedule = _schedule(setup, eta_l)
        how = "the largest η_l at which every hypothesis holds (bisection)"
    else:
        how = "the recorded runs'" if setup.recorded is not None else "the algorithm's own"
        admitted = _admitted_note(schedule, bound_at, K * max_epochs, setup.constants.L)
        if admitted:
            how += admitted
    algorithm = _build(setup, schedule, autonomous)

    def bound(histories):
        sigma_g2, _ = _sigma_g2(setup, histories)
        stats = _stats(histories, K * max_epochs) if autonomous else None
        return bound_at(schedule, stats, _constants(setup, sigma_g2))

    def start_bound(histories):
        """The bound at σ_g² measured at the runs' start: None when σ_g² is given."""
        if _sigma_g2(setup, histories)[1] == "given":
            return None
        start = observed_first(histories, "heterogeneity")
        if not math.isfinite(start):
            return None
        stats = _stats(histories, K * max_epochs) if autonomous else None
        return bound_at(schedule, stats, _constants(setup, start))

    def extras(histories):
        sigma_g2, how_g = _sigma_g2(setup, histories)
        out = {"sigma_g2": sigma_g2, "sigma_g2 source": how_g, "stages": schedule.n_stages, "m": m}
        if autonomous:
            s = _stats(histories, K * max_epochs)
            delays = pooled(histories, "delays")
            out |= {"phi1": s.phi1, "phi2": s.phi2, "phi3": s.phi3, "K_max": s.k_max, "tau": tau,
                    "largest observed delay": float(max((d.max() for d in delays if d.size), default=0.0))}
        return out

    notes = [note] if note else []
    if setup.algorithm in REDUCTIONS and setup.algorithm != "fedavg":
        run_as = type(algorithm).__name__
        notes.append(f"{setup.algorithm}: {REDUCTIONS[setup.algorithm].split('; run as')[0]}; run as {run_as}")
    notes.append(f"η_l: {how}; schedule: {schedule.n_stages} stage(s), η = {schedule.eta_g}, β = {schedule.beta}, "
                 f"ν = {schedule.nu}")
    return Plan(algorithm=algorithm, traces=traces, measure=lambda h, problem: stage_average(h, schedule.lengths),
                bound=bound, extras=extras, start_bound=start_bound, run_options={"observe": True},
                step_sizes={"eta_l": schedule.eta_l, "eta_g": schedule.eta_g[0],
                            **({"eta_g_last": schedule.eta_g[-1]} if schedule.n_stages > 1 else {})}, notes=notes)


def _admitted_note(schedule, bound_at, steps: float, L: float) -> str:
    """When the given η_l breaks a hypothesis: the η_l the theorem admits with the same server
    schedule (η, β, ν per stage), found as the largest valid one (the hypotheses hold below a
    threshold in η_l); empty when the given one is admitted or none is."""
    if bound_at(schedule).valid:
        return ""
    try:
        eta_l = largest_admissible(lambda e: bound_at(dataclasses.replace(schedule, eta_l=e)).valid,
                                   min(schedule.eta_l, 1 / (8 * steps * L)))
    except ValueError:
        return "; no η_l admits every hypothesis at this server schedule"
    unit = 10.0 ** (math.floor(math.log10(eta_l)) - 2)         # three digits, rounded down: still admitted
    return (f"; at this server schedule (η = {schedule.eta_g[0]:.4g}, β = {schedule.beta[0]:.4g}) the theorem "
            f"admits η_l ≤ {math.floor(eta_l / unit) * unit:.3g}")


_LHS = "Ḡ = (1/S) Σ_s (1/T_s) Σ_{t in stage s} ‖∇f(x_t)‖²"
_LHS_LATEX = r"\bar G = \frac{1}{S}\sum_{s=1}^{S}\frac{1}{T_s}\sum_{t\in\text{stage } s}\|\nabla f(x_t)\|^2"
_NEEDS = {"sigma_g2": "σ_g² (A3): given in constants.extra, else the largest (1/n) Σ_i ‖∇f_i − ∇f‖² at the runs' iterates"}
_STEPS = ("a one-stage (or `stages=`) schedule with the algorithm's β, ν and η = 1; η_l the largest value at which "
          "every hypothesis of the theorem holds")


_EXAMPLE = "--L 1 --sigma2 1 --delta-f 20 --N 20 --K 5 --T 400 --eta-g 1 --set sigma_g2=0.5 --set beta=0.5 --set nu=0.9"
_AUTONOMOUS_EXAMPLE = _EXAMPLE + " --eta-l 0.0001 --set n_sampled=5 --set tau=2"
_AUTONOMOUS_NEEDS = {"phi": "φ_1, φ_2, φ_3, K_max (footnote 5): from the K_{t,i} the runs logged; τ = max_delay − 1"}
_STRONG = {"beta": 0.9, "nu": 1.0}
_SPLIT_AUTONOMOUS = {**_STRONG, "max_delay": 4, "max_epochs": 3}


def _two_clients():
    from ..search_spaces import split_quadratic

    return split_quadratic(2)


def _seeds_full(T: int):
    """Two clients pulling apart, every client every round, strong momentum."""
    return [(_two_clients(), Trace(np.ones((T, 2), dtype=bool)), _STRONG)]


def _seeds_uniform(T: int):
    """One client of two (strong momentum) and of three (none) drawn each round."""
    from ..search_spaces import split_quadratic

    return [(_two_clients(), Uniform(2, 1), _STRONG), (split_quadratic(3), Uniform(3, 1), {"beta": 0.0, "nu": 0.0})]


def _seeds_autonomous(T: int):
    """Uniform arrival of one of two clients with the longest delays and epochs drawn."""
    return [(_two_clients(), Uniform(2, 1), _SPLIT_AUTONOMOUS)]


def _seeds_any_arrival(T: int):
    """One client arriving every time (the bias Remark 5.3 prices at 6σ_g²), and the two alternating."""
    only_first = np.zeros((T, 2), dtype=bool)
    only_first[:, 0] = True
    alternating = np.resize(np.eye(2, dtype=bool), (T, 2))
    return [(_two_clients(), Trace(only_first), _SPLIT_AUTONOMOUS),
            (_two_clients(), Trace(alternating), _SPLIT_AUTONOMOUS)]


def record_steps_outside(theorem: Theorem, setup: Setup, plan: Plan, bound) -> str | None:
    """A recorded schedule is admitted when it meets every hypothesis of the theorem (they admit any
    schedule that does): the hypotheses it breaks, else None."""
    failed = [c.name for c in bound.conditions if not c.holds]
    return f"the recorded schedule breaks {'; '.join(failed)}" if failed else None


#: The record header's ``availability`` models each participation rule is read from.
_RECORD_MODELS = {"full": None, "uniform": ("uniform",), "m-per-round": ("uniform", "cyclic", "reshuffled", "any")}
_SPACES = {"full": space("full"), "uniform": space("uniform")}
_SEEDS = {("full", False): _seeds_full, ("uniform", False): _seeds_uniform, ("uniform", True): _seeds_autonomous,
          ("m-per-round", True): _seeds_any_arrival}


def declare(name: str, statement: Statement, covers: tuple[str, ...], assumptions: str, *, example: str,
            patterns: tuple[str, ...], needs: dict | None = None) -> Theorem:
    """A Server momentum statement as a checkable theorem: its formula and participation
    (:class:`Statement`) and what ``fedverify`` shows of it; the search space, seed cases and the
    records it reads follow from the statement."""
    seeds = _SEEDS.get((statement.participation, statement.autonomous))
    if seeds is None:
        raise ValueError(f"{name}: no conformance search space for {statement.participation!r} participation with "
                         f"{'autonomous' if statement.autonomous else 'server-driven'} clients (Server momentum "
                         "states 'full' and 'uniform' for FedGM, 'uniform' and 'm-per-round' for autonomous clients)")
    fields = (("grad_norm2", ()), ("heterogeneity", ("sigma_g2", "zeta2")))
    if statement.autonomous:
        fields += (("local_steps", ()), ("delays", ()))
    space_ = (space("autonomous", any_arrival=statement.participation == "m-per-round") if statement.autonomous
              else _SPACES[statement.participation])
    return Theorem(name=name, bound=statement.formula, lhs=_LHS, lhs_latex=_LHS_LATEX, expectation=statement.expectation,
                   covers=covers, steps=_STEPS, plan=lambda setup: _plan(setup, name=name, statement=statement),
                   needs={**_NEEDS, **(needs or {})},
                   reductions={"fedavg": REDUCTIONS["fedavg"]} if covers == FAMILY else {},
                   assumptions=assumptions, options=("stages",), example=example,
                   patterns=patterns, algorithms=tuple(covers), space=space_,
                   seed_cases=seeds,
                   records=RecordReading(models=_RECORD_MODELS[statement.participation],
                                         assumption="Server momentum footnote 4 and Alg. 4 (m clients a round)",
                                         fields=fields, steps_outside=record_steps_outside))


THEOREMS = {
    "momentum.theorem_4_1": declare(
        "momentum.theorem_4_1", Statement("full", False, bm.theorem_4_1), FAMILY,
        "full participation (every client every round); any problem",
        example=_EXAMPLE + " --eta-l 0.001", patterns=("full",)),
    "momentum.theorem_4_6": declare(
        "momentum.theorem_4_6", Statement("uniform", False, bm.theorem_4_6), FAMILY,
        "m clients uniformly without replacement each round (a Uniform pattern)",
        example=_EXAMPLE + " --eta-l 0.001 --set n_sampled=5", patterns=("P1",)),
    "momentum.theorem_5_1": declare(
        "momentum.theorem_5_1", Statement("uniform", True, bm.theorem_5_1), ("fedgm-autonomous",),
        "autonomous clients, uniform arrival (a Uniform pattern)",
        example=_AUTONOMOUS_EXAMPLE, patterns=("P1",), needs=_AUTONOMOUS_NEEDS),
    "momentum.corollary_g1": declare(
        "momentum.corollary_g1", Statement("m-per-round", True, bm.corollary_g1), ("fedgm-autonomous",),
        "autonomous clients, any arrival rule with m ≥ 1 arrivals every round",
        example=_AUTONOMOUS_EXAMPLE, patterns=("P1", "case3", "case4"), needs=_AUTONOMOUS_NEEDS),
}
