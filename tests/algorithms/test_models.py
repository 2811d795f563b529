"""The FedSUM Table 2 CNNs and the CNN ``Classifier``: parameter counts worked out by hand
from the table, vmapped gradients against a per-model loop over a plain ``nn.Module``,
noise that does not depend on the requested subset, held-out accuracy, a short FedAvg run
and the labelling of the estimated constants."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import algorithms
from algorithms.noise import NoiseStream
from algorithms.problems import Classifier, models
from participation import Trace

# FedSUM Table 2 (App. H), by hand: a 3×3 conv C(i,o) has 9·i·o + o
# parameters, L(n) after m inputs m·n + n; padded convs keep H×W and two pools divide it by 4.
TABLE_2_COUNTS = {
    "mnist": (9 * 1 * 10 + 10) + (9 * 10 * 20 + 20) + (20 * 7 * 7 * 50 + 50) + (50 * 10 + 10),
    "svhn": (9 * 3 * 32 + 32) + (9 * 32 * 32 + 32) + (32 * 8 * 8 * 128 + 128) + (128 * 10 + 10),
    "cifar10": (9 * 3 * 32 + 32) + (9 * 32 * 32 + 32) + (32 * 8 * 8 * 256 + 256) + (256 * 64 + 64) + (64 * 10 + 10),
}
DIGITS_COUNT = (9 * 1 * 8 + 8) + (9 * 8 * 16 + 16) + (16 * 2 * 2 * 32 + 32) + (32 * 10 + 10)


def n_params(net: torch.nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


@pytest.mark.parametrize("dataset", ["mnist", "svhn", "cifar10"])
def test_table2_networks_have_the_table_parameter_counts(dataset):
    net = models.fedsum_cnn(dataset)
    assert n_params(net) == TABLE_2_COUNTS[dataset]
    assert net(torch.randn(2, *models.IMAGE_SHAPES[dataset])).shape == (2, 10)
    assert not list(net.buffers())                                    # no batch-norm statistics
    dropouts = [m.p for m in net.modules() if isinstance(m, torch.nn.Dropout)]
    assert dropouts == ([0.2, 0.2] if dataset == "mnist" else [])     # D only in the MNIST net


def test_digits_cnn_and_classifier_dim():
    assert n_params(models.digits_cnn()) == DIGITS_COUNT == 3658
    assert models.digits_cnn()(torch.randn(3, 1, 8, 8)).shape == (3, 10)
    X = np.random.default_rng(0).random((6, 1, 28, 28))
    prob = Classifier([X[:3], X[3:]], [[0, 1, 2], [3, 4, 9]], model="cnn", n_classes=10)
    assert (prob.dataset, prob.image_shape, prob.dim) == ("mnist", (1, 28, 28), TABLE_2_COUNTS["mnist"])


# -- the CNN classifier against a per-model loop ---------------------------------------------------
def tiny_problem(dataset="digits", shape=(1, 8, 8), reg=0.01, chunk_size=3, test=False, test_labels=None, **kw):
    rng = np.random.default_rng(3)
    sizes = [5, 7, 3, 6]
    feats = [rng.random((n, *shape)) for n in sizes]
    labels = [rng.integers(0, 3, n) for n in sizes]
    extra = {}
    if test:
        extra = dict(test_features=rng.random((9, *shape)),
                     test_labels=rng.integers(0, 3, 9) if test_labels is None else test_labels)
    return Classifier(feats, labels, reg=reg, batch_size=4, n_classes=3, model="cnn", dataset=dataset,
                      chunk_size=chunk_size, **extra, **kw)


def reference_net(prob: Classifier, x: torch.Tensor) -> torch.nn.Module:
    """A real nn.Module (eval mode, float64) holding the parameters x."""
    net = models.cnn(prob.dataset, prob.image_shape, prob.n_classes).double().eval()
    torch.nn.utils.vector_to_parameters(x.clone(), net.parameters())
    return net


def reference_grad(prob, x, A, y):
    """∇ of CE + (reg/2)‖x‖² by autograd on the plain module; A are rows, viewed as images."""
    net = reference_net(prob, x)
    loss = F.cross_entropy(net(A.reshape(-1, *prob.image_shape)), y)
    loss = loss + 0.5 * prob.reg * sum((p * p).sum() for p in net.parameters())
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(net.parameters()))]), loss.detach()


def client_rows(prob, i):
    d = prob.data
    return torch.as_tensor(d.features[d.owner == i]), torch.as_tensor(d.labels[d.owner == i])


@pytest.mark.parametrize("dataset,shape", [("digits", (1, 8, 8)), ("mnist", (1, 8, 8)),
                                           ("svhn", (3, 4, 4)), ("cifar10", (3, 4, 4))])
def test_cnn_vmap_equals_per_model_loop(dataset, shape):
    prob = tiny_problem(dataset, shape)
    gen = torch.Generator().manual_seed(1)
    X = prob.x0 + 0.1 * torch.randn(5, prob.dim, generator=gen, dtype=torch.float64)
    clients = torch.tensor([3, 0, 2, 2, 1])
    loop = [reference_grad(prob, X[j], *client_rows(prob, c))[0] for j, c in enumerate(clients.tolist())]
    torch.testing.assert_close(prob.grads_at(X, clients), torch.stack(loop), rtol=1e-10, atol=1e-12)
    every = [reference_grad(prob, X[0], *client_rows(prob, i)) for i in range(prob.n_clients)]
    torch.testing.assert_close(prob.client_grads(X[0]), torch.stack([g for g, _ in every]), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(prob.loss(X[0]), torch.stack([f for _, f in every]).mean(), rtol=1e-12, atol=1e-12)
    # stochastic: mini-batch positions ⌊u·n_i⌋ from the draws' uniforms, looped model by model
    d = prob.data
    draws = NoiseStream(8).draws(0, 0, clients)
    u = draws.uniform(prob.batch_size)
    stoch = prob.stochastic_grads(X, clients, draws)
    for j, c in enumerate(clients.tolist()):
        pos = (u[j] * int(d.sizes[c])).floor().long()
        g, _ = reference_grad(prob, X[j], d.X[c, pos], d.y[c, pos])
        torch.testing.assert_close(stoch[j], g, rtol=1e-10, atol=1e-12)


def test_chunking_does_not_change_the_values():
    whole, chunked = tiny_problem(chunk_size=1000), tiny_problem(chunk_size=2)
    x = whole.x0
    torch.testing.assert_close(chunked.client_grads(x), whole.client_grads(x), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(chunked.hessian_norms(x, 5), whole.hessian_norms(x, 5), rtol=1e-10, atol=1e-12)


def test_stochastic_grads_of_a_subset_are_rows_of_the_full_request():
    prob = tiny_problem()
    X = prob.x0 + 0.1 * torch.randn(prob.n_clients, prob.dim, generator=torch.Generator().manual_seed(2),
                                     dtype=torch.float64)
    everyone = torch.arange(prob.n_clients)
    noise = NoiseStream(5)
    full = prob.stochastic_grads(X, everyone, noise.draws(3, 0, everyone))
    subset = torch.tensor([3, 1])
    part = prob.stochastic_grads(X[subset], subset, noise.draws(3, 0, subset))
    torch.testing.assert_close(part, full[subset], rtol=1e-12, atol=1e-14)


# -- held-out accuracy --------------------------------------------------------------------------------
def test_accuracy_uses_the_held_out_split():
    prob = tiny_problem(test=True)
    x = prob.x0
    A, _ = prob._test
    pred = reference_net(prob, x)(A.reshape(-1, *prob.image_shape)).argmax(-1).numpy()
    assert tiny_problem(test=True, test_labels=pred).accuracy(x) == 1.0
    assert tiny_problem(test=True, test_labels=(pred + 1) % 3).accuracy(x) == 0.0
    # without a test split: the training samples, each once
    train = tiny_problem()
    d = train.data
    train_pred = reference_net(train, x)(torch.as_tensor(d.features).reshape(-1, 1, 8, 8)).argmax(-1).numpy()
    assert train.accuracy(x) == pytest.approx(np.mean(train_pred == d.labels), abs=1e-15)
    low = tiny_problem(test=True, test_labels=pred).to(dtype=torch.float32)
    assert low._test[0].dtype == torch.float32 and low.accuracy(low.x0) == 1.0


@pytest.mark.slow
def test_fedavg_reduces_the_loss_on_a_tiny_digits_cnn():
    prob = Classifier.digits(n_clients=4, alpha=1.0, batch_size=16, seed=0, model="cnn", test_fraction=0.25)
    assert prob.dataset == "digits" and prob.dim == DIGITS_COUNT and prob._test[1].shape[0] == 450
    trace = Trace(np.ones((10, 4), dtype=bool))
    hist = algorithms.run(algorithms.get("fedavg", eta_l=0.2, local_steps=5), prob, trace, seed=0)
    assert hist.stopped is None and len(hist) == 10
    assert hist.loss[-1] < hist.loss[0] - 0.02 and np.all(np.diff(hist.loss) < 0)
    assert hist.accuracy[0] == prob.accuracy(prob.x0)          # History records held-out accuracy
    assert hist.accuracy[-1] > hist.accuracy[0]


# -- constants and validation ---------------------------------------------------------------------
@pytest.mark.slow
def test_cnn_constants_are_cheap_estimates_and_marked_so():
    prob = tiny_problem()
    c = prob.constants()
    assert c.exact == {"F0"}
    assert all("estimated" in c.notes[k] for k in ("L", "sigma2", "f_star", "delta_f"))
    f0 = prob.loss(prob.x0).item()
    assert c.f_star == 0.0 and c.delta_f == pytest.approx(f0)          # default: no f* search for CNNs
    assert c.F0 == pytest.approx(prob.client_grads(prob.x0).pow(2).sum(1).mean().item(), rel=1e-12)
    assert c.L > 0 and c.sigma2 > 0
    searched = prob.constants(power_iters=3, fstar_iters=5, max_samples=2)
    assert 0 <= searched.f_star < f0 and "≤ 2 samples per client" in searched.notes["L"]
    assert prob.subsample(2).sizes.tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("kw,name", [
    (dict(model="rnn"), "model"),
    (dict(dataset="imagenet"), "dataset"),
    (dict(image_shape=(1, 4, 4)), "image_shape"),
    (dict(chunk_size=0), "chunk_size"),
    (dict(test_features=np.zeros((2, 3, 8, 8)), test_labels=[0, 1]), "test_features"),
    (dict(test_features=np.zeros((2, 1, 8, 8)), test_labels=[0, 3]), "test_labels"),
    (dict(test_features=np.zeros((2, 1, 8, 8))), "test_labels"),
])
def test_bad_cnn_input_raises_value_error_naming_it(kw, name):
    args = dict(model="cnn", dataset="digits", n_classes=3)
    with pytest.raises(ValueError, match=name):
        Classifier([np.zeros((2, 1, 8, 8))], [[0, 1]], **{**args, **kw})


def test_ambiguous_image_shape_needs_a_dataset():
    with pytest.raises(ValueError, match="dataset"):
        Classifier([np.zeros((2, 3, 32, 32))], [[0, 1]], model="cnn")
    with pytest.raises(ValueError, match="dataset"):
        models.fedsum_cnn("digits")
