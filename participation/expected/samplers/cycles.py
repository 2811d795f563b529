"""τ_max and τ_avg of ``OnOffCycles`` traces from each replicate's phases alone.

Method "cycles" of ``monte_carlo``. A replicate of :class:`~participation.patterns.OnOffCycles`
is fixed by its N phases (client i is on at t iff (t + φ_i) mod C < a_i), so instead of the
T × N trace each replicate computes its delays from the phases in O(N + C) operations. The
phases are the pattern's own draws, so the replicates are exactly those of method "trace".

Derivation (ours). As in :mod:`.subsets`, with c(x) = max_i (first selection of i at a round
≥ x, T if none), 0 ≤ x ≤ T,

    Σ_t τ_t = T(T+1)/2 − Σ_{x≤T} (T − c(x)),      τ_max = max_{x≤T} (c(x) − x),

where τ_t = t − min_i a_{i,t} (FedSUM, S. You and S. Pu, arXiv:2512.18275, §2.2, eq. (4)).
Client i with 1 ≤ a_i ≤ C − 1 and r = (x + φ_i) mod C is on at x when r < a_i, and otherwise
first on again C − r rounds later, so its first selection at or after x is x + h_i(x) with

    h_i(x) = C − r if r ≥ a_i, else 0,

periodic in x with period C (h_i = 0 when a_i = C). Hence c(x) = min(x + g(x mod C), T) with
g(y) = max_i h_i(y), unless some a_i = 0 (then c ≡ T: τ_t = t + 1, τ_max = T,
τ_avg = (T + 1)/2, as in :mod:`.availability_laws`).

g in O(N + C). On one period, h_i is a ramp of slope −1 from C − a_i at its start
s_i = (a_i − φ_i) mod C down to 1, then 0 until the next start: h_i(y) = K_i − y on
s_i ≤ y < K_i = s_i + C − a_i (unrolled past C). Every ramp ends at the value 1, so among the
ramps started at or before y the one with the largest K_i covers y whenever any of them
does, and g(y) = max(0, max_{s_i ≤ y} K_i − y): a prefix maximum. Placing every ramp at s_i
and at s_i + C on the line 0..2C − 1 and reading positions C..2C − 1 covers the wrap-around.

The sums over x. g ≤ C − 1, so for x ≤ T − C the cap T does not bind: those x contribute
g(x mod C) to the maximum and T − x − g(x mod C) to the sum, read off one period's total and
prefix sums; the at most C values x > T − C are taken one by one.
"""
from __future__ import annotations

import numpy as np

from ...patterns import OnOffCycles
from .sampler import FunctionSampler

#: Values (replicates × (2C + N)) one chunk aims at, and the most replicates a chunk holds.
CHUNK_VALUES, MAX_CHUNK = 1 << 22, 4096


def applies(pattern) -> bool:
    """Whether ``pattern`` draws its traces as ``OnOffCycles`` does (its phases, then the cycles)."""
    return (isinstance(pattern, OnOffCycles) and type(pattern)._generate is OnOffCycles._generate
            and type(pattern)._phases is OnOffCycles._phases)


def chunk_size(pattern: OnOffCycles, rounds: int) -> int:
    """Replicates per chunk: about ``CHUNK_VALUES`` values of the period and phase arrays (any ``rounds``)."""
    return int(np.clip(CHUNK_VALUES // (2 * pattern.period + pattern.n_clients), 1, MAX_CHUNK))


def chunk_bytes(pattern: OnOffCycles, rounds: int, count: int) -> int:
    """Peak bytes of :func:`cycle_chunk` for ``count`` replicates: the phases and ramp
    positions (int64, four arrays of N) and the unrolled period with its prefix maximum and
    sums (int64, four arrays of 2C), whatever ``rounds``."""
    return 8 * count * (4 * pattern.n_clients + 8 * pattern.period)


def cover_offsets(pattern: OnOffCycles, phases: np.ndarray) -> np.ndarray:
    """g(y) = max_i h_i(y) for y = 0..C−1 (module docstring), shape (replicates, C), int64,
    for ``phases`` of shape (replicates, N); every a_i must be at least 1."""
    period = pattern.period
    active = np.broadcast_to(pattern.active, phases.shape)
    count = phases.shape[0]
    off = active < period                                       # clients with an absence stretch
    start = (active - phases) % period
    end = start + period - active                               # K_i
    line = np.full((count, 2 * period), -1, dtype=np.int64)
    rows = np.broadcast_to(np.arange(count)[:, None], phases.shape)[off]
    start, end = start[off], end[off]
    np.maximum.at(line, (rows, start), end)
    np.maximum.at(line, (rows, start + period), end + period)
    np.maximum.accumulate(line, axis=1, out=line)
    return np.maximum(line[:, period:] - np.arange(period, 2 * period), 0)


def cycle_delays(pattern: OnOffCycles, rounds: int, phases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """τ_max (int64) and τ_avg of the traces with these ``phases`` (replicates, N) over rounds 0..rounds−1."""
    count = phases.shape[0]
    if (pattern.active == 0).any():                             # a client never on: c(x) = T
        return np.full(count, rounds, dtype=np.int64), np.full(count, (rounds + 1) / 2)
    period = pattern.period
    g = cover_offsets(pattern, phases)
    full = max(0, rounds - period + 1)                          # x = 0..full−1: the cap T does not bind
    cycles, rest = divmod(full, period)
    prefix = np.concatenate([np.zeros((count, 1), dtype=np.int64), np.cumsum(g, axis=1)], axis=1)
    g_sum = prefix[:, -1] * cycles + prefix[:, rest]
    g_max = g[:, : min(full, period)].max(axis=1, initial=0)     # the residues of x = 0..full−1
    x = np.arange(full, rounds + 1, dtype=np.int64)             # the last ≤ C values
    capped = np.minimum(g[:, x % period], rounds - x)
    tau_max = np.maximum(g_max, capped.max(axis=1))
    uncovered = full * rounds - full * (full - 1) // 2 - g_sum + (rounds - x - capped).sum(axis=1)
    tau_sum = rounds * (rounds + 1) // 2 - uncovered
    return tau_max, tau_sum / rounds


def cycle_chunk(pattern: OnOffCycles, rounds: int, root, first: int, count: int):
    """τ_max and τ_avg of replicates ``first .. first + count − 1``, from the pattern's own phases."""
    phases = np.asarray(pattern._phases(root, range(first, first + count)), dtype=np.int64)
    return cycle_delays(pattern, rounds, phases)


#: Method "cycles": the law is the pattern itself (``OnOffCycles`` where :func:`applies`).
SAMPLER = FunctionSampler("cycles", "an OnOffCycles pattern and no device", __name__, accepts="applies",
                          size="chunk_size", peak="chunk_bytes", draw="cycle_chunk")
