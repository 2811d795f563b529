"""CA-Fed (Rodio et al., IEEE/ACM ToN 2023, doi:10.1109/TNET.2023.3324257) as checkable theorems.

Each row judges one inequality of the paper on its own:

* ``cafed.theorem_2`` — Thm 2, eq. (13): E[F_B(w̄_T) − F_B*] ≤ ε̄_opt, w̄_T = Σ_t η_t w_t / Σ_t η_t
  (§III-B), F_B = Σ_k p_k F_k with p = π ⊙̃ q (eq. (4)); every sum to T (``horizon="finite"``,
  valid since the proof sums to T only).
* ``cafed.theorem_1`` — Thm 1, eq. (10) at w = w̄_T. (10) holds for every w ∈ W, so at the run's
  own w̄_T, with both gaps measured::

      F(w̄_T) − F* − 2κ²(F_B(w̄_T) − F_B*)  ≤  2κ² ε_bias,     κ = L/μ, ε_bias = F(w_B*) − F*

  The left side (one value per run, possibly negative) moves the measured optimisation gap to
  the left, so that the right side is exact: a constant too small (κ² for 2κ²) or a dropped
  ε_bias shows as "violated" on runs where (10) itself holds.
* ``cafed.theorem_1_bias`` — Thm 1, eq. (11): ε_bias ≤ κ² χ²_{α‖p} Γ, Γ = max_k F_k(w*) − F_k* (eq. (9)).
* ``cafed.theorem_3`` — Thm 3, eq. (15): ε_bias ≤ 4κ² d_TV²(α, p) Γ', Γ' = max_k F_k(w_B*) − F_k*.

(11) and (15) are statements about the problem and p alone: their left side ε_bias is computed
without a run (``Plan.values``; exact, no noise) when the weights q are known before running
(``cafed-unbiased`` with the oracle's π); the greedy ``cafed`` chooses q along the run, which is
then run and its (fixed) q used.

Runs: FedAvg with aggregation weights q under Markov availability (Assumption 1), server rate
η̄ = 1 (the analysis' rate, App. B), the diminishing steps (12), η_t = η_1 t^(−a),
η_1 = 1/(2L(1 + 2EQ)) with Q = ‖α/π‖₁ (≥ ‖q‖₁ for every q used here), a = ``decay`` (default 1).
``cafed`` (greedy q, true chain as oracle, §V-A) is covered only when its weights stay fixed.
``cafed-unbiased`` takes the option ``weights``:

* ``"target"`` (default of Thms 1 and 3): q = α, weights that ignore availability. Then
  p_k ∝ π_k α_k ≠ α as soon as the π_k differ, so ε_bias > 0 on heterogeneous clients and the
  bias parts of (10), (11), (15) are tested;
* ``"unbiased"`` (default of Thm 2): q = α/π (§V-A, "Benchmarks"), p = α and ε_bias = 0 by
  construction, which tests nothing of the bias bounds.

Constants measured (rigorous inputs for the runs at hand): F_k*, w_k*, w*, w_B* by L-BFGS on the
convex objectives; Γ (eq. (9)), Γ' (Thm 3); μ = ``problem.strong_convexity()``; W for Lemma 1
(eqs. (6)–(8)) is the ball at 0 of radius R, R the largest norm of the runs' server iterates,
every local iterate w^k_{t,j} (j = 0..E, recorded while the runs go), w*, w_B* and every w_k*.
Every w ∈ W then has ‖∇F_k(w)‖ ≤ L‖w − w_k*‖ ≤ 2LR = L·diam(W) = D (proof of Lemma 1, eq. (42)),
G² = D² + max_k σ_k² (43) and |F_k(w) − F_k(w_B*)| ≤ D·diam(W) = H (Lemma 12), as
``bounds.cafed.theorem_2`` derives them from diam(W).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp
import torch

import algorithms
from algorithms.cafed import ALGORITHMS
from algorithms.problems import Quadratic
from bounds import cafed as bc
from bounds.core import Condition, Formula, Source, at_most, make_bound
from participation.patterns import Markov

from .contract import Plan, RecordReading, Setup, Theorem, option_number
from .from_records import CAFED_CONSTANTS, fitted_markov, record_history
from .search import space
from .measures import client_minimisers, loss_gap_at_average, weighted_losses, weighted_minimum

__all__ = ["THEOREMS", "WEIGHTS", "local_iterate_norms"]

COVERS = ("cafed-unbiased", "cafed")
#: The ``weights`` option of ``cafed-unbiased``: q = α ("target") or q = α/π ("unbiased").
WEIGHTS = ("target", "unbiased")



# ------------------------------------------------------------------------------ the problem's side
class _Objectives:
    """Minimisers and minima of the weighted objectives Σ w_k F_k of one problem, cached by w."""

    def __init__(self, problem):
        self.problem = problem
        self._cache: dict[tuple, tuple[np.ndarray, float]] = {}

    def minimum(self, weights) -> tuple[np.ndarray, float]:
        key = tuple(np.round(np.asarray(weights, dtype=float), 15))
        if key not in self._cache:
            self._cache[key] = weighted_minimum(self.problem, np.asarray(weights, dtype=float))
        return self._cache[key]

    @functools.cached_property
    def clients(self) -> tuple[np.ndarray, np.ndarray]:
        """(w_k* (N, d), F_k* (N,))."""
        return client_minimisers(self.problem)

    def gap(self, x) -> float:
        """max_k F_k(x) − F_k* (Γ at w*, eq. (9); Γ' at w_B*, Thm 3)."""
        n = self.problem.n_clients
        losses = np.array([weighted_losses(self.problem, x, np.eye(n)[k]) for k in range(n)])
        return float(np.max(losses - self.clients[1]))


class _RecordedObjectives:
    """The problem's side of the theorems as a run record states it (``verify.check_run``): the
    header constants F* (``F_star``), F_B* (``F_B_star``), ε_bias (``eps_bias``), Γ (``Gamma``),
    Γ' (``Gamma_prime``), diam(W) (``diam``), and F_k(w̄_T) from the last round's
    ``avg_client_losses``. A constant is required only where a theorem reads it."""

    def __init__(self, constants, theorem: str):
        self.extra = dict(constants.extra or {})
        self.theorem = theorem

    def constant(self, name: str) -> float:
        value = self.extra.get(name)
        if value is None:
            raise ValueError(f"the record gives no constant {name}, which {self.theorem} needs: "
                             f"{CAFED_CONSTANTS[name]} (write it in the header's constants or pass constants=)")
        return float(value)

    @staticmethod
    def client_losses(history) -> np.ndarray:
        """F_k(w̄_T), the last round's ``avg_client_losses``."""
        table = history.observed.get("avg_client_losses")
        if table is None or not len(table) or np.isnan(np.asarray(table)[-1]).any():
            raise ValueError("the record has no avg_client_losses in its last round (F_k at the step-weighted average "
                             "iterate w̄_T, CA-Fed §III-B), which the left side of eqs. (10) and (13) needs")
        return np.asarray(table, dtype=float)[-1]

    def gap(self, history, weights, minimum: float, name: str = "the minimum") -> float:
        """Σ_k w_k F_k(w̄_T) − minimum; a ValueError where it is negative beyond rounding (a relative
        1e-9): ``minimum`` (the record's ``name``) is then above the objective at w̄_T, so it is not
        its minimum and the record contradicts itself."""
        value = float(np.asarray(weights, dtype=float) @ self.client_losses(history))
        if value < minimum - 1e-9 * max(abs(value), abs(minimum), 1e-300):
            raise ValueError(f"the record's {name} = {minimum!r} is above the objective at the averaged iterate, "
                             f"{value!r} (from avg_client_losses): a minimum cannot exceed a value of its objective")
        return value - minimum


def _bias(objectives, alpha, p) -> dict:
    """ε_bias = F(w_B*) − F* (Thm 1, eq. (10)) with Γ, Γ', χ²_{α‖p} (11) and d_TV(α, p) (15); from
    the record's constants when ``objectives`` is a record's (w*, w_B* are then unknown, None)."""
    if isinstance(objectives, _RecordedObjectives):
        extra = objectives.extra
        value = (lambda k: None if extra.get(k) is None else float(extra[k]))
        return dict(p=p, w_star=None, F_star=value("F_star"), w_b=None, eps_bias=value("eps_bias"),
                    gamma=value("Gamma"), gamma_prime=value("Gamma_prime"), chi2=bc.chi2(alpha, p), tv=bc.tv(alpha, p))
    w_star, F_star = objectives.minimum(alpha)
    w_b, _ = objectives.minimum(p)
    return dict(p=p, w_star=w_star, F_star=F_star, w_b=w_b,
                eps_bias=weighted_losses(objectives.problem, w_b, alpha) - F_star,
                gamma=objectives.gap(w_star), gamma_prime=objectives.gap(w_b), chi2=bc.chi2(alpha, p), tv=bc.tv(alpha, p))


# ------------------------------------------------------------------------------ local iterates
class _NormProbe:
    """The problem, seen through ``stochastic_grads``: records per run the largest norm of every
    point a stochastic gradient is taken at and of the point one local step η·g later (the local
    iterates w^k_{t,j}, j = 0..E, of eq. (2); and, harmlessly, one step from the server iterate
    where CA-Fed asks for reports). ``eta``: the round's (B, 1) local step sizes; ``largest``
    (B,), NaN for a run whose clients took no gradient."""

    def __init__(self, problem, eta: torch.Tensor):
        self._problem, self._eta = problem, eta
        self.largest = torch.full((eta.shape[0],), -math.inf, dtype=eta.dtype, device=eta.device)

    def __getattr__(self, name):
        return getattr(self._problem, name)

    def stochastic_grads(self, X, clients, draws):
        G = self._problem.stochastic_grads(X, clients, draws)
        if X.numel():
            runs = draws.runs if draws.runs is not None else torch.zeros_like(clients)
            seen = torch.maximum(X.norm(dim=1), (X - self._eta[runs] * G).norm(dim=1))
            self.largest = self.largest.scatter_reduce(0, runs, seen.to(self.largest.dtype), "amax")
        return G

    def norms(self) -> torch.Tensor:
        return torch.where(self.largest == -math.inf, math.nan, self.largest)     # −inf: no gradient taken


class _LocalNorms:
    """Mixin: ``observe`` also reports ``local_norm`` (B,), per run the largest ‖w^k_{t,j}‖ of
    round t (NaN without local steps). Only records: the run is the same bit for bit."""

    def round(self, state, problem, r):
        probe = _NormProbe(problem, r.eta_l)
        new = super().round(state, probe, r)
        object.__setattr__(self, "_local_norm", probe.norms())
        return new

    def observe(self, before, after, problem, r):
        norms = getattr(self, "_local_norm", None)
        if norms is None:
            norms = torch.full((r.n_runs,), math.nan, dtype=r.eta_l.dtype, device=r.eta_l.device)
        return {**super().observe(before, after, problem, r), "local_norm": norms}


@functools.lru_cache(maxsize=None)
def _observing_class(cls):
    """``cls`` with :class:`_LocalNorms`, a module attribute (so that its instances pickle)."""
    name = f"_Observed{cls.__name__}"
    made = type(name, (_LocalNorms, cls), {"__module__": __name__, "__qualname__": name, "__doc__": cls.__doc__})
    globals()[name] = made
    return made


for _cls in ALGORITHMS:                  # defined on import, so that a fresh process unpickles them
    _observing_class(_cls)


def _observing(algorithm):
    """``algorithm`` as an instance that also records its local iterates' norms."""
    if isinstance(algorithm, _LocalNorms):
        return algorithm
    init = {f.name: getattr(algorithm, f.name) for f in dataclasses.fields(algorithm) if f.init}
    return _observing_class(type(algorithm))(**init)


def local_iterate_norms(history) -> np.ndarray:
    """The largest ‖w^k_{t,j}‖ per round (NaN in a round without local steps), as recorded by the
    CA-Fed plans' runs."""
    return np.asarray(history.observed.get("local_norm", []), dtype=float)


# ------------------------------------------------------------------------------ the runs
def _weights_of(history) -> tuple[np.ndarray, bool]:
    """(q, fixed): the run's aggregation weights (the mean over rounds with clients) and whether they never changed."""
    W = np.asarray(history.observed["weights"], dtype=float)
    W = W[~np.isnan(W).any(axis=1)]
    if not W.size:
        return np.full(history.observed["weights"].shape[1], math.nan), True
    return W.mean(axis=0), bool(np.allclose(W, W[0], rtol=1e-12, atol=0.0))


def _pooled_q(histories) -> tuple[np.ndarray, bool]:
    qs = [_weights_of(h) for h in histories]
    q = np.mean([w for w, _ in qs], axis=0)
    fixed = all(f for _, f in qs) and all(np.allclose(w, qs[0][0], rtol=1e-12, atol=0) for w, _ in qs)
    return q, fixed


def _require(setup: Setup, name: str, strong: bool) -> tuple[np.ndarray, np.ndarray, float | None]:
    problem = setup.problem
    if setup.recorded is not None:
        mu = _RecordedObjectives(setup.constants, name).constant("mu") if strong else None
        if not isinstance(setup.pattern, Markov):
            raise ValueError(f"{name} assumes Markov availability (CA-Fed Assumption 1): the record's header needs "
                             "availability {\"model\": \"markov\", \"pi\": [...], \"lam\": [...]} or {\"model\": \"estimate\"}")
        return np.asarray(setup.pattern.pi, dtype=float), np.asarray(setup.pattern.lam, dtype=float), mu
    if not getattr(problem, "convex", False):
        raise ValueError(f"{name} assumes convex local objectives (CA-Fed Assumptions 3–4); "
                         f"{type(problem).__name__} is not convex")
    problem.client_losses(problem.x0)             # a ValueError names a problem without per-client losses
    mu = problem.strong_convexity() if strong else None
    if not isinstance(setup.pattern, Markov):
        given = "a fixed trace" if setup.pattern is None else type(setup.pattern).__name__
        raise ValueError(f"{name} assumes Markov availability (CA-Fed Assumption 1): give a "
                         f"participation.patterns.Markov pattern, not {given}")
    return np.asarray(setup.pattern.pi, dtype=float), np.asarray(setup.pattern.lam, dtype=float), mu


@dataclass
class _Context:
    """What every CA-Fed plan shares: the chain, α, μ, the steps (12), the algorithm to run."""

    setup: Setup
    name: str
    pi: np.ndarray
    lam: np.ndarray
    mu: float | None
    alpha: np.ndarray
    decay: float
    eta_1: float
    weights: str | None
    algorithm: object
    objectives: object
    notes: list
    #: Why recorded step sizes are not those of (12), or None.
    steps_outside: str | None = None

    @property
    def recorded(self) -> bool:
        return isinstance(self.objectives, _RecordedObjectives)

    def gap_at_average(self, history, weights, which: str) -> float:
        """Σ_k w_k F_k(w̄_T) − min (``which`` = "F" with w = α, "F_B" with w = p): on a record from its
        constants F_star, F_B_star; else by L-BFGS on the problem."""
        if self.recorded:
            name = "F_star" if which == "F" else "F_B_star"
            own = history.meta.get("constants", {}).get(name)        # the record's own (F_B* at its p)
            return self.objectives.gap(history, weights, float(own) if own is not None else self.objectives.constant(name),
                                       name)
        minimum = self.objectives.minimum(self.alpha if which == "F" else weights)[1]
        return loss_gap_at_average(history, self.setup.problem, weights, minimum)

    @property
    def L(self) -> float:
        return self.setup.constants.L

    @property
    def kappa2(self) -> float:
        try:
            kappa2 = (self.L / self.mu) ** 2
        except OverflowError:
            kappa2 = math.inf
        if not math.isfinite(kappa2):
            raise ValueError(f"κ² = (L/μ)² overflows a float at L = {self.L!r}, μ = {self.mu!r}")
        return kappa2

    def p_of(self, q) -> np.ndarray:
        return bc.biased_importance(self.pi, q)

    def known_q(self) -> np.ndarray | None:
        """q before any run: ``cafed-unbiased`` with the oracle's π gives η̄·α/π_oracle (the analysis
        absorbs η̄ into q, App. B); None when the weights are chosen along the run or recorded."""
        alg = self.algorithm
        if self.recorded or alg.name != "cafed-unbiased" or getattr(alg, "oracle", None) is None:
            return None
        return alg.eta_g * alg.target(self.pi.size) / np.asarray(alg.oracle[0], dtype=float)

    def run_options(self) -> dict:
        return {"observe": True, "local_schedule": lambda t: (t + 1.0) ** (-self.decay)}

    def covered(self, histories):
        if self.setup.algorithm not in COVERS:
            return False
        return True if _pooled_q(histories)[1] else "its weights changed along the runs; the theorem is for one fixed q"


def _context(setup: Setup, name: str, *, strong: bool = True, default_weights: str = "target") -> _Context:
    """What every CA-Fed plan reads: α, π, λ, μ (``strong``: a bound in κ = L/μ), the step sizes
    (12) and the algorithm, ``cafed-unbiased`` at ``default_weights`` unless ``weights=`` is given."""
    if setup.algorithm not in COVERS and setup.given is None:
        raise ValueError(f"{name} is checked on {', '.join(COVERS)} (FedAvg with weights q), not {setup.algorithm}")
    pi, lam, mu = _require(setup, name, strong=strong)
    n, E, L = setup.n_clients, setup.local_steps, setup.constants.L
    notes = []
    if setup.recorded is not None:
        if "decay" not in setup.hparams:
            raise ValueError(f"the record has no hparams.decay, which {name} needs: the exponent a of the step sizes "
                             "(12), η_t = η_1 t^(−a)")
        given_alpha = getattr(setup.given, "alpha", None)
        alpha = np.full(n, 1 / n) if given_alpha is None else np.asarray(given_alpha, dtype=float)
        if given_alpha is None:
            notes.append("α: uniform 1/N (the record gives no hparams.alpha)")
        elif alpha.shape != (n,):
            raise ValueError(f"hparams.alpha has {alpha.size} entries but the record has {n} clients")
    else:
        alpha = np.asarray(setup.hparams.get("alpha", np.full(n, 1 / n)), dtype=float)
    decay = option_number(setup.hparams, "decay", 1.0)
    if not 0.5 < decay <= 1:
        raise ValueError(f"decay must lie in (1/2, 1] for the step sizes (12) of CA-Fed Thm 2, got {decay}")
    weights = setup.hparams.get("weights")
    if weights is not None and weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    if weights is not None and (setup.given is not None or setup.algorithm != "cafed-unbiased"):
        raise ValueError("weights= chooses cafed-unbiased's fixed q; the greedy cafed and a given algorithm choose their own")
    eta_1 = 1 / (2 * L * (1 + 2 * E * float((alpha / pi).sum())))
    steps_outside = None
    if setup.recorded is not None and not math.isclose(setup.given.eta_l, eta_1, rel_tol=1e-9):
        steps_outside = (f"recorded η_1 = {setup.given.eta_l:.4g}; the step sizes (12) of {name} take "
                         f"η_1 = 1/(2L(1 + 2EQ)) = {eta_1:.4g}")
    if setup.given is not None:
        algorithm, eta_1, weights = setup.given, setup.given.eta_l, None
    else:
        if setup.algorithm == "cafed-unbiased":
            weights = weights or default_weights
        else:
            weights = None
        oracle = (tuple(pi), tuple(lam)) if weights != "target" else ((1.0,) * n, (0.0,) * n)
        extra = {k: v for k, v in setup.hparams.items() if k not in ("alpha", "decay", "weights")}
        algorithm = algorithms.get(setup.algorithm, eta_l=eta_1, eta_g=1.0, local_steps=E, oracle=oracle,
                                   alpha=tuple(alpha), **extra)
        if weights == "target":
            notes.append("weights q = α (availability ignored): p = π ⊙̃ α ≠ α, so ε_bias > 0 unless π is uniform "
                         "or the clients share one optimum")
        elif weights == "unbiased":
            notes.append("weights q = α/π: p = α and ε_bias = 0 by construction")
    notes.append(f"step sizes (12): η_t = η_1 t^(−{decay:g}), η_1 = {eta_1:.4g}" + (
        (" (the recorded)" if setup.recorded is not None else " (the algorithm's own)") if setup.given
        else " = 1/(2L(1 + 2EQ)), Q = ‖α/π‖₁"))
    if setup.recorded is not None:
        notes.append("F*, F_B*, ε_bias, Γ, Γ', μ, diam(W) as the record states them; convexity and smoothness "
                     "(Assumptions 2–4) are its author's, not checked on a record")
        objectives = _RecordedObjectives(setup.constants, name)
    else:
        objectives = _Objectives(setup.problem)
    return _Context(setup, name, pi, lam, mu, alpha, decay, eta_1, weights, _observing(algorithm), objectives, notes,
                    steps_outside)


def _radius(ctx: _Context, histories, w_b) -> tuple[float, float]:
    """(R, largest local-iterate norm): W = {‖w‖ ≤ R} holds every server iterate, every local
    iterate, w*, w_B* and every w_k* (Assumption 2 and Lemma 1). On a record R = diam(W)/2 as it
    states it, and the local norms are those it recorded (``local_norm``; NaN without)."""
    if ctx.recorded:
        local = max((float(np.nanmax(v)) for h in histories if (v := local_iterate_norms(h)).size
                     and not np.isnan(v).all()), default=math.nan)
        diam = ctx.objectives.extra.get("diam")
        return (math.nan if diam is None else float(diam) / 2), local
    local = max((float(np.nanmax(v)) for h in histories if (v := local_iterate_norms(h)).size
                 and not np.isnan(v).all()), default=0.0)
    server = max(max(float(np.max(h.observed["param_norm"])), float(np.linalg.norm(h.final_params))) for h in histories)
    points = [np.linalg.norm(ctx.objectives.minimum(ctx.alpha)[0]), np.linalg.norm(w_b),
              float(np.linalg.norm(ctx.objectives.clients[0], axis=1).max())]
    return max(server, local, *map(float, points)), local


def _local_condition(histories, radius: float, local: float) -> Condition:
    """Lemma 1's W holds the local iterates: true when every run recorded them (a run record: its
    per-round ``local_norm``) and they lie in W."""
    recorded = all("local_norm" in h.observed for h in histories) and not math.isnan(local)
    return Condition("Lemma 1 (6)–(8): W holds every local iterate (recorded)", recorded and local <= radius,
                     local, radius, "" if recorded else "a run did not record its local iterates: D, G, H unverified")


# ------------------------------------------------------------------------------ Thm 2, eq. (13)
def _optimisation_plan(setup: Setup) -> Plan:
    ctx = _context(setup, "cafed.theorem_2", strong=False, default_weights="unbiased")
    traces, note = setup.unit_traces("participation")

    def measure(history, problem):
        return ctx.gap_at_average(history, ctx.p_of(_weights_of(history)[0]), "F_B")

    def inputs(histories) -> dict:
        q, fixed = _pooled_q(histories)
        v = _bias(ctx.objectives, ctx.alpha, ctx.p_of(q))
        if ctx.recorded:
            ctx.objectives.constant("diam")
            v["gamma"], v["gamma_prime"] = ctx.objectives.constant("Gamma"), ctx.objectives.constant("Gamma_prime")
        radius, local = _radius(ctx, histories, v["w_b"])
        if not radius > 0:
            raise ValueError("every iterate and minimiser is 0: W is a point, and CA-Fed Thm 2 needs "
                             "H = D·diam(W) > 0 (start away from the optimum)")
        return dict(v, q=q, fixed=fixed, diam=2 * radius, local=local, radius=radius)

    def bound(histories):
        v = inputs(histories)
        b = bc.theorem_2(v["q"], setup.constants, eta=ctx.eta_1, chains=(ctx.pi, ctx.lam),
                         Gamma=max(v["gamma"], v["gamma_prime"]), diam=v["diam"], decay=ctx.decay, horizon="finite")
        return dataclasses.replace(b, conditions=b.conditions + (_local_condition(histories, v["radius"], v["local"]),))

    def extras(histories):
        v = inputs(histories)
        D = ctx.L * v["diam"]
        return {**_minima(ctx, v), "measured bias F(w_B*) − F*": v["eps_bias"], "Gamma": v["gamma"],
                "Gamma'": v["gamma_prime"], "diam(W)": v["diam"], "D = L·diam(W)": D, "H = D·diam(W)": D * v["diam"],
                "largest local iterate norm": v["local"], "Q": float(v["q"].sum()), "eta_1": ctx.eta_1,
                "decay": ctx.decay, "q fixed": v["fixed"], "weights": ctx.weights or "algorithm's own"}

    return Plan(algorithm=ctx.algorithm, traces=traces, measure=measure, bound=bound, extras=extras,
                covered=ctx.covered, run_options=ctx.run_options(), steps_outside=ctx.steps_outside,
                step_sizes={"eta_1": ctx.eta_1, "eta_g": 1.0, "decay": ctx.decay}, notes=([note] if note else []) + ctx.notes)


def _minima(ctx: _Context, v: dict) -> dict:
    """F* and F_B* at the runs' p, the minima the left sides subtract (what a record's header
    carries as ``F_star``, ``F_B_star``)."""
    if ctx.recorded:
        return {k: ctx.objectives.extra.get(c) for k, c in (("F*", "F_star"), ("F_B*", "F_B_star"))
                if ctx.objectives.extra.get(c) is not None}
    return {"F*": float(v["F_star"]), "F_B*": float(ctx.objectives.minimum(v["p"])[1])}


# ------------------------------------------------------------------------------ Thm 1, eq. (10)
_L, _mu, _eps_b = sp.symbols("L mu epsilon_bias", nonnegative=True)


@functools.lru_cache(maxsize=None)
def _decomposition_formula(factor: float) -> Formula:
    """factor·κ²·ε_bias, κ = L/μ (the right side of eq. (10) with the optimisation gap moved left)."""
    return Formula({"bias": sp.nsimplify(factor) * (_L / _mu) ** 2 * _eps_b}, (_L, _mu, _eps_b))


def _decomposition_plan(setup: Setup, *, factor: float = 2.0, bias: bool = True) -> Plan:
    """CA-Fed Thm 1, eq. (10) at w = w̄_T: per run F(w̄_T) − F* − c(F_B(w̄_T) − F_B*) against c·ε_bias,
    c = ``factor``·κ² (2κ² in (10)); ``bias=False`` drops ε_bias from the right side. The keywords
    state (10)'s constants in one place; the theorem is ``factor=2, bias=True``."""
    ctx = _context(setup, "cafed.theorem_1")
    traces, note = setup.unit_traces("participation")
    c = factor * ctx.kappa2

    def gaps(history) -> tuple[float, float]:
        """(F(w̄_T) − F*, F_B(w̄_T) − F_B*) at the run's own q."""
        p = ctx.p_of(_weights_of(history)[0])
        return ctx.gap_at_average(history, ctx.alpha, "F"), ctx.gap_at_average(history, p, "F_B")

    def measure(history, problem):
        total, opt = gaps(history)
        return total - c * opt

    def inputs(histories) -> dict:
        q, fixed = _pooled_q(histories)
        v = _bias(ctx.objectives, ctx.alpha, ctx.p_of(q))
        radius, local = _radius(ctx, histories, v["w_b"])
        return dict(v, q=q, fixed=fixed, diam=2 * radius)

    def bound(histories):
        v = inputs(histories)
        if ctx.recorded and bias:
            v["eps_bias"] = ctx.objectives.constant("eps_bias")
        eps = v["eps_bias"] if bias else 0.0
        where = "eq. (10) at w = w̄_T, F_B(w̄_T) − F_B* measured and moved to the left; proof in App. A, (21)–(24)"
        return make_bound(_decomposition_formula(factor), {_L: ctx.L, _mu: ctx.mu, _eps_b: max(eps, 0.0)},
                          Source("CA-Fed", "Thm 1", where, f"c = {factor:g}κ²" + ("" if bias else ", ε_bias dropped")),
                          conditions=[at_most("μ ≤ L (Assumptions 3–4)", ctx.mu, ctx.L)])

    def extras(histories):
        v = inputs(histories)
        total, opt = np.mean([gaps(h) for h in histories], axis=0)
        return {**_minima(ctx, v), "F(w̄_T) − F* (mean)": float(total), "eps_opt = F_B(w̄_T) − F_B* (mean)": float(opt),
                "measured bias F(w_B*) − F*": v["eps_bias"], "kappa": math.sqrt(ctx.kappa2), "mu": ctx.mu,
                "coefficient c": c, "Gamma": v["gamma"], "Gamma'": v["gamma_prime"], "diam(W)": v["diam"],
                "p": _vector(v["p"]), "Q": float(v["q"].sum()), "eta_1": ctx.eta_1, "decay": ctx.decay,
                "q fixed": v["fixed"], "weights": ctx.weights or "algorithm's own"}

    return Plan(algorithm=ctx.algorithm, traces=traces, measure=measure, bound=bound, extras=extras,
                covered=ctx.covered, run_options=ctx.run_options(), nonnegative=False, steps_outside=ctx.steps_outside,
                step_sizes={"eta_1": ctx.eta_1, "eta_g": 1.0, "decay": ctx.decay}, notes=([note] if note else []) + ctx.notes)


def _vector(x) -> str:
    return "(" + ", ".join(f"{v:.4g}" for v in np.asarray(x, dtype=float)) + ")"


# ------------------------------------------------------------------------------ eqs. (11) and (15)
def _bias_plan(setup: Setup, name: str, *, tv: bool) -> Plan:
    """ε_bias = F(w_B*) − F* against (11) (κ² χ²(α‖p) Γ) or, with ``tv``, (15) (4κ² d_TV²(α, p) Γ'). Without a
    run when q is known; else the runs give q (it must stay fixed)."""
    ctx = _context(setup, name)
    known = ctx.known_q()

    def inputs(histories) -> dict:
        q, fixed = (known, True) if known is not None else _pooled_q(histories)
        return dict(_bias(ctx.objectives, ctx.alpha, ctx.p_of(q)), q=q, fixed=fixed)

    def bound(histories):
        v = inputs(histories)
        if ctx.recorded:
            v["gamma_prime" if tv else "gamma"] = ctx.objectives.constant("Gamma_prime" if tv else "Gamma")
        if tv:
            return bc.theorem_3(ctx.alpha, v["q"], ctx.pi, setup.constants, mu=ctx.mu, Gamma_prime=v["gamma_prime"])
        return bc.theorem_1(ctx.alpha, v["q"], ctx.pi, setup.constants, mu=ctx.mu, Gamma=v["gamma"])

    def extras(histories):
        v = inputs(histories)
        out = {"measured bias F(w_B*) − F*": v["eps_bias"], "kappa": math.sqrt(ctx.kappa2), "mu": ctx.mu,
               "Gamma": v["gamma"], "Gamma'": v["gamma_prime"], "chi2(alpha||p)": v["chi2"], "d_TV(alpha, p)": v["tv"],
               "p": _vector(v["p"]), "q": _vector(v["q"]), "q fixed": v["fixed"],
               "weights": ctx.weights or "algorithm's own"}
        if histories:
            out["diam(W)"] = 2 * _radius(ctx, histories, v["w_b"])[0]
        return out

    def measure(history, problem):
        if ctx.recorded:                    # the record's own ε_bias (at its q), else the shared one
            own = history.meta.get("constants", {}).get("eps_bias")
            return float(own) if own is not None else ctx.objectives.constant("eps_bias")
        return _bias(ctx.objectives, ctx.alpha, ctx.p_of(_weights_of(history)[0]))["eps_bias"]

    common = dict(algorithm=ctx.algorithm, bound=bound, extras=extras, noise_free=True, notes=ctx.notes,
                  steps_outside=ctx.steps_outside,
                  step_sizes={"eta_1": ctx.eta_1, "eta_g": 1.0, "decay": ctx.decay})
    if known is not None:
        return Plan(traces=[], measure=None, values=lambda: [inputs([])["eps_bias"]],
                    notes=ctx.notes + ["ε_bias depends on the problem and q alone: computed without a run"],
                    **{k: v for k, v in common.items() if k != "notes"})
    traces, note = setup.unit_traces("noise")
    return Plan(traces=traces, measure=measure, covered=ctx.covered, run_options=ctx.run_options(),
                **{**common, "notes": ([note] if note else []) + ctx.notes + ["q chosen along the runs: ε_bias at the runs' q"]})


# ------------------------------------------------------------------------------ records


#: The measured inputs of a CA-Fed check (its extras) and the record constants they become.
RECORD_CONSTANTS = {"mu": "mu", "F*": "F_star", "measured bias F(w_B*) − F*": "eps_bias", "Gamma": "Gamma",
                    "Gamma'": "Gamma_prime", "diam(W)": "diam"}


def record_constants(result, problem, records, *, per_run_bias: bool = False) -> list[dict]:
    """Per run record of a CA-Fed check, the constants a record states
    (``verify.check_run`` reads them): the check's measured F*, ε_bias, Γ, Γ', μ, diam(W), and
    F_B* at the record's own p = π ⊙̃ q (q its weights averaged over the rounds with clients, as
    the left side takes it). With ``per_run_bias`` (eqs. (11) and (15), whose left side is ε_bias
    of each run), ε_bias = F(w_B*) − F* at the record's own p."""
    shared = {to: float(result.extras[name]) for name, to in RECORD_CONSTANTS.items()
              if isinstance(result.extras.get(name), (int, float)) and not isinstance(result.extras.get(name), bool)}
    out = []
    for record in records:
        pi = np.asarray(record.header["availability"]["pi"], dtype=float)
        q = _weights_of(record_history(record))[0]
        own = dict(shared)
        if np.isfinite(q).all():
            p = bc.biased_importance(pi, q)
            own["F_B_star"] = float(weighted_minimum(problem, p)[1])
            if per_run_bias:                # α as check_run reads it: the header's, else uniform
                alpha = (record.header.get("hparams") or {}).get("alpha") or np.full(pi.size, 1 / pi.size)
                own["eps_bias"] = float(_bias(_Objectives(problem), np.asarray(alpha, dtype=float), p)["eps_bias"])
        out.append(own)
    return out


def _measured(per_run_bias: bool):
    """The header additions of a CA-Fed check's records: its measured constants (with how they were
    obtained) and the step-size exponent a of (12)."""
    def measured(result, problem, records) -> list[tuple[dict, dict]]:
        source = ("fedverify problem: exact L, σ², Δ_f, F_0; F*, F_B*, ε_bias, Γ, Γ', μ, diam(W) measured by check")
        return [({**constants, "source": source}, {"decay": float(result.step_sizes["decay"])})
                for constants in record_constants(result, problem, records, per_run_bias=per_run_bias)]
    return measured


# ------------------------------------------------------------------------------ the declarations
_NEEDS = {
    "chain": "π, λ of the Markov pattern (two-state clients, CA-Fed App. F3)",
}
_MINIMA = "F_k*, w_k*, w*, w_B* by L-BFGS on the convex objectives"
_GAMMA = {"Gamma": f"Γ = max_k F_k(w*) − F_k* (eq. (9)); {_MINIMA}"}
_GAMMA_PRIME = {"Gamma'": f"Γ' = max_k F_k(w_B*) − F_k* (Thm 3); {_MINIMA}"}
_STRONG = {"mu": "μ: problem.strong_convexity() (Assumption 4); κ = L/μ"}
_DIAM = {"diam": "diam(W): twice the largest norm of the server and local iterates, w*, w_B* and every w_k* "
                 "(Lemma 1: D = L·diam(W), G² = D² + max σ_k², H = D·diam(W))"}
_STEPS = "η_t = η_1 t^(−a) with η_1 = 1/(2L(1 + 2EQ)), a = decay ∈ (1/2, 1] (eq. (12)); server rate 1"
_ASSUME = "convex problems with per-client losses (Quadratic, Logistic), a Markov pattern"
_BIAS_ASSUME = "strongly convex problems with per-client losses, a Markov pattern (only π is used)"
_PATTERNS = ("cafed-temporal",)
_CHAIN = "--L 1 --sigma2 1 --delta-f 20 --N 2 --set alpha=0.5,0.5 --set q=0.5,0.5 --set pi=0.9,0.5 --set mu=0.1"
_BIAS = "ε_bias = F(w_B*) − F*, w_B* = argmin F_B, F_B = Σ_k p_k F_k, p = π ⊙̃ q"
_BIAS_LATEX = r"F(w_B^*) - F^*"


def _seeds(T: int):
    """Two one-dimensional clients with optima apart (κ = 5): a fast and a slow chain, and two
    negatively correlated ones (λ = −0.3), under both step-size decays."""
    problem = Quadratic(np.array([[1.0], [0.2]]), np.array([[1.0], [-1.0]]))
    return [(problem, Markov(np.array([0.9, 0.2]), np.array([0.0, 0.9])), {"decay": 1.0}),
            (problem, Markov(np.array([0.5, 0.5]), np.array([-0.3, -0.3])), {"decay": 0.75})]


def _records(fields: tuple[str, ...], per_run_bias: bool) -> RecordReading:
    """CA-Fed records: Markov availability (given or fitted), the weights q_{t,i} the server used
    (its own, eq. (2), so not equal), constants checked by the plan itself (f is Σ α_k F_k), and
    the constants a check measures written into its records; ``per_run_bias`` for eqs. (11) and
    (15), whose left side is ε_bias of each record."""
    return RecordReading(models=("markov", "estimate"), assumption="CA-Fed Assumption 1 (Markov availability)",
                         fields=tuple((f, ()) for f in fields), estimate=fitted_markov, constant_check=None,
                         equal_weights=False, measured=_measured(per_run_bias))


def _theorem(which, bound, plan, lhs, lhs_latex, expectation, needs, *, summary, example, assumptions=_ASSUME,
             bias_alone=False) -> Theorem:
    """``bias_alone``: eqs. (11) and (15), a statement on ε_bias that reads a record's weights alone."""
    reads = ("weights",) if bias_alone else ("weights", "avg_client_losses")
    return Theorem(name=f"cafed.{which}", bound=bound, lhs=lhs, lhs_latex=lhs_latex, expectation=expectation,
                   covers=COVERS, steps=_STEPS, plan=plan, needs={**needs, **_NEEDS}, assumptions=assumptions,
                   options=("decay", "weights"), summary=summary, example=example, patterns=_PATTERNS,
                   algorithms=COVERS, space=space("markov"), seed_cases=_seeds, records=_records(reads, bias_alone))


THEOREMS = {
    "cafed.theorem_1": _theorem(
        "theorem_1", bc.theorem_1, _decomposition_plan,
        "F(w̄_T) − F* − 2κ²(F_B(w̄_T) − F_B*), w̄_T = Σ_t η_t w_t / Σ_t η_t",
        r"F(\bar w_T) - F^* - 2\kappa^2\left(F_B(\bar w_T) - F_B^*\right)", "participation",
        {**_STRONG, "eps_bias": f"ε_bias = F(w_B*) − F*; {_MINIMA}"},
        summary="CA-Fed Thm 1, eq. (10): F(w) − F* ≤ 2κ²(F_B(w) − F_B* + ε_bias) at the runs' w̄_T",
        example=f"{_CHAIN} --set Gamma=1 --set eps_opt=0.01"),
    "cafed.theorem_1_bias": _theorem(
        "theorem_1_bias", bc.theorem_1, lambda setup: _bias_plan(setup, "cafed.theorem_1_bias", tv=False), _BIAS, _BIAS_LATEX,
        "noise", {**_STRONG, **_GAMMA},
        summary="CA-Fed Thm 1, eq. (11): the bias ε_bias ≤ κ² χ²(α‖p) Γ, no run needed",
        example=f"{_CHAIN} --set Gamma=1", assumptions=_BIAS_ASSUME, bias_alone=True),
    "cafed.theorem_3": _theorem(
        "theorem_3", bc.theorem_3, lambda setup: _bias_plan(setup, "cafed.theorem_3", tv=True), _BIAS, _BIAS_LATEX,
        "noise", {**_STRONG, **_GAMMA_PRIME},
        summary="CA-Fed Thm 3, eq. (15): the bias ε_bias ≤ 4κ² d_TV²(α, p) Γ', no run needed",
        example=f"{_CHAIN} --set Gamma_prime=1", assumptions=_BIAS_ASSUME, bias_alone=True),
    "cafed.theorem_2": _theorem(
        "theorem_2", bc.theorem_2, _optimisation_plan,
        "F_B(w̄_T) − F_B*, F_B = Σ_k p_k F_k, p = π ⊙̃ q", r"F_B(\bar w_T) - F_B^*", "participation",
        {**_GAMMA, **_GAMMA_PRIME, **_DIAM},
        summary="CA-Fed Thm 2, eq. (13): optimisation error of FedAvg with fixed weights q under Markov availability",
        example="--L 1 --sigma2 1 --delta-f 20 --N 2 --set q=0.5,0.5 --set eta=0.01 --set pi=0.9,0.5 "
                "--set lam=0.5,0.3 --set Gamma=1 --set diam=1"),
}
