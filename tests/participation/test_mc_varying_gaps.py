"""Monte-Carlo method "gaps" for independent clients with time-varying probabilities.

Every presence is drawn by inverting the cumulative hazard Λ (participation.expected.samplers.varying_gaps,
``varying_chunk``); the estimates must match the exact E[τ_max], E[τ_avg] and method "trace",
be the same whatever the chunking or the executor, and leave the constant-p and Markov
samplers' results alone (their samples' hashes are pinned in ``SAVED``).
"""
from __future__ import annotations

import dataclasses
import hashlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import stats

import participation
from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo
from participation.expected.samplers import varying_gaps
from participation.patterns import Bernoulli, Sine

ROUNDS = 60
REPS = 4000


def _array_pattern() -> Bernoulli:
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.6, (ROUNDS, 4))
    p[5, 1] = 1.0  # certain presences are merged in as such
    p[7, :] = 1.0
    p[9, 2] = 0.01
    return Bernoulli(p)


def _callable_pattern() -> Bernoulli:
    return Bernoulli(lambda t: 0.1 + 0.3 * (t % 7 == 0) + np.array([0.0, 0.1, 0.2]), n_clients=3)


PATTERNS = {
    "sine-p3": lambda: Sine.p3(5, 2),
    "array": _array_pattern,
    "callable": _callable_pattern,
}


def _run(pattern, method="gaps", reps=REPS, seed=1, **kwargs):
    return monte_carlo(pattern, ROUNDS, reps, seed=seed, method=method, progress=False, keep_samples=True, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_matches_exact_and_trace(name):
    pattern = PATTERNS[name]()
    exact = {"tau_max": exact_tau_max(pattern, ROUNDS), "tau_avg": exact_tau_avg(pattern, ROUNDS)}
    fast, trace = _run(pattern), _run(pattern, "trace")
    for key in exact:
        for result in (fast, trace):
            estimate = getattr(result, key)
            assert abs(estimate.mean - exact[key]) <= 4 * estimate.stderr, (key, estimate, exact[key])
        a, b = getattr(fast, key), getattr(trace, key)
        assert abs(a.mean - b.mean) <= 4 * np.hypot(a.stderr, b.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_two_sample_ks_against_trace(name):
    pattern = PATTERNS[name]()
    fast, trace = _run(pattern, seed=11), _run(pattern, "trace", seed=12)
    for key in ("tau_max", "tau_avg"):
        assert stats.ks_2samp(fast.samples[key], trace.samples[key]).pvalue > 1e-3


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_independent_of_chunking_and_workers(name):
    pattern = PATTERNS[name]()
    runs = [_run(pattern, reps=50, chunk_size=size) for size in (None, 1, 7)]
    with ThreadPoolExecutor(3) as pool:
        runs.append(_run(pattern, reps=50, chunk_size=4, executor=pool))
    for run in runs[1:]:
        for key in ("tau_max", "tau_avg"):
            np.testing.assert_array_equal(run.samples[key], runs[0].samples[key])


@pytest.mark.slow
def test_short_rows_draw_more_and_stay_exact():
    """With two Exp(1) draws per client at first, nearly every row continues past Λ(T)."""
    pattern = Sine.p3(5, 2)
    plan = varying_gaps.varying_probabilities(pattern, ROUNDS)
    short = dataclasses.replace(plan, draws=tuple(2 for _ in plan.draws))
    root = np.random.SeedSequence(5)
    tau_max, tau_avg = varying_gaps.varying_chunk(short, ROUNDS, root, 0, REPS)
    for samples, exact in ((tau_max, exact_tau_max(pattern, ROUNDS)), (tau_avg, exact_tau_avg(pattern, ROUNDS))):
        assert abs(samples.mean() - exact) <= 4 * samples.std(ddof=1) / np.sqrt(samples.size)


def test_grid_lookup_matches_searchsorted():
    pattern = participation.preset("P3")
    plan = varying_gaps.varying_probabilities(pattern, 2000)
    assert plan.grids[0] is not None and len(plan.clients) == 1  # one shared sequence, one table
    cumulative = plan.hazard[0]
    points = np.sort(np.random.default_rng(1).random((20, 500)) * cumulative[-1] * 1.1, axis=1)
    points[0, :50] = cumulative[1:51]  # on the boundaries and next to them
    points[1, :50] = np.nextafter(cumulative[1:51], 0)
    points[2, :50] = np.nextafter(cumulative[1:51], np.inf)
    expected = np.minimum(np.searchsorted(cumulative, points, side="right") - 1, 2000)
    np.testing.assert_array_equal(varying_gaps._varying_rows(plan, 0, points), expected)


def test_auto_takes_it_for_p3():
    pattern = participation.preset("P3")
    auto = monte_carlo(pattern, 2000, 2, seed=0, progress=False, keep_samples=True)
    fast = monte_carlo(pattern, 2000, 2, seed=0, progress=False, keep_samples=True, method="gaps")
    np.testing.assert_array_equal(auto.samples["tau_max"], fast.samples["tau_max"])


def test_memory_limit_refused(monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.000001")
    with pytest.raises(ValueError) as info:
        monte_carlo(Sine.p3(50, 10), 2000, 10, seed=0, method="gaps", progress=False)
    assert "\n" not in str(info.value)


# sha256 (first 32 hex digits) of the samples of method "gaps" for constant-p and Markov patterns,
# which the time-varying sampler must leave alone. Markov chains draw 2.5 standard deviations of
# runs at first, which fixes where a replicate's stream is read (its law:
# tests/participation/test_mc_markov_gaps.py)
SAVED = {
    "bern_max": "293fcd5662cfad0af858d989591eb52c", "bern_avg": "c4db3ef307e319cc8a7f380fc5d0faac",
    "bern2_max": "8f116408d89485d0059f6a9a0211570d", "bern2_avg": "a24b036a78c7df59c645f56e6f0c06fd",
    "markov_max": "aac007546f6380b9b01e2179241b9eca", "markov_avg": "baaf7bc58ff66f5582171751e25254ee",
}


def test_constant_and_markov_unchanged():
    cases = [("bern", Bernoulli(np.array([0.1, 0.2, 0.3, 0.2, 0.5]), 5), 300),
             ("bern2", Bernoulli(0.2, 20), 500),
             ("markov", participation.preset("cafed-temporal", n_clients=10), 400)]
    for name, pattern, rounds in cases:
        result = monte_carlo(pattern, rounds, 300, seed=7, method="gaps", keep_samples=True, progress=False)
        for key, suffix in (("tau_max", "max"), ("tau_avg", "avg")):
            digest = hashlib.sha256(np.ascontiguousarray(result.samples[key]).tobytes()).hexdigest()[:32]
            assert digest == SAVED[f"{name}_{suffix}"], (name, key)


def test_auto_leaves_many_distinct_sequences_to_whole_traces():
    """Per-client time-varying p cost the sampler a pass per distinct sequence: with 40
    distinct ones "auto" runs whole traces (the same replicates as method "trace"), with 2 the
    sampler (not the same replicates)."""
    import numpy as np

    from participation.expected import monte_carlo
    from participation.expected.samplers.varying_gaps import VARYING_AUTO_GROUPS
    from participation.patterns import Sine

    many = Sine.fedawe(np.linspace(0.1, 0.5, 40), 0.5, 0.5)
    few = Sine.fedawe(np.repeat([0.2, 0.4], 20), 0.5, 0.5)
    assert VARYING_AUTO_GROUPS < 40
    for pattern, same in ((many, True), (few, False)):
        auto = monte_carlo(pattern, 300, 5, seed=1, keep_samples=True, progress=False)
        trace = monte_carlo(pattern, 300, 5, seed=1, keep_samples=True, progress=False, method="trace")
        assert np.array_equal(auto.samples["tau_avg"], trace.samples["tau_avg"]) == same
