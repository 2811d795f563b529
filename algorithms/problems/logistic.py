"""L2-regularised logistic regression split across clients, with constants from the data.

Client i holds samples (a_j, y_j), j ∈ D_i, n_i = |D_i|; a_j includes a trailing 1 when
``intercept`` is set. With C ≥ 3 classes the model is W ∈ R^{d×C} (flattened row-major,
x = vec(W)) and the loss is softmax cross-entropy ℓ_j(W) = logsumexp(Wᵀa_j) − (Wᵀa_j)_{y_j};
with C = 2 it is binary logistic regression on w ∈ R^d, ℓ_j(w) = log(1 + e^{z_j}) − y_j z_j
with z_j = wᵀa_j. Following FedSUM eq. (1),

    f_i(x) = (1/n_i) Σ_{j∈D_i} ℓ_j(x) + (reg/2)‖x‖²,        f(x) = (1/N) Σ_i f_i(x),

an unweighted mean over clients. The regulariser covers every parameter (the intercept
too), so for reg > 0 each f_i is reg-strongly convex and f* is attained.

A stochastic gradient of client i is the gradient on a mini-batch of ``batch_size``
samples drawn uniformly **with replacement** from D_i (plus reg·x), unbiased for ∇f_i; the
positions come from the uniforms of the run's noise at (round, step, client)
(``ClientData.batch_positions``).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from .base import ProblemConstants
from .client_data import ClientData, ClientDataProblem, digits, dirichlet_partition, synthetic_classification
from participation.validation import finite_real, integer

__all__ = ["Logistic"]


def _check_nonneg(value, name: str) -> float:
    return finite_real(value, name, at_least=0)


def _check_batch(value) -> int:
    return integer(value, "batch_size")


class Logistic(ClientDataProblem):
    """Multinomial (C ≥ 3) or binary (C = 2) logistic regression over N clients.

    Parameters: ``features_per_client`` / ``labels_per_client`` (one (n_i, p) array and
    one (n_i,) integer array per client), ``reg`` ≥ 0, ``batch_size`` B ≥ 1, ``n_classes``
    (default: largest label + 1), ``intercept`` (append a constant feature). ``x0`` is the
    zero vector. All gradient methods evaluate every client in one batched tensor
    operation over the clients' zero-padded data; the ``*_batch`` methods evaluate B models
    at once, and one model is a batch of one.
    """

    convex = True
    loss_lower_bound = 0.0      # cross-entropy ≥ 0 and reg ≥ 0

    def __init__(self, features_per_client, labels_per_client, reg: float = 1e-3, batch_size: int = 16,
                 n_classes: int | None = None, intercept: bool = True, dtype=torch.float64, device=None):
        self.reg = _check_nonneg(reg, "reg")
        self.batch_size = _check_batch(batch_size)
        if intercept:
            features_per_client = [np.hstack([np.asarray(a, dtype=np.float64), np.ones((np.shape(a)[0], 1))])
                                   if np.ndim(a) == 2 else a for a in features_per_client]
        self.intercept = bool(intercept)
        self.data = ClientData(features_per_client, labels_per_client, n_classes, dtype, device)
        self.n_clients = self.data.n_clients
        self.n_classes = self.data.n_classes
        self.binary = self.n_classes == 2
        self._cols = 1 if self.binary else self.n_classes
        self.dim = self.data.n_features * self._cols
        self._cache: dict = {}

    # -- constructors -----------------------------------------------------------------
    @classmethod
    def digits(cls, n_clients: int = 10, alpha: float = 0.5, reg: float = 1e-3, batch_size: int = 16,
               seed=0, min_size: int = 10, dtype=torch.float64, device=None) -> "Logistic":
        """10-class logistic regression on scikit-learn's digits, Dirichlet(α)-split."""
        X, y = digits()
        parts = dirichlet_partition(y, n_clients, alpha, seed, min_size)
        return cls([X[p] for p in parts], [y[p] for p in parts], reg, batch_size, 10, True, dtype, device)

    @classmethod
    def synthetic(cls, n_clients: int = 10, alpha: float = 0.5, n_samples: int = 1000, dim: int = 10,
                  n_classes: int = 3, reg: float = 1e-3, batch_size: int = 16, seed=0, min_size: int = 1,
                  dtype=torch.float64, device=None) -> "Logistic":
        """Logistic regression on a Gaussian mixture (``synthetic_classification``), Dirichlet(α)-split."""
        X, y = synthetic_classification(n_samples, dim, n_classes, seed)
        parts = dirichlet_partition(y, n_clients, alpha, seed, min_size)
        return cls([X[p] for p in parts], [y[p] for p in parts], reg, batch_size, n_classes, True, dtype, device)

    # -- tensors ----------------------------------------------------------------------
    @property
    def x0(self) -> torch.Tensor:
        """The initial point x^(0) = 0 at which Δ_f and F_0 are evaluated."""
        return torch.zeros(self.dim, dtype=self.dtype, device=self.device)

    def _point(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.shape != (self.dim,):
            raise ValueError(f"x must be a tensor of shape ({self.dim},), got {getattr(x, 'shape', type(x).__name__)}")
        return x.view(-1, self._cols)

    def _points(self, X: torch.Tensor, clients) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X must be a tensor of shape (m, {self.dim}), got {getattr(X, 'shape', type(X).__name__)}")
        return X.view(X.shape[0], -1, self._cols), self.data.check_clients(clients, X.shape[0])

    # -- per-sample pieces: z = Wᵀa, loss ℓ(z), residual r = ∂ℓ/∂z -------------------------
    def _sample_loss(self, Z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.binary:
            z = Z[..., 0]
            return F.softplus(z) - y.to(z.dtype) * z
        return torch.logsumexp(Z, -1) - Z.gather(-1, y[..., None])[..., 0]

    def _residual(self, Z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.binary:
            return torch.sigmoid(Z) - y[..., None].to(Z.dtype)
        return torch.softmax(Z, -1) - F.one_hot(y, self.n_classes).to(Z.dtype)

    # -- FederatedProblem -------------------------------------------------------------
    def _one(self, x: torch.Tensor) -> torch.Tensor:
        """x (dim,) as a batch of one model, (1, dim): one model is evaluated as a row of a
        batch, so that a run gives the same numbers alone and batched."""
        self._point(x)
        return x[None]

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """f(x) = (1/N) Σ_i [(1/n_i) Σ_{j∈D_i} ℓ_j(x)] + (reg/2)‖x‖²."""
        return self.loss_batch(self._one(x))[0]

    def client_losses(self, x: torch.Tensor) -> torch.Tensor:
        """f_i(x) = (1/n_i) Σ_{j∈D_i} ℓ_j(x) + (reg/2)‖x‖², (N,); their mean is ``loss``."""
        Z = self.data.X @ self._point(x)
        return (self.data.weights * self._sample_loss(Z, self.data.y)).sum(dim=-1) + 0.5 * self.reg * (x @ x)

    def strong_convexity(self) -> float:
        """μ = reg: every f_i is reg-strongly convex (the data term is convex); a lower bound."""
        if not self.reg > 0:
            raise ValueError("the logistic problem is not strongly convex without regularisation (reg = 0)")
        return float(self.reg)

    def client_grads(self, x: torch.Tensor) -> torch.Tensor:
        """∇f_i(x) = (1/n_i) Σ_j a_j r_jᵀ + reg·x, all clients in one batched matmul."""
        return self.client_grads_batch(self._one(x))[0]

    def full_grad(self, x: torch.Tensor) -> torch.Tensor:
        """∇f(x) = (1/N) Σ_i ∇f_i(x)."""
        return self.full_grad_batch(self._one(x))[0]

    def grads_at(self, X: torch.Tensor, clients) -> torch.Tensor:
        W, clients = self._points(X, clients)
        A = self.data.X[clients]
        R = self._residual(A @ W, self.data.y[clients]) * self.data.weights[clients][..., None]
        return (A.transpose(1, 2) @ R).reshape(X.shape[0], -1) + self.reg * X

    def stochastic_grads(self, X: torch.Tensor, clients, draws) -> torch.Tensor:
        """(1/B) Σ_{b<B} ∇ℓ_{j_b}(X[k]) + reg·X[k], j_b uniform with replacement on the
        client's data, at the positions ``ClientData.batch_positions`` takes from ``draws``."""
        W, clients = self._points(X, clients)
        A, y = self.data.minibatch(clients, draws, self.batch_size)
        R = self._residual(A @ W, y) / self.batch_size
        return (A.transpose(1, 2) @ R).reshape(X.shape[0], -1) + self.reg * X

    def noise_draws(self) -> tuple[str, int]:
        """B uniforms per row: the mini-batch positions."""
        return ("uniform", self.batch_size)

    def accuracy(self, x: torch.Tensor) -> float:
        """Fraction of all clients' samples classified correctly (each sample counts once)."""
        return float(self.accuracy_batch(self._one(x))[0])

    # -- B models at once ---------------------------------------------------------------
    def _models(self, X: torch.Tensor) -> torch.Tensor:
        """X (B, dim) as B weight matrices (B, 1, p, C), broadcast over the clients."""
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X must be a tensor of shape (B, {self.dim}), got {getattr(X, 'shape', type(X).__name__)}")
        return X.reshape(X.shape[0], 1, -1, self._cols)

    def _logits_batch(self, X: torch.Tensor) -> torch.Tensor:
        """(B, N, n_max, C): Z = A_i W_b for every model b and client i, one matrix product per
        (b, i), so that each model's numbers do not depend on the others in the batch."""
        return self.data.X @ self._models(X)

    def _grads_from(self, X: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        """(B, N, dim): ∇f_i(X[b]) = (1/n_i) Σ_j a_j r_jᵀ + reg·X[b] from the logits Z."""
        d = self.data
        R = self._residual(Z, d.y.expand(Z.shape[:3])) * d.weights[..., None]
        return (d.X.transpose(1, 2) @ R).reshape(X.shape[0], self.n_clients, -1) + self.reg * X[:, None, :]

    def _loss_from(self, X: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        """(B,): f(X[b]) = (1/N) Σ_i (1/n_i) Σ_j ℓ_j(X[b]) + (reg/2)‖X[b]‖² from the logits Z."""
        d = self.data
        data_term = (d.weights * self._sample_loss(Z, d.y.expand(Z.shape[:3]))).sum(dim=(1, 2)) / self.n_clients
        return data_term + 0.5 * self.reg * (X * X).sum(dim=1)

    def loss_batch(self, X: torch.Tensor) -> torch.Tensor:
        return self._loss_from(X, self._logits_batch(X))

    def client_grads_batch(self, X: torch.Tensor) -> torch.Tensor:
        return self._grads_from(X, self._logits_batch(X))

    def full_grad_batch(self, X: torch.Tensor) -> torch.Tensor:
        return self.client_grads_batch(X).mean(dim=1)

    def loss_and_grad_batch(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        Z = self._logits_batch(X)
        return self._loss_from(X, Z), self._grads_from(X, Z).mean(dim=1)

    def accuracy_batch(self, X: torch.Tensor) -> torch.Tensor:
        """(B,): the fraction of all clients' samples that model X[b] classifies correctly
        (float64)."""
        Z = self._logits_batch(X)
        pred = (Z[..., 0] > 0).long() if self.binary else Z.argmax(-1)
        real = self.data.weights > 0
        correct = ((pred == self.data.y) & real).sum(dim=(1, 2))
        return correct.to(torch.float64) / int(real.sum())

    # -- exact quantities behind the constants -----------------------------------------
    def gradient_variance(self, x: torch.Tensor) -> torch.Tensor:
        """(N,): E‖g_i(x) − ∇f_i(x)‖² for the mini-batch gradient, exactly over D_i.

        B draws with replacement are iid, so the variance is (1/B)·v_i with the per-sample
        variance v_i = (1/n_i) Σ_j ‖a_j‖²‖r_j‖² − ‖(1/n_i) Σ_j a_j r_jᵀ‖²_F (reg·x cancels).
        """
        d = self.data
        R = self._residual(d.X @ self._point(x), d.y)
        second = (d.weights * (d.X * d.X).sum(-1) * (R * R).sum(-1)).sum(-1)
        mean = d.X.transpose(1, 2) @ (R * d.weights[..., None])
        return (second - (mean * mean).sum((1, 2))).clamp_min(0) / self.batch_size

    def hessian_vector(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """∇²f(x)·v = (1/N) Σ_i (1/n_i) Σ_j a_j (J_j Vᵀa_j)ᵀ + reg·v, with J_j = diag(p_j) − p_j p_jᵀ
        (softmax) or p_j(1 − p_j) (binary)."""
        d = self.data
        Z, Zv = d.X @ self._point(x), d.X @ self._point(v)
        if self.binary:
            p = torch.sigmoid(Z)
            Jv = p * (1 - p) * Zv
        else:
            p = torch.softmax(Z, -1)
            Jv = p * (Zv - (p * Zv).sum(-1, keepdim=True))
        return (d.X.transpose(1, 2) @ (Jv * d.weights[..., None])).sum(0).reshape(-1) / self.n_clients + self.reg * v

    def smoothness(self) -> np.ndarray:
        """(N,): L_i = c·λ_max(A_iᵀA_i/n_i) + reg with c = 1/2 (softmax) or 1/4 (binary).

        ∇²f_i(x) = (1/n_i) Σ_j J_j ⊗ a_j a_jᵀ + reg·I, and J_j ⪯ ½(I − 11ᵀ/C) ⪯ ½·I for the
        softmax (Böhning 1992, "Multinomial logistic regression algorithm", Ann. Inst.
        Statist. Math. 44:197–200, eq. (3)) and p(1 − p) ≤ 1/4 for the sigmoid, so
        ∇²f_i ⪯ L_i·I: a valid constant for Assumption 1.1, not necessarily the smallest.
        """
        c = 0.25 if self.binary else 0.5
        out = np.empty(self.n_clients)
        for i in range(self.n_clients):
            A = self.data.features[self.data.owner == i]
            out[i] = c * np.linalg.eigvalsh(A.T @ A / A.shape[0])[-1] + self.reg
        return out

    def solve(self, tol: float = 1e-10) -> tuple[np.ndarray, float, float]:
        """(x*, f*, ‖∇f(x*)‖): L-BFGS on f in float64 (scipy, gtol 1e-12, ftol 0), then
        Newton steps x ← x − H⁻¹∇f(x) (H⁻¹ by conjugate gradients on exact Hessian-vector
        products), kept while they shrink the gradient, until ‖∇f‖ < tol/100. Cached."""
        if "solution" not in self._cache:
            from scipy.optimize import minimize
            from scipy.sparse.linalg import LinearOperator, cg

            ref = self.to("cpu", torch.float64)

            def fun(v):
                x = torch.from_numpy(v)
                return float(ref.loss(x)), ref.full_grad(x).numpy()

            x = minimize(fun, np.zeros(self.dim), jac=True, method="L-BFGS-B",
                         options=dict(maxiter=20000, maxcor=30, ftol=0.0, gtol=1e-12)).x
            value, grad = fun(x)
            for _ in range(20):
                if np.linalg.norm(grad) < tol / 100:
                    break
                xt = torch.from_numpy(x)
                H = LinearOperator((self.dim, self.dim), dtype=np.float64,
                                   matvec=lambda v: ref.hessian_vector(xt, torch.from_numpy(np.ascontiguousarray(v).ravel())).numpy())
                step = cg(H, -grad, rtol=1e-14, atol=0.0, maxiter=10 * self.dim)[0]
                new_value, new_grad = fun(x + step)
                if not np.linalg.norm(new_grad) < np.linalg.norm(grad):
                    break
                x, value, grad = x + step, new_value, new_grad
            self._cache["solution"] = (x, value, float(np.linalg.norm(grad)))
        return self._cache["solution"]

    def constants(self) -> ProblemConstants:
        """L, σ², f*, Δ_f, F_0 at x^(0) = 0 for FedSUM Assumptions 1.1–1.2 and Theorem 4.1.

        * L = max_i L_i (``smoothness``): a rigorous bound from the data.
        * σ² = max over i and over x ∈ {x^(0), x*} of the exact mini-batch variance
          (``gradient_variance``). The assumption asks for a sup over all x; this is its
          value at those two points only. A rigorous sup bound, from ‖p − e_y‖² ≤ 2
          (softmax) or (p − y)² ≤ 1 (binary), is c·max_i mean_j ‖a_j‖² / B; it is in ``notes``.
        * f* = f(x*) from ``solve``; for reg > 0, f(x*) − f* ≤ ‖∇f(x*)‖²/(2·reg).
        * Δ_f = f(x^(0)) − f*, F_0 = (1/N) Σ_i ‖∇f_i(x^(0))‖² (as defined in Thm 4.1).
        """
        if "constants" in self._cache:
            return self._cache["constants"]
        ref = self.to("cpu", torch.float64)
        x0 = ref.x0
        x_star, f_star, gnorm = self.solve()
        xs = torch.from_numpy(x_star)
        var0, var_star = ref.gradient_variance(x0).max().item(), ref.gradient_variance(xs).max().item()
        c = 1.0 if self.binary else 2.0
        sq = np.bincount(self.data.owner, (self.data.features ** 2).sum(1)) / self.data.sizes
        sigma_sup = c * sq.max() / self.batch_size
        gap = gnorm ** 2 / (2 * self.reg) if self.reg > 0 else math.inf
        f0 = ref.loss(x0).item()
        F0 = (ref.client_grads(x0) ** 2).sum(1).mean().item()
        exact = {"L", "F0"} | ({"f_star", "delta_f"} if gap <= 1e-12 * max(1.0, abs(f_star)) else set())
        notes = {
            "L": f"rigorous bound max_i [{'1/4' if self.binary else '1/2'}·λ_max(A_iᵀA_i/n_i) + reg] "
                 f"(Böhning 1992); exact = a valid Assumption 1.1 constant, not the smallest one",
            "sigma2": f"exact mini-batch variance (B={self.batch_size}, with replacement), max over clients at "
                      f"x0 ({var0:.6g}) and x* ({var_star:.6g}); evaluated at those points, not a sup over x. "
                      f"Rigorous sup bound: {sigma_sup:.6g}",
            "f_star": f"L-BFGS + Newton-CG polish in float64, ‖∇f(x*)‖ = {gnorm:.3g}; "
                      + (f"f(x*) − f* ≤ {gap:.3g} by reg-strong convexity" if self.reg > 0
                         else "reg = 0: no certificate, inf f may not be attained"),
            "delta_f": "f(x0) − f* at x0 = 0",
            "F0": "(1/N) Σ_i ‖∇f_i(x0)‖² at x0 = 0, exact",
        }
        out = ProblemConstants(L=float(self.smoothness().max()), sigma2=max(var0, var_star), f_star=f_star,
                               delta_f=f0 - f_star, F0=F0, exact=frozenset(exact), notes=notes)
        self._cache["constants"] = out
        return out

    def __repr__(self) -> str:
        kind = "binary" if self.binary else f"{self.n_classes}-class"
        return (f"Logistic({kind}, n_clients={self.n_clients}, n_samples={self.data.sizes.sum()}, "
                f"dim={self.dim}, reg={self.reg}, batch_size={self.batch_size}, dtype={self.dtype})")
