"""Autonomous (Multistage) FedGM, simulated round-synchronously.

J. Sun, X. Wu, H. Huang, A. Zhang, "On the Role of Server Momentum in Federated Learning",
AAAI 2024, arXiv:2312.12670 ("Server momentum" below): Algorithm 4, Sec. 5.1 and App. B.2.

The trace's S_t are the m updates that arrive before the server's t-th step. Client i ∈ S_t
started from the stale global model x_{t−τ_{t,i}} (App. B.2), ran K_{t,i} local SGD steps
(LocalOPT, Algorithm 2) and sends the normalised update (App. B.2; printed "K_+" in Algorithm 4)

    Δ^i = (x_{t−τ_{t,i}} − x^i_{K_{t,i}}) / K_{t,i}.

The server averages Δ_t = (1/|S_t|) Σ_{i∈S_t} Δ^i (Algorithm 4) and takes the FedGM step of
round t's stage (Algorithm 4's server step; see ``algorithms.fedgm``). Delay / step model of
the experiments (App. H.1, "How asynchrony and heterogeneous local epochs are implemented"):
τ_{t,i} uniform on {0, …, min(D−1, t)} (a model picked among
the last D global models, the current one included) and K_{t,i} = E_{t,i}·K with E_{t,i}
uniform on {1, …, E} epochs of K steps (the paper's epochs have ⌈N_i/B⌉ steps; here every
client's epoch is ``local_steps`` steps). Both come from the round's noise under the reserved
step key ``ARRIVAL_KEY``: two uniforms (u_1, u_2) ∈ [0, 1)² per arrived client (entries 0 and 1
of ``r.draws(ARRIVAL_KEY).uniform(2)``, float64), mapped to integers as

    τ_{t,i} = ⌊u_1 · min(D, t + 1)⌋,    E_{t,i} = 1 + ⌊u_2 · E⌋

(u ≤ 1 − 2⁻⁵³, so ⌊u·n⌋ ≤ n − 1). A client's draw depends on (seed, t, i) only, so runs are
reproducible and it does not depend on who else arrives or on the runs batched beside it.

With D = 1, E = 1 (τ = 0, K_{t,i} = K) this is synchronous FedGM with η replaced by η/K
(Sec. 5.1: "recovers Algorithm 3" up to the normalisation). Rounds with S_t = ∅ change
nothing; τ counts server steps (models before x_0 are x_0). Communication: one (stale) x
down and Δ^i up per arriving client.

Batched over runs like ``algorithms.fedgm``: the local steps of all arrived rows of all runs
run together, masked after each row's K_{t,i} steps.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Round, step_count
from .fedgm import FedGM
from .noise import Draws

__all__ = ["AutonomousFedGM", "AutonomousState", "ARRIVAL_KEY", "draw_arrivals", "ALGORITHMS"]

#: The noise step key of the delay/step draws (local step k uses key k < ARRIVAL_KEY).
ARRIVAL_KEY = 2**31 - 1


def draw_arrivals(draws: Draws, t: int, max_delay: int, max_epochs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(τ, E) of the rows of ``draws`` (long tensors): from uniforms (u_1, u_2) per row,
    τ = ⌊u_1 · min(D, t + 1)⌋ ~ U{0..min(D−1, t)} and E = 1 + ⌊u_2 · E⌋ ~ U{1..E}."""
    u = draws.uniform(2, torch.float64)
    tau = (u[:, 0] * min(max_delay, t + 1)).floor().long()
    epochs = (u[:, 1] * max_epochs).floor().long() + 1
    return tau, epochs


@dataclass(frozen=True, eq=False)
class AutonomousState:
    """Per run (batch axis first): FedGM's ``x``, ``d``, ``delta`` (B, d) plus ``models``
    (B, D, d), entry j the model j server steps old, and the last round's arrivals as (B, N)
    tables: ``arrived`` S_t (bool), ``delays`` τ_{t,i} and ``steps`` K_{t,i} (long, 0 for the
    clients not in S_t)."""

    x: torch.Tensor
    d: torch.Tensor
    delta: torch.Tensor
    models: torch.Tensor
    arrived: torch.Tensor
    delays: torch.Tensor
    steps: torch.Tensor


@dataclass(frozen=True, repr=False)
class AutonomousFedGM(FedGM):
    """Autonomous FedGM: FedGM's ``eta_l``, ``eta_g``, ``beta``, ``nu``, ``schedule``, plus
    ``max_delay`` D ≥ 1 (default 5, Fig. 1(c,d); 10 for Fig. 9), ``max_epochs`` E ≥ 1
    (default 6) and ``local_steps`` K, the steps of one epoch (E·K < ``ARRIVAL_KEY``)."""

    max_delay: int = 5
    max_epochs: int = 6

    name = "fedgm-autonomous"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "max_delay", step_count(self.max_delay, "max_delay"))
        object.__setattr__(self, "max_epochs", step_count(self.max_epochs, "max_epochs"))
        if self.max_epochs * self.local_steps >= ARRIVAL_KEY:
            raise ValueError(f"max_epochs·local_steps must stay below {ARRIVAL_KEY} (the arrivals' noise key), "
                             f"got {self.max_epochs}·{self.local_steps}")

    def init(self, problem, x0: torch.Tensor) -> AutonomousState:
        b, n = x0.shape[0], problem.n_clients
        zeros = x0.new_zeros(x0.shape)
        none = torch.zeros((b, n), dtype=torch.long, device=x0.device)
        return AutonomousState(x=x0, d=zeros, delta=zeros, models=x0[:, None, :].expand(-1, self.max_delay, -1).clone(),
                               arrived=none.bool(), delays=none, steps=none)

    def round(self, state: AutonomousState, problem, r: Round) -> AutonomousState:
        """Per run: Δ_t = (1/|S_t|) Σ_{i∈S_t} (x_{t−τ_{t,i}} − x^i_{K_{t,i}}) / K_{t,i}, then
        FedGM's server step of round t's stage (Algorithm 4); runs with S_t = ∅ keep x, d, Δ
        and the models."""
        none = torch.zeros_like(state.steps)
        if not r.m:
            return AutonomousState(x=state.x, d=state.d, delta=state.delta, models=state.models, arrived=r.mask,
                                   delays=none, steps=none)
        tau, epochs = draw_arrivals(r.draws(ARRIVAL_KEY), r.t, self.max_delay, self.max_epochs)
        steps = epochs * self.local_steps
        eta = r.rows(r.eta_l)
        start = state.models[r.run, tau]                           # x_{t−τ_{t,i}}, (M, d)
        X = start
        for k in range(int(steps.max())):                          # masked: row i stops after K_{t,i}
            G = problem.stochastic_grads(X, r.client, r.draws(k))
            X = torch.where((k < steps).unsqueeze(1), X - eta * G, X)
        delta = r.mean((start - X) / steps.unsqueeze(1).to(X.dtype))
        x, d = self._step(state.x, state.d, delta, r)
        models = torch.cat([x.unsqueeze(1), state.models[:, :-1]], dim=1)
        return AutonomousState(x=r.where_active(x, state.x), d=r.where_active(d, state.d),
                               delta=r.where_active(delta, state.delta), models=r.where_active(models, state.models),
                               arrived=r.mask, delays=r.put(none, tau), steps=r.put(none, steps))

    @property
    def noise_steps(self) -> int:
        """K_{t,i} = E_{t,i}·K ≤ max_epochs·K local steps a round."""
        return self.max_epochs * self.local_steps

    def observe(self, before, after: AutonomousState, problem, r: Round) -> dict:
        """The arrivals of round t: ``local_steps`` K_{t,i} and ``delays`` τ_{t,i}, per run an
        array with one entry per arrived client (in client order), what Server momentum Thm 5.1
        and Cor G.1 take as φ_1, φ_2, φ_3, K_max and τ."""
        counts = r.count.long().tolist()
        return {"local_steps": list(r.take(after.steps).cpu().split(counts)),
                "delays": list(r.take(after.delays).cpu().split(counts))}


ALGORITHMS = (AutonomousFedGM,)
