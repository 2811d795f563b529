"""Sizes are refused before work, and a step count too large to prefetch does not exhaust memory:
a batch whose states and participation masks exceed the memory limit is a one-line ValueError
naming the batch and the limit before anything is allocated; a round whose draws exceed the
prefetch budget draws step by step, the same numbers."""
import pytest
import torch

import algorithms
from algorithms.noise import NoiseStream
from algorithms.problems import Quadratic
from participation import patterns


def test_a_batch_larger_than_the_memory_limit_is_refused_before_work(monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.01")
    problem = Quadratic.random(6, 3, noise_std=0.1, seed=0)
    trace = patterns.Uniform(6, 3).sample(50, seed=0)
    with pytest.raises(ValueError, match=r"a batch of 100000 runs of fedsum on 6 clients .* the memory limit is"):
        algorithms.run_batch(algorithms.get("fedsum"), problem, trace, seeds=range(100000))


def test_a_range_of_seeds_is_a_batch_of_those_seeds():
    problem = Quadratic.random(4, 2, noise_std=0.1, seed=0)
    trace = patterns.Uniform(4, 2).sample(10, seed=0)
    batch = algorithms.run_batch(algorithms.get("fedavg"), problem, trace, seeds=range(3))
    assert [h.seed for h in batch] == [0, 1, 2]
    assert (batch[2].grad_norm2 == algorithms.run(algorithms.get("fedavg"), problem, trace, seed=2).grad_norm2).all()


def test_draws_beyond_the_prefetch_budget_are_made_step_by_step_with_the_same_numbers():
    clients = torch.tensor([0, 2, 3])
    runs = torch.zeros(3, dtype=torch.long)
    block = [(0, runs, clients), (1, runs, clients)]
    fetched, lazy = NoiseStream(7), NoiseStream(7)
    assert fetched.prefetch(block, 4, "normal", 5) == 2
    assert lazy.prefetch(block, 4, "normal", 5, budget_bytes=1) == 1 and not lazy._cache
    for t in (0, 1):
        for k in range(4):
            assert torch.equal(fetched.draws(t, k, clients).normal(5), lazy.draws(t, k, clients).normal(5))
