"""Keyed random bit streams shared by the gap samplers (constant, Markov, periodic and
time-varying probabilities).

A stream is keyed by the run's seed and integers (a replicate, a block of replicates, a
sampler's tag, ...), so that what a replicate draws does not depend on the chunking, the
executor or its workers. Each sampler keeps its own tags, which separate its streams from
the others' and from the patterns' own.
"""
from __future__ import annotations

import numpy as np

#: Replicates sharing one keyed stream of words (row r mod WORD_BLOCK of block r // WORD_BLOCK).
WORD_BLOCK = 256


def keyed_bits(root: np.random.SeedSequence, *key: int) -> np.random.PCG64:
    """The bit generator keyed by ``root`` and ``key`` (appended to its spawn key)."""
    return np.random.PCG64(np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + key))


def block_words(plan, root, first: int, count: int, tag: int) -> np.ndarray:
    """Rows first..first+count−1 of the block streams: (count, plan.words) uint64; the replicates
    of block b = r // 256 share the stream keyed by (seed, b, tag), row r mod 256 reached by jumping
    ahead (one stream per replicate would cost more to set up than to read)."""
    out = np.empty((count, plan.words), dtype=np.uint64)
    row = first
    while row < first + count:
        block, offset = divmod(row, WORD_BLOCK)
        rows = min(WORD_BLOCK - offset, first + count - row)
        bits = keyed_bits(root, block, tag)
        bits.advance(offset * plan.words)
        out[row - first : row - first + rows] = bits.random_raw(rows * plan.words).reshape(rows, plan.words)
        row += rows
    return out
