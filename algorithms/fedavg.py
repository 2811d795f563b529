"""FedAvg on the active clients (McMahan et al., AISTATS 2017; a baseline of FedSUM §5).

Each active client takes K local SGD steps x_i^(k+1) = x_i^(k) − η_l g_i(x_i^(k)) from
x_i^(0) = x, and sends Δ_i = x − x_i^(K). The server steps

    x ← x − η_g · (1/|S_t|) Σ_{i∈S_t} Δ_i     (``aggregate="active"``, default; no step if S_t = ∅)
    x ← x − η_g · (1/N)     Σ_{i∈S_t} Δ_i     (``aggregate="all"``)

With K = 1 and full participation: gradient descent with step η_g η_l.
Communication: x down, Δ_i up (one vector each).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Algorithm, Round, local_sgd

__all__ = ["FedAvg", "FedAvgState"]

AGGREGATES = ("active", "all")


@dataclass(frozen=True, eq=False)
class FedAvgState:
    """``x``: the global models (B, d) after the last round."""

    x: torch.Tensor


@dataclass(frozen=True, repr=False)
class FedAvg(Algorithm):
    """FedAvg (McMahan et al., 2017): ``aggregate`` is "active" (1/|S_t|) or "all" (1/N)."""

    aggregate: str = "active"

    name = "fedavg"

    def __post_init__(self):
        super().__post_init__()
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {self.aggregate!r}")

    def init(self, problem, x0: torch.Tensor) -> FedAvgState:
        return FedAvgState(x=x0)

    def round(self, state: FedAvgState, problem, r: Round) -> FedAvgState:
        if not r.m:
            return state
        start = r.rows(state.x)
        X, _ = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps)
        weight = 1 / r.count[:, None] if self.aggregate == "active" else 1 / problem.n_clients
        x = state.x - r.eta_g * weight * r.sum(start - X)
        return FedAvgState(x=r.where_active(x, state.x))
