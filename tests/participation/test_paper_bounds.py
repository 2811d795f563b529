"""Expected delays at long horizons and large sizes (issue 20): the gap sampler's tilt at
any H, the exact laws checked against independent reference recursions, costs refused
before any work, and sampling windows that start anywhere."""
import math

import numpy as np
import pytest
from scipy import optimize

from participation import delay_metrics
from participation._random import keyed_uniforms, seed_sequence
from participation.expected import (exact_tau_avg, exact_tau_max, exact_tau_max_tail, exact_tau_t, monte_carlo,
                                    paper_tau_max_bound)
from participation.expected import gaps, paper_bounds, sampling
from participation.patterns import (Bernoulli, BiasedGroups, Cyclic, Markov, OnOffCycles, ReshuffledCyclic, Sine,
                                    Uniform, preset)
from participation.patterns.sampling import EPOCH_BLOCK

# ---------------------------------------------------------------- 1. gap sampler at long horizons


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
    (H.8) H no longer jumps to a threshold that leaves every round unresolved."""
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


# ---------------------------------------------------------------- 2. exact laws: references


def _client_chains(pattern, rounds):
    """(first_on, c, a) per client or chain, straight from the pattern's definition:
    c[r] = P(on at r | on at r−1), a[r] = P(on at r | off at r−1), r = 1..T−1."""
    if isinstance(pattern, Markov):
        P = pattern.transition_matrices()
        c = np.repeat(P[:, 1, 1][:, None], rounds - 1, axis=1)
        a = np.repeat(P[:, 0, 1][:, None], rounds - 1, axis=1)
        return np.asarray(pattern.pi, dtype=float), c, a
    p = pattern.probabilities(0, rounds).T
    return p[:, 0], p[:, 1:], p[:, 1:]


def _reference_tail(pattern, rounds):
    """P(τ_max ≥ l), l = 1..T, by the run-length chain of each client in long double:
    state 0 = on, k = off for k rounds; runs reaching l are absorbed."""
    first, c, a = (np.asarray(x, dtype=np.longdouble) for x in _client_chains(pattern, rounds))
    lengths = np.arange(1, rounds + 1)
    log_none = np.zeros(rounds, dtype=np.longdouble)
    seen = {}
    for i in range(first.size):
        key = (float(first[i]), c[i].tobytes(), a[i].tobytes())
        if key in seen:  # an identical client: the same law
            log_none += seen[key]
            continue
        state = np.zeros((rounds, rounds + 1), dtype=np.longdouble)  # row l − 1, column = run length
        state[:, 0], state[:, 1] = first[i], 1 - first[i]
        absorbed = np.zeros(rounds, dtype=np.longdouble)
        absorbed[0] = state[0, 1]
        state[0, 1] = 0
        for r in range(rounds - 1):
            new = np.zeros_like(state)
            new[:, 0] = state[:, 0] * c[i, r] + state[:, 1:].sum(axis=1) * a[i, r]
            new[:, 1] = state[:, 0] * (1 - c[i, r])
            new[:, 2:] = state[:, 1:-1] * (1 - a[i, r])
            reached = new[np.arange(rounds), lengths]
            absorbed += reached
            new[np.arange(rounds), lengths] = 0
            state = new
        with np.errstate(divide="ignore"):
            seen[key] = np.log1p(-np.minimum(absorbed, 1))
        log_none += seen[key]
    return np.asarray(-np.expm1(log_none), dtype=float)


def _reference_tau_t(pattern, rounds):
    """E[τ_t] = Σ_{k≤t+1} (1 − Π_i (1 − P(client i off in t−k+1..t))) in long double."""
    first, c, a = (np.asarray(x, dtype=np.longdouble) for x in _client_chains(pattern, rounds))
    n = first.size
    on = np.empty((n, rounds), dtype=np.longdouble)
    on[:, 0] = first
    for r in range(1, rounds):
        on[:, r] = on[:, r - 1] * c[:, r - 1] + (1 - on[:, r - 1]) * a[:, r - 1]
    out = np.zeros(rounds)
    for t in range(rounds):
        total = np.longdouble(0)
        for k in range(1, t + 2):
            s = t - k + 1
            window = (1 - on[:, s]) * np.prod(1 - a[:, s : t], axis=1)
            total += 1 - np.prod(1 - window)
        out[t] = float(total)
    return out


REFERENCE_CASES = [
    (Bernoulli(0.2, 40), 140),                                   # P2-like: rows start well above l = 1
    (BiasedGroups(23, group_size=4), 120),                       # several constant units
    (Sine.p3(30, 6), 130),                                       # one time-varying unit
    (Sine(4, np.array([0.3, 0.5, 0.3, 0.6]), 0.4, 0.6, 7.0, phase=np.array([0.0, 1.0, 0.0, 2.0])), 150),
    (Bernoulli(lambda t: np.array([1.0 if t % 4 == 0 else 0.3, 0.45, 0.45]), 3), 120),   # p = 1 in some rounds
    (Sine(2, 0.5, 1.0, 0.2, 6.0), 90),                           # p = 0 in some rounds (no truncation)
    (Markov(np.array([0.3, 0.6, 0.5]), np.array([-0.4, 0.5, 0.9])), 200),   # negative and strong correlation
    (Markov(0.6, 0.3, n_clients=12), 200),
    (preset("logit"), 180),
]


@pytest.mark.parametrize("pattern, rounds", REFERENCE_CASES)
def test_tau_max_law_matches_a_run_length_reference(pattern, rounds):
    """The blocked first-passage recursion (with its certified lower start and T-aware
    upper truncation) against a plain per-round run-length chain, to 1e-12 per l; the
    recursion it replaced was off by up to 3e-11 per l on P2 at T = 2000."""
    assert np.allclose(exact_tau_max_tail(pattern, rounds), _reference_tail(pattern, rounds), rtol=0, atol=1e-12)


@pytest.mark.parametrize("pattern, rounds", REFERENCE_CASES[2:5] + REFERENCE_CASES[6:7])
def test_tau_t_matches_a_window_reference(pattern, rounds):
    assert np.allclose(exact_tau_t(pattern, rounds), _reference_tau_t(pattern, rounds), rtol=0, atol=1e-12)


def test_tau_max_rows_start_where_the_law_is_certain():
    """Below the certified l_0 the recursion has no rows (P(τ_max < l) < 1e-13/T there)."""
    from participation.expected import independent
    from participation.expected.units import units_of

    plan = independent.tau_max_plan(units_of(preset("P2"), 10**6))
    assert plan["first"] > 30 and plan["rows"] < 300
    assert plan["block"] == plan["first"]


# ---------------------------------------------------------------- 2. sizes bounded before the work


def test_an_almost_never_available_client_needs_no_quadratic_table():
    """Bernoulli(1e-12) over 10^5 rounds: τ_max = T except with probability ~1e-35, so
    the law is certain everywhere; it once allocated T²/2 cells (MemoryError)."""
    pattern = Bernoulli(1e-12, 5)
    assert exact_tau_max(pattern, 10**5) == pytest.approx(10**5, abs=1e-6)
    assert exact_tau_avg(pattern, 10**5) == pytest.approx((10**5 + 1) / 2, rel=1e-6)


def test_constant_patterns_never_build_rounds_by_clients(monkeypatch):
    """Time-constant probabilities are read as such: P2 at T = 10^7 (a (T, N) table of
    8 GB before) needs only arrays of T values."""
    import tracemalloc

    tracemalloc.start()
    try:
        avg = exact_tau_avg(preset("P2"), 10**6)
        bound = paper_tau_max_bound(preset("P2"), 10**6)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert avg == pytest.approx(22.7468, abs=1e-3) and bound.value > 0
    assert peak < 100 * 2**20  # a (T, N) float table would be 800 MB


def test_time_varying_probabilities_are_read_in_chunks(monkeypatch):
    """P3's probabilities are scanned chunk by chunk, so the memory limit refuses what the
    units need rather than an allocation of rounds × clients."""
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.001")
    with pytest.raises(ValueError, match=r"exact delays for Sine at T=100000.*GiB|MiB"):
        exact_tau_max(preset("P3"), 10**5)


@pytest.mark.parametrize("call, pattern, rounds, what", [
    (exact_tau_max, preset("P2"), 10**7, r"exact E\[τ_max\] for Bernoulli at T=10000000"),
    (exact_tau_max, preset("H8"), 10**7, r"exact E\[τ_max\] for BiasedGroups at T=10000000"),
    (exact_tau_avg, preset("P3"), 10**7, r"exact delays for Sine at T=10000000 \(reading 10000000 × 100"),
    (exact_tau_max, preset("P3"), 10**6, r"for Sine at T=1000000"),
    (exact_tau_max, Markov(0.1, 0.95, n_clients=50), 10**6, r"exact E\[τ_max\] for Markov"),
    (exact_tau_avg, Uniform(10**6, 10**5), 10, r"Uniform\(N=1000000, S=100000\)"),
    (exact_tau_avg, Sine.fedawe(np.linspace(0.1, 0.5, 20), 0.5, 0.5), 10**5, r"Sine at T=100000 \(20\+ time-varying"),
])
def test_costly_exact_values_are_refused_before_the_work(monkeypatch, call, pattern, rounds, what):
    monkeypatch.setenv("FEDVERIFY_EXACT_SECONDS", "5")
    with pytest.raises(ValueError) as err:
        call(pattern, rounds)
    message = str(err.value)
    assert "\n" not in message and "use monte_carlo" in message and "needs ~" in message and "over the limit" in message
    assert __import__("re").search(what, message), message


def test_time_limit_is_validated(monkeypatch):
    monkeypatch.setenv("FEDVERIFY_EXACT_SECONDS", "soon")
    with pytest.raises(ValueError, match="FEDVERIFY_EXACT_SECONDS must be a number of seconds, got 'soon'"):
        exact_tau_max(preset("P2"), 1000)


def test_monte_carlo_refuses_what_one_chunk_cannot_hold():
    with pytest.raises(ValueError, match=r"Monte-Carlo over 1000000000 rounds × 100 clients.*'gaps'"):
        monte_carlo(preset("P2"), 10**9, 2, seed=0, method="gaps")
    # whole traces are streamed a window of rounds at a time, so only a window too wide is refused
    with pytest.raises(ValueError, match=r"Monte-Carlo over 1000000 rounds × 100000000 clients.*'trace'"):
        monte_carlo(Bernoulli(0.2, 10**8), 10**6, 2, seed=0, method="trace")


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


@pytest.mark.parametrize("n, s", [(10, 3), (9, 3), (100, 7), (5, 5), (7, 1)])
def test_cyclic_closed_form_equals_its_trace(n, s):
    for rounds in (1, 2, -(-n // s) - 1, -(-n // s), 3 * n + 1):
        if rounds >= 1:
            assert np.array_equal(exact_tau_t(Cyclic(n, s), rounds), delay_metrics(Cyclic(n, s).sample(rounds)).tau)


def test_cyclic_at_ten_million_rounds_builds_no_trace():
    assert exact_tau_max(Cyclic(10**6, 3), 10**7) == 333333


def test_on_off_cycles_with_a_long_period():
    """The longest absence per phase is a closed form: a period of 10^5 once needed a
    (phases × 2·period) table."""
    pattern = OnOffCycles.from_probability(100, 10**5, 0.1)
    top = exact_tau_max(pattern, 3 * 10**5)
    assert 10**5 - 10**4 <= top <= 10**5


def test_capped_geometric_sum_equals_the_array_sum():
    for n in (1, 100):
        for rounds in (1, 2, 50, 3000):
            for p in (1e-9, 0.2, 0.8, 0.999, 1 - 1e-9):
                l = np.arange(1, rounds + 1)
                direct = float(np.minimum(1.0, n * rounds * np.exp(l * math.log(p))).sum())
                assert paper_bounds._capped_geometric_sum(n * rounds, p, rounds) == pytest.approx(direct, rel=1e-13)


# ---------------------------------------------------------------- 3. sampling windows anywhere

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
