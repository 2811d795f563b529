"""The function class a worst case is taken over: the class of a theorem's assumptions.

For N clients f_1, …, f_N and f = (1/N) Σ_i f_i:

* every f_i is L-smooth, not necessarily convex (FedSUM Assumption 1.1; Server momentum
  Assumption A1): the interpolation conditions of L-smooth functions (Taylor, Hendrickx &
  Glineur, SIAM J. Optim. 27(3), 2017, Theorem 3.10 with μ = −L) hold at every point where
  an f_i is evaluated;
* f(x_0) − f* ≤ Δ_f. f* = inf f cannot be written in a finite programme, so it is relaxed to
  the least value of f at the global iterates: f(x_0) − f(x_t) ≤ Δ_f for t = 0, …, T. The
  relaxed class contains the true one, so the worst case over it is an upper bound on the
  theorem's worst case, exact where the worst instance's minimum sits at an iterate;
* optionally F_0: (1/N) Σ_i ‖∇f_i(x_0)‖² ≤ F_0 (FedSUM Thm 4.1, eq. (12));
* optionally bounded heterogeneity: (1/N) Σ_i ‖∇f_i(x) − ∇f(x)‖² ≤ ζ² (Server momentum
  Assumption A3, σ_g²), imposed at the global iterates x_0, …, x_T, where every f_i is
  evaluated (a relaxation again: the class asks it at every x).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["FunctionClass", "RELAXATION"]

RELAXATION = ("f* relaxed to min_t f(x_t) over the global iterates x_0..x_T"
              " (an upper bound on the class's worst case)")


def _positive(value, name: str, *, optional: bool = False):
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class FunctionClass:
    """``L`` (smoothness of every client), ``delta_f`` (f(x_0) − f*), ``F0`` (the clients' mean
    initial squared gradient; None: unconstrained) and ``heterogeneity`` (ζ², None:
    unconstrained). Every given value must be a finite number > 0."""

    L: float
    delta_f: float
    F0: float | None = None
    heterogeneity: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "L", _positive(self.L, "L"))
        object.__setattr__(self, "delta_f", _positive(self.delta_f, "delta_f"))
        object.__setattr__(self, "F0", _positive(self.F0, "F0", optional=True))
        object.__setattr__(self, "heterogeneity", _positive(self.heterogeneity, "heterogeneity", optional=True))

    def describe(self) -> str:
        parts = [f"each f_i {self.L:g}-smooth (not necessarily convex)", f"f(x_0) - f* <= {self.delta_f:g}"]
        if self.F0 is not None:
            parts.append(f"(1/N) sum_i |grad f_i(x_0)|^2 <= {self.F0:g}")
        if self.heterogeneity is not None:
            parts.append(f"(1/N) sum_i |grad f_i - grad f|^2 <= {self.heterogeneity:g} at the iterates")
        return "; ".join(parts)

    def as_dict(self) -> dict:
        return {"L": self.L, "delta_f": self.delta_f, "F0": self.F0, "heterogeneity": self.heterogeneity}
