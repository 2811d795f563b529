"""The strategy that records rounds: ``RecordingStrategy``, built on first use by
:func:`_recording_strategy_class` (it subclasses Flower's ``Strategy``, so building it imports Flower),
wraps a Flower strategy, writes each training round into a ``RunRecorder`` and, given a trace, sends
round t exactly to the partitions of S_t. Round indexing and what the imposed participation does to
the wrapped strategy are in the ``verify.records.flower`` docstring.
"""
from __future__ import annotations

import contextlib
import logging
import math
import random
import time
from collections.abc import Callable, Mapping

import numpy as np

from .dependency import require_flower
from .message_keys import ROUND_KEY
from .partitions import _trace_clients, _trace_rounds, check_partitions, discover_partitions, resolve_trace


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


def _recording_strategy_class():
    require_flower()
    from flwr.app import ConfigRecord, Message, MessageType, RecordDict
    from flwr.serverapp.strategy import Strategy

    log = logging.getLogger("flwr")

    class RecordingStrategy(Strategy):
        """A Flower strategy that records its rounds and, optionally, imposes a trace (see
        ``verify.records.flower``).

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

    RecordingStrategy.__module__ = __name__.rpartition(".")[0]     # found where it is public: verify.records.flower
    RecordingStrategy.__qualname__ = "RecordingStrategy"
    return RecordingStrategy
