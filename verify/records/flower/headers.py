"""The header of a recorded Flower run: :func:`record_header` names the fedverify algorithm, step
sizes and β that Flower's ``FedAvg`` or ``FedAvgM`` amounts to. With equal client weights FedAvgM
(server rate η', momentum β) is fedverify's ``fedavgm`` with η_g = η' and β, i.e. FedGM(η = η'/(1 − β),
β, ν = 1) of Server momentum (Sun et al., AAAI 2024) Sec. 3, and FedAvg is ``fedavg`` with η_g = 1;
the section "Server momentum" of the ``verify.records.flower`` docstring gives the whole mapping.
"""
from __future__ import annotations

import math

from participation.validation import finite_real, integer

from .dependency import require_flower


#: What every Flower header says of the server's weights (recorded per round as example_weights).
_WEIGHTS_NOTE = ("; the server weights replies by their num-examples (example_weights), and the theorems average "
                 "the participants equally, so unequal weights are refused when the record is judged")


def record_header(strategy, *, eta_l: float, local_steps: int) -> dict:
    """``RunRecorder`` keywords (``algorithm``, ``step_sizes``, ``hparams``) for a run of the
    Flower ``strategy``: ``FedAvgM`` → fedverify's ``fedavgm`` with η_g = its server learning rate
    and β = its server momentum (``fedavg`` with η_g when the momentum is 0); ``FedAvg`` →
    ``fedavg`` with η_g = 1 (module docstring). ``eta_l``, ``local_steps``: the clients' local
    SGD, which Flower's strategy does not know. Another strategy is a ValueError: its update is
    not one of fedverify's algorithms."""
    require_flower()
    from flwr.serverapp.strategy import FedAvg, FedAvgM

    finite_real(eta_l, "eta_l", above=0)
    integer(local_steps, "local_steps")
    steps = {"eta_l": float(eta_l), "eta_g": 1.0}
    kind = type(strategy)
    if kind is FedAvgM:
        lr, beta = float(strategy.server_learning_rate), float(strategy.server_momentum)
        if not (math.isfinite(lr) and lr > 0 and 0 <= beta < 1):
            raise ValueError(f"FedAvgM with server_learning_rate={lr!r}, server_momentum={beta!r}: fedverify's fedavgm "
                             "takes a rate > 0 and a momentum in [0, 1)")
        steps["eta_g"] = lr
        if beta == 0:
            return {"algorithm": "fedavg", "step_sizes": steps, "local_steps": int(local_steps),
                    "notes": f"Flower FedAvgM(server_learning_rate={lr:g}, server_momentum=0) = FedAvg with eta_g = {lr:g}"
                             + _WEIGHTS_NOTE}
        return {"algorithm": "fedavgm", "step_sizes": steps, "hparams": {"beta": beta}, "local_steps": int(local_steps),
                "notes": f"Flower FedAvgM(server_learning_rate={lr:g}, server_momentum={beta:g}) = fedverify's fedavgm "
                         f"(eta_g = {lr:g}, beta = {beta:g}) = FedGM(eta = {lr / (1 - beta):g} = eta_g/(1 - beta), "
                         f"beta = {beta:g}, nu = 1) (Server momentum, Sec. 3)" + _WEIGHTS_NOTE}
    if kind is FedAvg:
        return {"algorithm": "fedavg", "step_sizes": steps, "local_steps": int(local_steps),
                "notes": "Flower FedAvg = fedverify's fedavg with eta_g = 1" + _WEIGHTS_NOTE}
    raise ValueError(f"{kind.__name__} is not FedAvg or FedAvgM: its server update is not one of fedverify's algorithms, "
                     "so a record cannot name it; write the header yourself")
