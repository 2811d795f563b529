"""A noise-free engine run never measures above its certified worst case.

A problem whose clients are L-smooth, with f(x_0) − f* ≤ Δ_f and (1/N) Σ_i ‖∇f_i(x_0)‖² ≤ F_0 (and,
for the momentum family, a heterogeneity at the global iterates at most ζ²), lies in the
programme's class (the relaxation of f* to the least value at the iterates only enlarges the
class), so the measured (1/T) Σ_{t<T} ‖∇f(x_t)‖² of a σ² = 0 run is at most the worst case over
the class (Drori & Teboulle 2014; Taylor, Hendrickx & Glineur 2017), up to the solver's accuracy.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import algorithms
from algorithms.engine import iterate
from algorithms.problems import Logistic, Quadratic
from verify.worst_case import SUPPORTED, FunctionClass, programme_size, worst_case

MOMENTUM = ("fedgm", "qhm", "fedavgm", "fednag")
#: Programmes with a larger Gram matrix are left out of the draws (the suite's time budget).
MAX_GRAM = 30


def heterogeneity_along(algorithm, problem, mask) -> float:
    """max over the run's global iterates x_0, …, x_T of (1/N) Σ_i ‖∇f_i(x_t) − ∇f(x_t)‖²."""
    worst = 0.0
    for state in iterate(algorithm, problem, mask, seed=0):
        grads = problem.client_grads(state.x)
        worst = max(worst, float((grads - grads.mean(dim=0)).square().sum(dim=1).mean()))
    return worst


def function_class(name, algorithm, problem, mask, L, delta_f, F0) -> FunctionClass:
    """The class of the run: L, Δ_f, F_0, and for the momentum family ζ² = the heterogeneity
    measured at the run's global iterates (None when it is zero: one client)."""
    het = None
    if name in MOMENTUM:
        value = heterogeneity_along(algorithm, problem, mask)
        het = value if value > 1e-12 else None
    return FunctionClass(L=L, delta_f=delta_f, F0=F0, heterogeneity=het)


def assert_below(algorithm, name, problem, mask, L, delta_f, F0):
    history = algorithms.run(algorithm, problem, mask, seed=0)
    measured = float(np.mean(history.grad_norm2))
    fc = function_class(name, algorithm, problem, mask, L, delta_f, F0)
    result = worst_case(algorithm, mask, fc)
    assert result.value is not None, result.status
    assert measured <= result.value * (1 + 1e-6) + 1e-9, (measured, result.value, result.status)
    return measured, result


@st.composite
def cases(draw):
    name = draw(st.sampled_from(SUPPORTED))
    extra = {"aggregate": draw(st.sampled_from(["active", "all"]))} if name == "fedavg" else {}
    n = draw(st.integers(1, 3))
    T = draw(st.integers(1, 6))
    K = draw(st.integers(1, 2))
    rows = draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=T, max_size=T))
    mask = np.array(rows, dtype=bool).reshape(T, n)
    sets = [np.flatnonzero(r).tolist() for r in mask]
    assume(programme_size(name, sets, n, K).gram <= MAX_GRAM)
    dim = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    heterogeneity = draw(st.floats(0.2, 2.0))
    scale = draw(st.floats(0.05, 1.0))
    return name, extra, mask, K, dim, seed, heterogeneity, scale


@pytest.mark.slow
@settings(max_examples=8)
@given(cases())
def test_noise_free_quadratic_runs_stay_below_the_worst_case(case):
    """Random noise-free quadratics (exact L = max_i λ_max(A_i), Δ_f = f(0) − f*, F_0), random
    traces (empty rounds allowed), every supported algorithm: measured ≤ worst case."""
    name, extra, mask, K, dim, seed, heterogeneity, scale = case
    problem = Quadratic.random(mask.shape[1], dim, heterogeneity=heterogeneity, noise_std=0.0, seed=seed)
    c = problem.constants()
    algorithm = algorithms.get(name, eta_l=scale / (c.L * K), eta_g=1.0, local_steps=K, **extra)
    assert_below(algorithm, name, problem, mask, c.L, c.delta_f, c.F0)


class ExactLogistic(Logistic):
    """Binary logistic regression with exact client gradients (σ² = 0): the gradient of a client is
    that of all its samples, in place of a mini-batch."""

    def stochastic_grads(self, X, clients, draws):
        return self.grads_at(X, clients)

    def noise_draws(self):
        return None


@pytest.mark.parametrize("name", ["fedsum", "fedavg"])
def test_noise_free_logistic_run_stays_below_the_worst_case(name):
    """A two-client logistic regression on a partial trace with an empty round. L is the problem's
    rigorous bound max_i [λ_max(A_iᵀA_i/n_i)/4 + reg] (a larger L keeps the problem in the class);
    f* comes from the problem's solver (L-BFGS and Newton steps), with f(x*) − f* ≤ ‖∇f(x*)‖²/(2 reg)
    by reg-strong convexity, so Δ_f = f(0) − f(x*) + that gap, inflated by 1e-6 relative, is at least
    the true f(0) − f*; F_0 is computed exactly at x_0 = 0."""
    problem = ExactLogistic.synthetic(n_clients=2, alpha=1.0, n_samples=40, dim=2, n_classes=2, reg=1e-2, seed=0)
    x_star, f_star, gnorm = problem.solve()
    f0 = float(problem.loss(problem.x0))
    delta_f = (f0 - f_star + gnorm ** 2 / (2 * problem.reg)) * (1 + 1e-6)
    L = float(problem.smoothness().max())
    F0 = float((problem.client_grads(problem.x0) ** 2).sum(dim=1).mean())
    mask = np.array([[1, 0], [0, 0], [0, 1], [1, 1]], dtype=bool)
    algorithm = algorithms.get(name, eta_l=0.5 / L, eta_g=1.0, local_steps=2)
    measured, result = assert_below(algorithm, name, problem, mask, L, delta_f, F0 * (1 + 1e-9))
    assert measured > 0 and result.ok
