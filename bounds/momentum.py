"""Server momentum in FL: multistage FedGM bounds.

J. Sun, X. Wu, H. Huang, A. Zhang, "On the Role of Server Momentum in Federated Learning",
AAAI 2024, arXiv:2312.12670 ("Server momentum" below; appendices as in the arXiv version).

FedGM's server step (eq. (2), Sec. 3) is
``d_{t+1} = (1-β)Δ_t + β d_t``, ``h_{t+1} = (1-ν)Δ_t + ν d_{t+1}``, ``x_{t+1} = x_t - η h_{t+1}``;
the multistage "constant and drop" scheduler (Algorithm 3, Sec. 4.1) runs stage s with
a fixed triple (η_s, β_s, ν_s) for T_s rounds, subject to constraint (3) (Sec. 4.2):
η non-increasing, β non-decreasing and < 1, and both W_1 = η_s β_s ν_s / (1-β_s) and
W_2 = T_s η_s constant over the stages.

Every theorem bounds the stage-averaged expected squared gradient norm
``Ḡ = (1/S) Σ_s (1/T_s) Σ_{t in stage s} E‖∇f(x_t)‖²`` (Sec. 4.2) and returns a
:class:`bounds.core.Bound` written once as named sympy terms.

Mapping onto :class:`bounds.core.Constants`: ``L`` → L, ``sigma2`` → σ_l² (local minibatch
variance, A2), ``zeta2`` → σ_g² (global variance / heterogeneity, A3; ``extra["sigma_g2"]``
is accepted instead), ``delta_f`` → f(x_0) − f*, ``n_clients`` → n, ``local_steps`` → K,
``rounds`` → T (must equal the schedule's Σ T_s). The client learning rate η_l and the
server hyperparameters live on the :class:`StageSchedule`.

Indexing (chosen here): rounds t = 0..T−1 as in the proofs (App. A), stages s = 1..S as in
the main text, so "η_0" in the proofs (e.g. C_η = η_0/η_S in the proof of Thm 4.1, App. D)
means the first-stage value η_1.
"""
from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
import sympy as sp

from .core import (Bound, Condition, Constants, Formula, Magnitude, Source, at_most, check_variant, count,
                   make_bound, nonnegative, positive)

__all__ = [
    "StageSchedule", "ScheduleQuantities", "LocalStepStats", "schedule_quantities", "w1", "w2", "eta_bar",
    "eta_hat2", "eta_hat3", "c_eta", "c_beta", "single_stage", "constant_and_drop", "paper_schedule",
    "theorem_4_1", "theorem_4_6", "theorem_5_1", "corollary_g1", "formula_4_1", "formula_4_6", "formula_5_1",
    "formula_g1", "sym",
]

PAPER = "Server momentum"
#: Most rounds StageSchedule.per_round() expands a schedule to.
PER_ROUND_LIMIT = 2**26

# The symbols every formula is written in (public so that callers can substitute).
sym = SimpleNamespace(
    L=sp.Symbol("L", positive=True),
    sigma_l2=sp.Symbol("sigma_l^2", positive=True),
    sigma_g2=sp.Symbol("sigma_g^2", positive=True),
    delta_f=sp.Symbol("Delta_f", positive=True),
    n=sp.Symbol("n", positive=True),
    m=sp.Symbol("m", positive=True),
    K=sp.Symbol("K", positive=True),
    T=sp.Symbol("T", positive=True),
    S=sp.Symbol("S", positive=True),
    W1=sp.Symbol("W_1", positive=True),
    W2=sp.Symbol("W_2", positive=True),
    eta_bar=sp.Symbol(r"\bar{\eta}", positive=True),
    eta_hat2=sp.Symbol(r"\hat{\eta}^{2}", positive=True),
    eta_hat3=sp.Symbol(r"\hat{\eta}^{3}", positive=True),
    C_eta=sp.Symbol("C_eta", positive=True),
    eta_l=sp.Symbol("eta_l", positive=True),
    tau=sp.Symbol("tau", positive=True),
    phi1=sp.Symbol("phi_1", positive=True),
    phi2=sp.Symbol("phi_2", positive=True),
    phi3=sp.Symbol("phi_3", positive=True),
)


# ------------------------------------------------------------------------------ schedule


def _stage_tuple(values, name: str, stages: int | None) -> tuple[float, ...]:
    """A per-stage tuple of finite floats; a scalar is broadcast to every stage."""
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        if stages is None:
            raise ValueError(f"{name} must be a sequence, got {values!r}")
        values = [values] * stages
    try:
        out = tuple(float(v) for v in np.asarray(values, dtype=float).ravel())
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of real numbers, got {values!r}") from None
    if stages is not None and len(out) != stages:
        raise ValueError(f"{name} has {len(out)} stages but lengths has {stages}")
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"{name} must be finite, got {out}")
    return out


def _same(values, rtol: float) -> bool:
    values = np.asarray(values, dtype=float)
    return bool(np.ptp(values) <= rtol * np.max(np.abs(values)))


@dataclass(frozen=True)
class StageSchedule:
    """Multistage FedGM hyperparameters (Algorithm 3).

    ``lengths`` T_s (rounds per stage), ``eta_g`` server learning rates η_s, ``eta_l`` the
    client learning rate η_l, ``beta`` momentum factors β_s, ``nu`` instant discount
    factors ν_s (scalars are broadcast to every stage). Validated against constraint (3):
    η_s > 0 non-increasing, 0 ≤ β_s < 1 non-decreasing, 0 ≤ ν_s ≤ 1,
    W_1 = η_s β_s ν_s/(1−β_s) and W_2 = T_s η_s the same for every stage (to ``rtol``).
    FedAvg is ν = 0 (β then has no effect), FedAvgM ν = 1, FedNAG ν = β (Sec. 3, after eq. (2)).
    """

    lengths: tuple[int, ...]
    eta_g: tuple[float, ...]
    eta_l: float
    beta: tuple[float, ...] | float = 0.0
    nu: tuple[float, ...] | float = 0.0
    rtol: float = 1e-9

    def __post_init__(self):
        if isinstance(self.lengths, numbers.Integral):
            raise ValueError(f"lengths must be a sequence of stage lengths, got {self.lengths!r}")
        lengths = tuple(count(t, f"lengths[{s}]") for s, t in enumerate(self.lengths))
        if not lengths:
            raise ValueError("lengths must name at least one stage, got ()")
        stages = len(lengths)
        eta_g = _stage_tuple(self.eta_g, "eta_g", stages)
        beta = _stage_tuple(self.beta, "beta", stages)
        nu = _stage_tuple(self.nu, "nu", stages)
        rtol = nonnegative(self.rtol, "rtol")
        positive(self.eta_l, "eta_l")
        for s in range(stages):
            positive(eta_g[s], f"eta_g[{s}]")
            if not 0 <= beta[s] < 1:
                raise ValueError(f"beta[{s}] must lie in [0, 1), got {beta[s]}")
            if not 0 <= nu[s] <= 1:
                raise ValueError(f"nu[{s}] must lie in [0, 1], got {nu[s]}")
        for s in range(stages - 1):
            if eta_g[s + 1] > eta_g[s] * (1 + rtol):
                raise ValueError(f"eta_g must be non-increasing (constraint (3)), got eta_g[{s + 1}]={eta_g[s + 1]} "
                                 f"> eta_g[{s}]={eta_g[s]}")
            if beta[s + 1] < beta[s] * (1 - rtol):
                raise ValueError(f"beta must be non-decreasing (constraint (3)), got beta[{s + 1}]={beta[s + 1]} "
                                 f"< beta[{s}]={beta[s]}")
        products = [t * e for t, e in zip(lengths, eta_g)]
        w1s = [e * b * v / (1 - b) for e, b, v in zip(eta_g, beta, nu)]
        for name, row in (("T_s·eta_g[s] (W_2)", products), ("eta_g·beta·nu/(1-beta) (W_1)", w1s)):
            if not all(math.isfinite(x) for x in row):
                s = next(i for i, x in enumerate(row) if not math.isfinite(x))
                raise ValueError(f"{name} overflows float64 at stage {s}: lengths={lengths[s]}, eta_g={eta_g[s]}, "
                                 f"beta={beta[s]}, nu={nu[s]}")
        if not _same(products, rtol):
            raise ValueError(f"T_s·eta_g[s] must be the same for every stage (W_2, constraint (3)), got {products}")
        if not _same(w1s, rtol):
            raise ValueError(f"eta_g·beta·nu/(1-beta) must be the same for every stage (W_1, constraint (3)), "
                             f"got {w1s}")
        for name, value in (("lengths", lengths), ("eta_g", eta_g), ("beta", beta), ("nu", nu), ("rtol", rtol)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "eta_l", float(self.eta_l))

    @property
    def n_stages(self) -> int:
        """S."""
        return len(self.lengths)

    @property
    def total_rounds(self) -> int:
        """T = Σ_s T_s (Sec. 4.1)."""
        return int(sum(self.lengths))

    @property
    def boundaries(self) -> tuple[int, ...]:
        """B_0 = 0, B_s = T_1 + … + T_s: stage s covers rounds B_{s−1} … B_s − 1."""
        return (0, *itertools.accumulate(self.lengths))

    def per_round(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(η_t, β_t, ν_t) for t = 0..T−1: the stage values repeated T_s times (proof of Thm 4.1, App. D).

        Three arrays of T entries: refused (ValueError) above PER_ROUND_LIMIT = 2^26 rounds.
        No theorem needs them; the multistage constants are per stage (:func:`schedule_quantities`)."""
        if self.total_rounds > PER_ROUND_LIMIT:
            raise ValueError(f"per_round() would build 3 arrays of T = {self.total_rounds} rounds, above "
                             f"PER_ROUND_LIMIT = 2**26; use the per-stage values (lengths, eta_g, beta, nu)")
        reps = np.asarray(self.lengths)
        return tuple(np.repeat(np.asarray(v, dtype=float), reps) for v in (self.eta_g, self.beta, self.nu))


@dataclass(frozen=True)
class ScheduleQuantities:
    """The multistage constants (constraint (3), Thm 4.1, footnote 5; C_β from the proof of Thm 4.1, App. D)."""

    S: int
    T: int
    W1: float
    W2: float
    eta_bar: float
    eta_hat2: float
    eta_hat3: float
    C_eta: float
    C_beta: float


def w1(schedule: StageSchedule) -> float:
    """W_1 = η_s β_s ν_s / (1 − β_s), the same for every stage (constraint (3))."""
    eta, beta, nu = (np.asarray(v) for v in (schedule.eta_g, schedule.beta, schedule.nu))
    return float(np.mean(eta * beta * nu / (1 - beta)))


def w2(schedule: StageSchedule) -> float:
    """W_2 = T_s η_s, the same for every stage (constraint (3))."""
    return float(np.mean(np.asarray(schedule.lengths, dtype=float) * np.asarray(schedule.eta_g)))


def eta_bar(schedule: StageSchedule) -> float:
    """η̄ = (1/S) Σ_s η_s, the average server learning rate (Thm 4.1)."""
    return float(np.mean(schedule.eta_g))


def eta_hat2(schedule: StageSchedule) -> float:
    """η̂² = (1/S) Σ_s η_s² (footnote 5)."""
    with np.errstate(over="ignore"):
        return float(np.mean(np.asarray(schedule.eta_g) ** 2))


def eta_hat3(schedule: StageSchedule) -> float:
    """η̂³ = (1/S) Σ_s η_s³ (footnote 5)."""
    with np.errstate(over="ignore"):
        return float(np.mean(np.asarray(schedule.eta_g) ** 3))


def c_eta(schedule: StageSchedule) -> float:
    """C_η = η_1/η_S, first over last stage (Thm 4.1; printed η_0/η_S in its proof, App. D)."""
    return schedule.eta_g[0] / schedule.eta_g[-1]


def c_beta(schedule: StageSchedule) -> float:
    """C_β = (1 − β_1)/(1 − β_S) (proof only: App. D, bounding Σ_t E‖d_t‖²); the proofs use
    C_β ≤ C_η (App. D, just before Thm 4.1's final bound)."""
    return (1 - schedule.beta[0]) / (1 - schedule.beta[-1])


def schedule_quantities(schedule: StageSchedule) -> ScheduleQuantities:
    """All multistage constants of a schedule at once."""
    if not isinstance(schedule, StageSchedule):
        raise ValueError(f"schedule must be a StageSchedule, got {type(schedule).__name__}")
    with np.errstate(over="ignore", invalid="ignore"):
        return ScheduleQuantities(schedule.n_stages, schedule.total_rounds, w1(schedule), w2(schedule),
                                  eta_bar(schedule), eta_hat2(schedule), eta_hat3(schedule), c_eta(schedule),
                                  c_beta(schedule))


def single_stage(rounds: int, eta_g: float, eta_l: float, beta: float = 0.0, nu: float = 0.0) -> StageSchedule:
    """S = 1: plain FedGM with a constant (η, β, ν) for ``rounds`` rounds (Sec. 4.1)."""
    return StageSchedule((count(rounds, "rounds (T)"),), (eta_g,), eta_l, beta, nu)


def constant_and_drop(eta_g, rounds: int, eta_l: float, *, nu: float = 0.9, beta1: float = 0.7) -> StageSchedule:
    """A schedule meeting constraint (3) from the stage learning rates and the total rounds.

    Stage lengths follow T_s ∝ 1/η_s with the stage boundaries rounded to the nearest round
    (derived here from W_2 = T_s η_s, constraint (3)). When rounding breaks
    T_s η_s = const, η_s for s ≥ 2 is reset to η_1 T_1 / T_s so that W_2 is exact (the theorems need it exactly). ν is
    constant and β_s = W_1/(W_1 + η_s ν) with W_1 = η_1 β_1 ν/(1 − β_1), which keeps W_1
    constant and β non-decreasing (derived here from constraint (3); the paper reports no β_s,
    Sec. 6.2).
    """
    eta = _stage_tuple(eta_g, "eta_g", None)
    if not eta:
        raise ValueError("eta_g must name at least one stage, got ()")
    for s, e in enumerate(eta):
        positive(e, f"eta_g[{s}]")
    rounds = count(rounds, "rounds (T)")
    inverse = np.cumsum(1 / np.asarray(eta))
    ends = np.floor(rounds * inverse / inverse[-1] + 0.5).astype(int)
    lengths = np.diff(np.concatenate([[0], ends]))
    if np.any(lengths < 1):
        raise ValueError(f"rounds={rounds} is too few for {len(eta)} stages with eta_g={eta}")
    with np.errstate(all="ignore"):
        products = lengths * np.asarray(eta, dtype=float)
    if not np.all(np.isfinite(products)):
        raise ValueError(f"eta_g={eta} is too large: a stage's η·T_s must be a finite number")
    if not _same(products, 1e-12):
        eta = tuple(eta[0] * lengths[0] / t for t in lengths)
    if not 0 <= beta1 < 1:
        raise ValueError(f"beta1 must lie in [0, 1), got {beta1}")
    if not 0 <= nu <= 1:
        raise ValueError(f"nu must lie in [0, 1], got {nu}")
    w1_value = eta[0] * beta1 * nu / (1 - beta1)
    beta = [w1_value / (w1_value + e * nu) for e in eta] if w1_value > 0 else [beta1] * len(eta)
    return StageSchedule(tuple(int(t) for t in lengths), eta, eta_l, tuple(beta), nu)


def paper_schedule(rounds: int = 1000, eta_l: float = 0.01, *, nu: float = 0.9, beta1: float = 0.7) -> StageSchedule:
    """The experiments' schedule (Sec. 6.2, Fig. 2; App. H.3, Fig. 8).

    η = (2.0, 1.0, 0.5), T_1:T_2:T_3 = 1:2:4, client LR 0.01 (Table 1, App. H.1). ``rounds=1000``
    gives Fig. 2's stage ends 143 and 429; 2000 gives Fig. 8's 286 and 857 (derived here:
    Fig. 2's marks fit T = 1000, not Table 1's default 500). For T not a multiple of 7,
    η_2, η_3 are nudged (< 0.2 %) so that W_2 stays exact; β_s, ν are not reported by the
    paper, so ν = 0.9 and β_1 = 0.7 (grid values, Table 1) with β_s from W_1.
    """
    return constant_and_drop((2.0, 1.0, 0.5), rounds, eta_l, nu=nu, beta1=beta1)


# ---------------------------------------------------------------- local-step statistics


@dataclass(frozen=True)
class LocalStepStats:
    """φ_1, φ_2, φ_3 and K_max of the autonomous theorems (footnote 5).

    φ_1 = (1/T) Σ_t K̄_t, φ_2 = (1/T) Σ_t K̂_t², φ_3 = (1/T) Σ_t (1/m) Σ_{i∈S_t} 1/K_{t,i}
    (the mean of reciprocals), with K̄_t, K̂_t² averaged over the m arrived clients S_t
    (footnote 5, Cor G.1 and its proof in App. G; the Thm 5.1 proof in App. F averages over
    all n). ``k_max`` is the largest K_{t,i} over all rounds, the conservative reading of
    K_{t,max} (over S_t in the statement of Thm 5.1; over all n in the proofs, App. F and G).
    Validated for consistency (Jensen: φ_2 ≥ φ_1², φ_3 ≥ 1/φ_1; and 1 ≤ φ_1 ≤ K_max, φ_2 ≤ K_max², φ_3 ≤ 1).
    """

    phi1: float
    phi2: float
    phi3: float
    k_max: float

    def __post_init__(self):
        phi1, phi2, phi3, k_max = (positive(getattr(self, n), n) for n in ("phi1", "phi2", "phi3", "k_max"))
        tol = 1 + 1e-9
        checks = [
            (k_max >= 1 / tol, f"k_max must be ≥ 1, got {k_max}"),
            (1 / tol <= phi1 <= k_max * tol, f"phi1 must lie in [1, k_max={k_max}], got {phi1}"),
            (phi1 ** 2 / tol <= phi2 <= k_max ** 2 * tol,
             f"phi2 must lie in [phi1², k_max²]=[{phi1 ** 2}, {k_max ** 2}], got {phi2}"),
            (1 / phi1 / tol <= phi3 <= tol, f"phi3 must lie in [1/phi1, 1]=[{1 / phi1}, 1], got {phi3}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @classmethod
    def constant(cls, K: int) -> "LocalStepStats":
        """Identical K for all t, i: φ_1 = K, φ_2 = K², φ_3 = 1/K (Cor 5.2; proof in App. F)."""
        K = count(K, "local_steps (K)")
        try:
            return cls(float(K), float(K * K), 1.0 / K, float(K))
        except OverflowError:
            raise ValueError(f"local_steps (K) = {float(K):.6g}: phi_2 = K² overflows float64") from None

    @classmethod
    def from_steps(cls, steps) -> "LocalStepStats":
        """From logged K_{t,i}: an array (T, m), row t the local steps of the m arrived clients."""
        steps = np.asarray(steps, dtype=float)
        if steps.ndim != 2 or steps.size == 0:
            raise ValueError(f"local steps must be a non-empty (T, m) array, got shape {steps.shape}")
        if not np.all(np.isfinite(steps)) or np.any(steps < 1) or np.any(steps != np.round(steps)):
            raise ValueError(f"local steps must be integers ≥ 1, got min {np.nanmin(steps)}")
        return cls(float(steps.mean(axis=1).mean()), float((steps ** 2).mean(axis=1).mean()),
                   float((1 / steps).mean(axis=1).mean()), float(steps.max()))


def _local_stats(local_steps, constants: Constants, rounds: int, m: int) -> LocalStepStats:
    if local_steps is None:
        return LocalStepStats.constant(constants.local_steps)
    if isinstance(local_steps, LocalStepStats):
        return local_steps
    stats = np.asarray(local_steps)
    if stats.ndim != 2 or stats.shape != (rounds, m):
        raise ValueError(f"local steps must have shape (T, m)=({rounds}, {m}), got {stats.shape}")
    return LocalStepStats.from_steps(stats)


# ------------------------------------------------------------------------------ formulas


def _sigma_l_terms(terms: dict[str, sp.Expr]) -> dict[str, sp.Expr]:
    return {name: term * sym.sigma_l2 for name, term in terms.items()}


@lru_cache(maxsize=None)
def formula_4_1() -> Formula:
    """Thm 4.1 right-hand side (the final bound of its proof, App. D, agrees)."""
    s, r = sym, sp.Rational
    terms = {"initial": r(64, 17) * s.delta_f / (s.S * s.W2 * s.eta_l * s.K)}
    terms |= _sigma_l_terms({
        "sigma_l_momentum": r(32, 17) * s.L ** 2 * s.W1 ** 2 * s.T * s.eta_bar * s.eta_l / (s.n * s.W2),
        "sigma_l_server": r(32, 17) * s.L * s.eta_bar * s.eta_l / s.n,
        "sigma_l_aggregate": r(32, 17) * s.eta_l / s.n,
        "sigma_l_drift": r(160, 17) * s.eta_l ** 2 * s.L ** 2 * s.K,
    })
    terms["sigma_g_drift"] = r(960, 17) * s.eta_l ** 2 * s.L ** 2 * s.K ** 2 * s.sigma_g2
    return Formula(terms, (s.delta_f, s.L, s.sigma_l2, s.sigma_g2, s.n, s.K, s.T, s.S, s.W1, s.W2, s.eta_bar,
                           s.eta_l))


@lru_cache(maxsize=None)
def formula_4_6(variant: str = "corrected", L_power: int = 3) -> Formula:
    """Thm 4.6 right-hand side (statement; final bound of its proof, App. E); see :func:`theorem_4_6`."""
    check_variant(variant, _VARIANTS_4_6)
    s, r = sym, sp.Rational
    phi = 32 * s.T * (s.eta_bar + s.L * s.eta_hat2 + s.L ** 2 * s.W1 ** 2 * s.eta_bar) / (17 * s.W2)
    ratio = (s.n - s.m) / (s.m * (s.n - 1))
    lead = s.m if variant == "printed" else s.eta_l
    terms = {"initial": r(64, 17) * s.delta_f / (s.S * s.W2 * lead * s.K)}
    terms |= _sigma_l_terms({
        "sigma_l_sampling": s.eta_l / s.m * phi,
        "sigma_l_sampling_drift": 15 * ratio * s.K ** 2 * s.L ** L_power * s.eta_l ** 3 * phi,
        "sigma_l_drift": r(160, 17) * s.eta_l ** 2 * s.L ** 2 * s.K,
    })
    terms |= {name: term * s.sigma_g2 for name, term in {
        "sigma_g_sampling_drift": 90 * ratio * s.K ** 3 * s.L ** L_power * s.eta_l ** 3 * phi,
        "sigma_g_sampling": 3 * s.eta_l * ratio * s.K * phi,
        "sigma_g_drift": r(960, 17) * s.eta_l ** 2 * s.L ** 2 * s.K ** 2,
    }.items()}
    if variant == "strict":
        terms = {name: 2 * term for name, term in terms.items()}
    return Formula(terms, (s.delta_f, s.L, s.sigma_l2, s.sigma_g2, s.n, s.m, s.K, s.T, s.S, s.W1, s.W2,
                           s.eta_bar, s.eta_hat2, s.eta_l))


def _autonomous_terms(c_drift, c_delay, c_g, *, server_term: bool) -> dict[str, sp.Expr]:
    """Thm 5.1 / G.1 share their shape; they differ in constants (Thm 5.1; Cor G.1)."""
    s = sym
    per_arrival = s.eta_l * s.T * s.phi3 / (s.m * s.W2)
    terms = {"initial": 4 * s.delta_f / (s.S * s.W2 * s.eta_l)}
    sigma_l = {
        "sigma_l_drift": c_drift * s.eta_l ** 2 * s.L ** 2 * s.T * s.eta_bar * s.phi1 / s.W2,
        "sigma_l_delay": c_delay * s.L ** 2 * s.tau ** 2 * s.eta_hat3 * s.eta_l * per_arrival,
        "sigma_l_momentum": 2 * s.L ** 2 * s.W1 ** 2 * s.eta_bar * per_arrival,
        "sigma_l_aggregate": 2 * s.eta_bar * per_arrival,
    }
    if server_term:
        sigma_l["sigma_l_server"] = 2 * s.L * s.eta_hat2 * per_arrival
    terms |= _sigma_l_terms(sigma_l)
    terms["sigma_g_drift"] = c_g * s.eta_l ** 2 * s.L ** 2 * s.T * s.eta_bar * s.phi2 / s.W2 * s.sigma_g2
    return terms


_AUTONOMOUS_SYMBOLS = (sym.delta_f, sym.L, sym.sigma_l2, sym.sigma_g2, sym.m, sym.T, sym.S, sym.W1, sym.W2,
                       sym.eta_bar, sym.eta_hat2, sym.eta_hat3, sym.eta_l, sym.tau, sym.phi1, sym.phi2, sym.phi3)


@lru_cache(maxsize=None)
def formula_5_1(variant: str = "corrected") -> Formula:
    """Thm 5.1 right-hand side (statement; final bound of its proof, App. F); see :func:`theorem_5_1`."""
    check_variant(variant, _VARIANTS_5_1)
    return Formula(_autonomous_terms(20, 4, 120, server_term=variant == "corrected"), _AUTONOMOUS_SYMBOLS)


@lru_cache(maxsize=None)
def formula_g1() -> Formula:
    """Cor 5.4 / G.1 right-hand side (Cor G.1, App. G; its proof's final bound agrees)."""
    terms = _autonomous_terms(30, 6, 180, server_term=True)
    terms["sigma_g_arrival"] = 6 * sym.sigma_g2
    return Formula(terms, _AUTONOMOUS_SYMBOLS)


# ---------------------------------------------------------------------- shared plumbing


def _sigma_g2(constants: Constants) -> float:
    """σ_g² (Assumption 3): Constants.zeta2, or extra['sigma_g2']."""
    extra = constants.extra.get("sigma_g2")
    if extra is not None:
        nonnegative(extra, "extra['sigma_g2']")
    if constants.zeta2 is None and extra is None:
        raise ValueError("this theorem needs σ_g²: Constants.zeta2 (or Constants(extra={'sigma_g2': ...}))")
    if constants.zeta2 is not None and extra is not None and not math.isclose(constants.zeta2, extra):
        raise ValueError(f"zeta2={constants.zeta2} and extra['sigma_g2']={extra} disagree; give σ_g² once")
    return float(constants.zeta2 if constants.zeta2 is not None else extra)


def _values(constants: Constants, schedule: StageSchedule) -> tuple[dict, ScheduleQuantities]:
    """Numbers for every symbol the schedule and constants fix; validates both."""
    if not isinstance(constants, Constants):
        raise ValueError(f"constants must be a bounds.core.Constants, got {type(constants).__name__}")
    q = schedule_quantities(schedule)
    if constants.rounds != q.T:
        raise ValueError(f"Constants.rounds (T={constants.rounds}) must equal the schedule's Σ T_s = {q.T}")
    s = sym
    values = {s.delta_f: constants.delta_f, s.L: constants.L, s.sigma_l2: constants.sigma2,
              s.sigma_g2: _sigma_g2(constants), s.n: constants.n_clients, s.K: constants.local_steps,
              s.T: q.T, s.S: q.S, s.W1: q.W1, s.W2: q.W2, s.eta_bar: q.eta_bar, s.eta_hat2: q.eta_hat2,
              s.eta_hat3: q.eta_hat3, s.C_eta: q.C_eta, s.eta_l: schedule.eta_l}
    return values, q


def _n_sampled(n_sampled, n: int) -> int:
    m = count(n_sampled, "n_sampled (m)")
    if m > n:
        raise ValueError(f"n_sampled (m={m}) must be ≤ n_clients (n={n})")
    return m


def _c_beta_condition(q: ScheduleQuantities, where: str) -> Condition:
    """C_β ≤ C_η: used by the proofs (``where``, e.g. App. D for Thm 4.1) but never assumed in the paper."""
    name = "C_beta <= C_eta (proof only)"
    if q.W1 == 0:
        return Condition(name, True, q.C_beta, q.C_eta, "vacuous: W_1 = 0, the momentum buffer drops out")
    return at_most(name, _M(q.C_beta), q.C_eta, f"{where}; not implied by (3) unless β_1ν_1 ≤ β_Sν_S")


def _M(x) -> Magnitude:
    """``x`` as a :class:`~bounds.core.Magnitude`: the sides of every condition here are built from
    them, so that L = 1e308 or η_l = 1e-300 compare exactly instead of after over- or underflow."""
    return Magnitude.of(x)


# --------------------------------------------------------------------------- theorems


SOURCE_4_1 = Source(PAPER, "Thm 4.1", "proof in App. D", "full participation")


def theorem_4_1(constants: Constants, schedule: StageSchedule) -> Bound:
    """Multistage FedGM, full participation (Server momentum Thm 4.1; proof in App. D).

    Ḡ ≤ (64/17)(f(x_0)−f*)/(S W_2 η_l K) + Ψ_l σ_l² + Ψ_g σ_g², with
    Ψ_l = (32/17)L²W_1²Tη̄η_l/(nW_2) + (32/17)Lη̄η_l/n + (32/17)η_l/n + (160/17)η_l²L²K and
    Ψ_g = (960/17)η_l²L²K² (the final bound of the proof, App. D, agrees, so there is one
    variant). Conditions: η_l ≤ 1/(8KL) and η_l ≤ 1/(K S C_η (Lη̄ + 1 + L²W_1²C_η))
    (Thm 4.1), plus C_β ≤ C_η, which the proof uses (App. D, just before the final bound)
    but the statement omits.
    """
    values, q = _values(constants, schedule)
    L, K, eta_l = _M(constants.L), constants.local_steps, _M(schedule.eta_l)
    conditions = (
        at_most("eta_l <= 1/(8KL)", eta_l, 1 / (8 * K * L),
                "Thm 4.1; client-drift bound in its proof (App. D, bounding A_2)"),
        at_most("eta_l <= 1/(K S C_eta (L eta_bar + 1 + L^2 W1^2 C_eta))", eta_l,
                1 / (K * q.S * _M(q.C_eta) * (L * q.eta_bar + 1 + L ** 2 * _M(q.W1) ** 2 * q.C_eta)),
                "Thm 4.1; proof in App. D"),
        _c_beta_condition(q, "proof of Thm 4.1, App. D"),
    )
    return make_bound(formula_4_1(), values, SOURCE_4_1, conditions=conditions)


_VARIANTS_4_6 = ("corrected", "printed", "strict")
SOURCES_4_6 = {
    "corrected": Source(PAPER, "Thm 4.6", "proof in App. E",
                        "leading term with η_l as in the proof's final bound"),
    "printed": Source(PAPER, "Thm 4.6", "proof in App. E", "as printed: leading term over S W_2 m K"),
    "strict": Source(PAPER, "Thm 4.6", "proof in App. E",
                     "corrected, doubled: the ½Ḡ the proof absorbs is dropped from its final bound"),
}


def _sampling_conditions(q: ScheduleQuantities, L: float, K: int, eta_l: float, n: int, m: int,
                         printed: bool) -> tuple[Condition, ...]:
    """The two sampling caps of Thm 4.6 (statement; the two conditions of its proof, App. E)."""
    L, eta_l = _M(L), _M(eta_l)
    w1_term = L ** 2 * _M(q.W1) ** 2 * (1 if printed else q.C_eta)
    lhs = eta_l * q.C_eta * (1 + L * q.eta_bar + w1_term) * q.S * K
    form = "L^2 W1^2" if printed else "L^2 W1^2 C_eta"
    pair_cap = math.inf if m == 1 else m * (n - 1) / (n * (m - 1))
    return (
        at_most(f"eta_l C_eta (1 + L eta_bar + {form}) S K <= m(n-1)/(n(m-1))", lhs, pair_cap,
                "Thm 4.6; first condition of its proof, App. E"),
        at_most(f"eta_l C_eta (1 + L eta_bar + {form}) S K <= 17m/282", lhs, 17 * m / 282,
                "Thm 4.6; second condition of its proof, App. E"),
    )


def theorem_4_6(constants: Constants, schedule: StageSchedule, n_sampled: int, *, variant: str = "corrected",
                L_power: int = 3) -> Bound:
    """Multistage FedGM, partial participation (Server momentum Thm 4.6; proof in App. E).

    m = ``n_sampled`` clients per round drawn uniformly without replacement (footnote 4).
    With Φ = 32T(η̄ + Lη̂² + L²W_1²η̄)/(17W_2) and r = (n−m)/(m(n−1)):
    Ḡ ≤ (64/17)(f(x_0)−f*)/(S W_2 η_l K) + Ψ_l σ_l² + Ψ_g σ_g²,
    Ψ_l = (η_l/m)Φ + 15 r K²L³η_l³Φ + (160/17)η_l²L²K,
    Ψ_g = 90 r K³L³η_l³Φ + 3η_l r K Φ + (960/17)η_l²L²K².

    Variants (default ``"corrected"``):

    - ``"corrected"``: the leading term's denominator is S W_2 η_l K as proved (final bound,
      App. E) and as Cor 4.7's rate needs; the statement prints S W_2 m K, a typo for η_l.
      Φ's "W_l²" in the statement is read W_1², as the proof defines Φ (App. E).
    - ``"printed"``: the statement exactly, leading term over S W_2 m K.
    - ``"strict"``: ``"corrected"`` doubled when m < n. The proof bounds the (n−m) gradient
      term by ½Ḡ and then states Ḡ ≤ … with unchanged constants (App. E, final bound);
      moving ½Ḡ to the left side doubles the right side. (Derived here, not in the paper.)

    ``L_power``: 3 as printed and proved (statement; App. E's E‖Δ_t‖² bound and final bound)
    in the two (n−m)·η_l³ terms, or 2 as the derivation produces (derived here: the
    15nK³L³η_l² of App. E's E‖Δ_t‖² bound comes from
    steps that give L², as its companion 90nK⁴L²η_l² has); they coincide when L = 1.

    Conditions: η_l ≤ 1/(8KL); η_l·C_η(1 + Lη̄ + L²W_1²·c)SK ≤ m(n−1)/(n(m−1)) and
    ≤ 17m/282 (the proof's two conditions, App. E), reported separately; c = 1 as printed
    in the statement, c = C_η in the corrected variants, since the proof's momentum
    coefficient (under its first condition) drops the C_β that its Σ_t E‖d_t‖² bound
    carries, and C_β ≤ C_η then gives Thm 4.1's form;
    plus C_β ≤ C_η (used, never assumed).
    """
    check_variant(variant, _VARIANTS_4_6)
    if L_power not in (2, 3):
        raise ValueError(f"L_power must be 2 or 3, got {L_power!r}")
    values, q = _values(constants, schedule)
    n, L, K, eta_l = constants.n_clients, constants.L, constants.local_steps, schedule.eta_l
    if n < 2:
        raise ValueError(f"theorem_4_6 needs n_clients ≥ 2 (its (n−m)/(n−1) factors), got n={n}; use theorem_4_1")
    m = _n_sampled(n_sampled, n)
    values[sym.m] = m
    formula = formula_4_6("corrected" if variant == "strict" and m == n else variant, L_power)
    conditions = (
        at_most("eta_l <= 1/(8KL)", _M(eta_l), 1 / (8 * K * _M(L)), "Thm 4.6"),
        *_sampling_conditions(q, L, K, eta_l, n, m, printed=variant == "printed"),
        _c_beta_condition(q, "proof of Thm 4.6, App. E (bound on Σ_t E‖d_t‖²)"),
    )
    return make_bound(formula, values, SOURCES_4_6[variant], conditions=conditions, variant=variant)


_VARIANTS_5_1 = ("corrected", "printed")
SOURCES_5_1 = {
    "corrected": Source(PAPER, "Thm 5.1", "footnote 5, proof in App. F",
                        "with the σ_l² term 2Lη̂²η_lTφ_3/(mW_2) of the proof's final bound"),
    "printed": Source(PAPER, "Thm 5.1", "footnote 5, proof in App. F", "as printed in the statement"),
}


def _autonomous_inputs(constants, schedule, n_sampled, tau, local_steps):
    values, q = _values(constants, schedule)
    m = _n_sampled(n_sampled, constants.n_clients)
    tau = count(tau, "tau (maximum delay)", minimum=0)
    stats = _local_stats(local_steps, constants, q.T, m)
    values |= {sym.m: m, sym.tau: tau, sym.phi1: stats.phi1, sym.phi2: stats.phi2, sym.phi3: stats.phi3}
    return values, q, m, tau, stats


def _delay_condition(q, L, k_max, eta_l, tau, constant, corrected, item, proof) -> Condition:
    """η_l ≤ sqrt(1/(c L² C_η τ K_max²)); the corrected form counts τ + 1 stale rounds."""
    reuse = tau + 1 if corrected else tau
    rhs = _M(math.inf) if reuse == 0 else (1 / (constant * _M(L) ** 2 * q.C_eta * reuse * _M(k_max) ** 2)).sqrt()
    label = "tau + 1" if corrected else "tau"
    detail = item + (f"; τ + 1: each x_u is reused for t = u..u+τ (step (ii) of the K_max bound, {proof})"
                     if corrected else "")
    return at_most(f"eta_l <= sqrt(1/({constant} L^2 C_eta ({label}) K_max^2))", _M(eta_l), rhs, detail)


def theorem_5_1(constants: Constants, schedule: StageSchedule, n_sampled: int, tau: int, local_steps=None, *,
                variant: str = "corrected") -> Bound:
    """Autonomous multistage FedGM, uniform arrival (Server momentum Thm 5.1; proof in App. F).

    Algorithm 4: m = ``n_sampled`` arrivals per server step, delays τ_{t,i} ≤ ``tau``,
    client i runs K_{t,i} local steps and sends its update divided by K_{t,i}.
    ``local_steps``: a :class:`LocalStepStats`, a (T, m) array of the arrived clients'
    K_{t,i}, or ``None`` for K_{t,i} = Constants.local_steps. Then
    Ḡ ≤ 4(f(x_0)−f*)/(S W_2 η_l) + Φ_l σ_l² + Φ_g σ_g² with
    Φ_l = 20η_l²L²Tη̄φ_1/W_2 + 4L²τ²η̂³η_l²Tφ_3/(mW_2) + 2L²W_1²η̄η_lTφ_3/(mW_2)
          + 2η̄η_lTφ_3/(mW_2) [+ 2Lη̂²η_lTφ_3/(mW_2)],  Φ_g = 120η_l²L²Tη̄φ_2/W_2.

    Variants (default ``"corrected"``):

    - ``"corrected"`` includes the bracketed server-step (A_3) term. The proof's final
      bound (App. F) has it, printed without the factor T; it comes from
      (Lη̂²/(W_2η_l)) Σ_t E‖Δ_t‖² (App. F, the merged bound on ½Ḡ) with
      Σ_t E‖Δ_t‖² ≤ (η_l²/m) T φ_3 σ_l² + …, so T belongs there, as Cor G.1 prints it.
    - ``"printed"``: the statement, without that term.

    Conditions: η_l ≤ 1/(8K_max L) and η_l ≤ sqrt(1/(120L²C_η τ K_max²)) (Thm 5.1), with
    K_max the largest logged K_{t,i}; in the corrected variant τ is replaced by τ + 1,
    because step (ii) of the proof's K_max bound (App. F) bounds Σ_t ‖∇f(x_{t−τ_{t,i}})‖² by
    τ Σ_t ‖∇f(x_t)‖² while each x_u can be reused for t = u..u+τ, i.e. τ + 1 times (with
    τ = 0 the printed condition is vacuous; derived here, not in the paper). Proof-only (absent
    from the statement): 2L²τ²η̂²C_η²Sη_l² + (L²W_1²C_η² + Lη̄C_η + C_η)Sη_l ≤ m/n (App. F), and
    C_β ≤ C_η.
    """
    check_variant(variant, _VARIANTS_5_1)
    values, q, m, tau, stats = _autonomous_inputs(constants, schedule, n_sampled, tau, local_steps)
    L, eta_l, n = _M(constants.L), _M(schedule.eta_l), constants.n_clients
    C_eta = _M(q.C_eta)
    proof = (2 * L ** 2 * _M(tau ** 2) * q.eta_hat2 * C_eta ** 2 * q.S * eta_l ** 2
             + (L ** 2 * _M(q.W1) ** 2 * C_eta ** 2 + L * q.eta_bar * C_eta + C_eta) * q.S * eta_l)
    conditions = (
        at_most("eta_l <= 1/(8 K_max L)", eta_l, 1 / (8 * _M(stats.k_max) * L), "Thm 5.1"),
        _delay_condition(q, L, stats.k_max, eta_l, tau, 120, variant == "corrected", "Thm 5.1", "App. F"),
        at_most("2L^2 tau^2 eta_hat2 C_eta^2 S eta_l^2 + (L^2 W1^2 C_eta^2 + L eta_bar C_eta + C_eta) S eta_l <= m/n "
                "(proof only)", proof, _M(m) / n, "proof of Thm 5.1, App. F"),
        _c_beta_condition(q, "proof of Thm 5.1, App. F"),
    )
    return make_bound(formula_5_1(variant), values, SOURCES_5_1[variant], conditions=conditions, variant=variant)


_VARIANTS_G1 = ("corrected", "printed")
SOURCES_G1 = {
    "corrected": Source(PAPER, "Cor 5.4 / G.1", "App. G", "general arrival; delay condition with τ + 1"),
    "printed": Source(PAPER, "Cor 5.4 / G.1", "App. G", "general arrival; conditions as printed"),
}


def corollary_g1(constants: Constants, schedule: StageSchedule, n_sampled: int, tau: int, local_steps=None, *,
                 variant: str = "corrected") -> Bound:
    """Autonomous FedGM, arbitrary arrival (Server momentum Cor 5.4, formal statement Cor G.1 in App. G).

    Inputs as :func:`theorem_5_1`; any rule for who arrives. Ḡ ≤ 4(f(z_0)−f*)/(S W_2 η_l)
    + Φ_l σ_l² + Φ_g σ_g² (Cor G.1's "n_l" is η_l), with
    Φ_l = 30η_l²L²φ_1Tη̄/W_2 + 6L²τ²η̂³η_l²Tφ_3/(mW_2) + 2L²W_1²η̄η_lTφ_3/(mW_2)
          + 2η̄η_lTφ_3/(mW_2) + 2Lη̂²η_lTφ_3/(mW_2),  Φ_g = 6 + 180η_l²L²Tη̄φ_2/W_2.
    The non-vanishing 6σ_g² is the price of arbitrary arrival (Remark 5.3). The formula is
    the same in both variants (the statement and the proof's final bound agree). Conditions:
    η_l ≤ 1/(8K_max L) and η_l ≤ sqrt(1/(180L²C_η τ K_max²)) (Cor G.1; τ + 1 in the
    corrected variant, as in :func:`theorem_5_1`); proof-only (App. G, its undefined
    η̂_0² read as η̂², which the merged bound on ½Ḡ before it gives via η̂³C_β/η_S ≤ η̂²C_η²):
    3L²Sτ²η̂²C_η²η_l² + C_ηS(L²W_1²C_η + 1 + Lη̄)η_l ≤ 1; and C_β ≤ C_η.
    """
    check_variant(variant, _VARIANTS_G1)
    values, q, m, tau, stats = _autonomous_inputs(constants, schedule, n_sampled, tau, local_steps)
    L, eta_l, C_eta = _M(constants.L), _M(schedule.eta_l), _M(q.C_eta)
    proof = (3 * L ** 2 * q.S * _M(tau ** 2) * q.eta_hat2 * C_eta ** 2 * eta_l ** 2
             + C_eta * q.S * (L ** 2 * _M(q.W1) ** 2 * C_eta + 1 + L * q.eta_bar) * eta_l)
    conditions = (
        at_most("eta_l <= 1/(8 K_max L)", eta_l, 1 / (8 * _M(stats.k_max) * L), "Cor G.1"),
        _delay_condition(q, L, stats.k_max, eta_l, tau, 180, variant == "corrected", "Cor G.1", "App. G"),
        at_most("3L^2 S tau^2 eta_hat2 C_eta^2 eta_l^2 + C_eta S (L^2 W1^2 C_eta + 1 + L eta_bar) eta_l <= 1 "
                "(proof only)", proof, 1.0, "proof of Cor G.1, App. G"),
        _c_beta_condition(q, "proof of Cor G.1, App. G"),
    )
    return make_bound(formula_g1(), values, SOURCES_G1[variant], conditions=conditions, variant=variant)
