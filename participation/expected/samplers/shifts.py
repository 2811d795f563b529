"""τ_max and τ_avg of ``ReshuffledCyclic`` traces from E − 1 draws an epoch (FedSUM Case 4).

Method "shifts" of ``monte_carlo``, for patterns where every client joins once per epoch
(``remainder="short"``, or S | N): instead of an order of the N clients per epoch, each
epoch draws only the E − 1 values that fix its delays, from a small Markov chain. Cost
O(E²) per epoch instead of O(N log N); the samples differ from ``"trace"``'s and
``"epochs"``' (which reproduce the pattern's own orders) but have the same law.

References: R. You, S. Pu, "FedSUM Family", arXiv:2512.18275, §2.1 Case 4, §2.2 (τ_t = t −
min_i a_{i,t}, eq. (4)). Everything below is derived here.

Delays of one epoch. Epoch k has E = ⌈N/S⌉ rounds; round q of it selects the B_q clients at
positions qS .. qS + B_q − 1 of its order (B_q = S, the last one R = N − (E − 1)S). For
round t = (k+1)E + r of epoch k + 1 ≥ 1, the clients of rounds ≤ r of that epoch have
a_{i,t} ≥ (k+1)E, and the others were last selected in epoch k, at round kE + ℓ with ℓ their
round there (their "label"). So m_t = kE + M_r with M_r the smallest label among the
clients of rounds > r of epoch k + 1 (M_{E−1} := E), and

    τ_t = E + r − M_r,         M_r = #{ℓ : P_ℓ ≤ r},

where P_ℓ is the last round of epoch k + 1 holding a client of label ≤ ℓ (nondecreasing in
ℓ, P_{E−1} = E − 1), since M_r > ℓ iff no client of label ≤ ℓ comes after round r. In
epoch 0 every client not yet selected has a = −1: τ_t = t + 1 for t < E − 1, τ_{E−1} = E − 1.

Independence. Given epochs 0..k + 1, epoch k + 2 is a uniform order independent of them, and
relabelling the clients by their round in epoch k + 1 shows that the labels met by each
round of epoch k + 2 are a uniformly random arrangement of the label multiset (S of each
label, R of the last), whatever the earlier epochs. So the vectors (P_ℓ) of epochs 1, 2, …
are i.i.d.

The chain. Read ℓ downwards from P_{E−1} = E − 1. With Q_q = number of positions in rounds
0..q, K = (ℓ+1)S clients of label ≤ ℓ and c = B_{ℓ+1} of label ℓ + 1, the event P_{ℓ+1} = q
says that all K + c clients of label ≤ ℓ + 1 sit in the first Q_q positions, at least one
in round q; given it (and the chain's past), their positions are a uniform such placement
(the past constrains only larger labels, and every placement is compatible with the same
number of placements of those). Counting placements, for q' < q

    P(P_ℓ ≤ q' | P_{ℓ+1} = q) = h(Q_q, Q_q − Q_{q'}, K) · (1 − h(Q_q − K, B_q, c)) / (1 − h(Q_q, B_q, K + c)),

with h(Q, B, n) = Π_{i<n} (1 − B/(Q − i)) = C(Q − B, n)/C(Q, n), the chance that n of Q
positions drawn without replacement all avoid a given B of them (0 when n > Q − B): the
numerator counts label-≤ℓ clients in the first Q_{q'} positions and at least one label-(ℓ+1)
client in round q, the denominator at least one of the K + c in round q. The chain's
(E − 1) × E × E table of these CDFs is computed once per (N, S) in double precision (h as a
sum of log1p, relative error below N·2⁻⁵²), and each step compares one 53-bit uniform with
a row of it.

Streams. Epochs 1, 2, … of replicate r come in units of ``UNIT_VALUES // (E − 1)`` epochs;
unit u's uniforms are the first values of the generator keyed by (seed, r, tag, u), in
epoch order, so a replicate does not depend on the chunk size, the executor or its workers,
and the first T rounds are the same whatever the horizon.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..._random import keyed_generator
from ...patterns import ReshuffledCyclic
from .sampler import FunctionSampler

#: Spawn-key tag of this method's streams (the patterns' keys are (replicate, unit)).
_SHIFT_STREAM = 0x5F1
#: Uniforms per keyed unit of epochs.
UNIT_VALUES = 1 << 16
#: Largest epoch (E = ⌈N/S⌉) and table work (N·E²) the method takes; beyond, method "epochs".
MAX_EPOCH_ROUNDS, MAX_TABLE_WORK = 64, 1 << 26
#: Chain cells (replicates × epochs) handled at once.
CELLS = 1 << 17


def applies(pattern) -> bool:
    """Whether ``pattern`` draws as ``ReshuffledCyclic`` does, every client once an epoch, and
    its epoch is short enough for the chain's table."""
    if not (isinstance(pattern, ReshuffledCyclic) and type(pattern)._generate is ReshuffledCyclic._generate):
        return False
    n, s = pattern.n_clients, pattern.per_round
    if pattern.remainder != "short" and n % s:
        return False
    epoch = pattern.epoch_rounds
    return epoch <= MAX_EPOCH_ROUNDS and n * epoch * epoch <= MAX_TABLE_WORK


def _log_h(q: int, b: int, n: int) -> float:
    """log C(Q − B, n)/C(Q, n) (−inf when n > Q − B)."""
    if n > q - b:
        return -np.inf
    if b == 0 or n == 0:
        return 0.0
    return float(np.log1p(-b / (q - np.arange(n, dtype=float))).sum())


@lru_cache(maxsize=32)
def transition_cdfs(n: int, s: int) -> np.ndarray:
    """cdf[ℓ, q, q'] = P(P_ℓ ≤ q' | P_{ℓ+1} = q) for q' < q, 1 for q' ≥ q and 2 (never drawn)
    where ℓ + 1 has no client of label ≤ ℓ + 1 in rounds ≤ q; shape (E − 1, E, E)."""
    epoch = -(-n // s)
    sizes = np.full(epoch, s)
    sizes[-1] = n - (epoch - 1) * s
    ends = np.cumsum(sizes)                       # Q_q
    cdf = np.ones((epoch - 1, epoch, epoch))
    for label in range(epoch - 1):
        k, c = (label + 1) * s, int(sizes[label + 1])
        for q in range(epoch):
            big_q, b = int(ends[q]), int(sizes[q])
            if k + c > big_q:                     # P_{ℓ+1} = q is impossible
                cdf[label, q] = 2.0
                continue
            hit_outer = -np.expm1(_log_h(big_q - k, b, c))
            hit_any = -np.expm1(_log_h(big_q, b, k + c))
            for lower in range(q):
                cdf[label, q, lower] = np.exp(_log_h(big_q, big_q - int(ends[lower]), k)) * hit_outer / hit_any
    cdf.flags.writeable = False
    return cdf


def unit_epochs(epoch: int) -> int:
    """Epochs per keyed unit of uniforms."""
    return max(1, UNIT_VALUES // (epoch - 1))


def chunk_size(pattern: ReshuffledCyclic, rounds: int) -> int:
    """Replicates per chunk: enough that a unit's chain cells fill ``CELLS``."""
    epochs = min(unit_epochs(pattern.epoch_rounds), max(1, -(-rounds // pattern.epoch_rounds)))
    return max(1, min(1024, CELLS // epochs))


def chunk_bytes(pattern: ReshuffledCyclic, rounds: int, count: int) -> int:
    """Peak bytes of :func:`shift_chunk` for ``count`` replicates: a unit's uniforms and, for
    up to ``CELLS`` chain cells, the gathered table rows, the labels' last rounds and delays."""
    epoch = pattern.epoch_rounds
    epochs = min(unit_epochs(epoch), max(1, -(-rounds // epoch)))
    cells = min(CELLS, count * epochs)
    return count * epochs * (epoch - 1) * 8 + cells * epoch * 40


def _first_epoch(epoch: int, rounds: int) -> np.ndarray:
    t = np.arange(min(epoch, rounds))
    return np.where(t < epoch - 1, t + 1, epoch - 1)


def _epoch_delays(cdf: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """τ at rounds r = 0..E−1 of epochs after the first: uniforms (cells, E − 1) → (cells, E)."""
    cells, epoch = uniforms.shape[0], cdf.shape[1]
    state = np.full(cells, epoch - 1, dtype=np.intp)          # P_{E−1}
    counts = np.zeros((cells, epoch), dtype=np.int64)         # labels ℓ with P_ℓ = value
    counts[:, epoch - 1] = 1
    rows = np.arange(cells) * epoch
    flat = counts.reshape(-1)
    for step, label in enumerate(range(epoch - 2, -1, -1)):
        state = (cdf[label][state] <= uniforms[:, step, None]).sum(axis=1)
        flat += np.bincount(rows + state, minlength=flat.size)
    below = np.cumsum(counts, axis=1)                         # M_r
    return epoch + np.arange(epoch) - below


def shift_chunk(pattern: ReshuffledCyclic, rounds: int, root, first: int, count: int):
    """τ_max (int64) and τ_avg of replicates ``first .. first + count − 1`` over rounds 0..rounds−1."""
    n, s, epoch = pattern.n_clients, pattern.per_round, pattern.epoch_rounds
    if epoch == 1:                                            # every client every round
        return np.zeros(count, dtype=np.int64), np.zeros(count)
    head = _first_epoch(epoch, rounds)
    tau_max = np.full(count, head.max(), dtype=np.int64)
    tau_sum = np.full(count, head.sum(), dtype=np.int64)
    later = -(-rounds // epoch) - 1                           # epochs after the first
    if later == 0:
        return tau_max, tau_sum / rounds
    cdf = transition_cdfs(n, s)
    tail = rounds - later * epoch                             # rounds of the last epoch (1..E)
    per_unit = unit_epochs(epoch)
    replicates = range(first, first + count)
    for u in range(-(-later // per_unit)):
        width = min(per_unit, later - u * per_unit)
        uniforms = np.empty((count, width, epoch - 1))
        for j, rep in enumerate(replicates):
            keyed_generator(root, rep, _SHIFT_STREAM, u).random(out=uniforms[j].reshape(-1))
        step = max(1, CELLS // count)
        for lo in range(0, width, step):
            hi = min(width, lo + step)
            tau = _epoch_delays(cdf, uniforms[:, lo:hi].reshape(-1, epoch - 1)).reshape(count, hi - lo, epoch)
            if u * per_unit + hi == later and tail < epoch:   # the horizon cuts the last epoch
                tau[:, -1, tail:] = 0
            np.maximum(tau_max, tau.max(axis=(1, 2)), out=tau_max)
            tau_sum += tau.sum(axis=(1, 2))
    return tau_max, tau_sum / rounds


#: Method "shifts": the law is the pattern itself (``ReshuffledCyclic`` where :func:`applies`).
SAMPLER = FunctionSampler(
    "shifts", "a ReshuffledCyclic pattern where every client joins once an epoch (remainder='short' or S | N) "
    f"of at most {MAX_EPOCH_ROUNDS} rounds, and no device", __name__, accepts="applies",
    size="chunk_size", peak="chunk_bytes", draw="shift_chunk", caches=("transition_cdfs",))
