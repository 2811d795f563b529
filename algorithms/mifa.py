"""MIFA: Memory-augmented Impatient Federated Averaging (Gu et al., NeurIPS 2021).

The server keeps G_i, the latest update of every client. Each active client runs K local SGD
steps from x and sends Δ_i = x − x_i^(K); the server overwrites G_i ← Δ_i for i ∈ S_t and steps

    x ← x − η_g · (1/N) Σ_{i=1}^N G_i

every round, also when S_t is empty (the stale table still moves x). ``start`` chooses the
beginning:

- ``"wait"`` (default; the authors' code): no server step until every client has appeared
  once. Until then x stays at x^(0), so the table is filled with updates computed at x^(0);
  the first step is taken in the round in which the last client appears. (The authors' code
  instead, in that round, re-trains *every* client at x^(0) to fill the table and steps from
  the next round on; both leave the table holding one update at x^(0) per client, and ours
  does not ask absent clients to compute.)
- ``"zeros"`` (FedAU's re-implementation, Wang & Ji, ICLR 2024): G_i = 0 at the start and the
  server steps from round 0 on.

The authors store G_i as Δ_i/η_l and multiply by the current rate; with the constant rates
used here that is the same step. Under full participation both variants are FedAvg.
Communication: x down, Δ_i up (one vector each). The table costs N·d floats of server memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .rounds import sum_clients
from .base import Algorithm, Round, local_sgd

__all__ = ["MIFA", "MIFAState", "ALGORITHMS"]

STARTS = ("wait", "zeros")


@dataclass(frozen=True, eq=False)
class MIFAState:
    """Per run (batch axis first): ``x`` global model (B, d), ``table`` the G_i (B, N, d),
    ``seen`` (B, N) bool: has client i appeared, ``ready`` (B,) bool: the server steps (always
    for "zeros"; once every client has appeared for "wait")."""

    x: torch.Tensor
    table: torch.Tensor
    seen: torch.Tensor
    ready: torch.Tensor


@dataclass(frozen=True, repr=False)
class MIFA(Algorithm):
    """MIFA (see the module docstring); ``start`` is "wait" (authors' code) or "zeros" (FedAU's)."""

    start: str = "wait"

    name = "mifa"

    def __post_init__(self):
        super().__post_init__()
        if self.start not in STARTS:
            raise ValueError(f"start must be one of {STARTS}, got {self.start!r}")

    def init(self, problem, x0: torch.Tensor) -> MIFAState:
        b, n = x0.shape[0], problem.n_clients
        return MIFAState(x=x0, table=x0.new_zeros((b, n, problem.dim)),
                         seen=torch.zeros((b, n), dtype=torch.bool, device=x0.device),
                         ready=torch.full((b,), self.start == "zeros", dtype=torch.bool, device=x0.device))

    def round(self, state: MIFAState, problem, r: Round) -> MIFAState:
        table, seen = state.table, state.seen
        if r.m:
            start = r.rows(state.x)
            X, _ = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps)
            table = r.put(table, start - X)
            seen = seen | r.mask
        ready = state.ready | seen.all(dim=1)
        x = state.x - r.eta_g * (1 / problem.n_clients) * sum_clients(table)
        return MIFAState(x=torch.where(ready[:, None], x, state.x), table=table, seen=seen, ready=ready)


ALGORITHMS = (MIFA,)
