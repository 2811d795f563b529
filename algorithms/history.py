"""The record of one run."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["History"]


@dataclass(frozen=True, eq=False)
class History:
    """Metrics of a run of ``algorithm`` (name) with ``hparams`` and ``seed``.

    ``rounds``: the recorded round indices t; ``grad_norm2``, ``loss``: ‖∇f(x_t)‖² (full
    objective) and f(x_t) there; ``accuracy``: likewise, or None where the problem has none.
    ``uplink``, ``downlink``: floats sent in each round actually run (all of them, not only the
    recorded ones). ``final_params``: the last model, x_T (float64 numpy; the last finite one
    if the run stopped). ``stopped``: None,
    or a report such as "loss became inf at round 37" when a value stopped being finite; the
    arrays then end at that round.
    """

    algorithm: str
    hparams: dict
    seed: int
    rounds: np.ndarray
    grad_norm2: np.ndarray
    loss: np.ndarray
    accuracy: np.ndarray | None
    uplink: np.ndarray
    downlink: np.ndarray
    final_params: np.ndarray
    stopped: str | None = None
    n_rounds: int = 0
    meta: dict = field(default_factory=dict)
    #: Σ_t η_t x_t / Σ_t η_t over the rounds run (η_t the local step size of round t), or None.
    averaged_params: np.ndarray | None = None
    #: What ``run(..., observe=True)`` recorded: name → (T, ...) float64 array (a tuple of
    #: per-round arrays when their shapes differ), e.g. "heterogeneity", "generator_error".
    observed: dict = field(default_factory=dict)

    @property
    def mean_grad_norm2(self) -> float:
        """(1/T) Σ_{t<T} ‖∇f(x_t)‖², the left side of the FedSUM bounds (needs ``record_every=1``
        and a run that did not stop)."""
        if self.stopped is not None:
            raise ValueError(f"the run stopped early ({self.stopped}); the average over T rounds is undefined")
        if len(self.rounds) != self.n_rounds:
            raise ValueError("mean_grad_norm2 needs every round recorded (record_every=1)")
        return float(self.grad_norm2.mean())

    def same_as(self, other: "History") -> bool:
        """True when both runs recorded identical values (bit for bit)."""
        arrays = ("rounds", "grad_norm2", "loss", "uplink", "downlink", "final_params")
        same_acc = (self.accuracy is None) == (other.accuracy is None) and (
            self.accuracy is None or np.array_equal(self.accuracy, other.accuracy))
        return (same_acc and self.stopped == other.stopped
                and all(np.array_equal(getattr(self, a), getattr(other, a)) for a in arrays))

    def __len__(self) -> int:
        return len(self.rounds)
