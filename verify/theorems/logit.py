"""LOGIT (OpenReview km8rXu0RnF): inequality (23) and Thms 1 and 2 as checkable theorems.

All three bound (1/T) Σ_t E‖∇f(x_t)‖² of ``logit`` (eq. (8): unavailable clients contribute a
surrogate with weight 1/N) under independent availability with probabilities p_n^t, in
expectation over the noise and the availability, so every seed runs on its own trace drawn
from a Bernoulli pattern. They share the step size and the first four terms of (23) and
differ in how the gradient-generation error ε of (23) enters:

* ``logit.inequality_23``: ε itself, measured along the runs (App. A.1, eq. (23));
* ``logit.theorem_1`` (Thm 1, eq. (10); p_n^t may vary by round): 4ε̄* + 8C₁√(τ̄_max(1 − p̄_min))/√T
  (eq. (33)), τ̄_max = (1/N) Σ_n max_t τ_n^t of the runs' traces, averaged over them;
* ``logit.theorem_2`` (Thm 2, eq. (11); p_n constant in time): 4ε̄* + 8C₁(1 − p_min)^{3/2}/(√T·√p_min)
  (eq. (38), the expected staleness of (36)–(37) in place of the realised one).

Measured ε (eq. (23), LOGIT ``observe``): e_{n,t} = (1/I) Σ_i ‖g̃_n − ∇F_n(x^n_{t,i})‖² for n ∉ A_t,
ε = 4·(1/T) Σ_t (1/N) Σ_{n∉A_t} e_{n,t} (the realised indicator in place of 1 − p_n^t), averaged
over the runs.

ε*_{n,t} and C₁ (Assumption 5 with (30) and (32): e_{n,t} ≤ ε*_{n,t} + C₁√(τ_n^t/t)) are given
(``constants.extra["eps_star"]``, ``["C1"]``, or ``--set eps_star=... --set C1=...``) or estimated
from the runs' points (n, t) with n ∉ A_t, pooled over the runs, with t = 1..T the round and
τ_n^t the rounds since client n's last upload:

* neither given: ε*_{n,t} = ε*_n constant in t (Lemma 3's ε*_n has no t) and C₁ ≥ 0 solve the
  linear programme  min Σ_points (ε*_n + C₁√(τ_n^t/t))  s.t.  e_{n,t} ≤ ε*_n + C₁√(τ_n^t/t) at every
  point, ε*_n ≥ 0 — the smallest trace-level right side of (33) (realised indicators) among the
  (ε*, C₁) that satisfy Assumption 5's inequality on the runs; ε*_n is then recomputed as
  max_t (e_{n,t} − C₁√(τ_n^t/t))⁺, so the inequality holds at every point whatever the solver's
  tolerance (0 for a client never unavailable);
* C₁ given: ε*_n = max_t (e_{n,t} − C₁√(τ_n^t/t))⁺;
* ε* given: C₁ = max over the points of (e_{n,t} − ε*_{n,t})⁺/√(τ_n^t/t).

τ_n^t counts from a virtual upload before round 1 (a never-received client contributes a zero
surrogate, and its τ_n^t = t), so τ_n^t ≥ 1 at every point; Thm 1's τ̄_max uses the same count.
Thm 2's p_min form bounds E√τ_n^t by √((1 − p_n)/p_n) (eq. (37)), which this count also obeys.
Estimated inputs are marked (extras ``"... source"`` and a note).
Points whose e_{n,t} is not finite (a run that overflowed) are left out. A diverging run inflates
what is estimated on it, and with it its own bound; the verdict is therefore also judged against
the bound at ε (or ε*, C₁) estimated on each run's rounds before ‖∇f(x_t)‖² first exceeds
‖∇f(x_0)‖², and σ₃² at the start: runs violated against that bound are "inconclusive", never "holds".

Step size: η = min{1/√(IT), 1/(2√30·LI)} (Thm 1, corrected cap) with η_g = 1, unless the
algorithm's own is given. σ₃² (Assumption 4, E‖∇F_n(x) − ∇f(x)‖² ≤ σ₃² for all x and n): the
largest max_n ‖∇F_n(x_t) − ∇f(x_t)‖² at the runs' iterates unless ``constants.zeta2`` gives it.
σ₂² (Assumption 3, the surrogates' variance): 0, since every surrogate rule here is a
deterministic function of the past, unless ``constants.extra["sigma2_surrogate"]`` gives it.
The surrogate is LOGIT's learned generator (``surrogate="generator"``) unless
``hparams["surrogate"]`` (``--set surrogate=last``) names another.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.optimize import linprog
from scipy.sparse import csr_matrix

import algorithms
from algorithms.logit import LOGIT, unavailable
from bounds import logit as bl
from participation.patterns import Bernoulli

from ..verdicts import AVERAGE_GRAD_NORM2, AVERAGE_GRAD_NORM2_LATEX
from .contract import Plan, RecordReading, Setup, Theorem
from .from_records import fitted_bernoulli
from .measures import average_grad_norm2, observed_first, observed_max
from .search import space

__all__ = ["THEOREMS", "FORM_8", "DEFAULT_SURROGATE", "MeasuredLOGIT", "GeneratorConstants",
           "measured_generator_error", "generator_points", "estimate_generator_constants", "check_given_generator",
           "Statement", "declare"]

#: The surrogate rules of the form (8) (weight 1/N for every client); "none" reweights by 1/|A_t|.
FORM_8 = ("generator", "last", "ws", "zero")
#: LOGIT's own surrogate, the learned generator of Section 3.2 (eqs. (3)–(5)).
DEFAULT_SURROGATE = "generator"
#: The keys (of ``constants.extra`` or ``--set``) that give Assumption 5's constants.
GIVEN_KEYS = ("eps_star", "C1")


# ------------------------------------------------------------------------------ per-client observations


@dataclass(frozen=True, repr=False)
class MeasuredLOGIT(LOGIT):
    """``logit`` whose ``observe`` also reports, per client, the generation error e_{n,t} (NaN for
    an available client) and the staleness τ_n^t (0 for an available client)."""

    def observe(self, before, after, problem, r) -> dict:
        """``generator_error`` as ``LOGIT.observe``; ``client_generator_error`` (B, N): e_{n,t} =
        (1/I) Σ_{i<I} ‖g̃_n − ∇F_n(x^n_{t,i})‖² for n ∉ A_t (eq. (23)'s summand); ``client_staleness`` (B, N):
        τ_n^t = t − s for n ∉ A_t, s the round of client n's last upload (−1 when none; rounds from 0)."""
        off = unavailable(r)
        per_client = self.path_errors(before, after, problem, off)
        errors = off.put(per_client.new_full(r.mask.shape, math.nan), per_client)
        staleness = torch.where(r.mask, torch.zeros_like(before.last), r.t - before.last)
        return {"generator_error": off.sum(per_client).to(torch.float64) / problem.n_clients,
                "client_generator_error": errors.to(torch.float64), "client_staleness": staleness.to(torch.float64)}


def _measured(algorithm):
    """``algorithm`` as a :class:`MeasuredLOGIT` (same fields) when it is a plain ``LOGIT``."""
    if type(algorithm) is LOGIT:
        return MeasuredLOGIT(**algorithm.hparams)
    return algorithm


# ------------------------------------------------------------------------------ measured inputs


def measured_generator_error(histories, rounds=None) -> float:
    """ε of eq. (23) per run, 4·(1/T) Σ_t generator_error_t, averaged over the runs (over each run's
    first ``rounds[j]`` rounds when given: :func:`steady_rounds`)."""
    cuts = [None] * len(histories) if rounds is None else list(rounds)
    return float(np.mean([4 * np.mean(np.asarray(h.observed["generator_error"], dtype=float)[:cut])
                          for h, cut in zip(histories, cuts)]))


def steady_rounds(history) -> int:
    """The rounds of ``history`` before ‖∇f(x_t)‖² first exceeds ‖∇f(x_0)‖² (all of them when it
    never does): the part of a run that has not begun to diverge, on which constants estimated
    along the run cannot have been inflated by the divergence."""
    g = np.asarray(history.grad_norm2, dtype=float)
    above = np.flatnonzero(~(g <= g[0])) if g.size else np.zeros(0, dtype=int)
    return int(above[0]) if above.size else int(g.size)


def generator_points(history) -> tuple[np.ndarray, np.ndarray]:
    """(E, X), both (T, N): E[t−1, n] = e_{n,t} (NaN where n ∈ A_t) and X[t−1, n] = √(τ_n^t/t),
    t = 1..T, τ_n^t counted from a virtual upload before round 1."""
    errors = np.asarray(history.observed["client_generator_error"], dtype=float)
    stale = np.asarray(history.observed["client_staleness"], dtype=float)
    t = np.arange(1, errors.shape[0] + 1, dtype=float)[:, None]
    return errors, np.sqrt(stale / t)


@dataclass(frozen=True)
class GeneratorConstants:
    """Assumption 5's inputs to Thms 1 and 2: ε*_{n,t} (a number, (N,) or (T, N)), C₁, and
    where each came from ("given" or how it was estimated)."""

    eps_star: object
    C1: float
    eps_source: str
    C1_source: str

    @property
    def estimated(self) -> bool:
        return self.eps_source != "given" or self.C1_source != "given"


_EPS_RULE = "estimated: ε*_n = max_t (e_{n,t} − C₁√(τ_n^t/t))⁺ over the runs"
_C1_RULE = "estimated: C₁ = max (e_{n,t} − ε*_{n,t})⁺/√(τ_n^t/t) over the runs"
_LP_RULE = ("estimated: the least Σ_points (ε*_n + C₁√(τ_n^t/t)) with e_{n,t} ≤ ε*_n + C₁√(τ_n^t/t) "
            "at every point of the runs (Assumption 5 with (30), (32))")


def _pooled(histories, n_clients: int, rounds=None):
    """The points (client, e, x) of every run with n ∉ A_t and a finite e (within each run's first
    ``rounds[j]`` rounds when given), and the (T, N) grids of the runs."""
    grids = [generator_points(h) for h in histories]
    if rounds is not None:
        grids = [(E[:r], X[:r]) for (E, X), r in zip(grids, rounds)]
    clients, errors, roots = [], [], []
    for E, X in grids:
        off = np.isfinite(E)
        clients.append(np.nonzero(off)[1])
        errors.append(E[off])
        roots.append(X[off])
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0))
    return cat(clients).astype(int), cat(errors), cat(roots), grids


def _floor_given_C1(clients, errors, roots, C1: float, n_clients: int) -> np.ndarray:
    """ε*_n = max over client n's points of (e − C₁x)⁺ (0 without points)."""
    floor = np.zeros(n_clients)
    np.maximum.at(floor, clients, np.maximum(errors - C1 * roots, 0.0))
    return floor


def _least_envelope_slope(clients, errors, roots, n_clients: int) -> float:
    """C₁ of the linear programme min Σ_points (ε*_n + C₁x) s.t. ε*_n + C₁x ≥ e, ε*, C₁ ≥ 0 (HiGHS)."""
    if errors.size == 0:
        return 0.0
    scale = float(errors.max())
    if scale <= 0.0:
        return 0.0
    errors = errors / scale                 # the programme is homogeneous in e: its C₁ scales with it
    rows = np.arange(errors.size)
    A = csr_matrix((np.concatenate([np.ones(errors.size), roots]),
                    (np.concatenate([rows, rows]), np.concatenate([clients, np.full(errors.size, n_clients)]))),
                   shape=(errors.size, n_clients + 1))
    cost = np.append(np.bincount(clients, minlength=n_clients).astype(float), roots.sum())
    result = linprog(cost, A_ub=-A, b_ub=-errors, bounds=(0, None), method="highs")
    if not result.success:
        raise ValueError(f"estimating C₁ of LOGIT Assumption 5 failed: {result.message}")
    return max(float(result.x[-1]), 0.0) * scale


def _eps_grid(eps_star, shape) -> np.ndarray:
    """ε*_{n,t} given (a number, (N,) or (T, N)) over the (rounds run, N) grid of one run."""
    eps = np.asarray(eps_star, dtype=float)
    return np.broadcast_to(eps[: shape[0]] if eps.ndim == 2 else eps, shape)


def check_given_generator(histories, eps_star, C1, names=None) -> None:
    """A one-line ValueError at the first point (n, t) of recorded runs where the given ε*, C₁
    break Assumption 5, e_{n,t} ≤ ε*_{n,t} + C₁√(τ_n^t/t) (beyond a relative 1e-9 for rounding):
    a record that contradicts the constants it states. ``names``: what to call each run."""
    C1 = float(C1)
    for j, h in enumerate(histories):
        if "client_generator_error" not in (h.observed or {}):       # no generator error recorded
            continue
        E, X = generator_points(h)
        envelope = _eps_grid(eps_star, E.shape) + C1 * X
        with np.errstate(invalid="ignore"):
            broken = np.isfinite(E) & (E > envelope + 1e-9 * np.maximum(np.abs(E), np.abs(envelope)))
        if broken.any():
            t, n = (int(v) for v in np.argwhere(broken)[0])
            name = names[j] if names is not None else f"run {j}"
            raise ValueError(f"{name}: the generator error e_{{n,t}} = {E[t, n]:.6g} of client {n} in round {t + 1} "
                             f"exceeds ε* + C₁√(τ/t) = {envelope[t, n]:.6g} at the given ε*, C₁ = {C1:g}: they do not "
                             "satisfy LOGIT Assumption 5 on this record")


def estimate_generator_constants(histories, n_clients: int, *, eps_star=None, C1=None,
                                 rounds=None) -> GeneratorConstants:
    """ε*_{n,t} and C₁ of LOGIT Assumption 5 (with (30) and (32)), each given or estimated from the
    runs' points so that e_{n,t} ≤ ε*_{n,t} + C₁√(τ_n^t/t) at every point with a finite e (module
    docstring); ``rounds[j]`` limits the points of run j to its first rounds."""
    if eps_star is not None and C1 is not None:
        return GeneratorConstants(eps_star, float(C1), "given", "given")
    clients, errors, roots, grids = _pooled(histories, n_clients, rounds)
    if C1 is not None:
        return GeneratorConstants(_floor_given_C1(clients, errors, roots, float(C1), n_clients), float(C1),
                                  _EPS_RULE, "given")
    if eps_star is not None:
        excess = [np.where(np.isfinite(E), np.maximum(E - _eps_grid(eps_star, E.shape), 0.0), np.nan) / X
                  for E, X in grids]
        slope = max((float(np.nanmax(v)) for v in excess if np.isfinite(v).any()), default=0.0)
        return GeneratorConstants(eps_star, slope, "given", _C1_RULE)
    slope = _least_envelope_slope(clients, errors, roots, n_clients)
    return GeneratorConstants(_floor_given_C1(clients, errors, roots, slope, n_clients), slope, _EPS_RULE, _LP_RULE)


# ------------------------------------------------------------------------------ the plan


def _probabilities(setup: Setup, name: str, constant: bool) -> np.ndarray:
    pattern = setup.pattern
    if not isinstance(pattern, Bernoulli):
        given = "a fixed trace" if pattern is None else type(pattern).__name__
        raise ValueError(f"{name} assumes independent availability with known probabilities p_n^t (LOGIT Section 3.3): "
                         f"give a Bernoulli pattern, not {given}")
    if constant:
        if callable(pattern.p) or np.ndim(pattern.p) == 2:
            raise ValueError(f"{name} assumes p_n constant in time (LOGIT Thm 2); the Bernoulli pattern varies by round: "
                             "use logit.theorem_1")
        return np.broadcast_to(np.asarray(pattern.p, dtype=float), (setup.n_clients,)).copy()
    return pattern.probabilities(0, setup.rounds)


def _constants(setup: Setup, histories):
    c = setup.constants
    extra = dict(c.extra or {})
    extra.setdefault(bl.SURROGATE_KEY, 0.0)
    zeta2 = c.zeta2 if c.zeta2 is not None else observed_max(histories, "heterogeneity_max")
    return dataclasses.replace(c, zeta2=zeta2, extra=extra)


def _given_generator(setup: Setup) -> dict:
    """ε* and C₁ the user gave: ``constants.extra`` first, then the theorem's options (``--set``)."""
    extra = dict(setup.constants.extra or {})
    return {k: extra.get(k, setup.hparams.get(k)) for k in GIVEN_KEYS}


def _algorithm(setup: Setup, name: str):
    """The algorithm at Thm 1's step size (or the given one), with LOGIT's generator by default."""
    c0 = dataclasses.replace(setup.constants, zeta2=0.0, extra={**(setup.constants.extra or {}), bl.SURROGATE_KEY: 0.0})
    if setup.given is not None:
        algorithm, eta = setup.given, setup.given.eta_l
    else:
        eta = bl.step_size(c0)
        hparams = {k: v for k, v in setup.hparams.items() if k not in GIVEN_KEYS}
        if setup.algorithm == "logit":
            hparams.setdefault("surrogate", DEFAULT_SURROGATE)
        algorithm = algorithms.get(setup.algorithm, eta_l=eta, eta_g=1.0, local_steps=setup.local_steps, **hparams)
    if algorithm.eta_g != 1.0:
        raise ValueError(f"{name} analyses x_(t+1) = x_t − η(1/N)Σ(...) (eq. (8)): η_g must be 1, got {algorithm.eta_g}")
    if not hasattr(algorithm, "surrogate"):
        raise ValueError(f"{name} is checked on logit (eq. (8)), not {setup.algorithm}")
    return _measured(algorithm), eta


def _estimation_rules(given: dict) -> str:
    """How the inputs not given are estimated (module docstring), for the note."""
    if given["eps_star"] is None and given["C1"] is None:
        return f"C₁ and ε*_n {_LP_RULE.removeprefix('estimated: ')}; then ε*_n = max_t (e_{{n,t}} − C₁√(τ_n^t/t))⁺"
    return (_EPS_RULE if given["eps_star"] is None else _C1_RULE).removeprefix("estimated: ") + " (the other given)"


def _mean_tau_max(traces) -> float:
    """τ̄_max = (1/N) Σ_n max_t τ_n^t of each trace (defined after Thm 1), averaged over the traces."""
    return float(np.mean([bl.trace_tau_max_bar(t.mask, paper_start=False) for t in traces]))


@dataclass(frozen=True)
class Statement:
    """What one LOGIT statement fixes beyond the plan they share: whether p_n is constant in time
    (Thm 2), whether the generation error enters through Assumption 5's ε*, C₁ (Thms 1, 2) or as
    ε of eq. (23) measured along the runs, its right side ``right_side(c, p, eta, error, traces)``
    (``error`` the measured ε or the :class:`GeneratorConstants`), and ``report(p, traces, T)``,
    the side quantities it reads beyond the shared ones."""

    constant_p: bool
    generator: bool
    right_side: Callable
    report: Callable | None = None


def _plan(setup: Setup, *, name: str, statement: Statement) -> Plan:
    p = _probabilities(setup, name, constant=statement.constant_p)
    algorithm, eta = _algorithm(setup, name)
    traces, note = setup.unit_traces("participation")
    given = _given_generator(setup)
    cache: dict = {}

    def generator(histories) -> GeneratorConstants:
        key = tuple(map(id, histories))
        if key not in cache:
            cache[key] = estimate_generator_constants(histories, setup.n_clients, **given)
        return cache[key]

    def error(histories, rounds=None):
        """The generation error the statement reads: ε of eq. (23), or ε*, C₁ (Assumption 5)."""
        if not statement.generator:
            return measured_generator_error(histories) if rounds is None else measured_generator_error(histories, rounds)
        if rounds is None:
            return generator(histories)
        return estimate_generator_constants(histories, setup.n_clients, **given, rounds=rounds)

    def bound(histories):
        return statement.right_side(_constants(setup, histories), p, eta, error(histories), traces)

    def start_bound(histories):
        """The bound where the runs cannot have inflated what it estimates on them (None when
        nothing is estimated): σ₃² measured at the runs' start, and ε (inequality (23)) or ε* and
        C₁ (Assumption 5) estimated on each run's rounds before its ‖∇f(x_t)‖² first exceeds
        ‖∇f(x_0)‖² (:func:`steady_rounds`), since the generator's error exists only along a run."""
        generated = not statement.generator or any(given[k] is None for k in GIVEN_KEYS)
        if setup.constants.zeta2 is not None and not generated:
            return None
        c = _constants(setup, histories)
        if setup.constants.zeta2 is None:
            start = observed_first(histories, "heterogeneity_max")
            if not math.isfinite(start):
                return None
            c = dataclasses.replace(c, zeta2=start)
        steady = [steady_rounds(h) for h in histories]
        return statement.right_side(c, p, eta, error(histories, steady), traces)

    def extras(histories):
        c = _constants(setup, histories)
        out = {"generator error ε (measured)": measured_generator_error(histories), "sigma3^2": c.zeta2,
               "sigma3^2 source": "given" if setup.constants.zeta2 is not None else "measured: max over the runs' iterates",
               "sigma2^2": c.extra[bl.SURROGATE_KEY], "p_bar": float(np.mean(p))}
        if not statement.generator:
            return out
        g = generator(histories)
        out.update({"eps_star (mean over n, t)": float(np.mean(g.eps_star)), "eps_star source": g.eps_source,
                    "C1": g.C1, "C1 source": g.C1_source})
        return out | (statement.report(p, traces, setup.rounds) if statement.report is not None else {})

    notes = [note] if note else []
    if not statement.generator:
        notes.append("ε of eq. (23) measured along the runs (realised indicators for 1 − p_n^t)")
    elif any(given[k] is None for k in GIVEN_KEYS):
        notes.append("ε*, C₁ estimated from the runs: " + _estimation_rules(given))
    if algorithm.surrogate not in FORM_8:
        notes.append(f"{name} is proved for the surrogates of eq. (8) ({', '.join(FORM_8)}), not surrogate="
                     f"{algorithm.surrogate!r}: the verdict compares numbers for reference")
    return Plan(algorithm=algorithm, traces=traces, measure=average_grad_norm2, bound=bound, extras=extras,
                start_bound=start_bound, covered=lambda histories: algorithm.surrogate in FORM_8, run_options={"observe": True},
                step_sizes={"eta": eta, "eta_g": 1.0}, notes=notes)


# ------------------------------------------------------------------------------ records


def record_steps_outside(theorem: Theorem, setup: Setup, plan: Plan, bound) -> str | None:
    """Why a record's η is not the one the theorems prescribe, η = min{1/√(IT), 1/(2√30·LI)}
    (Thm 1, corrected cap), whose value the bounds assume; None when it is."""
    c0 = dataclasses.replace(setup.constants, zeta2=0.0, extra={**(setup.constants.extra or {}), bl.SURROGATE_KEY: 0.0})
    own, eta = float(bl.step_size(c0)), float(setup.given.eta_l)
    if not math.isclose(own, eta, rel_tol=1e-9):
        return (f"recorded η = {eta:.4g}; {theorem.name} prescribes η = min{{1/√(IT), 1/(2√30·LI)}} = {own:.4g} "
                "and its value assumes it")
    return None


def _check_given(histories, given: dict, names) -> None:
    """Records that contradict the ε*, C₁ they state (Assumption 5) are refused."""
    if given.get("eps_star") is not None and given.get("C1") is not None:
        check_given_generator(histories, given["eps_star"], given["C1"], names)


# ------------------------------------------------------------------------------ the declarations


_SHARED_NEEDS = {"zeta2": "σ₃² (Assumption 4): given, else the largest max_n ‖∇F_n − ∇f‖² at the runs' iterates",
                 "sigma2_surrogate": "σ₂² (Assumption 3): given, else 0 (deterministic surrogates)"}
_GENERATOR_NEEDS = {"eps_star": "ε*_{n,t} (Assumption 5, (30)): given, else estimated from the runs (module docstring)",
                    "C1": "C₁ (Assumption 5, (31)–(32)): given, else estimated from the runs (module docstring)"}
_STEPS = "η = min{1/√(IT), 1/(2√30·LI)} (Thm 1, corrected cap), η_g = 1"
_PATTERNS = ("logit", "P2")
_ALGORITHMS = ("logit",)
_BASE = "--L 1 --sigma2 1 --delta-f 20 --N 10 --K 5 --T 400"
_SIGMAS = "--set zeta2=0.5 --set sigma2_surrogate=0.2"


def _seeds_varying(T: int):
    """p_n^t varying by round, two clients rarely available, zero surrogates: the staleness term
    of Thm 1 at its largest."""
    from ..search_spaces import split_quadratic

    p = np.tile(np.array([1.0, 0.1, 0.1]), (T, 1))
    p[::2, 0] = 0.1
    return [(split_quadratic(3), Bernoulli(p, 3), {"surrogate": "zero"})]


def _seeds_constant(T: int):
    """Constant p_n with two rare clients, zero and last-value surrogates (Thm 2's p_min form)."""
    from ..search_spaces import split_quadratic

    rare = np.array([1.0, 0.1, 0.1])
    return [(split_quadratic(3), Bernoulli(rare, 3), {"surrogate": "zero"}),
            (split_quadratic(3), Bernoulli(rare, 3), {"surrogate": "last"})]


def _records(generator: bool) -> RecordReading:
    return RecordReading(
        models=("bernoulli", "estimate"),
        assumption="LOGIT Section 3.3 (independent availability with probabilities p_n^t)",
        fields=(("grad_norm2", ()), ("heterogeneity_max", ("zeta2",)),
                ("generator_error", GIVEN_KEYS if generator else ())),
        estimate=fitted_bernoulli, constant_check="largest", steps_outside=record_steps_outside,
        check_given=_check_given if generator else None)


def declare(name: str, bound, statement: Statement, assumptions: str, *, summary: str, example: str, needs: dict,
            options: tuple = ()) -> Theorem:
    """A LOGIT statement as a checkable theorem: its formula (``bounds.logit``), its
    :class:`Statement` and what ``fedverify`` shows of it."""
    return Theorem(name=name, bound=bound, lhs=AVERAGE_GRAD_NORM2, lhs_latex=AVERAGE_GRAD_NORM2_LATEX,
                   expectation="participation", covers=("logit",), steps=_STEPS,
                   plan=lambda setup: _plan(setup, name=name, statement=statement),
                   needs={**needs, **_SHARED_NEEDS}, assumptions=assumptions, options=options, summary=summary,
                   example=example, patterns=_PATTERNS, algorithms=_ALGORITHMS,
                   space=space("bernoulli", per_round=not statement.constant_p),
                   seed_cases=_seeds_constant if statement.constant_p else _seeds_varying,
                   records=_records(statement.generator))


_INEQUALITY_23 = Statement(constant_p=False, generator=False,
                           right_side=lambda c, p, eta, eps, traces: bl.inequality_23(c, p, eps, eta=eta))
_THEOREM_1 = Statement(
    constant_p=False, generator=True,
    right_side=lambda c, p, eta, g, traces: bl.theorem_1(c, p, _mean_tau_max(traces), g.eps_star, g.C1, eta=eta),
    report=lambda p, traces, T: {"tau_max_bar (runs' traces)": _mean_tau_max(traces)})
_THEOREM_2 = Statement(
    constant_p=True, generator=True,
    right_side=lambda c, p, eta, g, traces: bl.theorem_2(c, p, g.eps_star, g.C1, eta=eta),
    report=lambda p, traces, T: {"E[tau] (eq. (36), mean over n, t)": float(np.mean(bl.expected_staleness(p, T)))})
_VARYING = "a Bernoulli pattern (p_n^t may vary by round); any problem"

THEOREMS = {
    "logit.inequality_23": declare(
        "logit.inequality_23", bl.inequality_23, _INEQUALITY_23, _VARYING,
        summary="LOGIT eq. (23) (App. A.1): the averaged descent inequality with the generation error ε measured",
        example=f"{_BASE} --set p=0.5 --set epsilon=0.05 {_SIGMAS}",
        needs={"epsilon": "ε of eq. (23), measured along the runs (LOGIT observe)"}),
    "logit.theorem_1": declare(
        "logit.theorem_1", bl.theorem_1, _THEOREM_1, _VARYING,
        summary="LOGIT Thm 1, eq. (10): time-varying p_n^t, staleness term in the traces' τ̄_max",
        example=f"{_BASE} --tau-max 8 --set p=0.5 --set eps_star=0.01 --set C1=1 {_SIGMAS}",
        needs={**_GENERATOR_NEEDS, "tau_max": "τ̄_max = (1/N) Σ_n max_t τ_n^t of the runs' traces"},
        options=GIVEN_KEYS),
    "logit.theorem_2": declare(
        "logit.theorem_2", bl.theorem_2, _THEOREM_2, "a Bernoulli pattern with p_n constant in time; any problem",
        summary="LOGIT Thm 2, eq. (11): constant p_n, staleness term from E[τ] of eq. (36)",
        example=f"{_BASE} --set p=0.5 --set eps_star=0.01 --set C1=1 {_SIGMAS}",
        needs=_GENERATOR_NEEDS, options=GIVEN_KEYS),
}
