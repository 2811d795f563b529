"""monte_carlo(..., method="subsets"): Uniform (Case 1) delays from the S ids of each round.

Every replicate must be an exact draw of the pattern's law: checked against the law of
(τ_max, τ_avg) enumerated over all C(N, S)^T sequences, the subsets against the uniform
law, and the delays against ``per_round_delay`` of the same subsets; for both samplers
(the vectorised Floyd and ``Generator.choice``), across several units and blocks of rounds.
"""
import itertools
import tracemalloc
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import stats

from participation._random import seed_sequence
from participation.delays import per_round_delay
from participation.expected import exact_tau_avg, monte_carlo
from participation.expected.samplers import subsets as sub
from participation.patterns import Bernoulli, ReshuffledCyclic, Uniform


@pytest.fixture(params=["floyd", "choice"])
def sampler(request, monkeypatch):
    """Both samplers of a uniform S-subset, whatever (N, S) would pick."""
    monkeypatch.setattr(sub, "uses_choice", lambda n, s: request.param == "choice")
    return request.param


@pytest.fixture
def small_units(monkeypatch):
    """Units of 3 rounds (S = 3) and Floyd blocks of at most 2 rounds: short runs cross both."""
    monkeypatch.setattr(sub, "UNIT_VALUES", 7)
    monkeypatch.setattr(sub, "_block_rounds", lambda n, count, unit: min(2, unit))


def samples(pattern, rounds, reps, seed=3, **kwargs):
    result = monte_carlo(pattern, rounds, reps, seed=seed, progress=False, keep_samples=True,
                         method=kwargs.pop("method", "subsets"), **kwargs)
    return result.samples["tau_max"], result.samples["tau_avg"]


def chi_square(observed: Counter, law: dict, total: int) -> float:
    """p-value of the observed counts against ``law`` (cells expected below 5 pooled)."""
    keys = sorted(law)
    expected = np.array([law[k] * total for k in keys])
    counts = np.array([observed.get(k, 0) for k in keys], dtype=float)
    small = expected < 5
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        counts = np.append(counts[~small], counts[small].sum())
    return float(stats.chisquare(counts, expected).pvalue)


def exact_law(n, s, rounds):
    """P(τ_max = a, Σ_t τ_t = b) over all C(N, S)^T sequences, by ``per_round_delay``."""
    masks = np.zeros((len(list(itertools.combinations(range(n), s))), n), dtype=bool)
    for i, chosen in enumerate(itertools.combinations(range(n), s)):
        masks[i, list(chosen)] = True
    sequences = np.array(list(itertools.product(range(len(masks)), repeat=rounds)))
    tau = per_round_delay(masks[sequences])
    counts = Counter(zip(tau.max(axis=1).tolist(), tau.sum(axis=1).tolist()))
    return {key: c / len(sequences) for key, c in counts.items()}


# ------------------------------------------------------------------ exactness of the law

@pytest.mark.slow
@pytest.mark.parametrize("n, s, rounds", [(4, 2, 3), (5, 2, 4), (4, 3, 3), (3, 1, 5)])
def test_joint_law_of_tau_max_and_tau_avg_is_exact(n, s, rounds, sampler):
    law = exact_law(n, s, rounds)
    reps = 20_000
    tau_max, tau_avg = samples(Uniform(n, s), rounds, reps, seed=11)
    observed = Counter(zip(tau_max.tolist(), np.rint(tau_avg * rounds).astype(int).tolist()))
    assert set(observed) <= set(law)                      # nothing outside the support
    assert chi_square(observed, law, reps) > 1e-3
    mean_max = sum(a * p for (a, _), p in law.items())
    assert abs(tau_max.mean() - mean_max) < 4 * tau_max.std() / np.sqrt(reps)


def test_exact_law_matches_the_closed_form_of_e_tau_avg():
    """The enumeration itself is right: its E[τ_avg] is the exact formula's."""
    law = exact_law(5, 2, 4)
    assert sum(b / 4 * p for (_, b), p in law.items()) == pytest.approx(exact_tau_avg(Uniform(5, 2), 4), abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("n, s", [(6, 3), (7, 2), (5, 4)])
def test_subsets_are_uniform_and_rounds_independent(n, s, sampler, small_units):
    rounds, reps = 6, 4000
    ids = sub.subsets(Uniform(n, s), rounds, seed_sequence(4), 0, reps)
    assert ids.shape == (reps, rounds, s) and (np.diff(ids, axis=2) > 0).all()
    assert ids.min() >= 0 and ids.max() < n
    cells = {c: i for i, c in enumerate(itertools.combinations(range(n), s))}
    index = np.array([cells[tuple(row)] for row in ids.reshape(-1, s).tolist()]).reshape(reps, rounds)
    law = {i: 1 / len(cells) for i in range(len(cells))}
    assert chi_square(Counter(index.ravel().tolist()), law, index.size) > 1e-3
    pairs = index[:, 2] * len(cells) + index[:, 3]          # rounds 2 and 3 lie in different units
    joint = {i: 1 / len(cells) ** 2 for i in range(len(cells) ** 2)}
    assert chi_square(Counter(pairs.tolist()), joint, reps) > 1e-3


def test_unbiased_candidates_when_most_words_are_rejected():
    """N = 3·2^30: a plain multiply-shift would give k ≡ 0 (mod 3) half the time; Lemire's
    rejection (a quarter of the words here) makes the residues uniform."""
    n = 3 << 30
    k = sub._floyd_candidates(seed_sequence(1), 0, 0, 30_000, n, 1).ravel()
    assert k.dtype == np.int64 and k.min() >= 0 and k.max() < n
    counts = np.bincount(k % 3, minlength=3)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_candidates_lie_in_floyds_ranges():
    k = sub._floyd_candidates(seed_sequence(2), 5, 1, 500, 10, 4)
    assert k.shape == (4, 500) and k.dtype == np.int32
    for j in range(4):
        assert k[j].min() == 0 and k[j].max() == 10 - 4 + j


# ------------------------------------------------------------------ delays of the subsets

@pytest.mark.parametrize("n, s, rounds, count", [(4, 2, 3, 50), (10, 3, 57, 9), (40, 3, 200, 13), (7, 3, 1, 4),
                                                 (9, 3, 31, 1), (5, 3, 40, 6)])
def test_delays_are_those_of_the_drawn_subsets(n, s, rounds, count, sampler, small_units):
    pattern, root = Uniform(n, s), seed_sequence(5)
    ids = sub.subsets(pattern, rounds, root, 3, count)
    mask = np.zeros((count, rounds, n), dtype=bool)
    np.put_along_axis(mask, ids, True, axis=2)
    tau = per_round_delay(mask)
    tau_max, tau_avg = sub.subset_chunk(pattern, rounds, root, 3, count)
    assert tau_max.dtype == np.int64 and np.array_equal(tau_max, tau.max(axis=1))
    np.testing.assert_allclose(tau_avg, tau.mean(axis=1), rtol=0, atol=1e-12)


def test_default_sizes_without_patches():
    for n, s, rounds in [(100, 20, 700), (2000, 900, 12), (1, 1, 3), (300, 1, 50)]:
        pattern, root = Uniform(n, s), seed_sequence(6)
        ids = sub.subsets(pattern, rounds, root, 0, 3)
        mask = np.zeros((3, rounds, n), dtype=bool)
        np.put_along_axis(mask, ids, True, axis=2)
        tau = per_round_delay(mask)
        tau_max, tau_avg = sub.subset_chunk(pattern, rounds, root, 0, 3)
        assert np.array_equal(tau_max, tau.max(axis=1)) and np.allclose(tau_avg, tau.mean(axis=1), rtol=0, atol=1e-12)
    assert sub.uses_choice(10_000, 2000) and not sub.uses_choice(100, 20)


def test_every_client_every_round():
    tau_max, tau_avg = samples(Uniform(5, 5), 30, 10)
    assert not tau_max.any() and not tau_avg.any()
    assert np.array_equal(tau_max, samples(Uniform(5, 5), 30, 10, method="trace")[0])


@pytest.mark.slow
def test_means_agree_with_trace_and_the_exact_e_tau_avg():
    pattern, rounds, reps = Uniform(20, 4), 150, 3000
    fast, slow = samples(pattern, rounds, reps, seed=1), samples(pattern, rounds, reps, seed=2, method="trace")
    for a, b in zip(fast, slow):
        assert abs(a.mean() - b.mean()) < 4 * np.hypot(a.std(), b.std()) / np.sqrt(reps)
    exact = exact_tau_avg(pattern, rounds)
    for _, tau_avg in (fast, slow):
        assert abs(tau_avg.mean() - exact) < 4 * tau_avg.std() / np.sqrt(reps)


# ------------------------------------------------------------------ streams and chunking

def test_same_numbers_whatever_the_chunking_or_the_workers(sampler, small_units):
    pattern, rounds = Uniform(9, 3), 40
    reference = samples(pattern, rounds, 20)
    for chunk in (1, 7, None):
        other = samples(pattern, rounds, 20, chunk_size=chunk)
        assert np.array_equal(reference[0], other[0]) and np.array_equal(reference[1], other[1])
    with ThreadPoolExecutor(3) as pool:
        pooled = samples(pattern, rounds, 20, chunk_size=4, executor=pool)
    assert np.array_equal(reference[0], pooled[0]) and np.array_equal(reference[1], pooled[1])
    later = samples(pattern, rounds, 6, _first=10)
    assert np.array_equal(reference[0][10:16], later[0]) and np.array_equal(reference[1][10:16], later[1])


def test_default_chunking_and_workers_at_the_default_sizes():
    pattern, rounds = Uniform(30, 7), 300
    reference = samples(pattern, rounds, 40)
    for chunk in (1, 7):
        assert all(np.array_equal(a, b) for a, b in zip(reference, samples(pattern, rounds, 40, chunk_size=chunk)))
    with ThreadPoolExecutor(2) as pool:
        pooled = samples(pattern, rounds, 40, chunk_size=9, executor=pool)
    assert all(np.array_equal(a, b) for a, b in zip(reference, pooled))


def test_a_longer_horizon_extends_the_same_rounds(sampler, small_units):
    pattern, root = Uniform(8, 3), seed_sequence(9)
    short, long = sub.subsets(pattern, 10, root, 2, 5), sub.subsets(pattern, 25, root, 2, 5)
    assert np.array_equal(short, long[:, :10])


def test_streams_differ_from_the_traces():
    pattern, root = Uniform(10, 3), seed_sequence(0)
    ids = sub.subsets(pattern, 50, root, 0, 1)[0]
    trace = np.sort(np.nonzero(pattern.sample_batch(50, 1, root)[0])[1].reshape(50, 3), axis=1)
    assert not np.array_equal(ids, trace)


# ------------------------------------------------------------------ dispatch, memory, errors

def test_auto_picks_subsets_for_uniform(monkeypatch):
    calls = []
    original = sub.subset_chunk
    monkeypatch.setattr(sub, "subset_chunk", lambda *a: calls.append(a) or original(*a))
    auto = monte_carlo(Uniform(12, 3), 60, 10, seed=1, progress=False)
    assert calls
    explicit = monte_carlo(Uniform(12, 3), 60, 10, seed=1, progress=False, method="subsets")
    assert auto.tau_max == explicit.tau_max and auto.tau_avg == explicit.tau_avg
    calls.clear()
    monte_carlo(ReshuffledCyclic(12, 3), 60, 4, seed=1, progress=False)
    monte_carlo(Bernoulli(0.3, 12), 60, 4, seed=1, progress=False)
    assert not calls


class Tweaked(Uniform):
    def _from_uniforms(self, u, first_round):
        return super()._from_uniforms(u, first_round)


@pytest.mark.parametrize("pattern, kwargs", [(Bernoulli(0.3, 10), {}), (ReshuffledCyclic(10, 3), {}),
                                             (Uniform(10, 3), {"device": "cpu"}), (Tweaked(10, 3), {})])
def test_subsets_refused_where_it_does_not_apply(pattern, kwargs):
    with pytest.raises(ValueError, match="method='subsets' needs a Uniform pattern") as err:
        monte_carlo(pattern, 20, 4, seed=0, method="subsets", **kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("args, kwargs, match", [
    ((0, 5), {}, "rounds must be an integer ≥ 1"),
    ((10, 0), {}, "reps must be an integer ≥ 1"),
    ((10, 5), {"chunk_size": 0}, "chunk_size must be an integer ≥ 1"),
    ((10, 5), {"confidence": 1.0}, "confidence must lie in"),
    ((10, 5), {"quantiles": (1.5,)}, "quantiles must lie in"),
    ((10, 5), {"seed": -1}, "seed must be an integer ≥ 0"),
    ((10, 5), {"method": "subset"}, "method must be one of 'auto', 'trace', 'gaps', 'shifts', 'epochs', 'subsets'"),
])
def test_bad_input_still_raises(args, kwargs, match):
    kwargs = {"method": "subsets", "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        monte_carlo(Uniform(8, 2), *args, progress=False, **kwargs)


def test_memory_is_checked_before_drawing(monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.001")
    with pytest.raises(ValueError, match="method 'subsets'") as err:
        monte_carlo(Uniform(100, 20), 20_000, 10, seed=0, method="subsets", progress=False)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("n, s, rounds, count", [(100, 20, 2000, 60), (1000, 100, 3000, 20), (50, 45, 5000, 16),
                                                 (10_000, 2000, 100, 3)])
def test_memory_estimate_covers_the_peak(n, s, rounds, count):
    pattern = Uniform(n, s)
    tracemalloc.start()
    try:
        sub.subset_chunk(pattern, rounds, seed_sequence(1), 0, count)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= sub.chunk_bytes(pattern, rounds, count)
    assert sub.chunk_bytes(pattern, rounds, sub.chunk_size(pattern, rounds)) <= sub.CHUNK_BYTES


def test_bench_row_measures_both_sides():
    from verify import bench

    row = bench.uniform_ratio(quick=True)
    assert row.name == "Monte-Carlo E[tau_max], uniform sampling (P1, subsets)"
    assert row.baseline_seconds > 0 and row.fast_seconds > 0 and "method 'trace'" in row.note
