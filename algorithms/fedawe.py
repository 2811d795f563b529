"""FedAWE (Xiang et al., NeurIPS 2024): stale local models and echoed innovations, as the
authors' code runs it.

Each client keeps a stale model w_i (w_i = x^(0) at the start) and e_i, the number of rounds
since it last participated (e_i = 1 at round 0, i.e. a virtual participation in round −1).
In round t each active client runs K local SGD steps from its own w_i with the decayed rate

    η_l(t) = η_l / sqrt(t/10 + 1)                      (``local_decay``; the authors' runs)

giving w_i^(K), and its "echoed" innovation is e_i (w_i^(K) − w_i). The server forms

    u = (1/|S_t|) Σ_{i∈S_t} e_i (w_i^(K) − w_i),   u ← u · min(1, c/‖u‖)   (``clip_norm`` c)
    z = (1/|S_t|) Σ_{i∈S_t} w_i + η_g · u

and sets w_i ← z for i ∈ S_t; then e_i ← 1 for i ∈ S_t and e_i ← e_i + 1 otherwise. The
authors clip the averaged echoed innovation to Euclidean norm c = 0.5 (a constant in their
code; ``clip_norm=None`` disables it). Nothing moves when S_t = ∅ (only the e_i grow).

The model evaluated by the authors' code is the average of ALL clients' stale models,
x = (1/N) Σ_i w_i (``output="average"``, default); ``output="server"`` reports z, the model
last sent to the participants (x^(0) before the first non-empty round).

Reduction: with every client in every round, ``local_decay=False`` and no clipping (or
‖u‖ ≤ c), all w_i = z and e_i = 1, so z ← z − η_g (1/N) Σ_i (z − z_i^(K)): FedAvg.
Communication: z down, w_i^(K) − w_i up (one vector each); the server keeps the N·d stale
models.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .rounds import sum_clients
from .base import Algorithm, Round, local_sgd, positive_rate

__all__ = ["FedAWE", "FedAWEState", "ALGORITHMS"]

OUTPUTS = ("average", "server")


@dataclass(frozen=True, eq=False)
class FedAWEState:
    """Per run (batch axis first): ``x`` the reported model (B, d), ``server`` z (B, d),
    ``stale`` the w_i (B, N, d), ``echo`` the e_i (B, N) long."""

    x: torch.Tensor
    server: torch.Tensor
    stale: torch.Tensor
    echo: torch.Tensor


@dataclass(frozen=True, repr=False)
class FedAWE(Algorithm):
    """FedAWE (see the module docstring): ``clip_norm`` c > 0 or None (default 0.5),
    ``local_decay`` (default True: η_l/sqrt(t/10+1)), ``output`` "average" or "server"."""

    clip_norm: float | None = 0.5
    local_decay: bool = True
    output: str = "average"

    name = "fedawe"

    def __post_init__(self):
        super().__post_init__()
        if self.clip_norm is not None:
            object.__setattr__(self, "clip_norm", positive_rate(self.clip_norm, "clip_norm"))
        if not isinstance(self.local_decay, bool):
            raise ValueError(f"local_decay must be True or False, got {self.local_decay!r}")
        if self.output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {self.output!r}")

    def init(self, problem, x0: torch.Tensor) -> FedAWEState:
        b, n = x0.shape[0], problem.n_clients
        return FedAWEState(x=x0, server=x0, stale=x0[:, None, :].expand(-1, n, -1).clone(),
                           echo=torch.ones((b, n), dtype=torch.long, device=x0.device))

    def local_rate(self, eta_l: torch.Tensor, t: int) -> torch.Tensor:
        """η_l(t) of round t from the round's rates ``eta_l`` (per run): η_l/sqrt(t/10 + 1)."""
        return eta_l / math.sqrt(t / 10 + 1) if self.local_decay else eta_l

    def round(self, state: FedAWEState, problem, r: Round) -> FedAWEState:
        echo = state.echo + 1
        if not r.m:
            return FedAWEState(x=state.x, server=state.server, stale=state.stale, echo=echo)
        count = r.count[:, None]
        W = r.take(state.stale)
        Wk, _ = local_sgd(W, problem, r, r.rows(self.local_rate(r.eta_l, r.t)), self.local_steps)
        u = r.sum((Wk - W) * r.take(state.echo).to(W.dtype).unsqueeze(1)) / count
        if self.clip_norm is not None:
            u = u * torch.clamp(self.clip_norm / torch.linalg.vector_norm(u, dim=1, keepdim=True), max=1.0)
        z = r.where_active(r.sum(W) / count + r.eta_g * u, state.server)
        stale = r.put(state.stale, r.rows(z))
        x = sum_clients(stale) / problem.n_clients if self.output == "average" else z
        return FedAWEState(x=r.where_active(x, state.x), server=z, stale=stale,
                           echo=torch.where(r.mask, torch.ones_like(echo), echo))


ALGORITHMS = (FedAWE,)
