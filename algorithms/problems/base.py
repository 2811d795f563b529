"""The interface every federated problem implements (torch tensors, all clients at once).

A problem owns the data and gradients of all N clients. Parameters are flat vectors of
length ``dim``; many client models are a matrix ``X`` of shape (m, dim). A stochastic
gradient takes its randomness from the :class:`~algorithms.noise.Draws` handed in, keyed by
(seed, round, step, client), so the noise of client i at a given (round, step) depends on
nothing else: not on who else is active, the algorithm or the runs batched beside it; two
algorithms run with the same seed see identical noise. ``noise_draws()`` declares what one
call takes, so that the engine computes the draws of many rounds at once.

The ``*_batch`` methods evaluate B models (B, dim) at once, for a batch of runs; the defaults
evaluate them one by one, and problems with cheap closed forms override them.
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
    def stochastic_grads(self, X: torch.Tensor, clients: torch.Tensor, draws) -> torch.Tensor:
        """(m, dim): a stochastic gradient g_{clients[j]}(X[j]) per row, one fresh draw each,
        with the randomness of ``draws`` (an ``algorithms.noise.Draws`` for those rows)."""

    def noise_draws(self) -> tuple[str, int] | None:
        """(kind, width) of the draws one ``stochastic_grads`` call takes per row ("normal" or
        "uniform"), or None when it takes none."""
        return None

    # --- B models at once ---------------------------------------------------------------
    def loss_batch(self, X: torch.Tensor) -> torch.Tensor:
        """(B,): f at each row of X (B, dim)."""
        return torch.stack([torch.as_tensor(self.loss(x), dtype=X.dtype, device=X.device) for x in X])

    def full_grad_batch(self, X: torch.Tensor) -> torch.Tensor:
        """(B, dim): ∇f at each row of X."""
        return torch.stack([self.full_grad(x) for x in X])

    def loss_and_grad_batch(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss_batch(X), full_grad_batch(X))``, for problems that share work between the two."""
        return self.loss_batch(X), self.full_grad_batch(X)

    def client_grads_batch(self, X: torch.Tensor) -> torch.Tensor:
        """(B, N, dim): ∇f_i at each row of X, for every client."""
        return torch.stack([self.client_grads(x) for x in X])

    def accuracy_batch(self, X: torch.Tensor) -> torch.Tensor | None:
        """(B,): the accuracy at each row of X, or None where the problem has none."""
        values = [self.accuracy(x) for x in X]
        if all(v is None for v in values):
            return None
        return torch.tensor([float("nan") if v is None else v for v in values], dtype=torch.float64, device=X.device)

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
