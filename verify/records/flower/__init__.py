"""Flower runs as fedverify run records, with a participation trace fedverify chooses.

Flower (``flwr`` ≥ 1.41, its Message API) is optional: ``import verify.records.flower`` never imports
it, and whatever needs it imports it when used, failing with one line that says
``install with pip install "fedverify[flower]"`` when it is absent. Flower's Simulation Runtime
(what :func:`run_app` and :func:`simulate` run) also needs Ray, Flower's ``simulation`` extra.

What the pieces do
------------------
* :class:`RecordingStrategy` (``from verify.records.flower import RecordingStrategy``) wraps a Flower
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

Modules
-------
``verify.records.flower`` names every piece; they live in

* ``dependency``: :func:`flower_available`, :func:`require_flower` and :data:`INSTALL_HINT`;
* ``message_keys``: the discovery query's action and type, the partition-id key, :data:`ROUND_KEY`;
* ``conversions``: :func:`vector_of`, :func:`arrays_like`, :func:`arrays_of`, :func:`problem_measure`;
* ``partitions``: :func:`check_partitions`, :func:`discover_partitions`, :func:`wait_for_nodes`,
  :func:`resolve_trace`;
* ``client``: :func:`answer_partition_queries`, :func:`sgd_client_app`;
* ``headers``: :func:`record_header`;
* ``recording``: :class:`RecordingStrategy`, built on first use;
* ``simulation``: :func:`simulate`, :func:`backend_config`, :func:`quiet_engine`;
* ``app_run``: :func:`run_app`, :class:`AppRun`, :class:`FlowerRunError`, :func:`format_run_config`;
* ``processes``: :func:`flower_processes`, :func:`stop_processes`.
"""
from __future__ import annotations

from .app_run import (FLWR_RUN_DOCS, SIMULATION_DOCS, AppRun, FlowerRunError, _flwr_executable,
                      _last_meaningful_line, format_run_config, run_app)
from .client import answer_partition_queries, sgd_client_app
from .conversions import arrays_like, arrays_of, problem_measure, vector_of
from .dependency import INSTALL_HINT, flower_available, require_flower
from .headers import record_header
from .message_keys import PARTITION_ACTION, PARTITION_KEY, PARTITION_QUERY, ROUND_KEY
from .partitions import check_partitions, discover_partitions, resolve_trace, wait_for_nodes
from .processes import flower_processes, stop_processes
from .recording import _recording_strategy_class
from .simulation import backend_config, quiet_engine, simulate

# ``RecordingStrategy`` is public too; it is left out of ``__all__`` so that a star import
# works without Flower (the class subclasses Flower's ``Strategy`` and is built on first use).
__all__ = ["INSTALL_HINT", "PARTITION_ACTION", "PARTITION_QUERY", "ROUND_KEY", "flower_available",
           "require_flower", "answer_partition_queries", "discover_partitions", "check_partitions",
           "resolve_trace", "vector_of", "arrays_like", "arrays_of", "problem_measure", "sgd_client_app",
           "simulate", "backend_config", "record_header", "run_app", "AppRun", "FlowerRunError", "format_run_config",
           "flower_processes", "stop_processes", "FLWR_RUN_DOCS", "SIMULATION_DOCS"]


def __getattr__(name):
    if name == "RecordingStrategy":
        cls = _recording_strategy_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | {"RecordingStrategy"})

