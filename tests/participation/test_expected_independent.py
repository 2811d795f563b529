"""Two defects of the expected-delay module, checked against independent references:

1. FedSUM Lemma F.3 (4N/S, almost surely) was applied to ReshuffledCyclic with
   remainder="drop" and S ∤ N, where clients can miss whole epochs; with
   remainder="short" the reported proof step was the S | N one.
2. exact_tau_max (and exact_tau_t) promised an absolute error below 1e-12; they are
   compared here with 40-digit evaluations written from the definitions.
"""
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from participation.delays import delay_metrics
from participation.expected import exact_tau_max, exact_tau_max_tail, exact_tau_t, independent, paper_tau_max_bound
from participation.patterns import Bernoulli, Markov, ReshuffledCyclic

# ---------------------------------------------------------------- 1. Lemma F.3 and the remainder rule

UNEVEN = [(10, 4), (7, 2), (10, 3), (13, 5), (9, 4), (5, 3), (11, 2)]


@pytest.mark.parametrize("n, s", UNEVEN)
def test_short_epochs_keep_tau_max_within_the_reported_proof_step(n, s):
    """With S ∤ N and remainder="short" every client joins once per epoch of ⌈N/S⌉ rounds,
    so τ_max ≤ 2⌈N/S⌉ − 2 on every trace; the bound reports that step and keeps 4N/S."""
    pattern = ReshuffledCyclic(n, s, remainder="short")
    bound = paper_tau_max_bound(pattern, 300)
    step = 2 * -(-n // s) - 2
    label = [k for k in bound.steps if "2⌈N/S⌉ − 2" in k]
    assert len(label) == 1 and bound.steps[label[0]] == step
    assert "F.3 proof: 2⌊N/S⌋" not in bound.steps            # the S | N step does not describe this pattern
    assert bound.value == bound.steps["F.3 stated: 4N/S"] == 4 * n / s >= step
    sampled = delay_metrics(pattern.sample_batch(300, 200, 7)).tau_max
    assert sampled.max() <= step
    assert sampled.max() == step                               # reached: the bound is tight


@pytest.mark.parametrize("n, s", UNEVEN)
def test_drop_with_a_remainder_is_refused(n, s):
    pattern = ReshuffledCyclic(n, s, remainder="drop")
    with pytest.raises(ValueError) as err:
        paper_tau_max_bound(pattern, 100)
    message = str(err.value)
    assert "\n" not in message and "Lemma F.3" in message and "remainder='drop'" in message
    assert "remainder='short'" in message and "monte_carlo" in message and "reshuffled_tau_max_bound" in message


def test_drop_exceeds_the_lemma_it_was_given():
    """N = 10, S = 4, "drop": 2 of 10 clients sit out each epoch of 2 rounds, so runs of
    missed epochs push τ_max past 4N/S = 10 on most traces of 1000 rounds (no a.s. bound)."""
    pattern = ReshuffledCyclic(10, 4, remainder="drop")
    sampled = delay_metrics(pattern.sample_batch(1000, 400, 3)).tau_max
    assert sampled.mean() > 10 and (sampled > 10).mean() > 0.5


@pytest.mark.parametrize("n, s", [(12, 4), (9, 3), (6, 6)])
def test_drop_without_a_remainder_is_lemma_f3(n, s):
    """S | N: "drop" and "short" are the same pattern, and the lemma's proof applies."""
    for remainder in ("drop", "short"):
        bound = paper_tau_max_bound(ReshuffledCyclic(n, s, remainder), 200)
        assert bound.lemma == "FedSUM Lemma F.3" and bound.steps["F.3 proof: 2⌊N/S⌋"] == 2 * (n // s)
    sampled = delay_metrics(ReshuffledCyclic(n, s, "drop").sample_batch(200, 100, 5)).tau_max
    assert sampled.max() <= 2 * (n // s)


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


def test_exact_tau_t_is_within_its_promise_at_small_p():
    """E[τ_t] = Σ_{k ≤ t+1} (1 − (1 − q^k)^N) for Bernoulli(p): a plain running sum of
    thousands of terms near 1 was 2.7e-12 off here."""
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


# ---------------------------------------------------------------- 2. the two rounding fixes on their own


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
