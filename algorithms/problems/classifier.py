"""A one-hidden-layer MLP classifier split across clients: the non-convex test problem.

The model is logits(a) = W₂·act(W₁a + b₁) + b₂ with act = tanh or ReLU; its parameters
are one flat vector x = (W₁, b₁, W₂, b₂) in ``torch.nn.Linear`` layout. Following FedSUM
eq. (1) (000_77e0b9f4a9a003cb.txt line 107),

    f_i(x) = (1/n_i) Σ_{j∈D_i} CE(logits(a_j), y_j) + (reg/2)‖x‖²,    f = (1/N) Σ_i f_i.

Many client models are evaluated at once with ``torch.func.functional_call`` under
``torch.func.vmap``. Stochastic gradients use mini-batches of ``batch_size`` samples
drawn uniformly **with replacement** from the client's data. Since f is non-convex, the
constants are estimates (see ``constants``), except F_0.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from .base import ProblemConstants
from .data import ClientData, ClientDataProblem, digits, dirichlet_partition, synthetic_classification
from .logistic import _check_batch, _check_nonneg

__all__ = ["Classifier"]

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


class Classifier(ClientDataProblem):
    """MLP with ``hidden`` units and ``activation`` ("tanh" or "relu") on N clients' data.

    ``x0`` is a seeded PyTorch-style initialisation (every weight and bias
    ~ U(−1/√fan_in, 1/√fan_in), drawn with numpy from ``init_seed``): the zero vector is a
    stationary set of this model (hidden units stay identical), so it is no starting point.
    """

    def __init__(self, features_per_client, labels_per_client, hidden: int = 32, activation: str = "tanh",
                 reg: float = 0.0, batch_size: int = 16, n_classes: int | None = None, init_seed=0,
                 dtype=torch.float64, device=None):
        if isinstance(hidden, bool) or not isinstance(hidden, numbers.Integral) or hidden < 1:
            raise ValueError(f"hidden must be an integer >= 1, got {hidden!r}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.hidden, self.activation = int(hidden), activation
        self.reg = _check_nonneg(reg, "reg")
        self.batch_size = _check_batch(batch_size)
        self.data = ClientData(features_per_client, labels_per_client, n_classes, dtype, device)
        self.n_clients, self.n_classes = self.data.n_clients, self.data.n_classes
        p, h, c = self.data.n_features, self.hidden, self.n_classes
        self._module = nn.Sequential(nn.Linear(p, h), _ACTIVATIONS[activation](), nn.Linear(h, c)).to("meta")
        self._names = [name for name, _ in self._module.named_parameters()]
        self._shapes = [tuple(t.shape) for _, t in self._module.named_parameters()]
        self._sizes = [math.prod(s) for s in self._shapes]
        self.dim = sum(self._sizes)
        rng = np.random.default_rng(init_seed)
        fan_in = [p, p, h, h]
        self._x0 = np.concatenate([rng.uniform(-1, 1, n) / math.sqrt(f) for n, f in zip(self._sizes, fan_in)])
        self._cache: dict = {}

    @classmethod
    def digits(cls, n_clients: int = 10, alpha: float = 0.5, hidden: int = 32, batch_size: int = 16, seed=0,
               activation: str = "tanh", reg: float = 0.0, min_size: int = 10,
               dtype=torch.float64, device=None) -> "Classifier":
        """An MLP on scikit-learn's digits, Dirichlet(α)-split; ``seed`` drives split and init."""
        X, y = digits()
        parts = dirichlet_partition(y, n_clients, alpha, seed, min_size)
        return cls([X[q] for q in parts], [y[q] for q in parts], hidden, activation, reg, batch_size, 10,
                   seed, dtype, device)

    @classmethod
    def synthetic(cls, n_clients: int = 10, alpha: float = 0.5, n_samples: int = 1000, dim: int = 10,
                  n_classes: int = 3, hidden: int = 16, batch_size: int = 16, seed=0, activation: str = "tanh",
                  reg: float = 0.0, min_size: int = 1, dtype=torch.float64, device=None) -> "Classifier":
        """An MLP on a Gaussian mixture (``synthetic_classification``), Dirichlet(α)-split."""
        X, y = synthetic_classification(n_samples, dim, n_classes, seed)
        parts = dirichlet_partition(y, n_clients, alpha, seed, min_size)
        return cls([X[q] for q in parts], [y[q] for q in parts], hidden, activation, reg, batch_size, n_classes,
                   seed, dtype, device)

    # -- tensors ----------------------------------------------------------------------
    @property
    def x0(self) -> torch.Tensor:
        """The seeded initial point x^(0) at which Δ_f and F_0 are evaluated."""
        return torch.as_tensor(self._x0, dtype=self.dtype, device=self.device)

    def unflatten(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The flat vector as ``{name: tensor}`` views for ``functional_call``."""
        return {n: t.view(s) for n, t, s in zip(self._names, torch.split(x, self._sizes), self._shapes)}

    def _check_x(self, x) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.shape != (self.dim,):
            raise ValueError(f"x must be a tensor of shape ({self.dim},), got {getattr(x, 'shape', type(x).__name__)}")
        return x

    def _check_X(self, X, clients) -> torch.Tensor:
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X must be a tensor of shape (m, {self.dim}), got {getattr(X, 'shape', type(X).__name__)}")
        return self.data.check_clients(clients, X.shape[0])

    # -- one model on one client's (weighted) samples; vmapped below --------------------
    def _logits(self, x: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        return functional_call(self._module, self.unflatten(x), (A,))

    def _sample_losses(self, x, A, y):
        Z = self._logits(x, A)
        return torch.logsumexp(Z, -1) - Z.gather(-1, y[..., None])[..., 0]

    def _client_loss(self, x, A, y, w):
        """Σ_j w_j CE_j(x) + (reg/2)‖x‖²: f_i(x) with w = 1/n_i on real rows, 0 on padding."""
        return (w * self._sample_losses(x, A, y)).sum() + 0.5 * self.reg * (x @ x)

    # -- FederatedProblem -------------------------------------------------------------
    def loss(self, x: torch.Tensor) -> torch.Tensor:
        d = self.data
        return vmap(self._client_loss, in_dims=(None, 0, 0, 0))(self._check_x(x), d.X, d.y, d.weights).mean()

    def client_grads(self, x: torch.Tensor) -> torch.Tensor:
        d = self.data
        return vmap(grad(self._client_loss), in_dims=(None, 0, 0, 0))(self._check_x(x), d.X, d.y, d.weights)

    def grads_at(self, X: torch.Tensor, clients) -> torch.Tensor:
        clients = self._check_X(X, clients)
        d = self.data
        return vmap(grad(self._client_loss))(X, d.X[clients], d.y[clients], d.weights[clients])

    def stochastic_grads(self, X: torch.Tensor, clients, generator: torch.Generator) -> torch.Tensor:
        """∇ of (1/B) Σ_b CE_{j_b}(X[k]) + (reg/2)‖X[k]‖², j_b uniform with replacement on
        the client's data; positions drawn for all N clients (``ClientData.batch_positions``)."""
        clients = self._check_X(X, clients)
        A, y = self.data.minibatch(clients, generator, self.batch_size)
        w = torch.full(y.shape, 1.0 / self.batch_size, dtype=self.dtype, device=self.device)
        return vmap(grad(self._client_loss))(X, A, y, w)

    def accuracy(self, x: torch.Tensor) -> float:
        """Fraction of all clients' samples classified correctly (each sample counts once)."""
        pred = self._logits(self._check_x(x), self.data.X).argmax(-1)
        real = self.data.weights > 0
        return float(((pred == self.data.y) & real).sum()) / int(real.sum())

    # -- estimated constants ------------------------------------------------------------
    def gradient_variance(self, x: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
        """(N,): E‖g_i(x) − ∇f_i(x)‖² of the mini-batch gradient, exactly over D_i:
        (1/B)·[(1/n_i) Σ_j ‖∇CE_j‖² − ‖(1/n_i) Σ_j ∇CE_j‖²] from per-sample gradients
        (vmap over samples, ``chunk`` at a time)."""
        x = self._check_x(x)
        d = self.data
        A = torch.as_tensor(d.features, dtype=self.dtype, device=self.device)
        y = torch.as_tensor(d.labels, device=self.device)
        owner = torch.as_tensor(d.owner, device=self.device)
        sq = torch.zeros(self.n_clients, dtype=self.dtype, device=self.device)
        total = torch.zeros(self.n_clients, self.dim, dtype=self.dtype, device=self.device)
        per_sample = vmap(grad(lambda z, a, t: self._sample_losses(z, a, t)), in_dims=(None, 0, 0))
        for start in range(0, A.shape[0], chunk):
            G = per_sample(x, A[start:start + chunk], y[start:start + chunk])
            sq.index_add_(0, owner[start:start + chunk], (G * G).sum(1))
            total.index_add_(0, owner[start:start + chunk], G)
        n = d.counts.to(self.dtype)
        return (sq / n - ((total / n[:, None]) ** 2).sum(1)).clamp_min(0) / self.batch_size

    def hessian_norms(self, x: torch.Tensor, iters: int = 50, seed: int = 0) -> torch.Tensor:
        """(N,): estimates of ‖∇²f_i(x)‖ by ``iters`` power iterations on Hessian-vector
        products (reverse-over-reverse: ∇ of ⟨∇f_i, v⟩), all clients under one vmap.
        Power iteration approaches the largest |eigenvalue| from below."""
        x = self._check_x(x)
        d = self.data
        directional = grad(lambda z, v, A, y, w: grad(self._client_loss)(z, A, y, w) @ v)
        hvp = vmap(directional, in_dims=(None, 0, 0, 0, 0))
        gen = torch.Generator(device="cpu").manual_seed(seed)
        V = torch.randn(self.n_clients, self.dim, generator=gen, dtype=torch.float64).to(self.device, self.dtype)
        norms = torch.zeros(self.n_clients, dtype=self.dtype, device=self.device)
        for _ in range(iters):
            V = V / V.norm(dim=1, keepdim=True).clamp_min(torch.finfo(self.dtype).tiny)
            HV = hvp(x, V, d.X, d.y, d.weights)
            norms, V = HV.norm(dim=1), HV
        return norms

    def constants(self, power_iters: int = 50, fstar_iters: int = 300) -> ProblemConstants:
        """Estimates of L, σ², f*, Δ_f and the exact F_0 at ``x0`` (FedSUM Assumptions
        1.1–1.2 and Theorem 4.1, 000_77e0b9f4a9a003cb.txt lines 114–124, 437), in float64:

        * f*: the lowest f found by ``fstar_iters`` full-batch L-BFGS iterations from x0
          (a local value, an upper bound on inf f); x̂ is where it was reached.
        * L: max over clients and x ∈ {x0, x̂} of ``hessian_norms`` (power iteration).
        * σ²: max over clients and x ∈ {x0, x̂} of the exact mini-batch variance
          (``gradient_variance``): not a sup over x.
        * Δ_f = f(x0) − f̂*; since CE ≥ 0, f ≥ 0 and Δ_f ≤ f(x0) holds rigorously.
        * F_0 = (1/N) Σ_i ‖∇f_i(x0)‖², exact.
        """
        key = ("constants", power_iters, fstar_iters)
        if key in self._cache:
            return self._cache[key]
        from scipy.optimize import minimize

        ref = self.to(dtype=torch.float64)
        x0 = ref.x0
        value_and_grad = torch.func.grad_and_value(ref.loss)

        def fun(v):
            g, f = value_and_grad(torch.as_tensor(v, device=ref.device))
            return float(f), g.cpu().numpy()

        res = minimize(fun, self._x0, jac=True, method="L-BFGS-B", options=dict(maxiter=fstar_iters, gtol=1e-10))
        f0 = float(ref.loss(x0))
        f_star, x_hat = (float(res.fun), res.x) if res.fun < f0 else (f0, self._x0)
        x_hat = torch.as_tensor(x_hat, device=ref.device)
        L = max(ref.hessian_norms(x, power_iters).max().item() for x in (x0, x_hat))
        var = [ref.gradient_variance(x).max().item() for x in (x0, x_hat)]
        F0 = (ref.client_grads(x0) ** 2).sum(1).mean().item()
        notes = {
            "L": f"estimated: max_i ‖∇²f_i‖ by {power_iters} power iterations on Hessian-vector products at x0 "
                 f"and x̂; a lower estimate of the sup over x",
            "sigma2": f"estimated: exact mini-batch variance (B={self.batch_size}, with replacement) at x0 "
                      f"({var[0]:.6g}) and x̂ ({var[1]:.6g}), max over clients; not a sup over x",
            "f_star": f"estimated: best f of {res.nit} full-batch L-BFGS iterations from x0 (a local value)",
            "delta_f": f"estimated: f(x0) − f̂*; rigorous upper bound f(x0) = {f0:.6g} since f ≥ 0",
            "F0": "(1/N) Σ_i ‖∇f_i(x0)‖² at x0, exact",
        }
        out = ProblemConstants(L=L, sigma2=max(var), f_star=f_star, delta_f=f0 - f_star, F0=F0,
                               exact=frozenset({"F0"}), notes=notes)
        self._cache[key] = out
        return out

    def __repr__(self) -> str:
        return (f"Classifier(hidden={self.hidden}, activation={self.activation!r}, n_clients={self.n_clients}, "
                f"n_samples={self.data.sizes.sum()}, dim={self.dim}, batch_size={self.batch_size}, dtype={self.dtype})")
