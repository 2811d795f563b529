"""Stochastic-gradient randomness keyed by (seed, round, step).

The generator of local step / mini-batch k of round t is seeded with
``numpy.random.SeedSequence(seed, spawn_key=(t, k)).generate_state(1, uint64)``. Every draw is
therefore independent across rounds and steps, a run is reproducible, and two algorithms
run with the same seed see the same noise (the problem draws for all N clients and keeps
the active rows, so neither does it depend on who else is active).
"""
from __future__ import annotations

import numbers
from typing import Callable

import numpy as np
import torch

from .seeding import spawn_words

__all__ = ["NoiseStream", "as_entropy"]


def as_entropy(seed) -> int:
    """An int ≥ 0 from ``None`` (fresh OS entropy), an int ≥ 0 or a numpy Generator."""
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be None, an integer ≥ 0 or a numpy Generator, got {seed!r}")
    return int(seed)


class NoiseStream:
    """``NoiseStream(seed, device).generator(t, k)``; ``for_round(t)`` is the callable k → generator
    that an algorithm's ``round`` receives.

    The seed words of a block of ``BLOCK`` rounds × up to ``STEPS`` steps are computed together by
    ``seeding.spawn_words``, equal to the per-pair SeedSequence word; a step past ``STEPS`` or a
    round past 2^32 − ``BLOCK`` takes numpy's SeedSequence directly."""

    BLOCK = 256
    STEPS = 64

    def __init__(self, seed, device=None):
        self.entropy = as_entropy(seed)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._block, self._words = -1, np.zeros((0, 0), dtype=np.uint64)

    def seed_word(self, t: int, k: int) -> int:
        """SeedSequence(seed, spawn_key=(t, k)).generate_state(1, uint64)[0]."""
        t, k = int(t), int(k)
        if t >= 2**32 - self.BLOCK or k >= self.STEPS:
            return int(np.random.SeedSequence(self.entropy, spawn_key=(t, k)).generate_state(1, np.uint64)[0])
        block, row = divmod(t, self.BLOCK)
        if block != self._block or k >= self._words.shape[1]:
            steps = min(self.STEPS, max(2 * (k + 1), self._words.shape[1] if block == self._block else 0, 8))
            first = block * self.BLOCK
            self._words = spawn_words(self.entropy, np.arange(first, first + self.BLOCK)[:, None], np.arange(steps)[None, :])
            self._block = block
        return int(self._words[row, k])

    def generator(self, t: int, k: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(self.seed_word(t, k))

    def for_round(self, t: int) -> Callable[[int], torch.Generator]:
        return lambda k: self.generator(t, k)
