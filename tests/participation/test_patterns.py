"""Tests of participation.patterns against the definitions of FedSUM (Section 2.1 and Appendix F) and
CA-Fed (§V-A, §V-B e and Appendix F3, eqs. (236)–(238)).

Statistical checks are z-tests with a tolerance of ``Z`` standard errors; every standard
error is stated next to its test. Seeds are fixed, so the tests are deterministic.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from participation._random import keyed_uniforms, seed_sequence
from participation.delays import delay_metrics
from participation.patterns import (
    Bernoulli, BiasedGroups, Cyclic, Markov, Replay, ReshuffledCyclic, Sine, Uniform, preset, preset_names,
)
from participation.patterns.sampling import EPOCH_BLOCK
from participation.trace import Trace

Z = 5.0  # tolerance, in standard errors

REPLAY_TRACE = Trace(np.random.default_rng(123).random((700, 9)) < 0.4)
ROUND_CLIENT_P = np.random.default_rng(321).uniform(0.05, 1.0, size=(700, 6))


def _zcheck(observed, expected, se, what=""):
    observed, expected, se = (np.asarray(v, dtype=float) for v in (observed, expected, se))
    z = np.abs(observed - expected) / se
    assert (z < Z).all(), f"{what}: max |z| = {z.max():.2f} (observed {observed}, expected {expected})"


def _binomial_z(successes, trials, p, what=""):
    """z-test of successes ~ Binomial(trials, p); p in {0, 1} must be met exactly."""
    successes, p = np.asarray(successes, dtype=float), np.broadcast_to(np.asarray(p, dtype=float), np.shape(successes))
    exact = (p == 0) | (p == 1)
    assert np.array_equal(successes[exact], (p * trials)[exact]), what
    if (~exact).any():
        _zcheck(successes[~exact] / trials, p[~exact], np.sqrt(p[~exact] * (1 - p[~exact]) / trials), what)


# --------------------------------------------------------------------------- the patterns under test
PATTERNS = {
    "uniform": lambda: Uniform(13, 4),
    "uniform-S=N": lambda: Uniform(6, 6),
    "uniform-S=1": lambda: Uniform(7, 1),
    "bernoulli-scalar": lambda: Bernoulli(0.3, 11),
    "bernoulli-per-client": lambda: Bernoulli(np.linspace(0.1, 1.0, 9)),
    "bernoulli-per-round-client": lambda: Bernoulli(ROUND_CLIENT_P),
    "bernoulli-callable": lambda: Bernoulli(lambda t: 0.2 + 0.6 * (t % 3 == 0), n_clients=7),
    "sine-p3": lambda: Sine.p3(),
    "sine-fedawe": lambda: Sine.fedawe([0.3, 0.6, 0.9], a=0.5, b=0.6),
    "biased-groups": lambda: BiasedGroups(),
    "cyclic": lambda: Cyclic(10, 3),
    "reshuffled-short": lambda: ReshuffledCyclic(10, 3),
    "reshuffled-drop": lambda: ReshuffledCyclic(10, 3, remainder="drop"),
    "reshuffled-divides": lambda: ReshuffledCyclic(12, 4),
    "markov": lambda: Markov([0.2, 0.5, 0.9], [0.5, -0.5, 0.0]),
    "markov-rates": lambda: Markov.from_rates([0.1, 0.5], [0.3, 0.9]),
    "markov-clusters": lambda: Markov.cafed_spatial(4, 3),
    "replay": lambda: Replay(REPLAY_TRACE),
}
ALL = {**PATTERNS, **{f"preset:{name}": (lambda name=name: preset(name)) for name in preset_names()}}
T = 600  # crosses the 256-round draw blocks and several 16-epoch blocks


@pytest.fixture(params=list(ALL), ids=list(ALL))
def pattern(request):
    return ALL[request.param]()


def _is_random(p):
    """False for deterministic patterns and for Uniform with S = N (every client, every round)."""
    return not p.deterministic and not (isinstance(p, Uniform) and p.per_round == p.n_clients)


# --------------------------------------------------------------------------- reproducibility contract
class TestReproducibility:
    def test_sample_is_batch_row_zero(self, pattern):
        trace = pattern.sample(T, 7)
        batch = pattern.sample_batch(T, 3, 7)
        assert isinstance(trace, Trace) and trace.mask.shape == (T, pattern.n_clients)
        assert batch.dtype == bool and batch.shape == (3, T, pattern.n_clients)
        assert np.array_equal(trace.mask, batch[0])

    def test_chunked_equals_whole(self, pattern):
        whole = pattern.sample_batch(T, 2, 11)
        cuts = [0, 1, 100, 255, 256, 257, 513, T]
        parts = [pattern.sample_batch(b - a, 2, 11, start=a) for a, b in zip(cuts, cuts[1:])]
        assert np.array_equal(np.concatenate(parts, axis=1), whole)
        assert pattern.sample(5, 11, start=300) == Trace(whole[0, 300:305])

    def test_first_replicate_slices(self, pattern):
        big = pattern.sample_batch(300, 5, 3)
        assert np.array_equal(pattern.sample_batch(300, 2, 3, first_replicate=2), big[2:4])
        assert np.array_equal(pattern.sample_batch(300, 1, 3, first_replicate=4)[0], big[4])
        assert np.array_equal(pattern.sample_batch(40, 3, 3, start=250, first_replicate=1), big[1:4, 250:290])

    def test_seeds_and_replicates(self, pattern):
        a, b = pattern.sample_batch(T, 2, 1), pattern.sample_batch(T, 2, 2)
        if _is_random(pattern):
            assert not np.array_equal(a, b), "different seeds gave the same trace"
            assert not np.array_equal(a[0], a[1]), "two replicates are identical"
        else:
            assert np.array_equal(a, b) and np.array_equal(a[0], a[1])

    def test_seed_types(self, pattern):
        base = pattern.sample(T, 42)
        assert pattern.sample(T, np.random.SeedSequence(42)) == base
        assert pattern.sample(T, np.int64(42)) == base
        g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
        from_gen = pattern.sample(T, g1)
        assert pattern.sample(T, g2) == from_gen  # same Generator state, same trace
        ss = np.random.SeedSequence(9)
        c1, c2 = ss.spawn(2)
        t1 = pattern.sample(T, c1)
        assert pattern.sample(T, np.random.SeedSequence(9).spawn(1)[0]) == t1
        assert pattern.sample(T, None).mask.shape == (T, pattern.n_clients)
        if _is_random(pattern):
            assert pattern.sample(T, g1) != from_gen  # the generator was consumed and moved on
            assert pattern.sample(T, c2) != t1

    @pytest.mark.parametrize("kw", [dict(rounds=0), dict(rounds=-3), dict(rounds=2.0), dict(rounds=True),
                                    dict(reps=0), dict(reps=-1), dict(seed=-1), dict(seed=1.5), dict(seed="x"),
                                    dict(seed=True), dict(start=-1), dict(first_replicate=-2)])
    def test_invalid_common_parameters(self, pattern, kw):
        args = dict(rounds=5, reps=2, seed=0) | kw
        rounds, reps, seed = args.pop("rounds"), args.pop("reps"), args.pop("seed")
        with pytest.raises(ValueError):
            pattern.sample_batch(rounds, reps, seed, **args)
        if "reps" not in kw and "first_replicate" not in kw:
            with pytest.raises(ValueError):
                pattern.sample(rounds, seed, **args)


@pytest.mark.parametrize("cls", [Uniform, Cyclic, ReshuffledCyclic])
@pytest.mark.parametrize("n,s", [(5, 6), (1, 2), (5, 0), (0, 0), (5, -1), (5, 2.0)])
def test_invalid_sizes(cls, n, s):
    with pytest.raises(ValueError):
        cls(n, s)


# --------------------------------------------------------------------------- Uniform (Case 1 / P1)
@pytest.fixture(scope="module")
def uniform_mask():
    return Uniform(TestUniform.N, TestUniform.S).sample(TestUniform.ROUNDS, 2024).mask


class TestUniform:
    N, S, ROUNDS = 10, 3, 4000

    @pytest.fixture
    def mask(self, uniform_mask):
        return uniform_mask

    def test_exactly_s_per_round(self, mask):
        assert (mask.sum(axis=1) == self.S).all()
        for n, s in [(1, 1), (7, 7), (9, 1), (65, 64), (100, 20)]:
            assert (Uniform(n, s).sample_batch(300, 2, 0).sum(axis=-1) == s).all()

    def test_inclusion_frequency(self, mask):
        # count_i ~ Binomial(T, S/N): rounds are independent and P(i in S_t) = S/N
        _binomial_z(mask.sum(axis=0), self.ROUNDS, self.S / self.N, "inclusion")

    def test_pairwise_co_inclusion(self, mask):
        q = self.S * (self.S - 1) / (self.N * (self.N - 1))
        both = (mask[:, :, None] & mask[:, None, :]).sum(axis=0)
        i, j = np.triu_indices(self.N, 1)
        _binomial_z(both[i, j], self.ROUNDS, q, "co-inclusion")

    def test_consecutive_rounds_independent(self, mask):
        # |S_t ∩ S_{t+1}| ~ Hypergeometric(N, S, S): mean S^2/N, variance S(S/N)((N-S)/N)((N-S)/(N-1));
        # disjoint pairs (2k, 2k+1) are independent samples
        overlap = (mask[0::2] & mask[1::2]).sum(axis=1)
        n, s, m = self.N, self.S, overlap.size
        var = s * (s / n) * ((n - s) / n) * ((n - s) / (n - 1))
        _zcheck(overlap.mean(), s * s / n, math.sqrt(var / m), "overlap mean")
        pmf = stats.hypergeom(n, s, s).pmf(np.arange(s + 1))
        _binomial_z(np.bincount(overlap, minlength=s + 1), m, pmf, "overlap distribution")

    def test_every_subset_equally_likely(self):
        n, s, rounds = 6, 2, 3000
        mask = Uniform(n, s).sample(rounds, 5).mask
        subsets = list(itertools.combinations(range(n), s))
        index = {sub: k for k, sub in enumerate(subsets)}
        counts = np.bincount([index[tuple(np.flatnonzero(r))] for r in mask], minlength=len(subsets))
        _binomial_z(counts, rounds, 1 / len(subsets), "subset frequency")


# --------------------------------------------------------------------------- Bernoulli (Case 2 / P2)
class TestBernoulli:
    def test_scalar(self):
        p, n, rounds = 0.3, 40, 2000
        mask = Bernoulli(p, n).sample(rounds, 1).mask
        _binomial_z(mask.sum(axis=0), rounds, p, "per client")
        _binomial_z((mask[:, 0] & mask[:, 1]).sum(), rounds, p * p, "two clients jointly")
        _binomial_z((mask[0::2, 0] & mask[1::2, 0]).sum(), rounds // 2, p * p, "two rounds jointly")
        assert len(set(mask.sum(axis=1).tolist())) > 5  # |S_t| varies, unlike Uniform

    def test_per_client(self):
        p = np.array([0.05, 0.2, 0.5, 0.77, 0.95, 1.0])
        pattern = Bernoulli(p)
        assert pattern.n_clients == 6
        mask = pattern.sample(3000, 2).mask
        _binomial_z(mask.sum(axis=0), 3000, p, "per client")
        assert pattern.min_probability(10) == pytest.approx(0.05)

    def test_per_round_per_client(self):
        p = np.random.default_rng(0).uniform(0.05, 1.0, size=(30, 4))
        pattern = Bernoulli(p)
        reps = 2000
        batch = pattern.sample_batch(30, reps, 3)
        _binomial_z(batch.sum(axis=0), reps, p, "per (round, client)")
        assert np.array_equal(pattern.probabilities(5, 12), p[5:12])
        with pytest.raises(ValueError, match="31"):
            pattern.sample(31, 0)
        with pytest.raises(ValueError):
            pattern.sample(5, 0, start=26)
        assert np.array_equal(pattern.sample(5, 0, start=25).mask, pattern.sample(30, 0).mask[25:])

    @pytest.mark.parametrize("vector", [False, True])
    def test_callable(self, vector):
        n, rounds = 5, 3000
        levels = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
        if vector:
            fn = lambda t: levels if t % 2 == 0 else levels[::-1]  # noqa: E731
        else:
            fn = lambda t: 0.1 if t % 2 == 0 else 0.7  # noqa: E731
        mask = Bernoulli(fn, n_clients=n).sample(rounds, 4).mask
        even, odd = mask[0::2].sum(axis=0), mask[1::2].sum(axis=0)
        _binomial_z(even, rounds // 2, levels if vector else 0.1, "even rounds")
        _binomial_z(odd, rounds // 2, levels[::-1] if vector else 0.7, "odd rounds")

    def test_callable_called_with_absolute_round(self):
        seen = []
        Bernoulli(lambda t: seen.append(t) or 0.5, n_clients=2).sample(4, 0, start=1000)
        assert set(range(1000, 1004)) <= set(seen)

    # p = 0 is allowed for a scalar or per-client p (a never-available client; tested in
    # test_availability_models.py), not inside a per-round array
    @pytest.mark.parametrize("p,shown", [(-0.1, "-0.1"), (1.5, "1.5"), (1.0000001, "1.0000001"),
                                         (float("nan"), "nan"), ([0.2, -0.0001, 0.3], "-0.0001"), ([0.2, 2.5], "2.5"),
                                         (np.array([[0.5, 0.5], [0.5, -3.0]]), "-3.0"),
                                         (np.array([[0.5, 0.5], [0.0, 0.5]]), "0.0")])
    def test_invalid_p_names_value(self, p, shown):
        with pytest.raises(ValueError, match=f"got {shown}"):
            Bernoulli(p, n_clients=None if np.ndim(p) else 4)

    def test_callable_invalid_value_at_sample_time(self):
        pattern = Bernoulli(lambda t: 0.0 if t == 3 else 0.5, n_clients=2)
        with pytest.raises(ValueError, match="got 0.0"):
            pattern.sample(10, 0)

    def test_invalid_shapes(self):
        with pytest.raises(ValueError):
            Bernoulli(0.5)  # scalar p needs n_clients
        with pytest.raises(ValueError):
            Bernoulli([0.5, 0.5], n_clients=3)
        with pytest.raises(ValueError):
            Bernoulli(np.full((2, 2, 2), 0.5))
        with pytest.raises(ValueError):
            Bernoulli(lambda t: 0.5)

    def test_p_one_is_full_participation(self):
        assert Bernoulli(1.0, 4).sample(50, 0).mask.all()


# --------------------------------------------------------------------------- Cyclic (Case 3)
def _longest_absence(mask):
    """max_i of the longest run of consecutive zeros in column i (FedSUM, proof of Lemma F.1), plain Python."""
    best = 0
    for column in mask.T.tolist():
        run = 0
        for x in column:
            run = 0 if x else run + 1
            best = max(best, run)
    return best


class TestCyclic:
    @pytest.mark.parametrize("n,s", [(10, 3), (10, 4), (10, 5), (7, 7), (100, 30), (100, 7), (1, 1), (9, 2)])
    @pytest.mark.parametrize("start", [0, 17, 10**6 + 3])
    def test_brute_force(self, n, s, start):
        rounds = 3 * n + 2
        mask = Cyclic(n, s).sample(rounds, None, start=start).mask
        expected = [[(c - t * s) % n < s for c in range(n)] for t in range(start, start + rounds)]
        assert mask.tolist() == expected
        assert (mask.sum(axis=1) == s).all()

    @pytest.mark.parametrize("n,s", [(100, 30), (100, 7), (10, 3), (10, 4), (100, 1), (100, 100), (100, 20), (12, 5)])
    def test_tau_max(self, n, s):
        trace = Cyclic(n, s).sample(2 * n + 5, 0)
        expected = math.ceil(n / s) - 1
        assert delay_metrics(trace).tau_max == expected
        assert _longest_absence(trace.mask) == expected
        assert expected <= 2 * n / s  # Lemma F.4

    def test_deterministic(self):
        c = Cyclic(10, 3)
        assert c.deterministic
        assert c.sample(20, 1) == c.sample(20, 2) == c.sample(20, None)


# --------------------------------------------------------------------------- ReshuffledCyclic (Case 4)
def _epochs(batch, epoch_rounds):
    reps, rounds, n = batch.shape
    assert rounds % epoch_rounds == 0
    return batch.reshape(reps, rounds // epoch_rounds, epoch_rounds, n)


class TestReshuffledCyclic:
    def test_divides(self):
        n, s = 12, 4
        e = n // s
        pattern = ReshuffledCyclic(n, s)
        assert pattern.epoch_rounds == e
        batch = pattern.sample_batch(e * 60, 3, 0)
        assert (batch.sum(axis=-1) == s).all()
        assert (_epochs(batch, e).sum(axis=2) == 1).all()  # every client exactly once per epoch

    def test_short_remainder(self):
        n, s = 10, 3
        e = math.ceil(n / s)
        pattern = ReshuffledCyclic(n, s)
        assert pattern.remainder == "short" and pattern.epoch_rounds == e
        epochs = _epochs(pattern.sample_batch(e * 50, 3, 1), e)
        assert (epochs.sum(axis=2) == 1).all()
        sizes = epochs.sum(axis=3)
        assert (sizes[..., :-1] == s).all() and (sizes[..., -1] == n % s).all()

    def test_drop_remainder(self):
        n, s = 10, 3
        e = n // s
        pattern = ReshuffledCyclic(n, s, remainder="drop")
        assert pattern.epoch_rounds == e
        n_epochs = 1500
        epochs = _epochs(pattern.sample_batch(e * n_epochs, 1, 2), e)[0]
        assert (epochs.sum(axis=2) == s).all()
        per_epoch = epochs.sum(axis=1)
        assert per_epoch.max() == 1
        skipped = per_epoch == 0
        assert (skipped.sum(axis=1) == n % s).all()
        # the skipped clients are the tail of a uniformly random order: P(skip) = (N mod S)/N each epoch
        _binomial_z(skipped.sum(axis=0), n_epochs, (n % s) / n, "skip frequency")

    @pytest.mark.parametrize("n,s", [(10, 3), (12, 4)])
    def test_slot_uniform(self, n, s):
        # a uniformly random order puts client i in slot k with probability |slot k| / N
        pattern = ReshuffledCyclic(n, s)
        e, n_epochs = pattern.epoch_rounds, 2000
        epochs = _epochs(pattern.sample_batch(e * n_epochs, 1, 3), e)[0]
        sizes = np.array([s] * (n // s) + ([n % s] if n % s else []))
        counts = epochs.sum(axis=0)  # (slot, client)
        _binomial_z(counts, n_epochs, (sizes / n)[:, None] * np.ones(n), "slot frequency")

    def test_orders_differ_between_epochs(self):
        n, s = 12, 4
        e = n // s
        epochs = _epochs(ReshuffledCyclic(n, s).sample_batch(e * 40, 2, 4), e)
        slots = epochs.argmax(axis=2)  # (reps, epochs, client) -> slot
        for rep in slots:
            assert len({tuple(v) for v in rep.tolist()}) >= 38  # 34650 possible slot assignments
        assert not np.array_equal(slots[0], slots[1])

    @pytest.mark.parametrize("n,s", [(12, 4), (100, 20), (10, 5), (10, 10)])
    def test_tau_max_divides(self, n, s):
        batch = ReshuffledCyclic(n, s).sample_batch(40 * n // s, 10, 5)
        tau_max = delay_metrics(batch).tau_max
        bound = 2 * n // s - 2
        assert (tau_max <= bound).all()
        assert tau_max.max() == bound  # attained when a client is first in one epoch, last in the next
        assert max(_longest_absence(b) for b in batch) == tau_max.max()

    def test_tau_max_short(self):
        n, s = 10, 3
        batch = ReshuffledCyclic(n, s).sample_batch(200, 5, 6)
        assert (delay_metrics(batch).tau_max <= 2 * math.ceil(n / s) - 2).all()

    @pytest.mark.parametrize("remainder", ["long", "", None, "SHORT"])
    def test_invalid_remainder(self, remainder):
        with pytest.raises(ValueError, match="remainder"):
            ReshuffledCyclic(10, 3, remainder=remainder)


# --------------------------------------------------------------------------- Sine (P3) and BiasedGroups (H.8)
class TestSine:
    @pytest.mark.parametrize("n,s", [(100, 20), (50, 5), (7, 7)])
    def test_p3_probabilities(self, n, s):
        p = Sine.p3(n, s).probabilities(0, 45)
        assert p.shape == (45, n)
        for t in range(45):
            expected = (s / n) * (0.3 * math.sin(math.pi * t / 5) + 0.7)
            assert p[t] == pytest.approx(np.full(n, expected), abs=1e-12)

    def test_p3_delta_and_mean(self):
        pattern = Sine.p3()
        p = pattern.probabilities(0, 1000)[:, 0]
        assert p.min() == pytest.approx(0.0829366, abs=5e-8)
        assert pattern.min_probability(1000) == pytest.approx(0.0829366, abs=5e-8)
        assert p.max() == pytest.approx(0.197063, abs=5e-7)
        assert p.mean() == pytest.approx(0.14, abs=1e-12)

    def test_p3_empirical_by_phase(self):
        n, rounds = 100, 2000
        mask = Sine.p3().sample(rounds, 8).mask
        for k in range(10):
            p_k = 0.2 * (0.3 * math.sin(math.pi * k / 5) + 0.7)
            _binomial_z(mask[k::10].sum(), (rounds // 10) * n, p_k, f"phase {k}")
        _binomial_z(mask.sum(), rounds * n, 0.14, "time average")

    @pytest.mark.parametrize("s", [0, 101, -5])
    def test_p3_invalid(self, s):
        with pytest.raises(ValueError):
            Sine.p3(100, s)

    def test_fedawe_clipped(self):
        base = [0.5, 1.0]
        p = Sine.fedawe(base, a=0.8, b=0.6).probabilities(0, 20)
        for t in range(20):
            for i, b in enumerate(base):
                raw = (0.8 * math.sin(2 * math.pi * t / 20) + 0.6) * b
                assert p[t, i] == pytest.approx(min(max(raw, 0.0), 1.0), abs=1e-12)


class TestBiasedGroups:
    def test_probabilities(self):
        pattern = BiasedGroups()
        expected = [0.5 - 0.05 * (i // 11) for i in range(100)]
        assert pattern.n_clients == 100
        assert pattern.client_probabilities() == pytest.approx(expected, abs=1e-12)
        assert pattern.probabilities(7, 10) == pytest.approx(np.array([expected] * 3), abs=1e-12)
        assert pattern.client_probabilities()[99] == pytest.approx(0.05, abs=1e-12)
        assert pattern.client_probabilities()[98] == pytest.approx(0.1, abs=1e-12)
        assert pattern.min_probability(50) == pytest.approx(0.05, abs=1e-12)
        assert preset("H8").client_probabilities() == pytest.approx(expected, abs=1e-12)
        assert preset("biased").min_probability(3) == pytest.approx(0.05, abs=1e-12)

    def test_empirical(self):
        rounds = 1500
        mask = BiasedGroups().sample(rounds, 9).mask
        for g in range(10):
            members = range(11 * g, min(11 * g + 11, 100))
            _binomial_z(mask[:, members].sum(), rounds * len(members), 0.5 - 0.05 * g, f"group {g}")


# --------------------------------------------------------------------------- Markov (CA-Fed)
def _chain_stats(mask, pi):
    """Per-chain (column) activity and lag-1, lag-2 autocorrelation computed with the known π.

    For a stationary chain E[X_t X_{t+s}] = π² + λ^s π(1−π), so these estimates are unbiased.
    """
    x = mask.astype(float)
    var = pi * (1 - pi)
    lag1 = ((x[:-1] * x[1:]).mean(0) - pi**2) / var
    lag2 = ((x[:-2] * x[2:]).mean(0) - pi**2) / var
    return x.mean(0), lag1, lag2


def _mean_z(values, expected, what):
    # values: one estimate per independent chain (or group of chains); SE from their spread
    values = np.asarray(values, dtype=float)
    _zcheck(values.mean(), expected, values.std(ddof=1) / math.sqrt(values.size), what)


class TestMarkov:
    @pytest.mark.parametrize("pi,lam", [(0.3, 0.6), (0.9, -0.1), (0.5, -0.8), (0.1, 0.9), (0.7, 0.0)])
    def test_stationary_law_and_correlation(self, pi, lam):
        chains, rounds = 400, 400
        mask = Markov(pi, lam, n_clients=chains).sample(rounds, 10).mask
        activity, lag1, lag2 = _chain_stats(mask, pi)
        # chains are independent: the spread of the per-chain estimates is an honest standard error
        # (it includes the Markov correlation within each chain)
        _mean_z(activity, pi, "activity")
        _mean_z(lag1, lam, "lag-1 autocorrelation")
        _mean_z(lag2, lam**2, "lag-2 autocorrelation")
        # transition probabilities of (236), pooled in 20 groups of 20 chains (ratio estimators)
        x = mask.reshape(rounds, 20, -1).transpose(1, 0, 2)
        groups = [(((1 - g[:-1]) * g[1:]).sum() / (1 - g[:-1]).sum(), (g[:-1] * g[1:]).sum() / g[:-1].sum())
                  for g in x.astype(float)]
        _mean_z([a for a, _ in groups], (1 - lam) * pi, "P(on | off)")
        _mean_z([b for _, b in groups], lam + (1 - lam) * pi, "P(on | on)")
        # every round is stationary, not only the average
        _binomial_z(mask[[0, 1, 50, 399]].sum(axis=1), chains, pi, "activity per round")

    @pytest.mark.parametrize("pi,lam", [(0.3, 0.95), (0.8, 0.0)])
    def test_initial_state_is_stationary(self, pi, lam):
        reps, chains = 400, 50
        batch = Markov(pi, lam, n_clients=chains).sample_batch(1, reps, 11)
        _binomial_z(batch[:, 0].sum(), reps * chains, pi, "round 0")

    def test_initial_state_heterogeneous(self):
        pi = np.array([0.1, 0.5, 0.9])
        batch = Markov(pi, 0.9).sample_batch(1, 3000, 12)
        _binomial_z(batch[:, 0].sum(axis=0), 3000, pi, "round 0 per chain")

    def test_transition_matrix_is_236(self):
        pi, lam = np.array([0.2, 0.9, 0.5]), np.array([0.5, -0.1, 0.99])
        P = Markov(pi, lam).transition_matrices()
        for k in range(3):
            expected = [[1 - (1 - lam[k]) * pi[k], (1 - lam[k]) * pi[k]],
                        [(1 - lam[k]) * (1 - pi[k]), lam[k] + (1 - lam[k]) * pi[k]]]
            assert P[k] == pytest.approx(np.array(expected), abs=1e-12)
            assert np.array([1 - pi[k], pi[k]]) @ P[k] == pytest.approx([1 - pi[k], pi[k]], abs=1e-12)
            assert sorted(np.linalg.eigvals(P[k]).real) == pytest.approx(sorted([1.0, lam[k]]), abs=1e-9)

    @pytest.mark.parametrize("a,b", [(0.1, 0.3), (0.5, 0.9), (1.0, 0.2), (0.05, 1.0)])
    def test_from_rates(self, a, b):
        m = Markov.from_rates(a, b, n_clients=300)
        assert m.pi == pytest.approx(np.full(300, a / (a + b)), abs=1e-12)
        assert m.lam == pytest.approx(np.full(300, 1 - a - b), abs=1e-12)
        P = m.transition_matrices()[0]
        assert P == pytest.approx(np.array([[1 - a, a], [b, 1 - b]]), abs=1e-12)
        mask = m.sample(300, 13).mask.astype(float)
        prev, nxt = mask[:-1].ravel(), mask[1:].ravel()
        _binomial_z((nxt * (1 - prev)).sum(), (1 - prev).sum(), a, "P(on | off) = a")
        _binomial_z(((1 - nxt) * prev).sum(), prev.sum(), b, "P(off | on) = b")

    @pytest.mark.parametrize("a,b", [(0.0, 0.5), (0.5, 0.0), (1.5, 0.5), (0.5, -0.1), (1.0, 1.0)])
    def test_from_rates_invalid(self, a, b):
        with pytest.raises(ValueError):
            Markov.from_rates(a, b, n_clients=2)

    @pytest.mark.parametrize("pi,shown", [(0.0, "0.0"), (1.0, "1.0"), (1.2, "1.2"), (-0.1, "-0.1"), ([0.5, 1.0], "1.0")])
    def test_invalid_pi(self, pi, shown):
        with pytest.raises(ValueError, match=f"got {shown}"):
            Markov(pi, 0.5, n_clients=None if np.ndim(pi) else 3)

    @pytest.mark.parametrize("pi,lam,shown", [
        (0.9, -0.2, "-0.2"),          # below max(1 - 1/π, 1 - 1/(1-π)) = -1/9
        (0.2, -0.3, "-0.3"),          # bound -1/4
        (0.5, 1.0, "1.0"), (0.3, 1.0, "1.0"), (0.5, 1.5, "1.5"),
        (0.5, -1.0, "-1.0"),          # periodic chain [[0, 1], [1, 0]]
        (0.5, -1.5, "-1.5"), (0.5, -1.01, "-1.01"),
    ])
    def test_invalid_lambda_names_value(self, pi, lam, shown):
        with pytest.raises(ValueError, match=rf"lam ?= ?{shown}\b"):
            Markov(pi, lam, n_clients=3)

    def test_lambda_at_lower_boundary_allowed(self):
        for pi in (0.9, 0.1, 0.25):
            low = max(1 - 1 / pi, 1 - 1 / (1 - pi))
            P = Markov(pi, low, n_clients=2).transition_matrices()
            assert (P >= -1e-12).all() and (P <= 1 + 1e-12).all()

    @pytest.mark.parametrize("kw", [dict(pi=0.5, lam=0.5), dict(pi=[0.5, 0.5], lam=[0.1, 0.2, 0.3]),
                                    dict(pi=[0.5, 0.5], lam=0.1, n_clients=3),
                                    dict(pi=0.5, lam=0.1, clusters=np.array([0.0, 1.0])),
                                    dict(pi=0.5, lam=0.1, clusters=np.array([0, -1]))])
    def test_invalid_shapes(self, kw):
        with pytest.raises(ValueError):
            Markov(**kw)

    # --- CA-Fed settings (§V-A and §V-B e; Fig. 1d's three groups, §V-B a)
    @staticmethod
    def _types(m, nu=0.9):
        corr = np.isclose(m.lam, nu)
        return [(float(p), bool(c)) for p, c in zip(m.pi, corr)]

    def test_cafed_four_types(self):
        m = Markov.cafed_temporal()
        types = self._types(m)
        assert m.n_clients == 100
        for kind in [(0.9, True), (0.9, False), (0.1, True), (0.1, False)]:
            assert sum(t == pytest.approx(kind) for t in types) == 25
        assert np.allclose(m.pi[:50], 0.9) and np.allclose(m.pi[50:], 0.1)
        weak = m.lam[~np.isclose(m.lam, 0.9)]
        assert weak.size == 50 and (np.abs(weak) < 5 * 0.01).all()
        _zcheck(weak.mean(), 0.0, 0.01 / math.sqrt(weak.size), "weak λ ~ N(0, 0.01²)")
        p = preset("cafed-temporal")
        assert np.array_equal(p.pi, m.pi) and np.array_equal(p.lam, m.lam)

    def test_cafed_three_groups(self):
        m = Markov.cafed_temporal(composition="three-groups")
        types = self._types(m)
        assert sum(t == pytest.approx((0.9, False)) for t in types) == 50
        assert sum(t == pytest.approx((0.1, False)) for t in types) == 25
        assert sum(t == pytest.approx((0.1, True)) for t in types) == 25
        assert not any(t == pytest.approx((0.9, True)) for t in types)
        p = preset("cafed-temporal-3groups")
        assert np.array_equal(p.pi, m.pi) and np.array_equal(p.lam, m.lam)

    @pytest.mark.parametrize("draw,mean,sd", [("paper", 0.0, 0.01), ("code", 0.005, 0.005)])
    def test_weak_draw(self, draw, mean, sd):
        m = Markov.cafed_temporal(4000, weak_draw=draw, seed=3)
        weak = m.lam[~np.isclose(m.lam, 0.9)]
        assert weak.size == 2000
        _zcheck(weak.mean(), mean, sd / math.sqrt(weak.size), f"{draw} mean")
        # SE of a normal sample s.d. is sd / sqrt(2(n-1))
        _zcheck(weak.std(ddof=1), sd, sd / math.sqrt(2 * (weak.size - 1)), f"{draw} s.d.")

    def test_cafed_temporal_seed(self):
        a, b = Markov.cafed_temporal(seed=1), Markov.cafed_temporal(seed=2)
        assert np.array_equal(a.lam, Markov.cafed_temporal(seed=1).lam)
        assert not np.array_equal(a.lam, b.lam)

    def test_cafed_spatial(self):
        m = Markov.cafed_spatial()
        assert m.n_clients == 100 and m.n_chains == 10
        assert m.pi == pytest.approx([0.9] * 5 + [0.1] * 5)
        assert m.lam == pytest.approx([0, 0, 0, 0, 0, 0.5, 0.6, 0.7, 0.8, 0.9])
        batch = m.sample_batch(400, 2, 14)
        clusters = batch.reshape(2, 400, 10, 10)
        assert (clusters == clusters[..., :1]).all()  # clients of a cluster always together
        leaders = clusters[..., 0].reshape(-1, 10)
        assert not (leaders[:, :1] == leaders).all()  # ... but clusters are not all equal
        _mean_z(leaders[:, :5].mean(axis=1), 0.9, "more-available clusters")
        p = preset("cafed-spatial", n_clusters=4, clients_per_cluster=3)
        assert p.n_clients == 12


# --------------------------------------------------------------------------- Replay
class TestReplay:
    def test_returns_the_trace(self):
        r = Replay(REPLAY_TRACE)
        assert r.n_clients == 9 and r.deterministic
        assert r.sample(700, 1) == REPLAY_TRACE
        assert r.sample(100, 2, start=250) == REPLAY_TRACE[250:350]
        batch = r.sample_batch(700, 3, 5, first_replicate=7)
        assert all(np.array_equal(b, REPLAY_TRACE.mask) for b in batch)
        assert r.sample(700, 99) == r.sample(700, np.random.default_rng(0))

    def test_past_its_length(self):
        r = Replay(REPLAY_TRACE)
        with pytest.raises(ValueError, match="700"):
            r.sample(701, 0)
        with pytest.raises(ValueError):
            r.sample(2, 0, start=699)

    def test_needs_a_trace(self):
        with pytest.raises(ValueError):
            Replay(REPLAY_TRACE.mask)

    def test_load(self, tmp_path):
        REPLAY_TRACE.save(tmp_path / "t.npz")
        assert Replay.load(tmp_path / "t.npz").sample(700, 0) == REPLAY_TRACE


# --------------------------------------------------------------------------- presets
class TestPresets:
    def test_unknown_name_lists_choices(self):
        with pytest.raises(ValueError) as err:
            preset("P9")
        message = str(err.value)
        assert "P9" in message
        for name in preset_names():
            assert name in message

    def test_names_have_descriptions(self):
        names = preset_names()
        assert {"P1", "P2", "P3", "case1", "case2", "case3", "case4", "H8"} <= set(names)
        assert all(isinstance(doc, str) and doc for doc in names.values())

    @pytest.mark.parametrize("name", list(preset_names()))
    def test_n_clients_override(self, name):
        if name == "cafed-spatial":
            pytest.skip("cafed-spatial takes n_clusters / clients_per_cluster (tested in TestMarkov)")
        p = preset(name, n_clients=50)
        assert p.n_clients == 50
        assert p.sample(20, 0).mask.shape == (20, 50)

    def test_overrides_change_the_pattern(self):
        assert preset("P1", n_clients=50, per_round=5).sample(30, 0).counts().tolist() == [5] * 30
        assert preset("P2", n_clients=50, per_round=10).probabilities(0, 1) == pytest.approx(np.full((1, 50), 0.2))
        assert preset("logit", p=0.8).probabilities(0, 1) == pytest.approx(np.full((1, 10), 0.8))
        assert preset("P3", per_round=10).probabilities(0, 10)[:, 0] == pytest.approx(
            [0.1 * (0.3 * math.sin(math.pi * t / 5) + 0.7) for t in range(10)])

    def test_bad_override(self):
        with pytest.raises(ValueError, match="P1"):
            preset("P1", bogus=3)

    def test_paper_settings(self):
        assert (preset("P1").sample(50, 0).counts() == 20).all()
        assert (preset("case3").sample(50, 0).mask == Cyclic(100, 20).sample(50, 0).mask).all()
        assert (_epochs(preset("case4").sample_batch(50, 1, 0), 5).sum(axis=2) == 1).all()
        assert preset("P2").probabilities(0, 3) == pytest.approx(np.full((3, 100), 0.2))
        assert preset("p3").probabilities(0, 20) == pytest.approx(Sine.p3().probabilities(0, 20))
        assert preset("logit").n_clients == 10
        _binomial_z(preset("logit").sample(2000, 0).mask.sum(), 20000, 0.5, "logit p")
        _binomial_z(preset("P2").sample(500, 0).mask.sum(), 50000, 0.2, "P2 p")


# ---------------------------------------------------------------- sampling windows anywhere

HUGE = 2**70 + 12345


def test_cyclic_window_at_a_huge_start_is_exact():
    n, s = 10, 3
    mask = Cyclic(n, s).sample(7, start=HUGE).mask
    expected = np.array([[(c - (HUGE + t) * s) % n < s for c in range(n)] for t in range(7)])
    assert np.array_equal(mask, expected)


@pytest.mark.parametrize("n, s, remainder", [(10, 3, "short"), (7, 2, "drop"), (6, 2, "short")])
@pytest.mark.parametrize("start", [0, 37, 2**40 + 3, HUGE])
def test_reshuffled_window_follows_its_definition_anywhere(n, s, remainder, start):
    """Round t: epoch t // E, slot t mod E, the epoch's order drawn from unit epoch // EPOCH_BLOCK."""
    pattern = ReshuffledCyclic(n, s, remainder)
    epoch_rounds, root = pattern.epoch_rounds, seed_sequence(4)
    mask = pattern.sample_batch(60, 2, root, start=start, first_replicate=1)
    for rep in range(2):
        for i in range(60):
            epoch, slot = divmod(start + i, epoch_rounds)
            u = keyed_uniforms(root, range(1 + rep, 2 + rep), epoch // EPOCH_BLOCK, (EPOCH_BLOCK, n))[0, epoch % EPOCH_BLOCK]
            rank = np.argsort(np.argsort(u))
            assert np.array_equal(mask[rep, i], rank // s == slot), (start, i)
    later = pattern.sample(30, 4, start=start + 30).mask
    assert np.array_equal(pattern.sample(60, 4, start=start).mask[30:], later)
