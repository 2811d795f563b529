"""One round of a batch of runs, as an algorithm sees it.

A batch holds B independent runs of one algorithm on one problem; each run has its own
participation trace, seed and step sizes. Per-run state carries a leading batch axis: the
model is (B, d), a per-client table (B, N, d). In round t the active clients of all runs form
M rows (run, client), sorted by run then client; an algorithm works on the (M, d) block of
those rows and goes back to per-run quantities with :meth:`Round.sum` / :meth:`Round.mean`.
A single run is a batch of one.

Reductions over a run's clients add its rows in client order, the same order whatever the
other runs in the batch (``index_add`` on the CPU; a scatter into a zero (B, N, ...) table
summed over clients elsewhere, where ``index_add`` accumulates in an unspecified order), so a
run gives the same numbers alone or in a batch.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import torch

from .noise import Draws, NoiseStream

__all__ = ["Round", "run_of", "sum_clients"]


def sum_clients(table: torch.Tensor) -> torch.Tensor:
    """(B, ...): Σ_{i=1}^N of a per-client (B, N, ...) table over every client, in client order
    whatever B (the order of :meth:`Round.sum`)."""
    if table.device.type != "cpu":
        return table.sum(dim=1)
    b, n = table.shape[:2]
    runs = torch.arange(b, device=table.device).repeat_interleave(n)
    return table.new_zeros((b, *table.shape[2:])).index_add_(0, runs, table.reshape(b * n, *table.shape[2:]))


@dataclass(frozen=True, eq=False)
class Round:
    """Round ``t`` of a batch of ``n_runs`` runs on ``n_clients`` clients.

    ``run``, ``client``: (M,) long tensors of the active rows; ``count``: (B,) |S_t| of each
    run (in the problem's dtype); ``eta_l``, ``eta_g``: (B, 1) step sizes of the round (the
    local one after any schedule); ``noise``: the runs' :class:`NoiseStream`."""

    t: int
    run: torch.Tensor
    client: torch.Tensor
    n_runs: int
    n_clients: int
    count: torch.Tensor
    eta_l: torch.Tensor
    eta_g: torch.Tensor
    noise: NoiseStream

    @property
    def m(self) -> int:
        """M, the number of active rows over the whole batch."""
        return self.client.numel()

    def draws(self, k: int, rows: torch.Tensor | None = None) -> Draws:
        """The noise of step ``k`` for every active row (or for the rows ``rows`` of them)."""
        if rows is None:
            return self.noise.draws(self.t, k, self.client, self.run)
        return self.noise.draws(self.t, k, self.client[rows], self.run[rows])

    @cached_property
    def active(self) -> torch.Tensor:
        """(B,) bool: whether the run has a client in this round."""
        return self.count > 0

    @cached_property
    def mask(self) -> torch.Tensor:
        """(B, N) bool: S_t of each run."""
        mask = torch.zeros((self.n_runs, self.n_clients), dtype=torch.bool, device=self.client.device)
        return mask.index_put((self.run, self.client), torch.ones_like(self.client, dtype=torch.bool))

    def rows(self, per_run: torch.Tensor) -> torch.Tensor:
        """(M, ...): each active row's entry of a (B, ...) tensor."""
        return per_run[self.run]

    def take(self, table: torch.Tensor) -> torch.Tensor:
        """(M, ...): the active rows of a per-client (B, N, ...) table."""
        return table[self.run, self.client]

    def put(self, table: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """A copy of the (B, N, ...) table with the active rows replaced by ``values`` (M, ...)."""
        return table.index_put((self.run, self.client), values.to(table.dtype))

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """(B, ...): Σ over each run's active rows of ``values`` (M, ...), in client order."""
        if values.device.type == "cpu":
            out = values.new_zeros((self.n_runs, *values.shape[1:]))
            return out.index_add_(0, self.run, values)
        table = values.new_zeros((self.n_runs, self.n_clients, *values.shape[1:]))
        return table.index_put_((self.run, self.client), values).sum(dim=1)

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """(B, ...): the mean over each run's active rows (0 for a run with none)."""
        count = self.count.clamp(min=1).reshape(-1, *([1] * (values.ndim - 1)))
        return self.sum(values) / count

    def where_active(self, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
        """``new`` for runs with an active client, ``old`` for the others (both (B, ...))."""
        return torch.where(self.active.reshape(-1, *([1] * (new.ndim - 1))), new, old)


def run_of(state, b: int):
    """Run ``b`` of a batched state: every tensor field indexed at ``b`` on its batch axis."""
    changes = {f.name: getattr(state, f.name)[b] for f in dataclasses.fields(state)
               if isinstance(getattr(state, f.name), torch.Tensor)}
    return dataclasses.replace(state, **changes)
