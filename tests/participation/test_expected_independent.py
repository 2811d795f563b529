"""The exact laws of independent units (participation.expected.laws.independent_laws: Bernoulli clients,
constant or time-varying, and two-state Markov chains), checked against independent references:

1. exact_tau_max_tail and exact_tau_t against plain per-round run-length and window
   recursions in long double;
2. exact_tau_max (and exact_tau_t), which promise an absolute error below 1e-12, against
   40-digit evaluations written from the definitions;
3. the two rounding helpers it uses (_off_power, _prefix_sum) on their own.
"""
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from participation.expected import exact_tau_max, exact_tau_max_tail, exact_tau_t
from participation.expected.laws import independent_laws as independent
from participation.patterns import Bernoulli, BiasedGroups, Markov, Sine, preset

# ---------------------------------------------------------------- 1. run-length and window references


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


@pytest.mark.parametrize("pattern, rounds", [pytest.param(*case, marks=pytest.mark.slow) if i in (0, 2, 7) else case
                                             for i, case in enumerate(REFERENCE_CASES)])
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
    from participation.expected.laws.units import units_of

    plan = independent.tau_max_plan(units_of(preset("P2"), 10**6))
    assert plan["first"] > 30 and plan["rows"] < 300
    assert plan["block"] == plan["first"]


# ---------------------------------------------------------------- 2. 40-digit references

DIGITS = 40


def _no_run_bernoulli(p, rounds: int, l: int):
    """P(no run of ≥ l absences in ``rounds`` Bernoulli(p) rounds), Feller's recursion
    u_n = u_{n−1} − p q^l u_{n−l−1} (u_n = 1 for n < l, u_l = 1 − q^l)."""
    if l > rounds:
        return mpmath.mpf(1)
    q_l = (1 - p) ** l
    u = [mpmath.mpf(1)] * l + [1 - q_l]
    for n in range(l + 1, rounds + 1):
        u.append(u[n - 1] - p * q_l * u[n - l - 1])
    return u[rounds]


def _no_run_chain(first_on, c, a, rounds: int, l: int):
    """The same for a two-state chain (P(on at 0) = first_on, P(on|on) = c, P(on|off) = a),
    by the run-length states: on_r = P(no run ≥ l through r, on at r), and the absent
    states of run length k < l weigh on_{r−k}(1 − c)(1 − a)^{k−1}, or (1 − first_on)(1 − a)^r
    for the leading run; X_r = Σ_{k=1}^{min(r, l−1)} (1 − a)^{k−1} on_{r−k}."""
    stay, leave = 1 - a, 1 - c
    far = stay ** (l - 1)
    on, x = [first_on], mpmath.mpf(0)
    for r in range(rounds - 1):
        lead = (1 - first_on) * stay**r if r + 1 <= l - 1 else 0
        off = leave * x + lead
        x = on[r] + stay * x - (far * on[r - l + 1] if r >= l - 1 else 0)
        on.append(c * on[r] + a * off)
    r = rounds - 1
    lead = (1 - first_on) * stay**r if r + 1 <= l - 1 else 0
    return on[r] + leave * x + lead


def _reference(units, rounds: int):
    """(E[τ_max], P(τ_max ≥ l) for l = 1..) from ((no_run(l), multiplicity), ...) factories."""
    tail = []
    for l in range(1, rounds + 1):
        none = mpmath.mpf(1)
        for no_run, multiplicity in units:
            none *= no_run(l) ** multiplicity
        tail.append(1 - none)
        if tail[-1] < mpmath.mpf(10) ** -35:
            break
    return mpmath.fsum(tail), tail


def _bernoulli_units(p, rounds):
    values, counts = np.unique(np.broadcast_to(np.asarray(p, dtype=float), (np.size(p),)), return_counts=True)
    return [(lambda l, v=mpmath.mpf(float(v)): _no_run_bernoulli(v, rounds, l), int(m)) for v, m in zip(values, counts)]


def _markov_units(pattern, rounds):
    """The chains as the pattern defines them (its float π and transition matrices taken as
    exact), identical chains counted once with their multiplicity."""
    matrices = pattern.transition_matrices()
    chains = [(float(pattern.pi[k]), float(matrices[k, 1, 1]), float(matrices[k, 0, 1])) for k in range(pattern.n_chains)]
    return [(lambda l, chain=chain: _no_run_chain(*map(mpmath.mpf, chain), rounds, l), chains.count(chain))
            for chain in sorted(set(chains))]


PRECISION_CASES = [
    ("Bernoulli(0.2, 100)", Bernoulli(0.2, 100), 400, lambda T: _bernoulli_units(np.full(100, 0.2), T)),
    ("Bernoulli(0.5, 10)", Bernoulli(0.5, 10), 200, lambda T: _bernoulli_units(np.full(10, 0.5), T)),
    ("per-client p", Bernoulli([0.15, 0.4, 0.4, 0.75, 0.9, 0.3]), 300,
     lambda T: _bernoulli_units([0.15, 0.4, 0.4, 0.75, 0.9, 0.3], T)),
    ("Markov, three chains", Markov(np.array([0.3, 0.6, 0.5]), np.array([-0.4, 0.5, 0.9])), 200, None),
    ("Markov(0.6, 0.5, 8)", Markov(0.6, 0.5, n_clients=8), 300, None),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, pattern, rounds, units", PRECISION_CASES, ids=[c[0] for c in PRECISION_CASES])
def test_exact_tau_max_is_within_its_promise_of_a_40_digit_reference(name, pattern, rounds, units):
    """The module promises an absolute error below 1e-12; Bernoulli(0.2, 100) at T = 400
    was once 2.4e-10 off. Each P(τ_max ≥ l) is held to 1e-13 (its share of the
    truncation, TAIL = 1e-13 in all, included)."""
    with mpmath.workdps(DIGITS):
        expected, tail = _reference(units(rounds) if units else _markov_units(pattern, rounds), rounds)
        got = exact_tau_max_tail(pattern, rounds)
        assert abs(mpmath.mpf(exact_tau_max(pattern, rounds)) - expected) < 1e-12
        for l, value in enumerate(tail):
            assert abs(mpmath.mpf(float(got[l])) - value) < 1e-13, l + 1
        assert np.all(got[len(tail):] < 1e-13)             # rows the reference stopped at (below 1e-35)


def test_the_two_run_length_references_agree():
    """Feller's recursion and the chain's run-length states (c = a = p) give the same law."""
    with mpmath.workdps(DIGITS):
        p = mpmath.mpf(0.3)
        for l in (1, 2, 5, 17):
            assert abs(_no_run_bernoulli(p, 60, l) - _no_run_chain(p, p, p, 60, l)) < mpmath.mpf(10) ** -35


@pytest.mark.slow
def test_exact_tau_t_is_within_its_promise_at_small_p():
    """E[τ_t] = Σ_{k ≤ t+1} (1 − (1 − q^k)^N) for Bernoulli(p): thousands of terms near 1,
    where a plain running sum piles up its roundings."""
    p, n, rounds = 0.01, 10, 20000
    got = exact_tau_t(Bernoulli(p, n), rounds)
    with mpmath.workdps(DIGITS):
        q = 1 - mpmath.mpf(p)
        total, prefix, k = mpmath.mpf(0), [], 1
        while True:
            term = 1 - (1 - q**k) ** n
            total += term
            prefix.append(total)
            if term < mpmath.mpf(10) ** -30:
                break
            k += 1
        for t in (0, 9, 99, 500, 1500, 4000, rounds - 1):
            expected = prefix[min(t, len(prefix) - 1)]
            assert abs(mpmath.mpf(float(got[t])) - expected) < 1e-12, t


# ---------------------------------------------------------------- 3. the two rounding fixes on their own


@pytest.mark.parametrize("on", [0.02, 0.01, 1e-3, 0.3, 0.7, 0.999, 0.0, 1.0])
def test_off_power_is_accurate_whatever_the_exponent(on):
    """(1 − on)^k within 4 ulps for k up to 10^5, where np.power(1 − on, k) carries the
    rounding of 1 − on k times over."""
    k = np.array([0, 1, 2, 7, 100, 1000, 10**4, 10**5])
    got = independent._off_power(np.full(k.size, on), k)
    with mpmath.workdps(DIGITS):
        for kk, value in zip(k, got):
            exact = (1 - mpmath.mpf(on)) ** int(kk)
            if exact < mpmath.mpf(2.0) ** -1000:                 # below the float range: 0 or subnormal
                assert value < 2.0**-1000
                continue
            assert abs(mpmath.mpf(float(value)) - exact) <= 4 * np.spacing(float(exact)), kk


def test_prefix_sum_rounds_once():
    rng = np.random.default_rng(3)
    for x in (rng.uniform(0, 1, 5000), 1 - rng.uniform(0, 1e-6, 5000), -rng.exponential(0.02, (3, 4000))):
        got = independent._prefix_sum(x, axis=-1)
        rows, sums = np.atleast_2d(x), np.atleast_2d(got)
        for row, out in zip(rows, sums):
            exact = Fraction(0)
            for i, value in enumerate(row):
                exact += Fraction(float(value))
                if i % 97 == 0 or i == row.size - 1:
                    assert abs(Fraction(float(out[i])) - exact) <= Fraction(np.spacing(abs(float(exact)))), i
