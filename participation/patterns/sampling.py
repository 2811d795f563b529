"""Server-side sampling of a fixed number of clients per round (FedSUM Cases 1, 3, 4).

Definitions: FedSUM §2.1, Cases 1–4. Case numbers follow Section 2 (Case 3 =
deterministic cyclic, Case 4 = reshuffled cyclic); Appendices F/G swap the two names
(Lemmas F.3, F.4 and Corollary G.1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._random import keyed_uniforms
from .base import BlockPattern, Pattern
from ..validation import integer

#: Epochs per keyed draw unit of ``ReshuffledCyclic``.
EPOCH_BLOCK = 16


def _check_sizes(n_clients, per_round):
    integer(n_clients, "n_clients")
    integer(per_round, "per_round")
    if per_round > n_clients:
        raise ValueError(f"per_round S={per_round} exceeds n_clients N={n_clients}")


def positions_in_order(u: np.ndarray) -> np.ndarray:
    """The position of each client in the order of increasing ``u`` along the last axis (the inverse
    of ``argsort``, equal to ``argsort(argsort(u))`` with one sort), as int32."""
    order = np.argsort(u, axis=-1)
    rank = np.empty(u.shape, dtype=np.int32)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(u.shape[-1], dtype=np.int32), u.shape), axis=-1)
    return rank


@dataclass(frozen=True)
class Uniform(BlockPattern):
    """Case 1 / P1: S_t is a uniformly random S-subset of the N clients, independently
    each round (§2.1 Case 1; Lemma F.1 treats rounds as independent)."""

    n_clients: int
    per_round: int
    HEADER_FIELDS = {"full": (), "uniform": ("m",)}

    def __post_init__(self):
        _check_sizes(self.n_clients, self.per_round)

    def record_header(self) -> dict:
        """``{"model": "uniform", "m": S}``: m clients uniformly without replacement each round
        (FedSUM Section 2.1 Case 1; Server momentum footnote 4); ``{"model": "full"}`` when S = N."""
        if self.per_round == self.n_clients:
            return {"model": "full"}
        return {"model": "uniform", "m": int(self.per_round)}

    @classmethod
    def from_record_header(cls, header: dict, n_clients: int) -> "Uniform":
        """``Uniform(N, m)``, or ``Uniform(N, N)`` for ``{"model": "full"}``."""
        return cls(n_clients, n_clients if header.get("model") == "full" else int(header["m"]))

    def _from_uniforms(self, u, first_round):
        mask = np.zeros(u.shape, dtype=bool)
        if self.per_round == self.n_clients:
            mask[...] = True
            return mask
        chosen = np.argpartition(u, self.per_round - 1, axis=-1)[..., : self.per_round]
        np.put_along_axis(mask, chosen, True, axis=-1)
        return mask


@dataclass(frozen=True)
class Cyclic(Pattern):
    """Case 3: a fixed order, blocks of S consecutive clients, wrapping around.

    Client c is in S_t iff (c − tS) mod N < S, so every round has exactly S clients even
    when S does not divide N (the block then straddles the end of the order). Exact
    τ_max = ⌈N/S⌉ − 1 once T ≥ ⌈N/S⌉ − 1 (derived here; Lemma F.4 gives 2N/S). Windows may
    start at any round, however large (``start`` is reduced modulo N as a Python int).
    """

    n_clients: int
    per_round: int
    deterministic = True
    HEADER_FIELDS = {"cyclic": ("m",)}

    def __post_init__(self):
        _check_sizes(self.n_clients, self.per_round)

    def record_header(self) -> dict:
        """``{"model": "cyclic", "m": S}``: blocks of S clients in a fixed order (FedSUM Section 2.1
        Case 3)."""
        return {"model": "cyclic", "m": int(self.per_round)}

    @classmethod
    def from_record_header(cls, header: dict, n_clients: int) -> "Cyclic":
        """``Cyclic(N, m)``."""
        return cls(n_clients, int(header["m"]))

    def _generate(self, root, replicates, start, stop):
        # (t mod N)·S mod N from start mod N (a Python int), so any start, however large, is exact
        n = self.n_clients
        shift = ((start % n + np.arange(stop - start, dtype=np.int64)) % n) * self.per_round % n
        position = (np.arange(self.n_clients)[None, :] - shift[:, None]) % self.n_clients
        one = position < self.per_round
        return np.broadcast_to(one, (len(replicates),) + one.shape).copy()


@dataclass(frozen=True)
class ReshuffledCyclic(Pattern):
    """Case 4: a new random order every epoch, then blocks of S consecutive clients.

    When S divides N an epoch is N/S rounds and every client joins exactly once per
    epoch. The paper does not say what happens otherwise (the epoch of ⌊N/S⌋ rounds in
    the proof of Lemma F.3 would leave N mod S clients out);
    ``remainder`` chooses:

    * ``"short"`` (default): an epoch is ⌈N/S⌉ rounds and its last round takes the
      N mod S clients left over, so every client still joins once per epoch and
      τ_max ≤ 2⌈N/S⌉ − 2, but that round has fewer than S clients;
    * ``"drop"``: an epoch is ⌊N/S⌋ rounds of exactly S clients (the epoch length of
      Lemma F.3's proof) and the last N mod S clients of each order sit the epoch
      out.

    Epoch e's order comes from the keyed draw unit e // EPOCH_BLOCK; windows may start at
    any round, however large (epochs and units are counted as Python ints).
    """

    n_clients: int
    per_round: int
    remainder: str = "short"
    HEADER_FIELDS = {"reshuffled": ("m",)}

    def __post_init__(self):
        _check_sizes(self.n_clients, self.per_round)
        if self.remainder not in ("short", "drop"):
            raise ValueError(f"remainder must be 'short' or 'drop', got {self.remainder!r}")

    def record_header(self) -> dict:
        """``{"model": "reshuffled", "m": S}``: blocks of S clients in a new random order every epoch
        (FedSUM Section 2.1 Case 4), with ``"remainder": "drop"`` when the clients left over sit
        the epoch out (a header without ``remainder`` is the default, ``"short"``)."""
        header = {"model": "reshuffled", "m": int(self.per_round)}
        return header if self.remainder == "short" else {**header, "remainder": self.remainder}

    @classmethod
    def from_record_header(cls, header: dict, n_clients: int) -> "ReshuffledCyclic":
        """``ReshuffledCyclic(N, m, remainder)``, ``remainder`` ``"short"`` unless the header says."""
        return cls(n_clients, int(header["m"]), str(header.get("remainder", "short")))

    def round_sizes(self, rounds: int) -> np.ndarray:
        """The number of clients in each of the first ``rounds`` rounds: S, except the last round of
        each epoch under ``"short"``, which takes the N mod S clients left over when S does not
        divide N."""
        n, s, epoch = self.n_clients, self.per_round, self.epoch_rounds
        last = n - s * (epoch - 1) if self.remainder == "short" else s
        return np.where(np.arange(rounds) % epoch == epoch - 1, last, s)

    @property
    def epoch_rounds(self) -> int:
        n, s = self.n_clients, self.per_round
        return -(-n // s) if self.remainder == "short" else n // s

    def _generate(self, root, replicates, start, stop):
        # Epochs are counted from the first one (a Python int), so any start, however large,
        # is exact: round t is in epoch t // E, slot t mod E, drawn from unit epoch // EPOCH_BLOCK.
        first_epoch, first_slot = divmod(start, self.epoch_rounds)
        first_unit, base = divmod(first_epoch, EPOCH_BLOCK)
        later, slot = np.divmod(first_slot + np.arange(stop - start, dtype=np.int64), self.epoch_rounds)
        within = base + later                    # epoch − first_unit·EPOCH_BLOCK
        unit_of = within // EPOCH_BLOCK
        out = np.empty((len(replicates), stop - start, self.n_clients), dtype=bool)
        for k in range(int(unit_of[-1]) + 1):
            u = keyed_uniforms(root, replicates, first_unit + k, (EPOCH_BLOCK, self.n_clients))
            rank = positions_in_order(u)
            inside = unit_of == k
            local = within[inside] - k * EPOCH_BLOCK
            out[:, inside] = (rank[:, local] // self.per_round) == slot[inside][None, :, None]
        return out
