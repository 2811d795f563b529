"""A batch of runs is the runs alone: every registered algorithm gives bit-identical histories
in a batch (different seeds, traces and step sizes) and alone, whatever the batch size; a run
that diverges stops alone; mismatched batches are refused."""
import numpy as np
import pytest
import torch

import algorithms
from algorithms.problems import Quadratic
from participation import preset

#: Hyper-parameters each algorithm needs beyond the step sizes, for a small test.
EXTRA = {"cafed": {}, "logit": {}}


@pytest.fixture(scope="module")
def problem():
    return Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.4, seed=3)


@pytest.fixture(scope="module")
def masks():
    out = [preset("P2", n_clients=6, per_round=2).sample(25, seed=s).mask.copy() for s in range(4)]
    out[1][[0, 5, 6]] = False                     # empty rounds in one run only
    out[3][:] = True                              # full participation in another
    return out


def build(name, eta_l, eta_g):
    return algorithms.get(name, eta_l=eta_l, eta_g=eta_g, local_steps=2, **EXTRA.get(name, {}))


@pytest.mark.parametrize("name", algorithms.names())
def test_a_batch_equals_its_runs_alone(name, problem, masks):
    steps = [(0.05, 1.0), (0.1, 0.5), (0.02, 1.5), (0.05, 1.0)]
    algs = [build(name, *s) for s in steps]
    seeds = [4, 9, 4, 123]
    alone = [algorithms.run(a, problem, m, seed=s, observe=True) for a, m, s in zip(algs, masks, seeds)]
    batch = algorithms.run_batch(algs, problem, masks, seeds, observe=True)
    pair = algorithms.run_batch(algs[1:3], problem, masks[1:3], seeds[1:3], observe=True)
    for a, b in zip(alone, batch):
        assert a.same_as(b) and a.hparams == b.hparams and a.seed == b.seed
        assert np.array_equal(a.averaged_params, b.averaged_params)
        assert a.observed.keys() == b.observed.keys()
        for key in a.observed:
            x, y = a.observed[key], b.observed[key]
            if isinstance(x, tuple):                  # ragged per round (e.g. autonomous clients' delays)
                assert isinstance(y, tuple) and len(x) == len(y)
                assert all(np.array_equal(u, v) for u, v in zip(x, y)), key
            else:
                assert np.array_equal(x, y, equal_nan=True), key
    assert pair[0].same_as(alone[1]) and pair[1].same_as(alone[2])
    assert not alone[0].same_as(alone[2])            # same seed, other trace and step sizes


@pytest.mark.parametrize("name", ["fedavg", "fedsum", "fedsum-cr"])
def test_iterate_yields_the_states_of_run(name, problem, masks):
    alg = build(name, 0.05, 1.0)
    states = list(algorithms.iterate(alg, problem, masks[1], seed=2))
    history = algorithms.run(alg, problem, masks[1], seed=2)
    assert len(states) == 26 and states[0].x.shape == (problem.dim,)
    assert np.array_equal(states[-1].x.numpy(), history.final_params)
    losses = [float(problem.loss(s.x)) for s in states[:-1]]
    np.testing.assert_allclose(losses, history.loss, rtol=1e-14)


def test_a_run_that_diverges_stops_alone(problem, masks):
    algs = [build("fedavg", 0.05, 1.0), build("fedavg", 80.0, 2.0), build("fedavg", 0.05, 1.0)]
    full = np.ones((200, problem.n_clients), dtype=bool)
    batch = algorithms.run_batch(algs, problem, full, [1, 2, 3])
    assert batch[0].stopped is None and batch[2].stopped is None
    stopped = batch[1].stopped
    assert stopped is not None and " became " in stopped
    stop = int(stopped.rsplit(" ", 1)[1])
    assert len(batch[1].rounds) == stop == len(batch[1].uplink) and np.isfinite(batch[1].final_params).all()
    alone = algorithms.run(algs[1], problem, full, seed=2)
    assert alone.same_as(batch[1]) and alone.stopped == stopped
    assert batch[0].same_as(algorithms.run(algs[0], problem, full, seed=1))


def test_record_every_schedule_and_start_apply_to_every_run(problem, masks):
    algs = [build("fedsum", 0.05, 1.0), build("fedsum", 0.08, 0.7)]
    x0 = np.linspace(-1, 1, problem.dim)
    kw = dict(record_every=3, local_schedule="sqrt", x0=x0)
    batch = algorithms.run_batch(algs, problem, masks[:2], [0, 1], **kw)
    for b in range(2):
        alone = algorithms.run(algs[b], problem, masks[b], seed=b, **kw)
        assert alone.same_as(batch[b]) and list(alone.rounds) == list(range(0, 25, 3))
        assert np.array_equal(alone.averaged_params, batch[b].averaged_params)


def test_step_weighted_average_follows_its_definition(problem, masks):
    alg = build("fedavg", 0.05, 1.0)
    states = list(algorithms.iterate(alg, problem, masks[0], seed=5, local_schedule="sqrt"))
    rates = [0.05 / np.sqrt(t / 10 + 1) for t in range(25)]
    want = sum(r * s.x.numpy() for r, s in zip(rates, states)) / sum(rates)
    got = algorithms.run(alg, problem, masks[0], seed=5, local_schedule="sqrt").averaged_params
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_step_sizes_come_from_the_round_not_the_algorithm(problem, masks):
    """The engine hands rounds an algorithm with NaN step sizes, so a batch of different step
    sizes can only differ through the round's (B, 1) rates."""
    from algorithms.base import template

    copy = template(build("fedsum", 0.05, 1.0))
    assert np.isnan(copy.eta_l) and np.isnan(copy.eta_g) and copy.local_steps == 2


@pytest.mark.parametrize("kwargs, match", [
    (dict(algorithms=[algorithms.get("fedavg"), algorithms.get("fedsum")]), "share the algorithm"),
    (dict(algorithms=[algorithms.get("fedavg", local_steps=1), algorithms.get("fedavg", local_steps=2)]),
     "share the algorithm"),
    (dict(seeds=[1, 2, 3]), "2 given for a batch of 3 runs"),
    (dict(traces="short"), "same number of rounds"),
    (dict(seeds=[]), "0 given"),
])
def test_mismatched_batches_are_refused(kwargs, match, problem, masks):
    args = dict(algorithms=[algorithms.get("fedavg")] * 2, traces=masks[:2], seeds=[0, 1])
    if kwargs.get("traces") == "short":
        kwargs = dict(traces=[masks[0], masks[1][:10]])
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        algorithms.run_batch(args["algorithms"], problem, args["traces"], args["seeds"])


def test_batch_metrics_equal_the_single_model_ones(problem):
    X = torch.randn(5, problem.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    loss, grad = problem.loss_and_grad_batch(X)
    for b in range(5):
        assert torch.equal(loss[b], problem.loss(X[b]))
        assert torch.equal(grad[b], problem.full_grad(X[b]))
        assert torch.equal(problem.client_grads_batch(X)[b], problem.client_grads(X[b]))
    assert torch.equal(problem.loss_batch(X), loss) and torch.equal(problem.full_grad_batch(X), grad)
