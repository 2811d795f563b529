"""Stochastic-gradient randomness: a counter-based stream keyed by the run's seed.

Every random number a run uses is Philox4x32-10 (``algorithms.philox``) of

    key     = (k0, k1) = SeedSequence(seed).generate_state(2, uint32)
    counter = (lane, client i, 2·k + kind, round t)

where k is the local step / mini-batch (or an algorithm's reserved stream, e.g. autonomous
clients' arrivals), kind 0 gives standard normals (two per counter, Box–Muller) and kind 1
uniforms in [0, 1) (two per counter, 53 bits each), and lane j covers entries 2j and 2j + 1
of the client's row. A number therefore depends on (seed, t, k, client, entry) alone: not on
the other clients active in the round, the algorithm, the runs batched beside it or how the
draws are grouped; two algorithms run with the same seed see the same noise.

``NoiseStream(seeds)`` holds the keys of a batch of runs; ``draws(t, k, clients, runs)`` is
what a problem's ``stochastic_grads`` receives. ``prefetch`` computes the draws of many
rounds and steps in one Philox call; a draw of the same rows is then served from it.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch

from .philox import box_muller, philox4x32, uniform53

__all__ = ["NoiseStream", "Draws", "as_entropy", "KINDS", "SCHEME"]

#: The name of this noise scheme, saved with results that a seed reproduces (an experiment's
#: runs), so that runs made with another scheme are never read back as these.
SCHEME = "philox4x32-10(seed; t, k, client)"

#: The two kinds of draws and the counter word that separates them.
KINDS = {"normal": 0, "uniform": 1}
_MAX_STEP = 2**31 - 1
_MAX_WORD = 2**32 - 1


def as_entropy(seed) -> int:
    """An int ≥ 0 from ``None`` (fresh OS entropy), an int ≥ 0 or a numpy Generator."""
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be None, an integer ≥ 0 or a numpy Generator, got {seed!r}")
    return int(seed)


def _key(entropy: int) -> list[int]:
    return [int(w) for w in np.random.SeedSequence(entropy).generate_state(2, np.uint32)]


#: Counters computed per pass: small enough that a pass's words stay in cache.
CHUNK = 2**18


def _values(keys: torch.Tensor, t, k, clients: torch.Tensor, kind: str, width: int, dtype) -> torch.Tensor:
    """(M, width) draws of ``kind`` for M rows: keys (M, 2), rounds t and steps k (ints or
    (M,) tensors), client ids (M,); computed in passes of about ``CHUNK`` counters."""
    rows, lanes = clients.shape[0], (width + 1) // 2
    device = keys.device
    per_row = lambda v: torch.as_tensor(v, dtype=torch.int64, device=device).expand(rows)[:, None]  # noqa: E731
    lane = torch.arange(lanes, dtype=torch.int64, device=device)[None, :]
    client, step, rnd = per_row(clients), per_row(k) * 2 + KINDS[kind], per_row(t)
    out = torch.empty((rows, 2 * lanes), dtype=torch.float64, device=device)
    stride = max(1, CHUNK // lanes) if device.type == "cpu" else max(rows, 1)
    for first in range(0, rows, stride):
        part = slice(first, first + stride)
        words = philox4x32(lane, client[part], step[part], rnd[part], keys[part, :1], keys[part, 1:])
        if kind == "normal":
            a, b = box_muller(words, torch.float64)
        else:
            a, b = uniform53(words[0], words[1]), uniform53(words[2], words[3])
        out[part].view(-1, lanes, 2).copy_(torch.stack((a, b), dim=-1))
    return out[:, :width].to(dtype)


def _row_keys(runs: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
    """run·2^32 + client: ascending along rows sorted by run then client."""
    return runs.to(torch.int64) * 2**32 + clients.to(torch.int64)


class Draws:
    """The random numbers of round t, step k for the rows (run, client) of one call.

    ``normal(width)``: (M, width) standard normals; ``uniform(width)``: (M, width) floats in
    [0, 1); row j is client ``clients[j]`` of run ``runs[j]``."""

    def __init__(self, stream: "NoiseStream", t: int, k: int, clients: torch.Tensor, runs: torch.Tensor | None):
        self.stream, self.t, self.k = stream, int(t), int(k)
        self.clients = clients
        self.runs = runs

    def _draw(self, kind: str, width: int, dtype) -> torch.Tensor:
        runs = self.runs if self.runs is not None else torch.zeros_like(self.clients)
        cached = self.stream._cache.get((self.t, self.k, kind))
        if cached is not None and cached[2].shape[1] == width:
            clients, keys, values = cached
            if clients is self.clients:
                return values.to(dtype)
            if keys.numel() and self.clients.numel():    # a subset of the computed rows (sorted keys)
                wanted = _row_keys(runs, self.clients)
                at = torch.searchsorted(keys, wanted).clamp_(max=keys.numel() - 1)
                if bool((keys[at] == wanted).all()):
                    return values[at].to(dtype)
        keys = self.stream.keys.to(self.clients.device)[runs]
        return _values(keys, self.t, self.k, self.clients, kind, width, dtype)

    def normal(self, width: int, dtype=torch.float64) -> torch.Tensor:
        return self._draw("normal", int(width), dtype)

    def uniform(self, width: int, dtype=torch.float64) -> torch.Tensor:
        return self._draw("uniform", int(width), dtype)


class NoiseStream:
    """``NoiseStream(seed_or_seeds, device)``: the keys of one run or of a batch of runs.

    ``entropies``: the seeds as ints (``entropy`` when there is one run); ``draws(t, k,
    clients, runs)``: the :class:`Draws` of those rows (``runs`` None: run 0)."""

    def __init__(self, seeds, device=None):
        many = isinstance(seeds, (list, tuple, np.ndarray))
        self.entropies = [as_entropy(s) for s in (seeds if many else [seeds])]
        if not self.entropies:
            raise ValueError("NoiseStream needs at least one seed")
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.keys = torch.tensor([_key(e) for e in self.entropies], dtype=torch.int64, device=self.device)
        self._cache: dict = {}

    @property
    def entropy(self) -> int:
        return self.entropies[0]

    def draws(self, t: int, k: int, clients: torch.Tensor, runs: torch.Tensor | None = None) -> Draws:
        if not 0 <= int(t) <= _MAX_WORD or not 0 <= int(k) <= _MAX_STEP:
            raise ValueError(f"noise counters take round t < 2^32 and step k < 2^31, got t={t}, k={k}")
        return Draws(self, t, k, clients, runs)

    def prefetch(self, rounds: list, steps: int, kind: str, width: int, budget_bytes: int = 2**26) -> int:
        """Compute in one Philox call the ``kind`` draws of ``width`` for steps 0..steps−1 of the
        leading (t, runs, clients) of ``rounds`` that fit in ``budget_bytes`` (none when the first
        round alone does not: its draws are then made step by step, the same numbers),
        kept (in float64, as every draw is made) until the next prefetch; a later ``draws(t, k,
        clients, runs)`` of those rows or of some of them reads them (the rows of each round are
        sorted by run then client). Returns how many rounds it covered."""
        self._cache = {}
        if not rounds or steps < 1 or width < 1:
            return len(rounds)
        per_row = 8 * 2 * ((width + 1) // 2) * 6          # the words and temporaries of one row
        rows = 0
        chosen = []
        for t, runs, clients in rounds:
            if (rows + steps * clients.numel()) * per_row > budget_bytes:
                break
            chosen.append((t, runs, clients))
            rows += steps * clients.numel()
        if not rows:       # one round's draws exceed the budget (or none is drawn): each step draws its own
            return max(1, len(chosen))
        device = chosen[0][2].device
        keys = self.keys.to(device)
        all_runs = torch.cat([runs for _, runs, _ in chosen for _ in range(steps)])
        all_clients = torch.cat([clients for _, _, clients in chosen for _ in range(steps)])
        t_col = torch.cat([torch.full((c.numel(),), t, dtype=torch.int64, device=device)
                           for t, _, c in chosen for _ in range(steps)])
        k_col = torch.cat([torch.full((c.numel(),), k, dtype=torch.int64, device=device)
                           for _, _, c in chosen for k in range(steps)])
        values = _values(keys[all_runs], t_col, k_col, all_clients, kind, width, torch.float64)
        start = 0
        for t, runs, clients in chosen:
            keys = _row_keys(runs, clients)
            for k in range(steps):
                n = clients.numel()
                self._cache[(int(t), k, kind)] = (clients, keys, values[start:start + n])
                start += n
        return len(chosen)

