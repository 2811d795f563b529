"""Independent participation (FedSUM Case 2 and its time-varying forms).

Client i joins round t with probability p_i^t, independently across clients and rounds
(FedSUM §2.1 Case 2; LOGIT's model, §5 "Implementation details").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from .base import IndependentPattern, check_probabilities, frozen_array
from ..validation import integer

ProbabilitySpec = Union[float, np.ndarray, Callable[[int], "float | np.ndarray"]]


@dataclass(frozen=True, eq=False)
class Bernoulli(IndependentPattern):
    """Case 2: i ∈ S_t with probability p, independently.

    ``p`` is a scalar (homogeneous; give ``n_clients``), a per-client array ``(N,)``, a
    per-round-per-client array ``(T, N)`` (then at most T rounds can be sampled), or a
    callable ``t -> p_t`` returning a scalar or an ``(N,)`` array (give ``n_clients``).
    Probabilities lie in (0, 1] (FedSUM requires p_i^t ≥ δ > 0), except that a scalar or
    per-client p may be 0: a client that is never available. Its a_{i,t} stays −1, so
    τ_t = t + 1 and τ_max = T grow with T without bound (the exact expectations say so;
    FedSUM's Lemma F.2 bound then refuses).
    """

    p: ProbabilitySpec
    n_clients: int | None = None
    HEADER_FIELDS = {"bernoulli": ("p",)}

    def record_header(self) -> dict | None:
        """``{"model": "bernoulli", "p": [p_1, ..., p_N]}`` for a scalar or per-client p: client i
        available with probability p_i each round, independently (FedSUM Section 2.1 Case 2;
        LOGIT Section 3.3). None for p per round or a callable: a run record holds p_i^t in its
        per-round ``probabilities`` field instead."""
        if callable(self.p) or np.ndim(self.p) > 1:
            return None
        p = np.broadcast_to(np.asarray(self.p, dtype=float), (self.n_clients,))
        return {"model": "bernoulli", "p": [float(v) for v in p]}

    @classmethod
    def from_record_header(cls, header: dict, n_clients: int) -> "Bernoulli":
        """``Bernoulli(p)`` with the header's per-client p (N entries)."""
        return cls(np.asarray(header["p"], dtype=float))

    def __post_init__(self):
        if callable(self.p):
            object.__setattr__(self, "n_clients", integer(self.n_clients, "n_clients"))
            return
        p = np.asarray(self.p, dtype=float)
        p = check_probabilities(p, "p", allow_zero=p.ndim <= 1)  # 0: a never-available client
        if p.ndim == 0:
            n = integer(self.n_clients, "n_clients (needed with a scalar p)")
        elif p.ndim in (1, 2):
            n = p.shape[-1]
            if self.n_clients is not None and self.n_clients != n:
                raise ValueError(f"p has {n} clients but n_clients={self.n_clients}")
            if p.ndim == 2:
                object.__setattr__(self, "horizon", p.shape[0])
        else:
            raise ValueError(f"p must be a scalar, (n_clients,) or (rounds, n_clients) array, got shape {p.shape}")
        object.__setattr__(self, "p", frozen_array(p))
        object.__setattr__(self, "n_clients", n)

    def constant_probabilities(self, rounds):
        if callable(self.p) or self.p.ndim == 2:
            return super().constant_probabilities(rounds)
        return np.broadcast_to(self.p, (self.n_clients,)).copy()

    def probabilities(self, start, stop):
        if callable(self.p):
            rows = [np.broadcast_to(np.asarray(self.p(t), dtype=float), (self.n_clients,)) for t in range(start, stop)]
            return check_probabilities(np.stack(rows) if rows else np.zeros((0, self.n_clients)), "p(t)")
        if self.p.ndim == 2:
            return np.array(self.p[start:stop])
        return np.broadcast_to(self.p, (stop - start, self.n_clients)).copy()


@dataclass(frozen=True, eq=False)
class Sine(IndependentPattern):
    """Sinusoidal participation probabilities, shared or per client.

    p_i^t = clip(base_i · (amplitude · sin(2π t / period + phase_i) + offset), clip_low, clip_high).

    * FedSUM P3 (App. H.2, "Client participation patterns"): base = S/N, amplitude 0.3,
      offset 0.7, period 10, i.e. p_t = (S/N)(0.3 sin(πt/5) + 0.7); see ``Sine.p3``.
    * FedAWE's trajectory, p_i(t) = clip((a sin(2πt/20) + b) p_i, 0, 1) with per-client
      base probabilities p_i; see ``Sine.fedawe``.

    Clipping may produce p = 0 in some rounds; sampling allows it, but FedSUM's Case-2
    bounds need δ = min p > 0 and become vacuous otherwise.
    """

    n_clients: int
    base: float | np.ndarray
    amplitude: float
    offset: float
    period: float
    phase: float | np.ndarray = 0.0
    clip_low: float = 0.0
    clip_high: float = 1.0

    def __post_init__(self):
        integer(self.n_clients, "n_clients")
        base = np.broadcast_to(np.asarray(self.base, dtype=float), (self.n_clients,))
        check_probabilities(base, "base")
        phase = np.broadcast_to(np.asarray(self.phase, dtype=float), (self.n_clients,))
        if not np.isfinite(phase).all():
            raise ValueError("phase must be finite")
        if not (np.isfinite(self.period) and self.period > 0):
            raise ValueError(f"period must be positive, got {self.period}")
        if not 0.0 <= self.clip_low < self.clip_high <= 1.0:
            raise ValueError(f"need 0 <= clip_low < clip_high <= 1, got ({self.clip_low}, {self.clip_high})")
        for name in ("amplitude", "offset"):
            if not np.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)}")
        object.__setattr__(self, "base", frozen_array(base))
        object.__setattr__(self, "phase", frozen_array(phase))

    @classmethod
    def p3(cls, n_clients: int = 100, per_round: int = 20) -> "Sine":
        """FedSUM P3: p_t = (S/N)(0.3 sin(πt/5) + 0.7) for every client (App. H.2)."""
        if not 0 < per_round <= n_clients:
            raise ValueError(f"per_round must lie in [1, n_clients={n_clients}], got {per_round}")
        return cls(n_clients, per_round / n_clients, amplitude=0.3, offset=0.7, period=10.0)

    @classmethod
    def fedawe(cls, base, a: float, b: float, period: float = 20.0) -> "Sine":
        """FedAWE's time-varying probabilities, p_i(t) = clip((a sin(2πt/20) + b) p_i, 0, 1)."""
        base = np.atleast_1d(np.asarray(base, dtype=float))
        return cls(base.size, base, amplitude=a, offset=b, period=period)

    def repeats_every(self) -> int | None:
        """``period`` when it is a whole number of rounds (sin(2πt/P + φ) then repeats every P rounds)."""
        return int(self.period) if float(self.period).is_integer() else None

    def probabilities(self, start, stop):
        shared = self._shared()
        base, phase = (self.base[:1], self.phase[:1]) if shared else (self.base, self.phase)
        t = np.arange(start, stop, dtype=float)[:, None]
        wave = self.amplitude * np.sin(2.0 * np.pi * t / self.period + phase) + self.offset
        p = np.clip(base * wave, self.clip_low, self.clip_high)
        return np.broadcast_to(p, (stop - start, self.n_clients)).copy() if shared else p

    def _shared(self) -> bool:
        """Whether every client has the same base and phase (FedSUM's P3): the probabilities are then
        computed for one client and copied to the others, the same numbers at a fraction of the cost
        (the sine dominates at millions of clients)."""
        shared = self.__dict__.get("_shared_sequence")
        if shared is None:
            shared = bool((self.base == self.base[0]).all() and (self.phase == self.phase[0]).all())
            object.__setattr__(self, "_shared_sequence", shared)
        return shared


@dataclass(frozen=True, eq=False)
class BiasedGroups(IndependentPattern):
    """FedSUM App. H.8 biased sampling.

    Clients come in groups of ``group_size``; group g has p = p_first − g·step. The paper
    lists 1–11 at 0.5, 12–22 at 0.45, 23–33 at 0.4 "and so on"; with N = 100 the last
    client is alone in group 9 at p = 0.05, so δ = 0.05 (the paper's "and so on" extended here to
    N = 100).
    """

    n_clients: int = 100
    group_size: int = 11
    p_first: float = 0.5
    step: float = 0.05

    def __post_init__(self):
        integer(self.n_clients, "n_clients")
        integer(self.group_size, "group_size")
        check_probabilities(self.client_probabilities(), "group probability")

    def client_probabilities(self) -> np.ndarray:
        return self.p_first - self.step * (np.arange(self.n_clients) // self.group_size)

    def constant_probabilities(self, rounds):
        return self.client_probabilities()

    def probabilities(self, start, stop):
        return np.broadcast_to(self.client_probabilities(), (stop - start, self.n_clients)).copy()
