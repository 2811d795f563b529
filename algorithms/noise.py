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
    that an algorithm's ``round`` receives."""

    def __init__(self, seed, device=None):
        self.entropy = as_entropy(seed)
        self.device = torch.device(device) if device is not None else torch.device("cpu")

    def generator(self, t: int, k: int) -> torch.Generator:
        state = np.random.SeedSequence(self.entropy, spawn_key=(int(t), int(k))).generate_state(1, np.uint64)
        return torch.Generator(device=self.device).manual_seed(int(state[0]))

    def for_round(self, t: int) -> Callable[[int], torch.Generator]:
        return lambda k: self.generator(t, k)
