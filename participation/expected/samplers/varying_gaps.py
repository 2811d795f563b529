"""Monte-Carlo for independent clients with time-varying probabilities: every presence, by inverting Λ.

Method "gaps" of ``monte_carlo`` for probabilities that change with t and do not repeat with a
short period (those go to :mod:`.periodic`). The delays follow from the cover times of the
absence intervals, as in :mod:`.gaps`.

Independent clients whose probabilities p_i^t change with t (a (T, N) or callable Bernoulli;
those that repeat with a period, FedSUM P3 among them, go to the long-absence sampler of
:mod:`.periodic`). With the hazard h_t = −ln(1 − p^t) and Λ(t) = Σ_{s<t} h_s, a unit-rate
Poisson process on [0, Λ(T)) has at least one point in [Λ(t), Λ(t + 1)) with probability
1 − e^{−h_t} = p^t, independently over rounds (disjoint intervals): so a client is present at
round t iff a point falls there. A client's points are cumulative sums of Exp(1) draws, mapped
to rounds by inverting Λ (a lookup grid of 8T cells then a step or two of comparisons, or
searchsorted, O(log T), where Λ's steps crowd; about Σ_t h_t ≈ Σ_t p^t points), which is
exact: every presence is drawn (no skipping of short gaps), and the absence runs between
consecutive presences (a, b] give c(x) as for the Markov chains of :mod:`.markov_gaps`. Rounds
with p = 1 (h = ∞) are presences added as such (h = 0 there); p = 0 has h = 0. Clients with
the same probability sequence share one Λ. A client's row of draws is long enough to pass
Λ(T) but for a Gamma tail past Λ(T) + 4√Λ(T) + 8; a row that falls short draws more, from
the same replicate's stream, afterwards. Replicate r's draws come from the stream keyed by
(seed, r, _VARYING_STREAM), so results do not depend on chunking or workers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...patterns import Pattern
from ...budget import memory_limit, require_memory
from .gaps import GAPS_NEEDS
from .sampler import FunctionSampler
from .streams import keyed_bits

#: Most replicates a chunk holds.
_MAX_CHUNK = 256

_VARYING_STREAM = 0x6AD


@dataclass(frozen=True, eq=False)
class VaryingProbabilities:
    """Independent clients with time-varying probabilities, grouped by probability sequence:
    ``hazard[g]`` is Λ_g(0..T) (T + 1 values), ``certain[g]`` the rounds with p = 1,
    ``clients[g]`` the group's clients and ``draws[g]`` the Exp(1) draws per client at first."""

    rounds: int
    n_clients: int
    hazard: tuple[np.ndarray, ...]
    certain: tuple[np.ndarray, ...]
    clients: tuple[np.ndarray, ...]
    draws: tuple[int, ...]
    upper: tuple[np.ndarray, ...]  # Λ(1..T) then ∞ twice: the stepping's comparisons, indexed by t
    grids: tuple

    @property
    def columns(self) -> int:
        return sum(c.size * k for c, k in zip(self.clients, self.draws))

    @property
    def table_bytes(self) -> int:
        # Λ and its stepping copy (64-bit), the grid (8T 32-bit cells), the p = 1 rounds and the clients
        return sum(48 * h.size + 8 * d.size + 8 * c.size for h, d, c in zip(self.hazard, self.certain, self.clients))


#: "auto" takes the sampler when it draws at most this many points per round and client: a drawn
#: point costs a few cells of a whole trace, so above it whole traces cost less.
VARYING_AUTO_DENSITY = 0.3
#: ... and when the clients share at most this many distinct probability sequences: each costs a
#: pass of its own (FedAWE's sine, p_i(t) = clip((sin(2πt/20)/2 + 1/2) p_i, 0, 1), 50 replicates
#: of T = 2000, N = 100 with k distinct p_i: "gaps" 0.36 s to 3.2 s for k = 1 to 100, "trace" about
#: 1.5 s throughout; they cross near k = 20).
VARYING_AUTO_GROUPS = 16


def varying_applies(pattern: Pattern, rounds: int) -> bool:
    """``pattern`` is independent (and defined for ``rounds`` rounds)."""
    from ...patterns import IndependentPattern

    return isinstance(pattern, IndependentPattern) and (pattern.horizon is None or rounds <= pattern.horizon)


def varying_probabilities(pattern: Pattern, rounds: int, max_groups: int | None = None) -> VaryingProbabilities | None:
    """The groups of an independent pattern over ``rounds`` rounds (``pattern.probabilities(0, T)``,
    read once), or None if ``pattern`` is not independent, is not defined for that many rounds,
    or has more than ``max_groups`` distinct probability sequences (counted before any table is built)."""
    if not varying_applies(pattern, rounds):
        return None
    p = np.asarray(pattern.probabilities(0, rounds), dtype=float)
    if p.shape != (rounds, pattern.n_clients):
        return None
    shared = bool((p == p[:, :1]).all())  # one sequence for every client (P3): no grouping by columns
    if shared:
        columns, labels = p[:, :1].T, np.zeros(pattern.n_clients, dtype=np.int64)
    else:
        columns, labels = np.unique(p.T, axis=0, return_inverse=True)
        labels = labels.ravel()
    if max_groups is not None and len(columns) > max_groups:
        return None
    hazard, certain, clients, draws = [], [], [], []
    for g, column in enumerate(columns):
        sure = column >= 1.0
        with np.errstate(divide="ignore"):
            h = np.where(sure, 0.0, -np.log1p(-np.minimum(column, 1.0)))
        cumulative = np.concatenate([[0.0], np.cumsum(h)])
        total = float(cumulative[-1])
        cumulative.flags.writeable = False
        hazard.append(cumulative)
        certain.append(np.flatnonzero(sure))
        clients.append(np.flatnonzero(labels == g))
        draws.append(int(math.ceil(total + 4 * math.sqrt(total) + 8)))
    upper = tuple(np.concatenate([h[1:], [np.inf, np.inf]]) for h in hazard)
    return VaryingProbabilities(int(rounds), pattern.n_clients, tuple(hazard), tuple(certain), tuple(clients),
                                tuple(draws), upper, tuple(_grid(h) for h in hazard))


def _grid(cumulative: np.ndarray) -> tuple[np.ndarray, float, int] | None:
    """A lookup grid over [0, Λ(T)] in cells of δ = Λ(T)/(8T): idx[j] = max{t : Λ(t) ≤ jδ}. A point x
    goes to cell j = ⌊x/δ − 10^−6⌋ ≥ 0, so jδ ≤ x however the division rounds and its round lies
    at most ``steps`` past idx[j] (the boundaries up to (j + 1 + 10^−5)δ); None where boundaries
    crowd (then searchsorted)."""
    rounds = cumulative.size - 1
    total = float(cumulative[-1])
    if not total > 0.0:
        return None
    cells = 8 * rounds
    delta = total / cells
    starts = np.arange(cells + 2) * delta
    index = np.searchsorted(cumulative, starts, side="right") - 1
    reach = np.searchsorted(cumulative, starts[1:] + 1e-5 * delta, side="right") - 1
    steps = int(np.max(reach - index[:-1]))
    if steps > 6:
        return None
    index = index.astype(np.int32)
    index.flags.writeable = False
    return index, delta, steps


def _varying_rows(plan: VaryingProbabilities, g: int, points: np.ndarray) -> np.ndarray:
    """Rounds of the points (each row non-decreasing), the p = 1 rounds merged in; T stands for ≥ T."""
    cumulative, grid = plan.hazard[g], plan.grids[g]
    if grid is None:
        rounds = (np.searchsorted(cumulative, points, side="right") - 1).astype(np.int32)
    else:  # from the cell's first round, step while Λ(t + 1) ≤ point
        index, delta, steps = grid
        cell = points * (1.0 / delta)
        cell -= 1e-6
        np.clip(cell, 0, index.size - 1, out=cell)
        rounds = index[cell.astype(np.int32)]
        upper = plan.upper[g]
        for _ in range(steps):
            rounds += upper[rounds] <= points
    np.minimum(rounds, plan.rounds, out=rounds)
    sure = plan.certain[g]
    if sure.size:
        rounds = np.sort(np.concatenate([rounds, np.broadcast_to(sure.astype(np.int32), rounds.shape[:-1] + sure.shape)],
                                        axis=-1), axis=-1)
    return rounds


def _scatter_rows(flat: np.ndarray, width: int, offsets: np.ndarray, rounds: np.ndarray) -> None:
    """For each row of presences b_1 ≤ b_2 ≤ … (the last ≥ T), cover[a + 1] ≥ b for consecutive a, b (a_0 = −1)."""
    starts = np.empty(rounds.shape, dtype=np.int64)
    starts[:, 0] = 0
    np.add(rounds[:, :-1], 1, out=starts[:, 1:])
    np.minimum(starts, width - 1, out=starts)  # past T: the unread column T
    starts += offsets[:, None]
    np.maximum.at(flat, starts.ravel(), rounds.ravel().astype(flat.dtype, copy=False))


def varying_chunk(plan: VaryingProbabilities, rounds: int, root, first: int, count: int):
    """(τ_max, τ_avg) of replicates first..first+count−1 of independent clients with time-varying p."""
    width = rounds + 1  # starts at T are dropped; column T is never read
    columns = plan.columns
    points = np.empty((count, columns))
    extra = []  # (row, group, client in group, all rounds of that client), rows that ran short
    for row in range(count):
        rng = np.random.Generator(keyed_bits(root, first + row, _VARYING_STREAM))
        draws = rng.standard_exponential(columns)
        at = 0
        for g, (clients, k) in enumerate(zip(plan.clients, plan.draws)):
            block = draws[at : at + clients.size * k].reshape(clients.size, k)
            np.cumsum(block, axis=1, out=block)
            total = plan.hazard[g][-1]
            for i in np.flatnonzero(block[:, -1] < total):  # rare: continue past Λ(T)
                more = [block[i]]
                last = block[i, -1]
                while last < total:
                    step = last + np.cumsum(rng.standard_exponential(k))
                    more.append(step)
                    last = step[-1]
                extra.append((row, g, i, np.concatenate(more)))
            at += clients.size * k
        points[row] = draws
    cover = np.zeros((count, width), dtype=np.int32)
    flat = cover.ravel()
    at = 0
    for g, (clients, k) in enumerate(zip(plan.clients, plan.draws)):
        block = points[:, at : at + clients.size * k].reshape(count * clients.size, k)
        offsets = np.repeat(np.arange(count, dtype=np.int64) * width, clients.size)
        _scatter_rows(flat, width, offsets, _varying_rows(plan, g, block))
        at += clients.size * k
    for row, g, _, values in extra:  # the short rows again, in full (a repeat changes no maximum)
        _scatter_rows(flat, width, np.array([row * width]), _varying_rows(plan, g, values[None, :]))
    cover = cover[:, :rounds]
    np.maximum.accumulate(cover, axis=1, out=cover)
    c = np.maximum(cover, np.arange(rounds, dtype=np.int32), out=cover)
    np.minimum(c, rounds, out=c)
    tau_max = (c - np.arange(rounds, dtype=c.dtype)).max(axis=1).astype(float)
    tau_sum = rounds * (rounds + 1) // 2 - (rounds * rounds - c.sum(axis=1, dtype=np.int64))
    return tau_max, tau_sum / rounds


def varying_chunk_size(plan: VaryingProbabilities, rounds: int) -> int:
    """Replicates per chunk: about 2^16 drawn points and cover cells, so a chunk's arrays stay in cache."""
    return int(np.clip((1 << 16) // (rounds + plan.columns), 1, _MAX_CHUNK))


def varying_chunk_bytes(plan: VaryingProbabilities, rounds: int, count: int) -> int:
    """Peak bytes of :func:`varying_chunk` for ``count`` replicates: the points (64-bit) and, for one
    group at a time, their rounds, starts and scatter indices (about four 64-bit arrays a point),
    the cover array (32-bit) with its prefix maximum, and the Λ tables."""
    return count * (8 * rounds + 40 * plan.columns) + plan.table_bytes


def varying_law(pattern: Pattern, rounds: int, auto: bool) -> VaryingProbabilities | None:
    """The law of method "gaps" for other independent clients with time-varying probabilities:
    the cumulative hazards of ``pattern.probabilities(0, rounds)``, read once (8 bytes a cell,
    checked against the memory limit). "auto" takes it only within half the memory limit, for
    at most ``VARYING_AUTO_GROUPS`` distinct sequences and ``VARYING_AUTO_DENSITY`` points a
    cell (beyond, whole traces are cheaper)."""
    if not varying_applies(pattern, rounds):
        return None
    n = pattern.n_clients
    table = 8 * rounds * n
    if not auto:
        require_memory(table, f"the probabilities of {rounds} rounds × {n} clients (method 'gaps')")
    elif 2 * table > memory_limit():
        return None
    plan = varying_probabilities(pattern, rounds, VARYING_AUTO_GROUPS if auto else None)
    if auto and plan is not None and plan.columns > VARYING_AUTO_DENSITY * rounds * n:
        return None  # dense (or, above, many distinct sequences): whole traces are cheaper
    return plan


SAMPLER = FunctionSampler("gaps", GAPS_NEEDS, __name__, law="varying_law", size="varying_chunk_size",
                          peak="varying_chunk_bytes", draw="varying_chunk")
