"""The measured left-hand sides of the theorems, from a run's ``History``, and the minimisers
they need. Each is written from the paper's definition; the tests recompute them with loops."""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

__all__ = ["average_grad_norm2", "stage_average", "weighted_losses", "weighted_minimum", "loss_gap_at_average",
           "observed_max", "pooled", "client_minimisers", "measured_value"]


def measured_value(value, theorem: str, run: str) -> float:
    """``value``, what the measure of ``theorem`` returned for ``run``, as a float; anything that is
    not one real number (None, text, a boolean, an array of several values, an integer beyond a
    float's range) is a one-line ValueError naming it."""
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    one = ((isinstance(value, numbers.Real) and not isinstance(value, bool))
           or (isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"))
    if not one:
        raise ValueError(f"the measure of {theorem} returned {shown} ({type(value).__name__}) for {run}; "
                         "a measure returns one number per run")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"the measure of {theorem} returned {shown} for {run}, beyond a float's range "
                         "(about 1.8e308)") from None


def average_grad_norm2(history, problem=None) -> float:
    """(1/T) Σ_{t<T} ‖∇f(x_t)‖² (FedSUM Thm 4.1; LOGIT Thms 1–2, eq. (10))."""
    return history.mean_grad_norm2


def stage_average(history, lengths) -> float:
    """Ḡ = (1/S) Σ_s (1/T_s) Σ_{t in stage s} ‖∇f(x_t)‖², stage s the T_s rounds after the earlier
    stages (Server momentum Sec. 4.2, the left side of Thms 4.1, 4.6, 5.1 and Cor G.1)."""
    g = np.asarray(history.grad_norm2, dtype=float)
    if history.stopped is not None or len(history.rounds) != history.n_rounds:
        history.mean_grad_norm2      # raises the reason
    ends = np.cumsum(lengths)
    if ends[-1] != g.size:
        raise ValueError(f"the stages cover {ends[-1]} rounds but the run has {g.size}")
    return float(np.mean([part.mean() for part in np.split(g, ends[:-1])]))


def weighted_losses(problem, x: np.ndarray, weights: np.ndarray) -> float:
    """Σ_k w_k f_k(x) in float64."""
    ref = problem.to("cpu", torch.float64)
    return float(np.asarray(weights, dtype=float) @ ref.client_losses(torch.as_tensor(x, dtype=torch.float64)).numpy())


def weighted_minimum(problem, weights: np.ndarray, x0: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """(argmin, min) of Σ_k w_k f_k (w ≥ 0, not all 0) for a convex problem: L-BFGS in float64
    with exact gradients Σ_k w_k ∇f_k (scipy), gradient tolerance 1e-12."""
    from scipy.optimize import minimize

    ref = problem.to("cpu", torch.float64)
    w = torch.as_tensor(np.asarray(weights, dtype=float))

    def fun(v):
        x = torch.from_numpy(v)
        return float(w @ ref.client_losses(x)), (w @ ref.client_grads(x)).numpy()

    start = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    result = minimize(fun, start, jac=True, method="L-BFGS-B",
                      options=dict(maxiter=20000, maxcor=30, ftol=0.0, gtol=1e-12))
    x = result.x
    return x, fun(x)[0]


def client_minimisers(problem) -> tuple[np.ndarray, np.ndarray]:
    """(w_k* (N, d), F_k* (N,)): every client's minimiser and minimum, by :func:`weighted_minimum`
    on the weights e_k (CA-Fed eq. (9) takes F_k*; Lemma 1, eq. (42), takes w_k*)."""
    n = problem.n_clients
    found = [weighted_minimum(problem, np.eye(n)[k]) for k in range(n)]
    return np.stack([x for x, _ in found]), np.array([f for _, f in found])


def loss_gap_at_average(history, problem, weights: np.ndarray, minimum: float) -> float:
    """Σ_k w_k f_k(w̄_T) − min, w̄_T = Σ_t η_t x_t / Σ_t η_t the run's step-weighted average
    (CA-Fed, the averaged iterate of Thm 2, §III-B)."""
    if history.stopped is not None:
        raise ValueError(f"the run stopped early ({history.stopped})")
    if history.averaged_params is None:
        raise ValueError("the run recorded no averaged iterate")
    return weighted_losses(problem, history.averaged_params, weights) - minimum


def observed_max(histories, name: str) -> float:
    """The largest value of ``name`` observed over every run."""
    values = [np.max(np.concatenate([np.ravel(a) for a in h.observed[name]]) if isinstance(h.observed[name], tuple)
                     else h.observed[name]) for h in histories if name in h.observed and len(h.observed[name])]
    return float(max(values)) if values else math.nan


def observed_first(histories, name: str) -> float:
    """The largest value of ``name`` at the runs' first recorded round (where no run has yet moved
    the model), or NaN when none observed it."""
    values = [float(np.ravel(h.observed[name][0]).max()) for h in histories
              if name in h.observed and len(h.observed[name]) and np.size(h.observed[name][0])]
    return float(max(values)) if values else math.nan


def pooled(histories, name: str) -> list[np.ndarray]:
    """Every run's per-round observations of ``name``, as one list of per-round arrays."""
    rows: list[np.ndarray] = []
    for h in histories:
        value = h.observed.get(name)
        if value is None:
            continue
        rows.extend(np.atleast_1d(np.asarray(r, dtype=float)) for r in value)
    return rows
