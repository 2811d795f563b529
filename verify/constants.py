"""The constants a bound needs (L, σ², f*, Δ_f, F_0), exact where the problem knows them.

FedSUM (arXiv:2512.18275) asks for L-smooth clients (Assumption 1.1), a uniform bound σ²
on every client's stochastic-gradient variance (Assumption 1.2), Δ_f = f(x⁰) − f* and
F_0 = (1/N) Σ_i ‖∇f_i(x⁰)‖² (both in the statement of Thm 4.1).

``estimate_constants(problem)`` takes every constant that ``problem.constants()`` lists as
exact and estimates the others:

* L: largest |eigenvalue| of each client Hessian ∇²f_i, by batched Hessian–vector power
  iteration at x⁰ and along a short full-gradient descent run; the uncertainty is the
  eigen-residual ‖Hv − ρv‖ of the winning Rayleigh quotient ρ (ρ lies within it of an
  eigenvalue). Hessian–vector products are exact (forward-mode autograd through
  ``grads_at``) whenever the problem supports it; central differences of ``grads_at`` are
  the fallback. Differences are wrong for ReLU networks: a kink crossed inside ±h turns a
  jump of the gradient into a spurious curvature (the digits CNN measured 15.1 by
  differences against 2.06 by autograd at x⁰). A value taken at sampled points is a lower
  estimate of the sup over x the assumption asks for.
* σ²: E‖g_i(x) − ∇f_i(x)‖² sampled per client at the same points, the max over clients and
  points, with the standard error of that mean.
* f*: L-BFGS on the full objective in float64.
  Convex problems (``problem.convex``): a long run; uncertainty ‖∇f(x̂)‖²/(2μ̂), μ̂ the
  smallest eigenvalue of ∇²f(x̂) (the Polyak–Łojasiewicz gap bound; ``inf`` without positive
  curvature). Non-convex problems: a short run finds a local value f̂ ≥ inf f, so inf f lies
  in [``problem.loss_lower_bound``, f̂] (0 for a cross-entropy); that interval is the
  uncertainty, and μ̂ (meaningless there) is not computed.
* Δ_f = f(x⁰) − f̂* (uncertainty that of f*; for a non-convex problem the rigorous interval
  [f(x⁰) − f̂, f(x⁰) − loss_lower_bound]); F_0 is computed exactly from ``client_grads``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize
from scipy.sparse.linalg import LinearOperator, eigsh

from algorithms.noise import NoiseStream
from algorithms.problems import FunctionProblem
from bounds import Constants
from participation.validation import integer

__all__ = ["Quantity", "EstimatedConstants", "estimate_constants", "hessian_spectral_norms"]

NAMES = ("L", "sigma2", "f_star", "delta_f", "F0")


@dataclass(frozen=True)
class Quantity:
    """One constant: ``value``, its ``uncertainty`` (0 when exact; a standard error or a
    residual bound otherwise, as ``method`` says) and whether it is ``exact``."""

    value: float
    uncertainty: float
    exact: bool
    method: str
    #: "above" when the true value is known to lie in [value, value + uncertainty] (Δ_f of a
    #: non-convex problem), "below" for [value − uncertainty, value] (its f*); None when the
    #: uncertainty is a standard error or a residual.
    interval: str | None = None

    def upper(self, z: float = 0.0) -> float:
        """value + z·uncertainty (the value itself when exact or z = 0); for an ``interval``
        quantity any z > 0 gives the interval's upper end."""
        if self.exact or z == 0:
            return self.value
        if self.interval is not None:
            return self.value + (self.uncertainty if self.interval == "above" else 0.0)
        if not math.isfinite(self.uncertainty):
            raise ValueError(f"cannot inflate an estimate of unknown uncertainty by z={z} ({self.method})")
        return self.value + z * self.uncertainty

    def __str__(self) -> str:
        if self.exact:
            return f"{self.value:.6g} (exact)"
        if self.interval == "above":
            return f"{self.value:.6g} (estimated; true value in [{self.value:.6g}, {self.value + self.uncertainty:.6g}])"
        if self.interval == "below":
            return f"{self.value:.6g} (estimated; true value in [{self.value - self.uncertainty:.6g}, {self.value:.6g}])"
        return f"{self.value:.6g} ± {self.uncertainty:.2g} (estimated)"


@dataclass(frozen=True)
class EstimatedConstants:
    """L, σ², f*, Δ_f, F_0 of a problem with N clients, each a :class:`Quantity`."""

    L: Quantity
    sigma2: Quantity
    f_star: Quantity
    delta_f: Quantity
    F0: Quantity
    n_clients: int

    @property
    def exact(self) -> frozenset[str]:
        return frozenset(name for name in NAMES if getattr(self, name).exact)

    @property
    def estimated(self) -> tuple[str, ...]:
        return tuple(name for name in NAMES if not getattr(self, name).exact)

    def to_constants(self, *, local_steps: int = 1, rounds: int = 1, n_clients: int | None = None,
                     z: float = 0.0) -> Constants:
        """``bounds.Constants`` for K = ``local_steps`` and T = ``rounds``. ``z`` > 0 inflates
        every estimated L, σ², Δ_f, F_0 by z uncertainties (a conservative bound)."""
        return Constants(L=self.L.upper(z), sigma2=max(0.0, self.sigma2.upper(z)), delta_f=max(0.0, self.delta_f.upper(z)),
                         F0=max(0.0, self.F0.upper(z)), n_clients=self.n_clients if n_clients is None else n_clients,
                         local_steps=local_steps, rounds=rounds)

    def to_dict(self) -> dict:
        """JSON-ready; an unknown or unbounded uncertainty is None."""
        return {name: {"value": q.value, "uncertainty": q.uncertainty if math.isfinite(q.uncertainty) else None,
                       "exact": q.exact, "interval": q.interval, "method": q.method}
                for name in NAMES for q in [getattr(self, name)]}

    def __str__(self) -> str:
        return "\n".join(f"{name:8s} {getattr(self, name)}" for name in NAMES)


# ---------------------------------------------------------------------------- L


def _hvp(problem, X: torch.Tensor, clients: torch.Tensor, V: torch.Tensor, method: str = "differences") -> torch.Tensor:
    """Row-wise ∇²f_{clients[j]}(X[j]) V[j] for unit rows V: forward-mode autograd through
    ``grads_at`` (``method="autograd"``, exact), or central differences of ``grads_at``
    (step 1e-4·(1 + ‖X_j‖); exact for quadratics up to rounding, O(h²) for smooth f_i,
    wrong across ReLU kinks)."""
    if method == "autograd":
        return torch.func.jvp(lambda Z: problem.grads_at(Z, clients), (X.contiguous().clone(),), (V,))[1]
    h = 1e-4 * (1.0 + X.norm(dim=1, keepdim=True))
    return (problem.grads_at(X + h * V, clients) - problem.grads_at(X - h * V, clients)) / (2 * h)


HVP_METHODS = ("auto", "autograd", "differences")


def hvp_method(problem, method: str = "auto") -> str:
    """``method`` itself, or for "auto" "autograd" when forward-mode autograd runs through the
    problem's ``grads_at`` (probed on one client) and "differences" otherwise."""
    if method not in HVP_METHODS:
        raise ValueError(f"hvp must be one of {', '.join(HVP_METHODS)}, got {method!r}")
    if method != "auto":
        return method
    x = getattr(problem, "x0", None)
    x = torch.zeros(problem.dim, dtype=problem.dtype, device=problem.device) if x is None else x
    one = torch.zeros(1, dtype=torch.long, device=problem.device)
    try:
        out = _hvp(problem, x[None].to(problem.dtype), one, torch.ones_like(x[None]) / math.sqrt(problem.dim), "autograd")
    except (RuntimeError, NotImplementedError, TypeError):
        return "differences"
    return "autograd" if bool(torch.isfinite(out).all()) else "differences"


def hessian_spectral_norms(problem, points: torch.Tensor, iters: int = 200, seed: int = 0, *,
                           rtol: float = 1e-10, stall: float = 1e-6, method: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(P, N) arrays of |ρ| ≈ ‖∇²f_i(x_p)‖ and their eigen-residuals ‖Hv − ρv‖, by power
    iteration run for all points and clients in one batch. Stops early once every residual
    is below ``rtol``·max|ρ|, or once max|ρ| has changed by less than ``stall`` (relative)
    over 10 iterations: the Rayleigh quotient converges long before the residual when the
    top eigenvalues cluster, as they do for networks. ``method``: see :func:`hvp_method`."""
    method = hvp_method(problem, method)
    P, N, d = points.shape[0], problem.n_clients, problem.dim
    X = points.repeat_interleave(N, dim=0)
    clients = torch.arange(N, device=points.device).repeat(P)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    V = torch.randn(P * N, d, generator=gen, dtype=points.dtype).to(points.device)
    V = V / V.norm(dim=1, keepdim=True)
    W = _hvp(problem, X, clients, V, method)
    history: list[float] = []
    for _ in range(iters):
        rho = (W * V).sum(dim=1)
        residual = (W - rho[:, None] * V).norm(dim=1)
        top = float(rho.abs().max())
        if float(residual.max()) <= rtol * max(top, 1e-300):
            break
        history.append(top)
        if len(history) > 10 and abs(top - history[-11]) <= stall * max(top, 1e-300):
            break
        norm = W.norm(dim=1, keepdim=True)
        V = torch.where(norm > 0, W / norm.clamp_min(torch.finfo(W.dtype).tiny), V)
        W = _hvp(problem, X, clients, V, method)
    rho = (W * V).sum(dim=1)
    residual = (W - rho[:, None] * V).norm(dim=1)
    return rho.abs().reshape(P, N).cpu().numpy(), residual.reshape(P, N).cpu().numpy()


# ---------------------------------------------------------------------------- σ², f*


def _variance(problem, points: torch.Tensor, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(P, N) sample means of ‖g_i(x_p) − ∇f_i(x_p)‖² over ``samples`` draws and their standard
    errors; draw s at point p takes the noise of ``NoiseStream(seed)`` at round p, step s."""
    N = problem.n_clients
    clients = torch.arange(N, device=points.device)
    noise = NoiseStream(seed)
    means, errors = [], []
    for p, x in enumerate(points):
        exact = problem.client_grads(x)
        X = x.expand(N, -1)
        draws = []
        for s in range(samples):
            G = problem.stochastic_grads(X, clients, noise.draws(p, s, clients))
            draws.append((G - exact).square().sum(dim=1))
        draws = torch.stack(draws).cpu().numpy()
        means.append(draws.mean(axis=0))
        errors.append(draws.std(axis=0, ddof=1) / math.sqrt(samples) if samples > 1 else np.full(N, np.inf))
    return np.array(means), np.array(errors)


def _minimise(problem, x0: torch.Tensor, tol: float, maxiter: int) -> tuple[torch.Tensor, float, float]:
    """(x̂, f(x̂), ‖∇f(x̂)‖) from L-BFGS on the full objective (scipy, float64)."""
    def fun(v):
        x = torch.as_tensor(v, dtype=problem.dtype, device=problem.device)
        return float(problem.loss(x)), problem.full_grad(x).detach().cpu().double().numpy()

    res = minimize(fun, x0.detach().cpu().double().numpy(), jac=True, method="L-BFGS-B",
                   options=dict(maxiter=maxiter, maxcor=30, ftol=0.0, gtol=tol))
    value, grad = fun(res.x)
    return torch.as_tensor(res.x, dtype=problem.dtype, device=problem.device), value, float(np.linalg.norm(grad))


def _smallest_curvature(problem, x: torch.Tensor, method: str = "differences") -> float:
    """λ_min(∇²f(x)) from the dense Hessian assembled column by column (small dims) or
    from Lanczos (scipy ``eigsh``) on Hessian–vector products."""
    N = problem.n_clients
    X = x.expand(N, -1)
    clients = torch.arange(N, device=x.device)

    def hv(v: torch.Tensor) -> torch.Tensor:
        return _hvp(problem, X, clients, v.expand(N, -1), method).mean(dim=0)

    d = problem.dim
    if d <= 400:
        H = torch.stack([hv(e) for e in torch.eye(d, dtype=x.dtype, device=x.device)]).cpu().double().numpy()
        return float(np.linalg.eigvalsh((H + H.T) / 2)[0])

    op = LinearOperator((d, d), dtype=np.float64, matvec=lambda v: hv(
        torch.as_tensor(np.ravel(v), dtype=x.dtype, device=x.device)).cpu().double().numpy())
    return float(eigsh(op, k=1, which="SA", tol=1e-8, return_eigenvectors=False)[0])


# ---------------------------------------------------------------------------- main


def _count(value, name: str, minimum: int) -> int:
    return integer(value, name, minimum)


def _known(problem, use_exact: bool) -> tuple[dict, dict]:
    if not use_exact or not hasattr(problem, "constants"):
        return {}, {}
    pc = problem.constants()
    known = {name: float(getattr(pc, name)) for name in NAMES if name in pc.exact}
    return known, dict(getattr(pc, "notes", {}) or {})


def problem_constants(problem) -> EstimatedConstants:
    """The problem's own ``constants()`` as they are, each labelled exact or estimated (with
    an unknown uncertainty, nan, for estimates): a cheap alternative to
    :func:`estimate_constants` for problems whose constants are costly to re-estimate (the
    CNNs), where the problem's notes say how each number was obtained."""
    pc = problem.constants()
    notes = dict(getattr(pc, "notes", {}) or {})
    quantities = {name: Quantity(float(getattr(pc, name)), 0.0 if name in pc.exact else math.nan, name in pc.exact,
                                 "problem.constants()" + (f": {notes[name]}" if name in notes else ""))
                  for name in NAMES}
    return EstimatedConstants(**quantities, n_clients=problem.n_clients)


def estimate_constants(problem=None, *, use_exact: bool = True, points=None, run_steps: int | None = None,
                       power_iters: int = 200, variance_samples: int = 64, seed: int = 0,
                       fstar_tol: float = 1e-12, fstar_maxiter: int | None = None, hvp: str = "auto",
                       loss=None, grad=None, stochastic_grad=None, n_clients: int | None = None, x0=None,
                       convex: bool = False) -> EstimatedConstants:
    """L, σ², f*, Δ_f, F_0 of ``problem`` at its start x⁰, each labelled exact or estimated.

    A model trained elsewhere comes as per-client callables instead of ``problem``: ``loss(i, x)``
    (and optionally ``grad(i, x)``, ``stochastic_grad(i, x, generator)``) with ``n_clients``,
    the start ``x0`` and ``convex``, wrapped in ``algorithms.problems.FunctionProblem``; every
    constant is then an estimate (F_0 is computed exactly at x⁰).

    ``use_exact``: take the constants ``problem.constants()`` marks exact (False estimates
    everything, e.g. to test the estimators). ``points``: (P, d) points at which L and σ² are
    sampled (default x⁰ and ``run_steps`` full-gradient steps of size 1/L̂ from it, plus the
    f* minimiser when f* is estimated). ``run_steps`` defaults to 10 for a convex problem
    and 2 for a non-convex one; ``fstar_maxiter`` (L-BFGS iterations for f*) to 10 000 and
    100. ``power_iters``, ``variance_samples``: effort of the L and σ² estimators; ``seed``
    their randomness; ``hvp``: how Hessian–vector products are formed (see
    :func:`hvp_method`). Everything runs in float64.
    """
    if (problem is None) == (loss is None):
        raise ValueError("give either a problem or a user's per-client loss (loss=, n_clients=, x0=)")
    if problem is None:
        if n_clients is None or x0 is None:
            raise ValueError("a per-client loss needs n_clients= and x0=")
        problem = FunctionProblem(n_clients, x0, loss, grad, stochastic_grad, convex=convex)
    convex = bool(getattr(problem, "convex", False))
    run_steps = (10 if convex else 2) if run_steps is None else _count(run_steps, "run_steps", 0)
    fstar_maxiter = (10_000 if convex else 100) if fstar_maxiter is None else _count(fstar_maxiter, "fstar_maxiter", 1)
    power_iters = _count(power_iters, "power_iters", 1)
    variance_samples = _count(variance_samples, "variance_samples", 2)
    known, notes = _known(problem, use_exact)
    ref = problem.to(None, torch.float64)
    x0 = getattr(ref, "x0", None)
    x0 = torch.zeros(ref.dim, dtype=torch.float64, device=ref.device) if x0 is None else x0.to(torch.float64)
    out: dict[str, Quantity] = {}
    for name, value in known.items():
        out[name] = Quantity(value, 0.0, True, "problem.constants()" + (f": {notes[name]}" if name in notes else ""))
    if "F0" not in out:
        F0 = float(ref.client_grads(x0).square().sum(dim=1).mean())
        out["F0"] = Quantity(F0, 0.0, True, "(1/N) Σ_i ‖∇f_i(x⁰)‖² computed at x⁰ (FedSUM Thm 4.1)")
    if len(out) == len(NAMES):
        return EstimatedConstants(**out, n_clients=problem.n_clients)
    method = hvp_method(ref, hvp)

    x_hat = None
    if "f_star" not in out or "delta_f" not in out:
        x_hat, f_hat, gnorm = _minimise(ref, x0, fstar_tol, fstar_maxiter)
        f_x0 = float(ref.loss(x0))
        if "f_star" in out:    # f* known, Δ_f not: use the exact f*
            f_hat, gap, interval, how = out["f_star"].value, 0.0, None, "exact"
        elif convex:
            mu = _smallest_curvature(ref, x_hat, method)
            gap, interval = (gnorm**2 / (2 * mu) if mu > 0 else math.inf), None
            how = f"L-BFGS on f, ‖∇f(x̂)‖ = {gnorm:.3g}, gap ≤ ‖∇f‖²/(2μ̂), μ̂ = {mu:.3g}"
        else:
            low = float(getattr(ref, "loss_lower_bound", -math.inf))
            f_hat = min(f_hat, f_x0)
            gap, interval = f_hat - low, "below"
            how = (f"non-convex: the lowest f of {fstar_maxiter} L-BFGS iterations from x⁰ (‖∇f(x̂)‖ = {gnorm:.3g}), "
                   f"a local value; inf f ∈ [{low:.6g}, {f_hat:.6g}] since f ≥ {low:.6g}")
        if "f_star" not in out:
            out["f_star"] = Quantity(f_hat, gap, False, how, interval=interval)
        if "delta_f" not in out:
            out["delta_f"] = Quantity(max(0.0, f_x0 - f_hat), gap, gap == 0.0 and out["f_star"].exact,
                                      "f(x⁰) − f*" + (f" ∈ [{f_x0 - f_hat:.6g}, {f_x0 - f_hat + gap:.6g}]" if interval else ""),
                                      interval="above" if interval == "below" else None)   # Δ_f = f(x⁰) − f*

    if "L" not in out or "sigma2" not in out:
        if points is None:
            rho, _ = hessian_spectral_norms(ref, x0[None], min(power_iters, 30), seed, rtol=1e-3, method=method)
            step = 1.0 / max(float(rho.max()), 1e-12)
            path = [x0]
            for _ in range(run_steps):
                path.append(path[-1] - step * ref.full_grad(path[-1]))
            if x_hat is not None:
                path.append(x_hat)
            pts = torch.stack(path)
        else:
            pts = torch.as_tensor(np.asarray(points, dtype=np.float64)).to(ref.device)
            if pts.ndim != 2 or pts.shape[1] != ref.dim:
                raise ValueError(f"points must have shape (P, {ref.dim}), got {tuple(pts.shape)}")
        pts = pts[torch.isfinite(pts).all(dim=1)]
        where = (f"{pts.shape[0]} point(s) (x⁰, a short full-gradient run{' and x̂' if x_hat is not None else ''})"
                 if points is None else f"{pts.shape[0]} given point(s)")
        if "L" not in out:
            rho, residual = hessian_spectral_norms(ref, pts, power_iters, seed, method=method)
            p, i = np.unravel_index(int(np.argmax(rho)), rho.shape)
            out["L"] = Quantity(float(rho[p, i]), float(residual[p, i]), False,
                                f"max_i ‖∇²f_i‖ by power iteration (≤ {power_iters} steps, {method} Hessian–vector "
                                f"products) at {where}; uncertainty = eigen-residual; a lower estimate of the sup over x")
        if "sigma2" not in out:
            means, errors = _variance(ref, pts, variance_samples, seed)
            p, i = np.unravel_index(int(np.argmax(means)), means.shape)
            value, error = float(means[p, i]), float(errors[p, i])
            exact = value == 0.0 and error == 0.0
            out["sigma2"] = Quantity(value, error, exact,
                                     f"max over clients of sampled E‖g_i − ∇f_i‖² ({variance_samples} draws) at {where}; "
                                     "uncertainty = standard error" + ("; every draw was exact" if exact else ""))
    return EstimatedConstants(**{name: out[name] for name in NAMES}, n_clients=problem.n_clients)
