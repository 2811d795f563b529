"""monte_carlo(..., method="cycles"): OnOffCycles delays from each replicate's phases, and
the one-trace shortcut for deterministic patterns.

"cycles" draws the pattern's own phases, so its replicates must equal method "trace"'s
exactly; the delays are also checked against a loop written from the definition
τ_t = t − min_i a_{i,t}, and the means against the exact laws of :mod:`.availability`.
"""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from participation._random import seed_sequence
from participation.delays import per_round_delay
from participation.expected.samplers import cycles
from participation.expected import monte_carlo
from participation.expected.laws.availability_laws import on_off_tau_max_tail, on_off_tau_t
from participation.patterns import Bernoulli, Cyclic, OnOffCycles, Replay, Selected
from participation.trace import Trace


def samples(pattern, rounds, reps, seed=5, **kwargs):
    result = monte_carlo(pattern, rounds, reps, seed=seed, progress=False, keep_samples=True, **kwargs)
    return result.samples["tau_max"], result.samples["tau_avg"], result.method


def delays_by_definition(pattern: OnOffCycles, rounds: int, phases: np.ndarray) -> np.ndarray:
    """τ_t of one replicate: a_{i,t} the last on-round ≤ t (−1 if none), looped over rounds."""
    last = np.full(pattern.n_clients, -1)
    tau = np.empty(rounds, dtype=np.int64)
    for t in range(rounds):
        on = (t + phases) % pattern.period < pattern.active
        last[on] = t
        tau[t] = t - last.min()
    return tau


@pytest.mark.parametrize("trial", range(40))
def test_replicates_equal_whole_traces(trial):
    rng = np.random.default_rng(trial)
    n, period, rounds = int(rng.integers(1, 12)), int(rng.integers(1, 16)), int(rng.integers(1, 70))
    active = rng.integers(0 if trial % 4 == 0 else 1, period + 1, size=n)
    pattern = OnOffCycles(n, period, active)
    root = seed_sequence(trial)
    tau_max, tau_avg = cycles.cycle_chunk(pattern, rounds, root, 2, 9)
    tau = per_round_delay(pattern.sample_batch(rounds, 9, root, first_replicate=2))
    np.testing.assert_array_equal(tau_max, tau.max(axis=1))
    np.testing.assert_allclose(tau_avg, tau.mean(axis=1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("period,rounds", [(1, 5), (7, 3), (7, 7), (7, 8), (7, 50), (10, 40), (10, 41)])
def test_delays_match_the_definition(period, rounds):
    rng = np.random.default_rng(period * 100 + rounds)
    pattern = OnOffCycles(6, period, rng.integers(1, period + 1, size=6))
    phases = rng.integers(0, period, size=(25, 6))
    tau_max, tau_avg = cycles.cycle_delays(pattern, rounds, phases)
    for r in range(25):
        tau = delays_by_definition(pattern, rounds, phases[r])
        assert tau_max[r] == tau.max()
        assert tau_avg[r] == pytest.approx(tau.mean(), abs=1e-12)


def test_cover_offsets_are_the_largest_wait():
    """g(y) against max_i of the wait until client i is next on, counted round by round."""
    rng = np.random.default_rng(0)
    pattern = OnOffCycles(9, 11, rng.integers(1, 12, size=9))
    phases = rng.integers(0, 11, size=(30, 9))
    g = cycles.cover_offsets(pattern, phases)
    for r in range(30):
        for y in range(11):
            wait = [next(k for k in range(12) if (y + k + phases[r, i]) % 11 < pattern.active[i]) for i in range(9)]
            assert g[r, y] == max(wait)


@pytest.mark.parametrize("rounds", [50, 300])
def test_means_match_the_exact_laws(rounds):
    pattern = OnOffCycles(40, 37, np.random.default_rng(1).integers(3, 30, size=40))
    tau_max, tau_avg, method = samples(pattern, rounds, 4000)
    assert method == "cycles"
    exact_max = on_off_tau_max_tail(pattern, rounds).sum()
    exact_avg = on_off_tau_t(pattern, rounds).mean()
    assert abs(tau_max.mean() - exact_max) <= 4.5 * tau_max.std(ddof=1) / np.sqrt(tau_max.size) + 1e-9
    assert abs(tau_avg.mean() - exact_avg) <= 4.5 * tau_avg.std(ddof=1) / np.sqrt(tau_avg.size) + 1e-9


def test_never_on_client_gives_t_plus_one():
    pattern = OnOffCycles(5, 6, [0, 3, 6, 1, 2])
    tau_max, tau_avg, _ = samples(pattern, 40, 8, method="cycles")
    assert (tau_max == 40).all() and np.allclose(tau_avg, 41 / 2)


def test_same_replicates_whatever_the_chunking():
    pattern = OnOffCycles.from_probability(30, 25, np.linspace(0.05, 0.9, 30))
    whole = samples(pattern, 400, 50)
    trace = samples(pattern, 400, 50, method="trace")
    np.testing.assert_array_equal(whole[0], trace[0])
    np.testing.assert_allclose(whole[1], trace[1], rtol=0, atol=1e-12)
    with ThreadPoolExecutor(2) as pool:
        for kwargs in ({"chunk_size": 7}, {"chunk_size": 3, "executor": pool}):
            got = samples(pattern, 400, 50, **kwargs)
            np.testing.assert_array_equal(got[0], whole[0])
            np.testing.assert_array_equal(got[1], whole[1])


def test_cycles_needs_on_off_cycles():
    with pytest.raises(ValueError, match="method='cycles' needs an OnOffCycles pattern"):
        monte_carlo(Bernoulli(0.3, 5), 20, 4, method="cycles", progress=False)


@pytest.mark.parametrize("pattern", [Cyclic(10, 3), OnOffCycles(6, 5, [1, 2, 3, 4, 5, 0], phases=[0, 1, 2, 3, 4, 0]),
                                     OnOffCycles(6, 5, 2, phases=[0, 1, 2, 3, 4, 0]),
                                     Replay(Trace(np.random.default_rng(2).random((30, 7)) < 0.4)),
                                     Selected(Cyclic(8, 4), 8)])
def test_deterministic_pattern_delays_computed_once(pattern, monkeypatch):
    """One trace serves every replicate: the same values as the trace of each replicate."""
    assert pattern.deterministic
    rounds = 25 if isinstance(pattern, Replay) else 60
    expected = per_round_delay(pattern.sample_batch(rounds, 1, 0))[0]
    drawn = []
    original = type(pattern).sample_batch
    monkeypatch.setattr(type(pattern), "sample_batch",
                        lambda self, *a, **k: drawn.append(a[1]) or original(self, *a, **k))
    tau_max, tau_avg, method = samples(pattern, rounds, 20, method="trace", chunk_size=6)
    assert drawn == [1] * 4                                   # one replicate drawn per chunk
    assert (tau_max == expected.max()).all() and np.allclose(tau_avg, expected.mean(), rtol=0, atol=1e-12)


def test_bench_row_measures_both_sides():
    from verify import bench

    row = bench.on_off_cycles_ratio(quick=True)
    assert row.name == "Monte-Carlo E[tau_max], on/off cycles (FedAU cyclic, cycles)"
    assert row.baseline_seconds > 0 and row.fast_seconds > 0 and "method 'trace'" in row.note
