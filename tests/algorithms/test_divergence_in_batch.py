"""A run that diverges inside a batch stops alone: for every registered algorithm, the healthy run
of a batch [healthy, diverging] equals the same run made alone, and the diverging run reports where
it stopped. (CA-Fed's greedy weights are numpy code per run: a diverged run's infinite loss
reports must not raise for the whole batch.)"""
import numpy as np
import pytest

import algorithms
from algorithms.problems import Quadratic
from participation import patterns

#: Algorithms whose update is bounded whatever η_l (FedAWE clips the server's innovation).
BOUNDED = {"fedawe"}


@pytest.fixture(scope="module")
def setting():
    problem = Quadratic.random(6, 3, noise_std=0.1, seed=0)
    return problem, patterns.Uniform(6, 3).sample(30, seed=0)


@pytest.mark.parametrize("name", algorithms.names())
def test_a_diverging_run_stops_alone_and_leaves_its_batch_intact(setting, name):
    problem, trace = setting
    healthy = algorithms.get(name, eta_l=0.01, local_steps=2)
    diverging = algorithms.get(name, eta_l=1e6, local_steps=2)
    both = algorithms.run_batch([healthy, diverging], problem, trace)
    alone = algorithms.run(healthy, problem, trace)
    assert np.array_equal(both[0].grad_norm2, alone.grad_norm2) and both[0].stopped is None
    if name not in BOUNDED:
        assert both[1].stopped is not None and "became" in both[1].stopped
