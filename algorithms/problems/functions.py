"""A user's model as a federated problem, from per-client callables.

For a model trained in other code (a PyTorch loop, Flower), ``FunctionProblem`` wraps its
per-client loss f_i(x) (and, optionally, exact and stochastic gradients) over a flat parameter
vector, so that ``verify.estimate_constants`` estimates L, σ², f*, Δ_f and F_0 for it as for the
built-in problems (each labelled an estimate). The clients are evaluated one after the other:
this adapter is for estimating constants and for small runs, not for fast training (for that,
write a ``FederatedProblem`` whose methods take all clients at once).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from .base import FederatedProblem, ProblemConstants
from participation.validation import integer

__all__ = ["FunctionProblem"]


class FunctionProblem(FederatedProblem):
    """``FunctionProblem(n_clients, x0, loss, grad=None, stochastic_grad=None, *, convex=False,
    loss_lower_bound=-inf)``.

    ``loss(i, x)``: f_i(x) for client i at a flat float64 tensor x of shape (d,), a 0-d tensor
    or a number; ``grad(i, x)``: ∇f_i(x), shape (d,) (default: autograd through ``loss``, which
    must then be written in torch); ``stochastic_grad(i, x, generator)``: one stochastic gradient
    drawn with the torch ``generator``, a CPU ``torch.Generator`` seeded from the run's noise at
    (round, step, client) (default: the exact gradient, σ² = 0). ``x0`` is the start
    at which Δ_f and F_0 are taken. ``convex`` and ``loss_lower_bound`` say what is known of f
    (``estimate_constants`` treats f* accordingly)."""

    def __init__(self, n_clients: int, x0, loss: Callable, grad: Callable | None = None,
                 stochastic_grad: Callable | None = None, *, convex: bool = False,
                 loss_lower_bound: float = -math.inf):
        integer(n_clients, "n_clients")
        for name, fn in (("loss", loss), ("grad", grad), ("stochastic_grad", stochastic_grad)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{name} must be a callable, got {fn!r}")
        start = torch.as_tensor(np.asarray(x0, dtype=np.float64)).flatten()
        if start.numel() == 0 or not torch.isfinite(start).all():
            raise ValueError("x0 must be a non-empty finite vector")
        self.n_clients, self.dim = int(n_clients), int(start.numel())
        self._loss, self._grad, self._stochastic = loss, grad, stochastic_grad
        self.convex, self.loss_lower_bound = bool(convex), float(loss_lower_bound)
        self.dtype, self.device = torch.float64, torch.device("cpu")
        self._x0 = start

    @property
    def x0(self) -> torch.Tensor:
        return self._x0

    def _value(self, i: int, x: torch.Tensor) -> torch.Tensor:
        value = self._loss(i, x)
        value = value if isinstance(value, torch.Tensor) else torch.as_tensor(float(value), dtype=torch.float64)
        if value.numel() != 1:
            raise ValueError(f"loss({i}, x) must be a number, got shape {tuple(value.shape)}")
        return value.reshape(())

    def _vector(self, value, what: str) -> torch.Tensor:
        v = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value, dtype=np.float64))
        v = v.to(torch.float64).flatten()
        if v.numel() != self.dim:
            raise ValueError(f"{what} must have {self.dim} entries, got {v.numel()}")
        return v

    def client_grad(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """∇f_i(x)."""
        if self._grad is not None:
            return self._vector(self._grad(i, x), f"grad({i}, x)")
        with torch.enable_grad():
            y = x.detach().clone().requires_grad_(True)
            (g,) = torch.autograd.grad(self._value(i, y), y)
        return g.detach()

    def client_losses(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([self._value(i, x).to(torch.float64) for i in range(self.n_clients)])

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        return self.client_losses(x).mean()

    def client_grads(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.client_grad(i, x) for i in range(self.n_clients)])

    def grads_at(self, X: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        rows = [self.client_grad(int(i), X[j]) for j, i in enumerate(clients.tolist())]
        return torch.stack(rows) if rows else X.new_zeros((0, self.dim))

    def stochastic_grads(self, X: torch.Tensor, clients: torch.Tensor, draws) -> torch.Tensor:
        """Row j: ``stochastic_grad(clients[j], X[j], generator)`` with the generator seeded by
        ⌊u_j·2^53⌋, u_j the uniform of ``draws`` for row j, so the user's draw for a client
        depends on (seed, round, step, client) alone; the exact gradients without a
        ``stochastic_grad``."""
        if self._stochastic is None:
            return self.grads_at(X, clients)
        if not callable(getattr(draws, "uniform", None)):
            raise ValueError(f"draws must be an algorithms.noise.Draws, got {type(draws).__name__}")
        seeds = (draws.uniform(1, torch.float64)[:, 0] * 2.0**53).long().tolist()
        if len(seeds) != clients.shape[0]:
            raise ValueError(f"draws has {len(seeds)} rows but clients has {clients.shape[0]}")
        rows = [self._vector(self._stochastic(int(i), X[j], torch.Generator().manual_seed(seed)),
                             f"stochastic_grad({int(i)}, x, generator)")
                for j, (i, seed) in enumerate(zip(clients.tolist(), seeds))]
        return torch.stack(rows) if rows else X.new_zeros((0, self.dim))

    def noise_draws(self) -> tuple[str, int] | None:
        """One uniform per row (the seed of the user's generator) when there is a ``stochastic_grad``."""
        return None if self._stochastic is None else ("uniform", 1)

    def constants(self) -> ProblemConstants:
        """Nothing is known exactly: every constant is left to ``verify.estimate_constants``."""
        nan = math.nan
        return ProblemConstants(L=nan, sigma2=nan, f_star=nan, delta_f=nan, F0=nan, exact=frozenset(),
                                notes={"all": "a user's model: estimate with verify.estimate_constants"})

    def to(self, device=None, dtype=None) -> "FunctionProblem":
        if (device is not None and torch.device(device).type != "cpu") or (dtype not in (None, torch.float64)):
            raise ValueError("FunctionProblem evaluates the user's callables in float64 on the CPU")
        return self

    def __repr__(self) -> str:
        return f"FunctionProblem(n_clients={self.n_clients}, dim={self.dim}, convex={self.convex})"
