"""Per-client copies of a network run as one grouped network equal vmap over functional_call."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from algorithms.noise import NoiseStream
from algorithms.problems import Classifier, grouped, models

NETWORKS = {
    "mnist-cnn": (lambda: models.fedsum_cnn("mnist", image_size=(8, 8)), (1, 8, 8)),
    "cifar-cnn": (lambda: models.fedsum_cnn("cifar10", image_size=(8, 8)), (3, 8, 8)),
    "digits-cnn": (lambda: models.digits_cnn(), (1, 8, 8)),
    "mlp-tanh": (lambda: models.mlp(12, 7, 5, "tanh"), None),
    "mlp-relu": (lambda: models.mlp(12, 7, 5, "relu"), None),
    "avgpool-sigmoid": (lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.Sigmoid(), nn.AvgPool2d(2),
                                               nn.Flatten(), nn.Linear(12, 4)), (2, 4, 4)),
}


def _flat_setup(name, m=3, batch=4, seed=0):
    build, shape = NETWORKS[name]
    net = build().double().eval()
    shapes = [tuple(p.shape) for p in net.parameters()]
    d = sum(math.prod(s) for s in shapes)
    gen = torch.Generator().manual_seed(seed)
    X = 0.3 * torch.randn(m, d, generator=gen, dtype=torch.float64)
    features = math.prod(shape) if shape else net[0].in_features
    A = torch.randn(m, batch, features, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (m, batch), generator=gen)
    return net, shapes, X, A, y, shape


def _per_copy_loss(net, shapes, shape):
    names = [n for n, _ in net.named_parameters()]
    sizes = [math.prod(s) for s in shapes]

    def loss(x, a, labels):
        params = {n: t.view(s) for n, t, s in zip(names, torch.split(x, sizes), shapes)}
        z = functional_call(net, params, (a if shape is None else a.unflatten(-1, shape),))
        return (torch.logsumexp(z, -1) - z.gather(-1, labels[:, None])[:, 0]).sum()

    return loss


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("avgpool-sigmoid", "cifar-cnn") else n
                                  for n in sorted(NETWORKS)])
def test_grouped_logits_and_gradients_equal_vmap(name):
    net, shapes, X, A, y, shape = _flat_setup(name)
    assert grouped.supports(net)
    Z = grouped.grouped_logits(net, shapes, X, A, shape)
    names = [n for n, _ in net.named_parameters()]
    sizes = [math.prod(s) for s in shapes]

    def logits(x, a):
        params = {n: t.view(s) for n, t, s in zip(names, torch.split(x, sizes), shapes)}
        return functional_call(net, params, (a if shape is None else a.unflatten(-1, shape),))

    # equal up to float64 rounding, which depends on the CPU's kernels (their summation order): at most
    # 10^−13 of the largest magnitude (the CIFAR CNN's gradients reach 600 and differed by 5·10^−12 on one
    # machine, by 0 on another)
    expected = vmap(logits)(X, A)
    assert torch.allclose(Z, expected, rtol=0, atol=1e-13 * float(expected.abs().max()))
    Xg = X.clone().requires_grad_()
    Zg = grouped.grouped_logits(net, shapes, Xg, A, shape)
    ce = torch.logsumexp(Zg, -1) - Zg.gather(-1, y[..., None])[..., 0]
    G, = torch.autograd.grad(ce.sum(), Xg)
    expected = vmap(grad(_per_copy_loss(net, shapes, shape)))(X, A, y)
    assert torch.allclose(G, expected, rtol=0, atol=1e-13 * float(expected.abs().max()))


@pytest.mark.parametrize("net", [
    nn.Sequential(nn.Linear(3, 2)).train(),                                      # training mode (dropout would act)
    nn.Sequential(nn.Conv2d(2, 2, 3, groups=2), nn.Flatten()).eval(),            # already grouped
    nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten()).eval(),   # statistics shared across samples
    nn.Sequential(nn.Linear(3, 2, bias=False)).eval(),                           # a parameter layout it does not know
    nn.Sequential(nn.Flatten(0)).eval(),
    nn.Linear(3, 2).eval(),                                                      # not a Sequential
])
def test_networks_it_cannot_run_are_refused(net):
    assert not grouped.supports(net)


def _classifier(model, batch=6):
    from algorithms.data import load

    X, y = load("digits", None, "train", limit=160)
    if model == "mlp":
        return Classifier.from_arrays(X.reshape(len(y), -1), y, 5, 0.3, model="mlp", seed=0, batch_size=batch,
                                      dtype=torch.float64)
    return Classifier.from_arrays(X, y, 5, 0.3, model="cnn", dataset="digits", seed=0, batch_size=batch,
                                  dtype=torch.float64)


@pytest.mark.parametrize("model, batch", [("cnn", 6), ("mlp", 6), ("cnn", 40), ("mlp", 40)])
def test_classifier_local_gradients_do_not_depend_on_the_path(model, batch):
    """The grouped network (in passes over a mini-batch of 40) against vmap over the clients."""
    problem = _classifier(model, batch)
    assert problem._grouped
    X = problem.x0 + 0.05 * torch.randn(3, problem.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    clients = torch.tensor([0, 2, 4])
    fast = problem.stochastic_grads(X, clients, NoiseStream(7).draws(0, 0, clients))
    problem._grouped = False
    slow = problem.stochastic_grads(X, clients, NoiseStream(7).draws(0, 0, clients))
    assert torch.allclose(fast, slow, rtol=0, atol=1e-12)


@pytest.mark.parametrize("model", ["cnn", "mlp"])
def test_pooled_loss_and_gradient_follow_the_definition(model):
    """f = (1/N) Σ_i (1/n_i) Σ_j CE_j, written as a loop over clients and their samples with
    the network as a plain module, against the pooled one-pass form."""
    problem = _classifier(model)
    x = problem.x0 + 0.01
    net = models.digits_cnn() if model == "cnn" else models.mlp(64, problem.hidden, 10, problem.activation)
    net = net.double().eval()
    torch.nn.utils.vector_to_parameters(x.clone(), net.parameters())
    d = problem.data
    per_client = []
    for i in range(problem.n_clients):
        rows = np.flatnonzero(d.owner == i)
        A = torch.as_tensor(d.features[rows], dtype=torch.float64)
        A = A.reshape(-1, 1, 8, 8) if model == "cnn" else A
        per_client.append(nn.functional.cross_entropy(net(A), torch.as_tensor(d.labels[rows])))
    f = torch.stack(per_client).mean()
    g = torch.autograd.grad(f, list(net.parameters()))
    assert float(problem.loss(x)) == pytest.approx(float(f.detach()), rel=1e-13)
    assert torch.allclose(problem.full_grad(x), torch.cat([t.reshape(-1) for t in g]), rtol=0, atol=1e-13)
