"""verify.model_measures against closed forms: least squares on per-client data (∇f_i = X_iᵀ(X_i w −
y_i)/n_i) and fedverify's own averaged iterate."""
import numpy as np
import pytest
import torch

import algorithms
from algorithms.problems import Quadratic
from participation.patterns import Uniform
from verify.model_measures import ModelMeasure, StepWeightedAverage



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


def test_measures_equal_the_closed_form_whatever_the_batching():
    data, model = _data(), _model()
    w = model.weight.detach().numpy()[0].copy()
    losses, grads = _reference(data, w)
    mean = grads.mean(axis=0)
    spread = ((grads - mean) ** 2).sum(axis=1)
    whole = ModelMeasure(data, half_mse).measure(model)
    batched = ModelMeasure([[(X[i:i + 2], y[i:i + 2]) for i in range(0, len(X), 2)] for X, y in data], half_mse)
    for got in (whole, batched.measure(model)):
        assert got["grad_norm2"] == pytest.approx(mean @ mean, rel=1e-12)
        assert got["loss"] == pytest.approx(losses.mean(), rel=1e-12)
        assert got["heterogeneity"] == pytest.approx(spread.mean(), rel=1e-12)
        assert got["heterogeneity_max"] == pytest.approx(spread.max(), rel=1e-12)
    np.testing.assert_allclose(batched.client_losses(model), losses, rtol=1e-12)


def test_the_model_is_left_as_it_was():
    data, model = _data(), _model()
    model.train()
    model.weight.grad = torch.ones_like(model.weight)
    before = model.weight.detach().clone()
    ModelMeasure(data, half_mse).measure(model)
    assert model.training and torch.equal(model.weight, before) and torch.equal(model.weight.grad, torch.ones(1, 3))


def test_weights_give_the_weighted_objective():
    data, model = _data(), _model()
    w = np.array([0.1, 0.2, 0.3, 0.4])
    losses, grads = _reference(data, model.weight.detach().numpy()[0])
    got = ModelMeasure(data, half_mse, weights=w).measure(model)
    assert got["loss"] == pytest.approx(w @ losses, rel=1e-12)
    assert got["grad_norm2"] == pytest.approx(np.sum((w @ grads) ** 2), rel=1e-12)


class _Point(torch.nn.Module):
    def __init__(self, x):
        super().__init__()
        self.x = torch.nn.Parameter(torch.as_tensor(x, dtype=torch.float64).clone())


def test_the_step_weighted_average_is_the_engines():
    """w̄ = Σ_t η_t x_t / Σ_t η_t with x_t the model round t starts from (algorithms.run)."""
    problem = Quadratic.random(5, 3, seed=2, noise_std=0.1)
    trace = Uniform(5, 2).sample(12, seed=1)
    alg = algorithms.get("fedavg", eta_l=0.05, local_steps=2)
    history = algorithms.run(alg, problem, trace, seed=3, local_schedule="sqrt")
    states = list(algorithms.iterate(alg, problem, trace, seed=3, local_schedule="sqrt"))     # x_0, ..., x_T
    starts = [s.x.numpy() for s in states[:-1]]
    average = StepWeightedAverage()
    for t, x in enumerate(starts):
        factor = 1 / np.sqrt(t / 10 + 1)                 # FedSUM §5's schedule, as "sqrt" is documented
        average.add(_Point(x), 0.05 * factor)
    np.testing.assert_allclose(average.params, history.averaged_params, rtol=1e-12)
    model = _Point(np.zeros(3))
    with average.applied(model):
        np.testing.assert_allclose(model.x.detach().numpy(), history.averaged_params, rtol=1e-12)
    assert torch.equal(model.x, torch.zeros(3))


@pytest.mark.parametrize("make, fragment", [
    (lambda: ModelMeasure([], half_mse), "N = 0"),
    (lambda: ModelMeasure([(torch.zeros(0, 3), torch.zeros(0, 1))], half_mse), "client 0 has no examples"),
    (lambda: ModelMeasure(_data(), half_mse, weights=[1, 2]), "weights"),
    (lambda: StepWeightedAverage().add(np.zeros(3), 0.0), "eta"),
    (lambda: StepWeightedAverage().add(np.zeros(3), float("nan")), "eta"),
    (lambda: StepWeightedAverage().params, "no model"),
    (lambda: ModelMeasure(_data(), half_mse).measure(torch.nn.ReLU()), "no trainable parameters"),
])
def test_bad_input_is_one_line_naming_it(make, fragment):
    with pytest.raises(ValueError, match=fragment) as err:
        make()
    assert "\n" not in str(err.value)
