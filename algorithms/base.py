"""What every algorithm is: a pure state machine over flat tensors, batched over runs.

``init(problem, x0) -> state`` with x0 of shape (B, d) for a batch of B runs, and
``round(state, problem, r) -> state`` with ``r`` the :class:`~algorithms.rounds.Round` of round
t: the active rows (run, client) of all runs, each run's step sizes ``r.eta_l``, ``r.eta_g``
(B, 1) and ``r.draws(k)``, the noise of local step / mini-batch k (keyed by (seed, t, k,
client), so noise never depends on the algorithm or on the batch). Every tensor field of a
state has the batch axis first: the model (B, d), a per-client table (B, N, d). A round works
on the (M, d) block of the active rows with one batched ``problem.stochastic_grads`` call per
local step, and never writes into its input state.

In a batch the runs share every hyper-parameter but the step sizes, so ``round`` reads the
step sizes from ``r`` only; the engine hands it the algorithm with NaN in ``eta_l`` and
``eta_g``, so that a step size read from ``self`` shows at once as a NaN run.
"""
from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import Any

import torch

from .rounds import Round
from participation.validation import finite_real, integer

__all__ = ["Algorithm", "Round", "positive_rate", "step_count", "local_sgd", "template"]


def positive_rate(value, name: str) -> float:
    return finite_real(value, name, above=0)


def step_count(value, name: str) -> int:
    return integer(value, name)


def local_sgd(x: torch.Tensor, problem, r: Round, eta_l: torch.Tensor, local_steps: int,
              correction: torch.Tensor | float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """K steps X ← X − η_l (g(X) + correction) for all active rows at once, from X = x (M, d).

    ``eta_l``: (M, 1) per-row step sizes (e.g. ``r.rows(r.eta_l)``). Returns the final local
    models (M, d) and the mean stochastic gradient (1/K) Σ_k g (M, d).
    """
    X, total = x, None
    corrected = not (isinstance(correction, float) and correction == 0.0)
    for k in range(local_steps):
        G = problem.stochastic_grads(X, r.client, r.draws(k))
        total = G if total is None else total + G
        X = X - eta_l * (G + correction if corrected else G)
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
        """The state before round 0 of B runs starting at the rows of ``x0`` (B, d)."""

    @abstractmethod
    def round(self, state, problem, r: Round):
        """The state after round ``r.t``."""

    def observe(self, before, after, problem, r: Round) -> dict:
        """What round ``r.t`` (from state ``before`` to ``after``) reports for the theorems that
        need more than the iterates: name → a (B, ...) tensor, or a list of B per-run arrays when
        their shapes differ (``run(..., observe=True)`` stacks them over rounds). None by default."""
        return {}

    @property
    def noise_steps(self) -> int:
        """How many steps k = 0, 1, … of noise a round draws at most (the engine computes them
        ahead); the local steps K unless the algorithm takes more."""
        return self.local_steps

    def communication(self, dim: int, n_active: int) -> tuple[int, int]:
        """(downlink, uplink) floats of one round with ``n_active`` clients."""
        return self.down_vectors * dim * n_active, self.up_vectors * dim * n_active

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())
        return f"{type(self).__name__}({args})"


def template(algorithm: Algorithm) -> Algorithm:
    """A copy of ``algorithm`` with NaN step sizes: what the engine's rounds receive, so that a
    step size read from the algorithm instead of the round poisons the run."""
    copy = dataclasses.replace(algorithm)
    object.__setattr__(copy, "eta_l", math.nan)
    object.__setattr__(copy, "eta_g", math.nan)
    return copy

