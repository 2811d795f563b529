"""verify.records.model_measures against fedverify's own problems (Logistic, Classifier: their full_grad,
client_grads, client_losses), least squares in closed form (∇f_i = X_iᵀ(X_i w − y_i)/n_i), and a
hand-written FedAvg loop checked against the engine's final and averaged iterates."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import algorithms
from algorithms.problems import Classifier, Logistic, Quadratic, models
from participation.patterns import Uniform
from verify.records.model_measures import ModelMeasure, StepWeightedAverage

TOL = 1e-10


def _data(n_clients=4, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 9, n_clients)
    return [(torch.as_tensor(rng.normal(size=(m, dim))), torch.as_tensor(rng.normal(size=(m, 1)))) for m in sizes]


def _model(dim=3, seed=1):
    torch.manual_seed(seed)
    return torch.nn.Linear(dim, 1, bias=False, dtype=torch.float64)


def half_mse(out, y):
    return 0.5 * ((out - y) ** 2).mean()


def _reference(data, w):
    """f_i and ∇f_i of ½ mean (X_i w − y_i)² in closed form."""
    losses = np.array([0.5 * np.mean((X.numpy() @ w - y.numpy()[:, 0]) ** 2) for X, y in data])
    grads = np.stack([X.numpy().T @ (X.numpy() @ w - y.numpy()[:, 0]) / len(X) for X, y in data])
    return losses, grads


def _expected(grads, losses, w=None):
    """The four measures from per-client gradients and losses, written out per client."""
    n = len(grads)
    w = np.full(n, 1 / n) if w is None else w
    mean = sum(w[i] * grads[i] for i in range(n))
    spread = [float(np.sum((grads[i] - mean) ** 2)) for i in range(n)]
    return {"grad_norm2": float(np.sum(mean ** 2)), "loss": float(sum(w[i] * losses[i] for i in range(n))),
            "heterogeneity": sum(w[i] * spread[i] for i in range(n)), "heterogeneity_max": max(spread)}


def _assert_close(got: dict, want: dict, rel=TOL):
    assert set(got) == set(want) and all(isinstance(v, float) for v in got.values())
    for name in want:
        assert got[name] == pytest.approx(want[name], rel=rel, abs=1e-14), name


def _in_batches(X, y, size):
    return [(X[i:i + size], y[i:i + size]) for i in range(0, len(X), size)]


class _Softmax(torch.nn.Module):
    """Logits a W, W ∈ R^{p×C}: Logistic's x = vec(W) row-major."""

    def __init__(self, W):
        super().__init__()
        self.W = torch.nn.Parameter(torch.as_tensor(W, dtype=torch.float64).clone())

    def forward(self, a):
        return a @ self.W


def test_measures_equal_logistic_regressions_own_gradients():
    """Logistic (3 classes, intercept, reg): f_i = mean cross-entropy + (reg/2)‖x‖² per client."""
    rng = np.random.default_rng(4)
    sizes, p, C, reg = [7, 12, 5, 9, 16], 4, 3, 0.05
    feats = [rng.normal(size=(n, p)) for n in sizes]
    labels = [rng.integers(0, C, n) for n in sizes]
    problem = Logistic(feats, labels, reg=reg, n_classes=C, intercept=True)
    x = torch.as_tensor(rng.normal(size=problem.dim) * 0.3)
    model = _Softmax(x.view(p + 1, C))

    def loss_fn(out, y):
        return F.cross_entropy(out, y) + 0.5 * reg * model.W.square().sum()

    rows = [torch.as_tensor(np.hstack([a, np.ones((len(a), 1))])) for a in feats]
    data = [(A, torch.as_tensor(y)) for A, y in zip(rows, labels)]
    data[1] = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data[1]), batch_size=5)   # 5, 5, 2
    data[4] = _in_batches(*data[4], 3)
    measure = ModelMeasure(data, loss_fn)
    want = _expected(problem.client_grads(x).numpy(), problem.client_losses(x).numpy())
    _assert_close(measure.measure(model), want)
    assert measure.measure(model)["grad_norm2"] == pytest.approx(float(problem.full_grad(x).square().sum()), rel=TOL)
    assert measure.measure(model)["loss"] == pytest.approx(float(problem.loss(x)), rel=TOL)
    np.testing.assert_allclose(measure.client_losses(model), problem.client_losses(x).numpy(), rtol=TOL)
    _, grads = measure.losses_and_grads(model)
    np.testing.assert_allclose(grads, problem.client_grads(x).numpy(), rtol=TOL, atol=1e-14)


def test_measures_equal_the_mlp_classifiers_own_gradients():
    """Classifier (tanh MLP, reg): the same network from ``models.mlp`` loaded with x."""
    rng = np.random.default_rng(5)
    sizes, p, C, reg = [6, 11, 8], 5, 4, 0.01
    feats = [rng.normal(size=(n, p)) for n in sizes]
    labels = [rng.integers(0, C, n) for n in sizes]
    problem = Classifier(feats, labels, hidden=7, activation="tanh", reg=reg, n_classes=C, init_seed=3)
    x = problem.x0
    net = models.mlp(p, 7, C, "tanh").to(torch.float64)
    net.load_state_dict(problem.unflatten(x))

    def loss_fn(out, y):
        return F.cross_entropy(out, y) + 0.5 * reg * sum(w.square().sum() for w in net.parameters())

    data = [_in_batches(torch.as_tensor(a), torch.as_tensor(y), 4) for a, y in zip(feats, labels)]
    measure = ModelMeasure(data, loss_fn)
    losses = measure.client_losses(net)
    grads = problem.client_grads(x).numpy()
    _assert_close(measure.measure(net), _expected(grads, losses))
    assert measure.measure(net)["grad_norm2"] == pytest.approx(float(problem.full_grad(x).square().sum()), rel=TOL)
    assert losses.mean() == pytest.approx(float(problem.loss(x)), rel=TOL)


def test_measures_equal_the_least_squares_closed_form_whatever_the_batching():
    data, model = _data(), _model()
    losses, grads = _reference(data, model.weight.detach().numpy()[0].copy())
    want = _expected(grads, losses)
    _assert_close(ModelMeasure(data, half_mse).measure(model), want)
    batched = ModelMeasure([_in_batches(X, y, 2) for X, y in data], half_mse)
    _assert_close(batched.measure(model), want)
    np.testing.assert_allclose(batched.client_losses(model), losses, rtol=TOL)
    once = ModelMeasure([iter(_in_batches(X, y, 3)) for X, y in data], half_mse)        # one-pass iterators
    _assert_close(once.measure(model), want)
    _assert_close(once.measure(model), want)


def test_weights_give_the_weighted_objective():
    data, model = _data(), _model()
    w = np.array([0.1, 0.2, 0.3, 0.4])
    losses, grads = _reference(data, model.weight.detach().numpy()[0])
    _assert_close(ModelMeasure(data, half_mse, weights=w).measure(model), _expected(grads, losses, w))


def test_the_model_is_left_unchanged():
    data = _data()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4, dtype=torch.float64), torch.nn.Dropout(0.5),
                                torch.nn.Linear(4, 1, dtype=torch.float64))
    model.train()
    model[1].eval()                                     # a submodule in its own mode
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    before = [p.detach().clone() for p in model.parameters()]
    measure = ModelMeasure(data, half_mse)
    first = measure.measure(model)
    with torch.no_grad():                               # gradients are taken even inside no_grad
        assert measure.measure(model) == first          # eval mode: dropout off, the same numbers
    assert model.training and model[0].training and not model[1].training
    for p, old in zip(model.parameters(), before):
        assert torch.equal(p, old) and torch.equal(p.grad, torch.ones_like(p))


class _Point(torch.nn.Module):
    def __init__(self, x):
        super().__init__()
        self.x = torch.nn.Parameter(torch.as_tensor(x, dtype=torch.float64).clone())


def test_a_hand_written_fedavg_loop_averages_as_the_engine_does():
    """FedAvg (K local gradient steps from x_t on each client of S_t, x ← x − η_g·mean Δ) written
    with torch.optim.SGD on f_i(x) = ½(x − b_i)ᵀA_i(x − b_i); the engine's averaged_params is
    Σ_t η_t x_t / Σ_t η_t with x_t the model round t starts from and η_t = η_l/√(t/10 + 1)."""
    N, d, K, T, eta_l, eta_g = 5, 3, 2, 12, 0.05, 0.8
    problem = Quadratic.random(N, d, seed=2)
    A, b = problem.A.numpy(), problem.b.numpy()
    trace = Uniform(N, 2).sample(T, seed=1)
    history = algorithms.run(algorithms.get("fedavg", eta_l=eta_l, eta_g=eta_g, local_steps=K), problem, trace,
                             seed=3, local_schedule="sqrt", observe=True)

    model = _Point(np.zeros(d))
    average = StepWeightedAverage()
    for t in range(T):
        eta = eta_l / np.sqrt(t / 10 + 1)
        average.add(model, eta)
        start = model.x.detach().clone()
        deltas = []
        for i in np.flatnonzero(trace.mask[t]):
            local = _Point(start)
            opt = torch.optim.SGD(local.parameters(), lr=eta)
            for _ in range(K):
                opt.zero_grad()
                D = local.x - torch.as_tensor(b[i])
                (0.5 * D @ torch.as_tensor(A[i]) @ D).backward()
                opt.step()
            deltas.append(start - local.x.detach())
        if deltas:
            with torch.no_grad():
                model.x -= eta_g * torch.stack(deltas).mean(dim=0)
    np.testing.assert_allclose(model.x.detach().numpy(), history.final_params, rtol=TOL, atol=1e-14)
    np.testing.assert_allclose(average.params, history.averaged_params, rtol=TOL, atol=1e-14)
    assert average.total_eta == pytest.approx(sum(eta_l / np.sqrt(t / 10 + 1) for t in range(T)), rel=1e-14)

    target = _Point(np.ones(d))
    with average.applied(target):
        np.testing.assert_allclose(target.x.detach().numpy(), history.averaged_params, rtol=TOL, atol=1e-14)
    assert torch.equal(target.x, torch.ones(d, dtype=torch.float64))
    np.testing.assert_allclose(average.apply_to(target).x.detach().numpy(), history.averaged_params, rtol=TOL)


def test_the_average_reads_a_module_a_vector_or_a_list_of_arrays_alike():
    """Flower hands parameters as a list of arrays; they flatten in ``model.parameters()`` order."""
    torch.manual_seed(2)
    net = torch.nn.Linear(3, 2, dtype=torch.float64)
    arrays = [p.detach().numpy().copy() for p in net.parameters()]
    by_module, by_list, by_vector = StepWeightedAverage(), StepWeightedAverage(), StepWeightedAverage()
    by_module.add(net, 0.5)
    by_list.add(arrays, 0.5)
    by_vector.add(torch.cat([p.detach().reshape(-1) for p in net.parameters()]), 0.5)
    by_module.add(np.zeros(8), 1.5)
    by_list.add([np.zeros((2, 3)), np.zeros(2)], 1.5)
    by_vector.add([0.0] * 8, 1.5)
    want = np.concatenate([a.reshape(-1) for a in arrays]) * 0.5 / 2.0
    for average in (by_module, by_list, by_vector):
        np.testing.assert_allclose(average.params, want, rtol=1e-15)
    float32 = torch.nn.Linear(3, 2)
    by_module.apply_to(float32)
    assert float32.weight.dtype == torch.float32
    np.testing.assert_allclose(float32.weight.detach().numpy(), want[:6].reshape(2, 3), rtol=1e-6)


def _scalar_free_loss(out, y):
    return (out - y) ** 2


@pytest.mark.parametrize("make, fragment", [
    (lambda: ModelMeasure([], half_mse), "N = 0"),
    (lambda: ModelMeasure(None, half_mse), "client_data must be a sequence"),
    (lambda: ModelMeasure(_data()[0], half_mse), "client_data must be a sequence"),
    (lambda: ModelMeasure([(torch.zeros(0, 3), torch.zeros(0, 1))], half_mse), "client 0 has no examples"),
    (lambda: ModelMeasure(_data()[:1] + [[]], half_mse), "client 1 has no examples"),
    (lambda: ModelMeasure(_data()[:1] + [torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.zeros(0, 3), torch.zeros(0, 1)))], half_mse), "client 1 has no examples"),
    (lambda: ModelMeasure([torch.utils.data.TensorDataset(*_data()[0])], half_mse), "DataLoader"),
    (lambda: ModelMeasure([[(torch.zeros(3, 3), torch.zeros(2, 1))]], half_mse), "2 targets"),
    (lambda: ModelMeasure([[(torch.zeros(3, 3),)]], half_mse), "pairs"),
    (lambda: ModelMeasure(_data(), "mse"), "loss_fn"),
    (lambda: ModelMeasure(_data(), half_mse, weights=[1, 2]), "weights"),
    (lambda: ModelMeasure(_data(), half_mse, weights=[1, 1, 1, 1]), "summing to 1"),
    (lambda: ModelMeasure(_data(), half_mse, weights=[0.5, 0.5, float("nan"), 0]), "weights"),
    (lambda: ModelMeasure(_data(), _scalar_free_loss).measure(_model()), "one-element tensor"),
    (lambda: ModelMeasure(_data(), half_mse).measure(torch.nn.ReLU()), "no trainable parameters"),
    (lambda: ModelMeasure(_data(), half_mse).client_losses("model"), "torch.nn.Module"),
    (lambda: StepWeightedAverage().add(np.zeros(3), 0.0), "eta"),
    (lambda: StepWeightedAverage().add(np.zeros(3), -0.1), "eta"),
    (lambda: StepWeightedAverage().add(np.zeros(3), float("nan")), "eta"),
    (lambda: StepWeightedAverage().add(np.zeros(3), float("inf")), "eta"),
    (lambda: StepWeightedAverage().add(np.zeros(3), True), "eta"),
    (lambda: StepWeightedAverage().add(np.zeros(0), 0.1), "empty"),
    (lambda: StepWeightedAverage().add(torch.nn.ReLU(), 0.1), "no trainable parameters"),
    (lambda: StepWeightedAverage().params, "no model"),
])
def test_bad_input_is_one_line_naming_it(make, fragment):
    with pytest.raises(ValueError, match=fragment) as err:
        make()
    assert "\n" not in str(err.value)


def test_a_model_of_another_size_is_refused():
    average = StepWeightedAverage()
    average.add(np.zeros(3), 0.1)
    with pytest.raises(ValueError, match="4 parameters, the average 3"):
        average.add(np.zeros(4), 0.1)
    with pytest.raises(ValueError, match="average has 3 parameters, the model 4"):
        average.apply_to(torch.nn.Linear(3, 1, dtype=torch.float64))
