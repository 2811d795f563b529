"""Every theorem at extreme numbers: a Bound whose value is finite or whose invalidity is stated,
or a one-line ValueError — never another exception, never a silent wrong number, never a
(T, N) array (bounds/core.py module docstring, "Floating point"; bounds/logit.py, "Cost")."""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds import cafed, fedsum, logit, momentum
from bounds.core import FLOAT64, Bound, Constants, Formula, Magnitude, Source, at_most, make_bound, power_sum

EXTREMES = [0.0, 5e-324, 1e-310, 1e-308, 1e-300, 1e-150, 1e-12, 0.5, 1.0, 3.0, 1e12, 1e150, 1e300, 1e308,
            1.7976931348623157e308]
HUGE_INTS = [1, 2, 3, 1000, 2**31, 2**53 + 1, 2**63, 2**64 + 3, 10**30, 10**300, 10**400]

reals = st.one_of(st.sampled_from(EXTREMES), st.floats(0.0, 1e308, allow_nan=False, allow_infinity=False))
counts = st.one_of(st.sampled_from(HUGE_INTS), st.integers(1, 10**6))
probs = st.one_of(st.sampled_from([5e-324, 1e-300, 1e-9, 0.3, 0.5, 1.0 - 1e-16, 1.0]), st.floats(0.0, 1.0))
QUICK = settings(max_examples=40, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def outcome(call):
    """Run ``call``: a ValueError must be one line; a Bound must state what float64 cannot hold."""
    try:
        result = call()
    except ValueError as err:
        assert "\n" not in str(err) and str(err)
        return None
    if isinstance(result, Bound):
        check_bound(result)
    return result


def check_bound(bound: Bound) -> None:
    log_space_ok = bound.log_value is not None and math.isfinite(bound.log_value) and bound.value == math.inf
    exact_infinity = bound.value == math.inf and any(v == math.inf for v in bound.values.values())
    if not (math.isfinite(bound.value) or log_space_ok or exact_infinity):
        assert not bound.valid, f"non-finite value {bound.value} reported valid"
    for name, value in (bound.step_sizes or {}).items():
        if not 2.2250738585072014e-308 <= value < math.inf:
            assert not bound.valid, f"step size {name} = {value} reported valid"
    assert all(isinstance(c.holds, bool) for c in bound.conditions)
    str(bound)


def make_constants(L, sigma2, delta_f, F0=0.0, n=10, k=2, t=100, **extra):
    return Constants(L=L, sigma2=sigma2, delta_f=delta_f, F0=F0, n_clients=n, local_steps=k, rounds=t, **extra)


# ------------------------------------------------------------------------------ the reported cases


def test_fedsum_theorem_4_1_at_tiny_constants_returns_a_value_not_zero_division():
    """L = σ² = Δ_f = 1e-308: √(Nτ̂Δ_f/(mKTLσ²)) divided by a product that underflowed to 0."""
    bound = fedsum.theorem_4_1(make_constants(1e-308, 1e-308, 1e-308, n=2, k=1, t=10), 2, 1)
    assert bound.step_sizes["eta_l"] == pytest.approx(math.sqrt(0.4) * 1e154)  # √(2·2/(10·1e-308))
    assert not bound.valid and any("underflow" in c.name for c in bound.violated)  # the bound is ≈ 1e-461
    # 30√2·√(1e-924/20) + 20·2·1e-616/10: the first term, 9.49e-462
    assert bound.log_value == pytest.approx(math.log(30 * math.sqrt(2 / 20)) - 462 * math.log(10), rel=1e-12)


def test_fedsum_theorem_4_1_at_huge_constants_is_invalid_with_the_overflow_named():
    bound = fedsum.theorem_4_1(make_constants(1e308, 1e308, 1e308, n=2, k=1, t=10), 2, 1)
    assert bound.value == math.inf and not bound.valid
    names = [c.name for c in bound.violated]
    assert FLOAT64 + "value ≤ 1.8e308 (overflow)" in names
    assert any("eta_l" in n and "underflow" in n for n in names)          # η_l ≈ 7e-310, subnormal
    assert bound.log_value == pytest.approx(math.log(4) + 616 * math.log(10), rel=1e-12)  # 20·2·1e616/10


def test_fedsum_underflowing_sides_are_compared_exactly():
    """τ_max = 1e308: η_gη_lK = 1e-309 ≤ 1/(8τ̂L) = 1.25e-309 holds (it read 1e-309 ≤ 0 [VIOLATED])."""
    bound = fedsum.theorem_4_1(make_constants(1.0, 1.0, 1.0, n=2, k=1, t=10), 1e308, 1)
    c6 = bound.conditions[0]
    assert c6.name.startswith("C.6") and c6.holds and "1.25e-309" in str(c6)
    assert c6.log_rhs == pytest.approx(-math.log(8) - 308 * math.log(10))
    assert not fedsum.lemma_c6(make_constants(1.0, 1.0, 1.0), 1e-154, 2e-154, 1e308, 1).conditions[0].holds


def test_fedsum_lemma_d6_at_huge_step_size_is_not_an_overflow_error():
    bound = fedsum.lemma_d6(make_constants(1.0, 1.0, 1.0, n=2, k=1, t=10), 1, 1e308, 2, 1)
    assert bound.value == math.inf and not bound.valid
    assert bound.log_value == pytest.approx(math.log(75) + 616 * math.log(10), rel=1e-12)  # 150·η_l²/2 dominates


def test_logit_theorem_2_with_K_times_T_beyond_int64():
    c = make_constants(1.0, 1.0, 1.0, n=2, k=2**40, t=2**40, zeta2=1.0, extra={logit.SURROGATE_KEY: 1.0})
    bound = logit.theorem_2(c, 0.5, 0.01, 1.0)
    assert bound.step_sizes["eta"] == pytest.approx(2.0**-40) and bound.valid


@pytest.mark.parametrize("rounds, n", [(10**11, 10), (10**12, 3), (2**80, 2**70)])
def test_logit_theorems_at_astronomical_T_N_never_build_the_array(rounds, n):
    c = make_constants(1.0, 1.0, 20.0, n=n, k=5, t=rounds, zeta2=0.5, extra={logit.SURROGATE_KEY: 0.2})
    for staleness in logit.STALENESS_FORMS:
        p = np.full(n, 0.5) if n == 10 else 0.5
        check_bound(logit.theorem_2(c, p, 0.01, 1.0, staleness=staleness))
    check_bound(logit.theorem_1(c, 0.5, 8.0, 0.01, 1.0))
    check_bound(logit.generator_error(c, 0.5, 0.01, 1.0, tau_max=8.0, form="cauchy_schwarz"))
    check_bound(logit.averaged_bound(c, 0.5, 0.1))
    if n == 10:  # (T, 1) availability against (N,) errors: the outer product factorises
        bound = logit.theorem_1(c, np.array([[0.5]]), 8.0, np.full(n, 0.02), 1.0)
        assert bound.values[logit.SYMBOLS["EPS_BAR"]] == pytest.approx(0.5 * 0.02, rel=1e-12)
    with pytest.raises(ValueError, match="TRACE_BUDGET"):
        logit.generator_error(c, 0.5, 0.01, 1.0, tau=1.0, form="trace")


# ------------------------------------------------------------------------------ cross-checks of the new computations


@pytest.mark.parametrize("p", [1.0, 0.999, 0.9, 0.5, 0.1, 0.01, 0.002])
@pytest.mark.parametrize("rounds", [1, 2, 3, 10, 100, 1000, 30000])
def test_exact_mean_sum_matches_the_array_computation(p, rounds):
    old = logit._exact_mean_factor(np.array([p]), rounds)
    new = logit.exact_mean_factor(np.array([p]), 1, rounds)
    assert new == pytest.approx(old, rel=1e-12, abs=0)


def test_exact_mean_factor_groups_equal_probabilities():
    p = np.array([0.2, 0.5, 0.5, 0.9, 0.2, 1.0])
    assert logit.exact_mean_factor(p, 6, 5000) == pytest.approx(logit._exact_mean_factor(p, 5000), rel=1e-12)
    assert logit.exact_mean_factor(0.3, 4, 700) == pytest.approx(logit._exact_mean_factor(np.full(4, 0.3), 700),
                                                                 rel=1e-12)
    with pytest.raises(ValueError, match="EXACT_MEAN_BUDGET"):
        logit.exact_mean_factor(1e-9, 1, 10**15)


@pytest.mark.parametrize("p", [1e-17, 1e-300, 5e-324])
def test_expected_staleness_at_tiny_p_does_not_cancel_to_zero(p):
    """E[τ^t] = ((1 − p)/p)(1 − (1 − p)^{t−1}) ≈ t − 1; the printed form gives 0 (or nan) once
    1 − p rounds to 1."""
    assert logit.expected_staleness(p, 5).ravel() == pytest.approx([0, 1, 2, 3, 4], rel=1e-12)
    c = make_constants(1.0, 1.0, 1.0, n=2, t=50, zeta2=1.0, extra={logit.SURROGATE_KEY: 1.0})
    exact = logit.theorem_2(c, p, 0.0, 1.0, staleness="exact_mean")
    expected = sum(math.sqrt((t - 1) / t) for t in range(1, 51))            # (1 − p)·Σ_t √(E[τ^t]/t)
    assert exact.values[logit.SYMBOLS["M_BAR"]] == pytest.approx(expected, rel=1e-12) and exact.valid
    assert logit.exact_mean_factor(p, 2, 50) == pytest.approx(expected, rel=1e-12)


def test_expected_staleness_unchanged_at_ordinary_p():
    p = np.array([1e-3, 0.2, 0.5, 1.0])
    t = np.arange(1, 40)[:, None]
    assert np.array_equal(logit.expected_staleness(p, 39), (1.0 - p) / p * (1.0 - (1.0 - p) ** (t - 1)))


@st.composite
def broadcastable(draw):
    rounds, n = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    shapes = [(), (n,), (1, n), (rounds, 1), (rounds, n)]
    p = draw(st.sampled_from(shapes))
    eps = draw(st.sampled_from(shapes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rounds, n, rng.uniform(0.05, 1.0, p), rng.uniform(0.0, 3.0, eps)


@QUICK
@given(broadcastable())
def test_statistics_over_the_given_arrays_match_the_broadcast_ones(case):
    rounds, n, p, eps = case
    shape = (rounds, n)
    full_p, full_eps = np.broadcast_to(p, shape), np.broadcast_to(eps, shape)
    limit = logit.DENSE_LIMIT
    try:
        logit.DENSE_LIMIT = 0                                    # force the O(input) path at a small size
        assert logit._mean(p, shape) == pytest.approx(full_p.mean(), rel=1e-12)
        assert logit._mean_min_over_rounds(p, shape) == pytest.approx(full_p.min(axis=0).mean(), rel=1e-12)
        assert logit._weighted_eps_bar(eps, p, shape) == pytest.approx(np.mean((1 - full_p) * full_eps), rel=1e-12)
    finally:
        logit.DENSE_LIMIT = limit


@pytest.mark.parametrize("s", [0.0, 0.5, 0.6, 1.0, 1.4, 2.0])
@pytest.mark.parametrize("first, last", [(1, 1), (1, 10), (1, 5000), (17, 4000), (3, 2)])
def test_power_sum_matches_explicit_sums(s, first, last):
    t = np.arange(first, last + 1, dtype=float)
    assert power_sum(s, first, last) == pytest.approx(float(np.sum(t ** -s)), rel=1e-12, abs=0)


def test_cafed_theorem_2_closed_form_sums_match_the_arrays():
    pi, lam = np.array([0.1, 0.9, 0.5]), np.array([0.9, 0.01, -0.3])
    kw = dict(eta=0.02, chains=(pi, lam), Gamma=0.5, D=1.0, H=1.5, diam=2.0)
    c = Constants(L=2.0, sigma2=1.0, delta_f=0.0, local_steps=2, rounds=3000)
    limit = cafed.step_sums.DENSE_ROUNDS
    for horizon, decay in (("infinite", 1.0), ("infinite", 0.6), ("finite", 1.0), ("finite", 0.0)):
        dense = cafed.theorem_2(np.full(3, 1 / 3), c, horizon=horizon, decay=decay, **kw)
        try:
            cafed.step_sums.DENSE_ROUNDS = 10
            closed = cafed.theorem_2(np.full(3, 1 / 3), c, horizon=horizon, decay=decay, **kw)
        finally:
            cafed.step_sums.DENSE_ROUNDS = limit
        for symbol, value in dense.values.items():
            assert closed.values[symbol] == pytest.approx(value, rel=1e-12), (horizon, decay, symbol)
        assert closed.value == pytest.approx(dense.value, rel=1e-12)


def test_cafed_theorem_2_at_astronomical_T():
    pi, lam = np.array([0.1, 0.9, 0.5]), np.array([0.9, 0.01, -0.3])
    kw = dict(eta=0.02, chains=(pi, lam), Gamma=0.5, D=1.0, H=1.5, diam=2.0)
    c = Constants(L=2.0, sigma2=1.0, delta_f=0.0, local_steps=2, rounds=10**12)
    check_bound(cafed.theorem_2(np.full(3, 1 / 3), c, **kw))
    with pytest.raises(ValueError, match="FINITE_ROUNDS_MAX"):
        cafed.theorem_2(np.full(3, 1 / 3), c, horizon="finite", **kw)
    with pytest.raises(ValueError, match="2\\*\\*62"):
        cafed.theorem_2(np.full(3, 1 / 3), c, T=2**64, **kw)


def test_fedsum_corollary_g1_stated_closed_forms_match_participation():
    c = make_constants(1.0, 1.0, 1.0, n=12, t=300)
    limit = fedsum.G1_DENSE_LIMIT
    for case, kw in ((1, {"per_round": 4}), (2, {"delta": 0.3})):
        for variant in ("corrected", "printed"):
            dense = fedsum.corollary_g1(c, case, variant=variant, **kw)
            try:
                fedsum.G1_DENSE_LIMIT = 0
                closed = fedsum.corollary_g1(c, case, variant=variant, **kw)
            finally:
                fedsum.G1_DENSE_LIMIT = limit
            assert closed.value == pytest.approx(dense.value, rel=1e-12) and closed.source.note == dense.source.note
    big = make_constants(1.0, 1.0, 1.0, n=10**6, t=10**12)
    check_bound(fedsum.corollary_g1(big, 2, delta=0.3))
    check_bound(fedsum.corollary_g1(big, 1, per_round=4))


def test_momentum_per_round_refuses_astronomical_schedules():
    schedule = momentum.single_stage(10**12, 1.0, 0.001)
    assert schedule.boundaries == (0, 10**12)
    with pytest.raises(ValueError, match="PER_ROUND_LIMIT"):
        schedule.per_round()


# ------------------------------------------------------------------------------ core


def test_magnitude_is_the_float_expression_where_float64_holds_it():
    a, b = 0.1, 3.7
    assert float(1 / (10 * Magnitude.of(a).sqrt() * 3 * b)) == 1 / (10 * math.sqrt(a) * 3 * b)
    assert float((Magnitude.of(2.0) * 3 + 1) ** 2) == (2.0 * 3 + 1) ** 2
    tiny = Magnitude.of(1e-200) * 1e-200 / 1e-300       # the product underflows; the quotient does not
    assert float(tiny) == pytest.approx(1e-100) and tiny.exact
    big = Magnitude.of(1e308) * 10
    assert big.value == math.inf and big.log == pytest.approx(309 * math.log(10))
    assert Magnitude.of(10**400).log == pytest.approx(400 * math.log(10))
    assert min(Magnitude.of(1e-320), Magnitude.of(1e-200) ** 2).log == pytest.approx(-400 * math.log(10))


def test_at_most_compares_out_of_range_sides_through_logarithms():
    small = Magnitude.of(1e-200) * 1e-200
    assert at_most("holds", small, small * 1.25).holds
    assert not at_most("fails", small * 1.25, small).holds
    assert "1.25e-400" in str(at_most("x", small, small * 1.25))
    assert at_most("plain", 1.0, 1.0 + 1e-13).holds and at_most("plain", 1.0 + 1e-15, 1.0).holds


def test_formula_rescues_terms_whose_float_evaluation_fails():
    L, T = sp.symbols("L T", positive=True)
    formula = Formula({"a": L * L / T, "b": 2**T}, (L, T))
    bound = make_bound(formula, {L: 1e200, T: 1e300}, Source("Test", "Thm 0"))
    assert bound.terms["a"] == pytest.approx(1e100) and bound.value == math.inf and not bound.valid
    assert make_bound(Formula({"a": L / T}, (L, T)), {L: 1.0, T: 4}, Source("Test", "Thm 0")).log_value is None
    with pytest.raises(ValueError, match="T is too large for float64"):
        formula.evaluate({L: 1.0, T: 10**400})


def test_constants_refuse_counts_beyond_float64():
    with pytest.raises(ValueError, match="rounds"):
        Constants(L=1.0, sigma2=1.0, delta_f=1.0, rounds=10**400)
    with pytest.raises(ValueError, match="L"):
        Constants(L=10**400, sigma2=1.0, delta_f=1.0)


# ------------------------------------------------------------------------------ hypothesis: every theorem


def fedsum_calls(c, a, b, eta_g, eta_l, case_p):
    tau_max, tau_avg = max(a, b), min(a, b)
    yield lambda: fedsum.theorem_4_1(c, tau_max, tau_avg)
    yield lambda: fedsum.theorem_4_1(c, tau_max, tau_avg, constants_variant="tight", algorithm="fedsum-cr",
                                     variant="printed")
    yield lambda: fedsum.theorem_c1(c, tau_max, tau_avg)
    yield lambda: fedsum.theorem_d1(c, tau_max, tau_avg, variant="printed")
    yield lambda: fedsum.theorem_e1(c, tau_max, tau_avg, constants_variant="tight")
    yield lambda: fedsum.corollary_4_1(c, tau_max, tau_avg)
    yield lambda: fedsum.lemma_c6(c, eta_g, eta_l, tau_max, tau_avg)
    yield lambda: fedsum.lemma_d6(c, eta_g, eta_l, tau_max, tau_avg, variant="printed")
    yield lambda: fedsum.lemma_e6(c, eta_g, eta_l, tau_max, tau_avg)
    yield lambda: fedsum.step_sizes_4_1(c, tau_max, tau_avg)
    yield lambda: fedsum.check_step_sizes(c, eta_g, eta_l, tau_max, tau_avg, algorithm="fedsum-cr")
    yield lambda: fedsum.corollary_g1(c, 2, delta=case_p)
    yield lambda: fedsum.corollary_g1(c, 1, per_round=1, variant="printed")
    yield lambda: fedsum.corollary_g1(c, 3, per_round=1)


@QUICK
@given(reals, reals, reals, reals, counts, counts, counts, reals, reals, reals, reals, probs)
def test_fedsum_theorems_at_extreme_numbers(L, sigma2, delta_f, F0, n, k, t, a, b, eta_g, eta_l, case_p):
    c = outcome(lambda: make_constants(L, sigma2, delta_f, F0, n, k, t))
    if c is None:
        return
    for call in fedsum_calls(c, a, b, eta_g, eta_l, case_p):
        outcome(call)


@pytest.mark.slow
@QUICK
@given(reals, reals, reals, counts, counts, counts, reals, reals, st.sampled_from([0.0, 0.5, 0.9, 1 - 1e-16]),
       probs, st.integers(0, 3), reals)
def test_momentum_theorems_at_extreme_numbers(L, sigma2, delta_f, n, k, t, eta_g, eta_l, beta, nu, tau, sigma_g2):
    c = outcome(lambda: make_constants(L, sigma2, delta_f, 0.0, n, k, t, zeta2=sigma_g2))
    schedule = outcome(lambda: momentum.single_stage(t, eta_g, eta_l, beta, nu))
    if c is None or schedule is None:
        return
    m = min(n, 2)
    outcome(lambda: momentum.theorem_4_1(c, schedule))
    for variant in ("corrected", "printed", "strict"):
        outcome(lambda: momentum.theorem_4_6(c, schedule, m, variant=variant, L_power=2))
    outcome(lambda: momentum.theorem_5_1(c, schedule, m, tau))
    outcome(lambda: momentum.corollary_g1(c, schedule, m, tau, variant="printed"))
    outcome(lambda: momentum.theorem_5_1(c, schedule, m, 10**200))


@pytest.mark.slow
@QUICK
@given(reals, reals, reals, counts, counts, counts, probs, reals, reals, reals, reals, st.none() | reals)
def test_logit_theorems_at_extreme_numbers(L, sigma2, delta_f, n, k, t, p, tau_max, eps, C1, zeta2, eta):
    c = outcome(lambda: make_constants(L, sigma2, delta_f, 0.0, n, k, t, zeta2=zeta2,
                                       extra={logit.SURROGATE_KEY: sigma2}))
    if c is None:
        return
    outcome(lambda: logit.theorem_1(c, p, tau_max, eps, C1, eta=eta))
    for staleness in logit.STALENESS_FORMS:
        outcome(lambda: logit.theorem_2(c, p, eps, C1, eta=eta, staleness=staleness))
    outcome(lambda: logit.theorem_2(c, p, eps, C1, variant="printed", staleness="per_client"))
    outcome(lambda: logit.generator_error(c, p, eps, C1, tau_max=tau_max, form="cauchy_schwarz"))
    outcome(lambda: logit.averaged_bound(c, p, eps, eta=eta))
    outcome(lambda: logit.client_drift(c, eta if eta is not None else 1.0, eps))


@pytest.mark.slow
@QUICK
@given(reals, reals, reals, reals, st.sampled_from([1, 2, 50, 10**6, 2**61, 2**63, 10**30]), reals, reals, reals,
       st.sampled_from([0.0, 0.6, 1.0]), st.sampled_from(["infinite", "finite"]), st.integers(1, 3))
def test_cafed_theorems_at_extreme_numbers(L, sigma2, mu, gamma, t, eta, D, diam, decay, horizon, k):
    c = outcome(lambda: Constants(L=L, sigma2=sigma2, delta_f=0.0, local_steps=k, rounds=min(t, 10**6)))
    if c is None:
        return
    alpha, pi, q = np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.9, 0.5]), np.array([0.0, 0.5, 0.5])
    for theorem, key in ((cafed.theorem_1, "Gamma"), (cafed.theorem_3, "Gamma_prime")):
        outcome(lambda: theorem(alpha, q, pi, c, mu=mu, **{key: gamma}))
        outcome(lambda: theorem(alpha, alpha / pi, pi, c, mu=mu, eps_opt=gamma, **{key: gamma}))
    kw = dict(eta=eta, chains=(pi, np.array([0.9, 0.01, -0.3])), Gamma=gamma, D=D, diam=diam, decay=decay,
              horizon=horizon, T=t)
    outcome(lambda: cafed.theorem_2(np.full(3, 1 / 3), c, **kw))
    outcome(lambda: cafed.theorem_2(np.full(3, 1 / 3), c, log_space=False, variant="printed", correlation="J", **kw))
