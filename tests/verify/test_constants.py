"""estimate_constants on non-convex problems: exact Hessian–vector products, the f* interval."""
import math

import numpy as np
import pytest
import torch

from algorithms.noise import NoiseStream
from algorithms.problems import Classifier, Quadratic
from algorithms.problems.client_data import dirichlet_partition, synthetic_classification
from verify.constants import Quantity, _variance, estimate_constants, hessian_spectral_norms, hvp_method


def small_classifier(activation: str) -> Classifier:
    X, y = synthetic_classification(80, 4, 3, 2)
    parts = dirichlet_partition(y, 4, 0.5, 2, min_size=4)
    return Classifier([X[p] for p in parts], [y[p] for p in parts], hidden=6, activation=activation,
                      reg=0.01, batch_size=4, n_classes=3)


@pytest.mark.slow
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_autograd_hessian_norms_match_reverse_over_reverse(activation):
    """Forward-over-reverse power iteration against the problem's own reverse-over-reverse one."""
    problem = small_classifier(activation)
    assert hvp_method(problem) == "autograd"
    x0 = problem.x0.double()
    rho, residual = hessian_spectral_norms(problem, x0[None], 400, method="autograd", stall=1e-12)
    reference = problem.hessian_norms(x0, iters=400).cpu().numpy()
    assert np.allclose(rho[0], reference, rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_differences_agree_with_autograd_for_smooth_networks():
    problem = small_classifier("tanh")
    x0 = problem.x0.double()
    exact, _ = hessian_spectral_norms(problem, x0[None], 300, method="autograd", stall=1e-12)
    approx, _ = hessian_spectral_norms(problem, x0[None], 300, method="differences", stall=1e-12)
    assert np.allclose(approx, exact, rtol=1e-5)


@pytest.mark.slow
def test_non_convex_f_star_is_an_interval():
    problem = small_classifier("tanh")
    est = estimate_constants(problem, use_exact=False, fstar_maxiter=30, power_iters=50, variance_samples=8)
    f0 = float(problem.to(None, torch.float64).loss(problem.x0.double()))
    assert est.f_star.interval == "below" and est.delta_f.interval == "above"
    assert est.f_star.uncertainty == pytest.approx(est.f_star.value)          # inf f ∈ [0, f̂]
    assert est.delta_f.value + est.delta_f.uncertainty == pytest.approx(f0)   # Δ_f ≤ f(x⁰) − 0
    assert est.to_constants(z=2.0).delta_f == pytest.approx(f0)
    assert est.to_constants().delta_f == pytest.approx(est.delta_f.value)
    assert "non-convex" in est.f_star.method and "autograd" in est.L.method
    assert "[0," in str(est.f_star)


def test_convex_f_star_keeps_the_gap_bound():
    problem = Quadratic.random(4, 3, noise_std=0.1, seed=1)
    est = estimate_constants(problem, use_exact=False, variance_samples=16)
    assert est.f_star.interval is None and math.isfinite(est.f_star.uncertainty)
    assert abs(est.f_star.value - problem.constants().f_star) <= est.f_star.uncertainty + 1e-10


def test_sampled_variance_takes_round_p_step_s_of_the_seeds_noise():
    """Draw s at point p is the noise of NoiseStream(seed) at (t, k) = (p, s): for the quadratic,
    ‖g_i − ∇f_i‖² = s²‖ξ_i‖² with ξ_i client i's normals there, averaged by hand."""
    problem = Quadratic.random(3, 4, noise_std=0.3, seed=1)
    points = torch.stack([problem.x0, problem.x0 + 1.0])
    means, errors = _variance(problem, points, 5, seed=12)
    noise, everyone = NoiseStream(12), torch.arange(3)
    sq = np.array([[(0.3 * noise.draws(p, s, everyone).normal(4)).square().sum(1).numpy() for s in range(5)]
                   for p in range(2)])                                        # (P, samples, N)
    np.testing.assert_allclose(means, sq.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(errors, sq.std(axis=1, ddof=1) / math.sqrt(5), rtol=1e-10)
    assert (errors > 0).all() and not np.array_equal(means[0], means[1])


def test_interval_quantity_upper():
    above = Quantity(1.0, 0.5, False, "test", interval="above")
    below = Quantity(1.0, 0.5, False, "test", interval="below")
    assert above.upper(0) == 1.0 and above.upper(3) == 1.5 and below.upper(3) == 1.0


def test_bad_hvp_method():
    with pytest.raises(ValueError, match="hvp"):
        estimate_constants(small_classifier("tanh"), use_exact=False, hvp="finite")
