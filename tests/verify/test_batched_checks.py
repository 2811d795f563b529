"""Checks with their runs in batches give the verdicts of the checks one by one: ``check_many``
against ``check`` per call, the batches against ``one_by_one``, a refused call named by index,
and the batch limit that splits large problems."""
import numpy as np
import pytest

from algorithms.problems import Quadratic
from participation import preset
from verify import check, check_many
from verify.checking import CallError
from verify.theorems import runner


@pytest.fixture(scope="module")
def problem():
    return Quadratic.random(8, 3, heterogeneity=1.0, noise_std=0.3, seed=2)


def calls(problem):
    return [dict(algorithm=name, problem=problem, trace_or_pattern=preset(p, n_clients=8, per_round=2), theorem="fedsum.theorem_4_1",
                 seeds=3, rounds=40, local_steps=2)
            for name in ("fedsum", "fedavg") for p in ("P1", "P3")]


def same(a, b):
    return (a.values == b.values and a.verdict == b.verdict and a.lower == b.lower and a.upper == b.upper
            and a.bound.value == b.bound.value and a.notes == b.notes and a.step_sizes == b.step_sizes)


def test_check_many_equals_check_call_by_call(problem):
    many = check_many(calls(problem))
    assert len(many) == 4
    for call, result in zip(calls(problem), many):
        assert same(result, check(**call))


def test_batches_equal_runs_one_by_one(problem):
    batched = check_many(calls(problem))
    with runner.one_by_one():
        alone = check_many(calls(problem))
    assert all(same(a, b) for a, b in zip(batched, alone))


def test_a_call_refused_before_running_is_named_by_index(problem):
    bad = calls(problem)
    bad[2] = dict(bad[2], confidence=1.5)
    with pytest.raises(CallError, match="confidence") as info:
        check_many(bad)
    assert info.value.index == 2


def test_on_run_sees_every_run_in_order(problem):
    seen = []
    call = dict(calls(problem)[0], on_run=lambda history, trace, algorithm, seed: seen.append(seed))
    result = check_many([call])[0]
    assert seen == list(result.seeds) == [0, 1, 2]


def test_large_problems_split_into_batches_without_changing_a_number(problem, monkeypatch):
    whole = check_many(calls(problem))
    monkeypatch.setattr(runner, "BATCH_BYTES", 1)                 # one run a batch
    assert runner._batch_limit(problem) == 1
    split = check_many(calls(problem))
    assert all(same(a, b) for a, b in zip(whole, split))
    assert np.isfinite([r.measured for r in split]).all()
