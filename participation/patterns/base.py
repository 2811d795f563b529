"""The pattern protocol and the machinery shared by every pattern.

A pattern is a frozen dataclass describing how {S_t} is generated. Every pattern
offers ``sample(rounds, seed, start=0) -> Trace`` and ``sample_batch(rounds, reps,
seed, start=0, first_replicate=0) -> bool (reps, rounds, n_clients)``.

Reproducibility contract: replicate ``r`` of seed ``s`` is one infinite trace; any call
returns a window of it. ``sample(T, s)`` equals ``sample_batch(T, k, s)[0]`` for any ``k``,
``sample(T, s, start=a)`` equals rounds ``a .. a+T-1`` of ``sample(a+T, s)``, and
``sample_batch(T, k, s, first_replicate=j)`` equals rows ``j .. j+k-1`` of a bigger batch.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from .._random import BLOCK, keyed_uniforms, seed_sequence
from ..trace import Trace
from ..validation import integer




def check_probabilities(p: np.ndarray, name: str, *, allow_zero: bool = False) -> np.ndarray:
    """Reject probabilities outside (0, 1] (or [0, 1]), naming the first bad value."""
    p = np.asarray(p, dtype=float)
    low_ok = (p >= 0) if allow_zero else (p > 0)
    bad = ~(low_ok & (p <= 1))
    if bad.any():
        value = p.flat[int(np.flatnonzero(bad.ravel())[0])]
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"{name} must lie in {interval}, got {value}")
    return p


def frozen_array(value, dtype=float) -> np.ndarray:
    array = np.array(value, dtype=dtype)
    array.flags.writeable = False
    return array


def require_pattern(pattern, name: str = "pattern") -> None:
    """A TypeError naming ``pattern`` when it is not a participation pattern (a preset's name is
    not one: ``participation.patterns.preset(name)`` makes it)."""
    if isinstance(pattern, str):
        raise TypeError(f"{name} must be a participation pattern, got the string {pattern[:40]!r}; "
                        f"participation.patterns.preset({pattern[:40]!r}) makes the preset")
    if not (hasattr(pattern, "sample_batch") and hasattr(pattern, "n_clients")):
        raise TypeError(f"{name} must be a participation pattern (participation.patterns), got {type(pattern).__name__}")


class Pattern(ABC):
    """Base class; subclasses are frozen dataclasses with an ``n_clients`` field."""

    n_clients: int

    #: True when the pattern draws nothing (sample_batch repeats one trace).
    deterministic = False
    #: The run-record header models this class writes and reads (``"model"`` name → the header's
    #: other fields); :mod:`participation.patterns.headers` maps each name to the class.
    HEADER_FIELDS: ClassVar[dict[str, tuple[str, ...]]] = {}

    def record_header(self) -> dict | None:
        """The run record's ``availability`` header for this pattern (``{"model": name, ...}``,
        plain JSON values), or None when no header model describes it."""
        return None

    @classmethod
    def from_record_header(cls, header: dict, n_clients: int) -> "Pattern":
        """The pattern a header written by :meth:`record_header` describes, for ``n_clients``
        clients."""
        raise ValueError(f"{cls.__name__} reads no record header")

    def sample(self, rounds: int, seed=None, *, start: int = 0) -> Trace:
        """Rounds ``start .. start+rounds-1`` of replicate 0 as a Trace."""
        return Trace(self.sample_batch(rounds, 1, seed, start=start)[0])

    def sample_batch(self, rounds: int, reps: int, seed=None, *, start: int = 0, first_replicate: int = 0) -> np.ndarray:
        """Replicates ``first_replicate ..`` as a bool array ``(reps, rounds, n_clients)``."""
        rounds = integer(rounds, "rounds")
        reps = integer(reps, "reps")
        start = integer(start, "start", minimum=0)
        first_replicate = integer(first_replicate, "first_replicate", minimum=0)
        from ..budget import require_memory

        # the traces themselves (a bool per cell), and the uniforms of one block they are drawn from
        require_memory(float(reps) * rounds * self.n_clients + 8.0 * reps * min(rounds, BLOCK) * self.n_clients,
                       f"{reps} trace(s) of {rounds} rounds × {self.n_clients} clients")
        root = seed_sequence(seed)
        return self._generate(root, range(first_replicate, first_replicate + reps), start, start + rounds)

    @abstractmethod
    def _generate(self, root: np.random.SeedSequence, replicates: range, start: int, stop: int) -> np.ndarray:
        """Rounds ``start .. stop-1`` of every replicate in ``replicates``."""


class BlockPattern(Pattern):
    """A pattern whose rounds are drawn from keyed blocks of ``BLOCK`` rounds.

    Subclasses turn the uniforms of one block into participation with ``_from_uniforms``;
    blocks are independent, so any window only touches the blocks it overlaps.
    """

    def _generate(self, root, replicates, start, stop):
        out = np.empty((len(replicates), stop - start, self.n_clients), dtype=bool)
        for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
            lo, hi = block * BLOCK, (block + 1) * BLOCK
            u = keyed_uniforms(root, replicates, block, (BLOCK, self._uniform_width()))
            rows = self._from_uniforms(u, lo)
            a, b = max(lo, start), min(hi, stop)
            out[:, a - start : b - start] = rows[:, a - lo : b - lo]
        return out

    def _uniform_width(self) -> int:
        return self.n_clients

    @abstractmethod
    def _from_uniforms(self, u: np.ndarray, first_round: int) -> np.ndarray:
        """Participation for rounds ``first_round ..`` from uniforms ``(reps, BLOCK, width)``."""


class IndependentPattern(BlockPattern):
    """Clients take part independently: i in S_t with probability p_i^t (FedSUM Case 2).

    Subclasses define ``probabilities(start, stop) -> (stop-start, n_clients)``; this is
    also what the exact expected-delay formulas consume.
    """

    @abstractmethod
    def probabilities(self, start: int, stop: int) -> np.ndarray:
        """p_i^t for rounds ``start .. stop-1``, shape ``(stop-start, n_clients)``."""

    #: Number of rounds the probabilities are defined for (None: unbounded).
    horizon: int | None = None

    def constant_probabilities(self, rounds: int) -> np.ndarray | None:
        """The per-client p_i if p_i^t does not change over the first ``rounds`` rounds, else None."""
        p = self.probabilities(0, rounds)
        return p[0].copy() if (p == p[0]).all() else None

    def repeats_every(self) -> int | None:
        """A P with p_i^{t+P} = p_i^t for every t and i by construction, when the pattern knows one
        (None: unknown; the Monte-Carlo samplers then look for one in the probabilities)."""
        return None

    def min_probability(self, rounds: int) -> float:
        """δ = min_{i, t<rounds} p_i^t, the constant of FedSUM Lemma F.2."""
        return float(self.probabilities(0, rounds).min())

    def _generate(self, root, replicates, start, stop):
        if self.horizon is not None and stop > self.horizon:
            raise ValueError(f"this pattern defines probabilities for {self.horizon} rounds, {stop} requested")
        return super()._generate(root, replicates, start, stop)

    def _from_uniforms(self, u, first_round):
        stop = first_round + u.shape[1]
        if self.horizon is not None:
            stop = min(stop, self.horizon)
        p = np.zeros(u.shape[1:])
        p[: stop - first_round] = self.probabilities(first_round, stop)  # rows past the horizon are discarded
        return u < p
