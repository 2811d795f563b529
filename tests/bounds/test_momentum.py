"""Server-momentum bounds (bounds.momentum) against brute force, sympy, worked values computed
independently (not from the paper) and the paper's corollaries (Server momentum, AAAI 2024, arXiv:2312.12670)."""
from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from bounds.core import Constants
from bounds.momentum import (LocalStepStats, StageSchedule, constant_and_drop, corollary_g1, formula_4_1, formula_4_6,
                             formula_5_1, formula_g1, paper_schedule, schedule_quantities, single_stage, sym,
                             theorem_4_1, theorem_4_6, theorem_5_1)

# ---------------------------------------------------------------------------- helpers


@st.composite
def schedules(draw, max_stages: int = 4, max_length: int = 40):
    """Random schedules meeting constraint (3): T_s sorted, η_s = W_2/T_s, η_sν_s non-increasing."""
    stages = draw(st.integers(1, max_stages))
    lengths = sorted(draw(st.lists(st.integers(1, max_length), min_size=stages, max_size=stages)))
    w2 = draw(st.floats(0.5, 50.0))
    eta = [w2 / t for t in lengths]
    w1 = draw(st.sampled_from([0.0, 0.3, 2.0, 5.0]))
    products, previous = [], math.inf
    for e in eta:
        previous = min(e * draw(st.floats(0.05, 1.0)), previous)
        products.append(previous)
    nu = [p / e for p, e in zip(products, eta)]
    beta = [w1 / (w1 + p) for p in products]
    eta_l = draw(st.floats(1e-4, 0.1))
    return StageSchedule(tuple(lengths), tuple(eta), eta_l, tuple(beta), tuple(nu))


def constants_for(schedule, *, L=1.0, sigma2=1.0, zeta2=1.0, delta_f=2.0, n=20, K=5):
    return Constants(L=L, sigma2=sigma2, delta_f=delta_f, n_clients=n, local_steps=K,
                     rounds=schedule.total_rounds, zeta2=zeta2)


def unroll(schedule):
    """(stage, η_t, β_t, ν_t) for every round, by plain loops."""
    rounds = []
    for s, length in enumerate(schedule.lengths):
        for _ in range(length):
            rounds.append((s, schedule.eta_g[s], schedule.beta[s], schedule.nu[s]))
    return rounds


def reference_schedule(eta_l=1e-4):
    """The paper's η = (2, 1, 0.5) (Sec. 6.2) with T_s = (100, 200, 400), ν = 0.9, β_1 = 0.7 (chosen here)."""
    return constant_and_drop((2.0, 1.0, 0.5), 700, eta_l, nu=0.9, beta1=0.7)


REFERENCE_CONSTANTS = Constants(L=1.0, sigma2=1.0, delta_f=2.3, n_clients=100, local_steps=10, rounds=700, zeta2=1.0)

THEOREMS = {
    "4.1": lambda c, s, **kw: theorem_4_1(c, s),
    "4.6": lambda c, s, **kw: theorem_4_6(c, s, 4, **kw),
    "4.6-L2": lambda c, s, **kw: theorem_4_6(c, s, 4, L_power=2, **kw),
    "5.1": lambda c, s, **kw: theorem_5_1(c, s, 4, 3, **kw),
    "G.1": lambda c, s, **kw: corollary_g1(c, s, 4, 3, **kw),
}
VARIANTS = [("4.1", {}), ("4.6", {}), ("4.6", {"variant": "printed"}), ("4.6", {"variant": "strict"}),
            ("4.6-L2", {}), ("5.1", {}), ("5.1", {"variant": "printed"}), ("G.1", {}), ("G.1", {"variant": "printed"})]


# ----------------------------------------------------------------- schedule quantities


@given(schedules())
def test_schedule_quantities_match_round_by_round_brute_force(schedule):
    rounds = unroll(schedule)
    S, T = len(schedule.lengths), len(rounds)
    q = schedule_quantities(schedule)
    per_round_w1 = [e * b * v / (1 - b) for _, e, b, v in rounds]
    stage_sums = [sum(e for s_, e, _, _ in rounds if s_ == s) for s in range(S)]   # Σ_{t∈I_s} η_t = T_s η_s

    def stage_average(power):  # (1/S) Σ_s (1/T_s) Σ_{t∈I_s} η_t^power
        return sum(sum(e ** power for s_, e, _, _ in rounds if s_ == s) / schedule.lengths[s] for s in range(S)) / S

    assert (q.S, q.T) == (S, T)
    assert q.W1 == pytest.approx(per_round_w1[0], rel=1e-9, abs=1e-12)
    assert max(per_round_w1) - min(per_round_w1) <= 1e-9 * max(1.0, max(per_round_w1))
    assert q.W2 == pytest.approx(stage_sums[0], rel=1e-9) and np.allclose(stage_sums, q.W2, rtol=1e-9)
    assert q.eta_bar == pytest.approx(stage_average(1), rel=1e-12)
    assert q.eta_hat2 == pytest.approx(stage_average(2), rel=1e-12)
    assert q.eta_hat3 == pytest.approx(stage_average(3), rel=1e-12)
    assert q.C_eta == pytest.approx(rounds[0][1] / rounds[-1][1], rel=1e-12)
    assert q.C_beta == pytest.approx((1 - rounds[0][2]) / (1 - rounds[-1][2]), rel=1e-12)
    # identities derived here from constraint (3): W_2 = T/Σ_s η_s^{-1} and Tη̄/W_2 = (1/S)Σ_s T/T_s
    assert q.W2 == pytest.approx(T / sum(1 / e for e in schedule.eta_g), rel=1e-9)
    assert T * q.eta_bar / q.W2 == pytest.approx(sum(T / t for t in schedule.lengths) / S, rel=1e-9)
    eta_t, beta_t, nu_t = schedule.per_round()
    assert np.array_equal(eta_t, [r[1] for r in rounds]) and np.array_equal(nu_t, [r[3] for r in rounds])
    assert schedule.boundaries[-1] == T and np.array_equal(beta_t, [r[2] for r in rounds])


@given(schedules(max_length=25))
def test_c_beta_bounds_the_momentum_column_sums(schedule):
    """Σ_{t≥p} a_{t,p} ≤ C_β with a_{t,p} = (1−β_p) Π_{q=p+1}^t β_q (proof of Thm 4.1, App. D)."""
    betas = [r[2] for r in unroll(schedule)]
    worst = 0.0
    for p in range(len(betas)):
        total, product = 0.0, 1.0
        for t in range(p, len(betas)):
            product *= betas[t] if t > p else 1.0
            total += (1 - betas[p]) * product
        worst = max(worst, total)
    assert worst <= schedule_quantities(schedule).C_beta * (1 + 1e-12)


@given(schedules(max_length=15), st.integers(0, 2**32 - 1))
def test_constant_w1_gives_the_lyapunov_identity(schedule, seed):
    """z_t = x_t − W_1 d_t satisfies z_{t+1} − z_t = −η_t Δ_t across stage changes (eq. (4), App. D)."""
    rng = np.random.default_rng(seed)
    w1 = schedule_quantities(schedule).W1
    x, d = rng.normal(size=3), np.zeros(3)
    for _, eta, beta, nu in unroll(schedule):
        delta = rng.normal(size=3)
        z = x - w1 * d
        d = (1 - beta) * delta + beta * d
        x = x - eta * ((1 - nu) * delta + nu * d)
        np.testing.assert_allclose(x - w1 * d - z, -eta * delta, rtol=1e-9, atol=1e-9)


def test_reference_schedule_example():
    """β_s = W_1/(W_1 + η_s ν) (derived from (3)): η = (2, 1, 0.5), ν ≡ 0.9, β_1 = 0.7 give
    W_1 = 4.2 and β = (0.7, 0.8235, 0.9032)."""
    schedule = reference_schedule()
    q = schedule_quantities(schedule)
    assert schedule.lengths == (100, 200, 400) and schedule.eta_g == (2.0, 1.0, 0.5)
    assert q.W1 == pytest.approx(4.2) and np.allclose(schedule.beta, (0.7, 0.8235, 0.9032), atol=1e-4)
    assert (q.S, q.T, q.W2, q.C_eta) == (3, 700, 200.0, 4.0)
    assert (q.eta_bar, q.eta_hat2, q.eta_hat3) == pytest.approx((1.1667, 1.75, 3.0417), abs=1e-4)
    assert q.C_beta == pytest.approx(0.3 / (1 - 4.2 / 4.65)) and q.C_beta <= q.C_eta


@pytest.mark.parametrize("rounds, ends", [(1000, (143, 429)), (2000, (286, 857)), (700, (100, 300)),
                                          (1400, (200, 600))])
def test_paper_schedule_reproduces_the_figure_stage_ends(rounds, ends):
    """Fig. 2 marks 143/429 (T = 1000), Fig. 8 marks 286/857 (T = 2000) (Sec. 6.2; App. H.3)."""
    schedule = paper_schedule(rounds)
    assert schedule.boundaries == (0, *ends, rounds)
    assert np.allclose(schedule.eta_g, (2.0, 1.0, 0.5), rtol=2e-3) and schedule.eta_g[0] == 2.0
    assert schedule.eta_l == 0.01 and schedule.nu == (0.9, 0.9, 0.9)
    products = np.asarray(schedule.lengths) * np.asarray(schedule.eta_g)
    assert np.ptp(products) <= 1e-9 * products.max()


def test_single_stage_and_fedavg_schedules():
    schedule = single_stage(50, 1.5, 0.01, beta=0.9, nu=0.9)
    q = schedule_quantities(schedule)
    assert (q.S, q.T, q.W2, q.C_eta, q.C_beta) == (1, 50, 75.0, 1.0, 1.0)
    assert q.W1 == pytest.approx(1.5 * 0.81 / 0.1)
    fedavg = constant_and_drop((2.0, 1.0), 30, 0.01, nu=0.0, beta1=0.5)
    assert schedule_quantities(fedavg).W1 == 0.0 and fedavg.beta == (0.5, 0.5)


# ------------------------------------------------------------------- worked values


def test_reference_worked_values():
    """Regression values from an independent evaluation: Thm 4.1 → 14.4316, Thm 4.6 (m = 5) → 14.5237."""
    schedule = reference_schedule()
    b41 = theorem_4_1(REFERENCE_CONSTANTS, schedule)
    b46 = theorem_4_6(REFERENCE_CONSTANTS, schedule, 5)
    assert b41.value == pytest.approx(14.4316, abs=5e-5)
    assert b46.value == pytest.approx(14.5237, abs=5e-5)
    assert b41.terms["initial"] == pytest.approx(64 / 17 * 2.3 / (3 * 200 * 1e-4 * 10), rel=1e-12)
    assert b41.terms["initial"] == pytest.approx(14.43, abs=5e-3)
    caps = {c.name.split("<= ")[-1]: c.rhs for c in b46.conditions}
    assert caps["m(n-1)/(n(m-1))"] == pytest.approx(1.2375) and caps["17m/282"] == pytest.approx(0.3014, abs=1e-4)
    assert b41.valid
    assert [c.name for c in b46.violated] == ["eta_l C_eta (1 + L eta_bar + L^2 W1^2 C_eta) S K <= 17m/282"]


def test_uniform_epoch_statistics():
    """The experiments' K ~ U{1..6} (App. H.1) gives φ_1 = 3.5, φ_2 = 91/6, φ_3 = H_6/6 ≈ 0.40833, K_max = 6."""
    stats = LocalStepStats.from_steps(np.arange(1, 7).reshape(6, 1))
    assert (stats.phi1, stats.phi2, stats.k_max) == pytest.approx((3.5, 91 / 6, 6))
    assert stats.phi3 == pytest.approx(2.45 / 6, rel=1e-12)
    assert LocalStepStats.constant(4) == LocalStepStats(4.0, 16.0, 0.25, 4.0)


@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 5))
def test_local_step_statistics_match_brute_force(seed, rounds, m):
    steps = np.random.default_rng(seed).integers(1, 9, size=(rounds, m))
    stats = LocalStepStats.from_steps(steps)
    rows = [list(map(int, row)) for row in steps]
    assert stats.phi1 == pytest.approx(sum(sum(r) / m for r in rows) / rounds)
    assert stats.phi2 == pytest.approx(sum(sum(k * k for k in r) / m for r in rows) / rounds)
    assert stats.phi3 == pytest.approx(sum(sum(1 / k for k in r) / m for r in rows) / rounds)
    assert stats.k_max == max(max(r) for r in rows)


# ------------------------------------------------------------------ cross-theorem checks


@given(schedules(max_stages=1), st.sampled_from([0.5, 1.0, 3.0]), st.integers(2, 30))
def test_theorem_4_6_with_everyone_sampled_is_theorem_4_1_for_one_stage(schedule, L, n):
    """m = n and S = 1 make Ψ_l, Ψ_g of Thm 4.6 equal to Thm 4.1's (derived here)."""
    constants = constants_for(schedule, L=L, n=n)
    full = theorem_4_1(constants, schedule)
    for variant in ("corrected", "strict"):
        partial = theorem_4_6(constants, schedule, n, variant=variant)
        assert partial.value == pytest.approx(full.value, rel=1e-10)
        assert partial.terms["initial"] == pytest.approx(full.terms["initial"], rel=1e-12)


def test_local_steps_default_to_constant_k():
    schedule = reference_schedule()
    constant = theorem_5_1(REFERENCE_CONSTANTS, schedule, 5, 2)
    logged = theorem_5_1(REFERENCE_CONSTANTS, schedule, 5, 2, np.full((700, 5), 10))
    given_stats = theorem_5_1(REFERENCE_CONSTANTS, schedule, 5, 2, LocalStepStats.constant(10))
    assert constant.value == pytest.approx(logged.value, rel=1e-12) == given_stats.value


# ------------------------------------------------------------------------- variants


@pytest.mark.slow
def test_theorem_4_6_printed_differs_only_in_the_leading_denominator():
    s = sym
    difference = sp.simplify(formula_4_6("printed").expr - formula_4_6("corrected").expr)
    expected = sp.Rational(64, 17) * s.delta_f / (s.S * s.W2 * s.K) * (1 / s.m - 1 / s.eta_l)
    assert sp.simplify(difference - expected) == 0
    printed = theorem_4_6(REFERENCE_CONSTANTS, reference_schedule(), 5, variant="printed")
    corrected = theorem_4_6(REFERENCE_CONSTANTS, reference_schedule(), 5)
    assert {k: v for k, v in printed.terms.items() if k != "initial"} == \
        {k: v for k, v in corrected.terms.items() if k != "initial"}
    assert printed.terms["initial"] / corrected.terms["initial"] == pytest.approx(1e-4 / 5)


def test_theorem_4_6_strict_doubles_only_when_someone_is_left_out():
    schedule = reference_schedule()
    corrected, strict = (theorem_4_6(REFERENCE_CONSTANTS, schedule, 5, variant=v) for v in ("corrected", "strict"))
    assert strict.value == pytest.approx(2 * corrected.value, rel=1e-12)
    assert all(strict.terms[k] == pytest.approx(2 * v) for k, v in corrected.terms.items())
    assert theorem_4_6(REFERENCE_CONSTANTS, schedule, 100, variant="strict").value == \
        pytest.approx(theorem_4_6(REFERENCE_CONSTANTS, schedule, 100).value, rel=1e-12)


@pytest.mark.parametrize("L", [0.5, 1.0, 4.0])
def test_theorem_4_6_L_power_changes_only_the_sampling_drift_terms(L):
    schedule = reference_schedule()
    constants = dataclasses.replace(REFERENCE_CONSTANTS, L=L)
    l3, l2 = (theorem_4_6(constants, schedule, 5, L_power=p) for p in (3, 2))
    changed = {k for k in l3.terms if l3.terms[k] != pytest.approx(l2.terms[k], rel=1e-12)}
    assert changed == (set() if L == 1.0 else {"sigma_l_sampling_drift", "sigma_g_sampling_drift"})
    for k in changed:
        assert l3.terms[k] / l2.terms[k] == pytest.approx(L)


def test_theorem_5_1_corrected_adds_exactly_the_server_step_term():
    s = sym
    difference = sp.simplify(formula_5_1("corrected").expr - formula_5_1("printed").expr)
    assert sp.simplify(difference - 2 * s.L * s.eta_hat2 * s.eta_l * s.T * s.phi3 * s.sigma_l2 / (s.m * s.W2)) == 0
    corrected = theorem_5_1(REFERENCE_CONSTANTS, reference_schedule(), 5, 2)
    printed = theorem_5_1(REFERENCE_CONSTANTS, reference_schedule(), 5, 2, variant="printed")
    assert set(corrected.terms) - set(printed.terms) == {"sigma_l_server"}
    assert corrected.value - printed.value == pytest.approx(corrected.terms["sigma_l_server"], rel=1e-9)


@pytest.mark.slow
@given(schedules(), st.integers(1, 10), st.integers(0, 6))
def test_corollary_g1_dominates_theorem_5_1_term_by_term(schedule, m, tau):
    constants = constants_for(schedule, n=12)
    general, uniform = corollary_g1(constants, schedule, m, tau), theorem_5_1(constants, schedule, m, tau)
    assert all(general.terms[k] >= v for k, v in uniform.terms.items())
    assert general.terms["sigma_g_arrival"] == pytest.approx(6 * constants.zeta2)


def test_delay_condition_counts_tau_plus_one_when_corrected():
    schedule, constants = reference_schedule(), REFERENCE_CONSTANTS
    for function, c in ((theorem_5_1, 120), (corollary_g1, 180)):
        corrected = {x.name: x for x in function(constants, schedule, 5, 0).conditions}
        printed = {x.name: x for x in function(constants, schedule, 5, 0, variant="printed").conditions}
        assert set(corrected) - set(printed) == {f"eta_l <= sqrt(1/({c} L^2 C_eta (tau + 1) K_max^2))"}
        assert printed[f"eta_l <= sqrt(1/({c} L^2 C_eta (tau) K_max^2))"].rhs == math.inf  # vacuous at τ = 0
        assert corrected[f"eta_l <= sqrt(1/({c} L^2 C_eta (tau + 1) K_max^2))"].rhs == \
            pytest.approx(math.sqrt(1 / (c * 4.0 * 100)))
        if function is corollary_g1:  # G.1's two variants share one formula
            values = {function(constants, schedule, 5, 0, variant=v).value for v in ("corrected", "printed")}
            assert len(values) == 1


def test_conditions_include_the_ones_only_the_proofs_use():
    schedule = reference_schedule()
    names = {key: [c.name for c in THEOREMS[key](REFERENCE_CONSTANTS, schedule).conditions] for key in THEOREMS}
    assert all(any(n.startswith("C_beta <= C_eta") for n in v) for v in names.values())
    assert sum("proof only" in n for n in names["5.1"]) == 2 and sum("proof only" in n for n in names["G.1"]) == 2
    assert len(names["4.6"]) == 4 and len(names["4.1"]) == 3
    # printed Thm 4.6 keeps the statement's L²W_1² (no C_η): its left side is smaller
    printed = theorem_4_6(REFERENCE_CONSTANTS, schedule, 5, variant="printed").conditions[1]
    corrected = theorem_4_6(REFERENCE_CONSTANTS, schedule, 5).conditions[1]
    assert printed.lhs < corrected.lhs and "C_eta) S K" not in printed.name
    for bound in (theorem_4_1(REFERENCE_CONSTANTS, schedule), theorem_5_1(REFERENCE_CONSTANTS, schedule, 5, 1)):
        assert all(isinstance(c.lhs, float) and isinstance(c.rhs, float) for c in bound.conditions)


def test_c_beta_condition_is_vacuous_without_momentum_and_can_fail():
    fedavg = constant_and_drop((2.0, 1.0, 0.5), 700, 1e-4, nu=0.0, beta1=0.5)
    assert theorem_4_1(REFERENCE_CONSTANTS, fedavg).conditions[-1].holds
    # β_1ν_1 > β_Sν_S: constraint (3) holds but C_β > C_η (the proof of Thm 4.1, App. D, uses C_β ≤ C_η)
    eta, nus = (2.0, 1.0), (1.0, 0.5)
    products = [e * v for e, v in zip(eta, nus)]
    schedule = StageSchedule((10, 20), eta, 1e-4, tuple(2.0 / (2.0 + p) for p in products), nus)
    constants = dataclasses.replace(REFERENCE_CONSTANTS, rounds=30)
    condition = theorem_4_1(constants, schedule).conditions[-1]
    assert not condition.holds and condition.lhs > condition.rhs == 2.0


# ------------------------------------------------------------------------ corollaries


def term_ratios(formula, subs, orders):
    """Each term of ``formula`` after ``subs``, divided by its claimed order."""
    terms = {name: sp.simplify(term.subs(subs)) for name, term in formula.terms.items()}
    assert set(terms) == set(orders)
    return {name: sp.simplify(terms[name] / orders[name]) for name in terms}


def test_corollaries_4_2_and_4_4_rate_from_theorem_4_1():
    """η̄ = √(nK), η_l = 1/(√T K), W_2 = T√(nK)/S, W_1² = √(nK)/S (0 for FedAvg): O(1/√(TKn)) for T ≥ nK
    (Cors 4.2 and 4.4; proofs in App. D)."""
    s = sym
    rate = 1 / sp.sqrt(s.T * s.K * s.n)
    orders = {"initial": rate, "sigma_l_momentum": rate, "sigma_l_server": rate,
              "sigma_l_aggregate": 1 / (s.n * s.K * sp.sqrt(s.T)), "sigma_l_drift": 1 / (s.T * s.K),
              "sigma_g_drift": 1 / s.T}
    base = {s.eta_l: 1 / (sp.sqrt(s.T) * s.K), s.eta_bar: sp.sqrt(s.n * s.K), s.W2: s.T * sp.sqrt(s.n * s.K) / s.S}
    for w1_squared in (sp.sqrt(s.n * s.K) / s.S, sp.Integer(0)):
        for name, ratio in term_ratios(formula_4_1(), base | {s.W1: sp.sqrt(w1_squared)}, orders).items():
            assert not ratio.free_symbols & {s.T, s.K, s.n}, (name, ratio)
    u = sp.Symbol("u", positive=True)  # T = u·nK with u ≥ 1: every order is ≤ the rate
    for order in orders.values():
        dominated = sp.lambdify((s.n, s.K, u), sp.simplify((order / rate).subs(s.T, u * s.n * s.K)))
        grid = itertools.product((1, 7, 100), (1, 5, 50), (1, 3, 1e4))
        assert all(dominated(n, K, uu) <= 1 + 1e-12 for n, K, uu in grid)


@pytest.mark.slow
def test_corollary_4_7_rate_from_theorem_4_6():
    """η̄ = √(mK), η̂² = mK, W_2 = T√(mK)/S, W_1² = √(mK), η_l = 1/(√T K): O(√(K/(Tm)))
    (Cor 4.7; proof in App. E)."""
    s = sym
    q = (s.n - s.m) / (s.n - 1)
    orders = {"initial": 1 / sp.sqrt(s.T * s.K * s.m), "sigma_l_sampling": 1 / sp.sqrt(s.T * s.K * s.m),
              "sigma_l_sampling_drift": q / sp.sqrt(s.T ** 3 * s.K * s.m), "sigma_l_drift": 1 / (s.T * s.K),
              "sigma_g_sampling_drift": q * sp.sqrt(s.K / (s.T ** 3 * s.m)),
              "sigma_g_sampling": q * sp.sqrt(s.K / (s.T * s.m)),
              "sigma_g_drift": 1 / s.T}
    subs = {s.eta_l: 1 / (sp.sqrt(s.T) * s.K), s.eta_bar: sp.sqrt(s.m * s.K), s.eta_hat2: s.m * s.K,
            s.W2: s.T * sp.sqrt(s.m * s.K) / s.S, s.W1: (s.m * s.K) ** sp.Rational(1, 4), s.L: 1}
    ratios = term_ratios(formula_4_6(), subs, orders)
    grid = list(itertools.product((1, 4, 50), (1, 10, 1000), (2, 100)))  # (m, K, n/m)
    for name, ratio in ratios.items():
        assert s.T not in ratio.free_symbols, name
        f = sp.lambdify((s.m, s.K, s.n, s.S, s.delta_f, s.sigma_l2, s.sigma_g2), ratio)
        values = [f(m, K, m * r, 3, 1, 1, 1) for m, K, r in grid]
        assert max(values) <= 1.5 * min(values) + 1e-12, name  # Θ(1) in m, K, n
    # Cor 4.7's printed η_l = 1/√(TK) makes the σ_g² term grow like K/√(Tm), not √(K/(Tm))
    # (the proof in App. E uses 1/(√T K))
    printed = sp.simplify(formula_4_6().terms["sigma_g_sampling"].subs(subs | {s.eta_l: 1 / sp.sqrt(s.T * s.K)})
                          / orders["sigma_g_sampling"])
    growth = sp.lambdify(s.K, printed.subs({s.m: 4, s.S: 3, s.sigma_g2: 1}))
    assert growth(10_000) / growth(1) > 50


@pytest.mark.parametrize("formula", [formula_5_1("corrected"), formula_5_1("printed"), formula_g1()])
def test_corollary_5_2_rate_from_theorem_5_1_and_g1(formula):
    """η̄ = √(mK), η̂^p = (mK)^{p/2}, η_l = 1/√T, W_2 = T√(mK)/S, W_1² = √(mK), identical K:
    O(1/√(mKT)) + O(τ²/T) + O(K²/T) (Cor 5.2; proof in App. F), plus O(σ_g²) for G.1 (Cor 5.4; App. G)."""
    s = sym
    fast = 1 / sp.sqrt(s.m * s.K * s.T)
    orders = {"initial": fast, "sigma_l_drift": s.K / s.T, "sigma_l_delay": s.tau ** 2 / s.T,
              "sigma_l_momentum": fast, "sigma_l_aggregate": 1 / (s.m * s.K * sp.sqrt(s.T)), "sigma_l_server": fast,
              "sigma_g_drift": s.K ** 2 / s.T, "sigma_g_arrival": sp.Integer(1)}
    orders = {k: v for k, v in orders.items() if k in formula.terms}
    subs = {s.eta_l: 1 / sp.sqrt(s.T), s.eta_bar: sp.sqrt(s.m * s.K), s.eta_hat2: s.m * s.K,
            s.eta_hat3: (s.m * s.K) ** sp.Rational(3, 2), s.W2: s.T * sp.sqrt(s.m * s.K) / s.S,
            s.W1: (s.m * s.K) ** sp.Rational(1, 4), s.phi1: s.K, s.phi2: s.K ** 2, s.phi3: 1 / s.K}
    for name, ratio in term_ratios(formula, subs, orders).items():
        assert not ratio.free_symbols & {s.T, s.K, s.m, s.tau}, (name, ratio)


def test_remark_5_3_conditions_make_the_rate_one_over_sqrt_mkt():
    """T = mK⁵ and τ = T^{1/4}/(mK)^{1/4} are exactly where K²/T and τ²/T meet 1/√(mKT) (Remark 5.3)."""
    s = sym
    fast = 1 / sp.sqrt(s.m * s.K * s.T)
    assert sp.simplify((s.K ** 2 / s.T - fast).subs(s.T, s.m * s.K ** 5)) == 0
    tau = s.T ** sp.Rational(1, 4) / (s.m * s.K) ** sp.Rational(1, 4)
    assert sp.simplify((s.tau ** 2 / s.T - fast).subs(s.tau, tau)) == 0


# ----------------------------------------------------------------------- monotonicity


def rescaled(schedule, factor):
    """The same stages run ``factor`` times longer (W_2 scales, T/W_2 does not)."""
    return StageSchedule(tuple(t * factor for t in schedule.lengths), schedule.eta_g, schedule.eta_l,
                         schedule.beta, schedule.nu)


@pytest.mark.parametrize("key, kwargs", VARIANTS, ids=[f"{k}-{v.get('variant', 'default')}" for k, v in VARIANTS])
@given(schedule=schedules(max_length=20), L=st.floats(0.1, 5.0), sigma2=st.one_of(st.just(0.0), st.floats(0.01, 5.0)),
       zeta2=st.floats(0.0, 5.0), factor=st.integers(2, 4))
def test_bounds_grow_with_noise_smoothness_heterogeneity_and_shrink_with_rounds(key, kwargs, schedule, L, sigma2,
                                                                                zeta2, factor):
    theorem = THEOREMS[key]
    constants = constants_for(schedule, L=L, sigma2=sigma2, zeta2=zeta2)
    base = theorem(constants, schedule, **kwargs).value
    for change in ({"sigma2": 2 * sigma2 + 0.5}, {"zeta2": 2 * zeta2 + 0.5}):
        assert theorem(dataclasses.replace(constants, **change), schedule, **kwargs).value > base
    smoother = theorem(dataclasses.replace(constants, L=1.5 * L), schedule, **kwargs).value
    assert smoother > base if sigma2 > 0 else smoother >= base  # L enters through the noise terms only
    longer = rescaled(schedule, factor)
    shorter_bound = theorem(dataclasses.replace(constants, rounds=longer.total_rounds), longer, **kwargs)
    assert shorter_bound.value < base and shorter_bound.terms["initial"] == pytest.approx(
        theorem(constants, schedule, **kwargs).terms["initial"] / factor, rel=1e-9)


@given(schedules(max_length=20), st.integers(0, 8))
def test_autonomous_bounds_grow_with_the_delay(schedule, tau):
    constants = constants_for(schedule)
    for function in (theorem_5_1, corollary_g1):
        assert function(constants, schedule, 4, tau + 1).value > function(constants, schedule, 4, tau).value


# ------------------------------------------------------------------------- bad input


def stage(**changes):
    args = {"lengths": (10, 20), "eta_g": (2.0, 1.0), "eta_l": 0.01, "beta": 0.0, "nu": 0.0} | changes
    return StageSchedule(**args)


@pytest.mark.parametrize("changes, message", [
    ({"lengths": (0, 20)}, r"lengths\[0\]"), ({"lengths": (10.5, 20)}, r"lengths\[0\]"), ({"lengths": ()}, "lengths"),
    ({"eta_g": (-2.0, -1.0)}, r"eta_g\[0\] must be > 0"), ({"eta_l": 0.0}, "eta_l must be > 0"),
    ({"eta_l": -1e-3}, "eta_l"), ({"eta_l": float("nan")}, "eta_l"), ({"beta": 1.0}, r"beta\[0\] must lie in \[0, 1\)"),
    ({"beta": -0.1}, r"beta\[0\]"), ({"nu": 1.5}, r"nu\[0\] must lie in \[0, 1\]"),
    ({"lengths": (20, 10), "eta_g": (1.0, 2.0)}, "eta_g must be non-increasing"),
    ({"beta": (0.5, 0.2)}, "beta must be non-decreasing"), ({"eta_g": (2.0, 2.0)}, "W_2"),
    ({"beta": (0.5, 0.5), "nu": 0.9}, "W_1"), ({"eta_g": (2.0, 1.0, 0.5)}, "eta_g has 3 stages"),
])
def test_schedule_rejects_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        stage(**changes)


@pytest.mark.parametrize("call, message", [
    (lambda s, c: theorem_4_1(dataclasses.replace(c, rounds=31), s), r"Constants.rounds \(T=31\)"),
    (lambda s, c: theorem_4_6(c, s, 21), r"n_sampled \(m=21\)"),
    (lambda s, c: theorem_4_6(c, s, 0), "n_sampled"),
    (lambda s, c: theorem_4_6(dataclasses.replace(c, n_clients=1), s, 1), "n_clients ≥ 2"),
    (lambda s, c: theorem_4_6(c, s, 2, variant="bogus"), "variant"),
    (lambda s, c: theorem_4_6(c, s, 2, L_power=4), "L_power"),
    (lambda s, c: theorem_5_1(c, s, 2, -1), "tau"),
    (lambda s, c: theorem_5_1(c, s, 2, 1.5), "tau"),
    (lambda s, c: theorem_5_1(c, s, 2, 1, np.ones((30, 3))), "shape"),
    (lambda s, c: corollary_g1(c, s, 2, 1, np.zeros((30, 2))), "integers ≥ 1"),
    (lambda s, c: theorem_4_1(dataclasses.replace(c, zeta2=None), s), "zeta2"),
    (lambda s, c: theorem_4_1(dataclasses.replace(c, extra={"sigma_g2": 2.0}), s), "disagree"),
    (lambda s, c: theorem_4_1(c, (10, 20)), "StageSchedule"),
    (lambda s, c: theorem_4_1({"L": 1.0}, s), "Constants"),
])
def test_theorems_reject_bad_values(call, message):
    schedule = stage(beta=(0.5, 0.5))
    with pytest.raises(ValueError, match=message):
        call(schedule, constants_for(schedule))


def test_sigma_g2_can_come_from_extra():
    schedule = stage()
    constants = dataclasses.replace(constants_for(schedule, zeta2=None), extra={"sigma_g2": 1.0})
    assert theorem_4_1(constants, schedule).value == theorem_4_1(constants_for(schedule), schedule).value


@pytest.mark.parametrize("kwargs, message", [
    ({"L": -1.0}, "L must be > 0"), ({"sigma2": -0.5}, "sigma2"), ({"rounds": 0}, "rounds"), ({"zeta2": -1.0}, "zeta2"),
])
def test_constants_reject_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Constants(**({"L": 1.0, "sigma2": 1.0, "delta_f": 1.0} | kwargs))


@pytest.mark.parametrize("call, message", [
    (lambda: LocalStepStats(2.0, 3.0, 0.5, 2.0), "phi2"), (lambda: LocalStepStats(3.0, 9.0, 0.5, 2.0), "phi1"),
    (lambda: LocalStepStats(2.0, 4.0, 0.2, 2.0), "phi3"), (lambda: LocalStepStats(1.0, 1.0, 1.0, 0.0), "k_max"),
    (lambda: LocalStepStats.constant(0), "local_steps"), (lambda: LocalStepStats.from_steps([1, 2]), "shape"),
    (lambda: single_stage(0, 1.0, 0.1), r"rounds \(T\)"),
    (lambda: constant_and_drop((2.0, 1.0, 0.5), 3, 0.1), "rounds=3"),
    (lambda: constant_and_drop((2.0, 1.0), 30, 0.1, beta1=1.0), "beta1"),
])
def test_helpers_reject_bad_values(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------- plumbing


ITEMS = {"4.1": "Thm 4.1", "4.6": "Thm 4.6", "4.6-L2": "Thm 4.6", "5.1": "Thm 5.1", "G.1": "Cor 5.4 / G.1"}


def test_bounds_carry_source_expression_and_latex():
    schedule = reference_schedule()
    for key, kwargs in VARIANTS:
        bound = THEOREMS[key](REFERENCE_CONSTANTS, schedule, **kwargs)
        source = bound.source
        assert source.paper == "Server momentum" and source.item == ITEMS[key] and source.where.startswith(
            ("proof in App.", "footnote 5", "App. G"))
        assert source.reference is not None and source.reference.identifier == "arXiv:2312.12670"
        for text in (str(source), *(c.detail for c in bound.conditions)):
            assert ".txt" not in text and "line" not in text, text
        assert float(bound.expr.subs(bound.values)) == pytest.approx(bound.value, rel=1e-10)
        assert sum(bound.terms.values()) == pytest.approx(bound.value, rel=1e-12) and "W_{2}" in bound.latex()
    assert theorem_4_6(REFERENCE_CONSTANTS, schedule, 5, variant="printed").variant == "printed"


def test_module_documents_its_theorems():
    # that bounds.momentum is torch-free is checked for every bounds module in tests/bounds/test_core.py
    for function, item in ((theorem_4_1, "Thm 4.1"), (theorem_4_6, "Thm 4.6"), (theorem_5_1, "Thm 5.1"),
                           (corollary_g1, "Cor 5.4")):
        doc = function.__doc__
        assert f"Server momentum {item}" in doc and "App. " in doc
        assert ".txt" not in doc and "line" not in doc
