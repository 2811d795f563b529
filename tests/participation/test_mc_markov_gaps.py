"""Monte-Carlo method "gaps" for Markov availability: exact draws of every absence run."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import stats

import participation
from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo
from participation.patterns import Bernoulli, Markov

CASES = [
    (Markov(0.5, 0.9, n_clients=3), 200),  # strong positive correlation
    (Markov(0.6, -0.5, n_clients=4), 50),  # negative correlation
    (Markov(np.array([0.2, 0.7, 0.5, 0.9]), np.array([0.9, -0.2, 0.5, 0.0])), 1000),  # mixed π and λ
    (Markov(0.3, 0.5, n_clients=2), 1),
    (Markov(0.1, 0.9, n_clients=2), 1500),  # long absences, often censored at T
    (Markov(np.array([0.9, 0.1]), np.array([-1 / 9, 0.3])), 300),  # λ at its lower bound: P(on | on) = 0
]


@pytest.mark.slow
@pytest.mark.parametrize("pattern, rounds", CASES)
def test_agrees_with_exact_values_and_trace(pattern, rounds):
    gaps = monte_carlo(pattern, rounds, 4000, seed=1, method="gaps", progress=False)
    trace = monte_carlo(pattern, rounds, 4000, seed=1, method="trace", progress=False)
    for name, exact in (("tau_max", exact_tau_max(pattern, rounds)), ("tau_avg", exact_tau_avg(pattern, rounds))):
        a, b = getattr(gaps, name), getattr(trace, name)
        assert abs(a.mean - float(exact)) <= 4 * a.stderr + 1e-12, (name, a, exact)
        assert abs(a.mean - b.mean) <= 4 * np.hypot(a.stderr, b.stderr) + 1e-12, (name, a, b)


def test_auto_picks_gaps_for_markov():
    pattern, rounds = CASES[0]
    auto = monte_carlo(pattern, rounds, 50, seed=3, keep_samples=True, progress=False)
    gaps = monte_carlo(pattern, rounds, 50, seed=3, method="gaps", keep_samples=True, progress=False)
    np.testing.assert_array_equal(auto.samples["tau_max"], gaps.samples["tau_max"])
    np.testing.assert_array_equal(auto.samples["tau_avg"], gaps.samples["tau_avg"])
    with pytest.raises(ValueError, match="method='gaps'"):
        monte_carlo(pattern, rounds, 5, seed=3, method="gaps", device="cpu", progress=False)


@pytest.mark.parametrize("pattern, rounds", [CASES[2], (participation.preset("cafed-temporal", n_clients=20), 400)])
def test_independent_of_chunking_and_workers(pattern, rounds):
    runs = [monte_carlo(pattern, rounds, 37, seed=5, method="gaps", keep_samples=True, progress=False, chunk_size=size)
            for size in (None, 1, 4, 37)]
    with ThreadPoolExecutor(3) as pool:
        runs.append(monte_carlo(pattern, rounds, 37, seed=5, method="gaps", keep_samples=True, progress=False,
                                chunk_size=5, executor=pool))
    for run in runs[1:]:
        for name in ("tau_max", "tau_avg"):
            np.testing.assert_array_equal(run.samples[name], runs[0].samples[name])
    tail = monte_carlo(pattern, rounds, 10, seed=5, method="gaps", keep_samples=True, progress=False, _first=27)
    np.testing.assert_array_equal(tail.samples["tau_max"], runs[0].samples["tau_max"][27:])
    other = monte_carlo(pattern, rounds, 37, seed=6, method="gaps", keep_samples=True, progress=False)
    assert not np.array_equal(other.samples["tau_avg"], runs[0].samples["tau_avg"])


@pytest.mark.slow
@pytest.mark.parametrize("pattern, rounds", [
    CASES[0], CASES[1], CASES[2],
    (Markov(np.array([0.5, 0.3, 0.8]), np.array([0.6, 0.0, -0.2]), clusters=np.array([0, 0, 2, 2, 2])), 150),
])
def test_distribution_matches_trace(pattern, rounds):
    gaps = monte_carlo(pattern, rounds, 4000, seed=11, method="gaps", keep_samples=True, progress=False)
    trace = monte_carlo(pattern, rounds, 4000, seed=12, method="trace", keep_samples=True, progress=False)
    for name in ("tau_max", "tau_avg"):
        assert stats.ks_2samp(gaps.samples[name], trace.samples[name]).pvalue > 1e-3, name


@pytest.mark.slow
@pytest.mark.parametrize("pattern, rounds", [CASES[2], CASES[4]])
def test_chains_drawn_short_at_first_keep_the_law(pattern, rounds, monkeypatch):
    """With far too few pairs drawn at first, every chain goes through the extension, batch
    after batch; the law must not change."""
    import participation.expected.samplers.markov_gaps as gaps_module

    monkeypatch.setattr(gaps_module, "MARKOV_SPREAD", -1e9)   # one pair a chain at first (the minimum)
    gaps_module._markov_plan_cached.cache_clear()
    try:
        short = monte_carlo(pattern, rounds, 4000, seed=13, method="gaps", keep_samples=True, progress=False)
    finally:
        gaps_module._markov_plan_cached.cache_clear()
    for name, exact in (("tau_max", exact_tau_max(pattern, rounds)), ("tau_avg", exact_tau_avg(pattern, rounds))):
        estimate = getattr(short, name)
        assert abs(estimate.mean - float(exact)) <= 4 * estimate.stderr + 1e-12, (name, estimate, exact)


def test_bernoulli_gaps_unchanged():
    """Values of the committed Bernoulli gap sampler (seed 7, 64 replicates)."""
    expected = [
        (Bernoulli(0.2, 20), 300, 2142.0, 968.8499999999999, [38.0, 31.0, 35.0, 29.0, 28.0],
         [16.1, 15.466666666666667, 16.063333333333333]),
        (Bernoulli(np.array([0.1, 0.3, 0.5, 0.05])), 1000, 5293.0, 1369.15, [61.0, 87.0, 98.0, 90.0, 90.0],
         [19.97, 23.973, 27.954]),
    ]
    for pattern, rounds, max_sum, avg_sum, max_head, avg_head in expected:
        run = monte_carlo(pattern, rounds, 64, seed=7, method="gaps", keep_samples=True, progress=False)
        assert run.samples["tau_max"].sum() == max_sum
        assert run.samples["tau_avg"].sum() == avg_sum
        assert run.samples["tau_max"][:5].tolist() == max_head
        assert run.samples["tau_avg"][:3].tolist() == avg_head


def test_exact_delays_of_clustered_chains_count_each_used_chain_once():
    """Clients of one cluster share one chain (identical availability), and a chain no client
    follows plays no part: the exact E[τ_max], E[τ_avg] are those of the used chains alone,
    and agree with whole-trace Monte-Carlo (found when the unused chain was counted)."""
    from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo

    clustered = Markov(np.array([0.3, 0.5, 0.7]), np.array([0.2, 0.4, 0.6]), clusters=np.array([0, 0, 2]))
    alone = Markov(np.array([0.3, 0.7]), np.array([0.2, 0.6]))
    assert exact_tau_max(clustered, 50) == pytest.approx(exact_tau_max(alone, 50), abs=1e-12)
    assert exact_tau_avg(clustered, 50) == pytest.approx(exact_tau_avg(alone, 50), abs=1e-12)
    mc = monte_carlo(clustered, 50, 4000, seed=1, method="trace")
    assert abs(mc.tau_max.mean - exact_tau_max(clustered, 50)) < 4 * mc.tau_max.stderr
    assert abs(mc.tau_avg.mean - exact_tau_avg(clustered, 50)) < 4 * mc.tau_avg.stderr
