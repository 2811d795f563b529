"""Exact expected delays against independent computations: enumeration of every trace
on tiny cases, exact rational inclusion–exclusion, Monte-Carlo, and a table of reference
values computed independently (not in the paper)."""
import itertools
import math
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from participation import delay_metrics
from participation.expected import (exact_tau_avg, exact_tau_max, exact_tau_max_tail, exact_tau_t, monte_carlo,
                                    paper_tau_max_bound)
from participation.expected.laws.sampling_laws import uniform_tau_t
from participation.patterns import (Bernoulli, BiasedGroups, Cyclic, Markov, Pattern, ReshuffledCyclic, Sine, Uniform,
                                    preset)


def expectation_over(traces):
    """E[τ_t] and E[τ_max] from (probability, mask) pairs."""
    total, tau, tau_max = 0.0, 0.0, 0.0
    for weight, mask in traces:
        m = delay_metrics(mask)
        total += weight
        tau = tau + weight * m.tau
        tau_max += weight * m.tau_max
    assert total == pytest.approx(1.0, abs=1e-9)  # the enumeration covers every trace
    return tau, tau_max


def bernoulli_traces(p):  # p: (T, N)
    rounds, n = p.shape
    for bits in itertools.product([False, True], repeat=rounds * n):
        mask = np.array(bits).reshape(rounds, n)
        yield float(np.prod(np.where(mask, p, 1 - p))), mask


def markov_traces(pattern, rounds):
    P, pi, chains = pattern.transition_matrices(), pattern.pi, pattern.n_chains
    for bits in itertools.product([0, 1], repeat=rounds * chains):
        s = np.array(bits).reshape(rounds, chains)
        w = float(np.prod(np.where(s[0] == 1, pi, 1 - pi)))
        for t in range(1, rounds):
            w *= float(np.prod(P[np.arange(chains), s[t - 1], s[t]]))
        mask = s.astype(bool) if pattern.clusters is None else s[:, pattern.clusters].astype(bool)
        yield w, mask


probabilities = st.floats(0.05, 1.0)


@pytest.mark.slow
@given(st.integers(1, 3).flatmap(lambda n: st.lists(st.lists(probabilities, min_size=n, max_size=n), min_size=1, max_size=4)))
def test_time_varying_bernoulli_matches_enumeration(rows):
    p = np.array(rows)
    tau, tau_max = expectation_over(bernoulli_traces(p))
    pattern = Bernoulli(p)
    assert np.allclose(exact_tau_t(pattern, p.shape[0]), tau, atol=1e-12)
    assert exact_tau_max(pattern, p.shape[0]) == pytest.approx(tau_max, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("pattern, rounds", [
    (Bernoulli(0.3, 3), 4),
    (Bernoulli([0.2, 0.9, 0.5]), 4),
    (Sine(2, [0.5, 0.9], amplitude=0.4, offset=0.6, period=3.0, phase=[0.0, 1.0]), 5),
    (BiasedGroups(n_clients=3, group_size=2, p_first=0.6, step=0.3), 4),
])
def test_independent_patterns_match_enumeration(pattern, rounds):
    tau, tau_max = expectation_over(bernoulli_traces(pattern.probabilities(0, rounds)))
    assert np.allclose(exact_tau_t(pattern, rounds), tau, atol=1e-12)
    assert exact_tau_max(pattern, rounds) == pytest.approx(tau_max, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("pattern, rounds", [
    (Markov([0.3, 0.6], [0.5, -0.2]), 5),
    (Markov(0.4, 0.8, n_clients=2), 6),
    (Markov([0.5, 0.2], [0.3, 0.6], clusters=np.array([0, 0, 1])), 5),
    (Markov.from_rates([0.1, 0.7], [0.2, 0.9]), 5),
])
def test_markov_matches_enumeration(pattern, rounds):
    tau, tau_max = expectation_over(markov_traces(pattern, rounds))
    assert np.allclose(exact_tau_t(pattern, rounds), tau, atol=1e-12)
    assert exact_tau_max(pattern, rounds) == pytest.approx(tau_max, abs=1e-12)


@pytest.mark.parametrize("n, s, rounds", [(4, 2, 3), (5, 1, 4), (5, 3, 3)])
def test_uniform_matches_enumeration(n, s, rounds):
    subsets = list(itertools.combinations(range(n), s))
    weight = 1 / len(subsets) ** rounds

    def traces():
        for choice in itertools.product(subsets, repeat=rounds):
            mask = np.zeros((rounds, n), dtype=bool)
            for t, ids in enumerate(choice):
                mask[t, list(ids)] = True
            yield weight, mask

    tau, _ = expectation_over(traces())
    assert np.allclose(exact_tau_t(Uniform(n, s), rounds), tau, atol=1e-12)


def test_uniform_dp_matches_rational_inclusion_exclusion():
    """P_cov(k) = Σ_j (−1)^j C(N,j) (C(N−j,S)/C(N,S))^k in exact rationals."""
    n, s, rounds = 12, 3, 40
    def covered(k):
        return sum((-1) ** j * math.comb(n, j) * Fraction(math.comb(n - j, s), math.comb(n, s)) ** k for j in range(n - s + 1))
    exact = np.cumsum([float(1 - covered(k)) for k in range(1, rounds + 1)])
    assert np.allclose(uniform_tau_t(Uniform(n, s), rounds), exact, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("n, s, rounds", [(4, 2, 6), (4, 1, 5), (5, 2, 6), (3, 2, 5)])
def test_reshuffled_matches_enumeration(n, s, rounds):
    pattern = ReshuffledCyclic(n, s)
    epoch = pattern.epoch_rounds
    epochs = -(-rounds // epoch)
    orders = list(itertools.permutations(range(n)))
    weight = 1 / len(orders) ** epochs

    def traces():
        for choice in itertools.product(orders, repeat=epochs):
            mask = np.zeros((epochs * epoch, n), dtype=bool)
            for e, order in enumerate(choice):
                for slot in range(epoch):
                    mask[e * epoch + slot, list(order[slot * s:(slot + 1) * s])] = True
            yield weight, mask[:rounds]

    tau, _ = expectation_over(traces())
    assert np.allclose(exact_tau_t(pattern, rounds), tau, atol=1e-12)


@pytest.mark.parametrize("n, s", [(10, 3), (9, 3), (100, 7)])
def test_cyclic_is_its_own_expectation(n, s):
    rounds = 4 * n
    m = delay_metrics(Cyclic(n, s).sample(rounds))
    assert exact_tau_avg(Cyclic(n, s), rounds) == pytest.approx(m.tau_avg)
    assert exact_tau_max(Cyclic(n, s), rounds) == m.tau_max == -(-n // s) - 1


@pytest.mark.parametrize("n, s", [(10, 3), (9, 3), (100, 7), (5, 5), (7, 1)])
def test_cyclic_closed_form_equals_its_trace(n, s):
    for rounds in (1, 2, -(-n // s) - 1, -(-n // s), 3 * n + 1):
        if rounds >= 1:
            assert np.array_equal(exact_tau_t(Cyclic(n, s), rounds), delay_metrics(Cyclic(n, s).sample(rounds)).tau)


@pytest.mark.slow
def test_cyclic_at_ten_million_rounds_builds_no_trace():
    assert exact_tau_max(Cyclic(10**6, 3), 10**7) == 333333


MC_CASES = ["P1", "P2", "P3", "H8", "case4", "logit", "cafed-temporal", "cafed-spatial"]


@pytest.mark.parametrize("name", MC_CASES)
def test_exact_agrees_with_monte_carlo(name):
    """Within 4.5 standard errors (two-sided, two quantities: false alarm ≈ 1e-5)."""
    pattern, rounds = preset(name), 300
    mc = monte_carlo(pattern, rounds, 300, seed=11, progress=False)
    avg = exact_tau_avg(pattern, rounds)
    assert abs(mc.tau_avg.mean - avg) <= 4.5 * mc.tau_avg.stderr + 1e-9
    try:
        top = exact_tau_max(pattern, rounds)
    except ValueError:
        return  # no formula (Uniform, reshuffled): checked by the error test below
    assert abs(mc.tau_max.mean - top) <= 4.5 * mc.tau_max.stderr + 1e-9


def test_tau_max_law_matches_monte_carlo_quantiles():
    pattern, rounds = preset("P2"), 500
    tail = exact_tau_max_tail(pattern, rounds)  # P(τ_max ≥ l)
    cdf = 1 - np.concatenate([[1.0], tail])     # P(τ_max ≤ l − 1) … as P(τ_max < l)
    mc = monte_carlo(pattern, rounds, 2000, seed=5, keep_samples=True, progress=False)
    samples = mc.samples["tau_max"]
    for level in (30, 40, 50):
        empirical = float((samples < level).mean())
        expected = float(cdf[level])
        assert abs(empirical - expected) <= 4.5 * math.sqrt(expected * (1 - expected) / samples.size)


# Reference values computed independently, not in the paper (FedSUM's P1–P3 and H.8 setting,
# N=100, S=20, T=2000: FedSUM §5, App. H.2 and H.8; MC = 200 sequences).
REFERENCE = {  # name: (E τ_avg, E τ_max MC mean, its 5%–95% spread, paper bound, tail-sum step, closed-form step)
    "P1": (22.72, 49.1, (41, 61), 244.1, 58.7, 62.9),
    "P2": (22.61, 49.5, (42, 60), 244.1, 58.7, 62.9),
    "P3": (33.32, 70.3, (58, 83), 588.7, 152.0, 170.7),
    "H8": (34.39, 102.4, (77, 143), 976.5, 257.0, 297.4),
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_table(name):
    avg, top, (q05, q95), stated, tail_sum, closed = REFERENCE[name]
    pattern, rounds = preset(name), 2000
    assert exact_tau_avg(pattern, rounds) == pytest.approx(avg, abs=0.006)
    if name != "P1":
        # the reference τ_max is a 200-run MC: allow 3 of its standard errors (spread/3.29 ≈ sd)
        stderr = (q95 - q05) / 3.29 / math.sqrt(200)
        assert abs(exact_tau_max(pattern, rounds) - top) <= 3 * stderr
    bound = paper_tau_max_bound(pattern, rounds)
    steps = list(bound.steps.values())
    lemma = {"P1": "Lemma F.1"}.get(name, "Lemma F.2")
    assert bound.lemma == f"FedSUM {lemma}" and lemma in bound.source
    assert ".txt" not in bound.source and "line" not in bound.source
    assert bound.value == pytest.approx(stated, abs=0.06)
    assert steps[0] == pytest.approx(tail_sum, abs=0.06)
    assert [v for k, v in bound.steps.items() if "closed form" in k][0] == pytest.approx(closed, abs=0.06)


def test_reference_table_cyclic_cases():
    assert exact_tau_avg(preset("case3"), 2000) == pytest.approx(4 - 6 / 2000)
    assert exact_tau_max(preset("case3"), 2000) == 4
    assert exact_tau_avg(preset("case4"), 2000) == pytest.approx(5.99, abs=0.005)
    assert paper_tau_max_bound(preset("case3"), 2000).value == 10
    assert paper_tau_max_bound(preset("case4"), 2000).value == 20
    # Appendix F swaps the Case 3/4 names: deterministic cyclic is Lemma F.4, reshuffled F.3
    for name, lemma in (("case3", "Lemma F.4"), ("case4", "Lemma F.3")):
        bound = paper_tau_max_bound(preset(name), 2000)
        assert bound.lemma == f"FedSUM {lemma}" and lemma in bound.source
        assert ".txt" not in bound.source and "line" not in bound.source


class Custom(Pattern):
    n_clients = 2

    def _generate(self, root, replicates, start, stop):
        return np.ones((len(replicates), stop - start, 2), dtype=bool)


@pytest.mark.parametrize("call", [
    lambda: exact_tau_max(Uniform(10, 2), 20),
    lambda: exact_tau_t(ReshuffledCyclic(10, 3, remainder="drop"), 20),
    lambda: exact_tau_avg(Custom(), 5),
])
def test_no_formula_points_to_monte_carlo(call):
    with pytest.raises(ValueError, match="use monte_carlo"):
        call()


def test_reshuffled_chain_too_large_points_to_the_bound_and_monte_carlo():
    with pytest.raises(ValueError, match=r"use reshuffled_tau_max_bound\(pattern, rounds\) or monte_carlo"):
        exact_tau_max(ReshuffledCyclic(100, 30, remainder="drop"), 2000)


def test_monte_carlo_is_independent_of_chunks_and_workers():
    pattern = preset("P3", n_clients=30, per_round=6)
    reference = monte_carlo(pattern, 120, 37, seed=9, chunk_size=37, keep_samples=True, progress=False)
    for chunk in (1, 5, 16):
        other = monte_carlo(pattern, 120, 37, seed=9, chunk_size=chunk, keep_samples=True, progress=False)
        assert np.array_equal(other.samples["tau_max"], reference.samples["tau_max"])
        assert np.array_equal(other.samples["tau_avg"], reference.samples["tau_avg"])
    with ThreadPoolExecutor(3) as pool:
        threaded = monte_carlo(pattern, 120, 37, seed=9, chunk_size=4, executor=pool, keep_samples=True, progress=False)
    with ProcessPoolExecutor(2) as pool:
        processes = monte_carlo(pattern, 120, 37, seed=9, chunk_size=10, executor=pool, keep_samples=True, progress=False)
    for other in (threaded, processes):
        assert np.array_equal(other.samples["tau_avg"], reference.samples["tau_avg"])


def test_monte_carlo_replicate_is_a_regenerable_trace():
    pattern = preset("P2", n_clients=20, per_round=4)
    mc = monte_carlo(pattern, 80, 10, seed=4, keep_samples=True, progress=False, method="trace")
    seventh = delay_metrics(pattern.sample_batch(80, 1, 4, first_replicate=7)[0])
    assert mc.samples["tau_max"][7] == seventh.tau_max and mc.samples["tau_avg"][7] == seventh.tau_avg
    from participation.expected.samplers.gaps import gap_trace

    fast = monte_carlo(pattern, 80, 10, seed=4, keep_samples=True, progress=False)  # gap sampling
    seventh = delay_metrics(gap_trace(pattern.probabilities(0, 1)[0], 80, np.random.SeedSequence(4), 7))
    assert fast.samples["tau_max"][7] == seventh.tau_max and fast.samples["tau_avg"][7] == pytest.approx(seventh.tau_avg)


def test_estimate_statistics():
    mc = monte_carlo(preset("logit"), 60, 500, seed=1, keep_samples=True, quantiles=(0.1, 0.9), progress=False)
    samples = mc.samples["tau_avg"]
    assert mc.tau_avg.mean == pytest.approx(samples.mean())
    assert mc.tau_avg.stderr == pytest.approx(samples.std(ddof=1) / math.sqrt(500))
    assert mc.tau_avg.ci_low < mc.tau_avg.mean < mc.tau_avg.ci_high
    assert mc.tau_avg.quantiles[0.1] == pytest.approx(np.quantile(samples, 0.1))


@pytest.mark.slow
def test_torch_device_path_agrees_with_exact():
    pytest.importorskip("torch")
    from participation.delays import per_round_delay
    from participation.expected.samplers._torch_delay import per_round_delay_torch

    masks = np.random.default_rng(0).random((3, 200, 130)) < 0.05
    assert np.array_equal(per_round_delay_torch(masks, "cpu"), per_round_delay(masks))
    mc = monte_carlo(preset("P2"), 300, 200, seed=3, device="cpu", progress=False)
    assert abs(mc.tau_max.mean - exact_tau_max(preset("P2"), 300)) <= 4.5 * mc.tau_max.stderr
    again = monte_carlo(preset("P2"), 300, 200, seed=3, device="cpu", chunk_size=33, progress=False)
    assert again.tau_max == mc.tau_max


@pytest.mark.parametrize("kwargs, message", [
    ({"rounds": 0}, "rounds"), ({"reps": 0}, "reps"), ({"confidence": 1.5}, "confidence"),
    ({"quantiles": (0.5, 2.0)}, "quantiles"), ({"chunk_size": 0}, "chunk_size"),
])
def test_monte_carlo_rejects_bad_arguments(kwargs, message):
    args = {"rounds": 10, "reps": 5} | kwargs
    with pytest.raises(ValueError, match=message):
        monte_carlo(preset("P2"), args.pop("rounds"), args.pop("reps"), **args)


@pytest.mark.slow
@pytest.mark.parametrize("pattern, rounds", [
    (preset("P2"), 2000), (preset("H8"), 700), (Bernoulli([1.0, 0.3, 0.002]), 3000), (preset("logit"), 40),
])
def test_gap_sampling_equals_delays_of_its_own_trace(pattern, rounds):
    """The cover-time identities give exactly the delays of the sampled trace."""
    from participation.expected.samplers.gaps import gap_chunk, gap_trace

    root = np.random.SeedSequence(3)
    p = pattern.probabilities(0, 1)[0]
    tau_max, tau_avg = gap_chunk(p, rounds, root, 0, 6)
    for r in range(6):
        truth = delay_metrics(gap_trace(p, rounds, root, r))
        assert tau_max[r] == truth.tau_max and tau_avg[r] == pytest.approx(truth.tau_avg, abs=1e-12)


@pytest.mark.slow
def test_gap_sampling_draws_the_right_law():
    """Per-client selection frequencies and gap lengths match Geometric(p)."""
    from participation.expected.samplers.gaps import gap_trace

    p = np.array([0.05, 0.2, 0.9])
    masks = np.stack([gap_trace(p, 3000, np.random.SeedSequence(1), r) for r in range(20)])
    rate = masks.mean(axis=(0, 1))
    assert np.all(np.abs(rate - p) <= 5 * np.sqrt(p * (1 - p) / (20 * 3000)))
    for i, value in enumerate(p):
        gaps = np.concatenate([np.diff(np.flatnonzero(m[:, i])) for m in masks])
        mean_gap = gaps.mean()
        assert abs(mean_gap - 1 / value) <= 5 * np.sqrt((1 - value) / value**2 / gaps.size)


@pytest.mark.slow
def test_gap_and_trace_methods_agree_in_law():
    pattern, rounds = preset("P2", n_clients=40, per_round=8), 400
    gaps = monte_carlo(pattern, rounds, 600, seed=1, method="gaps", progress=False)
    trace = monte_carlo(pattern, rounds, 600, seed=1, method="trace", progress=False)
    for a, b in ((gaps.tau_max, trace.tau_max), (gaps.tau_avg, trace.tau_avg)):
        assert abs(a.mean - b.mean) <= 4.5 * math.hypot(a.stderr, b.stderr)
    assert abs(gaps.tau_max.mean - exact_tau_max(pattern, rounds)) <= 4.5 * gaps.tau_max.stderr


def test_gap_method_refuses_patterns_it_does_not_cover():
    from participation.patterns import ReshuffledCyclic

    with pytest.raises(ValueError, match="independent clients or Markov"):
        monte_carlo(ReshuffledCyclic(10, 2), 50, 5, method="gaps")
    with pytest.raises(ValueError, match="method"):
        monte_carlo(preset("P2"), 50, 5, method="fast")


def test_replay_is_its_own_expectation():
    from participation import Trace
    from participation.patterns import Replay

    # client 1 absent in rounds 0–2 (run 3), client 0 absent in round 3: τ = 1, 2, 3, 1
    trace = Trace(np.array([[1, 0], [1, 0], [1, 0], [0, 1]], dtype=bool))
    assert np.array_equal(exact_tau_t(Replay(trace), 4), [1, 2, 3, 1])
    assert exact_tau_max(Replay(trace), 4) == 3 and exact_tau_avg(Replay(trace), 4) == 1.75


def test_one_replicate_is_printed_without_a_standard_error_not_as_nan():
    from participation.expected import monte_carlo

    mc = monte_carlo(preset("P1", n_clients=10, per_round=2), 20, 1, 0)
    text = str(mc.tau_max)
    assert "nan" not in text and "one replicate: no standard error or interval" in text
    assert "nan" not in str(monte_carlo(preset("P1", n_clients=10, per_round=2), 20, 2, 0).tau_max)
