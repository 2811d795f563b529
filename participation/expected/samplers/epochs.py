"""τ_max and τ_avg of ``ReshuffledCyclic`` traces from the epochs' orders alone.

Replicate r is the trace ``pattern.sample_batch(rounds, 1, root, first_replicate=r)``:
epoch e's order is drawn exactly as the pattern draws it (keyed draw unit
e // EPOCH_BLOCK, row e mod EPOCH_BLOCK, ``argsort`` of the uniforms), but no (T, N) mask
is built. With E rounds per epoch, round t = eE + s and a_c the last selection of client c
before epoch e (−1 if none; a client sitting out an epoch under ``remainder="drop"`` keeps
its older one), the clients of the groups 0..s of epoch e's order (positions < (s+1)S)
were selected in this epoch, at most s rounds ago, the slot-0 block exactly s, while every
client of a later group (the "drop" left-overs included) was last selected before round eE,
more than s rounds ago. Hence [derived]

    τ_t = t − min{a_c : c in a group > s of epoch e}      (s when there is none),

a suffix minimum over the groups of the per-group minima of a_c: O(N) per epoch and
replicate instead of O(N·E), vectorised over replicates.
"""
from __future__ import annotations

import numpy as np

from ..._random import keyed_uniforms
from ...patterns import ReshuffledCyclic
from ...patterns.sampling import EPOCH_BLOCK
from .sampler import CHUNK_CELLS, FunctionSampler


def applies(pattern) -> bool:
    """Whether ``pattern`` draws its traces as ``ReshuffledCyclic`` does."""
    return isinstance(pattern, ReshuffledCyclic) and type(pattern)._generate is ReshuffledCyclic._generate


def chunk_size(pattern: ReshuffledCyclic, rounds: int) -> int:
    """Replicates per chunk: their draw units (``EPOCH_BLOCK`` epochs of N uniforms each) hold
    about ``CHUNK_CELLS`` / 4 values, whatever ``rounds``."""
    return max(1, CHUNK_CELLS // (EPOCH_BLOCK * pattern.n_clients * 4))


def chunk_bytes(pattern: ReshuffledCyclic, rounds: int, count: int) -> int:
    """Memory of one chunk of ``count`` replicates: a draw unit's uniforms and orders, and
    the per-epoch work arrays, whatever ``rounds``."""
    n, groups = pattern.n_clients, -(-pattern.n_clients // pattern.per_round)
    return count * (EPOCH_BLOCK * n * 24 + 8 * (6 * n + 4 * (groups + 1) * pattern.per_round + 8 * groups))


def epoch_chunk(pattern: ReshuffledCyclic, rounds: int, root, first: int, count: int):
    """τ_max (int64) and τ_avg of replicates ``first .. first + count − 1`` over rounds 0..rounds−1."""
    n, size, epoch = pattern.n_clients, pattern.per_round, pattern.epoch_rounds
    groups = -(-n // size)          # groups of S positions in an order; the last may be short
    if groups == epoch + 1:         # "drop": the last group sits the epoch out
        selected = epoch * size
    else:
        selected = n
    replicates = range(first, first + count)
    big = np.iinfo(np.int64).max
    last = np.full((count, n), -1, dtype=np.int64)              # a_c before the current epoch
    padded = np.full((count, groups * size), big, dtype=np.int64)
    position = np.arange(n)
    chosen_at = np.where(position < selected, position // size, -1)  # slot of each position (−1: sits out)
    sits_out = position >= selected
    slots = np.arange(epoch, dtype=np.int64)
    tau_max = np.zeros(count, dtype=np.int64)
    tau_sum = np.zeros(count, dtype=np.int64)
    offsets = np.arange(count, dtype=np.int64)[:, None] * n     # flat index of (replicate, client) = offset + client
    flat = last.reshape(-1)
    epochs = -(-rounds // epoch)
    order = None
    for e in range(epochs):
        k = e % EPOCH_BLOCK
        if k == 0 or order is None:
            u = keyed_uniforms(root, replicates, e // EPOCH_BLOCK, (EPOCH_BLOCK, n))
            order = np.argsort(u, axis=-1)      # clients in the order of each epoch, as the pattern draws them
        current = order[:, k] + offsets         # (count, N): the client at each position, as a flat index
        before = flat.take(current)             # a_c, by position
        padded[:, :n] = before
        minima = padded.reshape(count, groups, size).min(axis=2)
        later = np.minimum.accumulate(minima[:, ::-1], axis=1)[:, ::-1]   # later[:, g] = min over groups ≥ g
        t0 = e * epoch
        tau = np.empty((count, epoch), dtype=np.int64)
        tau[:, : epoch - 1] = t0 + slots[: epoch - 1] - later[:, 1:epoch]
        tau[:, epoch - 1] = (t0 + epoch - 1 - later[:, epoch]) if groups > epoch else epoch - 1
        seen = min(epoch, rounds - t0)
        np.maximum(tau_max, tau[:, :seen].max(axis=1), out=tau_max)
        tau_sum += tau[:, :seen].sum(axis=1)
        flat.put(current, np.where(sits_out, before, t0 + chosen_at))
    return tau_max, tau_sum / rounds


#: Method "epochs": the law is the pattern itself (``ReshuffledCyclic`` where :func:`applies`).
SAMPLER = FunctionSampler("epochs", "a ReshuffledCyclic pattern and no device", __name__, accepts="applies",
                          size="chunk_size", peak="chunk_bytes", draw="epoch_chunk")
