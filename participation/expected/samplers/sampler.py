"""The protocol every Monte-Carlo sampler of ``monte_carlo`` implements.

A sampler draws τ_max and τ_avg for chunks of replicates of the patterns it applies to.
``monte_carlo`` only talks to samplers through this protocol: it asks each one in turn
whether it applies (``applies`` returns what the sampler draws from, its *law*, or None),
sizes the chunks with ``chunk_size`` and ``chunk_bytes`` before anything is drawn, and
draws them with ``draw_chunk``. Adding a sampler is therefore one module with one object
of this kind, plus its place in ``montecarlo.SAMPLERS``; ``montecarlo.METHODS`` and
``fedverify mc --method`` read their names from there. A module whose functions do the work
declares its sampler as a :class:`FunctionSampler` naming them.

Several samplers may answer to one ``method`` name ("gaps" covers constant, Markov,
periodic and other time-varying probabilities): an explicit method takes the first of its
samplers that applies, and the method's ``needs`` text (the same for all of them) is the
refusal where none does.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

#: Cells (rounds × clients × replicates) a chunk of whole traces (or of epoch orders) aims at.
CHUNK_CELLS = 1 << 24


class Sampler(ABC):
    """One way of drawing replicates' delays. Subclasses set ``method`` (the name
    ``monte_carlo(..., method=)`` selects it by) and ``needs`` (what the method requires,
    completing "method='…' needs …" when it does not apply)."""

    method: str
    needs: str

    @abstractmethod
    def applies(self, pattern, rounds: int, *, auto: bool, device=None):
        """What this sampler draws ``rounds`` rounds of ``pattern`` from (its law: the pattern
        itself, probabilities, chains, tables), or None where it does not apply. ``auto``:
        the choice is "auto"'s, which also declines where whole traces would be cheaper;
        ``device``: a torch device the delays should be computed on, or None."""

    @abstractmethod
    def chunk_size(self, law, rounds: int, reps: int) -> int:
        """Replicates per chunk when the caller gives none (``reps`` in all)."""

    @abstractmethod
    def chunk_bytes(self, law, rounds: int, count: int) -> int:
        """Peak bytes of one chunk of ``count`` replicates, estimated before anything is drawn."""

    @abstractmethod
    def draw_chunk(self, law, rounds: int, root: np.random.SeedSequence, first: int, count: int,
                   on_window=None) -> tuple[np.ndarray, np.ndarray]:
        """(τ_max, τ_avg) of replicates first..first+count−1, each of shape (count,), the
        randomness of replicate r keyed by (``root``, r) alone. ``on_window``, if given, is
        called with a number of rounds as they are done (samplers that stream windows of
        rounds call it; the others ignore it)."""

    def streams_windows(self, law, rounds: int, size: int) -> bool:
        """Whether chunks of ``size`` replicates are drawn a window of rounds at a time (then
        ``draw_chunk`` reports each window to ``on_window``, and a progress bar counts rounds)."""
        return False

    def clear_caches(self) -> None:
        """Forget the tables kept between calls, so that the next call builds them again."""

    def refusal(self) -> str:
        """The one-line reason an explicit ``method`` was refused."""
        return f"method={self.method!r} needs {self.needs}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} sampler of method {self.method!r}>"


@dataclass(frozen=True, eq=False, repr=False)
class FunctionSampler(Sampler):
    """A sampler whose work is done by functions of its own module, which it names: each call
    looks the name up on the module then (a function replaced there is the one called, and a
    worker process that unpickles the sampler calls its own copy of the module's functions).

    - ``law(pattern, rounds, auto)``: what the sampler draws from, or None where it does not
      apply; or, in its place, ``accepts(pattern)``: whether it applies, the law then being
      the pattern itself;
    - ``size(law, rounds)``: :meth:`chunk_size`, the same for every ``reps``;
    - ``peak(law, rounds, count)``: :meth:`chunk_bytes`;
    - ``draw(law, rounds, root, first, count)``: :meth:`draw_chunk`, which does not stream
      windows of rounds;
    - ``caches``: the ``functools.lru_cache`` functions :meth:`clear_caches` empties.

    These samplers draw with numpy: none applies where a ``device`` is given."""

    method: str
    needs: str
    module: str
    size: str
    peak: str
    draw: str
    law: str | None = None
    accepts: str | None = None
    caches: tuple[str, ...] = ()

    def __post_init__(self):
        if (self.law is None) == (self.accepts is None):
            raise TypeError("a FunctionSampler takes exactly one of law= and accepts=")

    def _function(self, name: str):
        return getattr(importlib.import_module(self.module), name)

    def applies(self, pattern, rounds, *, auto, device=None):
        if device is not None:
            return None
        if self.law is not None:
            return self._function(self.law)(pattern, rounds, auto)
        return pattern if self._function(self.accepts)(pattern) else None

    def chunk_size(self, law, rounds, reps):
        return self._function(self.size)(law, rounds)

    def chunk_bytes(self, law, rounds, count):
        return self._function(self.peak)(law, rounds, count)

    def draw_chunk(self, law, rounds, root, first, count, on_window=None):
        return self._function(self.draw)(law, rounds, root, first, count)

    def clear_caches(self):
        for name in self.caches:
            self._function(name).cache_clear()

    def __repr__(self) -> str:
        return f"<{self.module} sampler of method {self.method!r}>"
