"""The library refuses a size that cannot fit before allocating it: a one-line ValueError naming
the need and the limit (``participation.budget.require_memory``), never a raw MemoryError.

The limit is lowered with FEDVERIFY_MEMORY_GB so that the sizes refused here are small: where a
refusal were missing, the allocation would still be harmless (a few MiB).

Exact expectations also hold their memory to what their units need (no rounds × clients table for
time-constant probabilities) and refuse, before the work, what would take longer than
FEDVERIFY_EXACT_SECONDS (participation.expected.laws._limits).
"""
from __future__ import annotations

import numpy as np
import pytest

from participation import Trace
from participation.expected import (check_monte_carlo, exact_tau_avg, exact_tau_max, monte_carlo,
                                    paper_tau_max_bound)
from participation.expected import montecarlo
from participation.expected.samplers import markov_gaps, periodic
from participation.patterns import Bernoulli, Markov, Uniform, preset
from participation.patterns.independent import Sine

ENV_MEMORY = "FEDVERIFY_MEMORY_GB"


@pytest.fixture
def limit(monkeypatch):
    def set_limit(gigabytes: float) -> None:
        monkeypatch.setenv(ENV_MEMORY, str(gigabytes))
    return set_limit


def _refusal(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as err:
        call(*args, **kwargs)
    message = str(err.value)
    assert "\n" not in message and "needs about" in message and "the memory limit is" in message, message
    return message


# --------------------------------------------------------------------------- traces and samples


def test_from_sets_refuses_a_mask_that_cannot_fit(limit):
    """`Trace.from_sets([[0]], 2**33)` raised a raw MemoryError."""
    limit(1 / 1024)
    message = _refusal(Trace.from_sets, [[0]], 2**21)
    assert message.startswith("from_sets: a trace of 1 round × 2097152 clients needs about 4 MiB; "
                              "the memory limit is 1 MiB"), message
    assert Trace.from_sets([[0], [1, 2]], 1000).n_clients == 1000


def test_samples_that_cannot_fit_are_refused(limit):
    limit(3)
    assert _refusal(preset("P1").sample, 10**12).startswith(
        "1 trace(s) of 1000000000000 rounds × 100 clients needs about 90.9 TiB; the memory limit is 3 GiB")
    assert _refusal(preset("P1").sample_batch, 10**6, 10**4).startswith(
        "10000 trace(s) of 1000000 rounds × 100 clients needs about 933 GiB")


# --------------------------------------------------------------------------- Monte-Carlo


def test_replicates_whose_results_cannot_fit_are_refused_before_drawing(limit, monkeypatch):
    limit(0.01)
    monkeypatch.setattr(montecarlo, "_replicates", lambda *a, **k: pytest.fail("replicates drawn"))
    message = _refusal(monte_carlo, preset("P2"), 10, 10**6)
    assert message.startswith("1000000 replicates' τ_max and τ_avg needs about 61 MiB"), message
    assert _refusal(check_monte_carlo, preset("P2"), 10, 10**6) == message
    assert _refusal(monte_carlo, preset("P2"), 10, target_stderr=0.1, max_reps=10**6).startswith(
        "1000000 replicates' τ_max and τ_avg (max_reps) needs about")


def test_markov_runs_that_cannot_fit_are_refused_before_their_plan_is_built(limit):
    """`mc cafed-temporal --set n_clients=10000000` ran out of memory building the plan."""
    limit(0.05)
    pattern = preset("cafed-temporal", n_clients=10_000)
    built = markov_gaps._markov_plan_cached.cache_info().currsize
    message = _refusal(check_monte_carlo, pattern, 2000, 10)
    assert message.startswith("the absence runs of 10000 Markov chains over 2000 rounds (method 'gaps': "), message
    assert markov_gaps._markov_plan_cached.cache_info().currsize == built
    assert check_monte_carlo(pattern, 20, 10) == "gaps"


def test_periodic_tables_that_cannot_fit_are_not_built(limit):
    """Tables over a horizon too long for the memory limit leave "auto" to another sampler."""
    limit(1 / 256)                          # 4 MiB: the tables of 10^4 rounds take 12.8 MB
    assert periodic.pattern_laws(preset("P3"), 10_000) is None
    assert periodic.pattern_laws(preset("P3"), 200) is not None
    assert check_monte_carlo(preset("P3"), 10_000, 1) == "trace"


def test_clients_sharing_one_sequence_are_grouped_without_sorting_them(monkeypatch):
    """P3 at N = 10^7 sorted 10^7 identical rows to find one group."""
    shared = np.tile(np.linspace(0.1, 0.5, 10)[:, None], (1, 50))
    mixed = np.column_stack([shared[:, :3], shared[:, :1] / 2, shared[:, :2]])
    for first in (shared, mixed):
        sequences, groups = periodic._client_sequences(first)
        want, inverse = np.unique(first.T, axis=0, return_inverse=True)
        assert np.array_equal(sequences, want) and np.array_equal(groups, inverse.ravel())
        assert groups.dtype == np.int64 and sequences.flags.c_contiguous
    unique = np.unique

    def no_row_sort(array, *args, **kwargs):
        assert kwargs.get("axis") is None, "sorted the clients' sequences"
        return unique(array, *args, **kwargs)

    monkeypatch.setattr(periodic.np, "unique", no_row_sort)
    assert periodic.pattern_laws(preset("P3", n_clients=1000), 200) is not None


def test_a_shared_sine_gives_the_same_probabilities_from_one_client():
    t = np.arange(7, 40, dtype=float)[:, None]
    for pattern in (preset("P3", n_clients=50), Sine(6, np.linspace(0.1, 0.5, 6), 0.3, 0.7, 10.0, phase=0.5)):
        want = np.clip(pattern.base * (pattern.amplitude * np.sin(2 * np.pi * t / pattern.period + pattern.phase)
                                       + pattern.offset), pattern.clip_low, pattern.clip_high)
        got = pattern.probabilities(7, 40)
        assert np.array_equal(got, want) and got.flags.writeable and got.shape == (33, pattern.n_clients)


# --------------------------------------------------------------------------- problems


def test_a_random_quadratic_that_cannot_fit_is_refused(limit):
    from algorithms.problems import Quadratic

    limit(1 / 1024)
    assert _refusal(Quadratic.random, 1000, 10).startswith(
        "a random quadratic of 1000 clients in dimension 10 needs about 4.88 MiB; the memory limit is 1 MiB")
    assert Quadratic.random(20, 10).n_clients == 20


def test_an_experiment_whose_traces_cannot_fit_is_refused():
    from verify.studies import experiment

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_MEMORY, "3")
        with pytest.raises(ValueError, match=r"^experiment at T=1000000000, N=100: the traces of 3 patterns and one "
                                             r"run's history needs about 339 GiB; the memory limit is 3 GiB"):
            experiment.check_sizes(100, 10**9, ("P1", "P2", "P3"))
        experiment.check_sizes(100, 1000, ("P1",))


# ---------------------------------------------------------------- exact expectations: sizes and times bounded before the work


def test_an_almost_never_available_client_needs_no_quadratic_table():
    """Bernoulli(1e-12) over 10^5 rounds: τ_max = T except with probability ~1e-35, so
    the law is certain everywhere and needs no T²/2-cell table (which would be a MemoryError)."""
    pattern = Bernoulli(1e-12, 5)
    assert exact_tau_max(pattern, 10**5) == pytest.approx(10**5, abs=1e-6)
    assert exact_tau_avg(pattern, 10**5) == pytest.approx((10**5 + 1) / 2, rel=1e-6)


def test_constant_patterns_never_build_rounds_by_clients(monkeypatch):
    """Time-constant probabilities are read as such: P2 at T = 10^7 (a (T, N) table of
    8 GB before) needs only arrays of T values."""
    import tracemalloc

    tracemalloc.start()
    try:
        avg = exact_tau_avg(preset("P2"), 10**6)
        bound = paper_tau_max_bound(preset("P2"), 10**6)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert avg == pytest.approx(22.7468, abs=1e-3) and bound.value > 0
    assert peak < 100 * 2**20  # a (T, N) float table would be 800 MB


def test_time_varying_probabilities_are_read_in_chunks(monkeypatch):
    """P3's probabilities are scanned chunk by chunk, so the memory limit refuses what the
    units need rather than an allocation of rounds × clients."""
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.001")
    with pytest.raises(ValueError, match=r"exact delays for Sine at T=100000.*GiB|MiB"):
        exact_tau_max(preset("P3"), 10**5)


@pytest.mark.parametrize("call, pattern, rounds, what", [
    (exact_tau_max, preset("P2"), 10**7, r"exact E\[τ_max\] for Bernoulli at T=10000000"),
    (exact_tau_max, preset("H8"), 10**7, r"exact E\[τ_max\] for BiasedGroups at T=10000000"),
    (exact_tau_avg, preset("P3"), 10**7, r"exact delays for Sine at T=10000000 \(reading 10000000 × 100"),
    (exact_tau_max, preset("P3"), 10**6, r"for Sine at T=1000000"),
    (exact_tau_max, Markov(0.1, 0.95, n_clients=50), 10**6, r"exact E\[τ_max\] for Markov"),
    (exact_tau_avg, Uniform(10**6, 10**5), 10, r"Uniform\(N=1000000, S=100000\)"),
    (exact_tau_avg, Sine.fedawe(np.linspace(0.1, 0.5, 20), 0.5, 0.5), 10**5, r"Sine at T=100000 \(20\+ time-varying"),
])
def test_costly_exact_values_are_refused_before_the_work(monkeypatch, call, pattern, rounds, what):
    monkeypatch.setenv("FEDVERIFY_EXACT_SECONDS", "5")
    with pytest.raises(ValueError) as err:
        call(pattern, rounds)
    message = str(err.value)
    assert "\n" not in message and "use monte_carlo" in message and "needs ~" in message and "over the limit" in message
    assert __import__("re").search(what, message), message


def test_time_limit_is_validated(monkeypatch):
    monkeypatch.setenv("FEDVERIFY_EXACT_SECONDS", "soon")
    with pytest.raises(ValueError, match="FEDVERIFY_EXACT_SECONDS must be a number of seconds, got 'soon'"):
        exact_tau_max(preset("P2"), 1000)


@pytest.mark.slow
def test_monte_carlo_refuses_what_one_chunk_cannot_hold():
    with pytest.raises(ValueError, match=r"Monte-Carlo over 1000000000 rounds × 100 clients.*'gaps'"):
        monte_carlo(preset("P2"), 10**9, 2, seed=0, method="gaps")
    # whole traces are streamed a window of rounds at a time, so only a window too wide is refused
    with pytest.raises(ValueError, match=r"Monte-Carlo over 1000000 rounds × 100000000 clients.*'trace'"):
        monte_carlo(Bernoulli(0.2, 10**8), 10**6, 2, seed=0, method="trace")
