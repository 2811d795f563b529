"""PEP-optimal step sizes: the local step size that minimises the worst case on one trace.

With η_g fixed, the worst case of (1/T) Σ ‖∇f(x_t)‖² is minimised over η_l = s·η_l⁰ for a
scale s on a log grid (``scales``), then refined by a bounded one-dimensional search in log s
(``scipy.optimize.minimize_scalar``) around the best grid point. The search is over one
trace's programme, so it tunes the step for that trace, beside the theorem's prescribed one.
"""
from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from .programme import WorstCase, worst_case

__all__ = ["BestStep", "best_step"]


@dataclasses.dataclass(frozen=True)
class BestStep:
    """``eta_l``, ``eta_g``: the best step sizes found; ``worst_case``: their worst case;
    ``start``: the worst case at the given step sizes; ``tried``: (η_l, worst case) of every
    solve, in order."""

    eta_l: float
    eta_g: float
    worst_case: WorstCase
    start: WorstCase
    tried: tuple[tuple[float, float | None], ...]


def best_step(algorithm, trace, function_class, *, scales=(0.25, 1, 4, 16, 64), refine: int = 6,
              solver: str = "clarabel", max_seconds=None, n_clients=None) -> BestStep:
    """Minimise the worst case over η_l = s·``algorithm.eta_l`` (η_g kept): every scale of
    ``scales``, then ``refine`` bounded solves between the best grid point's neighbours."""
    from scipy.optimize import minimize_scalar

    if isinstance(scales, (str, bytes)) or not hasattr(scales, "__iter__") or not all(
            isinstance(s, numbers.Real) and not isinstance(s, bool) and math.isfinite(s) and s > 0 for s in scales):
        raise ValueError(f"scales must be finite numbers > 0, got {scales!r}")
    if isinstance(refine, bool) or not isinstance(refine, numbers.Integral) or refine < 0:
        raise ValueError(f"refine must be a whole number of solves >= 0, got {refine!r}")
    scales = tuple(sorted({1.0, *(float(s) for s in scales)}))
    base = algorithm.eta_l
    tried: list[tuple[float, float | None]] = []
    results: dict[float, WorstCase] = {}

    def solve(log_scale: float) -> float:
        eta_l = base * math.exp(log_scale)
        wc = worst_case(dataclasses.replace(algorithm, eta_l=eta_l), trace, function_class, solver=solver,
                        max_seconds=max_seconds, n_clients=n_clients)
        results[eta_l] = wc
        tried.append((eta_l, wc.value))
        return wc.value if wc.value is not None else math.inf

    grid = np.log(scales)
    values = [solve(g) for g in grid]
    start = results[base]                               # scale 1 is always on the grid: exp(log 1) · base
    best = int(np.argmin(values))
    if refine > 0 and math.isfinite(values[best]):
        low = grid[max(best - 1, 0)]
        high = grid[min(best + 1, len(grid) - 1)]
        if high > low:
            minimize_scalar(solve, bounds=(low, high), method="bounded", options={"maxiter": refine, "xatol": 0.05})
    finite = {e: w for e, w in results.items() if w.value is not None}
    if not finite:
        raise ValueError("no step size of the search has a finite worst case")
    eta_l = min(finite, key=lambda e: finite[e].value)
    return BestStep(eta_l=eta_l, eta_g=algorithm.eta_g, worst_case=finite[eta_l], start=start, tried=tuple(tried))
