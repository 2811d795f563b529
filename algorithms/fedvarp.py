"""FedVARP (Jhunjhunwala, Sharma, Nagarkatti & Joshi, UAI 2022), as re-implemented by Wang &
Ji (FedAU, ICLR 2024).

SAGA-style server memory y_i (all 0 at the start), ȳ = (1/N) Σ_i y_i. Each active client runs
K local SGD steps from x and sends Δ_i = x − x_i^(K); the server forms

    v = ȳ + (1/|S_t|) Σ_{i∈S_t} (Δ_i − y_i),      then  y_i ← Δ_i (i ∈ S_t),  x ← x − η_g v,

with ȳ and y_i taken before the overwrite. The paper leaves the empty round open; as in the
FedAU re-implementation the server does not step when S_t = ∅ (and the memory is unchanged).
Under full participation v = (1/N) Σ_i Δ_i: FedAvg.
Communication: x down, Δ_i up (one vector each). The memory costs N·d floats at the server.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .rounds import sum_clients
from .base import Algorithm, Round, local_sgd

__all__ = ["FedVARP", "FedVARPState", "ALGORITHMS"]


@dataclass(frozen=True, eq=False)
class FedVARPState:
    """Per run (batch axis first): ``x`` global model (B, d), ``memory`` the y_i (B, N, d)."""

    x: torch.Tensor
    memory: torch.Tensor


@dataclass(frozen=True, repr=False)
class FedVARP(Algorithm):
    """FedVARP (see the module docstring); no extra hyper-parameters."""

    name = "fedvarp"

    def init(self, problem, x0: torch.Tensor) -> FedVARPState:
        return FedVARPState(x=x0, memory=x0.new_zeros((x0.shape[0], problem.n_clients, problem.dim)))

    def round(self, state: FedVARPState, problem, r: Round) -> FedVARPState:
        if not r.m:
            return state
        start = r.rows(state.x)
        X, _ = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps)
        delta = start - X
        v = sum_clients(state.memory) / problem.n_clients + r.sum(delta - r.take(state.memory)) / r.count[:, None]
        x = state.x - r.eta_g * v
        return FedVARPState(x=r.where_active(x, state.x), memory=r.put(state.memory, delta))


ALGORITHMS = (FedVARP,)
