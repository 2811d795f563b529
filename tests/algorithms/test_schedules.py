"""Local learning-rate schedules: a constant factor is a rescaled η_l; "sqrt" is the decay of FedSUM's experiments (App. H.2, Table 2)."""
import math

import numpy as np
import pytest
import torch

import algorithms
from algorithms.rounds import Round
from algorithms.problems import Quadratic
from algorithms.schedules import local_rate_factor, sqrt_decay

SIMPLE = ["fedavg", "fedsum-b", "fedsum", "fedsum-cr", "scaffold", "mifa", "fedvarp", "fedau", "fedgm"]


@pytest.fixture(scope="module")
def setting():
    problem = Quadratic.random(5, 3, heterogeneity=1.0, noise_std=0.3, seed=2)
    mask = np.random.default_rng(3).random((12, 5)) < 0.5
    return problem, mask


@pytest.mark.parametrize("name", SIMPLE)
def test_constant_factor_is_a_rescaled_local_rate(name, setting):
    problem, mask = setting
    scheduled = algorithms.run(algorithms.get(name, eta_l=0.1, local_steps=2), problem, mask, seed=1,
                               local_schedule=lambda t: 0.5)
    plain = algorithms.run(algorithms.get(name, eta_l=0.05, local_steps=2), problem, mask, seed=1)
    np.testing.assert_allclose(scheduled.final_params, plain.final_params, rtol=1e-12, atol=1e-14)


def test_sqrt_decay_matches_a_hand_written_loop(setting):
    """Round t of a decayed run equals one round built by hand with η_l = η_0/√(t/10+1)."""
    problem, mask = setting
    algorithm = algorithms.get("fedsum", eta_l=0.2, local_steps=3)
    decayed = list(algorithms.iterate(algorithm, problem, mask, seed=4, local_schedule="sqrt"))
    noise = algorithms.NoiseStream([4], problem.device)
    state = algorithm.init(problem, problem.x0[None])
    rate = lambda value: torch.tensor([[value]], dtype=problem.dtype)  # noqa: E731
    for t in range(mask.shape[0]):
        clients = torch.as_tensor(np.flatnonzero(mask[t]))
        r = Round(t=t, run=torch.zeros_like(clients), client=clients, n_runs=1, n_clients=problem.n_clients,
                  count=torch.tensor([float(clients.numel())], dtype=problem.dtype),
                  eta_l=rate(0.2 * (1 / math.sqrt(t / 10 + 1))), eta_g=rate(1.0), noise=noise)
        state = algorithm.round(state, problem, r)
        assert torch.equal(state.x[0], decayed[t + 1].x)
    assert sqrt_decay(0) == 1.0 and sqrt_decay(30) == 0.5


def test_fedawe_keeps_its_own_decay_off_under_a_schedule(setting):
    problem, mask = setting
    own = algorithms.run(algorithms.get("fedawe", eta_l=0.1, local_steps=2), problem, mask, seed=1)
    engine = algorithms.run(algorithms.get("fedawe", eta_l=0.1, local_steps=2, local_decay=False), problem, mask,
                            seed=1, local_schedule="sqrt")
    np.testing.assert_allclose(own.final_params, engine.final_params, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", ["cosine", 3, lambda t: 0.0, lambda t: float("nan")])
def test_bad_schedules(bad, setting):
    problem, mask = setting
    with pytest.raises(ValueError, match="schedule"):
        algorithms.run(algorithms.get("fedavg"), problem, mask, local_schedule=bad)


def test_none_is_constant():
    assert local_rate_factor(None) is None
