"""The ServerApp and ClientApp of ``fedverify bench``'s Flower baseline, as a Flower App's components.

The App is the directory ``verify/bench/flower-app`` shipped in the package; its
``pyproject.toml`` names ``verify.bench.flower_workload:server_app`` and
``verify.bench.flower_workload:client_app``, which Flower imports in the processes ``flwr run``
starts (:func:`verify.bench.flower_baseline.run_flower` runs it through
:func:`verify.records.flower.run_app`). Importing this module imports Flower (``flwr``).

The App is written the way Flower's documentation writes a PyTorch app, on the message API: a
``ClientApp`` whose ``train`` function loads the global model into a ``torch.nn.Linear`` module,
runs ``local_steps`` steps of ``torch.optim.SGD`` on its own partition and replies with the new
weights, and a ``ServerApp`` that runs ``flwr.serverapp.strategy.FedAvg``. Its run config has two
keys, both paths:

* ``workload``: an ``.npz`` of plain arrays that ``run_flower`` writes (:func:`write_workload`) and
  the App reads without pickle (``np.load(..., allow_pickle=False)``): the problem's samples
  (``features``, ``labels``, ``owner`` = each sample's client), its mini-batch size and
  regularisation, the participation ``mask`` (T, N), the ``initial`` (classes, features) float32
  weight, the batch ``seed``, ``eta_l`` and ``local_steps``;
* ``result``: the JSON file the ServerApp writes at the end (:func:`read_result`): the final
  ``weight``, the wall time of the rounds ``round-seconds`` (``strategy.start`` from its first to
  its last round, measured in the ServerApp), and the wall-clock times ``rounds-start`` and
  ``rounds-end`` (``time.time()``) of those rounds, from which ``run_flower`` splits what
  ``flwr run`` spends before and after them.

Before the timed rounds a query round asks every SuperNode for its partition id; answering it,
each ClientApp process reads the workload's samples once and keeps its clients' data
(messages carry only the model), as a warm deployment would have its data loaded.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from algorithms.noise import NoiseStream

__all__ = ["SharedBatches", "local_training", "write_workload", "read_workload", "read_result", "fedavg_rounds",
           "server_app", "client_app", "WORKLOAD_KEY", "RESULT_KEY"]

#: The run config's keys (the App's ``[tool.flwr.app.config]``).
WORKLOAD_KEY = "workload"
RESULT_KEY = "result"
_EQUAL_WEIGHT = "client-weight"
_CONNECT_TIMEOUT = 300.0


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


# --- the run config's files ------------------------------------------------------------------

def write_workload(path, *, problem, mask, initial, seed: int, eta_l: float, local_steps: int) -> Path:
    """Write the ``workload`` file the App reads: plain arrays of ``problem``'s samples (a
    multi-class ``Logistic``) and of the run, as an ``.npz`` (module docstring)."""
    path = Path(path)
    data = problem.data
    np.savez(path, features=np.asarray(data.features, dtype=np.float64), labels=np.asarray(data.labels, dtype=np.int64),
             owner=np.asarray(data.owner, dtype=np.int64), n_clients=np.int64(problem.n_clients),
             batch_size=np.int64(problem.batch_size), reg=np.float64(problem.reg),
             mask=np.asarray(mask, dtype=bool),
             initial=np.asarray(initial.detach().cpu() if hasattr(initial, "detach") else initial, dtype=np.float32),
             seed=np.int64(seed), eta_l=np.float64(eta_l), local_steps=np.int64(local_steps))
    return path


def _path(config, key: str) -> str:
    value = str(config.get(key, "") if hasattr(config, "get") else "")
    if not value:
        raise ValueError(f"the run config's {key!r} is empty: this App runs the workload that "
                         "verify.bench.flower_baseline.run_flower writes, and is run by it")
    return value


def read_workload(config) -> dict:
    """The workload of the run config ``config`` (its ``workload`` path), read without pickle:
    arrays as arrays, the scalars as Python numbers."""
    with np.load(_path(config, WORKLOAD_KEY), allow_pickle=False) as f:
        spec = {key: f[key] for key in f.files}
    for key in ("n_clients", "batch_size", "seed", "local_steps"):
        spec[key] = int(spec[key])
    for key in ("reg", "eta_l"):
        spec[key] = float(spec[key])
    return spec


def read_result(path) -> dict:
    """The ``result`` file the ServerApp wrote: ``weight`` (a float32 (classes, features) tensor),
    ``round-seconds``, ``rounds``, ``rounds-start`` and ``rounds-end``."""
    out = json.loads(Path(path).read_text(encoding="utf-8"))
    out["weight"] = torch.tensor(out["weight"], dtype=torch.float32)
    return out


def _write_json(path: str, value: dict) -> None:
    target = Path(path)
    partial = target.with_name(target.name + ".part")
    partial.write_text(json.dumps(value), encoding="utf-8")
    os.replace(partial, target)


# --- ClientApp -------------------------------------------------------------------------------

_LOADED: dict[str, tuple] = {}


def _client_data(config):
    """(per-client float32 features and labels, SharedBatches, reg, workload) of the run's
    workload, built once per process."""
    key = _path(config, WORKLOAD_KEY)
    if key not in _LOADED:
        spec = read_workload(config)
        owner, n = spec["owner"], spec["n_clients"]
        shards = [(torch.as_tensor(spec["features"][owner == i], dtype=torch.float32),
                   torch.as_tensor(spec["labels"][owner == i])) for i in range(n)]
        sizes = np.bincount(owner, minlength=n)
        batches = SharedBatches(spec["seed"], tuple(int(s) for s in sizes), spec["batch_size"])
        _LOADED[key] = (shards, batches, spec["reg"], spec)
    return _LOADED[key]


client_app = ClientApp()


@client_app.query()
def identify(msg: Message, context) -> Message:
    """The query round: load the data (before the timed rounds), answer the partition id."""
    _client_data(context.run_config)
    record = MetricRecord({"partition-id": int(context.node_config["partition-id"])})
    return Message(RecordDict({"identity": record}), reply_to=msg)


@client_app.train()
def train(msg: Message, context) -> Message:
    """``local_steps`` SGD steps on this partition from the received weight, the engine's batches."""
    client = int(context.node_config["partition-id"])
    t = int(msg.content["config"]["server-round"]) - 1
    shards, batches, reg, spec = _client_data(context.run_config)
    features, labels = shards[client]
    weight = msg.content["arrays"].to_torch_state_dict()["weight"]
    new = local_training(weight, features, labels, (batches.rows(client, t, k) for k in range(spec["local_steps"])),
                         spec["eta_l"], reg)
    metrics = MetricRecord({"num-examples": int(labels.shape[0]), _EQUAL_WEIGHT: 1.0})
    return Message(RecordDict({"arrays": ArrayRecord({"weight": new}), "metrics": metrics}), reply_to=msg)


# --- ServerApp -------------------------------------------------------------------------------

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


def fedavg_rounds(grid: Grid, mask: np.ndarray, initial: torch.Tensor) -> dict:
    """Find which SuperNode holds which partition (the query round), then FedAvg along ``mask``
    from ``initial``: {``weight``: the final weight, ``round-seconds``: the rounds' wall time,
    ``rounds-start``/``rounds-end``: their wall-clock times, ``rounds``: T}."""
    from ..records.flower import wait_for_nodes

    mask = np.asarray(mask, dtype=bool)
    nodes = wait_for_nodes(grid, mask.shape[1], _CONNECT_TIMEOUT)
    replies = list(grid.send_and_receive([Message(RecordDict(), dst_node_id=node, message_type=MessageType.QUERY)
                                          for node in nodes]))
    failed = [msg.error.reason for msg in replies if msg.has_error()]
    node_of = {int(msg.content["identity"]["partition-id"]): msg.metadata.src_node_id for msg in replies
               if not msg.has_error()}
    if len(node_of) != mask.shape[1]:
        why = f": {failed[0].strip().splitlines()[-1]}" if failed else ""
        raise RuntimeError(f"{len(node_of)} of {mask.shape[1]} SuperNodes answered{why}")
    strategy = _TraceFedAvg(mask, node_of)
    wall, start = time.time(), time.perf_counter()
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord({"weight": initial}), num_rounds=mask.shape[0])
    seconds = time.perf_counter() - start
    arrays = result.arrays if result.arrays is not None and len(result.arrays) else None
    weight = arrays.to_torch_state_dict()["weight"] if arrays is not None else initial
    return {"weight": weight, "round-seconds": seconds, "rounds-start": wall, "rounds-end": wall + seconds,
            "rounds": int(mask.shape[0])}


server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context) -> None:
    """Run the workload's rounds and write the ``result`` file."""
    result_path = _path(context.run_config, RESULT_KEY)
    spec = read_workload(context.run_config)
    out = fedavg_rounds(grid, spec["mask"], torch.as_tensor(spec["initial"], dtype=torch.float32))
    _write_json(result_path, {**out, "weight": out["weight"].to(torch.float32).tolist()})
