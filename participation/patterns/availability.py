"""Availability models beyond independent coin flips: periodic on/off clients, diurnal
day/night groups, and server-side selection among the clients that are available.

* :class:`OnOffCycles` — every client is on for ``active`` rounds out of every ``period``
  (FedAU's cyclic participation; the periodic client groups of Wang & Ji's unified analysis).
* :class:`Diurnal` — two groups whose share of each round's S clients follows a daily cycle
  (Zhu et al., ICLR 2022).
* :class:`Selected` — the server picks min(S, |A_t|) of the clients available in round t,
  uniformly or by walking reshuffled orders, on top of any availability pattern.

All three follow the reproducibility contract of :mod:`participation.patterns.base`.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._random import BLOCK, keyed_uniforms
from .base import BlockPattern, Pattern, check_probabilities, frozen_array
from .sampling import EPOCH_BLOCK, positions_in_order
from ..validation import finite_real, integer

#: Spawn-key tag of :class:`Selected`'s own draws (its availability keeps the caller's keys).
_SELECTION_STREAM = 0x5E1EC7


def _round_half_up(x: np.ndarray) -> np.ndarray:
    return np.floor(np.asarray(x, dtype=float) + 0.5).astype(np.int64)


def _check_integers(value, name: str, low: int, high: int, n: int) -> np.ndarray:
    """A scalar or ``(n,)`` array of integers in [low, high], as int64 of shape (n,)."""
    array = np.asarray(value)
    if array.dtype == bool or array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be integers in [{low}, {high}], got {value!r}")
    if array.ndim > 1 or (array.ndim == 1 and array.size != n):
        raise ValueError(f"{name} must be a scalar or have n_clients={n} entries, got shape {array.shape}")
    flat = array.reshape(-1).astype(float)
    bad = ~(np.isfinite(flat) & (flat == np.round(flat)) & (flat >= low) & (flat <= high))
    if bad.any():
        shown = array.reshape(-1)[int(np.flatnonzero(bad)[0])]
        raise ValueError(f"{name} must be integers in [{low}, {high}], got {shown}")
    return np.broadcast_to(flat.astype(np.int64) if array.ndim else np.int64(flat[0]), (n,)).copy()


# ------------------------------------------------------------------------------------ on/off cycles
@dataclass(frozen=True, eq=False)
class OnOffCycles(Pattern):
    """Per-client on/off cycles: client i is in S_t iff (t + φ_i) mod C < a_i.

    C = ``period``, a_i = ``active`` (an int for every client or one per client, each in
    [0, C]; a_i = 0 is a client that is never available, a_i = C one that always is) and
    φ_i = the phase. ``phases=None``: every replicate draws φ_i uniformly from {0, …, C−1},
    independently per client (keyed by the seed, so the reproducibility contract holds);
    a fixed integer array (entries in [0, C)) makes the pattern deterministic.

    Sources (the reading is ours):

    * FedAU's "cyclic" participation — S. Wang, M. Ji, "A Lightweight Method for Tackling
      Unknown Participation Statistics in Federated Averaging", ICLR 2024, the experiments
      section (§6 in our reading; Bernoulli, Markovian and cyclic participation, set up in
      its experimental appendix): a client of participation probability p_i is active for about C·p_i
      consecutive rounds of every cycle of C rounds (:meth:`from_probability`). The
      authors' released code starts each client at a random point of its inactive stretch
      and forces at least one active and one inactive round per cycle; here the phase is
      uniform over the whole cycle and a_i ∈ {0, C} is allowed.
    * The periodic participation of client groups in S. Wang, M. Ji, "A Unified Analysis of
      Federated Learning with Arbitrary Client Participation", NeurIPS 2022 (its examples of
      cyclic participation and its experiments): groups take turns, each available for a
      stretch of rounds per period (:meth:`periodic_groups`).

    Exact E[τ_t], E[τ_avg] and the law of τ_max under random phases are in
    :mod:`participation.expected.availability`.
    """

    n_clients: int
    period: int
    active: int | np.ndarray
    phases: np.ndarray | None = None

    def __post_init__(self):
        n = integer(self.n_clients, "n_clients")
        period = integer(self.period, "period")
        object.__setattr__(self, "active", frozen_array(_check_integers(self.active, "active", 0, period, n), dtype=np.int64))
        if self.phases is not None:
            phases = _check_integers(self.phases, "phases", 0, period - 1, n)
            object.__setattr__(self, "phases", frozen_array(phases, dtype=np.int64))

    @classmethod
    def from_probability(cls, n_clients: int, period: int, p, phases=None) -> "OnOffCycles":
        """Cycles whose duty cycle approximates p: a_i = round(C·p_i) (halves rounded up),
        p a scalar or per-client array in [0, 1] (p_i = 0: never available)."""
        period = integer(period, "period")
        p = check_probabilities(p, "p", allow_zero=True)
        return cls(n_clients, period, _round_half_up(period * p), phases)

    @classmethod
    def periodic_groups(cls, n_clients: int, n_groups: int, rounds_per_group: int = 1) -> "OnOffCycles":
        """Groups taking turns (deterministic): clients are split into ``n_groups``
        contiguous groups (sizes differ by at most one; client i is in group ⌊iG/N⌋) and
        group g is available in rounds t with g·R ≤ t mod (G·R) < (g+1)·R, R =
        ``rounds_per_group``."""
        n = integer(n_clients, "n_clients")
        g = integer(n_groups, "n_groups")
        r = integer(rounds_per_group, "rounds_per_group")
        if g > n:
            raise ValueError(f"n_groups={g} exceeds n_clients={n}")
        group = np.arange(n) * g // n
        period = g * r
        return cls(n, period, r, (-group * r) % period)

    @property
    def deterministic(self) -> bool:
        return self.phases is not None

    @property
    def duty_cycle(self) -> np.ndarray:
        """a_i / C: the fraction of rounds each client is available (its long-run p_i)."""
        return self.active / self.period

    def _phases(self, root, replicates: range) -> np.ndarray:
        if self.phases is not None:
            return np.broadcast_to(self.phases, (len(replicates), self.n_clients))
        u = keyed_uniforms(root, replicates, 0, (self.n_clients,))
        return np.minimum((u * self.period).astype(np.int64), self.period - 1)

    def _generate(self, root, replicates, start, stop):
        period = self.period
        dtype = np.int16 if 2 * period < np.iinfo(np.int16).max else np.int64
        phases = self._phases(root, replicates).astype(dtype)
        position = (np.arange(start, stop, dtype=np.int64) % period).astype(dtype)[None, :, None] + phases[:, None, :]
        position[position >= period] -= period
        return position < self.active.astype(dtype)


# ------------------------------------------------------------------------------------ diurnal groups
@dataclass(frozen=True)
class Diurnal(BlockPattern):
    """Two groups, "day" and "night", whose share of each round's S clients follows a cycle.

    A re-implementation from the description of the two-group diurnal model in C. Zhu,
    Z. Xu, M. Chen, J. Konečný, A. Hard, T. Goldstein, "Diurnal or Nocturnal? Federated
    Learning of Multi-branch Networks from Periodically Shifting Distributions", ICLR 2022
    (the periodically shifting client population of its problem setting and experiments);
    the reading below is ours. The day group is the first D = round(N·``day_fraction``) clients
    (halves rounded up), the night group the other M = N − D. In round t, with
    phase = (t mod C)/C (C = ``period``),

    * ratio_t = 2·|phase − 1/2| (``shape="linear"``) or (cos(2π·phase) + 1)/2 (``"cosine"``),
      so the day group dominates at t ≡ 0 and the night group at t ≡ C/2;
    * q_t = ratio_t^``power``;
    * K_t ~ Binomial(S, q_t) clients come from the day group and S − K_t from the night
      group, each count capped at its group's size with the excess moved to the other
      group: the day count is clip(K_t, max(0, S − M), min(S, D));
    * within each group the clients are drawn uniformly without replacement.

    Exactly S clients take part every round; rounds are independent. No closed form for
    the delays is given: use ``monte_carlo``. The per-round inclusion probability of each
    client is :meth:`inclusion_probabilities`.
    """

    n_clients: int
    per_round: int
    period: int
    power: float = 1.0
    shape: str = "linear"
    day_fraction: float = 0.5

    def __post_init__(self):
        n = integer(self.n_clients, "n_clients")
        s = integer(self.per_round, "per_round")
        if s > n:
            raise ValueError(f"per_round S={s} exceeds n_clients N={n}")
        integer(self.period, "period")
        finite_real(self.power, "power", above=0)
        if self.shape not in ("linear", "cosine"):
            raise ValueError(f"shape must be 'linear' or 'cosine', got {self.shape!r}")
        if not (isinstance(self.day_fraction, numbers.Real) and 0 <= self.day_fraction <= 1):
            raise ValueError(f"day_fraction must lie in [0, 1], got {self.day_fraction!r}")

    @property
    def day_clients(self) -> int:
        """D, the size of the day group (clients 0..D−1)."""
        return int(_round_half_up(self.n_clients * self.day_fraction))

    def day_probability(self, start: int, stop: int) -> np.ndarray:
        """q_t for rounds ``start .. stop-1``."""
        phase = (np.arange(start, stop, dtype=np.int64) % self.period) / self.period
        if self.shape == "linear":
            ratio = np.abs(phase - 0.5) * 2.0
        else:
            ratio = (np.cos(2.0 * np.pi * phase) + 1.0) / 2.0
        return np.clip(ratio, 0.0, 1.0) ** self.power

    def _day_bounds(self) -> tuple[int, int]:
        d, s = self.day_clients, self.per_round
        return max(0, s - (self.n_clients - d)), min(s, d)

    def expected_day_count(self, start: int, stop: int) -> np.ndarray:
        """E[clip(K_t, max(0, S − M), min(S, D))] with K_t ~ Binomial(S, q_t)."""
        from scipy.stats import binom

        low, high = self._day_bounds()
        k = np.arange(self.per_round + 1)
        pmf = binom.pmf(k[None, :], self.per_round, self.day_probability(start, stop)[:, None])
        return pmf @ np.clip(k, low, high).astype(float)

    def inclusion_probabilities(self, start: int, stop: int) -> np.ndarray:
        """P(i ∈ S_t), shape (stop − start, N): E[day count]/D for a day client and
        (S − E[day count])/M for a night client."""
        d, n = self.day_clients, self.n_clients
        day = self.expected_day_count(start, stop)
        out = np.empty((stop - start, n))
        if d:
            out[:, :d] = (day / d)[:, None]
        if n - d:
            out[:, d:] = ((self.per_round - day) / (n - d))[:, None]
        return out

    def _uniform_width(self) -> int:
        return self.per_round + self.n_clients

    def _from_uniforms(self, u, first_round):
        s, d, n = self.per_round, self.day_clients, self.n_clients
        q = self.day_probability(first_round, first_round + u.shape[1])
        low, high = self._day_bounds()
        day = np.clip((u[..., :s] < q[None, :, None]).sum(axis=-1), low, high)
        mask = np.empty(u.shape[:-1] + (n,), dtype=bool)
        mask[..., :d] = _smallest(u[..., s : s + d], day)
        mask[..., d:] = _smallest(u[..., s + d :], s - day)
        return mask


def _smallest(u: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Mark the ``count`` smallest entries of each row of ``u`` (a uniform random subset)."""
    if u.shape[-1] == 0:
        return np.zeros(u.shape, dtype=bool)
    ordered = np.sort(u, axis=-1)
    kth = np.take_along_axis(ordered, np.maximum(count - 1, 0)[..., None], axis=-1)
    return (u <= kth) & (count > 0)[..., None]


# ------------------------------------------------------------------------------------ selection
@dataclass(frozen=True)
class Selected(Pattern):
    """Server-side selection among the available clients: S_t ⊆ A_t, |S_t| = min(S, |A_t|).

    A_t comes from ``availability`` (any pattern, sampled with the same seed, so S_t is a
    subset of ``availability.sample(T, seed)`` round by round). This is how deployed systems
    select among the devices that check in, and our reading of the client sampling on top
    of availability in S. Wang, M. Ji, "A Unified Analysis of Federated Learning with
    Arbitrary Client Participation", NeurIPS 2022. ``rule``:

    * ``"uniform"``: S_t is a uniformly random min(S, |A_t|)-subset of A_t, independently
      each round given the availability. With every client always available this is
      FedSUM Case 1 (:class:`Uniform`).
    * ``"reshuffled"``: the server walks the infinite sequence π_0 π_1 π_2 … of uniformly
      random, independent orders of all N clients, with a pointer that persists across
      rounds. In round t it walks on from the pointer and selects every client it meets
      that is available in round t and not yet selected in round t, until min(S, |A_t|)
      are selected (when the walk runs off the end of π_e it goes on into π_{e+1}: the
      order is renewed when exhausted); the pointer then rests just past the last
      selected client. Clients passed over (unavailable when the walk reached them, or
      met a second time in the same round) lose their turn in that order. A round with
      A_t = ∅ selects nothing and leaves the pointer where it is. With every client always
      available and S dividing N, this is FedSUM Case 4 (:class:`ReshuffledCyclic`): each
      order is split into N/S consecutive blocks. With every client always available and
      any S, τ_max ≤ ⌊(2N − 2)/S⌋ (derived here: a client's consecutive occurrences in
      π_0 π_1 … are fewer than 2N positions apart, every round consumes at least S
      positions, and a client skipped as a duplicate is taken at its next occurrence).

    The reshuffled walk is sequential, so a window of rounds is produced by walking from
    round 0 (rounds in blocks, vectorised over replicates and clients). No closed form:
    use ``monte_carlo`` (a client that ``availability`` never makes available is the
    exception: then τ_t = t + 1 exactly).
    """

    availability: Pattern
    per_round: int
    rule: str = "uniform"

    def __post_init__(self):
        if not isinstance(self.availability, Pattern):
            raise ValueError(f"availability must be a Pattern, got {type(self.availability).__name__}")
        s = integer(self.per_round, "per_round")
        if s > self.n_clients:
            raise ValueError(f"per_round S={s} exceeds n_clients N={self.n_clients}")
        if self.rule not in ("uniform", "reshuffled"):
            raise ValueError(f"rule must be 'uniform' or 'reshuffled', got {self.rule!r}")

    @property
    def n_clients(self) -> int:
        return self.availability.n_clients

    @property
    def deterministic(self) -> bool:
        return self.availability.deterministic and self.per_round >= self.n_clients

    @property
    def _depth(self) -> int:
        inner = self.availability
        return 1 + (inner._depth if isinstance(inner, Selected) else 0)

    def _selection_root(self, root: np.random.SeedSequence) -> np.random.SeedSequence:
        """The root of the selection draws: ``root`` extended by a tag and the nesting depth,
        so a Selected of a Selected draws from distinct streams."""
        return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + (_SELECTION_STREAM, self._depth))

    def _generate(self, root, replicates, start, stop):
        if self.per_round >= self.n_clients:
            return self.availability._generate(root, replicates, start, stop)
        if self.rule == "uniform":
            return self._uniform(root, replicates, start, stop)
        return self._reshuffled(root, replicates, start, stop)

    def _uniform(self, root, replicates, start, stop):
        available = self.availability._generate(root, replicates, start, stop)
        selection = self._selection_root(root)
        s = self.per_round
        out = np.zeros_like(available)
        for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
            lo = block * BLOCK
            a, b = max(lo, start), min(lo + BLOCK, stop)
            u = keyed_uniforms(selection, replicates, block, (BLOCK, self.n_clients))[:, a - lo : b - lo]
            window = available[:, a - start : b - start]
            chosen = np.argpartition(np.where(window, u, np.inf), s - 1, axis=-1)[..., :s]
            picked = np.zeros_like(window)
            np.put_along_axis(picked, chosen, True, axis=-1)
            out[:, a - start : b - start] = picked & window
        return out

    def _reshuffled(self, root, replicates, start, stop):
        walk = _ReshuffledWalk(self._selection_root(root), replicates, self.n_clients, self.per_round)
        out = np.empty((len(replicates), stop - start, self.n_clients), dtype=bool)
        for lo in range(0, stop, BLOCK):
            hi = min(lo + BLOCK, stop)
            available = self.availability._generate(root, replicates, lo, hi)
            for t in range(lo, hi):
                chosen = walk.step(available[:, t - lo])
                if t >= start:
                    out[:, t - start] = chosen
        return out


class _ReshuffledWalk:
    """State of the reshuffled walk for a batch of replicates: epoch e and pointer p.

    The order π_e of replicate r comes from the same keyed draws as
    :class:`ReshuffledCyclic` (unit e // EPOCH_BLOCK, row e % EPOCH_BLOCK; the position of
    client c is the rank of its uniform), so it depends on (seed, r, e) only.
    """

    def __init__(self, root, replicates: range, n_clients: int, per_round: int):
        self.root, self.replicates, self.n, self.s = root, replicates, n_clients, per_round
        reps = len(replicates)
        self.rows = np.arange(reps)
        self.epoch = np.zeros(reps, dtype=np.int64)
        self.pointer = np.zeros(reps, dtype=np.int64)
        self.first_unit = 0
        self.positions = np.empty((reps, 0, n_clients), dtype=np.int32)  # (reps, epochs cached, N)

    def _cover(self, epoch: int) -> None:
        """Cache the orders of every replicate up to ``epoch``, forgetting those passed by all."""
        if self.first_unit * EPOCH_BLOCK + self.positions.shape[1] > epoch:
            return
        self.forget_old_orders()
        while self.first_unit * EPOCH_BLOCK + self.positions.shape[1] <= epoch:
            unit = self.first_unit + self.positions.shape[1] // EPOCH_BLOCK
            u = keyed_uniforms(self.root, self.replicates, unit, (EPOCH_BLOCK, self.n))
            rank = positions_in_order(u)
            self.positions = np.concatenate([self.positions, rank], axis=1)

    def forget_old_orders(self) -> None:
        drop = min(int(self.epoch.min()) // EPOCH_BLOCK - self.first_unit, self.positions.shape[1] // EPOCH_BLOCK)
        if drop > 0:
            self.positions = self.positions[:, drop * EPOCH_BLOCK :]
            self.first_unit += drop

    def step(self, available: np.ndarray) -> np.ndarray:
        """Select in one round; ``available`` is (reps, N) bool."""
        n, rows = self.n, self.rows
        self._cover(int(self.epoch.max()) + 1)
        local = self.epoch - self.first_unit * EPOCH_BLOCK
        here = self.positions[rows, local].astype(np.int64)
        after = self.positions[rows, local + 1].astype(np.int64)
        pointer = self.pointer[:, None]
        left = n - self.pointer  # clients still ahead in π_e
        # walk index of each client's first occurrence from the pointer on
        walk = np.where(here >= pointer, here - pointer, left[:, None] + after)
        key = np.where(available, walk, 2 * n)
        count = np.minimum(self.s, available.sum(axis=1))
        last = np.take_along_axis(np.sort(key, axis=1), np.maximum(count - 1, 0)[:, None], axis=1)[:, 0]
        chosen = available & (key <= last[:, None]) & (count > 0)[:, None]
        moved = np.where(count > 0, last + 1, 0)
        into_next = moved > left
        pointer = np.where(into_next, moved - left, self.pointer + moved)
        epoch = self.epoch + into_next
        ended = pointer == n
        self.epoch = epoch + ended
        self.pointer = np.where(ended, 0, pointer)
        return chosen
