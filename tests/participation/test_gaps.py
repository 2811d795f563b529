"""The long-absence Monte-Carlo sampler (participation.expected.samplers.gaps).

Every closed piece is checked against an independent computation: the law of S against
sympy's series of its generating function, the conditioned short-gap paths against
enumerated compositions, the inversion tables against direct inversion, the cover-time
delays against the delays of the fully drawn trace, and the sampled means against the
exact expectations. At long horizons (P2 at T = 71570, H.8 at T = 95415) the tilt exists
however small the long-gap probability, the threshold leaves few rounds unresolved, and the
sampler agrees with the exact E[τ_avg] and does not depend on chunking.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import sympy as sp
from scipy import optimize, stats

from participation.delays import delay_metrics
from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo, paper_tau_max_bound
from participation.expected.samplers import gaps
from participation.patterns import Bernoulli, BiasedGroups, preset


def _pmf_by_series(p: float, threshold: int, terms: int) -> np.ndarray:
    """P(S = s) = [z^s] ρ / (1 − Σ_{g<H} p q^{g−1} z^g), expanded by sympy."""
    z = sp.symbols("z")
    q = sp.Rational(1) - sp.nsimplify(p)
    short = sum(sp.nsimplify(p) * q ** (g - 1) * z**g for g in range(1, threshold))
    series = sp.series(q ** (threshold - 1) / (1 - short), z, 0, terms).removeO()
    return np.array([float(series.coeff(z, s)) for s in range(terms)])


@pytest.mark.slow
@pytest.mark.parametrize("p, threshold", [(0.2, 10), (0.5, 3), (0.05, 6), (0.9, 4)])
def test_short_run_law_matches_its_generating_function(p, threshold):
    law = gaps._short_run_law(p, threshold, 400)
    expected = _pmf_by_series(p, threshold, 40)
    assert np.allclose(np.diff(law.cdf[:40], prepend=0.0), expected, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("p, threshold", [(0.2, 10), (0.3, 5)])
def test_tail_filter_is_one_minus_the_cdf(p, threshold):
    """Ṽ(r)·θ^r = P(S ≥ r), computed by a second linear filter."""
    law = gaps._short_run_law(p, threshold, 300)
    r = np.arange(1, 120)
    tail = law.v[r - 1] * law.theta ** r.astype(float)
    assert np.allclose(tail, 1.0 - law.cdf[r - 1], rtol=1e-9, atol=1e-13)


def test_inversion_tables_agree_with_direct_inversion():
    for p, threshold in [(0.2, 10), (0.03, 1), (0.7, 3), (1e-4, 40), (0.999, 2), (0.5, 3000)]:
        table = gaps._long_table(p, threshold)
        cells = np.flatnonzero(table >= 0)
        for edge in (0.0, 1.0 - 2.0**-40):
            direct = gaps._long_exact(p, threshold, (cells + edge) / 2**16, 10**9)
            assert np.array_equal(direct, table[cells])
    for p, threshold, length in [(0.2, 10, 500), (0.05, 30, 22528), (0.6, 4, 204800)]:
        law = gaps._short_run_law(p, threshold, length)
        cells = np.flatnonzero(law.table >= 0)
        for edge in (0.0, 1.0 - 2.0**-40):
            assert np.array_equal(gaps._invert_short(law, (cells + edge) / 2**16), law.table[cells])
        # a cell is left open (−1) exactly when a CDF value lies in [u/2^16, (u+1)/2^16)
        grid = np.arange(2**16 + 1) / 2**16
        open_cells = np.searchsorted(law.cdf, grid[:-1], side="right") != np.searchsorted(law.cdf, grid[1:], side="left")
        assert np.array_equal(law.table < 0, open_cells)


def _compositions(total: int, largest: int):
    for parts in range(1, total + 1):
        for combo in itertools.product(range(1, largest + 1), repeat=parts):
            if sum(combo) == total:
                yield combo


@pytest.mark.slow
@pytest.mark.parametrize("total", [0, 7])
def test_conditioned_short_paths_follow_the_composition_law(total):
    """Given S = s, each composition of s into gaps < H has probability ∝ Π p q^{g−1}."""
    p, threshold = 0.35, 4
    law = gaps._short_run_law(p, threshold, 200)
    rng = np.random.default_rng(0)
    draws = 6000
    seen = {}
    for _ in range(draws):
        offsets, end = gaps._segment_path(law, rng, total, 0)
        assert end == total
        key = tuple(np.diff(offsets, prepend=0))
        seen[key] = seen.get(key, 0) + 1
    if total == 0:
        assert seen == {(): draws}
        return
    combos = list(_compositions(total, threshold - 1))
    weight = np.array([np.prod([p * (1 - p) ** (g - 1) for g in c]) for c in combos])
    observed = np.array([seen.get(c, 0) for c in combos])
    assert observed.sum() == draws
    assert stats.chisquare(observed, weight / weight.sum() * draws).pvalue > 1e-4


@pytest.mark.slow
def test_paths_beyond_the_table_are_conditioned_on_reaching_it():
    """With S ≥ cap, the path has no long gap before the cap (then continues freely)."""
    p, threshold, cap = 0.4, 5, 30
    law = gaps._short_run_law(p, threshold, cap)
    rng = np.random.default_rng(1)
    for _ in range(300):
        offsets, end = gaps._segment_path(law, rng, None, math.inf)
        assert end >= cap and offsets[-1] == end
        assert np.diff(offsets, prepend=0).max() < threshold
    # the first gap's law given S ≥ cap, against the ratio of tails
    firsts = np.array([gaps._segment_path(law, rng, None, 1)[0][0] for _ in range(4000)])
    tail = lambda r: 1.0 if r <= 0 else 1.0 - law.cdf[r - 1]  # noqa: E731
    expected = np.array([p * (1 - p) ** (g - 1) * tail(cap - g) / tail(cap) for g in range(1, threshold)])
    observed = np.bincount(firsts, minlength=threshold)[1:]
    assert expected.sum() == pytest.approx(1.0)
    assert stats.chisquare(observed, expected * firsts.size).pvalue > 1e-4


CASES = [
    (np.full(6, 0.3), 70, None), (np.full(6, 0.3), 70, 8), (np.array([0.2, 0.5, 0.2, 0.9, 0.05]), 90, 5),
    (np.array([0.1, 0.3, 1.0]), 40, 4), (np.array([0.0, 0.3]), 30, 3), (np.full(3, 0.5), 64, 1),
    (np.full(4, 0.25), 33, 12),
]


@pytest.mark.parametrize("p, rounds, threshold", CASES)
def test_cover_time_delays_equal_those_of_the_drawn_trace(p, rounds, threshold):
    """Refinement at unresolved rounds (forced by large thresholds) is exact."""
    root = np.random.SeedSequence(11)
    tau_max, tau_avg = gaps.gap_chunk(p, rounds, root, 0, 25, threshold)
    for r in range(25):
        truth = delay_metrics(gaps.gap_trace(p, rounds, root, r, threshold))
        assert tau_max[r] == truth.tau_max and tau_avg[r] == pytest.approx(truth.tau_avg, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("p, rounds, threshold", [c for c in CASES if c[0].min() > 0])
def test_sampled_means_match_the_exact_expectations(p, rounds, threshold):
    reps = 4000 if threshold is None or threshold <= 4 else 1500  # forced refinement is slow
    tau_max, tau_avg = gaps.gap_chunk(p, rounds, np.random.SeedSequence(5), 0, reps, threshold)
    pattern = Bernoulli(p)
    for samples, exact in ((tau_max, exact_tau_max(pattern, rounds)), (tau_avg, exact_tau_avg(pattern, rounds))):
        assert abs(samples.mean() - exact) <= 4.5 * samples.std(ddof=1) / math.sqrt(reps)


def test_results_do_not_depend_on_chunking():
    p, rounds, root = np.full(30, 0.2), 150, np.random.SeedSequence(2)
    whole = gaps.gap_chunk(p, rounds, root, 240, 40)  # crosses a word block (256)
    parts = [gaps.gap_chunk(p, rounds, root, first, count) for first, count in ((240, 7), (247, 20), (267, 13))]
    for k in range(2):
        assert np.array_equal(whole[k], np.concatenate([part[k] for part in parts]))


def test_threshold_choice():
    assert gaps._choose_threshold(np.full(100, 0.2), 2000) == 10
    assert gaps._choose_threshold(np.ones(50), 1000) <= 2  # nothing is ever long
    assert gaps._choose_threshold(np.full(2, 0.5), 100) >= 1
    with pytest.raises(ValueError, match="threshold"):
        gaps.gap_chunk(np.full(3, 0.5), 10, np.random.SeedSequence(0), 0, 1, threshold=0)


def test_cleared_tables_are_rebuilt_the_same():
    """``clear_table_caches`` empties every kept table, and a call after it (a first call) gives
    the same replicates as one with the tables kept."""
    import participation
    from participation.expected import monte_carlo
    from participation.expected.samplers import markov_gaps, periodic, shifts
    from participation.expected.montecarlo import clear_table_caches
    from participation.patterns import ReshuffledCyclic

    cases = [(Bernoulli(0.2, 30), "gaps"), (participation.preset("P3", n_clients=20), "gaps"),
             (participation.preset("H8"), "gaps"), (participation.preset("cafed-temporal", n_clients=20), "gaps"),
             (ReshuffledCyclic(20, 4), "shifts")]
    for pattern, method in cases:
        kept = monte_carlo(pattern, 300, 12, seed=4, progress=False, keep_samples=True, method=method).samples
        clear_table_caches()
        for cached in (gaps._long_table, gaps._short_run_law, gaps._plan_cached, markov_gaps._markov_plan_cached,
                       shifts.transition_cdfs, periodic._laws_cached):
            assert cached.cache_info().currsize == 0
        rebuilt = monte_carlo(pattern, 300, 12, seed=4, progress=False, keep_samples=True, method=method).samples
        np.testing.assert_array_equal(kept["tau_max"], rebuilt["tau_max"])
        np.testing.assert_array_equal(kept["tau_avg"], rebuilt["tau_avg"])


# ---------------------------------------------------------------- long horizons


def _old_tilt(p, threshold):
    """θ as the sampler first solved for it: Σ_g w_g θ^{−g} = 1 on [1e-300^{1/H}, 1]."""
    g = np.arange(1, threshold, dtype=float)
    w = p * (1 - p) ** (g - 1)
    return optimize.brentq(lambda t: float(w @ t ** (-g)) - 1.0, 1e-300 ** (1 / threshold), 1.0,
                           xtol=1e-300, rtol=4 * np.finfo(float).eps)


@pytest.mark.parametrize("p, threshold", [(0.2, 10), (0.5, 3), (0.05, 6), (0.9, 4), (0.01, 300), (0.3, 2),
                                          (1e-9, 5), (0.5, 50)])
def test_tilt_agrees_with_the_first_bracket_where_that_worked(p, threshold):
    assert gaps._tilt(p, threshold) == pytest.approx(_old_tilt(p, threshold), rel=1e-14)


@pytest.mark.parametrize("p, threshold", [(0.2, 187), (0.2, 2805), (0.9, 300), (0.9, 400), (0.5, 60)])
def test_tilt_exists_however_small_the_long_gap_probability(p, threshold):
    """ρ = q^{H−1} below float rounding: Σ w_g rounds to 1 and the first bracket lost its
    sign change (brentq refused it); θ is then 1 to float precision."""
    theta = gaps._tilt(p, threshold)
    rho = (1 - p) ** (threshold - 1)
    assert 0 < theta <= 1 and 1 - theta <= 2 * rho / p + 1e-16
    law = gaps._short_run_law(p, threshold, 4000)  # builds without error
    assert law is not None and np.all(np.diff(law.cdf) >= 0)


def test_threshold_keeps_unresolved_rounds_rare_at_long_horizons():
    """The refinement cost counts every unresolved round: at T = 71570 (P2) and 95415
    (H.8) H stays below a threshold that would leave every round unresolved."""
    p2 = np.full(100, 0.2)
    h8 = BiasedGroups(100).client_probabilities()
    for p, rounds in ((p2, 71569), (p2, 71570), (p2, 10**7), (h8, 95414), (h8, 95415), (h8, 10**6)):
        h = gaps._choose_threshold(p, rounds)
        unresolved = rounds * np.prod(1 - (1 - p) ** (h - 1))
        assert 2 < h < 20 and unresolved < 10, (rounds, h, unresolved)


@pytest.mark.parametrize("name, rounds", [("P2", 71570), ("H8", 95415)])
def test_gap_sampler_runs_and_agrees_at_the_reported_horizons(name, rounds):
    pattern = preset(name)
    mc = monte_carlo(pattern, rounds, 6, seed=2, progress=False, method="gaps")
    exact = exact_tau_avg(pattern, rounds)
    assert abs(mc.tau_avg.mean - exact) <= 5 * mc.tau_avg.stderr
    assert 0 < mc.tau_max.mean < 3 * paper_tau_max_bound(pattern, rounds).value


def test_gap_sampler_is_chunk_invariant_at_long_horizons():
    p, rounds, root = np.full(100, 0.2), 71570, np.random.SeedSequence(9)
    whole = gaps.gap_chunk(p, rounds, root, 0, 4)
    parts = [gaps.gap_chunk(p, rounds, root, first, count) for first, count in ((0, 1), (1, 3))]
    for k in range(2):
        assert np.array_equal(whole[k], np.concatenate([part[k] for part in parts]))
