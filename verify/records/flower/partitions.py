"""Who is who in a run: the partition ids of the connected nodes (the server side of fedverify's
discovery query, with the check that the answers name partitions 0..N−1 once each) and the
participation trace resolved into the S_t of the rounds a run records.
"""
from __future__ import annotations

import numbers
import time
from collections.abc import Mapping

import numpy as np

from .dependency import require_flower
from .message_keys import PARTITION_KEY, PARTITION_QUERY


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
                           "the ClientApp with verify.records.flower.answer_partition_queries(app)")
    if len(answers) < len(nodes):
        silent = sorted(set(int(n) for n in nodes) - set(answers))
        raise RuntimeError(f"{len(silent)} of {len(nodes)} nodes did not answer fedverify's partition query within "
                           f"{timeout:g} s (node {silent[0]} among them)")
    return check_partitions(answers, n_clients)


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
