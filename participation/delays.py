"""Delay metrics of a participation sequence (FedSUM §2.2).

* Last selection (eqs. (2)–(3)): a_{i,t} = max{j ≤ t : i ∈ S_j}, and
  a_{i,t} = −1 if i has not taken part in rounds 0..t.
* Per-round delay (eq. (4)): τ_t = max_i (t − a_{i,t}) = t − min_i a_{i,t}.
* τ_avg = (1/T) Σ_{t=0}^{T−1} τ_t (§2.2).
* τ_max = max_{0 ≤ t ≤ T−1} τ_t. The paper prints the range 0 ≤ t ≤ T (§2.2), but S_T
  is not part of the sequence, and the proof of Lemma F.3, Appendix B (notation) and the
  counting in the proof of Lemma F.1 all use 0..T−1; so does this module.
  ``final_round=True`` gives the printed range when the caller
  supplies the extra S_T as the last row. Either way τ_max is the longest run of
  consecutive absences of any client, the run before its first selection included
  (proof of Lemma F.1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .trace import Trace, as_mask
from .validation import integer

_ALL_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@dataclass(frozen=True)
class DelayMetrics:
    """τ_t for every round, τ_max and τ_avg. For a batch of traces, ``tau`` has shape
    ``(reps, T)`` and ``tau_max``, ``tau_avg`` have shape ``(reps,)``."""

    tau: np.ndarray
    tau_max: int | np.ndarray
    tau_avg: float | np.ndarray


def last_selection(x) -> np.ndarray:
    """a_{i,t} for every round and client (−1 before the first selection), shape of ``x``."""
    mask = as_mask(x, batch=True)
    rounds = np.arange(mask.shape[-2])[:, None]
    return np.maximum.accumulate(np.where(mask, rounds, -1), axis=-2)


def per_round_delay(x) -> np.ndarray:
    """τ_t for every round; ``x`` is a Trace, a 0/1 array (T, N) or a batch (reps, T, N).

    Computed without materialising a_{i,t}: rows are bit-packed across clients into
    64-bit words, so that "every client appears in rounds t−k+1..t" is a bitwise OR of
    rows followed by an all-ones test. A virtual all-present row at t = −1 encodes
    a_{i,−1} = −1. Window ORs of length 2^j are built by doubling until every window
    covers all clients (then τ_t < 2^j everywhere), and τ_t = the largest k whose window
    ending at t misses a client is found by binary lifting, high bits first. Cost:
    O(T·N/64·log τ_max) word operations instead of O(T·N) integer operations.
    """
    mask = as_mask(x, batch=True)
    batch, (rounds, n) = mask.shape[:-2], mask.shape[-2:]
    words = _packed_rows(mask)
    n_words = words.shape[-1]
    # planes[r, k, s]: word k of padded row s of replicate r, each word's rows contiguous
    planes = np.ascontiguousarray(words.reshape(-1, rounds + 1, n_words).transpose(0, 2, 1))
    levels = [planes]  # levels[j][r, k, s] = OR of padded rows s−2^j+1 .. s
    while not _covers_all(levels[-1]).all():
        span = 1 << (len(levels) - 1)
        last, wider = levels[-1], np.empty_like(levels[-1])
        np.bitwise_or(last[..., span:], last[..., :-span], out=wider[..., span:])
        wider[..., :span] = _ALL_ONES  # such windows reach the virtual row −1
        levels.append(wider)
    rows = planes.shape[0]
    index = np.int32 if planes.size < 2**31 else np.int64
    # flat index of (replicate r, word 0, row s): a window's words are gathered by np.take
    row_start = (np.arange(rows, dtype=index) * index(n_words * (rounds + 1)))[:, None]
    end = row_start + np.arange(rounds + 1, dtype=index)[None, :]
    delay = np.zeros((rows, rounds + 1), dtype=index)
    covered = np.zeros((rows, n_words, rounds + 1), dtype=np.uint64)  # OR of the rows of the window accepted so far
    for j in range(len(levels) - 2, -1, -1):
        at = end - delay
        flat = levels[j].reshape(-1)
        candidate = np.empty_like(covered)
        for k in range(n_words):
            np.take(flat, at + k * (rounds + 1), out=candidate[:, k])
        candidate |= covered
        missing = ~_covers_all(candidate)
        np.copyto(covered, candidate, where=missing[:, None, :])
        delay += missing.astype(index) << index(j)
    return delay.reshape(batch + (rounds + 1,))[..., 1:].astype(np.int64)


def _covers_all(planes: np.ndarray) -> np.ndarray:
    """Whether every client's bit is set, for each row of ``planes`` (rows, words, T + 1)."""
    if planes.shape[1] == 1:
        return planes[:, 0] == _ALL_ONES
    both = np.bitwise_and(planes[:, 0], planes[:, 1])
    for k in range(2, planes.shape[1]):
        both &= planes[:, k]
    return both == _ALL_ONES


def _packed_rows(mask: np.ndarray) -> np.ndarray:
    """Rows of ``mask`` as uint64 words, padding bits set, after an all-ones row −1."""
    n = mask.shape[-1]
    n_words = -(-n // 64)
    packed = np.zeros(mask.shape[:-2] + (mask.shape[-2] + 1, n_words * 8), dtype=np.uint8)
    packed[..., 1:, : -(-n // 8)] = np.packbits(mask, axis=-1, bitorder="little")
    words = packed.view(np.uint64)
    padding = np.ones(n_words * 64, dtype=bool)
    padding[:n] = False
    words |= np.packbits(padding, bitorder="little").view(np.uint64)
    words[..., 0, :] = _ALL_ONES
    return words


def delay_metrics(x, *, final_round: bool = False) -> DelayMetrics:
    """τ_t, τ_max and τ_avg of a trace or a batch of traces.

    With ``final_round=True`` the last row of ``x`` is the extra S_T of the printed
    definition τ_max = max_{0≤t≤T} τ_t (§2.2): it enters τ_max but not τ_avg, and
    ``tau`` keeps all T + 1 values.
    """
    tau = per_round_delay(x)
    if final_round and tau.shape[-1] < 2:
        raise ValueError("final_round=True needs at least two rows (rounds 0..T−1 and S_T)")
    averaged = tau[..., :-1] if final_round else tau
    tau_max, tau_avg = tau.max(axis=-1), averaged.mean(axis=-1)
    if tau.ndim == 1:
        tau_max, tau_avg = int(tau_max), float(tau_avg)
    return DelayMetrics(tau, tau_max, tau_avg)


class DelayStream:
    """Delay metrics of a trace read one round at a time, in O(N) memory.

    Feed rounds with ``push_ids`` (active-id list) or ``push_mask`` (0/1 row). With id
    lists the cost grows with the number of participations, not with T × N: the oldest
    last-selection time min_i a_{i,t} is kept by a queue of selection events in time
    order, where stale events (the client was selected again since) are skipped at the
    head and compacted away when the queue fills, so each event is handled O(1) times.
    """

    def __init__(self, n_clients: int, *, keep_tau: bool = False):
        n_clients = integer(n_clients, "n_clients")
        self.n_clients = int(n_clients)
        self.rounds = 0
        self.tau_max = 0
        self._tau_sum = 0
        self._last = np.full(self.n_clients, -1, dtype=np.int64)
        self._never = self.n_clients
        self._queue_client = np.empty(2 * self.n_clients + 16, dtype=np.int64)
        self._queue_time = np.empty_like(self._queue_client)
        self._head = self._tail = 0
        self._taus: list[int] | None = [] if keep_tau else None

    def push_mask(self, row) -> int:
        row = np.asarray(row)
        if row.shape != (self.n_clients,):
            raise ValueError(f"round {self.rounds}: expected a row of {self.n_clients} entries, got shape {row.shape}")
        return self.push_ids(np.flatnonzero(as_mask(row[None], what=f"round {self.rounds}")[0]))

    def push_ids(self, ids) -> int:
        """Record S_t (the next round) and return τ_t."""
        t = self.rounds
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size:
            if ids.min() < 0 or ids.max() >= self.n_clients:
                bad = ids[(ids < 0) | (ids >= self.n_clients)][0]
                raise ValueError(f"round {t}: client id {bad} is outside [0, {self.n_clients})")
            if np.unique(ids).size != ids.size:
                raise ValueError(f"round {t}: a client id appears twice")
            self._never -= int(np.count_nonzero(self._last[ids] < 0))
            self._last[ids] = t
            self._enqueue(ids, t)
        tau = t + 1 if self._never else t - self._oldest()
        self.rounds += 1
        self.tau_max = max(self.tau_max, tau)
        self._tau_sum += tau
        if self._taus is not None:
            self._taus.append(tau)
        return tau

    @property
    def tau_avg(self) -> float:
        if not self.rounds:
            raise ValueError("no rounds pushed yet")
        return self._tau_sum / self.rounds

    def result(self) -> DelayMetrics:
        tau = np.asarray(self._taus, dtype=np.int64) if self._taus is not None else None
        return DelayMetrics(tau, self.tau_max, self.tau_avg)

    def _oldest(self) -> int:
        """min_i a_{i,t}: the first queue event that is still its client's latest."""
        width = 64
        while True:
            stop = min(self._head + width, self._tail)
            clients = self._queue_client[self._head : stop]
            times = self._queue_time[self._head : stop]
            fresh = np.flatnonzero(self._last[clients] == times)
            if fresh.size:
                self._head += int(fresh[0])
                return int(self._queue_time[self._head])
            self._head += clients.size
            width *= 2

    def _enqueue(self, ids: np.ndarray, t: int) -> None:
        if self._tail + ids.size > self._queue_client.size:
            live = slice(self._head, self._tail)
            keep = self._last[self._queue_client[live]] == self._queue_time[live]
            clients, times = self._queue_client[live][keep], self._queue_time[live][keep]
            size = max(self._queue_client.size, 2 * (clients.size + ids.size))
            if size > self._queue_client.size:
                self._queue_client = np.empty(size, dtype=np.int64)
                self._queue_time = np.empty(size, dtype=np.int64)
            self._head, self._tail = 0, clients.size
            self._queue_client[: clients.size], self._queue_time[: clients.size] = clients, times
        self._queue_client[self._tail : self._tail + ids.size] = ids
        self._queue_time[self._tail : self._tail + ids.size] = t
        self._tail += ids.size


def stream_delay_metrics(rounds: Iterable, n_clients: int, *, as_ids: bool = True, keep_tau: bool = False) -> DelayMetrics:
    """Delay metrics of an iterable of rounds without holding the trace.

    ``as_ids=True``: each item is the list of active client ids; ``False``: a 0/1 row.
    """
    stream = DelayStream(n_clients, keep_tau=keep_tau)
    push = stream.push_ids if as_ids else stream.push_mask
    for item in rounds:
        push(item)
    return stream.result()
