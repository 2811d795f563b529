"""Logistic / Classifier problems and their data: every batched formula against an
independent computation (autograd on a plain loss, per-client loops, Monte-Carlo,
numerical Hessians, a second solver)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from algorithms.noise import NoiseStream
from algorithms.problems import Classifier, Logistic
from algorithms.problems.client_data import digits, dirichlet_partition, synthetic_classification


def small_logistic(n_classes=3, batch_size=3, reg=0.05, intercept=True, seed=1):
    X, y = synthetic_classification(60, 3, n_classes, seed)
    parts = dirichlet_partition(y, 4, 1.0, seed, min_size=5)
    return Logistic([X[p] for p in parts], [y[p] for p in parts], reg=reg, batch_size=batch_size,
                    n_classes=n_classes, intercept=intercept)


def small_classifier(activation="tanh", reg=0.01, batch_size=4):
    X, y = synthetic_classification(80, 4, 3, 2)
    parts = dirichlet_partition(y, 5, 0.5, 2, min_size=4)
    return Classifier([X[p] for p in parts], [y[p] for p in parts], hidden=6, activation=activation,
                      reg=reg, batch_size=batch_size, n_classes=3)


def client_loss_reference(problem: Logistic, x: torch.Tensor, i: int) -> torch.Tensor:
    """f_i(x) written directly with torch.nn.functional on client i's data."""
    d = problem.data
    A = torch.as_tensor(d.features[d.owner == i])
    y = torch.as_tensor(d.labels[d.owner == i])
    if problem.binary:
        loss = F.binary_cross_entropy_with_logits(A @ x, y.double())
    else:
        loss = F.cross_entropy(A @ x.view(A.shape[1], -1), y)
    return loss + 0.5 * problem.reg * x @ x


def client_losses_reference(problem: Logistic, x: torch.Tensor) -> torch.Tensor:
    return torch.stack([client_loss_reference(problem, x, i) for i in range(problem.n_clients)])


def hessian(fun, x):
    """Reverse-over-reverse Hessian (torch.func.jacrev twice)."""
    return torch.func.jacrev(torch.func.jacrev(fun))(x)


# -- data -------------------------------------------------------------------------------
def test_digits_is_scaled():
    X, y = digits()
    assert X.shape == (1797, 64) and y.shape == (1797,)
    assert X.min() == 0.0 and X.max() == 1.0 and set(np.unique(y)) == set(range(10))


@given(n_clients=st.integers(1, 12), alpha=st.floats(0.01, 100.0), seed=st.integers(0, 2**32 - 1),
       min_size=st.integers(0, 8))
def test_dirichlet_partition_is_a_partition(n_clients, alpha, seed, min_size):
    labels = np.random.default_rng(0).integers(0, 5, 120)
    parts = dirichlet_partition(labels, n_clients, alpha, seed, min_size)
    assert len(parts) == n_clients
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(120))
    assert min(len(p) for p in parts) >= min_size
    again = dirichlet_partition(labels, n_clients, alpha, seed, min_size)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_dirichlet_small_alpha_is_more_skewed():
    labels = np.repeat(np.arange(10), 200)
    glob = np.full(10, 0.1)

    def skew(alpha):  # mean total-variation distance of client label mixes from the global one
        tv = []
        for seed in range(5):
            for p in dirichlet_partition(labels, 10, alpha, seed, min_size=1):
                mix = np.bincount(labels[p], minlength=10) / len(p)
                tv.append(0.5 * np.abs(mix - glob).sum())
        return np.mean(tv)

    assert skew(0.05) > 0.6 > 0.1 > skew(100.0)
    assert not np.array_equal(dirichlet_partition(labels, 10, 0.5, 0)[0], dirichlet_partition(labels, 10, 0.5, 1)[0])


# -- Logistic: gradients --------------------------------------------------------------------
@pytest.mark.parametrize("n_classes,intercept", [(3, True), (4, False), (2, True), (2, False)])
def test_logistic_matches_autograd(n_classes, intercept):
    prob = small_logistic(n_classes=n_classes, intercept=intercept)
    x = torch.randn(prob.dim, generator=torch.Generator().manual_seed(3), dtype=torch.float64, requires_grad=True)
    ref = client_losses_reference(prob, x)
    grads = torch.stack([torch.autograd.grad(ref[i], x, retain_graph=True)[0] for i in range(prob.n_clients)])
    x = x.detach()
    torch.testing.assert_close(prob.loss(x), ref.mean().detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(prob.client_grads(x), grads, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(prob.full_grad(x), grads.mean(0), rtol=1e-10, atol=1e-12)
    v = torch.randn(prob.dim, dtype=torch.float64)
    H = hessian(lambda z: client_losses_reference(prob, z).mean(), x)
    torch.testing.assert_close(prob.hessian_vector(x, v), H @ v, rtol=1e-10, atol=1e-12)


def test_logistic_grads_at_equals_per_client_loop():
    prob = small_logistic()
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(7, prob.dim, generator=gen, dtype=torch.float64)
    clients = torch.tensor([3, 0, 0, 2, 1, 3, 2])
    loop = torch.stack([prob.client_grads(X[j])[c] for j, c in enumerate(clients.tolist())])
    torch.testing.assert_close(prob.grads_at(X, clients), loop, rtol=1e-12, atol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("n_classes", [3, 2])
def test_logistic_stochastic_grads_unbiased_with_exact_variance(n_classes):
    prob = small_logistic(n_classes=n_classes, batch_size=3)
    gen = torch.Generator().manual_seed(5)
    x = 0.5 * torch.randn(prob.dim, generator=gen, dtype=torch.float64)
    X, everyone = x.expand(prob.n_clients, -1), torch.arange(prob.n_clients)
    noise = NoiseStream(5)
    draws = torch.stack([prob.stochastic_grads(X, everyone, noise.draws(0, k, everyone)) for k in range(4000)])
    exact = prob.client_grads(x)
    mean, stderr = draws.mean(0), draws.std(0) / np.sqrt(draws.shape[0])
    assert ((mean - exact).abs() <= 5 * stderr + 1e-12).all()
    sq = ((draws - exact) ** 2).sum(-1)  # (R, N)
    var = prob.gradient_variance(x)
    assert ((sq.mean(0) - var).abs() <= 5 * sq.std(0) / np.sqrt(sq.shape[0])).all()
    assert (var > 0).all()


def test_identical_noise_for_client_subsets():
    noise = NoiseStream(9)
    for prob in (small_logistic(), small_classifier()):
        X = prob.x0.expand(prob.n_clients, -1) + 0.1
        everyone, sub = torch.arange(prob.n_clients), torch.tensor([3, 1])
        full = prob.stochastic_grads(X, everyone, noise.draws(2, 1, everyone))
        part = prob.stochastic_grads(X[sub], sub, noise.draws(2, 1, sub))
        torch.testing.assert_close(part, full[sub], rtol=0, atol=0)


def test_float32_copy_sees_the_same_noise():
    prob = small_logistic()
    low = prob.to(dtype=torch.float32)
    assert low.dtype == torch.float32 and low.x0.dtype == torch.float32
    X, c = prob.x0.expand(4, -1) + 0.2, torch.arange(4)
    a = prob.stochastic_grads(X, c, NoiseStream(2).draws(0, 0, c))
    b = low.stochastic_grads(X.float(), c, NoiseStream(2).draws(0, 0, c))
    torch.testing.assert_close(b.double(), a, rtol=1e-5, atol=1e-6)
    assert low.constants() == prob.constants()


class _FixedDraws:
    """Draws whose uniforms are given rows (the edge u → 1 included)."""

    def __init__(self, u):
        self.u = torch.as_tensor(u, dtype=torch.float64)

    def uniform(self, width, dtype=torch.float64):
        return self.u[:, :width].to(dtype)


def test_batch_positions_are_floor_u_n_for_the_requested_rows():
    prob = small_logistic()
    d = prob.data
    clients = torch.tensor([2, 0, 2])
    u = [[0.0, 0.5, 1 - 2**-53], [0.25, 0.999, 1.0], [0.1, 0.2, 0.3]]
    pos = d.batch_positions(clients, _FixedDraws(u), 3)
    for j, c in enumerate(clients.tolist()):
        n = int(d.sizes[c])
        assert pos[j].tolist() == [min(int(v * n), n - 1) for v in u[j]]
    assert pos[1, 2] == d.sizes[0] - 1                     # u = 1 stays on the client's last sample
    A, y = d.minibatch(clients, _FixedDraws(u), 3)
    assert torch.equal(A, d.X[clients[:, None], pos]) and torch.equal(y, d.y[clients[:, None], pos])
    noise = NoiseStream(4)
    rows = d.batch_positions(clients, noise.draws(1, 2, clients), 3)
    alone = [d.batch_positions(clients[j:j + 1], noise.draws(1, 2, clients[j:j + 1]), 3)[0] for j in range(3)]
    assert torch.equal(rows, torch.stack(alone)) and torch.equal(rows[0], rows[2])   # same client, same batch


def test_problems_declare_the_draws_they_take():
    assert small_logistic(batch_size=5).noise_draws() == ("uniform", 5)
    assert small_classifier(batch_size=4).noise_draws() == ("uniform", 4)


def test_a_users_stochastic_gradient_gets_a_generator_keyed_by_its_client():
    """FunctionProblem seeds the user's generator with ⌊u·2^53⌋, u the row's uniform: a
    client's draw does not depend on the other rows."""
    from algorithms.problems import FunctionProblem

    def noisy(i, x, generator):
        return x + torch.randn(x.shape[0], generator=generator, dtype=torch.float64)

    fp = FunctionProblem(4, np.zeros(3), lambda i, x: 0.5 * x @ x, stochastic_grad=noisy)
    assert fp.noise_draws() == ("uniform", 1)
    assert FunctionProblem(4, np.zeros(3), lambda i, x: 0.5 * x @ x).noise_draws() is None
    noise, everyone, sub = NoiseStream(3), torch.arange(4), torch.tensor([2, 0])
    X = torch.zeros(4, 3, dtype=torch.float64)
    full = fp.stochastic_grads(X, everyone, noise.draws(1, 0, everyone))
    assert torch.equal(fp.stochastic_grads(X[:2], sub, noise.draws(1, 0, sub)), full[sub])
    seed = int(noise.draws(1, 0, torch.tensor([2])).uniform(1)[0, 0] * 2**53)
    assert torch.equal(full[2], torch.randn(3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))


@pytest.mark.parametrize("n_classes,dtype", [(3, torch.float64), (2, torch.float64), (3, torch.float32),
                                             (2, torch.float32)])
def test_logistic_batch_metrics_equal_the_per_model_ones(n_classes, dtype):
    prob = small_logistic(n_classes=n_classes).to(dtype=dtype)
    X = 0.7 * torch.randn(5, prob.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    loss, grad = prob.loss_and_grad_batch(X)
    assert torch.equal(loss, torch.stack([prob.loss(x) for x in X])) and torch.equal(loss, prob.loss_batch(X))
    assert torch.equal(grad, torch.stack([prob.full_grad(x) for x in X])) and torch.equal(grad, prob.full_grad_batch(X))
    assert torch.equal(prob.client_grads_batch(X), torch.stack([prob.client_grads(x) for x in X]))
    assert prob.accuracy_batch(X).tolist() == [prob.accuracy(x) for x in X]
    for b in range(5):                                      # each row does not depend on the others
        assert torch.equal(prob.loss_and_grad_batch(X[b:b + 1])[1][0], grad[b])
    if dtype == torch.float64:                              # and the values are those of the definition
        torch.testing.assert_close(loss, torch.stack([client_losses_reference(prob, x).mean() for x in X]),
                                   rtol=1e-13, atol=0)


def _fedavg_loop(prob, mask, eta_l, eta_g, K, seed):
    """FedAvg written client by client from its definition: K steps x_i ← x_i − η_l g_i(x_i) on
    the mini-batch at positions ⌊u·n_i⌋ (u: client i's uniforms of round t, step k), then
    x ← x − η_g (1/|S_t|) Σ_{i∈S_t} (x − x_i)."""
    noise, d = NoiseStream(seed), prob.data
    x = prob.x0.clone()
    for t, row in enumerate(mask):
        S = np.flatnonzero(row).tolist()
        if not S:
            continue
        deltas = []
        for i in S:
            xi, n = x.clone(), int(d.sizes[i])
            A = torch.as_tensor(d.features[d.owner == i])
            y = torch.as_tensor(d.labels[d.owner == i])
            for k in range(K):
                pos = (noise.draws(t, k, torch.tensor([i])).uniform(prob.batch_size)[0] * n).long()
                xg = xi.clone().requires_grad_(True)
                batch = F.cross_entropy(A[pos] @ xg.view(A.shape[1], -1), y[pos]) + 0.5 * prob.reg * xg @ xg
                xi = xi - eta_l * torch.autograd.grad(batch, xg)[0]
            deltas.append(x - xi)
        x = x - eta_g * torch.stack(deltas).mean(0)
    return x


def test_logistic_fedavg_follows_the_loop_written_client_by_client():
    import algorithms

    prob = small_logistic()
    mask = np.random.default_rng(3).random((6, prob.n_clients)) < 0.5
    mask[2] = False
    h = algorithms.run(algorithms.get("fedavg", eta_l=0.3, eta_g=0.8, local_steps=3), prob, mask, seed=11)
    want = _fedavg_loop(prob, mask, 0.3, 0.8, 3, 11)
    np.testing.assert_allclose(h.final_params, want.numpy(), rtol=1e-12, atol=1e-14)


def test_logistic_runs_in_a_batch_equal_the_runs_alone():
    import algorithms
    from participation import preset

    prob = small_logistic(batch_size=4)
    masks = [preset("P2", n_clients=prob.n_clients, per_round=2).sample(12, seed=s).mask.copy() for s in range(4)]
    masks[1][[0, 4, 5]] = False                             # empty rounds in one run only
    masks[3][:] = True
    algs = [algorithms.get("fedavg", eta_l=e, eta_g=g, local_steps=3)
            for e, g in ((0.1, 1.0), (0.3, 0.5), (0.05, 1.5), (0.1, 1.0))]
    seeds = [0, 7, 0, 99]
    alone = [algorithms.run(a, prob, m, seed=s) for a, m, s in zip(algs, masks, seeds)]
    batch = algorithms.run_batch(algs, prob, masks, seeds)
    assert all(a.same_as(b) for a, b in zip(alone, batch))
    assert alone[0].accuracy is not None and not alone[0].same_as(alone[2])


# -- Logistic: constants ------------------------------------------------------------------
@pytest.mark.parametrize("n_classes", [3, 2])
def test_logistic_L_bounds_the_hessian(n_classes):
    prob = small_logistic(n_classes=n_classes)
    L_i = prob.smoothness()
    points = [prob.x0, torch.from_numpy(prob.solve()[0])]
    points += [3 * torch.randn(prob.dim, generator=torch.Generator().manual_seed(k), dtype=torch.float64) for k in range(3)]
    worst = np.zeros(prob.n_clients)
    for x in points:
        for i in range(prob.n_clients):
            H = hessian(lambda z: client_loss_reference(prob, z, i), x)
            worst[i] = max(worst[i], torch.linalg.eigvalsh(H)[-1].item())
    assert (worst <= L_i + 1e-12).all()
    assert (worst >= prob.reg).all() and prob.constants().L == L_i.max()


def test_logistic_f_star_matches_newton():
    prob = small_logistic(reg=0.02)
    x_star, f_star, gnorm = prob.solve()
    assert gnorm < 1e-10
    z = torch.randn(prob.dim, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    f = lambda w: client_losses_reference(prob, w).mean()
    for _ in range(30):  # damped Newton from another start, autograd derivatives
        g = torch.func.grad(f)(z)
        if g.norm() < 1e-13:
            break
        step = torch.linalg.solve(hessian(f, z), g)
        t = 1.0
        while f(z - t * step) > f(z) - 0.25 * t * (g @ step):
            t /= 2
        z = z - t * step
    assert client_losses_reference(prob, z).mean().item() == pytest.approx(f_star, abs=1e-13)
    np.testing.assert_allclose(x_star, z.numpy(), atol=1e-8)
    assert prob.full_grad(torch.from_numpy(x_star)).norm() < 1e-10


def test_logistic_constants_follow_their_definitions():
    prob = small_logistic()
    c = prob.constants()
    x0, xs = prob.x0, torch.from_numpy(prob.solve()[0])
    assert c.F0 == pytest.approx(prob.client_grads(x0).pow(2).sum(1).mean().item(), rel=1e-14)
    assert c.delta_f == pytest.approx(prob.loss(x0).item() - c.f_star, rel=1e-14)
    assert c.f_star <= prob.loss(x0).item() and c.delta_f > 0
    assert c.sigma2 == max(prob.gradient_variance(x0).max().item(), prob.gradient_variance(xs).max().item())
    assert c.exact == {"L", "f_star", "delta_f", "F0"}
    assert "not a sup" in c.notes["sigma2"]


@pytest.mark.slow
def test_logistic_digits_end_to_end():
    prob = Logistic.digits(n_clients=5, alpha=0.3, reg=1e-2, batch_size=8, seed=0)
    assert prob.n_clients == 5 and prob.dim == 65 * 10 and prob.data.sizes.min() >= 10
    c = prob.constants()
    assert prob.solve()[2] < 1e-10 and 0 < c.f_star < c.f_star + c.delta_f == pytest.approx(np.log(10))
    assert prob.accuracy(torch.from_numpy(prob.solve()[0])) > 0.9


# -- Classifier --------------------------------------------------------------------------
def reference_mlp(prob: Classifier, x: torch.Tensor) -> torch.nn.Module:
    act = torch.nn.Tanh() if prob.activation == "tanh" else torch.nn.ReLU()
    net = torch.nn.Sequential(torch.nn.Linear(prob.data.n_features, prob.hidden), act,
                              torch.nn.Linear(prob.hidden, prob.n_classes)).double()
    torch.nn.utils.vector_to_parameters(x, net.parameters())
    return net


def manual_mlp_loss(prob, z, A, y):
    """f_i by hand from the flat vector (W1, b1, W2, b2 in nn.Linear layout)."""
    p, h, c = prob.data.n_features, prob.hidden, prob.n_classes
    W1, b1, W2, b2 = torch.split(z, [h * p, h, c * h, c])
    act = torch.tanh if prob.activation == "tanh" else torch.relu
    logits = act(A @ W1.view(h, p).T + b1) @ W2.view(c, h).T + b2
    return F.cross_entropy(logits, y) + 0.5 * prob.reg * z @ z


def reference_grad(prob, x, A, y):
    net = reference_mlp(prob, x.clone())
    loss = F.cross_entropy(net(A), y) + 0.5 * prob.reg * sum((p * p).sum() for p in net.parameters())
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(net.parameters()))]), loss.detach()


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_classifier_vmap_equals_per_model_loop(activation):
    prob = small_classifier(activation)
    d = prob.data
    gen = torch.Generator().manual_seed(1)
    X = prob.x0 + 0.3 * torch.randn(6, prob.dim, generator=gen, dtype=torch.float64)
    clients = torch.tensor([4, 0, 2, 2, 1, 3])
    loop, losses = zip(*(reference_grad(prob, X[j], torch.as_tensor(d.features[d.owner == c]),
                                        torch.as_tensor(d.labels[d.owner == c])) for j, c in enumerate(clients.tolist())))
    torch.testing.assert_close(prob.grads_at(X, clients), torch.stack(loop), rtol=1e-10, atol=1e-12)
    every = [reference_grad(prob, X[0], torch.as_tensor(d.features[d.owner == i]), torch.as_tensor(d.labels[d.owner == i]))
             for i in range(prob.n_clients)]
    torch.testing.assert_close(prob.client_grads(X[0]), torch.stack([g for g, _ in every]), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(prob.loss(X[0]), torch.stack([f for _, f in every]).mean(), rtol=1e-12, atol=1e-12)
    # stochastic: positions ⌊u·n_i⌋ from the draws' uniforms, looped model by model
    draws = NoiseStream(8).draws(0, 0, clients)
    u = draws.uniform(prob.batch_size)
    stoch = prob.stochastic_grads(X, clients, draws)
    for j, c in enumerate(clients.tolist()):
        pos = (u[j] * int(d.sizes[c])).floor().long()
        g, _ = reference_grad(prob, X[j], d.X[c, pos], d.y[c, pos])
        torch.testing.assert_close(stoch[j], g, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_classifier_variance_matches_monte_carlo():
    prob = small_classifier(batch_size=2)
    x = prob.x0
    X, everyone = x.expand(prob.n_clients, -1), torch.arange(prob.n_clients)
    noise = NoiseStream(6)
    draws = torch.stack([prob.stochastic_grads(X, everyone, noise.draws(k, 0, everyone)) for k in range(2000)])
    sq = ((draws - prob.client_grads(x)) ** 2).sum(-1)
    assert ((sq.mean(0) - prob.gradient_variance(x)).abs() <= 5 * sq.std(0) / np.sqrt(sq.shape[0])).all()


@pytest.mark.slow
def test_classifier_constants_are_marked_estimated():
    prob = small_classifier()
    c = prob.constants(power_iters=60, fstar_iters=100)
    assert c.exact == {"F0"}
    assert all("estimated" in c.notes[k] for k in ("L", "sigma2", "f_star", "delta_f"))
    x0 = prob.x0
    assert c.F0 == pytest.approx(prob.client_grads(x0).pow(2).sum(1).mean().item(), rel=1e-12)
    assert 0 <= c.f_star < prob.loss(x0).item() and c.delta_f == pytest.approx(prob.loss(x0).item() - c.f_star)
    # power iteration against the largest |eigenvalue| of each client's Hessian at x0
    d = prob.data
    top = []
    for i in range(prob.n_clients):
        A, y = torch.as_tensor(d.features[d.owner == i]), torch.as_tensor(d.labels[d.owner == i])
        H = hessian(lambda z: manual_mlp_loss(prob, z, A, y), x0)
        top.append(torch.linalg.eigvalsh(H).abs().max().item())
    est = prob.hessian_norms(x0, iters=200)
    np.testing.assert_allclose(est.numpy(), top, rtol=1e-3)
    assert c.L >= max(top) * (1 - 1e-2)


def test_classifier_digits_and_dtype():
    prob = Classifier.digits(n_clients=4, alpha=1.0, hidden=8, batch_size=4, seed=0)
    assert prob.dim == 64 * 8 + 8 + 8 * 10 + 10
    low = prob.to(dtype=torch.float32)
    g64, g32 = prob.client_grads(prob.x0), low.client_grads(low.x0)
    assert g32.dtype == torch.float32
    torch.testing.assert_close(g32.double(), g64, rtol=1e-4, atol=1e-5)
    assert 0 <= prob.accuracy(prob.x0) <= 1


# -- validation -----------------------------------------------------------------------------
@pytest.mark.parametrize("call,name", [
    (lambda: dirichlet_partition([0, 1, 1], 2, 0.0), "alpha"),
    (lambda: dirichlet_partition([0, 1, 1], 2, float("nan")), "alpha"),
    (lambda: dirichlet_partition([0, 1, 1], 0, 1.0), "n_clients"),
    (lambda: dirichlet_partition([0, 1, 1], 2, 1.0, min_size=2), "min_size"),
    (lambda: dirichlet_partition([0.5, 1.0], 2, 1.0), "labels"),
    (lambda: synthetic_classification(10, 0, 2), "dim"),
    (lambda: synthetic_classification(10, 2, 1), "n_classes"),
    (lambda: Logistic([np.ones((3, 2))], [np.array([0, 1, 0])], reg=-1.0), "reg"),
    (lambda: Logistic([np.ones((3, 2))], [np.array([0, 1, 0])], batch_size=0), "batch_size"),
    (lambda: Logistic([np.ones((3, 2))], [np.array([0, 1])]), "labels_per_client[0]"),
    (lambda: Logistic([np.ones((3, 2))], [np.array([0, 1, 5])], n_classes=3), "n_classes"),
    (lambda: Logistic([np.ones((3, 2)), np.ones((2, 3))], [[0, 1, 0], [1, 0]]), "features_per_client[1]"),
    (lambda: Logistic([np.full((3, 2), np.inf)], [[0, 1, 0]]), "features_per_client[0]"),
    (lambda: Logistic([], []), "features_per_client"),
    (lambda: Classifier([np.ones((3, 2))], [[0, 1, 0]], hidden=0), "hidden"),
    (lambda: Classifier([np.ones((3, 2))], [[0, 1, 0]], activation="gelu"), "activation"),
])
def test_bad_input_raises_value_error_naming_it(call, name):
    with pytest.raises(ValueError, match=name.replace("[", r"\[").replace("]", r"\]")):
        call()


@pytest.mark.parametrize("make", [small_logistic, small_classifier])
def test_bad_points_and_clients_raise(make):
    prob = make()
    X = prob.x0.expand(2, -1)
    draws = NoiseStream(0).draws(0, 0, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="x must"):
        prob.loss(torch.zeros(prob.dim + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="X must"):
        prob.grads_at(prob.x0, torch.tensor([0]))
    with pytest.raises(ValueError, match="clients"):
        prob.grads_at(X, torch.tensor([0, prob.n_clients]))
    with pytest.raises(ValueError, match="clients"):
        prob.stochastic_grads(X, torch.tensor([0]), draws)
    with pytest.raises(ValueError, match="draws must be"):
        prob.stochastic_grads(X, torch.tensor([0, 1]), torch.Generator())
    with pytest.raises(ValueError, match="draws has 2 rows but clients has 1"):
        prob.stochastic_grads(X[:1], torch.tensor([0]), draws)
