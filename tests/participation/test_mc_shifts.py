"""monte_carlo(..., method="shifts"): reshuffled cyclic delays from E − 1 chain draws an epoch,
checked against every order of small epochs, the closed-form law of τ_max and the exact E[τ_avg]."""
import itertools
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from participation.delays import per_round_delay
from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo
from participation.expected.samplers.shifts import applies, shift_chunk, transition_cdfs
from participation.patterns import Bernoulli, ReshuffledCyclic
from participation._random import seed_sequence

SMALL = [(4, 2), (5, 2), (6, 2), (6, 3), (7, 3), (5, 4), (4, 1)]


def epoch_rows(order, n, s):
    """Rows of one epoch: round q selects positions qS .. qS + S − 1 of ``order``."""
    epoch = -(-n // s)
    rows = np.zeros((epoch, n), dtype=bool)
    for position, client in enumerate(order):
        rows[position // s, client] = True
    return rows


def enumerated_epoch_law(n, s):
    """Law of the delays of epoch 1 over every order of epoch 1 (epoch 0 fixed: by relabelling
    any fixed order gives the same law), from the delay module."""
    first = epoch_rows(range(n), n, s)
    law = Counter()
    orders = list(itertools.permutations(range(n)))
    for order in orders:
        tau = per_round_delay(np.vstack([first, epoch_rows(order, n, s)]))
        law[tuple(tau[first.shape[0]:])] += 1
    return {key: count / len(orders) for key, count in law.items()}


def chain_epoch_law(n, s):
    """Law of the delays of an epoch ≥ 1 from the chain's table, every path walked."""
    cdf = transition_cdfs(n, s)
    epoch = cdf.shape[1]
    law = Counter()

    def walk(label, state, path, weight):
        if label < 0:
            last = np.array(path)                                 # P_ℓ for ℓ = E−1, E−2, …, 0
            below = [(last <= r).sum() for r in range(epoch)]
            law[tuple(epoch + r - below[r] for r in range(epoch))] += weight
            return
        row = cdf[label, state]
        previous = 0.0
        for lower in range(state + 1):
            probability = min(row[lower], 1.0) - previous
            previous = min(row[lower], 1.0)
            if probability > 0:
                walk(label - 1, lower, path + [lower], weight * probability)

    walk(epoch - 2, epoch - 1, [epoch - 1], 1.0)
    return dict(law)


@pytest.mark.parametrize("n, s", SMALL)
def test_chain_law_equals_every_order(n, s):
    enumerated, chain = enumerated_epoch_law(n, s), chain_epoch_law(n, s)
    assert set(chain) == set(enumerated)
    for key, probability in enumerated.items():
        assert chain[key] == pytest.approx(probability, rel=1e-12, abs=1e-15)


def enumerated_totals(n, s, rounds):
    """Exact law of (τ_max, Σ τ_t) over every sequence of epoch orders (epoch 0 fixed)."""
    pattern = ReshuffledCyclic(n, s)
    epoch = pattern.epoch_rounds
    epochs = -(-rounds // epoch)
    first = epoch_rows(range(n), n, s)
    orders = list(itertools.permutations(range(n)))
    law = Counter()
    for choice in itertools.product(orders, repeat=epochs - 1):
        mask = np.vstack([first] + [epoch_rows(order, n, s) for order in choice])[:rounds]
        tau = per_round_delay(mask)
        law[(int(tau.max()), int(tau.sum()))] += 1
    total = len(orders) ** (epochs - 1)
    return {key: count / total for key, count in law.items()}


@pytest.mark.slow
@pytest.mark.parametrize("n, s, rounds", [(4, 2, 5), (5, 2, 8), (4, 1, 10), (6, 3, 4), (7, 3, 4)])
def test_samples_follow_the_enumerated_law(n, s, rounds):
    law = enumerated_totals(n, s, rounds)
    reps = 40_000
    tau_max, tau_avg = shift_chunk(ReshuffledCyclic(n, s), rounds, seed_sequence(11), 0, reps)
    drawn = Counter(zip(tau_max.tolist(), np.rint(tau_avg * rounds).astype(int).tolist()))
    assert set(drawn) <= set(law)
    keys = sorted(law)
    observed = np.array([drawn[k] for k in keys], dtype=float)
    expected = np.array([law[k] for k in keys]) * reps
    if len(keys) > 1:
        assert stats.chisquare(observed, expected).pvalue > 1e-4


@pytest.mark.parametrize("n, s, rounds", [(100, 20, 2000), (10, 3, 101), (37, 5, 64), (8, 3, 3)])
def test_means_agree_with_the_exact_laws(n, s, rounds):
    pattern = ReshuffledCyclic(n, s)
    result = monte_carlo(pattern, rounds, 4000, seed=5, progress=False, method="shifts")
    for estimate, exact in ((result.tau_max, exact_tau_max(pattern, rounds)),
                            (result.tau_avg, exact_tau_avg(pattern, rounds))):
        assert abs(estimate.mean - exact) < 5 * estimate.stderr + 1e-3   # + : a rare value may never be drawn


@pytest.mark.slow
def test_chunking_units_and_offsets_do_not_change_a_replicate(monkeypatch):
    import participation.expected.samplers.shifts as shifts

    pattern = ReshuffledCyclic(11, 3)                     # E = 4: 3 uniforms an epoch
    reference = monte_carlo(pattern, 500, 30, seed=4, progress=False, keep_samples=True, method="shifts")
    for chunk in (1, 7, 30):
        again = monte_carlo(pattern, 500, 30, seed=4, progress=False, keep_samples=True, method="shifts",
                            chunk_size=chunk)
        assert np.array_equal(again.samples["tau_max"], reference.samples["tau_max"])
        assert np.array_equal(again.samples["tau_avg"], reference.samples["tau_avg"])
    monkeypatch.setattr(shifts, "CELLS", 16)              # the chain in slices of 16 cells
    sliced = monte_carlo(pattern, 500, 30, seed=4, progress=False, keep_samples=True, method="shifts")
    assert np.array_equal(sliced.samples["tau_avg"], reference.samples["tau_avg"])
    monkeypatch.setattr(shifts, "UNIT_VALUES", 30)        # 10 epochs a unit: other streams, same law
    other = monte_carlo(pattern, 500, 2000, seed=4, progress=False, method="shifts")
    assert abs(other.tau_avg.mean - exact_tau_avg(pattern, 500)) < 5 * other.tau_avg.stderr


def test_first_rounds_do_not_depend_on_the_horizon():
    pattern, root = ReshuffledCyclic(9, 2), seed_sequence(3)
    short = shift_chunk(pattern, 40, root, 5, 20)
    long = shift_chunk(pattern, 400, root, 5, 20)
    assert not np.array_equal(short[1], long[1])          # different horizons, different averages ...
    again = shift_chunk(pattern, 40, root, 5, 20)
    assert np.array_equal(short[0], again[0]) and np.array_equal(short[1], again[1])


def test_workers_give_the_same_replicates():
    from concurrent.futures import ThreadPoolExecutor

    pattern = ReshuffledCyclic(30, 4)
    alone = monte_carlo(pattern, 300, 50, seed=8, progress=False, keep_samples=True, chunk_size=9)
    with ThreadPoolExecutor(2) as pool:
        pooled = monte_carlo(pattern, 300, 50, seed=8, progress=False, keep_samples=True, chunk_size=9, executor=pool)
    assert np.array_equal(alone.samples["tau_avg"], pooled.samples["tau_avg"])


@pytest.mark.parametrize("n, s, rounds", [(7, 7, 10), (1, 1, 4), (6, 2, 1), (6, 2, 3)])
def test_degenerate_sizes(n, s, rounds):
    pattern = ReshuffledCyclic(n, s)
    tau_max, tau_avg = shift_chunk(pattern, rounds, seed_sequence(0), 0, 5)
    tau = per_round_delay(pattern.sample_batch(rounds, 5, seed_sequence(0)))  # deterministic here
    assert np.array_equal(tau_max, tau.max(axis=1))
    np.testing.assert_allclose(tau_avg, tau.mean(axis=1), rtol=0, atol=1e-12)


def test_auto_picks_shifts_where_they_apply(monkeypatch):
    import participation.expected.samplers.shifts as shifts

    calls = []
    original = shifts.shift_chunk
    monkeypatch.setattr(shifts, "shift_chunk", lambda *a: calls.append(a) or original(*a))
    monte_carlo(ReshuffledCyclic(20, 6), 90, 4, seed=1, progress=False)
    assert calls
    assert applies(ReshuffledCyclic(20, 5, "drop"))       # S | N: "drop" is "short"
    assert not applies(ReshuffledCyclic(20, 6, "drop"))
    assert not applies(ReshuffledCyclic(200, 2))          # an epoch of 100 rounds


@pytest.mark.parametrize("pattern, kwargs", [(Bernoulli(0.3, 10), {}), (ReshuffledCyclic(20, 6, "drop"), {}),
                                             (ReshuffledCyclic(10, 3), {"device": "cpu"})])
def test_shifts_refused_where_they_do_not_apply(pattern, kwargs):
    with pytest.raises(ValueError, match="method='shifts' needs a ReshuffledCyclic pattern"):
        monte_carlo(pattern, 20, 4, seed=0, method="shifts", **kwargs)


def test_bench_row_measures_both_sides():
    from verify import bench

    row = bench.reshuffled_ratio(quick=True)
    assert row.name == "Monte-Carlo E[tau_max], reshuffled cyclic (shifts)"
    assert row.baseline_seconds > 0 and row.fast_seconds > 0 and "method 'trace'" in row.note
