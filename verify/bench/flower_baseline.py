"""FedAvg on Flower's simulation engine, for ``fedverify bench`` to compare against.

Importing this module imports Flower (``flwr``) and its simulation extra (``ray``); it
raises ImportError when they are absent (``pip install fedverify[flower]``), which is
how the bench decides to skip the comparison.

The Flower side is written the way Flower's documentation writes a PyTorch app, on the
message API: a ``ClientApp`` whose ``train`` function loads the global model into a
``torch.nn.Linear`` module, runs ``local_steps`` steps of ``torch.optim.SGD`` on its own
partition and replies with the new weights; a ``ServerApp`` that runs
``flwr.serverapp.strategy.FedAvg``; and ``flwr.simulation.run_simulation`` with the Ray
backend running one virtual SuperNode per client. To make the work identical to the
engine's ``fedavg`` on a ``Logistic`` problem:

* model: ``Linear(p, C, bias=False)`` whose weight is Wᵀ, where the engine's flat
  parameter is x = vec(W) with W of shape (p, C) (the intercept is the problem's constant
  last feature column); loss: mean softmax cross-entropy on the batch, with
  ``weight_decay=reg`` giving the problem's + reg·x gradient term;
* data: SuperNode i (``partition-id`` i) holds exactly the engine's client i samples.
  As a Flower app loads its partition from a data set description, each ClientApp
  process builds the problem once from the same zero-argument factory the engine's
  problem came from (e.g. a ``functools.partial`` of ``Logistic.digits``), and keeps it;
  messages carry only the model;
* mini-batches: the engine's, keyed by (seed, round, step) (:class:`SharedBatches`);
* participation: the strategy sends round t to the SuperNodes of the trace's S_t (a
  ``FedAvg`` subclass that replaces the node sampling, and stops at a failed reply where
  ``FedAvg`` would average without it); an empty S_t leaves the model unchanged, as in
  the engine;
* aggregation: ``FedAvg`` weighted by a per-client weight of 1 (``weighted_by_key``), the
  engine's (1/|S_t|) Σ average, with η_g = 1;
* float32 on the CPU; no federated evaluation (``fraction_evaluate=0``).

Under these rules both sides compute the same iterates up to float32 rounding.

Only the rounds are timed: ``strategy.start`` from its first to its last round, after a
query round in which every SuperNode reports its partition id (this also starts the Ray
actors). Ray start-up, actor creation and shutdown are reported apart. Flower's
in-memory grid polls for replies every 0.1 s, which sets a floor on its time per round.
Flower's telemetry and Ray's usage statistics are switched off unless the environment
already says otherwise; Flower's and Ray's logging is silenced for the run.
"""
from __future__ import annotations

import logging
import os
import pickle
import time
from dataclasses import dataclass

for _name, _value in (("FLWR_TELEMETRY_ENABLED", "0"), ("RAY_USAGE_STATS_ENABLED", "0")):
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402
import ray  # noqa: E402,F401,I001  (the simulation extra: fail at import when it is absent)

from algorithms.noise import NoiseStream  # noqa: E402

__all__ = ["FlowerRun", "SharedBatches", "local_training", "run_flower", "version"]

_EQUAL_WEIGHT = "client-weight"


def version() -> str:
    from importlib.metadata import version as installed

    return installed("flwr")


@dataclass(frozen=True)
class SharedBatches:
    """The engine's mini-batch positions, so that Flower's clients train on the same samples.

    For local step k of round t the engine gives client i the B uniforms u of
    ``NoiseStream(seed).draws(t, k, [i]).uniform(B)`` and it uses rows ⌊u_b·n_i⌋ (at most
    n_i − 1) of its own data (``ClientData.batch_positions``); ``rows`` repeats that draw.
    """

    seed: int
    sizes: tuple[int, ...]
    batch_size: int

    def rows(self, client: int, t: int, k: int) -> torch.Tensor:
        u = NoiseStream(self.seed).draws(t, k, torch.tensor([client])).uniform(self.batch_size, torch.float64)[0]
        n = self.sizes[client]
        return torch.clamp((u * n).long(), max=n - 1)


def local_training(weight: torch.Tensor, features: torch.Tensor, labels: torch.Tensor, batches,
                   eta_l: float, reg: float) -> torch.Tensor:
    """A client's update as Flower's PyTorch examples write it: a fresh ``Linear`` module
    holding ``weight`` and an SGD optimiser (``weight_decay=reg``), one step of mean
    cross-entropy per index tensor in ``batches``; returns the new weight."""
    model = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=weight.dtype)
    model.load_state_dict({"weight": weight})
    optimiser = torch.optim.SGD(model.parameters(), lr=eta_l, weight_decay=reg)
    for rows in batches:
        optimiser.zero_grad()
        F.cross_entropy(model(features[rows]), labels[rows]).backward()
        optimiser.step()
    return model.weight.detach()


_LOADED: dict[bytes, tuple] = {}


def _client_data(factory, seed: int):
    """(per-client float32 features and labels, SharedBatches, reg) of ``factory()``, built
    once per process."""
    key = pickle.dumps((factory, seed))
    if key not in _LOADED:
        problem = factory()
        data = problem.data
        shards = [(torch.as_tensor(data.features[data.owner == i], dtype=torch.float32),
                   torch.as_tensor(data.labels[data.owner == i])) for i in range(problem.n_clients)]
        batches = SharedBatches(int(seed), tuple(int(s) for s in data.sizes), problem.batch_size)
        _LOADED[key] = (shards, batches, problem.reg)
    return _LOADED[key]


def client_app(factory, seed: int, eta_l: float, local_steps: int) -> ClientApp:
    """The ClientApp of :func:`run_flower`: answers the partition query, trains as the engine."""
    app = ClientApp()

    @app.query()
    def identify(msg: Message, context) -> Message:
        _client_data(factory, seed)        # load before the timed rounds, as a warm Flower deployment would
        record = MetricRecord({"partition-id": int(context.node_config["partition-id"])})
        return Message(RecordDict({"identity": record}), reply_to=msg)

    @app.train()
    def train(msg: Message, context) -> Message:
        client = int(context.node_config["partition-id"])
        t = int(msg.content["config"]["server-round"]) - 1
        shards, batches, reg = _client_data(factory, seed)
        features, labels = shards[client]
        weight = msg.content["arrays"].to_torch_state_dict()["weight"]
        new = local_training(weight, features, labels, (batches.rows(client, t, k) for k in range(local_steps)),
                             eta_l, reg)
        metrics = MetricRecord({"num-examples": int(labels.shape[0]), _EQUAL_WEIGHT: 1.0})
        return Message(RecordDict({"arrays": ArrayRecord({"weight": new}), "metrics": metrics}), reply_to=msg)

    return app


class _TraceFedAvg(FedAvg):
    """Flower's FedAvg, sending round t to the SuperNodes of the trace's S_t; a reply that
    carries an error stops the run instead of being left out of the average."""

    def __init__(self, mask: np.ndarray, node_of: dict[int, int]):
        super().__init__(fraction_evaluate=0.0, min_available_nodes=1, weighted_by_key=_EQUAL_WEIGHT)
        self.mask, self.node_of = mask, node_of

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        config["server-round"] = server_round
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        return [Message(record, dst_node_id=self.node_of[int(i)], message_type=MessageType.TRAIN)
                for i in np.flatnonzero(self.mask[server_round - 1])]

    def aggregate_train(self, server_round: int, replies):
        replies = list(replies)
        failed = [msg.error.reason for msg in replies if msg.has_error()]
        if failed or len(replies) != int(self.mask[server_round - 1].sum()):
            reason = failed[0].strip().splitlines()[-1] if failed else "missing replies"
            raise RuntimeError(f"round {server_round}: {reason}")
        return super().aggregate_train(server_round, replies)


def _server_app(mask: np.ndarray, initial: torch.Tensor, out: dict) -> ServerApp:
    app = ServerApp()
    app.main()(server_main(mask, initial, out))
    return app


def server_main(mask: np.ndarray, initial: torch.Tensor, out: dict):
    """The ServerApp's main function ``(grid, context)``: find which SuperNode holds which
    partition, then FedAvg along ``mask`` from ``initial``; ``out`` receives the final
    ``weight`` and the rounds' ``seconds``."""

    def main(grid: Grid, context) -> None:
        from ..flower import wait_for_nodes

        nodes = wait_for_nodes(grid, mask.shape[1], 300.0)
        replies = list(grid.send_and_receive([Message(RecordDict(), dst_node_id=node, message_type=MessageType.QUERY)
                                              for node in nodes]))
        node_of = {int(msg.content["identity"]["partition-id"]): msg.metadata.src_node_id for msg in replies
                   if not msg.has_error()}
        if len(node_of) != mask.shape[1]:
            raise RuntimeError(f"{len(node_of)} of {mask.shape[1]} SuperNodes answered")
        strategy = _TraceFedAvg(mask, node_of)
        start = time.perf_counter()
        result = strategy.start(grid=grid, initial_arrays=ArrayRecord({"weight": initial}), num_rounds=mask.shape[0])
        out["seconds"] = time.perf_counter() - start
        arrays = result.arrays if result.arrays is not None and len(result.arrays) else None
        out["weight"] = arrays.to_torch_state_dict()["weight"] if arrays is not None else initial

    return main


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
    rounds; ``overhead_seconds``: the rest of ``run_simulation`` (Ray start-up, actors,
    node discovery, shutdown)."""

    params: np.ndarray
    round_seconds: float
    overhead_seconds: float
    rounds: int


def run_flower(factory, trace, eta_l: float, local_steps: int, seed: int = 0, cpus: int | None = None,
               client_cpus: float = 1.0) -> FlowerRun:
    """FedAvg on ``factory()`` (a picklable zero-argument callable returning a multi-class
    ``Logistic``) along ``trace`` in Flower's simulation engine, float32 on the CPU, with
    the engine's data, batches, participation and aggregation (module docstring); η_g = 1.

    Ray gets ``cpus`` CPUs (default: those this process may use) and each ClientApp
    actor ``client_cpus`` of them, so ``cpus / client_cpus`` clients train at once.
    Flower's own default, 2 CPUs per ClientApp, trains one client at a time on a 2-CPU
    machine and was about 3x slower there than 1 CPU per client; 0.5 was no faster than 1.
    Raises RuntimeError when the simulation fails (a ClientApp error stops the run).
    """
    problem = factory()
    if getattr(problem, "binary", True) or not hasattr(problem, "data"):
        raise ValueError("run_flower needs a factory of a multi-class Logistic problem")
    mask = np.asarray(trace.mask)
    if mask.shape[1] != problem.n_clients:
        raise ValueError(f"trace has {mask.shape[1]} clients but the problem has {problem.n_clients}")
    initial = initial_weight(problem)
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    backend = {"client_resources": {"num_cpus": float(client_cpus), "num_gpus": 0.0},
               "init_args": {"num_cpus": int(cpus), "num_gpus": 0, "include_dashboard": False,
                             "logging_level": logging.ERROR, "log_to_driver": False}}
    out: dict = {}
    from ..flower import quiet_engine

    with quiet_engine():
        start = time.perf_counter()
        run_simulation(_server_app(mask, initial, out), client_app(factory, int(seed), float(eta_l), local_steps),
                       num_supernodes=problem.n_clients, backend_config=backend)
        total = time.perf_counter() - start
    if "seconds" not in out:
        raise RuntimeError("Flower's simulation ended without running the rounds")
    params = engine_params(out["weight"])
    return FlowerRun(params=params, round_seconds=out["seconds"], overhead_seconds=total - out["seconds"],
                     rounds=int(mask.shape[0]))
