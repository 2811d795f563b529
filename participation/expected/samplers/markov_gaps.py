"""Monte-Carlo for Markov availability: every absence run of each two-state chain.

Method "gaps" of ``monte_carlo`` for :class:`~participation.patterns.Markov` patterns (CA-Fed's
temporal and spatial correlation among them). The delays follow from the cover times of the
absence intervals, as in :mod:`.gaps`.

A two-state chain with P(on | on) = c and P(on | off) = a alternates on-runs of
Geometric(1 − c) rounds and off-runs of Geometric(a) rounds (both on {1, 2, …}); started in
its stationary law it is on at round 0 with probability π, and the run under way at round 0
has the same geometric law (memorylessness). Equivalently, the gap g between consecutive
presences is 0 with probability c and 1 + Geometric(a) − 1 ≥ 1 with probability 1 − c, the
first presence has the same law with π in place of c, and the last absence is censored at T.
Every absence run (a, b) — absent on a+1..b−1, present at b (the interval (a, b] of
:mod:`.gaps` with b − a ≥ 2) — is drawn, with threshold H = 2: runs of consecutive
presences (intervals of length one) cannot change c(x) ≥ x and are drawn only as the
lengths of the on-runs. So a replicate draws about T·Σ_k π_k(1 − c_k) absence runs
instead of T·N cells, and it is exact.

Replicate r's uniforms come from the stream keyed by (seed, r, _MARKOV_STREAM), in a fixed
order (start states, then the on-runs and off-runs of every chain, then any extension),
so results do not depend on chunking or workers. Clients sharing one chain (``clusters``)
are one chain here: they are present together, so they change no c(x).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...patterns import Pattern
from .gaps import GAPS_NEEDS
from .sampler import FunctionSampler
from .streams import keyed_bits

#: Most replicates a chunk holds.
_MAX_CHUNK = 256

_MARKOV_STREAM = 0x6AC
#: Pairs drawn at first per chain: the expected number needed to pass T plus this many standard
#: deviations (and 2); the few chains that fall short draw more. A larger spread draws pairs that
#: are never used, a smaller one sends more chains back for more.
MARKOV_SPREAD = 2.5


@dataclass(frozen=True, eq=False)
class MarkovChains:
    """The independent chains of a Markov pattern that some client follows: stationary
    P(on) π, P(on | on) c and P(on | off) a, each of shape (chains,)."""

    pi: np.ndarray
    on_after_on: np.ndarray
    on_after_off: np.ndarray

    @property
    def size(self) -> int:
        return self.pi.size


def markov_chains(pattern: Pattern, rounds: int | None = None, auto: bool = False) -> MarkovChains | None:
    """The chains of ``pattern`` if it is a ``Markov`` pattern (its own sampler, not a subclass's):
    the law of method "gaps" for any ``rounds``, "auto" (``auto``) or not."""
    from ...patterns import Markov

    if not isinstance(pattern, Markov) or type(pattern)._generate is not Markov._generate:
        return None
    matrices = pattern.transition_matrices()
    used = np.arange(pattern.n_chains) if pattern.clusters is None else np.unique(pattern.clusters)
    arrays = [np.ascontiguousarray(x[used], dtype=float) for x in (pattern.pi, matrices[:, 1, 1], matrices[:, 0, 1])]
    for array in arrays:
        array.flags.writeable = False
    return MarkovChains(*arrays)


@dataclass(frozen=True, eq=False)
class _MarkovPlan:
    rounds: int
    pairs: np.ndarray  # (on, off) run pairs drawn at first per chain
    offsets: np.ndarray  # first pair column of each chain (length chains + 1)
    log_on: np.ndarray  # ln c per pair column (−inf where c = 0)
    log_off: np.ndarray  # ln(1 − a) per pair column (−inf where a = 1)
    chain: np.ndarray  # chain index per pair column
    extension: int  # pairs drawn at a time for a chain whose first pairs end before T

    @property
    def columns(self) -> int:
        return int(self.offsets[-1])


@lru_cache(maxsize=32)
def _markov_plan_cached(key: bytes, chains: int, rounds: int) -> _MarkovPlan:
    pi, c, a = np.frombuffer(key).reshape(3, chains)
    with np.errstate(divide="ignore"):
        mean = 1.0 / (1.0 - c) + 1.0 / a
        var = c / (1.0 - c) ** 2 + (1.0 - a) / a**2
        spread = np.sqrt(rounds * var / mean**3)
        pairs = np.ceil(np.clip(rounds / mean + MARKOV_SPREAD * spread + 2, 1, rounds + 1)).astype(np.int64)
        extension = int(np.ceil(np.max(np.minimum(2 * spread + 4, rounds + 1), initial=4)))
        _require_plan_memory(chains, rounds, int(pairs.sum()))
        offsets = np.concatenate([[0], np.cumsum(pairs)])
        chain = np.repeat(np.arange(chains), pairs)
        log_on, log_off = np.log(c)[chain], np.log1p(-a)[chain]
    for array in (pairs, offsets, log_on, log_off, chain):
        array.flags.writeable = False
    return _MarkovPlan(rounds, pairs, offsets, log_on, log_off, chain, extension)


def _require_plan_memory(chains: int, rounds: int, columns: int) -> None:
    """Refuse, before the plan is allocated, a plan of ``columns`` (on, off) pairs whose arrays
    (three 64-bit values a pair) and one replicate's runs (:func:`markov_chunk_bytes`) exceed the
    memory limit."""
    from ...budget import require_memory

    require_memory((24 + 80) * columns + 32 * chains + 8 * rounds,
                   f"the absence runs of {chains} Markov chains over {rounds} rounds (method 'gaps': "
                   f"{columns} run pairs a replicate)")


def _markov_plan(chains: MarkovChains, rounds: int) -> _MarkovPlan:
    key = np.concatenate([chains.pi, chains.on_after_on, chains.on_after_off]).tobytes()
    return _markov_plan_cached(key, chains.size, int(rounds))


def _run_lengths(uniform: np.ndarray, log_stay: np.ndarray, limit: int, dtype=np.int64) -> np.ndarray:
    """1 + Geometric(1 − e^{log_stay}) failures by inversion (P(L > k) = stay^k), clipped at
    ``limit``; ``uniform`` (float64) is used as scratch and overwritten."""
    with np.errstate(divide="ignore", invalid="ignore"):
        np.negative(uniform, out=uniform)
        np.log1p(uniform, out=uniform)
        np.divide(uniform, log_stay, out=uniform)
    np.floor(uniform, out=uniform)
    np.minimum(uniform, limit, out=uniform)
    runs = uniform.astype(dtype)
    runs += 1
    return runs


def _markov_runs(chains: MarkovChains, plan: _MarkovPlan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(starts, next presences) of one replicate's absence runs that start before T, every chain."""
    rounds, n, m = plan.rounds, chains.size, plan.columns
    # every chain end to end, each run ≤ T + 1: a 32-bit running sum when it cannot overflow
    dtype = np.int32 if 2 * m * (rounds + 1) < 2**31 else np.int64
    start_on = rng.random(n) < chains.pi
    on = _run_lengths(rng.random(m), plan.log_on, rounds, dtype)
    off = _run_lengths(rng.random(m), plan.log_off, rounds, dtype)
    on[plan.offsets[:-1][~start_on]] = 0  # off at round 0: the first off-run starts there
    on += off
    ends = np.cumsum(on, out=on)  # next presence after each off-run, chains end to end
    before = np.zeros(n, dtype=dtype)
    before[1:] = ends[plan.offsets[1:-1] - 1]
    ends -= before[plan.chain]
    starts = ends - off
    short = np.flatnonzero(ends[plan.offsets[1:] - 1] < rounds)
    if short.size:  # a few chains: continue them, a batch of pairs at a time, past T
        starts, ends = _extend_runs(plan, rng, short, starts, ends, dtype)
    keep = starts < rounds
    return starts[keep], ends[keep]


def _extend_runs(plan: _MarkovPlan, rng: np.random.Generator, short: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                 dtype) -> tuple[np.ndarray, np.ndarray]:
    """Runs of the chains ``short`` (whose drawn runs end before T) until a presence at or after
    T: ``plan.extension`` more (on, off) pairs for each of them at a time, from the stream."""
    rounds, width = plan.rounds, plan.extension
    first = plan.offsets[short]
    log_on, log_off = plan.log_on[first][:, None], plan.log_off[first][:, None]
    end = ends[plan.offsets[short + 1] - 1].astype(np.int64)
    added_starts, added_ends = [starts], [ends]
    while short.size:
        on = _run_lengths(rng.random((short.size, width)), log_on, rounds)
        off = _run_lengths(rng.random((short.size, width)), log_off, rounds)
        new_ends = end[:, None] + np.cumsum(on + off, axis=1)
        added_starts.append((new_ends - off).astype(dtype).ravel())
        added_ends.append(new_ends.astype(dtype).ravel())
        going = new_ends[:, -1] < rounds
        short, end, log_on, log_off = short[going], new_ends[going, -1], log_on[going], log_off[going]
    return np.concatenate(added_starts), np.concatenate(added_ends)


def markov_chunk(chains: MarkovChains, rounds: int, root, first: int, count: int):
    """(τ_max, τ_avg) of replicates first..first+count−1 of independent stationary chains."""
    plan = _markov_plan(chains, rounds)
    cover = np.zeros((count, rounds), dtype=np.int32)
    flat = cover.ravel()
    for row in range(count):
        rng = np.random.Generator(keyed_bits(root, first + row, _MARKOV_STREAM))
        starts, ends = _markov_runs(chains, plan, rng)
        starts += row * rounds
        np.maximum.at(flat, starts, np.minimum(ends, rounds).astype(np.int32, copy=False))
    np.maximum.accumulate(cover, axis=1, out=cover)
    c = np.maximum(cover, np.arange(rounds, dtype=np.int32), out=cover)
    tau_max = (c - np.arange(rounds, dtype=c.dtype)).max(axis=1).astype(float)
    tau_sum = rounds * (rounds + 1) // 2 - (rounds * rounds - c.sum(axis=1, dtype=np.int64))
    return tau_max, tau_sum / rounds


def markov_chunk_size(chains: MarkovChains, rounds: int) -> int:
    """Replicates per chunk: about 2^20 cells of the cover array and the runs' draws."""
    plan = _markov_plan(chains, rounds)
    return int(np.clip((1 << 20) // (rounds + 6 * plan.columns), 1, _MAX_CHUNK))


def markov_chunk_bytes(chains: MarkovChains, rounds: int, count: int) -> int:
    """Peak bytes of :func:`markov_chunk` for ``count`` replicates: the cover array (32-bit)
    and its prefix maximum, and one replicate's runs (a few 64-bit arrays per pair)."""
    plan = _markov_plan(chains, rounds)
    return count * 8 * rounds + 80 * plan.columns + 16 * chains.size


#: Method "gaps" for ``Markov`` patterns: the law is their independent chains.
SAMPLER = FunctionSampler("gaps", GAPS_NEEDS, __name__, law="markov_chains", size="markov_chunk_size",
                          peak="markov_chunk_bytes", draw="markov_chunk", caches=("_markov_plan_cached",))
