"""What every algorithm is: a pure state machine over flat tensors.

``init(problem, x0) -> state`` and ``round(state, problem, active, t, generators) -> state``.
``active`` is a sorted long tensor of the ids in S_t (possibly empty), ``t`` the round index
and ``generators(k)`` the torch.Generator of local step / mini-batch k of round t (the engine
derives it from (seed, t, k), so noise never depends on the algorithm). Per-client state is
an (N, d) tensor; a round works on the (m, d) block of the m active clients with one batched
``problem.stochastic_grads`` call per local step. ``round`` never writes into its input state.
"""
from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import Any, Callable

import torch

Generators = Callable[[int], torch.Generator]

__all__ = ["Algorithm", "Generators", "positive_rate", "step_count", "replace_rows", "local_sgd"]


def positive_rate(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def step_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")
    return int(value)


def replace_rows(table: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A copy of ``table`` with ``table[rows] = values`` (out of place)."""
    return table.index_copy(0, rows, values)


def local_sgd(x: torch.Tensor, problem, active: torch.Tensor, eta_l: float, local_steps: int,
              generators: Generators, correction: torch.Tensor | float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """K steps X ← X − η_l (g(X) + correction) for all active clients at once, from X = x.

    Returns the final local models (m, d) and the mean stochastic gradient (1/K) Σ_k g (m, d).
    """
    X = x.expand(active.numel(), -1)
    total = torch.zeros_like(X)
    for k in range(local_steps):
        G = problem.stochastic_grads(X, active, generators(k))
        total = total + G
        X = X - eta_l * (G + correction)
    return X, total / local_steps


@dataclass(frozen=True)
class Algorithm(ABC):
    """Hyper-parameters common to all: ``eta_l`` (local), ``eta_g`` (global), ``local_steps`` K.

    Subclasses set ``name`` and the vectors exchanged per active client per round
    (``down_vectors``, ``up_vectors``), and validate extra hyper-parameters.
    """

    eta_l: float = 0.01
    eta_g: float = 1.0
    local_steps: int = 1

    name = "algorithm"
    down_vectors = 1
    up_vectors = 1

    def __post_init__(self):
        object.__setattr__(self, "eta_l", positive_rate(self.eta_l, "eta_l"))
        object.__setattr__(self, "eta_g", positive_rate(self.eta_g, "eta_g"))
        object.__setattr__(self, "local_steps", step_count(self.local_steps, "local_steps"))

    @property
    def hparams(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @abstractmethod
    def init(self, problem, x0: torch.Tensor):
        """The state before round 0."""

    @abstractmethod
    def round(self, state, problem, active: torch.Tensor, t: int, generators: Generators):
        """The state after round t."""

    def observe(self, before, after, problem, active: torch.Tensor, t: int) -> dict:
        """What round t (from state ``before`` to ``after``) reports for the theorems that need
        more than the iterates: name → number or array (``run(..., observe=True)`` stacks them
        over rounds). None by default."""
        return {}

    def communication(self, dim: int, n_active: int) -> tuple[int, int]:
        """(downlink, uplink) floats of one round with ``n_active`` clients."""
        return self.down_vectors * dim * n_active, self.up_vectors * dim * n_active

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())
        return f"{type(self).__name__}({args})"
