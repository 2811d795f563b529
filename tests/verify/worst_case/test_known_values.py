"""The solver reproduces the known exact worst case of gradient descent on L-smooth functions.

With one client, K = 1 and full participation, FedSUM-B, FedSUM and FedAvg are gradient descent
x_{t+1} = x_t − γ∇f(x_t) with γ = η_g η_l. For γ ≤ 1/L every step decreases f, so the relaxed
constraint f(x_0) − f(x_t) ≤ Δ_f at every iterate is f(x_0) − f(x_n) ≤ Δ_f, and the worst case of
min_{0≤t≤n} ‖∇f(x_t)‖² over L-smooth (non-convex) f is the exact rate of Abbaszadehpeivasti,
de Klerk & Zamani (Optim. Lett. 16, 2022): 4 L Δ_f / (3 n) at γ = 1/L, as quoted in PEPit's
example ``wc_gradient_descent`` (whose programme uses the interpolation conditions of L-smooth
functions of Taylor, Hendrickx & Glineur, SIAM J. Optim. 27, 2017).
"""
from __future__ import annotations

import numpy as np
import pytest

import algorithms
from verify.worst_case import FunctionClass, worst_case


def _gradient_descent(name: str, gamma: float, n: int, L: float, delta_f: float):
    algorithm = algorithms.get(name, eta_l=gamma / 2, eta_g=2.0, local_steps=1)
    return worst_case(algorithm, np.ones((n, 1), dtype=bool), FunctionClass(L=L, delta_f=delta_f), measure="min")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_gradient_descent_at_one_over_L_has_the_exact_rate(n):
    """FedSUM-B with one client at γ = 1/L: the worst case is 4 L Δ_f / (3 n) (Abbaszadehpeivasti,
    de Klerk & Zamani 2022), to 1e-5 relative, for L = 2 and Δ_f = 3 (the rate scales as L Δ_f)."""
    L, delta_f = 2.0, 3.0
    result = _gradient_descent("fedsum-b", 1 / L, n, L, delta_f)
    assert result.ok
    assert result.value == pytest.approx(4 * L * delta_f / (3 * n), rel=1e-5)


@pytest.mark.parametrize("gamma", [0.3, 0.5, 0.8])
def test_gradient_descent_matches_pepits_own_example(gamma):
    """For steps γ < 1/L the worst case equals the value of PEPit's example
    ``wc_gradient_descent`` at the same γ and n (a programme built independently of the
    transcriptions, solved through cvxpy), to 1e-5 relative; the value exceeds the rate at
    γ = 1/L, as shorter steps make less progress."""
    from PEPit.examples.nonconvex_optimization.gradient_descent import wc_gradient_descent

    L, n = 1.0, 3
    result = _gradient_descent("fedsum-b", gamma, n, L, 1.0)
    reference, _ = wc_gradient_descent(L=L, gamma=gamma, n=n, wrapper="cvxpy", solver="CLARABEL", verbose=-1)
    assert result.ok
    assert result.value == pytest.approx(reference, rel=1e-5)
    assert result.value > 4 * L / (3 * n) * (1 + 1e-3)


@pytest.mark.parametrize("name", ["fedsum", "fedavg"])
def test_other_algorithms_on_one_client_are_gradient_descent(name):
    """FedSUM and FedAvg with one client and K = 1 are gradient descent too: the same worst case
    4 L Δ_f / (3 n) at γ = η_g η_l = 1/L."""
    L, delta_f, n = 1.0, 1.0, 3
    result = _gradient_descent(name, 1 / L, n, L, delta_f)
    assert result.ok
    assert result.value == pytest.approx(4 * L * delta_f / (3 * n), rel=1e-5)
