"""Independent on/off units: the common form of every pattern whose clients (or
clusters of clients) take part independently of each other.

A unit is a two-state process over rounds 0..T−1 with P(on at round 0) = ``first_on`` and
transition probabilities into round r ≥ 1: ``on_after_on[r]`` = P(on at r | on at r−1) and
``on_after_off[r]`` = P(on at r | off at r−1). Independent Bernoulli participation (FedSUM
Case 2, P2, P3, H.8, LOGIT) has both equal to p^r; a CA-Fed Markov chain has the constant
rows of (236). Identical units are merged and counted by ``multiplicity``, so P3 (one
probability sequence shared by every client) is a single unit.

Units whose transitions do not change with r (constant p, every Markov chain) are stored
with one column (``constant``): nothing of size T is built for them. The probabilities of
an independent pattern are read in chunks of rounds (:func:`probability_chunks`), never as
one (T, N) array, and clients are grouped chunk by chunk.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...patterns import Bernoulli, BiasedGroups, IndependentPattern, Markov, Pattern
from ._limits import human_bytes, require

#: Cells (rounds × clients) of probabilities read at a time.
CHUNK_CELLS = 1 << 22


@dataclass(frozen=True)
class Units:
    first_on: np.ndarray      # (G,)
    on_after_on: np.ndarray   # (G, T), column 0 unused; (G, 1) when ``constant``
    on_after_off: np.ndarray  # same shape; the same array when ``independent``
    multiplicity: np.ndarray  # (G,) number of identical units merged
    rounds: int

    @property
    def constant(self) -> bool:
        """Transitions are the same into every round r ≥ 1 (arrays of one column)."""
        return self.on_after_on.shape[1] == 1

    @property
    def independent(self) -> bool:
        """P(on at r) does not depend on round r − 1 (independent participation)."""
        return self.on_after_on is self.on_after_off or bool(np.array_equal(self.on_after_on, self.on_after_off))

    def transitions(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(on_after_on, on_after_off) into rounds start..stop−1 (≥ 1), shape (G, stop − start)."""
        if self.on_after_on.shape[1] == 1:
            shape = (self.first_on.size, stop - start)
            return np.broadcast_to(self.on_after_on, shape), np.broadcast_to(self.on_after_off, shape)
        return self.on_after_on[:, start:stop], self.on_after_off[:, start:stop]

    def stationary_on(self) -> np.ndarray:
        """a/(1 − c + a), the stationary P(on) of constant transitions (1 where undefined)."""
        a, c = self.on_after_off[:, -1], self.on_after_on[:, -1]
        return np.divide(a, 1 - c + a, out=np.ones_like(a), where=(1 - c + a) > 0)

    def on_probability(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """P(unit on at round r) for r = start..stop−1, shape (G, stop − start)."""
        stop = self.rounds if stop is None else stop
        r = np.arange(start, stop)
        if self.constant:
            pi = self.stationary_on()
            lam = self.on_after_on[:, -1] - self.on_after_off[:, -1]
            with np.errstate(invalid="ignore"):  # 0^0 = 1
                power = np.where(r[None, :] == 0, 1.0, lam[:, None] ** r[None, :])
            return np.clip(pi[:, None] + (self.first_on - pi)[:, None] * power, 0.0, 1.0)
        if self.independent:
            on = np.array(self.on_after_on[:, start:stop], dtype=float)
            if start == 0:
                on[:, 0] = self.first_on
            return on
        on = np.empty((self.first_on.size, self.rounds))  # a general time-varying chain (not built here)
        on[:, 0] = self.first_on
        for t in range(1, self.rounds):
            on[:, t] = on[:, t - 1] * self.on_after_on[:, t] + (1 - on[:, t - 1]) * self.on_after_off[:, t]
        return on[:, start:stop]

    def off_probability(self) -> np.ndarray:
        """P(unit off at round r), shape (G, T)."""
        return 1 - self.on_probability()

    def is_stationary(self) -> bool:
        """True when transitions are constant and the marginal is already stationary, so
        that window probabilities do not depend on where the window sits."""
        if not self.constant:
            return False
        return bool(np.allclose(self.first_on, self.stationary_on(), rtol=0, atol=1e-15))

    def worst_absence(self) -> np.ndarray:
        """q_g: the largest one-round absence probability of each unit, P(off at r) and
        P(off at r | off at r − 1) over every round (so any l absent rounds have probability ≤ q^l)."""
        if self.constant:  # P(on at r) = π + (first_on − π)λ^r stays within |first_on − π| of π
            pi = self.stationary_on()
            lowest_on = np.clip(pi - np.abs(self.first_on - pi), 0.0, 1.0)
            stay_off = 1 - self.on_after_off[:, 0] if self.rounds > 1 else np.zeros_like(pi)
            return np.maximum(1 - np.minimum(lowest_on, self.first_on), stay_off)
        worst = 1 - self.first_on
        step = max(1, CHUNK_CELLS // max(self.first_on.size, 1))
        for start in range(1, self.rounds, step):
            stop = min(self.rounds, start + step)
            worst = np.maximum(worst, (1 - self.on_probability(start, stop)).max(axis=1))
            worst = np.maximum(worst, (1 - self.on_after_off[:, start:stop]).max(axis=1))
        return worst


def probability_chunks(pattern: IndependentPattern, rounds: int):
    """(start, p_i^t for rounds start..) of ``pattern`` in chunks of rounds: 64 at first, then twice as
    many each time up to about CHUNK_CELLS cells, so that a reader stopping early (at the first
    change, the first nonzero) evaluates little."""
    start, size, most = 0, 64, max(1, CHUNK_CELLS // pattern.n_clients)
    while start < rounds:
        stop = min(rounds, start + min(size, most))
        yield start, np.asarray(pattern.probabilities(start, stop), dtype=float)
        start, size = stop, 2 * size


def known_constant(pattern: Pattern) -> np.ndarray | None:
    """p_i of a pattern whose probabilities are time-constant by construction (Bernoulli with
    a scalar or per-client p, H.8's groups), read without building any round."""
    if isinstance(pattern, BiasedGroups):
        return np.asarray(pattern.client_probabilities(), dtype=float)
    if isinstance(pattern, Bernoulli) and not callable(pattern.p) and np.ndim(pattern.p) <= 1:
        return np.broadcast_to(np.asarray(pattern.p, dtype=float), (pattern.n_clients,)).copy()
    return None


def constant_probabilities(pattern: Pattern, rounds: int) -> np.ndarray | None:
    """Per-client p if ``pattern`` is independent with probabilities that do not change over
    ``rounds`` rounds, else None; read chunk by chunk, stopping at the first change."""
    if not isinstance(pattern, IndependentPattern):
        return None
    known = known_constant(pattern)
    if known is not None:
        return known
    first = None
    for _, p in probability_chunks(pattern, rounds):
        first = p[0].copy() if first is None else first
        if not (p == first).all():
            return None
    return first


#: Seconds per probability cell read and grouped (the pattern's own computation included),
#: and a floor on the cost per (unit, round, window length) of the exact laws that follow.
_SCAN_CELL, _LAW_CELL = 4e-8, 5e-9


def _group_clients(pattern: IndependentPattern, rounds: int):
    """Group clients with identical probability sequences, reading chunks of rounds.

    Returns (labels (N,), first (G,), table, row): a group whose probability changes over
    time has its (T,) sequence in ``table[row[g]]``; a constant group has row[g] = −1 and
    p = first[g]. A row is made (and counted against the memory limit) when the group's
    probability first changes. Before reading anything the scan's own time is checked,
    and after the first chunk a floor on the exact law's cost (its time-varying units ×
    T × the window length their absence probability implies).
    """
    what = f"exact delays for {type(pattern).__name__} at T={rounds}"
    require(f"{what} (reading {rounds} × {pattern.n_clients} probabilities)", 0, rounds * pattern.n_clients * _SCAN_CELL)
    labels = first = reps = row = table = None
    used = 0
    for start, p in probability_chunks(pattern, rounds):
        stop = start + p.shape[0]
        if labels is None:  # grouped by round 0 first, then split like any later chunk
            _, reps, labels = np.unique(p[0], return_index=True, return_inverse=True)
            labels = labels.ravel()
            first = p[0, reps].copy()
            row = np.full(reps.size, -1)
        if reps.size < labels.size:  # some group has several clients: they may part ways
            if reps.size == 1:
                differ = np.flatnonzero((p != p[:, reps[0] : reps[0] + 1]).any(axis=0))
            else:
                differ = np.flatnonzero((p != p[:, reps[labels]]).any(axis=0))
            if differ.size:  # clients unlike their group's representative form new groups
                _, new = np.unique(np.column_stack([labels[differ], p[:, differ].T]), axis=0, return_inverse=True)
                new = new.ravel()
                for k in range(new.max() + 1):
                    members = differ[new == k]
                    parent = labels[members[0]]
                    labels[members] = reps.size
                    reps, first = np.append(reps, members[0]), np.append(first, first[parent])
                    if row[parent] >= 0:
                        table, used = _grow(table, used, rounds, what)
                        table[used - 1] = table[row[parent]]
                    row = np.append(row, used - 1 if row[parent] >= 0 else -1)
        current = p[:, reps]                               # (rows, G)
        for g in np.flatnonzero((row < 0) & (current != first[None, :]).any(axis=0)):
            table, used = _grow(table, used, rounds, what)
            table[used - 1] = first[g]
            row[g] = used - 1
        varying = row >= 0
        if varying.any():
            table[row[varying], start:stop] = current[:, varying].T
        if start == 0 and varying.any():
            q = float((1 - current[:, varying]).max())
            if q <= 0 or q >= 1:
                windows = 1 if q <= 0 else rounds
            else:
                windows = min(rounds, 1 + math.ceil(math.log(1e-13 * (1 - q) / pattern.n_clients) / math.log(q)))
            require(f"{what} ({int(varying.sum())}+ time-varying client groups)", 8 * 4 * int(varying.sum()) * rounds,
                    rounds * pattern.n_clients * _SCAN_CELL + int(varying.sum()) * rounds * windows * _LAW_CELL)
    return labels, first, (None if table is None else table[:used]), row


def _grow(table, used: int, rounds: int, what: str):
    """Room for one more time-varying group (capacity doubles; checked against the memory limit)."""
    if table is None or used == table.shape[0]:
        capacity = 1 if table is None else 2 * table.shape[0]
        require(f"{what} ({used + 1}+ time-varying client groups)", 8 * 4 * capacity * rounds, 0.0)
        grown = np.empty((capacity, rounds))
        if table is not None:
            grown[:used] = table[:used]
        table = grown
    return table, used + 1


def units_of(pattern: Pattern, rounds: int) -> Units | None:
    """The independent units of ``pattern`` over ``rounds`` rounds, or None if its clients
    are not independent (Uniform, cyclic patterns)."""
    if isinstance(pattern, IndependentPattern):
        known = known_constant(pattern)
        if known is not None:
            values, counts = np.unique(known, return_counts=True)
            column = values[:, None].copy()
            return Units(values.copy(), column, column, counts, rounds)
        labels, first, table, row = _group_clients(pattern, rounds)
        counts = np.bincount(labels, minlength=first.size)
        if table is None:
            column = first[:, None].copy()
            return Units(first.copy(), column, column, counts, rounds)
        if (row >= 0).all() and np.array_equal(row, np.arange(row.size)):
            full = table
        else:
            full = np.empty((first.size, rounds))
            full[row < 0] = first[row < 0, None]
            full[row >= 0] = table[row[row >= 0]]
        return Units(full[:, 0].copy(), full, full, counts, rounds)
    if isinstance(pattern, Markov):
        matrices = pattern.transition_matrices()
        rows = np.column_stack([pattern.pi, matrices[:, 1, 1], matrices[:, 0, 1]])
        if pattern.clusters is not None:
            # clients of one cluster follow one chain, so they are one unit; a chain no client follows is none
            rows = rows[np.unique(np.asarray(pattern.clusters))]
        unique, counts = np.unique(rows, axis=0, return_counts=True)
        return Units(unique[:, 0].copy(), unique[:, 1:2].copy(), unique[:, 2:3].copy(), counts, rounds)
    return None


__all__ = ["Units", "units_of", "probability_chunks", "constant_probabilities", "known_constant", "human_bytes"]
