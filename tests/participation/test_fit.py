"""Fitted availability models against independent computations: brute-force run counting,
enumeration of every trace, recovery of known parameters from long simulated traces, the
law of bootstrap p-values under the true and a wrong model, and brute-force periodic fits."""
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from participation import Trace, delay_metrics
from participation import fit as fitmod
from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo
from participation.fit import (PinnedClients, absence_runs, compare_fits, complete_run_counts, expected_run_counts,
                               fit_bernoulli, fit_markov, fit_periodic)
from participation.markov import estimate
from participation.patterns import Bernoulli, Markov, OnOffCycles, Uniform

masks = st.integers(1, 12).flatmap(
    lambda t: st.integers(1, 4).flatmap(
        lambda n: st.lists(st.booleans(), min_size=t * n, max_size=t * n).map(lambda b: np.array(b).reshape(t, n))))


def brute_runs(mask):
    """(client, start, length, left, right) of every absence run, by a plain loop."""
    rounds, n = mask.shape
    runs = []
    for i in range(n):
        t = 0
        while t < rounds:
            if mask[t, i]:
                t += 1
                continue
            s = t
            while t < rounds and not mask[t, i]:
                t += 1
            runs.append((i, s, t - s, s == 0, t == rounds))
    return runs


@given(masks)
def test_absence_runs_match_brute_force(mask):
    runs = absence_runs(mask)
    got = list(zip(runs.client.tolist(), runs.start.tolist(), runs.length.tolist(), runs.left_censored.tolist(),
                   runs.right_censored.tolist()))
    assert got == brute_runs(mask)
    complete = np.zeros((mask.shape[1], mask.shape[0]), dtype=np.int64)
    for i, _, length, _, right in brute_runs(mask):
        if not right:
            complete[i, length] += 1
    assert np.array_equal(complete_run_counts(mask), complete)
    assert np.array_equal(runs.counts()[:, : mask.shape[0]], complete)
    # the longest run, censored ones included, is τ_max (FedSUM, proof of Lemma F.1)
    longest = max((r[2] for r in brute_runs(mask)), default=0)
    assert longest == delay_metrics(mask).tau_max


def test_complete_run_counts_of_a_batch_stack_the_traces():
    batch = np.random.default_rng(0).random((5, 30, 7)) < 0.4
    assert np.array_equal(complete_run_counts(batch), np.stack([complete_run_counts(m) for m in batch]))


@pytest.mark.parametrize("a, b", [(0.3, 0.6), (0.7, 0.1), (1.0, 0.4), (0.25, 1.0)])
@pytest.mark.parametrize("rounds", [1, 2, 5, 7])
def test_expected_run_counts_match_enumeration(a, b, rounds):
    pi = a / (a + b)
    P = np.array([[1 - a, a], [b, 1 - b]])
    expected = np.zeros(rounds)
    for bits in itertools.product([0, 1], repeat=rounds):
        w = pi if bits[0] else 1 - pi
        for x, y in zip(bits, bits[1:]):
            w *= P[x, y]
        expected += w * complete_run_counts(np.array(bits, dtype=bool)[:, None])[0]
    assert np.allclose(expected_run_counts(a, b, pi, rounds), expected, atol=1e-14)


def test_expected_run_counts_of_bernoulli_are_the_chain_with_a_equal_1_minus_b():
    p, rounds = np.array([0.2, 0.5]), 9
    brute = np.zeros((2, rounds))
    for bits in itertools.product([0, 1], repeat=rounds):
        mask = np.array(bits, dtype=bool)[:, None].repeat(2, axis=1)
        w = np.prod(np.where(mask, p, 1 - p), axis=0)
        brute += w[:, None] * complete_run_counts(mask)
    assert np.allclose(expected_run_counts(p, 1 - p, p, rounds), brute, atol=1e-14)


# --------------------------------------------------------------------------------------
# parameter recovery
# --------------------------------------------------------------------------------------
def test_bernoulli_fit_recovers_p():
    p = np.array([0.05, 0.2, 0.5, 0.9])
    trace = Bernoulli(p).sample(20000, 3)
    fit = fit_bernoulli(trace, reps=19)
    assert np.array_equal(fit.p, trace.participation_rate())
    assert np.all(np.abs(fit.p - p) < 4 * np.sqrt(p * (1 - p) / 20000))
    assert np.allclose(fit.p_stderr, np.sqrt(fit.p * (1 - fit.p) / 20000))


@pytest.mark.slow
def test_markov_fit_recovers_the_rates_and_agrees_with_estimate():
    a, b = np.array([0.05, 0.2, 0.6]), np.array([0.3, 0.1, 0.7])
    trace = Markov.from_rates(a, b).sample(20000, 4)
    fit = fit_markov(trace, reps=19)
    n = estimate(trace).transitions
    assert np.all(np.abs(fit.a - a) < 4 * np.sqrt(a * (1 - a) / n[:, 0].sum(axis=1)))
    assert np.all(np.abs(fit.b - b) < 4 * np.sqrt(b * (1 - b) / n[:, 1].sum(axis=1)))
    assert np.allclose(fit.lam, estimate(trace).lam)             # λ̂ = p̂00 + p̂11 − 1
    assert np.allclose(fit.pi, fit.a / (fit.a + fit.b))
    assert not fit.regularised.any()
    assert np.allclose(fit.pattern.pi, fit.pi) and np.allclose(fit.pattern.lam, fit.lam)


def test_markov_fit_is_the_maximum_of_the_likelihood():
    trace = Markov.from_rates([0.3, 0.1], [0.2, 0.5]).sample(400, 1)
    fit = fit_markov(trace, reps=9)
    n = estimate(trace).transitions.astype(float)

    def loglik(a, b):
        return n[:, 0, 1] * np.log(a) + n[:, 0, 0] * np.log1p(-a) + n[:, 1, 0] * np.log(b) + n[:, 1, 1] * np.log1p(-b)

    best = loglik(fit.a, fit.b)
    for da, db in itertools.product([-0.01, 0, 0.01], repeat=2):
        assert np.all(loglik(fit.a + da, fit.b + db) <= best + 1e-12)


def degenerate_mask():
    rounds = 40
    mask = np.random.default_rng(1).random((rounds, 8)) < 0.5
    mask[:, 0] = False                          # never available
    mask[:, 1] = True                           # always available
    mask[:, 2] = np.arange(rounds) < 5          # available, then gone for good (a = 0)
    mask[:, 3] = np.arange(rounds) >= 30        # absent, then present for good (b = 0)
    mask[:, 4] = np.arange(rounds) % 2 == 0     # alternating (a = b = 1)
    mask[:, 5] = np.arange(rounds) < rounds - 1  # absent only in the last round (N_0 = 0)
    mask[:, 6] = np.arange(rounds) == rounds - 1  # present only in the last round (N_1 = 0)
    return mask


def test_never_and_always_available_clients_are_kept_and_nothing_is_nan():
    mask = degenerate_mask()
    for fit in (fit_bernoulli(mask, reps=19), fit_markov(mask, reps=19), fit_periodic(mask, 4)):
        if fit.name == "periodic(4)":   # maximum agreement may switch a rarely present client off too
            assert fit.never[0] and fit.always[1]
        else:
            assert fit.never.tolist() == [True] + [False] * 7
        for name in ("ks", "tv", "pvalue", "n_runs"):
            value = getattr(fit.goodness, name)
            assert value is None or np.isfinite(value).all()
        assert np.isfinite(fit.goodness.pooled_ks)
        assert fit.goodness.n_runs[0] == 0 and fit.goodness.trailing[0] == 40
        sample = fit.pattern.sample_batch(40, 3, 0)
        assert not sample[..., 0].any() and sample[..., 1].all()
    markov = fit_markov(mask, reps=19)
    assert np.isfinite(markov.a).all() and np.isfinite(markov.b).all() and np.isfinite(markov.lam).all()
    assert markov.regularised.tolist() == [False, False, True, True, True, True, True, False]
    assert markov.a[2] == pytest.approx(0.5 / 35)          # Jeffreys (N_01 + ½)/(N_0 + 1), N_0 = 34
    assert markov.b[3] == pytest.approx(0.5 / 10)          # N_1 = 9 transitions out of "present"
    assert markov.goodness.pvalue[0] == 1.0
    free = ~(markov.never | markov.always)
    assert np.all((markov.a[free] > 0) & (markov.b[free] > 0) & ~((markov.a == 1) & (markov.b == 1))[free])


def test_fits_of_a_trace_where_every_client_is_pinned():
    mask = np.zeros((10, 3), dtype=bool)
    mask[:, 1] = True
    for fit in (fit_bernoulli(mask, reps=9), fit_markov(mask, reps=9)):
        assert fit.never.tolist() == [True, False, True] and fit.always.tolist() == [False, True, False]
        row = compare_fits(mask, [fit]).rows[0]
        assert (row.tau_max, row.tau_avg) == (10, 5.5)
    only_always = fit_markov(np.ones((10, 2), dtype=bool), reps=9)
    assert isinstance(only_always.pattern, PinnedClients) and only_always.pattern.base is None
    assert compare_fits(np.ones((10, 2), dtype=bool), [only_always]).rows[0].tau_max == 0


# --------------------------------------------------------------------------------------
# goodness of fit
# --------------------------------------------------------------------------------------
def test_distances_against_a_direct_computation():
    trace = Markov.from_rates([0.2, 0.4, 0.1], [0.3, 0.3, 0.5]).sample(150, 2)
    fit = fit_bernoulli(trace, reps=9)
    mask, rounds = trace.mask, trace.n_rounds
    pooled_emp, pooled_law, total = np.zeros(rounds), np.zeros(rounds), 0
    for i in range(trace.n_clients):
        runs = [r[2] for r in brute_runs(mask[:, [i]]) if not r[4]]
        p = mask[:, i].mean()
        law = expected_run_counts(p, 1 - p, p, rounds)
        law /= law.sum()
        emp = np.bincount(runs, minlength=rounds) / len(runs)
        ks = max(abs(emp[: k + 1].sum() - law[: k + 1].sum()) for k in range(rounds))
        assert fit.goodness.ks[i] == pytest.approx(ks)
        assert fit.goodness.tv[i] == pytest.approx(0.5 * np.abs(emp - law).sum())
        pooled_emp += emp * len(runs)
        pooled_law += law * len(runs)
        total += len(runs)
    assert fit.goodness.pooled_ks == pytest.approx(np.abs(np.cumsum(pooled_emp - pooled_law)).max() / total)


@pytest.mark.slow
def test_bootstrap_p_values_are_roughly_uniform_under_the_true_model():
    pooled = {"bernoulli": [], "markov": []}
    per_client = {"bernoulli": [], "markov": []}
    for s in range(8):
        trace = Bernoulli(np.linspace(0.15, 0.5, 20)).sample(200, s)
        fit = fit_bernoulli(trace, reps=99, seed=100 + s)
        pooled["bernoulli"].append(fit.goodness.pooled_pvalue)
        per_client["bernoulli"].extend(fit.goodness.pvalue)
        trace = Markov.from_rates(np.linspace(0.1, 0.4, 20), 0.3).sample(200, s)
        fit = fit_markov(trace, reps=99, seed=100 + s)
        pooled["markov"].append(fit.goodness.pooled_pvalue)
        per_client["markov"].extend(fit.goodness.pvalue)
    for model in pooled:
        p = np.array(per_client[model])
        assert 0.4 < p.mean() < 0.65, model
        assert (p <= 0.05).mean() < 0.1 and (p <= 0.2).mean() < 0.3, model
        assert np.min(pooled[model]) > 0.02 and 0.25 < np.mean(pooled[model]) < 0.8, model


def test_bootstrap_p_values_are_tiny_under_a_wrong_model():
    trace = Markov.from_rates(np.linspace(0.1, 0.4, 20), 0.2).sample(200, 0)   # λ ≈ 0.4–0.7: bursty
    wrong = fit_bernoulli(trace, reps=99)
    assert wrong.goodness.pooled_pvalue == pytest.approx(1 / 100)
    assert wrong.goodness.rejected().size >= 15
    right = fit_markov(trace, reps=99)
    assert right.goodness.pooled_pvalue > 0.05
    assert right.goodness.pooled_ks < wrong.goodness.pooled_ks / 5


def test_the_bootstrap_does_not_depend_on_chunking(monkeypatch):
    trace = Markov.from_rates([0.2, 0.3, 0.1], 0.3).sample(100, 5)
    whole = fit_markov(trace, reps=23, seed=7)
    monkeypatch.setattr(fitmod, "CHUNK_CELLS", 300)
    chunked = fit_markov(trace, reps=23, seed=7)
    assert np.array_equal(whole.goodness.pvalue, chunked.goodness.pvalue)
    assert whole.goodness.pooled_pvalue == chunked.goodness.pooled_pvalue
    assert fit_markov(trace, reps=23, seed=np.random.default_rng(3)).goodness.reps == 23


# --------------------------------------------------------------------------------------
# periodic fits
# --------------------------------------------------------------------------------------
def test_periodic_fit_recovers_noiseless_cycles():
    rng = np.random.default_rng(0)
    n, period = 30, 9
    active, phases = rng.integers(1, period, n), rng.integers(0, period, n)
    truth = OnOffCycles(n, period, active, phases).sample(100)
    fit = fit_periodic(truth, period)
    assert np.array_equal(fit.active, active) and np.array_equal(fit.phases, phases)
    assert np.all(fit.agreement == 1.0) and fit.goodness.pooled_ks < 1e-12 and fit.goodness.pvalue is None
    assert fit.pattern.deterministic and fit.pattern.sample(100) == truth


@pytest.mark.parametrize("period", [1, 3, 5, 17])
def test_periodic_fit_matches_brute_force_over_all_cycles(period):
    mask = np.random.default_rng(period).random((23, 6)) < 0.4
    mask[:, 0] = False
    fit = fit_periodic(mask, period)
    t = np.arange(mask.shape[0])
    for i in range(mask.shape[1]):
        best, arg = -1, None
        for c in range(period + 1):                  # ties: smallest c, then smallest phase
            for phase in range(period):
                agree = int(((((t + phase) % period) < c) == mask[:, i]).sum())
                if agree > best:
                    best, arg = agree, (c, phase)
        assert (fit.active[i], fit.phases[i]) == arg
        assert fit.agreement[i] == pytest.approx(best / mask.shape[0])
    assert fit.never[0] and fit.active[0] == 0


def test_periodic_run_law_is_the_models_own():
    mask = np.random.default_rng(2).random((60, 5)) < 0.5
    fit = fit_periodic(mask, 6)
    model = fit.pattern.sample(60).mask
    for i in range(5):
        model_runs = [r[2] for r in brute_runs(model[:, [i]]) if not r[4]]
        data_runs = [r[2] for r in brute_runs(mask[:, [i]]) if not r[4]]
        if not model_runs or not data_runs:
            continue
        f = np.bincount(model_runs, minlength=60) / len(model_runs)
        g = np.bincount(data_runs, minlength=60) / len(data_runs)
        assert fit.goodness.tv[i] == pytest.approx(0.5 * np.abs(f - g).sum())


def test_periodic_fit_rejects_a_bad_period():
    with pytest.raises(ValueError, match="period"):
        fit_periodic(np.ones((5, 2), dtype=bool), 0)


# --------------------------------------------------------------------------------------
# the pinned pattern and compare_fits
# --------------------------------------------------------------------------------------
def test_pinned_clients_follow_the_reproducibility_contract():
    base = Markov.from_rates([0.2, 0.5], [0.3, 0.1])
    pattern = PinnedClients(base, 4, [3, 1], [0])
    batch = pattern.sample_batch(50, 4, 9)
    assert np.array_equal(batch[..., [3, 1]], base.sample_batch(50, 4, 9))
    assert batch[..., 0].all() and not batch[..., 2].any()
    assert pattern.sample(50, 9) == Trace(batch[0])
    assert np.array_equal(pattern.sample_batch(20, 2, 9, start=30, first_replicate=2), batch[2:4, 30:])
    assert pattern.never.tolist() == [2]
    with pytest.raises(ValueError):
        PinnedClients(base, 3, [0, 1], [1])


def test_compare_fits_exact_rows_match_the_patterns_and_monte_carlo():
    trace = Markov.from_rates([0.2, 0.05, 0.4], [0.3, 0.2, 0.5]).sample(60, 1)
    fb, fm = fit_bernoulli(trace, reps=9), fit_markov(trace, reps=9)
    table = compare_fits(trace, {"B": fb, "M": fm}, reps=2000, seed=1)
    m = delay_metrics(trace)
    assert (table.tau_max, table.tau_avg) == (m.tau_max, m.tau_avg)
    assert table.row("B").tau_max == pytest.approx(exact_tau_max(Bernoulli(fb.p), 60))
    assert table.row("M").tau_avg == pytest.approx(exact_tau_avg(Markov.from_rates(fm.a, fm.b), 60))
    for name, fit in (("B", fb), ("M", fm)):
        mc = monte_carlo(fit.pattern, 60, 4000, seed=2, method="trace")
        row = table.row(name)
        assert abs(row.tau_max - mc.tau_max.mean) < 4 * mc.tau_max.stderr
        assert abs(row.tau_avg - mc.tau_avg.mean) < 4 * mc.tau_avg.stderr
        assert row.tau_max_stderr == 0 and row.method == "exact"
    text = str(table)
    assert "trace" in text and "B" in text and "M" in text and "E[tau_max]" in text


def test_compare_fits_with_an_always_available_client_uses_the_base_pattern():
    mask = Markov.from_rates([0.2, 0.3], 0.4).sample(40, 3).mask.copy()
    mask = np.column_stack([mask, np.ones(40, dtype=bool)])
    fit = fit_markov(mask, reps=9)
    assert isinstance(fit.pattern, PinnedClients)
    row = compare_fits(mask, [fit]).rows[0]
    mc = monte_carlo(fit.pattern, 40, 4000, seed=0)
    assert abs(row.tau_max - mc.tau_max.mean) < 4 * mc.tau_max.stderr


def test_compare_fits_never_available_and_monte_carlo_paths():
    mask = np.random.default_rng(0).random((25, 4)) < 0.5
    mask[:, 2] = False
    row = compare_fits(mask, [fit_bernoulli(mask, reps=9)]).rows[0]
    sampled = delay_metrics(fit_bernoulli(mask, reps=9).pattern.sample(25, 0))
    assert (row.tau_max, row.tau_avg) == (sampled.tau_max, sampled.tau_avg) == (25, 13.0)
    # a pattern without an exact law of τ_max goes to Monte-Carlo, with a standard error
    fake = SimpleNamespace(name="uniform", n_clients=4, never=np.zeros(4, bool), pattern=Uniform(4, 1))
    row = compare_fits(mask, [fake], reps=400, seed=0).rows[0]
    assert row.tau_max_stderr > 0 and row.method.startswith("Monte-Carlo")
    assert abs(row.tau_avg - exact_tau_avg(Uniform(4, 1), 25)) < 4 * row.tau_avg_stderr + 1e-9
    with pytest.raises(ValueError, match="clients"):
        compare_fits(mask[:, :3], [fit_bernoulli(mask, reps=9)])


def test_fit_results_are_frozen_and_print():
    trace = Bernoulli(0.3, 5).sample(50, 0)
    for fit in (fit_bernoulli(trace, reps=9), fit_markov(trace, reps=9), fit_periodic(trace, 5)):
        with pytest.raises(Exception):
            fit.pattern = None
        with pytest.raises(ValueError):
            fit.goodness.ks[0] = 1.0
        assert fit.name in ("bernoulli", "markov", "periodic(5)")
        assert "pooled KS" in str(fit)


def test_periodic_fit_keeping_the_duty_cycle_matches_brute_force_over_phases():
    mask = np.random.default_rng(4).random((37, 6)) < 0.2
    mask[:, 0] = False
    period = 7
    fit = fit_periodic(mask, period, active="rate")
    assert fit.name == "periodic(7, rate)"
    assert np.array_equal(fit.active, OnOffCycles.from_probability(6, period, mask.mean(axis=0)).active)
    t = np.arange(37)
    for i in range(6):
        agree = [int(((((t + ph) % period) < fit.active[i]) == mask[:, i]).sum()) for ph in range(period)]
        expected_phase = 0 if fit.active[i] in (0, period) else int(np.argmax(agree))
        assert fit.phases[i] == expected_phase and fit.agreement[i] == pytest.approx(max(agree) / 37)
    assert fit.never[0]
    with pytest.raises(ValueError, match="active"):
        fit_periodic(mask, period, active="best")
