"""Flower runs as fedverify run records, with a participation trace fedverify chooses.

Flower (``flwr`` ≥ 1.41, its Message API) is optional: ``import verify.flower`` never imports
it, and whatever needs it imports it when used, failing with one line that says
``install with pip install "fedverify[flower]"`` when it is absent. Flower's Simulation Runtime
(what :func:`run_app` and :func:`simulate` run) also needs Ray, Flower's ``simulation`` extra.

What the pieces do
------------------
* :class:`RecordingStrategy` (``from verify.flower import RecordingStrategy``) wraps a Flower
  strategy of the Message API, e.g. ``flwr.serverapp.strategy.FedAvg``, and is itself one:
  a ``ServerApp`` calls its ``start(grid=..., initial_arrays=..., num_rounds=...)`` as it
  would the wrapped strategy's. Each training round it

  - calls ``measure(arrays)`` (the user's callback) on the global model the round starts from
    and keeps the numbers it returns (e.g. ``grad_norm2`` = ‖∇f(x_t)‖², ``loss`` = f(x_t);
    :func:`problem_measure` makes this callback for a fedverify problem);
  - with ``trace=`` (a ``participation.Trace``, a (T, N) 0/1 mask or a pattern such as
    ``participation.preset("P1", ...)`` with ``seed=``) sends the training messages exactly to
    the nodes whose partition ids are in S_t (below); without it the wrapped strategy samples
    as it always does;
  - writes one round of a ``verify.records.RunRecorder``: ``selected`` = the partition ids
    sent a training message, ``replied`` = those whose reply came back without an error
    before the round's timeout, and the measured numbers.

* Partition ids. Flower gives each node (SuperNode) a random 64-bit node id, new in every
  run, so node ids cannot name clients across runs; the partition id can (in Flower's
  simulation engine node i has ``context.node_config["partition-id"] == i``; in a deployment
  the operator sets it, ``flower-supernode --node-config "partition-id=3 num-partitions=10"``).
  Chosen design: a discovery query. Before its first round the strategy waits until N nodes
  are connected and sends every node one message of type ``"query.fedverify_partition"``;
  the ClientApp answers with its partition id (:func:`answer_partition_queries` registers that
  answer on a ``ClientApp``). The alternative, a partition id inside every training reply,
  would be known only after a round was sent, too late to send round 0 to S_0, and
  ``FedAvg`` would average it into its train metrics. The query costs one message per node;
  in the simulation engine it also absorbs Ray's start-up, which then does not fall in round 0.
  A known mapping can be passed as ``partitions={partition_id: node_id}`` instead.

* :func:`sgd_client_app` is a ready ``ClientApp`` for a fedverify problem: plain local SGD,
  K steps x ← x − η_l g_i(x) from the global model, replying with the new local model and an
  equal weight (``num-examples`` = 1), so that ``FedAvg``'s weighted mean is the plain mean over
  the replies, (1/|S_t|) Σ_{i∈S_t}, the aggregation of fedverify's ``fedavg`` with η_g = 1. Its
  gradient noise of round t, step k comes from ``algorithms.NoiseStream(seed)`` at (t, k, its
  client) as in fedverify's engine, so a Flower run repeats ``algorithms.run(get("fedavg", ...),
  problem, trace, seed)`` up to floating-point rounding.

* :func:`run_app` runs a Flower App directory the way Flower supports, ``flwr run APP local
  --stream`` (a SuperLink in simulation mode that the CLI starts, on free ports and a Flower home
  of its own, stopped afterwards), with the run config and the federation's size and CPUs given
  in Python, and returns the run's log and wall time; a run that fails raises a
  :class:`FlowerRunError` carrying Flower's reason. ``examples/flower_app`` in the source tree is
  such an App: its ServerApp wraps Flower's FedAvgM or FedAvg in :class:`RecordingStrategy` and
  its ClientApp is :func:`sgd_client_app`.

* :func:`simulate` runs a ``ServerApp`` and a ``ClientApp`` defined as Python objects through
  ``flwr.simulation.run_simulation``, which Flower 1.42 marks deprecated (each call issues a
  FutureWarning naming :func:`run_app`), with the lightest settings that work (Ray with no
  dashboard, one CPU per ClientApp, quiet logs, telemetry off unless the environment says
  otherwise), and puts back ``PYTHONPATH``, which Flower's Ray backend rewrites in the calling
  process.

Server momentum: FedAvgM recorded as fedverify's ``fedavgm``
------------------------------------------------------------
Flower's ``FedAvgM(server_learning_rate=η', server_momentum=β)`` (Message API, Hsu et al. 2019)
aggregates as ``FedAvg`` does (x̄ the weighted mean of the replies), then, in the convention of
``torch.optim.SGD``: pseudo-gradient Δ_t = x_t − x̄, momentum v_t = βv_{t−1} + Δ_t (its first
value is the first Δ, which is βv + Δ at v = 0), x_{t+1} = x_t − η'v_t; a round without replies
leaves x and v as they were. With equal weights (``sgd_client_app`` replies with weight 1) x̄ is the
plain mean over S_t, Δ_t = (1/|S_t|) Σ_{i∈S_t} (x_t − x^i_{t,K}) and the update is exactly
fedverify's ``fedavgm`` (``algorithms.get("fedavgm", eta_g=η', beta=β, ...)``, v ← βv + Δ,
x ← x − η'v), which Server momentum (Sun, Wu, Huang, Zhang, AAAI 2024, arXiv:2312.12670) Sec. 3
writes as FedGM(η = η'/(1 − β), β, ν = 1); with β = 0 it is FedAvg with server rate η_g = η',
FedGM with ν = 0. :func:`record_header` writes the header that says so, so that the record is
judged against ``momentum.theorem_4_1`` (every client every round) or ``momentum.theorem_4_6``
(m clients uniformly without replacement: ``availability={"model": "uniform", "m": m}``). Flower's
weights are the replies' ``num-examples``: with unequal weights x̄ is a weighted mean, which the
theorems do not cover, and the header cannot say otherwise; keep the weights equal.

Round indexing and what a record means
--------------------------------------
Flower numbers rounds from 1 (``server_round``); the record numbers them from 0: round t of
the record is Flower's ``server_round = t + 1`` (plus ``recorder.next_round`` when a record is
resumed; the strategy also writes t into the training config as ``"fedverify-round"``). The
numbers of round t are measured at x_t, the model round t starts from, before any client
trains (x_0 = ``initial_arrays``); x_T, after the last round, is measured into
``final_metrics`` and not recorded, since FedSUM's left side (1/T) Σ_{t<T} ‖∇f(x_t)‖² does not
use it. For the FedSUM bounds (Theorem 4.1, Corollary 4.1) the participation of round t is
S_t = ``replied``: the clients whose update reached the aggregate (``verify.check_run`` reads
the record so); ``selected`` \\ ``replied`` are the clients that were sent work and failed or
missed the timeout. A training reply counts as replied whether or not a robust aggregator
then discards it.

Imposed participation
---------------------
Round t is sent to the nodes of S_t = {i : trace[t, i]}, whatever Flower's global ``random``
holds: the selection is the trace's, and the wrapped strategy's own sampling, which it still
runs to build the message content, is given this round's minimums (``min_train_nodes`` and
``min_available_nodes`` set to |S_t|, at most the connected nodes) so that it never waits
for more nodes than the round needs, and runs with ``random``'s state saved and restored, so
an imposed run leaves ``random`` as it found it. An empty S_t sends nothing: the round is
skipped (the model stays x_t, as in fedverify's engine) and still recorded, with empty
``selected`` and ``replied``. The content the wrapped strategy builds for its first message is
sent to every node of S_t; strategies that send the same content to all nodes (``FedAvg``
and those built on it) are the ones this is meant for. Evaluation rounds are left to the
wrapped strategy (pass ``fraction_evaluate=0.0`` to ``FedAvg`` to skip them).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import logging
import math
import numbers
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
from participation.validation import finite_real, integer, quote

#: The one line a missing Flower gives.
INSTALL_HINT = 'install with pip install "fedverify[flower]"'
#: The action of the discovery query; its message type is ``"query." + PARTITION_ACTION``.
PARTITION_ACTION = "fedverify_partition"
PARTITION_QUERY = f"query.{PARTITION_ACTION}"
#: The key of the partition id in the discovery reply's MetricRecord (Flower's own name for it).
PARTITION_KEY = "partition-id"
#: The training config key carrying the record's round t.
ROUND_KEY = "fedverify-round"

# ``RecordingStrategy`` is public too; it is left out of ``__all__`` so that a star import
# works without Flower (the class subclasses Flower's ``Strategy`` and is built on first use).
__all__ = ["INSTALL_HINT", "PARTITION_ACTION", "PARTITION_QUERY", "ROUND_KEY", "flower_available",
           "require_flower", "answer_partition_queries", "discover_partitions", "check_partitions",
           "resolve_trace", "vector_of", "arrays_like", "arrays_of", "problem_measure", "sgd_client_app",
           "simulate", "backend_config", "record_header", "run_app", "AppRun", "FlowerRunError", "format_run_config",
           "flower_processes", "stop_processes", "FLWR_RUN_DOCS", "SIMULATION_DOCS"]


# --- Flower, imported on use ---------------------------------------------------------------

def flower_available() -> bool:
    """Whether ``flwr`` can be found (without importing it)."""
    return importlib.util.find_spec("flwr") is not None


def require_flower():
    """The ``flwr`` module; a ModuleNotFoundError of one line when Flower is not installed."""
    try:
        return importlib.import_module("flwr")
    except ImportError as err:
        missing = (err.name or "flwr").split(".")[0]
        if missing == "flwr":
            raise ModuleNotFoundError(f"Flower (flwr) is not installed: {INSTALL_HINT}", name="flwr") from None
        raise ModuleNotFoundError(f"Flower (flwr) cannot be imported, {missing} is missing: {INSTALL_HINT}",
                                  name=missing) from None


def __getattr__(name):
    if name == "RecordingStrategy":
        cls = _recording_strategy_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | {"RecordingStrategy"})


# --- model arrays <-> vectors --------------------------------------------------------------

def vector_of(arrays) -> np.ndarray:
    """The arrays of a Flower ``ArrayRecord`` flattened and joined in the record's order, float64."""
    parts = [np.asarray(array.numpy(), dtype=np.float64).reshape(-1) for array in arrays.values()]
    return np.concatenate(parts) if parts else np.zeros(0)


def arrays_like(arrays, vector):
    """An ``ArrayRecord`` with the keys, shapes and dtypes of ``arrays`` holding ``vector``."""
    require_flower()
    from flwr.app import Array, ArrayRecord

    vector = np.asarray(vector).reshape(-1)
    out, at = {}, 0
    for key, array in arrays.items():
        shape = tuple(array.shape)
        size = int(np.prod(shape, dtype=np.int64))
        out[key] = Array(np.ascontiguousarray(vector[at:at + size].reshape(shape), dtype=array.dtype))
        at += size
    if at != vector.size:
        raise ValueError(f"the vector has {vector.size} entries, the arrays {at}")
    return ArrayRecord(out)


def arrays_of(x, key: str = "x"):
    """A flat model vector (numpy or torch) as an ``ArrayRecord`` with one float64 array ``key``."""
    require_flower()
    from flwr.app import Array, ArrayRecord

    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return ArrayRecord({key: Array(np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1)))})


def problem_measure(problem) -> Callable[[object], dict]:
    """``measure`` for :class:`RecordingStrategy` on a fedverify problem: arrays ↦
    {``grad_norm2``: ‖∇f(x)‖², ``loss``: f(x), ``heterogeneity``: (1/N) Σ_i ‖∇f_i(x) − ∇f(x)‖²,
    ``heterogeneity_max``: max_i ‖∇f_i(x) − ∇f(x)‖²} (and ``accuracy`` where the problem has
    one), x the arrays flattened as :func:`vector_of` does, in the problem's dtype and device.
    The heterogeneity is what the Server momentum (A3) and LOGIT (Assumption 4) theorems read."""
    import torch

    def measure(arrays) -> dict:
        x = torch.as_tensor(vector_of(arrays), dtype=problem.dtype, device=problem.device)
        if x.shape != (problem.dim,):
            raise ValueError(f"the model has {x.numel()} entries, the problem {problem.dim}")
        grads = problem.client_grads(x)
        mean = grads.mean(dim=0)
        spread = (grads - mean).square().sum(dim=1)
        values = {"grad_norm2": float(problem.full_grad(x).square().sum()), "loss": float(problem.loss(x)),
                  "heterogeneity": float(spread.mean()), "heterogeneity_max": float(spread.max())}
        accuracy = problem.accuracy(x) if hasattr(problem, "accuracy") else None
        if accuracy is not None:
            values["accuracy"] = float(accuracy)
        return values

    return measure


# --- participation: partition ids and traces -----------------------------------------------

def check_partitions(answers: Mapping[int, object], n_clients: int) -> dict[int, int]:
    """{partition id: node id} from the answers {node id: partition id} of N nodes; a one-line
    ValueError unless the partition ids are exactly 0..N−1, each once."""
    node_of: dict[int, int] = {}
    for node, partition in answers.items():
        if isinstance(partition, bool) or not isinstance(partition, numbers.Real) or partition != int(partition):
            raise ValueError(f"node {node} answered partition id {partition!r}, not an integer")
        partition = int(partition)
        if not 0 <= partition < n_clients:
            raise ValueError(f"node {node} has partition id {partition}, outside 0..{n_clients - 1} (n_clients = {n_clients})")
        if partition in node_of:
            raise ValueError(f"nodes {node_of[partition]} and {node} both have partition id {partition}")
        node_of[partition] = int(node)
    missing = sorted(set(range(n_clients)) - set(node_of))
    if missing:
        raise ValueError(f"no node has partition id {missing[0]}" + (f" (nor {len(missing) - 1} others)" if len(missing) > 1 else "")
                         + f": {len(node_of)} of {n_clients} partitions answered")
    return node_of


def resolve_trace(trace, rounds: int, *, start: int = 0, seed=None, n_clients: int | None = None) -> np.ndarray:
    """The participation of rounds ``start .. start+rounds−1`` as a (rounds, N) bool mask.

    ``trace``: a ``participation.Trace``, a (T, N) 0/1 array (its rows are rounds 0..T−1, so T
    must reach ``start + rounds``), or a pattern (``participation.preset(...)`` or any
    ``participation.patterns`` pattern), sampled for exactly these rounds with ``seed``."""
    from participation.patterns.base import Pattern
    from participation.trace import as_mask

    if isinstance(trace, Pattern):
        mask = np.asarray(trace.sample(rounds, seed, start=start).mask, dtype=bool)
    else:
        mask = as_mask(trace.mask if hasattr(trace, "mask") else trace, what="trace")
        if mask.shape[0] < start + rounds:
            raise ValueError(f"the trace has {mask.shape[0]} rounds; the run needs rounds {start}..{start + rounds - 1}")
        mask = mask[start:start + rounds]
    if n_clients is not None and mask.shape[1] != n_clients:
        raise ValueError(f"the trace has {mask.shape[1]} clients, the run {n_clients}")
    return mask


# --- the ClientApp side of the discovery query ---------------------------------------------

def answer_partition_queries(app):
    """Register on a Flower ``ClientApp`` (Message API) the answer to fedverify's discovery
    query: a MetricRecord ``{"partition-id": context.node_config["partition-id"]}``. Returns ``app``."""
    require_flower()
    from flwr.app import Message, MetricRecord, RecordDict

    @app.query(PARTITION_ACTION)
    def _fedverify_partition(msg, context):
        if PARTITION_KEY not in context.node_config:
            raise ValueError("this SuperNode has no partition-id in its node config: start it with "
                             "--node-config \"partition-id=<i> num-partitions=<N>\"")
        partition = int(context.node_config[PARTITION_KEY])
        return Message(RecordDict({"fedverify": MetricRecord({PARTITION_KEY: partition})}), reply_to=msg)

    return app


def wait_for_nodes(grid, n: int, timeout: float) -> list[int]:
    """The ids of the n nodes (SuperNodes) of ``grid``, once they have all connected."""
    deadline = time.monotonic() + timeout
    while len(nodes := list(grid.get_node_ids())) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(nodes)} of {n} nodes connected within {timeout:g} s")
        time.sleep(0.02)
    return nodes


def _last_line(text) -> str:
    lines = [line for line in str(text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no reason given"


def discover_partitions(grid, n_clients: int, *, connect_timeout: float = 300.0, timeout: float = 600.0) -> dict[int, int]:
    """{partition id: node id} of the N nodes of ``grid`` (a Flower ``Grid``): waits up to
    ``connect_timeout`` s for N nodes, sends each the discovery query and waits up to ``timeout``
    s for the answers (in the simulation engine the first answer waits for Ray to start)."""
    require_flower()
    from flwr.app import Message, RecordDict

    nodes = wait_for_nodes(grid, n_clients, connect_timeout)
    queries = [Message(RecordDict(), dst_node_id=int(node), message_type=PARTITION_QUERY) for node in nodes]
    answers, failed = {}, []
    for reply in grid.send_and_receive(queries, timeout=timeout):
        src = int(reply.metadata.src_node_id)
        if reply.has_error():
            failed.append((src, _last_line(reply.error.reason)))
            continue
        records = list(reply.content.metric_records.values())
        value = records[0].get(PARTITION_KEY) if records else None
        if value is None:
            failed.append((src, "its reply carries no partition-id"))
        else:
            answers[src] = value
    if failed:
        src, why = failed[0]
        raise RuntimeError(f"node {src} did not answer fedverify's partition query ({why}); register the answer on "
                           "the ClientApp with verify.flower.answer_partition_queries(app)")
    if len(answers) < len(nodes):
        silent = sorted(set(int(n) for n in nodes) - set(answers))
        raise RuntimeError(f"{len(silent)} of {len(nodes)} nodes did not answer fedverify's partition query within "
                           f"{timeout:g} s (node {silent[0]} among them)")
    return check_partitions(answers, n_clients)


# --- a ClientApp of plain local SGD on a fedverify problem ---------------------------------

def sgd_client_app(problem, eta_l: float, local_steps: int, seed=0, *, weight_key: str = "num-examples"):
    """A Flower ``ClientApp`` in which the node of partition i trains ``problem``'s client i.

    Train: from the received model x (the message's ArrayRecord, any layout of ``problem.dim``
    numbers), K = ``local_steps`` steps y ← y − η_l g_i(y), g_i the problem's stochastic
    gradient with the noise of ``algorithms.NoiseStream(seed)`` at (round t, step k, client i), t
    read from the config (``"fedverify-round"``, else Flower's ``"server-round"`` − 1); replies y in x's
    layout and ``{weight_key: 1}``. Evaluate: replies ``{"loss": f_i(x), weight_key: 1}``.
    Query: answers fedverify's discovery query (:func:`answer_partition_queries`).
    """
    require_flower()
    import torch
    from flwr.app import Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from algorithms.base import positive_rate, step_count
    from algorithms.noise import NoiseStream

    eta_l = positive_rate(eta_l, "eta_l")
    local_steps = step_count(local_steps, "local_steps")
    noise = NoiseStream(seed)
    app = answer_partition_queries(ClientApp())

    def model(msg):
        records = list(msg.content.array_records.values())
        if len(records) != 1:
            raise ValueError(f"expected one ArrayRecord (the model), got {len(records)}")
        x = torch.as_tensor(vector_of(records[0]), dtype=problem.dtype, device=problem.device)
        if x.shape != (problem.dim,):
            raise ValueError(f"the model has {x.numel()} entries, the problem {problem.dim}")
        return records[0], x

    def client_of(context):
        client = int(context.node_config[PARTITION_KEY])
        if not 0 <= client < problem.n_clients:
            raise ValueError(f"partition id {client} is outside the problem's 0..{problem.n_clients - 1}")
        return client

    @app.train()
    def train(msg, context):
        client = client_of(context)
        arrays, x = model(msg)
        config = next(iter(msg.content.config_records.values()), {})
        t = int(config[ROUND_KEY]) if ROUND_KEY in config else int(config.get("server-round", 1)) - 1
        clients = torch.tensor([client], device=problem.device)
        y = x.unsqueeze(0)
        for k in range(local_steps):
            y = y - eta_l * problem.stochastic_grads(y, clients, noise.draws(t, k, clients))
        reply = RecordDict({"arrays": arrays_like(arrays, y[0].detach().cpu().numpy()),
                            "metrics": MetricRecord({weight_key: 1})})
        return Message(reply, reply_to=msg)

    @app.evaluate()
    def evaluate(msg, context):
        client = client_of(context)
        _, x = model(msg)
        loss = float(problem.client_losses(x)[client]) if hasattr(problem, "client_losses") else float("nan")
        return Message(RecordDict({"metrics": MetricRecord({"loss": loss, weight_key: 1})}), reply_to=msg)

    return app


# --- the strategy ---------------------------------------------------------------------------

def _finite_or_none(value):
    value = float(value)
    return value if math.isfinite(value) else None


@contextlib.contextmanager
def _round_minimums(strategy, count: int):
    """For the duration: the strategy's training minimums at ``count`` and ``random`` untouched."""
    names = [name for name in ("min_train_nodes", "min_available_nodes") if hasattr(strategy, name)]
    saved = {name: getattr(strategy, name) for name in names}
    state = random.getstate()
    try:
        for name in names:
            setattr(strategy, name, count)
        yield
    finally:
        for name, value in saved.items():
            setattr(strategy, name, value)
        random.setstate(state)


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


def _recording_strategy_class():
    require_flower()
    from flwr.app import ConfigRecord, Message, MessageType, RecordDict
    from flwr.serverapp.strategy import Strategy

    log = logging.getLogger("flwr")

    class RecordingStrategy(Strategy):
        """A Flower strategy that records its rounds and, optionally, imposes a trace (see
        ``verify.flower``).

        ``RecordingStrategy(strategy, recorder=None, *, trace=None, seed=None, measure=None,
        n_clients=None, partitions=None, connect_timeout=300.0, query_timeout=600.0)``:

        * ``strategy``: the wrapped Flower strategy (Message API), e.g. ``FedAvg(...)``;
        * ``recorder``: a ``verify.records.RunRecorder`` (None: keep the rounds in ``rounds``
          only); a resumed recorder continues at its ``next_round``;
        * ``trace``: None (the strategy samples), a ``participation.Trace`` or (T, N) mask, or a
          pattern sampled with ``seed`` for the rounds of the run;
        * ``measure``: ``arrays -> {name: number}`` at the model each round starts from
          (:func:`problem_measure`); a number that is not finite is recorded as null;
        * ``n_clients``: N, when neither the recorder nor the trace gives it;
        * ``partitions``: {partition id: node id} when known; else found by the discovery query.

        After ``start``: ``rounds`` (one dict per round: ``round``, ``selected``, ``replied``
        and the measured numbers), ``final_metrics`` (``measure`` at x_T), ``partitions``,
        ``mask`` (the imposed S_t of the run's rounds, or None) and ``round_seconds`` (wall
        time of each round from its configuration to its aggregation).
        """

        def __init__(self, strategy, recorder=None, *, trace=None, seed=None,
                     measure: Callable[[object], Mapping] | None = None, n_clients: int | None = None,
                     partitions: Mapping[int, int] | None = None, connect_timeout: float = 300.0,
                     query_timeout: float = 600.0):
            if isinstance(strategy, RecordingStrategy):
                raise ValueError("the strategy is already a RecordingStrategy")
            self.strategy, self.recorder, self.measure = strategy, recorder, measure
            self._trace, self._seed = trace, seed
            sizes = {"the recorder": getattr(recorder, "n_clients", None), "n_clients": n_clients,
                     "the trace": _trace_clients(trace)}
            given = {k: int(v) for k, v in sizes.items() if v is not None}
            if not given:
                raise ValueError("the number of clients is unknown: pass a recorder, a trace or n_clients")
            if len(set(given.values())) > 1:
                (a, na), (b, nb) = list(given.items())[:2]
                raise ValueError(f"{a} has {na} clients but {b} has {nb}")
            self.n_clients = next(iter(given.values()))
            self.connect_timeout, self.query_timeout = float(connect_timeout), float(query_timeout)
            self.partitions = check_partitions({v: k for k, v in partitions.items()}, self.n_clients) \
                if partitions is not None else None
            self.mask = None
            self.first_round = 0
            self.rounds: list[dict] = []
            self.round_seconds: list[float] = []
            self.final_metrics: dict | None = None
            self._pending = None
            self._prepared = False

        # -- set-up ------------------------------------------------------------------
        def prepare(self, grid, num_rounds: int | None) -> None:
            """Find the partitions (unless given) and the trace's S_t for the rounds to come;
            ``start`` calls it; call it yourself before driving the rounds by hand."""
            self.first_round = int(self.recorder.next_round) if self.recorder is not None else 0
            if self._trace is not None:
                if num_rounds is None:
                    from participation.patterns.base import Pattern

                    if isinstance(self._trace, Pattern):
                        raise ValueError("a pattern needs the number of rounds: call prepare(grid, num_rounds)")
                    num_rounds = _trace_rounds(self._trace) - self.first_round
                    if num_rounds < 1:
                        raise ValueError(f"the trace has {_trace_rounds(self._trace)} rounds, all of them recorded")
                self.mask = resolve_trace(self._trace, int(num_rounds), start=self.first_round, seed=self._seed,
                                          n_clients=self.n_clients)
            if self.partitions is None:
                self.partitions = discover_partitions(grid, self.n_clients, connect_timeout=self.connect_timeout,
                                                      timeout=self.query_timeout)
            self._node_partition = {node: p for p, node in self.partitions.items()}
            self._prepared = True

        def start(self, grid, initial_arrays, num_rounds: int = 3, timeout: float = 3600,
                  train_config=None, evaluate_config=None, evaluate_fn=None):
            """Flower's ``Strategy.start`` after :meth:`prepare`; also measures x_T."""
            self.prepare(grid, num_rounds)
            result = super().start(grid=grid, initial_arrays=initial_arrays, num_rounds=num_rounds, timeout=timeout,
                                   train_config=train_config, evaluate_config=evaluate_config, evaluate_fn=evaluate_fn)
            if self.measure is not None:
                final = result.arrays if result.arrays is not None and len(result.arrays) else initial_arrays
                self.final_metrics = self._measured(final)
            return result

        # -- rounds ------------------------------------------------------------------
        def _partition(self, node: int, what: str) -> int:
            try:
                return self._node_partition[int(node)]
            except KeyError:
                raise RuntimeError(f"node {node} ({what}) did not answer the partition query; "
                                   "its partition id is unknown") from None

        def _measured(self, arrays) -> dict:
            if self.measure is None:
                return {}
            values = self.measure(arrays)
            if not isinstance(values, Mapping):
                raise ValueError(f"measure must return a mapping of names to numbers, got {type(values).__name__}")
            return {str(k): None if v is None else _finite_or_none(v) for k, v in values.items()}

        def _imposed(self, server_round: int, arrays, config, grid, active: list[int]) -> list:
            """Messages to the nodes of ``active`` carrying what the wrapped strategy would send."""
            if not active:
                return []
            connected = len(list(grid.get_node_ids()))
            with _round_minimums(self.strategy, max(1, min(len(active), connected))):
                template = list(self.strategy.configure_train(server_round, arrays, config, grid))
            if template:
                first = template[0]
                content, kind = first.content, first.metadata.message_type
                ttl, group = first.metadata.ttl, first.metadata.group_id or None
            else:   # the strategy trains nobody on its own (e.g. fraction_train=0): FedAvg's content
                config["server-round"] = server_round
                content = RecordDict({getattr(self.strategy, "arrayrecord_key", "arrays"): arrays,
                                      getattr(self.strategy, "configrecord_key", "config"): config})
                kind, ttl, group = MessageType.TRAIN, None, None
            return [Message(content, dst_node_id=self.partitions[i], message_type=kind, ttl=ttl, group_id=group)
                    for i in active]

        def configure_train(self, server_round, arrays, config, grid):
            if not self._prepared:
                self.prepare(grid, None)
            started = time.perf_counter()
            t = self.first_round + server_round - 1
            config = ConfigRecord() if config is None else config
            config[ROUND_KEY] = t
            metrics = self._measured(arrays)
            if self.mask is None:
                messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
            else:
                row = server_round - 1
                if not 0 <= row < self.mask.shape[0]:
                    raise ValueError(f"round {t}: the trace covers rounds {self.first_round}.."
                                     f"{self.first_round + self.mask.shape[0] - 1}")
                active = [int(i) for i in np.flatnonzero(self.mask[row])]
                messages = self._imposed(server_round, arrays, config, grid, active)
                log.info("fedverify: round %d trains partitions %s%s", t, active, "" if active else " (skipped)")
            selected = [self._partition(m.metadata.dst_node_id, "sent a training message") for m in messages]
            self._pending = {"server_round": server_round, "t": t, "selected": selected, "metrics": metrics,
                             "started": started}
            return messages

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            pending, self._pending = self._pending, None
            if pending is None or pending["server_round"] != server_round:
                raise RuntimeError(f"aggregate_train of round {server_round} without its configure_train")
            if pending["selected"]:
                aggregated = self.strategy.aggregate_train(server_round, replies)
            else:
                aggregated = (None, None)          # S_t = ∅: no training, the model stays x_t
            sent = set(pending["selected"])
            weights = self._example_weights(replies, sent)
            replied = sorted(weights)
            measured = {**pending["metrics"], **({"example_weights": self._per_client(weights)} if weights else {})}
            entry = {"round": pending["t"], "selected": sorted(sent), "replied": replied, **measured}
            if self.recorder is not None:
                self.recorder.record_round(pending["t"], entry["selected"], replied, **measured)
            self.rounds.append(entry)
            self.round_seconds.append(time.perf_counter() - pending["started"])
            return aggregated

        def _example_weights(self, replies, sent) -> dict[int, float]:
            """Partition id → the weight its reply carried into the wrapped strategy's weighted mean
            (``weighted_by_key``, Flower's "num-examples"), normalised over the round's replies; a
            reply without the key (a strategy that does not weight) counts 1."""
            key = getattr(self.strategy, "weighted_by_key", None)
            raw = {}
            for message in replies:
                if message.has_error():
                    continue
                partition = self._partition(message.metadata.src_node_id, "replied")
                if partition not in sent:
                    continue
                records = list(message.content.metric_records.values()) if key else []
                value = records[0].get(key, 1.0) if records else 1.0
                raw[partition] = float(value)
            total = sum(raw.values())
            return {i: (w / total if total > 0 else 1.0 / len(raw)) for i, w in raw.items()}

        def _per_client(self, weights: dict[int, float]) -> list:
            return [weights.get(i) for i in range(self.n_clients)]

        def configure_evaluate(self, server_round, arrays, config, grid):
            return self.strategy.configure_evaluate(server_round, arrays, config, grid)

        def aggregate_evaluate(self, server_round, replies):
            return self.strategy.aggregate_evaluate(server_round, replies)

        def summary(self) -> None:
            where = f"to {self.recorder.path}" if self.recorder is not None else "in memory"
            how = "an imposed trace" if self._trace is not None else "the strategy's own sampling"
            log.info("fedverify: recording %s, participation from %s, wrapping %s", where, how,
                     type(self.strategy).__name__)
            self.strategy.summary()

    RecordingStrategy.__module__ = __name__
    RecordingStrategy.__qualname__ = "RecordingStrategy"
    return RecordingStrategy


def _trace_clients(trace) -> int | None:
    if trace is None:
        return None
    if hasattr(trace, "n_clients"):
        return int(trace.n_clients)
    mask = np.asarray(trace)
    if mask.ndim != 2:
        raise ValueError(f"a trace mask must be 2-D (rounds, clients), got shape {mask.shape}")
    return int(mask.shape[1])


def _trace_rounds(trace) -> int:
    return int((trace.mask if hasattr(trace, "mask") else np.asarray(trace)).shape[0])


# --- the simulation engine ------------------------------------------------------------------

def backend_config(cpus: int | None = None, client_cpus: float = 1.0) -> dict:
    """Flower's simulation backend settings used by :func:`simulate`: Ray with ``cpus`` CPUs
    (default: those this process may use), ``client_cpus`` per ClientApp (so cpus/client_cpus
    ClientApps run at once), no GPU, no dashboard, Ray's logs at ERROR and not forwarded."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {"client_resources": {"num_cpus": float(client_cpus), "num_gpus": 0.0},
            "init_args": {"num_cpus": int(cpus), "num_gpus": 0, "include_dashboard": False,
                          "logging_level": logging.ERROR, "log_to_driver": False}}


@contextlib.contextmanager
def quiet_engine(quiet: bool = True):
    """Flower's and Ray's loggers at ERROR and warnings off (when ``quiet``); ``PYTHONPATH`` as it was."""
    pythonpath = os.environ.get("PYTHONPATH")
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
            disabled = logging.root.manager.disable
            logging.disable(logging.INFO)      # Ray logs and sets its logger's level when first imported
            try:
                importlib.import_module("ray")
            finally:
                logging.disable(disabled)
        loggers = [logging.getLogger(name) for name in ("flwr", "ray")] if quiet else []
        levels = [logger.level for logger in loggers]
        try:
            for logger in loggers:
                logger.setLevel(logging.ERROR)
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)
            if pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = pythonpath


def simulate(server_app, client_app, num_supernodes: int, *, cpus: int | None = None, client_cpus: float = 1.0,
             quiet: bool = True, config: dict | None = None) -> float:
    """Run a ``ServerApp`` and a ``ClientApp`` defined as Python objects in Flower's simulation
    engine through ``flwr.simulation.run_simulation``, with :func:`backend_config` (or
    ``config``); returns the wall time in seconds, Ray's start-up and shutdown included. Flower's
    telemetry and Ray's usage statistics are off unless the environment already sets them. An
    exception raised in the ServerApp is raised here.

    Flower 1.42 marks ``run_simulation`` deprecated, to be removed; each call issues one
    FutureWarning that says so. The supported path is a Flower App directory run by ``flwr run``:
    :func:`run_app` runs one (``examples/flower_app`` in the source tree is a Flower App whose
    ServerApp records its runs). ``quiet`` hides Flower's and Ray's own warnings and logs."""
    require_flower()
    if importlib.util.find_spec("ray") is None:
        raise ModuleNotFoundError("Flower's simulation engine needs Ray: install with pip install \"flwr[simulation]\"",
                                  name="ray")
    warnings.warn("verify.flower.simulate runs Flower's deprecated flwr.simulation.run_simulation; the supported path "
                  "is a Flower App run by flwr run: verify.flower.run_app", FutureWarning, stacklevel=2)
    for name, value in (("FLWR_TELEMETRY_ENABLED", "0"), ("RAY_USAGE_STATS_ENABLED", "0")):
        os.environ.setdefault(name, value)
    settings = config if config is not None else backend_config(cpus, client_cpus)
    with quiet_engine(quiet):
        from flwr.simulation import run_simulation

        start = time.perf_counter()
        run_simulation(server_app=server_app, client_app=client_app, num_supernodes=int(num_supernodes),
                       backend_config=settings)
        return time.perf_counter() - start


# --- flwr run: a Flower App directory run by a local SuperLink ------------------------------

#: Flower's documentation of what :func:`run_app` runs.
FLWR_RUN_DOCS = "https://flower.ai/docs/framework/ref-api-cli.html#flwr-run"
SIMULATION_DOCS = "https://flower.ai/docs/framework/how-to-run-simulations.html"

_RUN_CONFIG_KEY = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\Z")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TOML_INT = (-2 ** 63, 2 ** 63 - 1)
_STARTED_RUN = re.compile(r"Successfully started run (\d+)")


@dataclasses.dataclass(frozen=True)
class AppRun:
    """A finished ``flwr run`` (:func:`run_app`): ``log``, what the CLI printed (the run's log,
    streamed with ``--stream``; colour codes removed), ``seconds``, the wall time of the command
    (the SuperLink's start-up included), and ``command``, the command line."""
    log: str
    seconds: float
    command: tuple[str, ...]


class FlowerRunError(RuntimeError):
    """A ``flwr run`` that failed or ran past its timeout; the message is one line ending with the
    last meaningful line of Flower's log, ``log`` holds the whole log and ``returncode`` the CLI's
    exit status (None when it was stopped at the timeout)."""

    def __init__(self, message: str, log: str, returncode: int | None):
        super().__init__(message)
        self.log, self.returncode = log, returncode


def _toml_value(key: str, value) -> str:
    """``value`` as a TOML value Flower's ``--run-config`` parser reads back unchanged."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        if not _TOML_INT[0] <= int(value) <= _TOML_INT[1]:
            raise ValueError(f"run_config[{key!r}] = {int(value)} is outside TOML's 64-bit integers")
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))                  # 0.5, 1e-05, inf, -inf, nan: all TOML floats
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"run_config[{key!r}] is a {type(value).__name__}; Flower's run config takes a bool, "
                         "an int, a float or a str")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"run_config[{key!r}] = {quote(value)} holds a control character (a newline?), which "
                         "Flower's --run-config cannot carry")
    if "'" not in value:
        return f"'{value}'"                        # a TOML literal string: backslashes stay as they are
    if '"' not in value:
        return '"' + value.replace("\\", "\\\\") + '"'
    raise ValueError(f"run_config[{key!r}] = {quote(value)} holds both ' and \", which Flower's --run-config "
                     "cannot quote")


def format_run_config(run_config: Mapping) -> str:
    """``run_config`` ({key: bool, int, float, str or path}) in the syntax of ``flwr run
    --run-config``: space-separated ``key=value`` pairs whose values are TOML (strings quoted,
    numbers bare, booleans ``true``/``false``), e.g. ``{"seeds": 1, "strategy": "fedavg"}`` →
    ``seeds=1 strategy='fedavg'``. Keys are TOML bare keys (letters, digits, ``-``, ``_``; ``.``
    between the parts of a nested key). A key or value Flower's parser cannot read back is a
    one-line ValueError naming it."""
    if not isinstance(run_config, Mapping):
        raise ValueError(f"run_config must be a dict of keys to values, got {type(run_config).__name__}")
    pairs = []
    for key, value in run_config.items():
        if not isinstance(key, str) or not _RUN_CONFIG_KEY.match(key):
            raise ValueError(f"run_config key {key!r} is not one Flower's --run-config can parse: use letters, digits, "
                             "'-' and '_' ('.' between the parts of a nested key)")
        pairs.append(f"{key}={_toml_value(key, value)}")
    return " ".join(pairs)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command_lines():
    """(pid, command line, environment or None) of the processes this one can see: from
    ``/proc`` on Linux (the environment included), else psutil where installed, else ``ps``."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    environ = None
                yield int(entry.name), command.replace(b"\0", b" ").decode(errors="replace"), environ
        return
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        for p in psutil.process_iter(["pid", "cmdline"]):
            yield p.info["pid"], " ".join(p.info["cmdline"] or ()), None
        return
    if os.name == "posix":
        try:
            listing = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "args="], capture_output=True, text=True,
                                     timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return
        for line in listing.splitlines():
            pid, _, command = line.strip().partition(" ")
            if pid.isdigit():
                yield int(pid), command, None


def flower_processes(home) -> set[int]:
    """The ids of the processes that belong to the Flower home ``home``: those whose command line
    names it (the SuperLink ``flwr run`` starts logs to ``home/local-superlink``) or, on Linux,
    whose environment sets ``FLWR_HOME`` to it (the ServerApp and simulation processes it starts);
    this process excluded."""
    text = str(home)
    variable = f"\0FLWR_HOME={text}\0".encode()
    found = set()
    for pid, command, environ in _command_lines():
        if pid == os.getpid():
            continue
        if text in command or (environ is not None and variable in b"\0" + environ + b"\0"):
            found.add(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True                                 # exists, owned by someone else
    if Path("/proc").is_dir():                      # a zombie has exited: its state is Z
        with contextlib.suppress(OSError):
            return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def stop_processes(pids, grace: float = 5.0) -> None:
    """SIGTERM to each of ``pids``, then SIGKILL to those still running after ``grace`` seconds."""
    pids = set(pids)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (pids := {pid for pid in pids if _alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))


def _last_meaningful_line(log: str) -> str:
    """What ended the run, from its log: the exception line of the last traceback, else the last
    ``ERROR`` line, else the last line that says something (not blank, not only box drawing)."""
    lines = [line.rstrip() for line in log.splitlines()]
    tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if tracebacks:
        for line in lines[tracebacks[-1] + 1:]:
            if line and not line[0].isspace():
                return line.strip()
    errors = [line for line in lines if line.startswith("ERROR")]
    for line in reversed(errors or lines):
        text = line.strip().strip("│║╭╮╰╯─═ ").strip()
        if any(ch.isalnum() for ch in text):
            return text
    return "it printed nothing"


def _run_status(flwr: Path, run_id: int, env: dict, deadline: float) -> tuple[str, str]:
    """(status, details) of run ``run_id`` as the SuperLink reports it (``flwr ls --run-id``),
    waiting up to ``deadline`` for the run to finish. (Where the SuperLink has gone, ``flwr ls
    local`` starts another on the same home and ports; :func:`run_app` stops that one too.)"""
    while True:
        try:
            done = subprocess.run([str(flwr), "ls", "local", "--run-id", str(run_id), "--format", "json"], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=max(5.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return "unknown", "flwr ls did not answer"
        try:
            run = json.loads(_ANSI.sub("", done.stdout))["runs"][0]
            status, details = str(run["status"]), str(run.get("status-details") or "")
        except (ValueError, KeyError, IndexError, TypeError):
            status, details = "unknown", _last_meaningful_line(_ANSI.sub("", done.stdout + done.stderr))
        if status.startswith("finished") or status == "unknown" or time.monotonic() > deadline:
            return status, details
        time.sleep(0.2)


def _flwr_executable() -> Path:
    bin_dir = Path(sys.executable).parent
    for name in ("flwr", "flwr.exe"):
        if (bin_dir / name).is_file():
            return bin_dir / name
    raise ModuleNotFoundError(f"Flower's flwr command is not beside {sys.executable}: {INSTALL_HINT}", name="flwr")


def run_app(app_dir, *, run_config: Mapping | None = None, num_supernodes: int, cpus: int | None = None,
            client_cpus: int = 1, timeout: float = 600, flower_home=None, quiet: bool = True) -> AppRun:
    """Run the Flower App in ``app_dir`` (a directory with its ``pyproject.toml``) as Flower runs
    Apps: ``flwr run APP_DIR local --stream --run-config ... --federation-config
    "num-supernodes=N client-resources-num-cpus=C init-args-num-cpus=CPUS"``, the ``flwr``
    command beside this Python, in a subprocess. ``local`` is the connection of Flower's default
    configuration: the CLI starts a SuperLink in simulation mode (the Simulation Runtime, on
    Ray), submits the App, streams its log and returns when the run ends. Returns an
    :class:`AppRun`. Flower's documentation: ``flwr run``, its ``--run-config`` and
    ``--federation-config``, https://flower.ai/docs/framework/ref-api-cli.html#flwr-run
    (:data:`FLWR_RUN_DOCS`); the simulation settings (``num-supernodes``,
    ``client-resources-num-cpus``, ``init-args-num-cpus``),
    https://flower.ai/docs/framework/how-to-run-simulations.html (:data:`SIMULATION_DOCS`).

    * ``run_config``: overrides of the App's ``[tool.flwr.app.config]``, written with
      :func:`format_run_config`; Flower refuses a key the App does not have, and the run fails.
    * ``num_supernodes``: N virtual SuperNodes (node i has ``partition-id`` i);
      ``cpus``: the CPUs Ray may use (default: those this process may use); ``client_cpus``:
      CPUs per ClientApp, a whole number as Flower's federation config takes it, so
      cpus // client_cpus ClientApps run at once.
    * ``flower_home``: the ``FLWR_HOME`` of the run (Flower writes its ``config.toml`` there and
      the SuperLink its database and log under ``local-superlink/``); default a temporary
      directory, removed afterwards. The SuperLink listens on two free ports
      (``FLWR_LOCAL_SUPERLINK_HTTP_API_PORT``, ``FLWR_LOCAL_CONTROL_API_PORT``), so a run never
      reaches a SuperLink that was already running.
    * The subprocess has Flower's telemetry, its update check and Ray's usage statistics off
      (``FLWR_TELEMETRY_ENABLED=0``, ``FLWR_DISABLE_UPDATE_CHECK=1``,
      ``RAY_USAGE_STATS_ENABLED=0``) and the directory holding fedverify's packages first on
      ``PYTHONPATH``, so that the App can import them.
    * The CLI leaves the SuperLink running, as Flower intends; ``run_app`` stops it, and the
      processes it started, whether the run succeeded, failed or timed out: those of
      :func:`flower_processes` for the Flower home that were not running before. The CLI runs in
      a session of its own, whose process group is killed at the timeout.
    * ``quiet``: when False, the log is also printed as it comes.

    The run's outcome is the SuperLink's status of it (``flwr ls --run-id``, read before the
    SuperLink is stopped), since the CLI exits with 0 also when the ServerApp raised. A run that
    did not end ``finished:completed``, a CLI that exits with another status and a run still
    going after ``timeout`` seconds are a :class:`FlowerRunError` (a RuntimeError) whose one-line
    message ends with the last meaningful line of Flower's log (the exception that ended the run,
    where there is one); the whole log is its ``log``. Bad arguments are a one-line
    ValueError naming the value; a missing Flower or Ray the one-line ModuleNotFoundError of
    :func:`require_flower`."""
    app = Path(app_dir).expanduser()
    if not (app / "pyproject.toml").is_file():
        raise ValueError(f"app_dir {str(app_dir)!r} has no pyproject.toml: it is not a Flower App directory")
    nodes = integer(num_supernodes, "num_supernodes")
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cpus = integer(cpus, "cpus")
    if isinstance(client_cpus, float) and client_cpus.is_integer():
        client_cpus = int(client_cpus)
    client_cpus = integer(client_cpus, "client_cpus")
    if client_cpus > cpus:
        raise ValueError(f"client_cpus = {client_cpus} is more than cpus = {cpus}: no ClientApp could run")
    timeout = finite_real(timeout, "timeout", above=0)
    overrides = format_run_config(run_config) if run_config else ""
    require_flower()
    if importlib.util.find_spec("ray") is None:
        raise ModuleNotFoundError("Flower's simulation engine needs Ray: install with pip install \"flwr[simulation]\"",
                                  name="ray")
    flwr = _flwr_executable()
    command = [str(flwr), "run", str(app.resolve()), "local", "--stream"]
    if overrides:
        command += ["--run-config", overrides]
    command += ["--federation-config",
                f"num-supernodes={nodes} client-resources-num-cpus={client_cpus} init-args-num-cpus={cpus}"]
    root = str(Path(__file__).resolve().parents[1])          # the directory holding verify/, participation/, ...
    with contextlib.ExitStack() as stack:
        home = Path(flower_home).expanduser().resolve() if flower_home is not None else \
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fedverify-flwr-home-",
                                                                 ignore_cleanup_errors=True)))
        home.mkdir(parents=True, exist_ok=True)
        env = {**{k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")},
               "NO_COLOR": "1", "FLWR_HOME": str(home),
               "PATH": os.pathsep.join(filter(None, [str(flwr.parent), os.environ.get("PATH")])),
               "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
               "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0",
               "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()),
               "FLWR_LOCAL_CONTROL_API_PORT": str(_free_port())}
        before = flower_processes(home)
        lines: list[str] = []
        started = time.perf_counter()
        cli = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace",
                               start_new_session=True)

        def read():
            for line in cli.stdout:
                line = _ANSI.sub("", line)
                lines.append(line)
                if not quiet:
                    sys.stdout.write(line)
                    sys.stdout.flush()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        returncode, status, details = None, None, ""
        try:
            returncode = cli.wait(timeout=timeout)
            seconds = time.perf_counter() - started
            reader.join(timeout=10)
            started_run = _STARTED_RUN.search("".join(lines))
            if returncode == 0 and started_run:     # the CLI exits 0 whether the run completed or failed
                status, details = _run_status(flwr, int(started_run.group(1)), env, deadline)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if cli.poll() is None:
                if os.name == "posix":
                    with contextlib.suppress(OSError):
                        os.killpg(cli.pid, signal.SIGKILL)
                else:
                    cli.kill()
                cli.wait()
            stop_processes(flower_processes(home) - before)
            reader.join(timeout=10)
    log = "".join(lines)
    if returncode is None:
        raise FlowerRunError(f"flwr run did not finish within {timeout:g} s; its last line: "
                             f"{_last_meaningful_line(log)}", log, None)
    if returncode != 0:
        raise FlowerRunError(f"flwr run failed (exit status {returncode}): {_last_meaningful_line(log)}", log,
                             returncode)
    if status is None:
        raise FlowerRunError(f"flwr run started no run: {_last_meaningful_line(log)}", log, returncode)
    if status == "unknown":
        raise FlowerRunError(f"the SuperLink did not say how the run ended: {details}", log, returncode)
    if not status.startswith("finished"):
        raise FlowerRunError(f"the Flower run was still {status} after {timeout:g} s: {_last_meaningful_line(log)}",
                             log, returncode)
    if status != "finished:completed":
        reason = _last_meaningful_line(log) if status == "finished:failed" or not details else details
        raise FlowerRunError(f"the Flower run ended {status}: {reason}", log, returncode)
    return AppRun(log=log, seconds=seconds, command=tuple(command))
