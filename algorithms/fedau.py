"""FedAU: FedAvg with online-estimated aggregation weights (Wang & Ji, ICLR 2024).

Each active client runs K local SGD steps from x and sends Δ_i = x − x_i^(K); the server steps

    x ← x − η_g · (1/N) Σ_{i∈S_t} ω_i Δ_i           (1/N even when few clients are active)

where ω_i ≈ 1/p_i is the mean of client i's observed participation intervals, with a cutoff
K_c (``cutoff``, default 50 as in the authors' runs and in FedSUM's experiments,
App. H.2). The interval estimator follows the authors' public code:
a counter S_i starts at 0 and, in every round, S_i ← S_i + 1; when i participates, or when S_i reaches K_c, S_i is
recorded as one interval and reset to 0. So the first interval counts from a virtual
participation in round −1, and an absence of g − 1 = q·K_c + r rounds (0 ≤ r < K_c) between
two participations is recorded as q intervals of length K_c followed by one of r + 1. The
weight used in round t is the mean of the intervals recorded before round t, and ω_i = 1
while none is recorded.

``known_probabilities`` = (p_1, …, p_N) replaces the estimate by ω_i = 1/p_i (the
known-probability weighting the FedAU paper compares against). With every client in every
round all ω_i = 1 and FedAU is FedAvg. Communication: x down, Δ_i up (one vector each).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .base import Algorithm, Round, local_sgd, step_count

__all__ = ["FedAU", "FedAUState", "ALGORITHMS"]


@dataclass(frozen=True, eq=False)
class FedAUState:
    """Per run (batch axis first): ``x`` global model (B, d); per client (B, N): ``count`` S_i,
    ``total`` sum and ``recorded`` number of recorded intervals (long)."""

    x: torch.Tensor
    count: torch.Tensor
    total: torch.Tensor
    recorded: torch.Tensor


def _probabilities(value) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        p = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"known_probabilities must be a vector of numbers in (0, 1], got {value!r}") from None
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise ValueError(f"known_probabilities must be a non-empty vector of numbers in (0, 1], got {value!r}")
    return tuple(float(v) for v in p)


@dataclass(frozen=True, repr=False)
class FedAU(Algorithm):
    """FedAU (see the module docstring): ``cutoff`` K_c ≥ 1, ``known_probabilities`` None or (N,)."""

    cutoff: int = 50
    known_probabilities: tuple[float, ...] | None = None

    name = "fedau"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "cutoff", step_count(self.cutoff, "cutoff"))
        object.__setattr__(self, "known_probabilities", _probabilities(self.known_probabilities))

    def init(self, problem, x0: torch.Tensor) -> FedAUState:
        n = problem.n_clients
        if self.known_probabilities is not None and len(self.known_probabilities) != n:
            raise ValueError(f"known_probabilities has {len(self.known_probabilities)} entries "
                             f"but the problem has {n} clients")
        zeros = torch.zeros((x0.shape[0], n), dtype=torch.long, device=x0.device)
        return FedAUState(x=x0, count=zeros, total=zeros, recorded=zeros)

    def weights(self, state: FedAUState) -> torch.Tensor:
        """ω_i of every client for the next round, (B, N) (or (N,) for one run's state), in the
        model's dtype."""
        dtype = state.x.dtype
        if self.known_probabilities is not None:
            p = torch.tensor(self.known_probabilities, dtype=dtype, device=state.x.device)
            return (1 / p).expand(state.count.shape)
        mean = state.total.to(dtype) / state.recorded.clamp(min=1).to(dtype)
        return torch.where(state.recorded > 0, mean, torch.ones_like(mean))

    def round(self, state: FedAUState, problem, r: Round) -> FedAUState:
        x = state.x
        if r.m:
            omega = r.take(self.weights(state)).unsqueeze(1)
            start = r.rows(x)
            X, _ = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps)
            x = r.where_active(x - r.eta_g * (1 / problem.n_clients) * r.sum(omega * (start - X)), x)
        count = state.count + 1
        record = r.mask | (count >= self.cutoff)
        zero = torch.zeros_like(count)
        return FedAUState(x=x, count=torch.where(record, zero, count),
                          total=state.total + torch.where(record, count, zero),
                          recorded=state.recorded + record.long())


ALGORITHMS = (FedAU,)
