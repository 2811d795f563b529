"""Heterogeneous quadratics with exactly known constants.

    f_i(x) = ½ (x − b_i)ᵀ A_i (x − b_i),   f(x) = (1/N) Σ_i f_i(x)   (FedSUM eq. (1))

A stochastic gradient of client i is ∇f_i(x) + s·ξ with ξ ~ N(0, I_d) and s = ``noise_std``,
so E‖g − ∇f_i‖² = d·s² = σ² exactly (FedSUM Assumption 1.2).

Constants (FedSUM Assumptions 1.1–1.2 and Thm 4.1), all at x⁰ = 0:

* L = max_i λ_max(A_i). Assumption 1.1 asks for L-smooth *clients*, not
  only an L-smooth f, so L is the largest client curvature, not λ_max of the mean Hessian.
* σ² = d·s².
* f* = min f = f(x*) with Ā x* = c̄, Ā = (1/N) Σ A_i, c̄ = (1/N) Σ A_i b_i. Every A_i is PSD, so
  f ≥ 0 and c̄ lies in the range of Ā; when Ā is singular the pseudo-inverse gives a minimiser.
* Δ_f = f(0) − f* (as defined in Thm 4.1).
* F_0 = (1/N) Σ_i ‖∇f_i(0)‖² = (1/N) Σ_i ‖A_i b_i‖² (Thm 4.1).
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from .base import FederatedProblem, ProblemConstants
from participation.validation import finite_real, integer

__all__ = ["Quadratic"]


def _finite_array(value, name: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a numeric array ({err})") from None
    if not np.isfinite(array).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"{name} must be finite, found {array[where]} at index {where}")
    return array


def _validate(A, b, noise_std) -> tuple[np.ndarray, np.ndarray, float]:
    A, b = _finite_array(A, "A"), _finite_array(b, "b")
    if A.ndim not in (2, 3) or (A.ndim == 3 and A.shape[1] != A.shape[2]):
        raise ValueError(f"A must have shape (N, d, d) or (N, d) for diagonal A_i, got shape {A.shape}")
    n, d = A.shape[0], A.shape[1]
    if n < 1 or d < 1:
        raise ValueError(f"A needs at least one client and one dimension, got shape {A.shape}")
    if b.shape != (n, d):
        raise ValueError(f"b must have shape (N, d) = {(n, d)} to match A of shape {A.shape}, got shape {b.shape}")
    if A.ndim == 2:
        if (A < 0).any():
            i, j = (int(k) for k in np.argwhere(A < 0)[0])
            raise ValueError(f"diagonal A[{i}] is not positive semidefinite: entry {j} is {A[i, j]}")
    else:
        scale = max(1.0, float(np.abs(A).max()))
        asym = np.abs(A - A.transpose(0, 2, 1)).max(axis=(1, 2))
        if (asym > 1e-12 * scale).any():
            i = int(np.argmax(asym))
            raise ValueError(f"A[{i}] is not symmetric (max |A - Aᵀ| = {asym[i]:.3g})")
        low = np.linalg.eigvalsh(A)[:, 0]
        if (low < -1e-10 * scale).any():
            i = int(np.argmin(low))
            raise ValueError(f"A[{i}] is not positive semidefinite (smallest eigenvalue {low[i]:.6g})")
    finite_real(noise_std, "noise_std", at_least=0)
    return A, b, float(noise_std)


class Quadratic(FederatedProblem):
    """``Quadratic(A, b, noise_std=0.0, *, dtype=torch.float64, device=None)``.

    ``A`` has shape (N, d, d) (symmetric PSD A_i) or (N, d) (diagonal A_i, stored as
    diagonals); ``b`` has shape (N, d). Invalid input is a ValueError naming the value.
    Tensors are float64 on CPU unless asked otherwise; ``constants()`` is always computed in
    float64 from the data as given.
    """

    convex = True

    def __init__(self, A, b, noise_std: float = 0.0, *, dtype: torch.dtype = torch.float64, device=None):
        A64, b64, noise_std = _validate(A, b, noise_std)
        self._A64, self._b64 = A64, b64
        self.noise_std = noise_std
        self.diagonal = A64.ndim == 2
        self.n_clients, self.dim = b64.shape
        self._place(torch.device(device) if device is not None else torch.device("cpu"), dtype)

    def _place(self, device: torch.device, dtype: torch.dtype) -> None:
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ValueError(f"dtype must be a torch floating dtype, got {dtype!r}")
        self.device, self.dtype = device, dtype
        self.A = torch.as_tensor(self._A64, dtype=dtype, device=device)
        self.b = torch.as_tensor(self._b64, dtype=dtype, device=device)
        self._rows = None

    # --- construction ---------------------------------------------------------------
    @classmethod
    def random(cls, n_clients: int, dim: int, heterogeneity: float = 1.0, noise_std: float = 0.0, seed=0, *,
               diagonal: bool = False, curvature: tuple[float, float] = (0.1, 1.0), **kwargs) -> "Quadratic":
        """Random clients: A_i = Q_i diag(λ_i) Q_iᵀ (Q_i Haar-orthogonal, λ_i uniform in
        ``curvature``; diagonal A_i = diag(λ_i) when ``diagonal``) and b_i = c + h·u_i with c, u_i
        standard normal in R^d and h = ``heterogeneity`` (0: all clients share one optimum).
        ``seed`` is None, an int or a numpy Generator."""
        for value, name in ((n_clients, "n_clients"), (dim, "dim")):
            integer(value, name)
        if isinstance(heterogeneity, bool) or not isinstance(heterogeneity, numbers.Real) or not heterogeneity >= 0:
            raise ValueError(f"heterogeneity must be a number ≥ 0, got {heterogeneity!r}")
        low, high = curvature
        if not 0 <= low <= high or not math.isfinite(high):
            raise ValueError(f"curvature must be (low, high) with 0 ≤ low ≤ high, got {curvature!r}")
        from participation.budget import require_memory

        require_memory(cls.random_bytes(n_clients, dim, diagonal=diagonal),
                       f"a random quadratic of {n_clients} clients in dimension {dim}")
        rng = np.random.default_rng(seed)
        lam = rng.uniform(low, high, size=(n_clients, dim))
        if diagonal:
            A = lam
        else:
            from scipy.stats import ortho_group

            Q = ortho_group.rvs(dim, size=n_clients, random_state=rng).reshape(n_clients, dim, dim) if dim > 1 \
                else np.ones((n_clients, 1, 1))
            A = np.einsum("nij,nj,nkj->nik", Q, lam, Q)
            A = (A + A.transpose(0, 2, 1)) / 2
        b = rng.standard_normal(dim) + heterogeneity * rng.standard_normal((n_clients, dim))
        return cls(A, b, noise_std, **kwargs)

    @staticmethod
    def random_bytes(n_clients: int, dim: int, *, diagonal: bool = False) -> int:
        """Peak bytes of :meth:`random`: the rotations, the A_i and their copies while they are
        symmetrised, checked and placed (about six float64 (d, d) arrays a client; measured 5.7 at
        d = 10), or six diagonals, and the b_i."""
        per_client = 6 * dim if diagonal else 6 * dim * dim
        return 8 * n_clients * (per_client + 4 * dim)

    def to(self, device=None, dtype=None) -> "Quadratic":
        new = object.__new__(Quadratic)
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("A", "b", "_rows")})
        new._place(torch.device(device) if device is not None else self.device, dtype or self.dtype)
        return new

    @property
    def x0(self) -> torch.Tensor:
        """The initial point x^(0) = 0 at which Δ_f and F_0 are evaluated."""
        return torch.zeros(self.dim, dtype=self.dtype, device=self.device)

    # --- evaluation -----------------------------------------------------------------
    def _apply(self, A: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
        """Row-wise A_j D_j for stacked A (diagonal or dense) and D (m, d): one batched matrix
        product (what einsum "mij,mj->mi" dispatches to, without its parsing on every call)."""
        return A * D if self.diagonal else torch.bmm(A, D.unsqueeze(-1)).squeeze(-1)

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        D = x.unsqueeze(0) - self.b
        return 0.5 * (D * self._apply(self.A, D)).sum(dim=1).mean()

    def client_grads(self, x: torch.Tensor) -> torch.Tensor:
        return self._apply(self.A, x.unsqueeze(0) - self.b)

    def client_losses(self, x: torch.Tensor) -> torch.Tensor:
        """f_i(x) = ½(x − b_i)ᵀA_i(x − b_i), (N,)."""
        D = x.unsqueeze(0) - self.b
        return 0.5 * (D * self._apply(self.A, D)).sum(dim=1)

    def strong_convexity(self) -> float:
        """μ = min_i λ_min(A_i) (exact); a ValueError when some A_i is singular."""
        mu = float(np.linalg.eigvalsh(self._dense64())[:, 0].min())
        if not mu > 0:
            raise ValueError(f"the quadratic is not strongly convex: min_i λ_min(A_i) = {mu:.3g}")
        return mu

    def grads_at(self, X: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        cached = self.__dict__.get("_rows")
        if cached is None or cached[0] is not clients:        # the local steps of a round share their rows
            cached = self._rows = (clients, self.A[clients], self.b[clients])
        return self._apply(cached[1], X - cached[2])

    def stochastic_grads(self, X: torch.Tensor, clients: torch.Tensor, draws) -> torch.Tensor:
        """∇f_j(X_j) + s·ξ_j with ξ_j the d standard normals of ``draws`` for row j; no draw at
        all when s = 0."""
        grads = self.grads_at(X, clients)
        if self.noise_std == 0:
            return grads
        return grads + self.noise_std * draws.normal(self.dim, self.dtype)

    def noise_draws(self) -> tuple[str, int] | None:
        return ("normal", self.dim) if self.noise_std else None

    # --- B models at once -----------------------------------------------------------
    def _apply_all(self, D: torch.Tensor) -> torch.Tensor:
        """A_i D[b, i] for D of shape (B, N, d), as B·N independent matrix-vector products (the
        kernel ``_apply`` uses, so a batch evaluates each run exactly as alone)."""
        if self.diagonal:
            return self.A * D
        return torch.matmul(self.A, D.unsqueeze(-1)).squeeze(-1)

    def loss_batch(self, X: torch.Tensor) -> torch.Tensor:
        D = X[:, None, :] - self.b
        return 0.5 * (D * self._apply_all(D)).sum(dim=2).mean(dim=1)

    def client_grads_batch(self, X: torch.Tensor) -> torch.Tensor:
        return self._apply_all(X[:, None, :] - self.b)

    def full_grad_batch(self, X: torch.Tensor) -> torch.Tensor:
        return self.client_grads_batch(X).mean(dim=1)

    def loss_and_grad_batch(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        D = X[:, None, :] - self.b
        G = self._apply_all(D)
        return 0.5 * (D * G).sum(dim=2).mean(dim=1), G.mean(dim=1)

    def accuracy_batch(self, X: torch.Tensor) -> None:
        return None

    # --- constants ------------------------------------------------------------------
    def _dense64(self) -> np.ndarray:
        return np.stack([np.diag(a) for a in self._A64]) if self.diagonal else self._A64

    def minimizer(self) -> np.ndarray:
        """x* = Ā⁺ c̄ (float64), a minimiser of f (the minimum-norm one when Ā is singular)."""
        A = self._dense64()
        c = np.einsum("nij,nj->i", A, self._b64) / self.n_clients
        return np.linalg.lstsq(A.mean(axis=0), c, rcond=None)[0]

    def _loss64(self, x: np.ndarray) -> float:
        D = x[None, :] - self._b64
        AD = self._A64 * D if self.diagonal else np.einsum("nij,nj->ni", self._A64, D)
        return float(0.5 * (D * AD).sum(axis=1).mean())

    def constants(self) -> ProblemConstants:
        A = self._dense64()
        L = float(np.linalg.eigvalsh(A)[:, -1].max())
        f_star = self._loss64(self.minimizer())
        f0 = self._loss64(np.zeros(self.dim))
        grads0 = np.einsum("nij,nj->ni", A, -self._b64)
        notes = {"L": "max_i λ_max(A_i): every client is L-smooth (FedSUM Assumption 1.1)",
                 "sigma2": "d·noise_std² (Gaussian noise, Assumption 1.2)",
                 "f_star": "f at x* = pinv(mean A_i) · mean(A_i b_i)",
                 "delta_f": "f(0) − f*", "F0": "(1/N) Σ_i ‖A_i b_i‖² (FedSUM Thm 4.1)"}
        return ProblemConstants(L=L, sigma2=self.dim * self.noise_std**2, f_star=f_star,
                                delta_f=max(0.0, f0 - f_star), F0=float((grads0**2).sum(axis=1).mean()),
                                exact=frozenset({"L", "sigma2", "f_star", "delta_f", "F0"}), notes=notes)

    def __repr__(self) -> str:
        kind = "diagonal" if self.diagonal else "dense"
        return (f"Quadratic(n_clients={self.n_clients}, dim={self.dim}, {kind}, noise_std={self.noise_std}, "
                f"dtype={self.dtype}, device={self.device})")
