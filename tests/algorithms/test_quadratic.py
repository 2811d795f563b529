"""problems.Quadratic: values, gradients, noise and constants, each checked independently."""
import numpy as np
import pytest
import scipy.optimize
import torch
from hypothesis import given
from hypothesis import strategies as st

from algorithms.noise import NoiseStream
from algorithms.problems import Quadratic


def _dense(problem):
    A = problem._A64
    return np.stack([np.diag(a) for a in A]) if problem.diagonal else A


def f_i(A, b, x):
    """½ (x − b)ᵀ A (x − b), written from the definition."""
    return 0.5 * (x - b) @ A @ (x - b)


def num_grad(fun, x, h=1e-6):
    e = np.eye(len(x))
    return np.array([(fun(x + h * e[j]) - fun(x - h * e[j])) / (2 * h) for j in range(len(x))])


def num_hessian(fun, x, h=1e-4):
    e, d = np.eye(len(x)), len(x)
    H = np.empty((d, d))
    for j in range(d):
        for k in range(d):
            H[j, k] = (fun(x + h * e[j] + h * e[k]) - fun(x + h * e[j] - h * e[k])
                       - fun(x - h * e[j] + h * e[k]) + fun(x - h * e[j] - h * e[k])) / (4 * h * h)
    return H


@pytest.fixture(params=[False, True], ids=["dense", "diagonal"])
def problem(request):
    return Quadratic.random(5, 4, heterogeneity=2.0, noise_std=0.3, seed=3, diagonal=request.param)


def test_loss_and_gradients_match_finite_differences(problem):
    A, b = _dense(problem), problem._b64
    x = np.random.default_rng(0).standard_normal(problem.dim)
    f = lambda v: np.mean([f_i(A[i], b[i], v) for i in range(problem.n_clients)])
    xt = torch.tensor(x)
    assert float(problem.loss(xt)) == pytest.approx(f(x), rel=1e-12)
    np.testing.assert_allclose(problem.full_grad(xt).numpy(), num_grad(f, x), rtol=1e-6, atol=1e-8)
    G = problem.client_grads(xt).numpy()
    for i in range(problem.n_clients):
        np.testing.assert_allclose(G[i], num_grad(lambda v: f_i(A[i], b[i], v), x), rtol=1e-6, atol=1e-8)
    # grads_at: a different model per row, clients in any order and repeated
    clients = torch.tensor([3, 0, 3])
    X = torch.randn(3, problem.dim, dtype=torch.float64)
    want = np.stack([num_grad(lambda v: f_i(A[c], b[c], v), X[j].numpy()) for j, c in enumerate(clients.tolist())])
    np.testing.assert_allclose(problem.grads_at(X, clients).numpy(), want, rtol=1e-6, atol=1e-8)


def test_L_is_the_largest_client_curvature(problem):
    A, b = _dense(problem), problem._b64
    x = np.zeros(problem.dim)
    curvatures = [np.linalg.eigvalsh(num_hessian(lambda v: f_i(A[i], b[i], v), x))[-1] for i in range(problem.n_clients)]
    c = problem.constants()
    assert c.L == pytest.approx(max(curvatures), rel=1e-5)
    # Assumption 1.1 is per client: L is at least the curvature of the mean
    mean_hessian = num_hessian(lambda v: np.mean([f_i(A[i], b[i], v) for i in range(problem.n_clients)]), x)
    assert c.L >= np.linalg.eigvalsh(mean_hessian)[-1] - 1e-6


def test_f_star_delta_f_and_F0_match_independent_computations(problem):
    A, b = _dense(problem), problem._b64
    f = lambda v: np.mean([f_i(A[i], b[i], v) for i in range(problem.n_clients)])
    jac = lambda v: np.mean([A[i] @ (v - b[i]) for i in range(problem.n_clients)], axis=0)
    best = scipy.optimize.minimize(f, np.ones(problem.dim), jac=jac, method="BFGS", options={"gtol": 1e-12})
    c = problem.constants()
    assert c.f_star == pytest.approx(best.fun, rel=1e-9, abs=1e-12)
    assert c.delta_f == pytest.approx(f(np.zeros(problem.dim)) - best.fun, rel=1e-8)
    grads0 = [num_grad(lambda v: f_i(A[i], b[i], v), np.zeros(problem.dim)) for i in range(problem.n_clients)]
    assert c.F0 == pytest.approx(np.mean([g @ g for g in grads0]), rel=1e-6)
    assert c.exact == {"L", "sigma2", "f_star", "delta_f", "F0"}


def test_singular_mean_hessian():
    # coordinate 2 has zero curvature for every client: f is flat along it, f* is still attained
    A = np.array([[1.0, 2.0, 0.0], [3.0, 0.5, 0.0]])
    b = np.array([[1.0, -1.0, 5.0], [-2.0, 4.0, -7.0]])
    problem = Quadratic(A, b)
    x_star = problem.minimizer()
    # per coordinate: minimise ½ Σ_i a_ij (x_j − b_ij)² / N
    want = (A * b).sum(0)[:2] / A.sum(0)[:2]
    np.testing.assert_allclose(x_star[:2], want, rtol=1e-12)
    f = lambda v: np.mean([0.5 * (A[i] * (v - b[i]) ** 2).sum() for i in range(2)])
    assert problem.constants().f_star == pytest.approx(f(np.r_[want, 123.0]), rel=1e-12)
    assert float(problem.full_grad(torch.tensor(x_star)).norm()) < 1e-12


@pytest.mark.slow
def test_noise_is_unbiased_with_variance_sigma2():
    problem = Quadratic.random(3, 4, noise_std=0.7, seed=1)
    x = torch.full((problem.dim,), 0.5, dtype=torch.float64)
    clients = torch.arange(3)
    X = x.expand(3, -1)
    noise = NoiseStream(0)
    draws = torch.stack([problem.stochastic_grads(X, clients, noise.draws(0, k, clients)) for k in range(4000)])
    dev = draws - problem.client_grads(x)
    sq = dev.square().sum(-1).flatten().numpy()
    sigma2 = problem.constants().sigma2
    assert sigma2 == pytest.approx(4 * 0.7**2)
    assert abs(sq.mean() - sigma2) < 5 * sq.std() / np.sqrt(sq.size)
    assert np.abs(dev.mean(0).numpy()).max() < 5 * 0.7 / np.sqrt(4000)


def test_noise_of_a_client_does_not_depend_on_who_else_is_active():
    problem = Quadratic.random(6, 3, noise_std=1.0, seed=2)
    X = torch.zeros(6, 3, dtype=torch.float64)
    noise = NoiseStream(9)
    full = problem.stochastic_grads(X, torch.arange(6), noise.draws(2, 1, torch.arange(6)))
    part = problem.stochastic_grads(X[:2], torch.tensor([4, 1]), noise.draws(2, 1, torch.tensor([4, 1])))
    assert torch.equal(part, full[[4, 1]])
    xi = noise.draws(2, 1, torch.tensor([4])).normal(problem.dim)[0]      # client 4's own draw, by hand
    assert torch.equal(part[0], problem.grads_at(X[:1], torch.tensor([4]))[0] + problem.noise_std * xi)


def test_no_noise_is_exact_gradient():
    problem = Quadratic.random(4, 3, noise_std=0.0, seed=2)
    X = torch.randn(2, 3, dtype=torch.float64)
    clients = torch.tensor([1, 3])
    assert torch.equal(problem.stochastic_grads(X, clients, NoiseStream(0).draws(0, 0, clients)),
                       problem.grads_at(X, clients))
    assert problem.noise_draws() is None
    assert Quadratic.random(4, 3, noise_std=0.5, seed=2).noise_draws() == ("normal", 3)
    assert problem.constants().sigma2 == 0


def test_to_changes_precision_not_constants(problem):
    low = problem.to(dtype=torch.float32)
    assert low.A.dtype == low.b.dtype == torch.float32 and problem.A.dtype == torch.float64
    assert low.constants() == problem.constants()
    x = torch.randn(problem.dim, dtype=torch.float64)
    assert float(low.loss(x.float())) == pytest.approx(float(problem.loss(x)), rel=1e-5)
    back = low.to(dtype=torch.float64)
    assert torch.equal(back.A, problem.A)


def test_random_is_reproducible_and_heterogeneity_zero_shares_the_optimum():
    a, b = Quadratic.random(4, 3, seed=5), Quadratic.random(4, 3, seed=5)
    assert torch.equal(a.A, b.A) and torch.equal(a.b, b.b)
    same = Quadratic.random(4, 3, heterogeneity=0.0, seed=5)
    assert torch.equal(same.b, same.b[:1].expand(4, -1))
    assert same.constants().f_star == pytest.approx(0.0, abs=1e-12)
    assert Quadratic.random(4, 1, seed=0).A.shape == (4, 1, 1)


@pytest.mark.parametrize("A, b, noise, match", [
    (np.array([[[1.0, 2.0], [0.0, 1.0]]]), np.zeros((1, 2)), 0.0, "not symmetric"),
    (np.array([[[1.0, 0.0], [0.0, -1.0]]]), np.zeros((1, 2)), 0.0, "not positive semidefinite"),
    (np.array([[1.0, -0.5]]), np.zeros((1, 2)), 0.0, "not positive semidefinite"),
    (np.ones((2, 3, 3)), np.zeros((2, 2)), 0.0, "b must have shape"),
    (np.ones((2, 3, 4)), np.zeros((2, 3)), 0.0, "A must have shape"),
    (np.eye(2)[None], np.zeros((1, 2)), -0.1, "noise_std"),
    (np.eye(2)[None], np.zeros((1, 2)), float("nan"), "noise_std"),
    (np.eye(2)[None], np.array([[0.0, np.inf]]), 0.0, "b must be finite"),
])
def test_bad_input(A, b, noise, match):
    with pytest.raises(ValueError, match=match):
        Quadratic(A, b, noise)


@pytest.mark.parametrize("kwargs, match", [({"n_clients": 0}, "n_clients"), ({"dim": 2.5}, "dim"),
                                           ({"heterogeneity": -1}, "heterogeneity")])
def test_bad_random_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Quadratic.random(**{"n_clients": 2, "dim": 2, **kwargs})


@given(n=st.integers(1, 4), d=st.integers(1, 4), seed=st.integers(0, 2**16), diagonal=st.booleans(),
       low=st.sampled_from([0.0, 0.1]))
def test_constants_are_consistent(n, d, seed, diagonal, low):
    problem = Quadratic.random(n, d, heterogeneity=1.5, seed=seed, diagonal=diagonal, curvature=(low, 1.0))
    c = problem.constants()
    x_star = torch.tensor(problem.minimizer())
    assert float(problem.full_grad(x_star).norm()) < 1e-9
    assert c.f_star == pytest.approx(float(problem.loss(x_star)), rel=1e-12, abs=1e-14)
    other = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    assert c.f_star <= float(problem.loss(other)) + 1e-12
    assert c.delta_f == pytest.approx(float(problem.loss(torch.zeros(d, dtype=torch.float64))) - c.f_star, abs=1e-12)
    # L-smoothness of every client along a random direction
    grads = problem.client_grads(other) - problem.client_grads(torch.zeros(d, dtype=torch.float64))
    assert (grads.norm(dim=1) <= c.L * other.norm() * (1 + 1e-12)).all()
