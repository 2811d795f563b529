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

from .base import Algorithm, Generators, local_sgd, replace_rows

__all__ = ["FedVARP", "FedVARPState", "ALGORITHMS"]


@dataclass(frozen=True, eq=False)
class FedVARPState:
    """``x`` global model, ``memory`` the y_i (N, d)."""

    x: torch.Tensor
    memory: torch.Tensor


@dataclass(frozen=True, repr=False)
class FedVARP(Algorithm):
    """FedVARP (see the module docstring); no extra hyper-parameters."""

    name = "fedvarp"

    def init(self, problem, x0: torch.Tensor) -> FedVARPState:
        return FedVARPState(x=x0, memory=x0.new_zeros((problem.n_clients, problem.dim)))

    def round(self, state: FedVARPState, problem, active, t: int, generators: Generators) -> FedVARPState:
        m = active.numel()
        if not m:
            return state
        X, _ = local_sgd(state.x, problem, active, self.eta_l, self.local_steps, generators)
        delta = state.x - X
        v = state.memory.mean(dim=0) + (delta - state.memory[active]).sum(dim=0) / m
        return FedVARPState(x=state.x - self.eta_g * v, memory=replace_rows(state.memory, active, delta))


ALGORITHMS = (FedVARP,)
