"""The law of τ_max under FedSUM Case 4, reshuffled cyclic (participation.expected.laws.reshuffled):
exact rationals against enumeration of every sequence of epochs, floats against those
rationals, Monte-Carlo with the pattern's own sampler, and the bound for remainder="drop";
exact E[τ_t] against the first, integer, slot-by-slot formula."""
import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from participation.delays import delay_metrics
from participation.expected import exact_tau_avg, exact_tau_t
from participation.expected.laws import reshuffled as rs
from participation.expected.laws.reshuffled import (epoch_union_bound, reshuffled_exact_tau_max, reshuffled_tau_max_bound,
                                               reshuffled_tau_max_law, reshuffled_tau_max_tail)
from participation.patterns import ReshuffledCyclic, Uniform

# ---------------------------------------------------------------- enumeration


def _assignments(n, s, remainder):
    """Every distinct client → slot map of one epoch (slot E: sits out), read off the orders
    as the pattern reads them (position p → slot ⌊p/S⌋ when < E). Each comes from the same
    number of orders ((S!)^a·R! for some a), so a uniform order gives a uniform map."""
    epoch = ReshuffledCyclic(n, s, remainder).epoch_rounds
    maps = set()
    for order in itertools.permutations(range(n)):
        slot = [0] * n
        for position, client in enumerate(order):
            slot[client] = min(position // s, epoch)
        maps.add(tuple(slot))
    return np.array(sorted(maps)), epoch


def _enumerate(n, s, remainder, rounds):
    """Masks (sequences, rounds, N) of every equally likely sequence of epochs."""
    maps, epoch = _assignments(n, s, remainder)
    epochs = -(-rounds // epoch)
    pick = np.array(list(itertools.product(range(len(maps)), repeat=epochs)))
    slots = maps[pick]                                           # (sequences, epochs, N)
    mask = slots[:, :, None, :] == np.arange(epoch)[None, None, :, None]
    return mask.reshape(len(pick), epochs * epoch, n)[:, :rounds]


def _law(samples):
    counts = Counter(np.asarray(samples).tolist())
    return {int(v): Fraction(c, len(samples)) for v, c in counts.items()}


# (n, s, remainder, rounds checked); each enumeration holds at most ~3·10^5 sequences
ENUMERATED = [
    (4, 2, "short", range(1, 11)),
    (4, 1, "short", range(1, 10)),
    (6, 3, "short", range(1, 7)),
    (6, 2, "short", range(1, 7)),
    (6, 3, "drop", range(1, 7)),      # S | N: "drop" is the same pattern
    (5, 2, "short", range(1, 10)),    # S ∤ N: a short last slot of one client
    (7, 3, "short", range(1, 7)),
    (5, 2, "drop", range(1, 7)),      # R = 1
    (7, 3, "drop", range(1, 5)),
    (7, 2, "drop", range(1, 7)),
    (5, 3, "drop", range(1, 6)),      # R = 2, E = 1
    (6, 4, "drop", range(1, 5)),
    (8, 3, "drop", range(1, 5)),      # R = 2, E = 2
]


@pytest.mark.parametrize("n, s, remainder, rounds",
                         [pytest.param(*c, marks=pytest.mark.slow) if c[:3] in {(7, 2, "drop"), (8, 3, "drop")} else c
                          for c in ENUMERATED], ids=[f"N{c[0]}-S{c[1]}-{c[2]}" for c in ENUMERATED])
def test_law_is_the_enumerated_law(n, s, remainder, rounds):
    """The exact law (Fractions), its floats, E[τ_max], the tail layout, the one-client run
    law behind the bound, and the bound itself, against every sequence of epochs; shorter
    horizons are prefixes of the longest one (uniform product, so their law is right)."""
    pattern = ReshuffledCyclic(n, s, remainder)
    masks = _enumerate(n, s, remainder, max(rounds))
    for t in rounds:
        tau_max = delay_metrics(masks[:, :t]).tau_max
        expected = _law(tau_max)
        law = reshuffled_tau_max_law(pattern, t, exact=True)
        got = {int(v): p for v, p in zip(law.values, law.probabilities) if p}
        assert got == expected, t
        floats = reshuffled_tau_max_law(pattern, t)
        assert np.array_equal(floats.values, law.values)
        assert np.allclose(floats.probabilities, [float(p) for p in law.probabilities], rtol=0, atol=1e-15)
        mean = sum(v * p for v, p in expected.items())
        assert abs(reshuffled_exact_tau_max(pattern, t) - float(mean)) < 1e-13
        tail = [float(sum(p for v, p in expected.items() if v >= l)) for l in range(1, t + 1)]
        assert np.allclose(reshuffled_tau_max_tail(pattern, t), tail, rtol=0, atol=1e-13)
        # the bound: one client's run law exactly, then the union over clients
        rows, _ = rs._bound_rows(pattern, t)
        own = delay_metrics(masks[:, :t, :1]).tau_max                 # client 0's longest absence run
        runs = [float(np.mean(own >= l)) for l in range(1, rows + 1)]
        assert np.allclose(rs._run_probabilities(pattern, t, rows), runs, rtol=0, atol=1e-14)
        assert reshuffled_tau_max_bound(pattern, t) >= float(mean)


# ---------------------------------------------------------------- floats against rationals

@pytest.mark.parametrize("n, s, remainder, rounds", [
    (12, 3, "short", 50), (30, 2, "short", 101), (60, 1, "short", 1000), (23, 5, "short", 97),
    (100, 20, "short", 2000), (13, 4, "drop", 41), pytest.param(10, 4, "drop", 30, marks=pytest.mark.slow),
])
def test_floats_are_within_their_promise(n, s, remainder, rounds):
    pattern = ReshuffledCyclic(n, s, remainder)
    exact = reshuffled_tau_max_law(pattern, rounds, exact=True)
    floats = reshuffled_tau_max_law(pattern, rounds)
    once = remainder == "short" or n % s == 0
    tol = 1e-15 if once else 1e-14
    if once:
        assert np.array_equal(exact.values, floats.values)
        assert np.allclose(floats.probabilities, [float(p) for p in exact.probabilities], rtol=0, atol=tol)
    else:  # floats stop at L (the last value standing for ≥ L); the Fractions run to T
        cut = len(floats.values)
        assert np.array_equal(exact.values[:cut], floats.values)
        reference = [float(p) for p in exact.probabilities[: cut - 1]] + [float(sum(exact.probabilities[cut - 1:]))]
        assert np.allclose(floats.probabilities, reference, rtol=0, atol=tol)
    mean = sum(v * p for v, p in zip(exact.values.tolist(), exact.probabilities))
    epoch = pattern.epoch_rounds
    assert abs(reshuffled_exact_tau_max(pattern, rounds) - float(mean)) <= (epoch + 1) * 1e-15 + (0 if once else 1e-13)


# ---------------------------------------------------------------- Monte-Carlo with the pattern's sampler

@pytest.mark.parametrize("n, s, remainder, rounds, reps", [
    (12, 3, "short", 30, 4000),       # S | N, a partial last epoch (30 = 7·4 + 2)
    (11, 3, "short", 25, 4000),       # S ∤ N, short last slot
    (9, 1, "short", 40, 3000),
    pytest.param(10, 4, "drop", 200, 3000, marks=pytest.mark.slow),       # S ∤ N, R = 2: the chain
])
def test_law_matches_monte_carlo(n, s, remainder, rounds, reps):
    """Mean within 4.5 standard errors, each value's frequency within 4.5 binomial standard
    deviations (plus 1/reps)."""
    pattern = ReshuffledCyclic(n, s, remainder)
    sampled = delay_metrics(pattern.sample_batch(rounds, reps, 2024)).tau_max
    law = reshuffled_tau_max_law(pattern, rounds)
    assert abs(sampled.mean() - reshuffled_exact_tau_max(pattern, rounds)) <= 4.5 * sampled.std(ddof=1) / math.sqrt(reps)
    assert set(np.unique(sampled)) <= set(law.values.tolist())
    for v, p in zip(law.values, law.probabilities):
        frequency = np.mean(sampled == v)
        assert abs(frequency - p) <= 4.5 * math.sqrt(p * (1 - p) / reps) + 1 / reps, v


@pytest.mark.slow
def test_drop_bound_is_above_the_sampled_mean():
    """N = 10, S = 4, "drop", T = 2000 (sampled mean ≈ 12.2): exact chain 12.17, this
    bound ≈ 12.72, the epoch-level union bound 13.6, Lemma F.3's 4N/S = 10 does not hold."""
    pattern, rounds, reps = ReshuffledCyclic(10, 4, "drop"), 2000, 300
    sampled = delay_metrics(pattern.sample_batch(rounds, reps, 5)).tau_max
    error = sampled.std(ddof=1) / math.sqrt(reps)
    bound = reshuffled_tau_max_bound(pattern, rounds)
    assert sampled.mean() < bound < epoch_union_bound(pattern, rounds)
    assert sampled.mean() + 4.5 * error > 4 * 10 / 4
    assert abs(sampled.mean() - reshuffled_exact_tau_max(pattern, rounds)) <= 4.5 * error
    assert bound - reshuffled_exact_tau_max(pattern, rounds) < 0.6


def test_drop_bound_where_the_chain_is_refused():
    """R = N mod S = 10: the exact chain is over budget, the bound is not, and is above
    the sampled mean (14.3 ± 0.12 against 14.66; the epoch-level bound 16.45)."""
    pattern, rounds, reps = ReshuffledCyclic(100, 30, "drop"), 400, 200
    with pytest.raises(ValueError, match="reshuffled_tau_max_bound") as err:
        reshuffled_exact_tau_max(pattern, rounds)
    assert "\n" not in str(err.value)
    sampled = delay_metrics(pattern.sample_batch(rounds, reps, 1)).tau_max
    bound = reshuffled_tau_max_bound(pattern, rounds)
    assert sampled.mean() < bound < epoch_union_bound(pattern, rounds)


# ---------------------------------------------------------------- closed-form facts

def test_closed_form_against_the_product_formula():
    """F(m) = [((m+1)S)!/(mS)!]^{E−m−1} ((m+1)S)!/N!, and S = 1 is the classical count
    (m+1)^{N−m−1}(m+1)! of permutations with σ(i) ≤ i + m."""
    for n, s in ((12, 3), (20, 4), (9, 1)):
        epoch = n // s
        for m in range(epoch - 1):
            num, den = rs._g(n, s, epoch - 1, m)
            direct = Fraction(math.factorial((m + 1) * s) // math.factorial(m * s)) ** (epoch - m - 1) \
                * Fraction(math.factorial((m + 1) * s), math.factorial(n))
            assert Fraction(num, den) == direct
            if s == 1:
                assert Fraction(num, den) == Fraction((m + 1) ** (n - m - 1) * math.factorial(m + 1), math.factorial(n))


def test_edges():
    assert reshuffled_exact_tau_max(ReshuffledCyclic(5, 5), 50) == 0.0               # S = N
    law = reshuffled_tau_max_law(ReshuffledCyclic(5, 5), 7)
    assert law.values.tolist() == [0] and law.probabilities.tolist() == [1.0]
    assert reshuffled_exact_tau_max(ReshuffledCyclic(20, 3), 5) == 5.0               # T < E = 7
    assert reshuffled_exact_tau_max(ReshuffledCyclic(20, 3), 7) == 6.0               # T = E: E − 1
    assert reshuffled_exact_tau_max(ReshuffledCyclic(10, 4, "drop"), 2) == 2.0       # T = E = 2: the left-out
    assert reshuffled_exact_tau_max(ReshuffledCyclic(100, 20), 2000) == 8.0          # 2E − 2, up to 1e-800
    law = reshuffled_tau_max_law(ReshuffledCyclic(20, 4), 10**6)
    assert law.values.tolist() == [4, 5, 6, 7, 8] and law.probabilities[-1] == 1.0
    assert 2 * 5 - 2 <= 2 * (20 // 4)                                                  # within Lemma F.3's proof step
    tail = reshuffled_tau_max_tail(ReshuffledCyclic(20, 4), 6)
    assert tail.shape == (6,) and tail[:4].tolist() == [1.0] * 4 and 0 < tail[4] < 1 and tail[5] == 0  # D' ≤ r = 1


@pytest.mark.parametrize("call, match", [
    (lambda: reshuffled_tau_max_law(Uniform(10, 2), 20), "ReshuffledCyclic"),
    (lambda: reshuffled_exact_tau_max(Uniform(10, 2), 20), "ReshuffledCyclic"),
    (lambda: reshuffled_tau_max_bound(Uniform(10, 2), 20), "ReshuffledCyclic"),
    (lambda: reshuffled_tau_max_law(ReshuffledCyclic(10, 2), 0), "rounds must be an integer ≥ 1, got 0"),
    (lambda: reshuffled_exact_tau_max(ReshuffledCyclic(10, 2), -3), "got -3"),
    (lambda: reshuffled_tau_max_bound(ReshuffledCyclic(10, 2), 2.5), "got 2.5"),
    (lambda: reshuffled_tau_max_law(ReshuffledCyclic(100, 30, "drop"), 400), "remainder='drop'"),
])
def test_bad_input_is_a_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


def test_a_subclass_with_another_draw_is_refused():
    class Other(ReshuffledCyclic):
        def _generate(self, root, replicates, start, stop):
            return super()._generate(root, replicates, start, stop)

    with pytest.raises(ValueError, match="Other overrides"):
        reshuffled_exact_tau_max(Other(10, 2), 20)


# ---------------------------------------------------------------- E[τ_t]: the slot sums

def _old_reshuffled(pattern, rounds):
    """The first formula: C(V, u)/C(N, u) summed slot by slot with exact integers."""
    n, s_size, epoch = pattern.n_clients, pattern.per_round, pattern.epoch_rounds
    later = lambda slot: n - min(n, max(slot, 0) * s_size)  # noqa: E731
    steady = np.empty(epoch)
    for s in range(epoch):
        u = later(s + 1)
        steady[s] = s + sum(1.0 - (math.comb(later(s + epoch - k + 1), u) / math.comb(n, u) if u else 1.0)
                            for k in range(s + 1, s + epoch + 1))
    t = np.arange(rounds)
    first = np.where(t % epoch < epoch - 1, t + 1, epoch - 1).astype(float)
    return np.where(t < epoch, first, steady[t % epoch])


@pytest.mark.parametrize("n, s, remainder, rounds", [
    (10, 1, "short", 35), (10, 3, "short", 40), (9, 3, "drop", 30), (100, 7, "short", 300), (257, 2, "short", 600),
    (64, 8, "drop", 17), (5, 5, "short", 4), (40, 3, "short", 50),
])
def test_reshuffled_sum_matches_the_exact_integer_formula(n, s, remainder, rounds):
    pattern = ReshuffledCyclic(n, s, remainder)
    assert np.allclose(exact_tau_t(pattern, rounds), _old_reshuffled(pattern, rounds), rtol=1e-14, atol=1e-12)


def test_reshuffled_computes_only_the_slots_it_needs():
    """A million clients, ten rounds: all of them in the first epoch (once minutes of
    binomials over every slot)."""
    assert exact_tau_avg(ReshuffledCyclic(10**6, 1), 10) == 5.5
    # S = 1: the earliest previous slot J of u = N − s − 1 clients has E[J] = (s + 1)/(N − s),
    # so τ_t = s + N − (s + 1)/(N − s) at slot s of every later epoch
    n = 10**6
    tau = exact_tau_t(ReshuffledCyclic(n, 1), n + 3)
    assert tau[n : n + 3] == pytest.approx([s + n - (s + 1) / (n - s) for s in range(3)], rel=1e-15)


# ---------------------------------------------------------------- properties

@given(n=st.integers(1, 60), s=st.integers(1, 60), rounds=st.integers(1, 400),
       remainder=st.sampled_from(["short", "drop"]))
def test_law_bound_and_epoch_bound_agree(n, s, rounds, remainder):
    """The law sums to 1 and has the exact mean; exact ≤ bound ≤ epoch-level bound (the
    "drop" chain is checked elsewhere: here only its bound, for any R)."""
    s = min(s, n)
    pattern = ReshuffledCyclic(n, s, remainder)
    bound = reshuffled_tau_max_bound(pattern, rounds)
    assert bound <= epoch_union_bound(pattern, rounds) * (1 + 2e-12) + 1e-12
    if remainder == "drop" and n % s:
        assert bound >= min(rounds, pattern.epoch_rounds)                         # τ_max ≥ E surely
        return
    law = reshuffled_tau_max_law(pattern, rounds)
    mean = reshuffled_exact_tau_max(pattern, rounds)
    assert abs(law.probabilities.sum() - 1) < 1e-13
    assert abs(float(law.values @ law.probabilities) - mean) < 1e-11
    assert mean <= bound + 1e-12
    if rounds >= pattern.epoch_rounds:
        assert pattern.epoch_rounds - 1 <= mean <= 2 * pattern.epoch_rounds - 2 + 1e-12
