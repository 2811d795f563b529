"""Server momentum: FedGM and its presets.

J. Sun, X. Wu, H. Huang, A. Zhang, "On the Role of Server Momentum in Federated Learning",
AAAI 2024, arXiv:2312.12670 ("Server momentum" below).

Clients run LocalOPT (Algorithm 2): K local SGD steps
x_i ← x_i − η_l g_i from x_i = x_t, and send Δ_t^i = x_t − x_{t,K}^i. The server averages
Δ_t = (1/|S_t|) Σ_{i∈S_t} Δ_t^i (Algorithm 1, FedOPT) and applies its ServerOPT.

FedGM's ServerOPT (eq. (2), Sec. 3), a DAMPENED (exponential-average) buffer, d_0 = 0:

    d_{t+1} = β d_t + (1 − β) Δ_t
    h_{t+1} = (1 − ν) Δ_t + ν d_{t+1}
    x_{t+1} = x_t − η h_{t+1}

η = ``eta_g`` (server learning rate), β = ``beta`` (momentum factor), ν = ``nu`` (instant
discount factor) (Sec. 3). Multistage FedGM (Algorithm 3, Sec. 4.1) runs stage s
with (η_s, β_s, ν_s) for T_s rounds and never resets d; pass a
``bounds.momentum.StageSchedule`` as ``schedule`` (constraint (3), Sec. 4.2, is
validated by the schedule itself).

Presets and their (β, ν) (Sec. 3, after eq. (2)). ``fedavgm`` and ``fednag`` use the UNDAMPENED
buffer of Hsu, Qi & Brown (arXiv 2019) and of PyTorch, v_{t+1} = β v_t + Δ_t, with server
rate η'; substituting d = (1 − β) v shows they are FedGM with η = η'/(1 − β):

    name      update                                   as FedGM (η, β, ν)
    fedgm     the box above                            (η, β, ν)
    qhm       the box above, Ma & Yarats' defaults     (η, β, ν), β = 0.999, ν = 0.7
    fedavgm   x ← x − η' v_{t+1}            (heavy ball)  (η'/(1−β), β, 1)
    fednag    x ← x − η'(Δ_t + β v_{t+1})   (Nesterov)    (η'/(1−β), β, β)

ν = 0 is FedAvg with server step η (the paper's "FedSGD", Sec. 3); β = 0 removes the
momentum (h = Δ_t). The paper's own FedNAG, x ← x − η[(1−β)Δ_t + β d_{t+1}] (Sec. 3), is
``fedgm`` with ν = β, i.e. ``fednag`` at η' = η(1 − β).

Rounds with S_t = ∅ change nothing (no server step, d kept). Communication: x down, Δ_i up.

Batched over runs (``algorithms.rounds``): every state field carries the batch axis first and
the runs share β, ν and the schedule; η_l and η come from the round (``r.eta_l``, ``r.eta_g``,
(B, 1)). A schedule's stage rates are taken relative to the run's η (see ``FedGM``).
"""
from __future__ import annotations

import math
import numbers
from abc import abstractmethod
from bisect import bisect_right
from dataclasses import dataclass

import torch

from .base import Algorithm, Round, local_sgd

__all__ = ["FedGM", "FedQHM", "FedAvgM", "FedNAG", "MomentumState", "ALGORITHMS", "unit_interval"]


def unit_interval(value, name: str, *, closed: bool) -> float:
    """A float in [0, 1] (``closed``) or [0, 1); anything else is a ValueError naming it."""
    ok = (not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
          and 0 <= value and (value <= 1 if closed else value < 1))
    if not ok:
        raise ValueError(f"{name} must lie in [0, {'1]' if closed else '1)'}, got {value!r}")
    return float(value)


@dataclass(frozen=True, eq=False)
class MomentumState:
    """Per run (batch axis first): ``x`` = x_{t+1} (B, d), ``d`` the server buffer after round t
    (B, d; d for FedGM/QHM, v for FedAvgM/FedNAG), ``delta`` = Δ_t (B, d), the averaged update
    of the run's last round with a server step (zeros before the first)."""

    x: torch.Tensor
    d: torch.Tensor
    delta: torch.Tensor


class _ServerMomentum(Algorithm):
    """LocalOPT on the active rows of every run, then ``_step``; subclasses give the server step."""

    def init(self, problem, x0: torch.Tensor) -> MomentumState:
        zeros = x0.new_zeros(x0.shape)
        return MomentumState(x=x0, d=zeros, delta=zeros)

    def round(self, state: MomentumState, problem, r: Round) -> MomentumState:
        """Δ_t = (1/|S_t|) Σ_{i∈S_t} (x_t − x^i_{t,K}) per run (Algorithm 1), then the server step;
        runs with S_t = ∅ keep their state."""
        if not r.m:
            return state
        start = r.rows(state.x)
        X, _ = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps)
        delta = r.mean(start - X)
        x, d = self._step(state.x, state.d, delta, r)
        return MomentumState(x=r.where_active(x, state.x), d=r.where_active(d, state.d),
                             delta=r.where_active(delta, state.delta))

    @abstractmethod
    def _step(self, x: torch.Tensor, d: torch.Tensor, delta: torch.Tensor, r: Round):
        """(x_{t+1}, buffer after round t) from x_t, the buffer and Δ_t, all (B, d)."""


@dataclass(frozen=True, repr=False)
class FedGM(_ServerMomentum):
    """FedGM / Multistage FedGM (see the module docstring; eq. (2), Algorithm 3).

    ``eta_g`` η, ``beta`` β ∈ [0, 1), ``nu`` ν ∈ [0, 1] (defaults 1.0, 0.9, 0.7: values of
    the paper's grids, Table 1 in App. H.1); ``schedule`` an optional ``bounds.momentum.StageSchedule``
    whose stage triple (η_s, β_s, ν_s) is used in the rounds of stage s; it also fixes η_l.
    With a schedule, leave eta_l/eta_g/beta/nu out (they are read from it: η_l and the first
    stage's triple) or give equal values; running past its Σ T_s rounds is a ValueError.

    In a round the stage's server rate is taken relative to the run's η = ``r.eta_g``:
    η_t = (η / η_1) · η_s. A schedule fixes η = η_1 (the conflict check above), so η_t = η_s
    exactly (η_1/η_1 = 1); β_s, ν_s are shared by the runs of a batch (they share the
    schedule). The local steps use the round's η_l (``r.eta_l``: the schedule's η_l, times the
    factor of a ``local_schedule`` if one is given).
    """

    eta_l: float | None = None
    eta_g: float | None = None
    beta: float | None = None
    nu: float | None = None
    schedule: object | None = None

    name = "fedgm"
    default_beta = 0.9
    default_nu = 0.7

    def __post_init__(self):
        values = {"eta_l": 0.01, "eta_g": 1.0, "beta": self.default_beta, "nu": self.default_nu}
        if self.schedule is not None:
            from bounds.momentum import StageSchedule   # lazy: keeps sympy out of the engine's import
            if not isinstance(self.schedule, StageSchedule):
                raise ValueError(f"schedule must be a bounds.momentum.StageSchedule, got {self.schedule!r}")
            s = self.schedule
            values = {"eta_l": s.eta_l, "eta_g": s.eta_g[0], "beta": s.beta[0], "nu": s.nu[0]}
            for key, value in values.items():
                given = getattr(self, key)
                if given is not None and given != value:
                    raise ValueError(f"{key}={given!r} conflicts with the schedule's {key}={value!r}; leave it out")
        for key, value in values.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        super().__post_init__()
        object.__setattr__(self, "beta", unit_interval(self.beta, "beta", closed=False))
        object.__setattr__(self, "nu", unit_interval(self.nu, "nu", closed=True))

    def hyper(self, t: int) -> tuple[float, float, float]:
        """(η_t, β_t, ν_t): the triple of the stage that holds round t (Algorithm 3), at the
        algorithm's own η."""
        s = self.schedule
        if s is None:
            return self.eta_g, self.beta, self.nu
        stage = self._stage(t)
        return s.eta_g[stage], s.beta[stage], s.nu[stage]

    def _stage(self, t: int) -> int:
        s = self.schedule
        if not 0 <= t < s.total_rounds:
            raise ValueError(f"round t={t} lies outside the schedule's rounds 0..{s.total_rounds - 1}")
        return bisect_right(s.boundaries, t) - 1

    def _rates(self, r: Round) -> tuple[torch.Tensor, float, float]:
        """(η_t (B, 1), β_t, ν_t) of round r.t: η_t = r.eta_g without a schedule, else
        (r.eta_g / η_1) · η_s with the stage's β_s, ν_s."""
        s = self.schedule
        if s is None:
            return r.eta_g, self.beta, self.nu
        stage = self._stage(r.t)
        return (r.eta_g / s.eta_g[0]) * s.eta_g[stage], s.beta[stage], s.nu[stage]

    def _step(self, x: torch.Tensor, d: torch.Tensor, delta: torch.Tensor, r: Round):
        """d ← βd + (1−β)Δ; h = (1−ν)Δ + νd; x ← x − ηh (eq. (2); Algorithm 3's server step)."""
        eta, beta, nu = self._rates(r)
        d = beta * d + (1 - beta) * delta
        h = (1 - nu) * delta + nu * d
        return x - eta * h, d


@dataclass(frozen=True, repr=False)
class FedQHM(FedGM):
    """QHM (Ma & Yarats, ICLR 2019) on the server: FedGM itself (Sec. 3) with QHM's
    recommended defaults β = 0.999, ν = 0.7."""

    name = "qhm"
    default_beta = 0.999
    default_nu = 0.7


class _Classical(_ServerMomentum):
    """Undampened server momentum v ← βv + Δ with server rate η' = ``eta_g`` (default 1.0)
    and ``beta`` β ∈ [0, 1) (default 0.9); constant rates."""

    nesterov = False

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "beta", unit_interval(self.beta, "beta", closed=False))

    def _step(self, x: torch.Tensor, v: torch.Tensor, delta: torch.Tensor, r: Round):
        """v ← βv + Δ; x ← x − η'v (heavy ball) or x − η'(Δ + βv) (Nesterov), η' = r.eta_g."""
        v = self.beta * v + delta
        step = delta + self.beta * v if self.nesterov else v
        return x - r.eta_g * step, v


@dataclass(frozen=True, repr=False)
class FedAvgM(_Classical):
    """FedAvgM, server heavy ball (Hsu, Qi & Brown, arXiv 2019): v ← βv + Δ_t, x ← x − η'v.
    Equals FedGM(η = η'/(1−β), β, ν = 1) (Server momentum Sec. 3: ν = 1 is FedAvgM)."""

    beta: float = 0.9

    name = "fedavgm"


@dataclass(frozen=True, repr=False)
class FedNAG(_Classical):
    """Server Nesterov momentum in the PyTorch form (Sutskever et al., ICML 2013):
    v ← βv + Δ_t, x ← x − η'(Δ_t + βv). Equals FedGM(η = η'/(1−β), β, ν = β), the paper's
    FedNAG (Sec. 3)."""

    beta: float = 0.9

    name = "fednag"
    nesterov = True


ALGORITHMS = (FedGM, FedQHM, FedAvgM, FedNAG)
