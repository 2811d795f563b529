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
client's epoch is ``local_steps`` steps). Both are drawn for all N clients at once from the
round's generator with the reserved key ``ARRIVAL_KEY`` (the active rows are kept), so runs
are reproducible and a client's draw does not depend on who else arrives.

With D = 1, E = 1 (τ = 0, K_{t,i} = K) this is synchronous FedGM with η replaced by η/K
(Sec. 5.1: "recovers Algorithm 3" up to the normalisation). Rounds with S_t = ∅ change
nothing; τ counts server steps (models before x_0 are x_0). Communication: one (stale) x
down and Δ^i up per arriving client.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Generators, step_count
from .fedgm import FedGM

__all__ = ["AutonomousFedGM", "AutonomousState", "ARRIVAL_KEY", "draw_arrivals", "ALGORITHMS"]

#: The generator key of the delay/step draws (local step k uses key k < ARRIVAL_KEY).
ARRIVAL_KEY = 2**32


def draw_arrivals(generator: torch.Generator, n_clients: int, t: int, max_delay: int, max_epochs: int,
                  device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(τ, E) for all N clients: τ_i ~ U{0..min(D−1, t)}, then E_i ~ U{1..E} (long tensors)."""
    tau = torch.randint(0, min(max_delay, t + 1), (n_clients,), generator=generator, device=device)
    epochs = torch.randint(1, max_epochs + 1, (n_clients,), generator=generator, device=device)
    return tau, epochs


@dataclass(frozen=True, eq=False)
class AutonomousState:
    """FedGM's ``x``, ``d``, ``delta`` plus ``models`` (D, d), row j = the model j server steps
    old, and the last round's arrivals: ``active`` S_t, ``delays`` τ_{t,i} and ``steps``
    K_{t,i} (long, aligned with ``active``; empty after a round without arrivals)."""

    x: torch.Tensor
    d: torch.Tensor
    delta: torch.Tensor
    models: torch.Tensor
    active: torch.Tensor
    delays: torch.Tensor
    steps: torch.Tensor


@dataclass(frozen=True, repr=False)
class AutonomousFedGM(FedGM):
    """Autonomous FedGM: FedGM's ``eta_l``, ``eta_g``, ``beta``, ``nu``, ``schedule``, plus
    ``max_delay`` D ≥ 1 (default 5, Fig. 1(c,d); 10 for Fig. 9), ``max_epochs`` E ≥ 1
    (default 6) and ``local_steps`` K, the steps of one epoch."""

    max_delay: int = 5
    max_epochs: int = 6

    name = "fedgm-autonomous"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "max_delay", step_count(self.max_delay, "max_delay"))
        object.__setattr__(self, "max_epochs", step_count(self.max_epochs, "max_epochs"))

    def init(self, problem, x0: torch.Tensor) -> AutonomousState:
        zeros = x0.new_zeros(problem.dim)
        none = torch.zeros(0, dtype=torch.long, device=x0.device)
        return AutonomousState(x=x0, d=zeros, delta=zeros, models=x0.expand(self.max_delay, -1).clone(),
                               active=none, delays=none, steps=none)

    def round(self, state: AutonomousState, problem, active, t: int, generators: Generators) -> AutonomousState:
        if not active.numel():
            none = active.new_zeros(0)
            return AutonomousState(x=state.x, d=state.d, delta=state.delta, models=state.models, active=active,
                                   delays=none, steps=none)
        tau, epochs = draw_arrivals(generators(ARRIVAL_KEY), problem.n_clients, t, self.max_delay,
                                    self.max_epochs, state.x.device)
        tau, steps = tau[active], epochs[active] * self.local_steps
        start = state.models[tau]                                  # x_{t−τ_{t,i}}, (m, d)
        X = start
        for k in range(int(steps.max())):                          # masked: row i stops after K_{t,i}
            G = problem.stochastic_grads(X, active, generators(k))
            X = torch.where((k < steps).unsqueeze(1), X - self.eta_l * G, X)
        delta = ((start - X) / steps.unsqueeze(1).to(X.dtype)).mean(dim=0)
        new = self._server(state, delta, t)
        models = torch.cat([new.x.unsqueeze(0), state.models[:-1]])
        return AutonomousState(x=new.x, d=new.d, delta=delta, models=models, active=active, delays=tau,
                               steps=steps)

    def observe(self, before, after: AutonomousState, problem, active, t: int) -> dict:
        """The arrivals of round t: ``local_steps`` K_{t,i} and ``delays`` τ_{t,i} (one entry per
        arrived client), what Server momentum Thm 5.1 and Cor G.1 take as φ_1, φ_2, φ_3, K_max and τ."""
        return {"local_steps": after.steps, "delays": after.delays}


ALGORITHMS = (AutonomousFedGM,)
