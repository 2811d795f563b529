"""FedAvg on Flower, run as Flower runs Apps (``flwr run``), for ``fedverify bench`` to compare against.

Importing this module imports Flower (``flwr``) and checks that its simulation extra (``ray``)
is installed; it raises ImportError when either is absent (``pip install fedverify[flower]``),
which is how the bench decides to skip the comparison.

The Flower side is a Flower App shipped in the package, ``verify/bench/flower-app`` (:func:`app_dir`),
whose components are ``verify.bench.flower_workload:server_app`` and ``:client_app``
(:mod:`verify.bench.flower_workload`: a PyTorch ``ClientApp`` on the message API and a
``ServerApp`` running ``flwr.serverapp.strategy.FedAvg``). :func:`run_flower` runs it through
:func:`verify.records.flower.run_app`, i.e. ``flwr run APP local``: the CLI starts a local SuperLink in
simulation mode (Flower's Simulation Runtime, on Ray), with one virtual SuperNode per client, its
own Flower home and ports, and the SuperLink is stopped afterwards. To make the work identical
to the engine's ``fedavg`` on a ``Logistic`` problem:

* model: ``Linear(p, C, bias=False)`` whose weight is Wᵀ, where the engine's flat
  parameter is x = vec(W) with W of shape (p, C) (the intercept is the problem's constant
  last feature column); loss: mean softmax cross-entropy on the batch, with
  ``weight_decay=reg`` giving the problem's + reg·x gradient term;
* data: SuperNode i (``partition-id`` i) holds exactly the engine's client i samples.
  Each ClientApp process reads the samples of ``factory()`` (the engine's problem) once from
  the workload file and keeps its clients' data; messages carry only the model. The samples,
  the trace and the step sizes reach the App's processes as an ``.npz`` of plain arrays, read
  without pickle, whose path is in the run config (``workload``);
* mini-batches: the engine's, keyed by (seed, round, step) (:class:`SharedBatches`);
* participation: the strategy sends round t to the SuperNodes of the trace's S_t (a
  ``FedAvg`` subclass that replaces the node sampling, and stops at a failed reply where
  ``FedAvg`` would average without it); an empty S_t leaves the model unchanged, as in
  the engine;
* aggregation: ``FedAvg`` weighted by a per-client weight of 1 (``weighted_by_key``), the
  engine's (1/|S_t|) Σ average, with η_g = 1;
* float32 on the CPU; no federated evaluation (``fraction_evaluate=0``).

Under these rules both sides compute the same iterates up to float32 rounding.

Only the rounds are timed, inside the ServerApp: ``strategy.start`` from its first to its last
round, after a query round in which every SuperNode reports its partition id (this also starts
the Ray actors and loads the clients' data); the ServerApp writes that time and the final model
to a JSON file whose path is in the run config (``result``). What ``flwr run`` spends before the
rounds (the CLI, the SuperLink, Ray, the SuperNodes, the query round) and after them (shutdown,
reading the run's status, stopping the SuperLink) is reported apart, from the rounds' wall-clock
times. The rounds run as in ``run_simulation``: the Simulation Runtime drives the ServerApp
with the same in-memory grid, which polls for replies every 0.1 s, a floor on Flower's time per
round. Flower's telemetry, its update check and Ray's usage statistics are off in the run.
"""
from __future__ import annotations

import importlib.util
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version as installed
from pathlib import Path

import flwr  # noqa: F401  (fail at import when Flower is absent: the bench's skip)

if importlib.util.find_spec("ray") is None:      # the simulation extra, without importing Ray here
    raise ModuleNotFoundError("No module named 'ray'", name="ray")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ..records.flower import run_app  # noqa: E402
from .flower_workload import RESULT_KEY, WORKLOAD_KEY, SharedBatches, local_training, read_result, write_workload  # noqa: E402

__all__ = ["FlowerRun", "SharedBatches", "local_training", "run_flower", "version", "app_dir", "initial_weight",
           "engine_params", "APP_DIR"]

#: The Flower App's directory inside the installed package (its ``pyproject.toml`` is package data).
APP_DIR = Path(__file__).resolve().parent / "flower-app"


def version() -> str:
    return installed("flwr")


def app_dir() -> Path:
    """The bench's Flower App, ``verify/bench/flower-app`` where fedverify is installed."""
    if not (APP_DIR / "pyproject.toml").is_file():
        raise FileNotFoundError(f"the bench's Flower App is missing from the installed package: no {APP_DIR}/pyproject.toml")
    return APP_DIR


def initial_weight(problem) -> torch.Tensor:
    """x_0 as the (classes, features) float32 weight the apps exchange."""
    p, classes = problem.data.n_features, problem.n_classes
    return problem.x0.detach().to("cpu", torch.float32).view(p, classes).T.contiguous()


def engine_params(weight: torch.Tensor) -> np.ndarray:
    """A (classes, features) weight in the engine's layout, float64."""
    return weight.to(torch.float64).T.reshape(-1).numpy().copy()


@dataclass(frozen=True)
class FlowerRun:
    """``params``: x_T in the engine's layout (float64); ``round_seconds``: wall time of all
    rounds, measured in the ServerApp; ``startup_seconds``: what ``flwr run`` spent before the
    first round (CLI, SuperLink, Ray and SuperNodes, the query round that loads the clients'
    data); ``shutdown_seconds``: after the last round until the SuperLink was stopped;
    ``overhead_seconds``: the two together; ``rounds``: T."""

    params: np.ndarray
    round_seconds: float
    startup_seconds: float
    shutdown_seconds: float
    rounds: int

    @property
    def overhead_seconds(self) -> float:
        return self.startup_seconds + self.shutdown_seconds


def run_flower(factory, trace, eta_l: float, local_steps: int, seed: int = 0, cpus: int | None = None,
               client_cpus: int = 1, timeout: float = 1800.0) -> FlowerRun:
    """FedAvg on ``factory()`` (a zero-argument callable returning a multi-class
    ``Logistic``) along ``trace``, Flower's App :func:`app_dir` run by ``flwr run`` in Flower's
    Simulation Runtime (:func:`verify.records.flower.run_app`), float32 on the CPU, with the engine's
    data, batches, participation and aggregation (module docstring); η_g = 1.

    Ray gets ``cpus`` CPUs (default: those this process may use) and each ClientApp
    ``client_cpus`` of them (a whole number, as Flower's federation config takes it), so
    ``cpus // client_cpus`` clients train at once. Flower's own default, 2 CPUs per ClientApp,
    would train one client at a time on a 2-CPU machine; with 1 CPU per client as many
    clients train at once as there are CPUs. Raises RuntimeError
    (``verify.records.flower.FlowerRunError``, one line with Flower's reason) when the run fails (a
    ClientApp error stops it) or takes more than ``timeout`` s.
    """
    problem = factory()
    if getattr(problem, "binary", True) or not hasattr(problem, "data"):
        raise ValueError("run_flower needs a factory of a multi-class Logistic problem")
    mask = np.asarray(trace.mask if hasattr(trace, "mask") else trace, dtype=bool)
    if mask.ndim != 2 or mask.shape[1] != problem.n_clients:
        raise ValueError(f"trace has {mask.shape[-1]} clients but the problem has {problem.n_clients}")
    with tempfile.TemporaryDirectory(prefix="fedverify-bench-flower-", ignore_cleanup_errors=True) as tmp:
        workload = write_workload(Path(tmp) / "workload.npz", problem=problem, mask=mask,
                                  initial=initial_weight(problem), seed=int(seed), eta_l=float(eta_l),
                                  local_steps=int(local_steps))
        result = Path(tmp) / "result.json"
        began = time.time()
        run_app(app_dir(), run_config={WORKLOAD_KEY: str(workload), RESULT_KEY: str(result)},
                num_supernodes=problem.n_clients, cpus=cpus, client_cpus=client_cpus, timeout=timeout)
        ended = time.time()
        if not result.is_file():
            raise RuntimeError("the Flower run completed without the ServerApp's result file")
        out = read_result(result)
    return FlowerRun(params=engine_params(out["weight"]), round_seconds=float(out["round-seconds"]),
                     startup_seconds=max(0.0, out["rounds-start"] - began),
                     shutdown_seconds=max(0.0, ended - out["rounds-end"]), rounds=int(out["rounds"]))
