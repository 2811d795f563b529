"""Participation measures against their definitions, each written out here as a plain loop."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from participation import Trace, delay_metrics
from participation.measures import (CITATIONS, NAMES, default_scale, label_coverage, longest_empty_run,
                                    longest_group_absence, measures, mixing_time, participation_error, return_time)

# The loaded profile (tests/conftest.py) sets the rest; the example count is bounded here.
FEW = settings(max_examples=min(settings().max_examples, 40))


# --- the definitions, one round and one client at a time ------------------------------------
def loop_longest_run(flags):
    best = run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        best = max(best, run)
    return best


def loop_longest_empty_run(mask):
    return loop_longest_run([not any(row) for row in mask.tolist()])


def loop_longest_group_absence(mask, groups):
    best = 0
    for g in set(groups.tolist()):
        members = [n for n in range(mask.shape[1]) if groups[n] == g]
        absent = [not any(mask[t, n] for n in members) for t in range(mask.shape[0])]
        best = max(best, loop_longest_run(absent))
    return best


def loop_participation_error(mask, period):
    rounds, n = mask.shape
    total = 0.0
    intervals = rounds // period
    for i in range(intervals):
        p = [0.0] * n
        for t in range(i * period, (i + 1) * period):
            size = sum(bool(x) for x in mask[t])
            for c in range(n):
                if mask[t, c]:
                    p[c] += 1.0 / size / period
        total += sum(abs(p[c] - 1.0 / n) for c in range(n)) ** 2
    return total / intervals


def loop_return_time(mask):
    rounds, n = mask.shape
    worst = 0.0
    for c in range(n):
        k = sum(bool(mask[t, c]) for t in range(rounds))
        worst = max(worst, math.inf if k == 0 else rounds / k)
    return worst


def loop_relaxation_time(column):
    counts = {(a, b): 0 for a in (0, 1) for b in (0, 1)}
    for t in range(len(column) - 1):
        counts[int(column[t]), int(column[t + 1])] += 1
    from_off, from_on = counts[0, 0] + counts[0, 1], counts[1, 0] + counts[1, 1]
    p_on = counts[0, 1] / from_off if from_off else 0.0
    p_off = counts[1, 0] / from_on if from_on else 0.0
    lam = 1.0 - p_on - p_off
    gap = 1.0 - abs(lam)
    return math.inf if gap == 0 else 1.0 / gap


def loop_mixing_time(mask):
    return max(loop_relaxation_time(mask[:, c].tolist()) for c in range(mask.shape[1]))


def loop_label_coverage(mask, hist, window):
    rounds, n = mask.shape
    classes = hist.shape[1]
    population = [sum(float(hist[c, k]) for c in range(n)) for k in range(classes)]
    population = [x / sum(population) for x in population]
    distances = []
    for w in range(rounds // window):
        mix = [0.0] * classes
        for t in range(w * window, (w + 1) * window):
            for c in range(n):
                if mask[t, c]:
                    for k in range(classes):
                        mix[k] += float(hist[c, k])
        total = sum(mix)
        if total == 0:
            distances.append(1.0)
        else:
            distances.append(0.5 * sum(abs(mix[k] / total - population[k]) for k in range(classes)))
    return sum(distances) / len(distances)


# --- random traces, edge cases included -----------------------------------------------------
masks = st.integers(1, 6).flatmap(
    lambda n: arrays(bool, st.tuples(st.integers(1, 14), st.just(n)),
                     elements=st.booleans() | st.sampled_from([False, False, True])))


def edge_masks():
    out = {
        "T=1": np.array([[True, False, True]]),
        "N=1": np.array([[True], [False], [False], [True], [True]]),
        "T=1,N=1": np.array([[False]]),
        "all-empty": np.zeros((6, 3), bool),
        "all-full": np.ones((6, 3), bool),
        "never-participating": np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [1, 0, 1]], bool),
        "empty-at-ends": np.array([[0, 0], [0, 0], [1, 0], [0, 1], [1, 1], [0, 0], [0, 0], [0, 0]], bool),
    }
    return list(out.values()), list(out)


EDGE, EDGE_IDS = edge_masks()


def check_all(mask, data):
    rounds, n = mask.shape
    assert longest_empty_run(mask) == loop_longest_empty_run(mask)
    groups = data.draw(arrays(np.int64, n, elements=st.integers(-2, 2)), label="groups")
    assert longest_group_absence(mask, groups) == loop_longest_group_absence(mask, groups)
    period = data.draw(st.integers(1, rounds), label="period")
    assert participation_error(mask, period) == pytest.approx(loop_participation_error(mask, period), abs=1e-12)
    assert return_time(mask) == loop_return_time(mask)
    assert mixing_time(mask) == pytest.approx(loop_mixing_time(mask), rel=1e-12)
    classes = data.draw(st.integers(1, 4), label="classes")
    hist = data.draw(arrays(np.int64, (n, classes), elements=st.integers(0, 5)), label="label_hist")
    hist[data.draw(st.integers(0, n - 1)), 0] += 1  # a positive total
    window = data.draw(st.integers(1, rounds), label="window")
    assert label_coverage(mask, hist, window) == pytest.approx(loop_label_coverage(mask, hist, window), abs=1e-12)


@FEW
@given(masks, st.data())
def test_every_measure_matches_its_loop(mask, data):
    check_all(mask, data)


@pytest.mark.parametrize("mask", EDGE, ids=EDGE_IDS)
@FEW
@given(data=st.data())
def test_every_measure_matches_its_loop_on_edge_cases(mask, data):
    check_all(mask, data)


@FEW
@given(masks)
def test_structural_identities(mask):
    rounds, n = mask.shape
    # one client per group: the longest absence of any client, FedSUM's τ_max; one group: empty rounds
    assert longest_group_absence(mask, np.arange(n)) == delay_metrics(mask).tau_max
    assert longest_group_absence(mask, np.zeros(n, int)) == longest_empty_run(mask)
    for period in range(1, rounds + 1):
        assert 0.0 <= participation_error(mask, period) <= 4.0
    assert 0.0 <= label_coverage(mask, np.ones((n, 2)), 1) <= 1.0
    assert mixing_time(mask) >= 1.0 and return_time(mask) >= 1.0
    assert longest_empty_run(Trace(mask)) == longest_empty_run(mask.astype(np.int8))


# --- known values ---------------------------------------------------------------------------
@pytest.mark.parametrize("rounds,n", [(1, 1), (6, 3), (12, 4)])
def test_full_participation(rounds, n):
    mask = np.ones((rounds, n), bool)
    assert longest_empty_run(mask) == 0
    for period in range(1, rounds + 1):
        if rounds % period == 0:
            assert participation_error(mask, period) == pytest.approx(0.0, abs=1e-15)
    hist = np.arange(1, 2 * n + 1).reshape(n, 2)
    for window in range(1, rounds + 1):
        assert label_coverage(mask, hist, window) == pytest.approx(0.0, abs=1e-15)
    assert return_time(mask) == 1.0
    assert mixing_time(mask) == math.inf  # nobody ever switches state


def test_empty_and_absent():
    mask = np.zeros((7, 3), bool)
    assert longest_empty_run(mask) == 7
    assert longest_group_absence(mask, np.array([0, 1, 1])) == 7
    assert return_time(mask) == math.inf
    assert label_coverage(mask, np.ones((3, 2)), 3) == 1.0
    assert participation_error(mask, 7) == pytest.approx(1.0)  # Σ_n |0 − 1/N| = 1
    mask[2:4, 0] = True  # group {1, 2} never participates
    assert longest_group_absence(mask, np.array([5, 9, 9])) == 7
    assert longest_group_absence(mask, np.array([5, 5, 9])) == 7
    assert longest_group_absence(mask, np.array([5, 5, 5])) == 3  # rounds 4..6
    assert longest_empty_run(mask) == 3


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_round_robin(n):
    """One client per round in turn: balanced over every window of P = N rounds, yet each
    client's fitted chain leaves "on" at once — fast mixing unless N = 2 (alternation)."""
    cycles = 40
    mask = np.zeros((cycles * n, n), bool)
    mask[np.arange(cycles * n), np.arange(cycles * n) % n] = True
    assert participation_error(mask, n) == pytest.approx(0.0, abs=1e-15)
    assert return_time(mask) == n
    assert longest_empty_run(mask) == 0
    if n == 2:
        assert mixing_time(mask) == math.inf  # λ = −1, periodic
    else:
        assert 1.0 < mixing_time(mask) < 2.5   # λ ≈ −1/(N − 1): t_rel ≈ (N − 1)/(N − 2)
        assert mixing_time(mask) == pytest.approx((n - 1) / (n - 2), rel=0.05)


@pytest.mark.parametrize("n,block", [(3, 8), (4, 12)])
def test_block_cycle(n, block):
    """Each client on for ``block`` consecutive rounds in turn: δ²(N·block) = 0 while the
    relaxation time is of order ``block`` ((N − 1)·block/N for a long trace)."""
    rounds = 40 * n * block
    mask = np.zeros((rounds, n), bool)
    mask[np.arange(rounds), (np.arange(rounds) // block) % n] = True
    assert participation_error(mask, n * block) == pytest.approx(0.0, abs=1e-15)
    assert participation_error(mask, n) > 0.5
    assert mixing_time(mask) == pytest.approx((n - 1) * block / n, rel=0.05)
    assert mixing_time(mask) > block / 2


def markov_trace(p_on, p_off, rounds, seed):
    rng = np.random.default_rng(seed)
    u = rng.random(rounds)
    state = rng.random() < p_on / (p_on + p_off)
    column = np.empty(rounds, bool)
    for t in range(rounds):
        column[t] = state
        state = (u[t] >= p_off) if state else (u[t] < p_on)
    return column[:, None]


@pytest.mark.parametrize("p_on,p_off", [(0.1, 0.2), (0.05, 0.05), (0.7, 0.8)])
def test_relaxation_time_of_a_simulated_chain(p_on, p_off):
    """λ = 1 − p_on − p_off; t_rel = 1/(1 − |λ|), = 1/(p_on + p_off) when λ ≥ 0. Tolerance: 5 standard
    errors of the delta method, Var λ̂ ≈ p_off(1 − p_off)/n_on + p_on(1 − p_on)/n_off."""
    rounds = 20000
    mask = markov_trace(p_on, p_off, rounds, seed=7)
    lam = 1.0 - p_on - p_off
    expected = 1.0 / (1.0 - abs(lam))
    if lam >= 0:
        assert expected == pytest.approx(1.0 / (p_on + p_off))
    pi = p_on / (p_on + p_off)
    var_lam = p_off * (1 - p_off) / (pi * rounds) + p_on * (1 - p_on) / ((1 - pi) * rounds)
    assert abs(mixing_time(mask) - expected) < 5 * expected**2 * math.sqrt(var_lam)


def test_relaxation_time_rules():
    # one exit from "on" in 3 steps, "off" never left: p_off = 1/3, p_on = 0
    assert mixing_time(np.array([[1], [1], [1], [0]], bool)) == pytest.approx(3.0)
    assert mixing_time(np.array([[0], [0], [0], [0], [1]], bool)) == pytest.approx(4.0)
    assert mixing_time(np.array([[0], [0]], bool)) == math.inf
    assert mixing_time(np.array([[1], [0], [1], [0]], bool)) == math.inf  # alternation, λ = −1
    assert mixing_time(np.array([[1, 0]], bool)) == math.inf  # T = 1: no transition


# --- measures() -----------------------------------------------------------------------------
def test_measures_dict():
    mask = np.array([[1, 0, 0, 1], [0, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0]], bool)
    groups = np.array([0, 0, 1, 1])
    hist = np.array([[3, 0], [1, 1], [0, 2], [2, 2]])
    scale = default_scale(mask)
    assert scale == round(4 * 6 / 8)
    out = measures(Trace(mask), groups=groups, label_hist=hist)
    assert list(out) == list(NAMES) and set(CITATIONS) == set(NAMES)
    assert all(isinstance(v, float) for v in out.values())
    m = delay_metrics(mask)
    assert out["tau_max"] == m.tau_max and out["tau_avg"] == m.tau_avg
    assert out["longest_empty_run"] == longest_empty_run(mask)
    assert out["longest_group_absence"] == longest_group_absence(mask, groups)
    assert out["participation_error"] == participation_error(mask, scale)
    assert out["return_time"] == return_time(mask) and out["mixing_time"] == mixing_time(mask)
    assert out["label_coverage"] == label_coverage(mask, hist, scale)
    plain = measures(mask, period=2, window=6)
    assert list(plain) == [k for k in NAMES if k not in ("longest_group_absence", "label_coverage")]
    assert plain["participation_error"] == participation_error(mask, 2)
    assert measures(mask, label_hist=hist, window=6)["label_coverage"] == label_coverage(mask, hist, 6)


def test_default_scale():
    assert default_scale(np.zeros((5, 3), bool)) == 5        # nobody takes part
    assert default_scale(np.ones((5, 3), bool)) == 1
    one = np.zeros((4, 10), bool)
    one[0, 0] = True
    assert default_scale(one) == 4                           # N·T/1 = 40, clipped to T
    half = np.zeros((4, 3), bool)
    half[:, 0] = True
    half[:2, 1] = True                                       # 3·4/6 = 2
    assert default_scale(half) == 2
    measures(one)                                            # defaults always valid


# --- bad inputs -----------------------------------------------------------------------------
MASK = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]], bool)


@pytest.mark.parametrize("call,text", [
    (lambda: longest_empty_run(np.array([[0, 2], [1, 0]])),
     r"mask must contain only 0 and 1, found 2 at index \(0, 1\)"),
    (lambda: mixing_time(np.array([[0.5, 1.0]])), "mask must be boolean or 0/1 integers, got dtype float64"),
    (lambda: return_time(np.array([1, 0, 1])), r"mask must have shape \(rounds, n_clients\), got shape \(3,\)"),
    (lambda: measures(np.zeros((2, 0), bool)), r"mask needs at least one round and one client, got shape \(2, 0\)"),
    (lambda: participation_error(MASK, 0), "period must be an integer ≥ 1, got 0"),
    (lambda: participation_error(MASK, -2), "period must be an integer ≥ 1, got -2"),
    (lambda: participation_error(MASK, 2.0), "period must be an integer ≥ 1, got 2.0"),
    (lambda: participation_error(MASK, True), "period must be an integer ≥ 1, got True"),
    (lambda: participation_error(MASK, 5), "period must be at most the number of rounds T = 4, got 5"),
    (lambda: measures(MASK, period=0), "period must be an integer ≥ 1, got 0"),
    (lambda: label_coverage(MASK, np.ones((3, 2)), 5), "window must be at most the number of rounds T = 4, got 5"),
    (lambda: label_coverage(MASK, np.ones((3, 2)), 0), "window must be an integer ≥ 1, got 0"),
    (lambda: measures(MASK, window=9, label_hist=np.ones((3, 2))), "window must be at most"),
    (lambda: label_coverage(MASK, np.array([[1, 0], [2, -1], [0, 0]]), 1),
     r"label_hist must be finite and ≥ 0, found -1.0 at index \(1, 1\)"),
    (lambda: label_coverage(MASK, np.array([[1, np.nan], [2, 1], [0, 0]]), 1),
     r"label_hist must be finite and ≥ 0, found nan at index \(0, 1\)"),
    (lambda: label_coverage(MASK, np.ones((2, 2)), 1), r"label_hist must have shape \(3, C\).*got shape \(2, 2\)"),
    (lambda: label_coverage(MASK, np.ones(3), 1), r"label_hist must have shape \(3, C\).*got shape \(3,\)"),
    (lambda: label_coverage(MASK, np.ones((3, 0)), 1), r"label_hist must have shape \(3, C\).*got shape \(3, 0\)"),
    (lambda: label_coverage(MASK, np.zeros((3, 2)), 1), "label_hist must hold at least one positive count"),
    (lambda: label_coverage(MASK, np.ones((3, 2), bool), 1),
     "label_hist must hold integer or real counts, got dtype bool"),
    (lambda: longest_group_absence(MASK, np.array([0, 1])), r"groups must have shape \(3,\).*got shape \(2,\)"),
    (lambda: longest_group_absence(MASK, np.zeros((3, 1), int)), r"groups must have shape \(3,\).*got shape \(3, 1\)"),
    (lambda: longest_group_absence(MASK, np.array([0.0, 1.0, 1.0])), "groups must be integers, got dtype float64"),
    (lambda: measures(MASK, groups=[0, 1, 2, 3]), r"groups must have shape \(3,\)"),
])
def test_bad_arguments_are_one_line_errors(call, text):
    with pytest.raises(ValueError, match=text) as info:
        call()
    assert "\n" not in str(info.value)
