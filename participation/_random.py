"""Seed handling shared by every random pattern.

Randomness is keyed, never sequential: the uniforms for replicate ``r`` and draw unit
``b`` (a block of rounds, or of epochs) come from their own generator,
``SeedSequence(entropy, spawn_key=(r, b))``. A trace is therefore the same bit for bit
whether it is sampled whole, in chunks of rounds, or as part of a batch of any size.
"""
from __future__ import annotations

import numbers

import numpy as np
from .validation import integer

#: Rounds (or epochs) per keyed draw unit. Changing it changes every sampled trace.
BLOCK = 256

SeedLike = "None | int | np.random.Generator | np.random.SeedSequence"


def seed_sequence(seed) -> np.random.SeedSequence:
    """Turn ``None | int | Generator | SeedSequence`` into a root ``SeedSequence``.

    ``None`` draws fresh OS entropy; a ``Generator`` is consumed once (one 128-bit draw),
    as scikit-learn does with a ``RandomState``.
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(0, 2**63)) << 64 | int(seed.integers(0, 2**63)))
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        integer(seed, "seed", 0)
        return np.random.SeedSequence(int(seed))
    raise ValueError(f"seed must be None, a non-negative int, a numpy Generator or SeedSequence, got {seed!r}")


def keyed_generator(root: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """The generator of one draw unit: ``root`` extended by ``key`` in its spawn key."""
    child = np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(int(k) for k in key))
    return np.random.Generator(np.random.PCG64(child))


def keyed_uniforms(root: np.random.SeedSequence, replicates: range, unit: int, shape: tuple[int, ...]) -> np.ndarray:
    """Uniforms on [0, 1) of shape ``(len(replicates), *shape)`` for draw unit ``unit``.

    Row ``j`` depends only on ``(root, replicates[j], unit)``; ``shape`` must not depend on
    the caller's chunking (callers always draw a whole unit and slice).
    """
    out = np.empty((len(replicates),) + tuple(shape))
    for j, rep in enumerate(replicates):
        keyed_generator(root, rep, unit).random(out=out[j])
    return out
