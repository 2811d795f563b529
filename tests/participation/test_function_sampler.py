"""The samplers of ``montecarlo.SAMPLERS`` are :class:`FunctionSampler` objects: each method
forwards to the function of its module it names, looked up there at each call."""
import pickle
import sys

import numpy as np
import pytest

from participation.expected.montecarlo import SAMPLERS, TRACE
from participation.expected.samplers import cycles, markov_gaps
from participation.expected.samplers.sampler import FunctionSampler
from participation.patterns import Bernoulli, Markov, OnOffCycles


def test_every_sampler_of_the_table_is_a_function_sampler_naming_its_module_functions():
    assert all(type(sampler) is FunctionSampler for sampler in SAMPLERS)
    assert not isinstance(TRACE, FunctionSampler)
    for sampler in SAMPLERS:
        module = sys.modules[sampler.module]
        assert module.SAMPLER is sampler
        for name in (sampler.law or sampler.accepts, sampler.size, sampler.peak, sampler.draw):
            assert callable(getattr(module, name)), (sampler, name)
        for name in sampler.caches:
            assert callable(getattr(module, name).cache_clear), (sampler, name)


@pytest.mark.parametrize("module, pattern, other, rounds", [
    (cycles, OnOffCycles(6, 5, [1, 2, 3, 4, 5, 2]), Bernoulli(0.3, 6), 40),
    (markov_gaps, Markov(0.4, 0.5, n_clients=3), OnOffCycles(3, 4, 2), 60),
])
def test_the_sampler_forwards_each_method_to_its_module(module, pattern, other, rounds):
    sampler = module.SAMPLER
    law = sampler.applies(pattern, rounds, auto=True)
    if sampler.accepts is not None:
        assert module.applies(pattern) and law is pattern
    else:
        direct = getattr(module, sampler.law)(pattern, rounds, True)
        assert all(np.array_equal(a, b) for a, b in zip(vars(law).values(), vars(direct).values()))
    assert sampler.applies(other, rounds, auto=True) is None
    assert sampler.applies(pattern, rounds, auto=False, device="cpu") is None
    assert sampler.chunk_size(law, rounds, 1000) == getattr(module, sampler.size)(law, rounds)
    assert sampler.chunk_bytes(law, rounds, 7) == getattr(module, sampler.peak)(law, rounds, 7)
    root = np.random.SeedSequence(11)
    drawn = sampler.draw_chunk(law, rounds, root, 3, 5)
    direct = getattr(module, sampler.draw)(law, rounds, root, 3, 5)
    for a, b in zip(drawn, direct):
        np.testing.assert_array_equal(a, b)
    again = pickle.loads(pickle.dumps(sampler))           # what a worker process receives
    for a, b in zip(again.draw_chunk(law, rounds, root, 3, 5), direct):
        np.testing.assert_array_equal(a, b)
    assert not sampler.streams_windows(law, rounds, 5)


def test_a_function_replaced_on_the_module_is_the_one_called(monkeypatch):
    calls = []
    monkeypatch.setattr(cycles, "chunk_size", lambda law, rounds: calls.append(rounds) or 3)
    assert cycles.SAMPLER.chunk_size(OnOffCycles(2, 3, 1), 17, 100) == 3 and calls == [17]


def test_a_function_sampler_takes_one_way_to_its_law():
    names = dict(size="chunk_size", peak="chunk_bytes", draw="cycle_chunk")
    with pytest.raises(TypeError, match="exactly one"):
        FunctionSampler("cycles", "a pattern", cycles.__name__, **names)
    with pytest.raises(TypeError, match="exactly one"):
        FunctionSampler("cycles", "a pattern", cycles.__name__, law="applies", accepts="applies", **names)
