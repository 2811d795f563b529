"""SCAFFOLD with option II control variates (Karimireddy et al., ICML 2020; a baseline of
FedSUM §5).

State: global x, server control c, client controls c_i (all zero at the start). Each active
client runs K steps from y = x:

    y ← y − η_l (g_i(y) − c_i + c)
    c_i⁺ = c_i − c + (x − y)/(K η_l)          (option II)

and sends Δy_i = y − x and Δc_i = c_i⁺ − c_i (Δc_i is taken before c_i is overwritten).
The server steps x ← x + η_g (1/|S|) Σ Δy_i and c ← c + (1/N) Σ Δc_i (nothing if S = ∅), which
keeps c = (1/N) Σ_i c_i. Option II reduces to c_i⁺ = (1/K) Σ_k g_i(y_k) exactly; that closed
form is used (it is exact in float32 too). With zero controls a round is a FedAvg round; with
K = 1 and full participation SCAFFOLD is gradient descent with step η_g η_l.
Communication: x and c down, Δy_i and Δc_i up (two vectors each way).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Algorithm, Round, local_sgd

__all__ = ["Scaffold", "ScaffoldState"]


@dataclass(frozen=True, eq=False)
class ScaffoldState:
    """Per run (batch axis first): ``x`` global model (B, d), ``c`` server control (B, d),
    ``c_clients`` client controls (B, N, d)."""

    x: torch.Tensor
    c: torch.Tensor
    c_clients: torch.Tensor


@dataclass(frozen=True, repr=False)
class Scaffold(Algorithm):
    """SCAFFOLD, option II (see the module docstring)."""

    name = "scaffold"
    down_vectors = 2
    up_vectors = 2

    def init(self, problem, x0: torch.Tensor) -> ScaffoldState:
        b, n, d = x0.shape[0], problem.n_clients, problem.dim
        return ScaffoldState(x=x0, c=x0.new_zeros((b, d)), c_clients=x0.new_zeros((b, n, d)))

    def round(self, state: ScaffoldState, problem, r: Round) -> ScaffoldState:
        if not r.m:
            return state
        start, c_old = r.rows(state.x), r.take(state.c_clients)
        Y, mean_grad = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps,
                                 correction=r.rows(state.c) - c_old)
        c_new = mean_grad                                     # = c_i − c + (x − y)/(K η_l)
        x = state.x + r.eta_g * (r.sum(Y - start) / r.count[:, None])
        c = state.c + r.sum(c_new - c_old) / problem.n_clients
        return ScaffoldState(x=r.where_active(x, state.x), c=r.where_active(c, state.c),
                             c_clients=r.put(state.c_clients, c_new))
