"""The FedSUM family (FedSUM Algorithms 1 and 2 in Section 3, Algorithm 3 in App. E), in
ALGORITHM notation.

Common to all three (Algorithms 1–3): y^(-1) = 0, h_i^(0) = 0 (line 1 of each) and

    y^(t)   = y^(t-1) + Σ_{i∈S_t} δ_i^(t),   δ_i^(t) = h_i^(t+1) − h_i^(t)
    x^(t+1) = x^(t) − (η_g η_l K / N) · y^(t)         (Alg. 1 line 13, Alg. 2 line 14, Alg. 3 line 15)

so y^(t) = Σ_i h_i^(t+1), the SUM of every client's latest mean gradient (eqs. (7) and
(14)), normalised by N (not |S_t|). The server steps every round, also when S_t
is empty. Rates are constant (the FedSUM-CR identity below needs that).

Each active client's h_i^(t+1) is computed in closed form as the mean of its K stochastic
gradients (eqs. (5) and (8)). The boxes write it as a model difference,
N(x^(t) − x_i^(t,K))/(η_l K) − y_i^(t); the two are equal in exact arithmetic, and the closed
form does not lose digits dividing by η_l/N in float32.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Algorithm, Round, local_sgd

__all__ = ["FedSUMB", "FedSUM", "FedSUMCR", "FedSUMState"]


@dataclass(frozen=True, eq=False)
class FedSUMState:
    """After round t, per run (batch axis first): ``x`` = x^(t+1) (B, d), ``y`` = y^(t) (B, d),
    ``h`` = h^(t+1) (B, N, d).

    FedSUM-CR adds ``z`` = z^(t+1) (B, N, d) and ``a`` = a^(t+1) (B, N) long, the round of each
    client's last participation (−1 before it). ``last_active`` is the (B, N) mask of S_t and
    ``last_correction`` (B, N, d) holds the correction directions y_i^(t) of those clients (zero
    rows elsewhere, and for FedSUM-B, which has none), so the papers' identities can be checked
    along a run. Before round 0: x^(0), y^(-1) = 0, h^(0) = 0, z^(0) = x^(0), a^(0) = −1.
    """

    x: torch.Tensor
    y: torch.Tensor
    h: torch.Tensor
    last_active: torch.Tensor
    last_correction: torch.Tensor
    z: torch.Tensor | None = None
    a: torch.Tensor | None = None


class _Family(Algorithm):
    """Shared init and server step; subclasses give the active clients' new h and y_i."""

    def init(self, problem, x0: torch.Tensor) -> FedSUMState:
        b, n, d = x0.shape[0], problem.n_clients, problem.dim
        return FedSUMState(x=x0, y=x0.new_zeros((b, d)), h=x0.new_zeros((b, n, d)),
                           last_active=torch.zeros((b, n), dtype=torch.bool, device=x0.device),
                           last_correction=x0.new_zeros((b, n, d)))

    def _server(self, state: FedSUMState, problem, r: Round, h_new, correction, **extra) -> FedSUMState:
        """δ_i = h_i^(t+1) − h_i^(t); y^(t) = y^(t-1) + Σ δ_i; x^(t+1) = x^(t) − (η_g η_l K/N) y^(t)."""
        if r.m:
            y = state.y + r.sum(h_new - r.take(state.h))
            h = r.put(state.h, h_new)
        else:
            y, h = state.y, state.h
        x = state.x - (r.eta_g * r.eta_l * self.local_steps / problem.n_clients) * y
        return FedSUMState(x=x, y=y, h=h, last_active=r.mask, last_correction=r.put(torch.zeros_like(state.h), correction),
                           **extra)

    def _local(self, state: FedSUMState, problem, r: Round, correction) -> torch.Tensor:
        """K local steps x_i^(t,k+1) = x_i^(t,k) − (η_l/N)(g_i^(t,k) + y_i^(t)) from x_i^(t,0) = x^(t)
        for all active clients at once (Alg. 2/3 line 9); returns
        h_i^(t+1) = (1/K) Σ_k g_i^(t,k)."""
        _, mean_grad = local_sgd(r.rows(state.x), problem, r, r.rows(r.eta_l) / problem.n_clients, self.local_steps,
                                 correction)
        return mean_grad


@dataclass(frozen=True, repr=False)
class FedSUMB(_Family):
    """FedSUM-B, Algorithm 1 (Section 3.1): no local updates.

    K = ``local_steps`` mini-batch gradients, all at x^(t) (Alg. 1 line 7); x_i^(t,1) = x^(t) −
    η_l Σ_k g_i^(t,k) (Alg. 1 line 9), so h_i^(t+1) = (x^(t) − x_i^(t,1))/(η_l K) = (1/K) Σ_k g_i^(t,k)
    (Alg. 1 line 11). Only η_g η_l matters. Under full participation with exact gradients this is
    gradient descent with step η_g η_l K. Communication: x down, δ_i up (one vector each).
    """

    name = "fedsum-b"

    def round(self, state: FedSUMState, problem, r: Round) -> FedSUMState:
        h_new = state.x.new_zeros((r.m, problem.dim))
        if r.m:
            X = r.rows(state.x)
            for k in range(self.local_steps):
                h_new = h_new + problem.stochastic_grads(X, r.client, r.draws(k))
            h_new = h_new / self.local_steps
        return self._server(state, problem, r, h_new, state.x.new_zeros((r.m, problem.dim)))


@dataclass(frozen=True, repr=False)
class FedSUM(_Family):
    """FedSUM, Algorithm 2 (Section 3.2).

    The server sends x^(t) and y^(t-1) (Alg. 2 line 3); client i forms y_i^(t) = y^(t-1) − h_i^(t)
    (Alg. 2 line 6; eqs. (9)/(41): the other clients' latest gradients, summed), takes K steps
    x_i^(t,k+1) = x_i^(t,k) − (η_l/N)(g_i^(t,k) + y_i^(t)) (Alg. 2 line 9; note the 1/N), and sets
    h_i^(t+1) = N(x^(t) − x_i^(t,K))/(η_l K) − y_i^(t) = (1/K) Σ_k g_i^(t,k) (Alg. 2 line 12).
    With K = 1 and full participation: gradient descent with step η_g η_l.
    Communication: x and y down (two vectors), δ_i up (one).
    """

    name = "fedsum"
    down_vectors = 2

    def round(self, state: FedSUMState, problem, r: Round) -> FedSUMState:
        correction = r.rows(state.y) - r.take(state.h)
        h_new = self._local(state, problem, r, correction) if r.m else correction
        return self._server(state, problem, r, h_new, correction)


@dataclass(frozen=True, repr=False)
class FedSUMCR(_Family):
    """FedSUM-CR, Algorithm 3 (App. E; Section 3.3): FedSUM without y downlink.

    Client i keeps z_i^(t) = x^(a_{i,t-1}) and a_i^(t) = a_{i,t-1} (eq. (10);
    z_i^(0) = x^(0), a_i^(0) = −1) and rebuilds the correction from the model path
    (Alg. 3 line 6; eqs. (11) and (79)):

        y_i^(t) = (N / (η_g η_l K)) · (z_i^(t) − x^(t)) / (t − a_i^(t)) − h_i^(t)
                = (1/(t − a_{i,t-1})) Σ_{p=a_{i,t-1}}^{t-1} y^(p) − h_i^(t)    (y^(-1) = 0),

    an average of the server directions since its last visit. The identity needs constant
    η_g, η_l (eq. 79 divides by one fixed η_g η_l K/N). Local steps and h as in FedSUM; then
    a_i^(t+1) = t, z_i^(t+1) = x^(t) (Alg. 3 line 12). Communication: x down, δ_i up (one vector each).
    Dividing a model difference by η_g η_l K/N loses digits in float32 (a caveat
    of this implementation, not in the paper).
    """

    name = "fedsum-cr"

    def init(self, problem, x0: torch.Tensor) -> FedSUMState:
        base = super().init(problem, x0)
        return FedSUMState(x=base.x, y=base.y, h=base.h, last_active=base.last_active,
                           last_correction=base.last_correction, z=x0[:, None, :].expand(-1, problem.n_clients, -1).clone(),
                           a=torch.full(base.last_active.shape, -1, dtype=torch.long, device=x0.device))

    def round(self, state: FedSUMState, problem, r: Round) -> FedSUMState:
        if not r.m:
            return self._server(state, problem, r, r.take(state.h), state.x.new_zeros((0, problem.dim)),
                                z=state.z, a=state.a)
        scale = problem.n_clients / (r.rows(r.eta_g) * r.rows(r.eta_l) * self.local_steps)
        gaps = (r.t - r.take(state.a)).to(state.x.dtype).unsqueeze(1)          # t − a_i^(t) ≥ 1
        start = r.rows(state.x)
        correction = scale * (r.take(state.z) - start) / gaps - r.take(state.h)
        h_new = self._local(state, problem, r, correction)
        z = r.put(state.z, start)
        a = r.put(state.a, torch.full_like(r.client, r.t))
        return self._server(state, problem, r, h_new, correction, z=z, a=a)
