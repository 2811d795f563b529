"""Monte-Carlo method "gaps" for independent clients with periodic probabilities (P3, FedAWE).

The tables are checked against enumeration of short-gap paths, the lookups against direct
inversion, the sampled (τ_max, Σ_t τ_t) and whole masks against enumeration of every trace
(with the threshold, the steps drawn at first and the table cut forced so that refinement,
extension and cut paths all run), and the estimates against the exact E[τ_max], E[τ_avg].
"""
from __future__ import annotations

import functools
import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import stats

import participation
from participation.delays import per_round_delay
from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo
from participation.expected.samplers import periodic
from participation.patterns import Bernoulli, Sine

FIRST = np.array([[0.3, 0.6], [0.1, 0.6], [0.5, 0.2]])  # period 3, two clients


def _periodic_p(rounds: int, first: np.ndarray = FIRST) -> np.ndarray:
    return first[np.arange(rounds) % first.shape[0]]


def test_find_period():
    assert periodic.find_period(np.asarray(participation.preset("P3").probabilities(0, 2000))) == 10
    fedawe = Sine.fedawe(np.linspace(0.1, 0.5, 7), 0.5, 0.5)
    assert periodic.find_period(np.asarray(fedawe.probabilities(0, 500))) == 20
    assert periodic.find_period(_periodic_p(40)) == 3
    assert periodic.find_period(np.random.default_rng(0).uniform(0.1, 0.9, (50, 3))) is None
    assert periodic.find_period(_periodic_p(5)) is None  # a period needs two repeats in the horizon
    drifting = _periodic_p(60).copy()
    drifting[50, 1] += 1e-9
    assert periodic.find_period(drifting) is None


def _short_run_law_by_enumeration(p_first: np.ndarray, threshold: int, phase: int, top: int) -> np.ndarray:
    """P(S = s | φ) for s ≤ top, summing over every composition of s into gaps below H."""
    period = p_first.size

    def gap(ph, g):  # P(G = g | phase ph)
        cells = (ph + np.arange(g)) % period
        return p_first[cells[-1]] * np.prod(1 - p_first[cells[:-1]])

    def rho(ph):
        return np.prod(1 - p_first[(ph + np.arange(threshold - 1)) % period])

    law = np.zeros(top + 1)
    for s in range(top + 1):
        total = 0.0
        for parts in range(s + 1):
            for comp in itertools.product(range(1, threshold), repeat=parts):
                if sum(comp) != s:
                    continue
                prob, ph = 1.0, phase
                for g in comp:
                    prob *= gap(ph, g)
                    ph = (ph + g) % period
                total += prob * rho(ph)
        law[s] = total
    return law


@pytest.mark.parametrize("threshold", [2, 3, 4])
def test_short_run_tables_match_enumeration(threshold):
    rounds = 12
    laws = periodic.periodic_laws(_periodic_p(rounds), rounds, threshold=threshold)
    for client in range(2):
        for phase in range(3):
            k = int(laws.group_of[client]) * 3 + phase
            top = min(8, laws.cap - 1)
            law = _short_run_law_by_enumeration(FIRST[:, client], threshold, phase, top)
            s = np.arange(top + 1)
            pmf = laws.u[k, s] * laws.rho[laws.group_of[client] * 3 + (phase + s) % 3]
            np.testing.assert_allclose(pmf, law, rtol=1e-12, atol=1e-15)
            tail = laws.tail(k, s)                          # V(s) = P(S ≥ s)
            np.testing.assert_allclose(tail[:-1] - tail[1:], law[:-1], rtol=1e-9, atol=1e-15)
            assert tail[0] == 1.0


def _renewal_by_steps(p, threshold, length):
    """u_φ(s) and V_φ(r) step by step from their definitions (module docstring), for every row
    (sequence g, phase φ), cut at the first r where every V_φ(r) is below ``periodic._TAIL``."""
    groups, period = p.shape
    rows = groups * period

    def w(row, at, g):                      # P(short gap g from a point at absolute phase ``at``)
        seq = p[row // period]
        absent = np.prod([1 - seq[(at + j) % period] for j in range(1, g)])
        return absent * seq[(at + g) % period]

    u = np.zeros((rows, length + 1))
    v = np.zeros((rows, length))
    u[:, 0] = 1.0
    cap = length
    for r in range(1, length + 1):
        for row in range(rows):
            phase = row % period - 1                   # the run starts after a point of phase φ − 1
            terms = [(u[row, r - d], phase + r - d, d) for d in range(1, threshold) if r - d >= 0]
            u[row, r] = sum(x * w(row, at, d) for x, at, d in terms)
            v[row, r - 1] = sum(x * sum(w(row, at, g) for g in range(d, threshold)) for x, at, d in terms)
        if v[:, r - 1].max() < periodic._TAIL:
            cap = r
            break
    return u[:, :cap], v[:, :cap]


@pytest.mark.parametrize("threshold,length", [(2, 50), (5, 300), pytest.param(9, 700, marks=pytest.mark.slow), (1, 10)])
def test_renewal_tables_match_the_recurrence_step_by_step(threshold, length):
    """The blocked recurrences against the plain ones, including phases with p = 0 and p = 1."""
    p = np.array([[0.3, 0.0, 0.25, 0.6, 0.1, 0.45, 0.2], [0.05, 0.15, 1.0, 0.02, 0.3, 0.0, 0.5]])
    u, v = periodic._renewal_tables(p, threshold, length)
    u_ref, v_ref = _renewal_by_steps(p, threshold, length)
    assert u.shape == u_ref.shape and v.shape == v_ref.shape
    np.testing.assert_allclose(u, u_ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(v, v_ref, rtol=1e-12, atol=0)


def test_long_gap_survival():
    rounds = 30
    laws = periodic.periodic_laws(_periodic_p(rounds), rounds, threshold=3)
    for k in range(laws.p.size):
        group, phase = divmod(k, 3)
        q = 1 - laws.p[group]
        expected = np.cumprod([q[(phase + j) % 3] for j in range(rounds)])
        np.testing.assert_allclose(laws.long_survival[k], expected, rtol=1e-13)


def test_lookups_agree_with_inversion():
    """Every cell of both levels, and the exact completions, give #{survival > U'}."""
    rounds = 400
    laws = periodic.periodic_laws(np.asarray(Sine.p3(4, 1).probabilities(0, rounds)), rounds, threshold=9)
    rng = np.random.default_rng(2)
    for lookup, survival, offset in ((laws.short_lookup, laws.v, 0), (laws.long_lookup, laws.long_survival, 1)):
        split_cells = np.argwhere(lookup.top < 0)
        halves = rng.integers(0, 1 << 32, 20000, dtype=np.uint64)
        rows = rng.integers(0, survival.shape[0], 20000)
        # send a third of the draws into split cells, with every second-level cell represented
        pick = split_cells[rng.integers(0, len(split_cells), 7000)]
        rows[:7000] = pick[:, 0]
        halves[:7000] = (pick[:, 1].astype(np.uint64) << np.uint64(32 - lookup.bits)) | (
            halves[:7000] & np.uint64((1 << (32 - lookup.bits)) - 1))
        completions = rng.random(20000)
        values = periodic._draw(lookup, survival, offset, rows, halves, lambda at: completions[at])
        # U = (top 24 bits + completion)/2^24: a value the tables give holds for every completion
        uniform_open = 1.0 - ((halves >> np.uint64(8)).astype(float) + completions) * 2.0**-24
        expected = offset + np.array([np.count_nonzero(survival[r] > u) for r, u in zip(rows, uniform_open)])
        np.testing.assert_array_equal(values, expected)
        assert len(split_cells) and (lookup.fine < 0).any()   # both levels and the exact inversion ran


def _exact_delay_law(p: np.ndarray) -> dict:
    """The law of (τ_max, Σ_t τ_t) by enumerating every mask (computed once per p)."""
    return dict(_enumerated_law(p.tobytes(), p.shape))


@functools.lru_cache(maxsize=None)
def _enumerated_law(raw: bytes, shape: tuple) -> tuple:
    p = np.frombuffer(raw, dtype=float).reshape(shape)
    rounds, n = p.shape
    cells = rounds * n
    masks = ((np.arange(2 ** cells)[:, None] >> np.arange(cells)) & 1).astype(bool).reshape(-1, rounds, n)
    probs = np.prod(np.where(masks, p, 1 - p), axis=(1, 2))
    tau = per_round_delay(masks)                       # every mask at once, (2^(T·N), T)
    law = {}
    for key, prob in zip(zip(tau.max(axis=1).tolist(), tau.sum(axis=1).tolist()), probs.tolist()):
        law[key] = law.get(key, 0.0) + prob
    return tuple(law.items())


#: Period 4 with certain presences and certain absences (p = 1 and p = 0 phases).
EDGES = np.array([[0.3, 1.0], [0.0, 0.6], [0.5, 0.0], [0.0, 0.2]])


@pytest.mark.slow
@pytest.mark.parametrize("threshold, steps, cap, first", [(None, None, None, FIRST), (1, None, None, FIRST),
                                                          (2, 1, None, FIRST), (3, 1, None, FIRST), (5, 1, 2, FIRST),
                                                          (4, 2, 3, FIRST), (None, None, None, EDGES),
                                                          (3, 1, None, EDGES), (5, 1, 2, EDGES)])
def test_delays_match_enumeration(threshold, steps, cap, first):
    rounds = 7 if first is FIRST else 8
    p = _periodic_p(rounds, first)
    law = _exact_delay_law(p)
    laws = periodic.periodic_laws(p, rounds, threshold=threshold, steps=steps, cap=cap)
    reps = 4000
    tau_max, tau_avg = periodic.periodic_chunk(laws, rounds, np.random.SeedSequence(3), 0, reps)
    observed = {}
    for key in zip(tau_max.astype(int).tolist(), np.round(tau_avg * rounds).astype(int).tolist()):
        observed[key] = observed.get(key, 0) + 1
    assert set(observed) <= set(law)
    keys = sorted(law, key=law.get)
    big = [k for k in keys if reps * law[k] >= 5]
    small = [k for k in keys if reps * law[k] < 5]
    counts = [observed.get(k, 0) for k in big] + [sum(observed.get(k, 0) for k in small)]
    expected = [reps * law[k] for k in big] + [reps * sum(law[k] for k in small)]
    if expected[-1] == 0:
        counts, expected = counts[:-1], expected[:-1]
    assert stats.chisquare(counts, expected).pvalue > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("threshold, steps, cap, first", [(4, 1, 2, FIRST[:, :1]), (3, None, None, FIRST[:, :1]),
                                                          (5, 1, 2, EDGES[:, 1:]), (2, 1, None, EDGES[:, :1])])
def test_masks_match_enumeration(threshold, steps, cap, first):
    """EDGES[:, 1] is present at every round of phase 0, so with H = 5 no gap is ever long."""
    rounds = 8
    p = _periodic_p(rounds, first)
    laws = periodic.periodic_laws(p, rounds, threshold=threshold, steps=steps, cap=cap)
    reps = 3000
    root = np.random.SeedSequence(4)
    counts = {}
    for r in range(reps):
        key = periodic.periodic_trace(laws, root, r).tobytes()
        counts[key] = counts.get(key, 0) + 1
    observed, expected = [], []
    for bits in itertools.product([0, 1], repeat=rounds):
        mask = np.array(bits, dtype=bool).reshape(rounds, 1)
        observed.append(counts.pop(mask.tobytes(), 0))
        expected.append(reps * float(np.prod(np.where(mask, p, 1 - p))))
    assert not counts
    assert all(o == 0 for o, e in zip(observed, expected) if e == 0)   # no impossible mask
    observed, expected = np.array(observed), np.array(expected)
    possible = expected > 0
    order = np.argsort(expected[possible])
    observed, expected = observed[possible][order], expected[possible][order]
    tail = np.cumsum(expected) < 5                   # pool the rarest masks
    if tail.any():
        observed = np.append(observed[~tail], observed[tail].sum())
        expected = np.append(expected[~tail], expected[tail].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-3


_PERIOD_7 = Bernoulli(lambda t: 0.05 + 0.3 * (t % 7 == 0) + np.array([0.0, 0.1, 0.2]), n_clients=3)


@pytest.mark.parametrize("pattern", [Sine.p3(20, 4), _PERIOD_7], ids=["p3", "callable-period-7"])
def test_matches_exact_values(pattern):
    rounds = 400
    result = monte_carlo(pattern, rounds, 3000, seed=5, method="gaps", progress=False)
    assert result.method == "gaps"
    assert abs(result.tau_max.mean - exact_tau_max(pattern, rounds)) <= 4.5 * result.tau_max.stderr
    assert abs(result.tau_avg.mean - exact_tau_avg(pattern, rounds)) <= 4.5 * result.tau_avg.stderr


def test_p3_at_full_size_matches_exact_value():
    pattern = participation.preset("P3")
    result = monte_carlo(pattern, 2000, 400, seed=1, progress=False)
    assert abs(result.tau_max.mean - exact_tau_max(pattern, 2000)) <= 4.5 * result.tau_max.stderr
    assert abs(result.tau_avg.mean - exact_tau_avg(pattern, 2000)) <= 4.5 * result.tau_avg.stderr


def test_auto_and_gaps_take_the_periodic_sampler():
    pattern = participation.preset("P3")
    laws = periodic.pattern_laws(pattern, 2000)
    assert laws is not None and laws.period == 10 and laws.p.shape == (1, 10)
    direct = periodic.periodic_chunk(laws, 2000, np.random.SeedSequence(0), 0, 3)
    for method in ("auto", "gaps"):
        result = monte_carlo(pattern, 2000, 3, seed=0, progress=False, keep_samples=True, method=method)
        assert result.method == "gaps"
        np.testing.assert_array_equal(result.samples["tau_max"], direct[0])
        np.testing.assert_array_equal(result.samples["tau_avg"], direct[1])


def test_many_phase_rows_are_left_to_other_methods():
    many = Sine.fedawe(np.linspace(0.1, 0.5, 40), 0.5, 0.5)   # 40 sequences × 20 phases
    assert 40 * 20 > periodic.MAX_PHASE_ROWS
    assert periodic.pattern_laws(many, 300) is None


def test_independent_of_chunking_and_workers():
    pattern = Sine.p3(12, 3)
    runs = [monte_carlo(pattern, 300, 40, seed=2, method="gaps", progress=False, keep_samples=True, chunk_size=size)
            for size in (None, 1, 7)]
    with ThreadPoolExecutor(3) as pool:
        runs.append(monte_carlo(pattern, 300, 40, seed=2, method="gaps", progress=False, keep_samples=True,
                                chunk_size=4, executor=pool))
    offset = monte_carlo(pattern, 300, 30, seed=2, method="gaps", progress=False, keep_samples=True, _first=10)
    for run in runs[1:]:
        for key in ("tau_max", "tau_avg"):
            np.testing.assert_array_equal(run.samples[key], runs[0].samples[key])
    np.testing.assert_array_equal(offset.samples["tau_max"], runs[0].samples["tau_max"][10:])


@pytest.mark.slow
def test_forced_paths_are_chunk_invariant():
    """Extension (one planned step), cut S and refinement read keyed streams: chunking changes nothing."""
    rounds = 40
    laws = periodic.periodic_laws(_periodic_p(rounds), rounds, threshold=6, steps=1, cap=4)
    root = np.random.SeedSequence(8)
    whole = periodic.periodic_chunk(laws, rounds, root, 0, 30)
    parts = [periodic.periodic_chunk(laws, rounds, root, a, 10) for a in (0, 10, 20)]
    for i in range(2):
        np.testing.assert_array_equal(whole[i], np.concatenate([part[i] for part in parts]))


def test_threshold_out_of_range():
    with pytest.raises(ValueError, match="threshold"):
        periodic.periodic_laws(_periodic_p(20), 20, threshold=0)


def test_declared_period_gives_the_detected_tables():
    """Sine declares its period (a whole number of rounds); taking it at its word gives the tables
    that checking every round gives, without reading the T × N probabilities."""
    assert Sine.p3().repeats_every() == 10 and Sine.fedawe([0.2], 0.5, 0.5, period=7.5).repeats_every() is None
    assert Bernoulli(0.3, 4).repeats_every() is None
    pattern = Sine.p3(30, 6)
    declared = periodic.pattern_laws(pattern, 500)
    detected = periodic.periodic_laws(np.asarray(pattern.probabilities(0, 500)), 500)
    assert declared is detected                      # the same cached tables: same first period, same T


def test_a_fractional_period_is_found_or_refused_from_the_values():
    pattern = Sine(6, 0.3, 0.5, 0.5, period=2.5)     # p repeats every 5 rounds
    laws = periodic.pattern_laws(pattern, 200)
    assert laws is not None and laws.period == 5
    assert periodic.pattern_laws(Sine(6, 0.3, 0.5, 0.5, period=2.0 ** 0.5 * 10), 200) is None


def test_auto_leaves_dense_periodic_patterns_to_whole_traces():
    dense = Sine(30, 0.9, 0.1, 0.9, 10.0)             # p_t near 0.85: almost every gap would be a step
    laws = periodic.pattern_laws(dense, 400)
    assert laws.steps > periodic.AUTO_STEPS_PER_ROUND * 400
    assert monte_carlo(dense, 400, 3, seed=0, progress=False).method == "trace"
    assert monte_carlo(dense, 400, 3, seed=0, progress=False, method="gaps").method == "gaps"
    assert monte_carlo(Sine.p3(30, 6), 400, 3, seed=0, progress=False).method == "gaps"


@pytest.mark.slow
def test_refinement_of_many_rounds_per_run_matches_exact_values():
    """H = 20 for 12 clients leaves about two rounds in three unresolved, so most short runs hold
    several of them, each drawn from the point the previous one found."""
    pattern, rounds = Sine.p3(12, 3), 300
    laws = periodic.periodic_laws(np.asarray(pattern.probabilities(0, rounds)), rounds, threshold=20)
    tau_max, tau_avg = periodic.periodic_chunk(laws, rounds, np.random.SeedSequence(20), 0, 400)
    for samples, exact in ((tau_max, exact_tau_max(pattern, rounds)), (tau_avg, exact_tau_avg(pattern, rounds))):
        assert abs(samples.mean() - exact) <= 4.5 * samples.std(ddof=1) / np.sqrt(samples.size)
