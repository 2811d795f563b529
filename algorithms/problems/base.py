"""The interface every federated problem implements (torch tensors, all clients at once).

A problem owns the data and gradients of all N clients. Parameters are flat vectors of
length ``dim``; many client models are a matrix ``X`` of shape (m, dim). Stochastic
gradients are drawn for all N clients from the generator handed in (in a fixed order)
and the requested rows are kept, so the noise of client i at a given (round, step) does
not depend on who else is active or on the algorithm: two algorithms run with the same
seed see identical noise.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class ProblemConstants:
    """The constants the bounds need. ``exact`` names those known exactly; the others
    are estimates (``notes`` says how each was obtained)."""

    L: float
    sigma2: float
    f_star: float
    delta_f: float
    F0: float
    exact: frozenset[str] = frozenset()
    notes: dict[str, str] = field(default_factory=dict)


class FederatedProblem(ABC):
    """f(x) = (1/N) Σ_i f_i(x) over N clients, evaluated batched in torch.

    ``dtype`` and ``device`` are those of the problem's tensors; ``to(device, dtype)``
    returns a copy on another device or precision.
    """

    n_clients: int
    dim: int
    dtype: torch.dtype
    device: torch.device
    #: The starting point at which ``constants()`` are taken (``run`` starts there by default).
    x0: torch.Tensor
    #: Whether f is convex; a non-convex problem's f* can only be searched locally.
    convex: bool = False
    #: A number known to lie below inf f (−inf when none is known), e.g. 0 for a cross-entropy loss.
    loss_lower_bound: float = -math.inf

    @abstractmethod
    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """f(x) (a 0-d tensor)."""

    @abstractmethod
    def client_grads(self, x: torch.Tensor) -> torch.Tensor:
        """(N, dim): ∇f_i(x) for every client at the same point x."""

    def full_grad(self, x: torch.Tensor) -> torch.Tensor:
        """∇f(x) = (1/N) Σ_i ∇f_i(x)."""
        return self.client_grads(x).mean(dim=0)

    @abstractmethod
    def grads_at(self, X: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """(m, dim): the exact ∇f_{clients[j]}(X[j]) for m client models at once."""

    @abstractmethod
    def stochastic_grads(self, X: torch.Tensor, clients: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """(m, dim): a stochastic gradient g_{clients[j]}(X[j]) per row, one fresh draw each.

        The draw is made for all N clients from ``generator`` (always the same amount of
        randomness) and the rows of ``clients`` are used.
        """

    def client_losses(self, x: torch.Tensor) -> torch.Tensor:
        """(N,): f_i(x) for every client (problems that can say; the CA-Fed theorems need them)."""
        raise ValueError(f"{type(self).__name__} does not give per-client losses f_i(x)")

    def strong_convexity(self) -> float:
        """μ > 0 with every f_i μ-strongly convex (a certified lower bound), where the problem knows one."""
        raise ValueError(f"{type(self).__name__} knows no strong-convexity constant μ")

    def accuracy(self, x: torch.Tensor) -> float | None:
        """Classification accuracy where it applies, else None."""
        return None

    @abstractmethod
    def constants(self) -> ProblemConstants:
        """L, σ², f*, Δ_f = f(x0) − f* and F_0 at the problem's x0 (exact where the problem allows)."""

    @abstractmethod
    def to(self, device=None, dtype=None) -> "FederatedProblem":
        """The same problem with tensors on ``device`` in ``dtype``."""
