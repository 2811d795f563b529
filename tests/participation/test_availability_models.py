"""Availability models (participation.patterns.availability) and their expected delays
(participation.expected.laws.availability_laws): on/off cycles (FedAU's cyclic participation),
diurnal day/night groups (Zhu et al., ICLR 2022), never-available clients, and selection
among available clients.

Every closed form is checked against an independent computation: enumeration of every
phase combination or every trace on tiny cases, a plain-Python reference walk, and
Monte-Carlo. Statistical checks are z-tests at ``Z`` standard errors with fixed seeds.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from participation import delay_metrics
from participation._random import keyed_uniforms
from participation.expected import (exact_tau_avg, exact_tau_max, exact_tau_max_tail, exact_tau_t, monte_carlo,
                                    paper_tau_max_bound)
from participation.expected.laws.availability_laws import on_off_longest_absence
from participation.patterns import (Bernoulli, Diurnal, Markov, OnOffCycles, ReshuffledCyclic, Selected, Uniform,
                                    preset, preset_names)
from participation.patterns.sampling import EPOCH_BLOCK
from tests.participation import test_patterns as base

Z = base.Z

# --------------------------------------------------------------------------- the reproducibility contract
PATTERNS = {
    "onoff-random": lambda: OnOffCycles(9, 7, [0, 1, 2, 3, 4, 5, 6, 7, 3]),
    "onoff-fixed": lambda: OnOffCycles(4, 5, [1, 2, 5, 0], phases=[0, 3, 4, 1]),
    "onoff-probability": lambda: OnOffCycles.from_probability(6, 10, [0.05, 0.1, 0.33, 0.5, 0.9, 1.0]),
    "onoff-groups": lambda: OnOffCycles.periodic_groups(10, 3, rounds_per_group=2),
    "diurnal-linear": lambda: Diurnal(11, 4, 6),
    "diurnal-cosine": lambda: Diurnal(10, 6, 9, power=2.0, shape="cosine", day_fraction=0.3),
    "bernoulli-never": lambda: Bernoulli([0.0, 0.3, 1.0, 0.0, 0.6]),
    "selected-uniform": lambda: Selected(Bernoulli(0.5, 9), 3),
    "selected-reshuffled": lambda: Selected(Bernoulli([0.0, 0.2, 0.5, 0.9, 1.0, 0.4, 0.7]), 2, "reshuffled"),
    "selected-markov": lambda: Selected(Markov.from_rates([0.1, 0.5, 0.3], [0.3, 0.9, 0.2]), 2, "reshuffled"),
    "selected-onoff": lambda: Selected(OnOffCycles(8, 4, 2), 3, "uniform"),
    "selected-nested": lambda: Selected(Selected(Bernoulli(0.7, 10), 6, "reshuffled"), 3, "uniform"),
}


@pytest.fixture(params=list(PATTERNS), ids=list(PATTERNS))
def pattern(request):
    return PATTERNS[request.param]()


class TestAvailabilityReproducibility(base.TestReproducibility):
    """The contract tests of test_patterns.py (sample = batch row 0, chunked rounds = whole,
    first_replicate slices, seed types, invalid arguments) on every new pattern."""


def _brute(fn, rounds, n):
    return np.array([[bool(fn(t, i)) for i in range(n)] for t in range(rounds)])


# --------------------------------------------------------------------------- OnOffCycles
class TestOnOffCycles:
    @pytest.mark.parametrize("start", [0, 13, 10**6 + 1])
    def test_definition_with_fixed_phases(self, start):
        period, active, phases = 7, np.array([0, 1, 3, 6, 7, 2]), np.array([0, 6, 2, 5, 1, 4])
        pattern = OnOffCycles(6, period, active, phases=phases)
        assert pattern.deterministic
        mask = pattern.sample(40, None, start=start).mask
        expected = _brute(lambda t, i: (t + start + phases[i]) % period < active[i], 40, 6)
        assert np.array_equal(mask, expected)
        assert pattern.sample(40, 1) == pattern.sample(40, 2)

    def test_random_phases_follow_the_cycle(self):
        """Each replicate is the cycle of some phase: row r equals the fixed-phase pattern
        at the phases read back from round 0..C−1."""
        period, active = 6, np.array([1, 2, 3, 5, 4])
        pattern = OnOffCycles(5, period, active)
        assert not pattern.deterministic
        batch = pattern.sample_batch(50, 20, 4)
        for row in batch:
            # phase: the φ whose cycle matches the first C rounds
            phases = [next(f for f in range(period) if all(((t + f) % period < a) == row[t, i] for t in range(period)))
                      for i, a in enumerate(active)]
            assert np.array_equal(row, OnOffCycles(5, period, active, phases=phases).sample(50).mask)

    @pytest.mark.slow
    def test_phases_uniform_and_independent(self):
        """φ_i uniform on {0..C−1} (client i on at round 0 with probability a_i/C) and
        independent across clients (two clients on together with probability a_0 a_1/C²)."""
        period, active, reps = 8, np.array([1, 3, 5]), 6000
        first = OnOffCycles(3, period, active).sample_batch(1, reps, 9)[:, 0]
        base._binomial_z(first.sum(axis=0), reps, active / period, "P(on at t=0) = a/C")
        base._binomial_z((first[:, 0] & first[:, 1]).sum(), reps, active[0] * active[1] / period**2, "joint")
        base._binomial_z((first[:, 1] & first[:, 2]).sum(), reps, active[1] * active[2] / period**2, "joint")
        # the round of first selection is uniform over the C phases' offsets
        batch = OnOffCycles(1, period, 1).sample_batch(period, reps, 2)[:, :, 0]
        base._binomial_z(batch.sum(axis=0), reps, np.full(period, 1 / period), "phase of a single-round cycle")

    def test_from_probability(self):
        pattern = OnOffCycles.from_probability(6, 10, [0.0, 0.04, 0.05, 0.15, 0.5, 1.0])
        assert pattern.active.tolist() == [0, 0, 1, 2, 5, 10]  # round(C·p), halves up
        assert pattern.duty_cycle.tolist() == [0.0, 0.0, 0.1, 0.2, 0.5, 1.0]
        assert OnOffCycles.from_probability(4, 100, 0.1).active.tolist() == [10] * 4
        with pytest.raises(ValueError, match="got 1.2"):
            OnOffCycles.from_probability(2, 10, [0.5, 1.2])

    def test_periodic_groups(self):
        pattern = OnOffCycles.periodic_groups(10, 3, rounds_per_group=2)
        assert pattern.deterministic and pattern.period == 6
        mask = pattern.sample(30).mask
        group = np.arange(10) * 3 // 10
        expected = _brute(lambda t, i: (t % 6) // 2 == group[i], 30, 10)
        assert np.array_equal(mask, expected)
        assert delay_metrics(mask).tau_max == 4  # each group waits 2 × 2 rounds
        with pytest.raises(ValueError, match="n_groups=11"):
            OnOffCycles.periodic_groups(10, 11)

    @pytest.mark.parametrize("kwargs, shown", [
        (dict(n_clients=3, period=5, active=-1), "-1"), (dict(n_clients=3, period=5, active=6), "6"),
        (dict(n_clients=3, period=5, active=[1, 2.5, 3]), "2.5"), (dict(n_clients=3, period=5, active=[1, 2]), r"\(2,\)"),
        (dict(n_clients=3, period=5, active="2"), "'2'"), (dict(n_clients=3, period=5, active=True), "True"),
        (dict(n_clients=3, period=0, active=0), "0"), (dict(n_clients=0, period=5, active=1), "0"),
        (dict(n_clients=2, period=5, active=1, phases=[0, 5]), "5"), (dict(n_clients=2, period=5, active=1, phases=[-1, 0]), "-1"),
        (dict(n_clients=2, period=5, active=1, phases=[0, 1, 2]), r"\(3,\)"),
    ])
    def test_invalid(self, kwargs, shown):
        with pytest.raises(ValueError, match=shown) as err:
            OnOffCycles(**kwargs)
        assert "\n" not in str(err.value)


def _phase_enumeration(n, period, active, rounds):
    """E[τ_t] and E[τ_max] over all C^N phase combinations, each trace built from the
    definition (not from the pattern's sampler)."""
    tau, tau_max, combos = 0.0, 0.0, period**n
    for phases in itertools.product(range(period), repeat=n):
        mask = _brute(lambda t, i: (t + phases[i]) % period < active[i], rounds, n)
        m = delay_metrics(mask)
        tau = tau + m.tau / combos
        tau_max += m.tau_max / combos
    return tau, tau_max


class TestOnOffExact:
    @pytest.mark.parametrize("period, active, rounds", [
        (4, [1, 2, 3], 9), (3, [1, 1, 2], 7), (5, [2, 4], 12), (4, [1, 4, 2], 3), (2, [1, 1, 1, 1], 5),
        (6, [1, 3], 4), (4, [0, 2, 3], 6), (1, [1, 1], 3), (3, [3, 3], 4),
    ])
    def test_matches_enumeration_of_all_phases(self, period, active, rounds):
        n = len(active)
        tau, tau_max = _phase_enumeration(n, period, active, rounds)
        pattern = OnOffCycles(n, period, active)
        assert np.allclose(exact_tau_t(pattern, rounds), tau, atol=1e-12)
        assert exact_tau_avg(pattern, rounds) == pytest.approx(tau.mean(), abs=1e-12)
        assert exact_tau_max(pattern, rounds) == pytest.approx(tau_max, abs=1e-12)

    def test_tau_max_law_matches_enumeration(self):
        period, active, rounds = 5, [1, 3, 2], 11
        counts = np.zeros(rounds + 1)
        for phases in itertools.product(range(period), repeat=3):
            counts[delay_metrics(_brute(lambda t, i: (t + phases[i]) % period < active[i], rounds, 3)).tau_max] += 1
        tail = 1 - np.cumsum(counts)[:-1] / period**3  # P(τ_max ≥ l), l = 1..T
        assert np.allclose(exact_tau_max_tail(OnOffCycles(3, period, active), rounds), tail, atol=1e-12)

    def test_longest_absence_per_phase(self):
        """m(φ) against the longest run of zeros of each single-client trace."""
        period = 9
        for rounds in (4, 9, 25):
            longest = on_off_longest_absence(np.arange(period + 1), period, rounds)
            for a in range(period + 1):
                for phi in range(period):
                    mask = OnOffCycles(1, period, a, phases=[phi]).sample(rounds).mask
                    assert longest[a, phi] == base._longest_absence(mask), (a, phi, rounds)

    @pytest.mark.parametrize("pattern, rounds", [
        (OnOffCycles.from_probability(30, 12, np.linspace(0.05, 0.9, 30)), 300),
        (preset("fedau-cyclic", n_clients=40, period=30, p=0.2), 250),
    ])
    def test_agrees_with_monte_carlo(self, pattern, rounds):
        mc = monte_carlo(pattern, rounds, 400, seed=3, progress=False)
        assert abs(mc.tau_avg.mean - exact_tau_avg(pattern, rounds)) <= 4.5 * mc.tau_avg.stderr + 1e-9
        assert abs(mc.tau_max.mean - exact_tau_max(pattern, rounds)) <= 4.5 * mc.tau_max.stderr + 1e-9

    def test_fixed_phases_are_their_own_expectation(self):
        pattern = OnOffCycles(3, 4, [1, 2, 3], phases=[3, 0, 1])
        m = delay_metrics(pattern.sample(20))
        assert exact_tau_avg(pattern, 20) == pytest.approx(m.tau_avg) and exact_tau_max(pattern, 20) == m.tau_max

    def test_no_paper_bound(self):
        with pytest.raises(ValueError, match="no bound"):
            paper_tau_max_bound(OnOffCycles(3, 4, 2), 10)


def test_on_off_cycles_with_a_long_period():
    """The longest absence per phase is a closed form: a period of 10^5 once needed a
    (phases × 2·period) table."""
    pattern = OnOffCycles.from_probability(100, 10**5, 0.1)
    top = exact_tau_max(pattern, 3 * 10**5)
    assert 10**5 - 10**4 <= top <= 10**5


# --------------------------------------------------------------------------- Diurnal
def _clipped_binomial_mean(s, q, low, high):
    return sum(math.comb(s, k) * q**k * (1 - q) ** (s - k) * min(max(k, low), high) for k in range(s + 1))


class TestDiurnal:
    def test_day_probability(self):
        linear = Diurnal(10, 4, 8).day_probability(0, 16)
        assert linear[:8] == pytest.approx([1, 0.75, 0.5, 0.25, 0, 0.25, 0.5, 0.75])
        assert linear[8:] == pytest.approx(linear[:8])
        cosine = Diurnal(10, 4, 8, power=2.0, shape="cosine").day_probability(3, 5)
        assert cosine == pytest.approx([((math.cos(2 * math.pi * t / 8) + 1) / 2) ** 2 for t in (3, 4)])

    @pytest.mark.parametrize("n, s, day_fraction, d", [(10, 4, 0.5, 5), (10, 6, 0.3, 3), (7, 7, 0.5, 4), (9, 2, 0.0, 0),
                                                       (9, 2, 1.0, 9), (5, 3, 0.25, 1)])
    def test_groups_and_exact_size(self, n, s, day_fraction, d):
        pattern = Diurnal(n, s, 5, day_fraction=day_fraction)
        assert pattern.day_clients == d  # round(N·day_fraction), halves up
        batch = pattern.sample_batch(300, 4, 1)
        assert (batch.sum(axis=-1) == s).all()
        day = batch[..., :d].sum(axis=-1)
        low, high = max(0, s - (n - d)), min(s, d)
        assert day.min() >= low and day.max() <= high

    def test_expected_day_count_closed_form(self):
        pattern = Diurnal(10, 6, 7, power=1.5, shape="cosine", day_fraction=0.3)
        q = pattern.day_probability(0, 7)
        expected = [_clipped_binomial_mean(6, float(v), 0, 3) for v in q]  # D = 3, M = 7: max(0, S − M) = 0
        assert pattern.expected_day_count(0, 7) == pytest.approx(expected, abs=1e-12)
        p = pattern.inclusion_probabilities(0, 7)
        assert p.sum(axis=1) == pytest.approx(np.full(7, 6.0))  # Σ_i P(i ∈ S_t) = S

    @pytest.mark.parametrize("pattern", [Diurnal(10, 6, 6, power=2.0, shape="cosine", day_fraction=0.3),
                                         Diurnal(12, 5, 4), Diurnal(8, 6, 5, power=0.5, day_fraction=0.75)],
                             ids=["cosine-capped", "linear", "sqrt-capped"])
    def test_marginal_inclusion_matches_closed_form(self, pattern):
        """Counts of client i at phase slot c ~ Binomial(#rounds at c, P(i ∈ S_t)): rounds are
        independent and identically distributed within a slot."""
        period, cycles, reps = pattern.period, 300, 8
        batch = pattern.sample_batch(period * cycles, reps, 21)
        per_slot = batch.reshape(reps, cycles, period, pattern.n_clients).sum(axis=(0, 1))  # (slot, client)
        base._binomial_z(per_slot, reps * cycles, pattern.inclusion_probabilities(0, period), "P(i ∈ S_t)")

    @pytest.mark.slow
    def test_day_count_law(self):
        """The day count at each phase is clip(Binomial(S, q_t), max(0, S − M), min(S, D))."""
        pattern = Diurnal(10, 6, 6, shape="cosine", day_fraction=0.3)
        d, s, period, reps = 3, 6, 6, 3000
        day = pattern.sample_batch(period, reps, 5)[..., :d].sum(axis=-1)  # (reps, slot)
        for slot, q in enumerate(pattern.day_probability(0, period)):
            pmf = stats.binom.pmf(np.arange(s + 1), s, q)
            law = np.zeros(s + 1)
            np.add.at(law, np.clip(np.arange(s + 1), 0, d), pmf)
            base._binomial_z(np.bincount(day[:, slot], minlength=s + 1), reps, law, f"slot {slot}")

    def test_uniform_within_group(self):
        pattern = Diurnal(9, 4, 4, day_fraction=4 / 9)
        mask = pattern.sample(4 * 2000, 3).mask
        rows = mask[1::4]  # phase 1/4: q = 1/2
        share = rows[:, :4].sum(axis=1) / 4
        # given the day count k of a round, each day client is in with probability k/4
        base._zcheck(rows[:, :4].sum(axis=0), np.full(4, share.sum()), np.sqrt((share * (1 - share)).sum()), "day clients")
        share = rows[:, 4:].sum(axis=1) / 5
        base._zcheck(rows[:, 4:].sum(axis=0), np.full(5, share.sum()), np.sqrt((share * (1 - share)).sum()), "night clients")

    def test_no_exact_formula(self):
        pattern = preset("diurnal")
        for call in (exact_tau_t, exact_tau_avg, exact_tau_max, exact_tau_max_tail):
            with pytest.raises(ValueError, match="use monte_carlo"):
                call(pattern, 50)
        mc = monte_carlo(pattern, 200, 40, seed=0, progress=False)
        assert 0 < mc.tau_avg.mean < mc.tau_max.mean <= 200

    @pytest.mark.parametrize("kwargs, shown", [
        (dict(per_round=11), "S=11"), (dict(per_round=0), "0"), (dict(period=0), "0"), (dict(period=2.5), "2.5"),
        (dict(power=0.0), "0.0"), (dict(power=float("inf")), "inf"), (dict(shape="square"), "'square'"),
        (dict(day_fraction=1.5), "1.5"), (dict(day_fraction=-0.1), "-0.1"),
    ])
    def test_invalid(self, kwargs, shown):
        args = dict(n_clients=10, per_round=4, period=6) | kwargs
        with pytest.raises(ValueError, match=shown) as err:
            Diurnal(**args)
        assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- never-available clients
def _bernoulli_enumeration(p, rounds):
    n = len(p)
    tau, tau_max = 0.0, 0.0
    for bits in itertools.product([False, True], repeat=rounds * n):
        mask = np.array(bits).reshape(rounds, n)
        weight = float(np.prod(np.where(mask, p, 1 - np.asarray(p))))
        if weight:
            m = delay_metrics(mask)
            tau, tau_max = tau + weight * m.tau, tau_max + weight * m.tau_max
    return tau, tau_max


class TestNeverAvailable:
    def test_bernoulli_allows_zero(self):
        pattern = Bernoulli([0.0, 0.4, 1.0])
        batch = pattern.sample_batch(300, 3, 0)
        assert not batch[..., 0].any() and batch[..., 2].all()
        assert not Bernoulli(0.0, 4).sample(50, 1).mask.any()
        assert pattern.min_probability(10) == 0.0

    @pytest.mark.parametrize("p, rounds", [([0.0, 0.3, 0.6], 4), ([0.0, 0.0], 3), ([0.5, 0.0], 5)])
    def test_exact_matches_enumeration(self, p, rounds):
        tau, tau_max = _bernoulli_enumeration(p, rounds)
        pattern = Bernoulli(p)
        assert np.allclose(tau, np.arange(1, rounds + 1)) and tau_max == pytest.approx(rounds)  # the enumeration itself
        assert np.array_equal(exact_tau_t(pattern, rounds), np.arange(1, rounds + 1))
        assert exact_tau_max(pattern, rounds) == rounds
        assert exact_tau_avg(pattern, rounds) == (rounds + 1) / 2
        assert np.array_equal(exact_tau_max_tail(pattern, rounds), np.ones(rounds))

    def test_long_horizon(self):
        pattern, rounds = Bernoulli(np.r_[0.0, np.full(99, 0.2)]), 5000
        assert exact_tau_avg(pattern, rounds) == (rounds + 1) / 2 and exact_tau_max(pattern, rounds) == rounds
        assert exact_tau_avg(Bernoulli(0.0, 3), 7) == 4.0

    @pytest.mark.parametrize("method", ["gaps", "trace"])
    def test_monte_carlo(self, method):
        pattern, rounds = Bernoulli([0.0, 0.3, 0.05, 1.0]), 400
        mc = monte_carlo(pattern, rounds, 30, seed=2, method=method, keep_samples=True, progress=False)
        assert (mc.samples["tau_max"] == rounds).all() and (mc.samples["tau_avg"] == (rounds + 1) / 2).all()
        only = monte_carlo(Bernoulli(0.0, 5), 50, 4, seed=1, method=method, keep_samples=True, progress=False)
        assert (only.samples["tau_max"] == 50).all() and (only.samples["tau_avg"] == 25.5).all()

    def test_gap_sampler_with_zero_probability(self):
        """p = 0 clients do not steer the gap sampler's threshold, and its cover-time
        delays still equal those of the trace it draws."""
        from participation.expected.samplers.gaps import _choose_threshold, gap_chunk, gap_trace

        rest = np.full(99, 0.2)
        assert _choose_threshold(np.r_[0.0, rest], 2000) == _choose_threshold(rest, 2000)
        tau_max, tau_avg = gap_chunk(np.r_[0.0, rest], 2000, np.random.SeedSequence(1), 0, 3)
        assert (tau_max == 2000).all() and (tau_avg == 2001 / 2).all()
        p, root = np.array([0.0, 0.2, 0.7]), np.random.SeedSequence(5)
        for threshold in (None, 1, 4):
            tau_max, tau_avg = gap_chunk(p, 300, root, 0, 2, threshold)
            for r in range(2):
                truth = delay_metrics(gap_trace(p, 300, root, r, threshold))
                assert tau_max[r] == truth.tau_max == 300 and tau_avg[r] == truth.tau_avg

    def test_gap_trace_never_selects(self):
        from participation.expected.samplers.gaps import gap_trace

        p = np.array([0.0, 0.2, 0.7])
        mask = np.stack([gap_trace(p, 500, np.random.SeedSequence(3), r) for r in range(5)])
        assert not mask[..., 0].any() and mask[..., 1:].any(axis=1).all()

    def test_on_off_zero_active(self):
        pattern, rounds = OnOffCycles(3, 5, [0, 2, 4]), 6
        tau, tau_max = _phase_enumeration(3, 5, [0, 2, 4], rounds)
        assert np.allclose(tau, np.arange(1, rounds + 1)) and tau_max == pytest.approx(rounds)
        assert np.array_equal(exact_tau_t(pattern, rounds), np.arange(1, rounds + 1))
        assert exact_tau_max(pattern, rounds) == rounds and exact_tau_avg(pattern, rounds) == 3.5
        assert not pattern.sample_batch(40, 5, 0)[..., 0].any()
        assert OnOffCycles.from_probability(3, 10, [0.0, 0.5, 0.5]).active[0] == 0

    def test_selected_inherits_never_available(self):
        pattern = Selected(Bernoulli([0.0, 0.5, 0.9]), 1, "reshuffled")
        assert exact_tau_avg(pattern, 30) == 15.5 and exact_tau_max(pattern, 30) == 30
        mc = monte_carlo(pattern, 30, 5, seed=0, keep_samples=True, progress=False)
        assert (mc.samples["tau_max"] == 30).all()

    @pytest.mark.parametrize("pattern", [Bernoulli([0.0, 0.5]), Bernoulli(0.0, 3)])
    def test_paper_bound_refuses(self, pattern):
        with pytest.raises(ValueError, match="client 0 has p = 0: it is never available.*without bound") as err:
            paper_tau_max_bound(pattern, 100)
        assert "\n" not in str(err.value)

    def test_zero_probability_only_where_it_means_never_available(self):
        with pytest.raises(ValueError, match="got 0.0"):
            Bernoulli(np.array([[0.5, 0.0], [0.5, 0.5]]))  # a per-round zero is not a never-available client
        with pytest.raises(ValueError, match="got 0.0"):
            Bernoulli(lambda t: 0.0, n_clients=2).sample(3, 0)


# --------------------------------------------------------------------------- Selected
def _reference_walk(available, order, per_round):
    """The reshuffled rule as written in the docstring, one client at a time.
    ``order(e)`` is the list of clients of π_e in walk order."""
    rounds, n = available.shape
    out = np.zeros_like(available)
    epoch, pointer = 0, 0
    for t in range(rounds):
        pool = set(np.flatnonzero(available[t]).tolist())
        need, chosen = min(per_round, len(pool)), []
        e, k, last = epoch, pointer, None
        while len(chosen) < need:
            client = order(e)[k]
            if client in pool and client not in chosen:
                chosen.append(client)
                last = (e, k)
            e, k = (e + 1, 0) if k + 1 == n else (e, k + 1)
        if last is not None:
            epoch, pointer = (last[0] + 1, 0) if last[1] + 1 == n else (last[0], last[1] + 1)
        out[t, chosen] = True
    return out


class TestSelected:
    @pytest.mark.parametrize("rule", ["uniform", "reshuffled"])
    def test_subset_of_availability_with_min_size(self, rule):
        availability = Markov.from_rates(np.linspace(0.05, 0.6, 12), 0.3)
        pattern = Selected(availability, 4, rule)
        available, chosen = availability.sample_batch(700, 3, 8), pattern.sample_batch(700, 3, 8)
        assert not (chosen & ~available).any()
        assert np.array_equal(chosen.sum(axis=-1), np.minimum(4, available.sum(axis=-1)))

    def test_uniform_with_full_availability_is_uniform(self):
        n, s, rounds = 20, 4, 300
        pattern = Selected(Bernoulli(1.0, n), s)
        # bit for bit: the same draws as Uniform(N, S) on the selection stream
        root = np.random.SeedSequence(7)
        assert np.array_equal(pattern.sample_batch(rounds, 3, 7), Uniform(n, s)._generate(pattern._selection_root(root), range(3), 0, rounds))
        # and in law: E[τ_avg] against the exact value of Case 1
        mc = monte_carlo(pattern, rounds, 300, seed=1, progress=False)
        assert abs(mc.tau_avg.mean - exact_tau_avg(Uniform(n, s), rounds)) <= 4.5 * mc.tau_avg.stderr

    @pytest.mark.parametrize("n, s", [(12, 4), (10, 5), (20, 1)])
    def test_reshuffled_with_full_availability_is_reshuffled_cyclic(self, n, s):
        rounds = 3 * EPOCH_BLOCK * (n // s) + 7  # crosses several keyed units of orders
        pattern = Selected(Bernoulli(1.0, n), s, "reshuffled")
        root = np.random.SeedSequence(4)
        expected = ReshuffledCyclic(n, s)._generate(pattern._selection_root(root), range(2), 0, rounds)
        assert np.array_equal(pattern.sample_batch(rounds, 2, 4), expected)
        mc = monte_carlo(pattern, 120, 300, seed=2, progress=False)
        assert abs(mc.tau_avg.mean - exact_tau_avg(ReshuffledCyclic(n, s), 120)) <= 4.5 * mc.tau_avg.stderr + 1e-9

    @pytest.mark.slow
    @pytest.mark.parametrize("availability, s", [
        (Bernoulli([0.0, 0.2, 0.5, 0.9, 1.0, 0.4, 0.7]), 2),
        (Bernoulli(0.3, 6), 4),
        (OnOffCycles(9, 5, [1, 2, 3, 4, 5, 1, 2, 3, 4]), 3),
        (Markov.from_rates([0.05, 0.5, 0.3, 0.2], [0.3, 0.9, 0.2, 0.6]), 2),
    ])
    def test_reshuffled_matches_reference_walk(self, availability, s):
        pattern, seed, rounds = Selected(availability, s, "reshuffled"), 12, 600
        root = np.random.SeedSequence(seed)
        selection, n = pattern._selection_root(root), availability.n_clients
        chosen = pattern.sample_batch(rounds, 3, seed)
        available = availability.sample_batch(rounds, 3, seed)
        for r in range(3):
            def order(e, r=r):
                u = keyed_uniforms(selection, range(r, r + 1), e // EPOCH_BLOCK, (EPOCH_BLOCK, n))[0, e % EPOCH_BLOCK]
                return np.argsort(u).tolist()
            assert np.array_equal(chosen[r], _reference_walk(available[r], order, s)), f"replicate {r}"

    def test_uniform_rule_is_uniform_among_available(self):
        """Given |A_t| = a ≥ S, an available client is picked with probability S/a: the count of
        client i is a sum of independent Bernoulli(S/|A_t|) over the rounds it is available."""
        availability, s = Bernoulli(np.linspace(0.2, 0.9, 8)), 3
        available = availability.sample_batch(3000, 2, 6)
        chosen = Selected(availability, s).sample_batch(3000, 2, 6)
        p = np.where(available, np.minimum(1.0, s / np.maximum(available.sum(axis=-1, keepdims=True), 1)), 0.0)
        mean, var = p.sum(axis=(0, 1)), (p * (1 - p)).sum(axis=(0, 1))
        base._zcheck(chosen.sum(axis=(0, 1)), mean, np.sqrt(var), "selection counts")

    @pytest.mark.parametrize("n, s", [(10, 3), (10, 4), (7, 2), (11, 5), (12, 4)])
    def test_reshuffled_under_full_availability(self, n, s):
        """Every round has exactly S clients (the walk wraps into the next order when S ∤ N),
        and τ_max ≤ ⌊(2N − 2)/S⌋: a client's consecutive occurrences in π_0 π_1 … have at
        most 2N − 2 positions between them, each round strictly between two selections
        consumes ≥ S of those, and a client skipped as a duplicate is taken at its next
        occurrence."""
        batch = Selected(Bernoulli(1.0, n), s, "reshuffled").sample_batch(1500, 10, 1)
        assert (batch.sum(axis=-1) == s).all()
        assert delay_metrics(batch).tau_max.max() <= (2 * n - 2) // s

    def test_nested_selection_uses_distinct_streams(self):
        inner = Selected(Bernoulli(1.0, 12), 6)
        outer = Selected(inner, 6)  # S = |A_t|: outer keeps everything
        assert np.array_equal(outer.sample_batch(50, 2, 3), inner.sample_batch(50, 2, 3))
        root = np.random.SeedSequence(3)
        assert inner._selection_root(root).spawn_key != Selected(inner, 3)._selection_root(root).spawn_key

    def test_no_exact_formula(self):
        for rule in ("uniform", "reshuffled"):
            with pytest.raises(ValueError, match="use monte_carlo"):
                exact_tau_avg(Selected(Bernoulli(0.5, 5), 2, rule), 10)

    def test_deterministic_only_when_nothing_is_drawn(self):
        assert Selected(OnOffCycles.periodic_groups(6, 3), 6).deterministic
        assert not Selected(OnOffCycles.periodic_groups(6, 3), 1).deterministic
        assert not Selected(Bernoulli(0.5, 6), 6).deterministic

    @pytest.mark.parametrize("args, shown", [
        ((Bernoulli(0.5, 4), 5), "S=5"), ((Bernoulli(0.5, 4), 0), "0"), ((Bernoulli(0.5, 4), 2, "random"), "'random'"),
        ((np.ones((3, 4), dtype=bool), 2), "ndarray"),
    ])
    def test_invalid(self, args, shown):
        with pytest.raises(ValueError, match=shown) as err:
            Selected(*args)
        assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- presets
def test_presets():
    assert {"fedau-cyclic", "diurnal"} <= set(preset_names())
    cyclic = preset("fedau-cyclic")
    assert isinstance(cyclic, OnOffCycles) and cyclic.n_clients == 100 and cyclic.period == 100
    assert (cyclic.active == 10).all() and not cyclic.deterministic
    assert exact_tau_max(cyclic, 2000) == 90  # every client has a full off-run of C − a = 90 rounds
    assert preset("fedau-cyclic", p=0.25, period=20).active.tolist() == [5] * 100
    diurnal = preset("diurnal")
    assert (diurnal.n_clients, diurnal.per_round, diurnal.period, diurnal.shape) == (100, 20, 24, "linear")
    assert preset("diurnal", shape="cosine", n_clients=50).day_clients == 25
