"""Tests for bounds.fedsum: FedSUM Thm 4.1, Cor 4.1, Lemmas C.6/D.6/E.6, Thms C.1/D.1/E.1, Cor G.1.

Formulas are re-written here independently (plain math and sympy, algorithm notation,
m = max{1, τ_avg}, τ̂ = max{1, τ_max}) and compared with the module.
"""
import itertools
import math
import re
from dataclasses import replace

import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, given, strategies as st

from bounds.core import Constants
from bounds import fedsum as fs

# ---------------------------------------------------------------------------- helpers

ALGS = ("fedsum-b", "fedsum", "fedsum-cr")


def make(L=1.0, sigma2=1.0, delta_f=2.0, F0=3.0, N=20, K=5, T=400):
    return Constants(L=L, sigma2=sigma2, delta_f=delta_f, F0=F0, n_clients=N, local_steps=K, rounds=T)


def ref_steps(c, tmax, tavg):
    """Thm 4.1 step sizes, corrected (root over τ_max only), in algorithm notation."""
    th, m = max(1.0, tmax), max(1.0, tavg)
    first = 1 / (10 * math.sqrt(th) * c.local_steps * c.L)
    second = math.inf if c.sigma2 == 0 else math.sqrt(
        c.n_clients * th * c.delta_f / (m * c.local_steps * c.rounds * c.L * c.sigma2))
    return 1 / math.sqrt(th), min(first, second)


def root(c):
    return math.sqrt(c.L * c.sigma2 * c.delta_f / (c.n_clients * c.local_steps * c.rounds))


def ref_lemma(c, eg, el, tmax, tavg, which):
    m, th, P = max(1.0, tavg), max(1.0, tmax), eg * el
    base = 2 * c.delta_f / (P * c.local_steps * c.rounds)
    if which == "C.6":
        return base + 10 * P * m * c.sigma2 * c.L / c.n_clients + 2 * tmax * c.F0 / c.rounds
    drift = 150 * el**2 * c.local_steps * c.sigma2 * c.L**2 / c.n_clients
    if which == "E.6 conservative":
        drift *= th
    return base + 9 * P * m * c.sigma2 * c.L / c.n_clients + 3 * tmax * c.F0 / c.rounds + drift


def ref_theorem(c, tmax, tavg, factor):
    th = max(1.0, tmax)
    return 30 * math.sqrt(factor) * root(c) + 20 * th * (c.L * c.delta_f + c.F0) / c.rounds


constants_st = st.builds(
    make,
    L=st.floats(0.05, 20), sigma2=st.floats(0.0, 50), delta_f=st.floats(0.01, 100), F0=st.floats(0.0, 100),
    N=st.integers(1, 200), K=st.integers(1, 20), T=st.integers(1, 5000))


@st.composite
def delays_st(draw):
    tmax = draw(st.one_of(st.just(0.0), st.floats(0.0, 500)))
    tavg = draw(st.floats(0.0, 1.0)) * tmax
    return tmax, tavg


def close(a, b, rel=1e-9):
    return a == pytest.approx(b, rel=rel, abs=1e-300)


# ---------------------------------------------------------------------------- values vs independent formulas


@given(constants_st, delays_st(), st.floats(0.01, 10), st.floats(1e-5, 1.0))
def test_lemma_values_match_independent_formulas(c, delays, eta_g, eta_l):
    tmax, tavg = delays
    assert close(fs.lemma_c6(c, eta_g, eta_l, tmax, tavg).value, ref_lemma(c, eta_g, eta_l, tmax, tavg, "C.6"))
    assert close(fs.lemma_d6(c, eta_g, eta_l, tmax, tavg).value, ref_lemma(c, eta_g, eta_l, tmax, tavg, "D.6"))
    assert close(fs.lemma_e6(c, eta_g, eta_l, tmax, tavg, variant="stated").value,
                 ref_lemma(c, eta_g, eta_l, tmax, tavg, "D.6"))
    assert close(fs.lemma_e6(c, eta_g, eta_l, tmax, tavg).value,
                 ref_lemma(c, eta_g, eta_l, tmax, tavg, "E.6 conservative"))


@pytest.mark.slow
@given(constants_st, delays_st())
def test_theorem_values_match_independent_formulas(c, delays):
    tmax, tavg = delays
    for alg in ALGS:
        assert close(fs.theorem_4_1(c, tmax, tavg, algorithm=alg).value, ref_theorem(c, tmax, tavg, 1 + tavg))
    for thm in (fs.theorem_c1, fs.theorem_d1, fs.theorem_e1):
        assert close(thm(c, tmax, tavg).value, ref_theorem(c, tmax, tavg, max(1.0, tavg)))
    eg, el = ref_steps(c, tmax, tavg)
    steps = fs.step_sizes_4_1(c, tmax, tavg)
    assert close(steps["eta_g"], eg) and close(steps["eta_l"], el)


@pytest.mark.slow
@given(constants_st, delays_st())
def test_bound_value_equals_sympy_substitution(c, delays):
    tmax, tavg = delays
    for bound in (fs.theorem_4_1(c, tmax, tavg, constants_variant="tight", algorithm="fedsum"),
                  fs.lemma_e6(c, 0.3, 1e-3, tmax, tavg), fs.corollary_4_1(c, tmax, tavg)):
        exact = float(bound.expr.subs(bound.values))
        assert close(bound.value, exact, rel=1e-9)
        assert close(sum(bound.terms.values()), bound.value)


# ---------------------------------------------------------------------------- symbolic checks (sympy)

Ls, Ns, Ks, Ts = sp.symbols("L N K T", positive=True)
sig, Df, F0s, tau, m = sp.symbols("sigma Delta F0 tau m", positive=True)   # tau = τ̂ ≥ 1, m ≥ 1
ROOT = sp.sqrt(Ls * sig**2 * Df / (Ns * Ks * Ts))
A = sp.sqrt(Ns * Df / (m * Ks * Ts * Ls * sig**2))     # second branch of Π (Thm C.1)
B = 1 / (10 * Ks * tau * Ls)                            # first branch of Π


def sym_c6(P):
    return 2 * Df / (P * Ks * Ts) + 10 * P * m * sig**2 * Ls / Ns + 2 * tau * F0s / Ts


def sym_d6(eg, el):
    P = eg * el
    return (2 * Df / (P * Ks * Ts) + 9 * P * m * sig**2 * Ls / Ns + 3 * tau * F0s / Ts
            + 150 * el**2 * Ks * sig**2 * Ls**2 / Ns)


def test_c6_at_second_branch_is_exactly_12_root_m():
    """Π = √(NΔ/(mKTLσ²)) turns C.6 into 12√m·√(Lσ²Δ/(NKT)) + 2τF0/T identically (eq. (38))."""
    assert sp.simplify(sym_c6(A) - 12 * sp.sqrt(m) * ROOT - 2 * tau * F0s / Ts) == 0


def test_c6_at_first_branch_gives_20_tau_l_delta():
    """Π = 1/(10Kτ̂L): the optimisation term is exactly 20 τ̂ L Δ/T (proof of Thm C.1, before eq. (38))."""
    assert sp.simplify(2 * Df / (B * Ks * Ts) - 20 * tau * Ls * Df / Ts) == 0


def _random_point(rng):
    vals = {Ls: rng.uniform(0.1, 5), Ns: int(rng.integers(1, 100)), Ks: int(rng.integers(1, 20)),
            Ts: int(rng.integers(1, 5000)), sig: rng.uniform(0.05, 5), Df: rng.uniform(0.01, 50),
            F0s: rng.uniform(0, 50), tau: rng.uniform(1, 200)}
    vals[m] = rng.uniform(1, vals[tau]) if vals[tau] > 1 else 1
    return {k: sp.Float(v, 40) for k, v in vals.items()}     # 40-digit arithmetic


@pytest.mark.slow
def test_lemmas_at_prescribed_products_below_theorems_by_substitution():
    """C.6 ≤ C.1 and D.6 ≤ D.1 (paper constants and tight) at Π = min{A, B}, in sympy at 40 digits."""
    rng = np.random.default_rng(7)
    paper = 30 * sp.sqrt(m) * ROOT + 20 * tau * (Ls * Df + F0s) / Ts
    tight_b = 12 * sp.sqrt(m) * ROOT + 20 * tau * Ls * Df / Ts + 2 * tau * F0s / Ts
    tight_d = (11 * sp.sqrt(m) + 15) * ROOT + 20 * tau * Ls * Df / Ts + 3 * tau * F0s / Ts
    for _ in range(60):
        v = _random_point(rng)
        P = sp.Min(A, B).xreplace(v)
        eg = 1 / sp.sqrt(v[tau])
        el = P / eg
        lem_c, lem_d = sym_c6(P).xreplace(v), sym_d6(eg, el).xreplace(v)
        tb, td, pp = (e.xreplace(v) for e in (tight_b, tight_d, paper))
        assert tb - lem_c >= -1e-30 and pp - tb >= 0
        assert td - lem_d >= -1e-30 and pp - td >= 0


@pytest.mark.slow
def test_lemmas_below_theorems_on_a_grid():
    """The same on a numeric grid, through the module (lemma at the theorem's step sizes)."""
    grid = itertools.product([0.2, 1.0, 7.0], [0.0, 0.5, 30.0], [0.05, 5.0], [1, 6], [10, 3000], [0.0, 1.0, 40.0])
    for L, sigma2, delta_f, K, T, tmax in grid:
        c = make(L=L, sigma2=sigma2, delta_f=delta_f, F0=2.0, N=10, K=K, T=T)
        tavg = 0.6 * tmax
        b = fs.theorem_c1(c, tmax, tavg)
        P = b.step_sizes["eta_g_eta_l"]
        lem = fs.lemma_c6(c, 1.0, P, tmax, tavg)
        tight = fs.theorem_c1(c, tmax, tavg, constants_variant="tight")
        assert lem.valid and lem.value <= tight.value * (1 + 1e-12) <= b.value * (1 + 1e-12)
        for thm, lemma in ((fs.theorem_d1, fs.lemma_d6), (fs.theorem_e1, fs.lemma_e6)):
            d = thm(c, tmax, tavg)
            kw = {} if lemma is fs.lemma_d6 else {"variant": "stated"}
            lem = lemma(c, d.step_sizes["eta_g"], d.step_sizes["eta_l"], tmax, tavg, **kw)
            tight = thm(c, tmax, tavg, constants_variant="tight")
            assert lem.value <= tight.value * (1 + 1e-12) <= d.value * (1 + 1e-12)


@given(constants_st, delays_st())
def test_theorem_4_1_tight_below_paper(c, delays):
    tmax, tavg = delays
    for alg in ALGS:
        tight = fs.theorem_4_1(c, tmax, tavg, constants_variant="tight", algorithm=alg).value
        assert tight <= fs.theorem_4_1(c, tmax, tavg, algorithm=alg).value * (1 + 1e-12)


@given(constants_st, delays_st())
def test_theorem_4_1_step_sizes_satisfy_lemma_conditions(c, delays):
    tmax, tavg = delays
    eg, el = ref_steps(c, tmax, tavg)
    th, K, L = max(1.0, tmax), c.local_steps, c.L
    # C.6: Π K ≤ 1/(8τ̂L); D.6: η_l ≤ 1/(10√τ̂KL), Π ≤ 1/(10τ̂KL) — checked independently.
    assert eg * el * K <= 1 / (8 * th * L) * (1 + 1e-12)
    assert el <= 1 / (10 * math.sqrt(th) * K * L) * (1 + 1e-12)
    assert eg * el <= 1 / (10 * th * K * L) * (1 + 1e-12)
    for alg in ("fedsum-b", "fedsum"):
        assert fs.check_step_sizes(c, eg, el, tmax, tavg, algorithm=alg) == ()
        assert fs.theorem_4_1(c, tmax, tavg, algorithm=alg).valid


def test_fedsum_cr_gap_in_theorem_e1():
    """E.6 needs η_l ≤ 1/(10τ̂KL); Thm E.1 prescribes up to 1/(10√τ̂KL): a gap in the paper's E.1 proof."""
    c = make()
    b = fs.theorem_e1(c, 30, 14.2)
    assert not b.valid
    assert [cond.name for cond in b.violated] == ["E.6: η_l ≤ 1/(10 τ̂ K L)"]
    assert fs.theorem_e1(c, 1, 0.5).valid      # τ̂ = 1: the two branches coincide
    assert fs.theorem_4_1(c, 30, 14.2, algorithm="fedsum-cr").violated == b.violated
    # The conservative E.6 at E.1's step sizes can exceed E.1's bound: the rate is not established.
    c = make(L=1, sigma2=1, delta_f=1, F0=0, N=1, K=1, T=10**6)
    e1 = fs.theorem_e1(c, 100, 1)
    s = e1.step_sizes
    assert fs.lemma_e6(c, s["eta_g"], s["eta_l"], 100, 1).value > 10 * e1.value
    assert fs.lemma_e6(c, s["eta_g"], s["eta_l"], 100, 1, variant="stated").value <= e1.value


# ---------------------------------------------------------------------------- Corollary G.1 and 4.1


def f_bound(case, N, T, S=None, delta=None):
    """Appendix F bounds on E[τ_max] (FedSUM Lemmas F.1, F.2, F.4, F.3), computed here."""
    return {1: lambda: 4 * N / S * math.log(N * T),
            2: lambda: 4 / delta * max(math.log(N * T), math.log(1 / delta)),
            3: lambda: 2 * N / S, 4: lambda: 4 * N / S}[case]()


@pytest.mark.parametrize("case,kw", [(1, {"per_round": 20}), (2, {"delta": 0.2}), (3, {"per_round": 20}),
                                     (4, {"per_round": 20}), (2, {"p": 0.05}), (1, {"per_round": 7})])
def test_corollary_g1_follows_from_corollary_4_1_with_appendix_f(case, kw):
    c = make(L=2.0, sigma2=0.7, delta_f=3.0, F0=5.0, N=100, K=10, T=2000)
    bnd = f_bound(case, 100, 2000, S=kw.get("per_round"), delta=kw.get("delta", kw.get("p")))
    expected = 30 * math.sqrt(max(1, bnd) * c.L * c.sigma2 * c.delta_f / (100 * 10 * 2000)) \
        + 20 * bnd * (c.L * c.delta_f + c.F0) / 2000
    got = fs.corollary_g1(c, case, **kw)
    assert close(got.value, expected, rel=1e-12)
    # same as Cor 4.1 with E τ_avg ≤ E τ_max ≤ B once 1 + B is replaced by max{1, B} = B
    cor = fs.corollary_4_1(c, bnd, bnd)
    assert cor.terms["delay"] == pytest.approx(got.terms["delay"], rel=1e-12)
    assert cor.terms["variance"] == pytest.approx(got.terms["variance"] * math.sqrt((1 + bnd) / bnd), rel=1e-12)


def test_corollary_g1_reference_values_and_printed_constants():
    """N=100, S=20, T=2000 (the paper's experiment sizes): B = 244.1 for P1/P2 (Lemmas F.1, F.2);
    printed 60/80 constants."""
    c = make(L=1, sigma2=1, delta_f=1, F0=1, N=100, K=10, T=2000)
    for case, kw in ((1, {"per_round": 20}), (2, {"delta": 0.2})):
        b = fs.corollary_g1(c, case, **kw)
        assert b.values[fs.B_TAU] == pytest.approx(244.1, abs=0.05)
    assert fs.corollary_g1(c, "cyclic", per_round=20).values[fs.B_TAU] == 10
    assert fs.corollary_g1(c, "reshuffled", per_round=20).values[fs.B_TAU] == 20
    S, K, T, N, log = 20, 10, 2000, 100, math.log(100 * 2000)
    printed1 = 60 * math.sqrt(log) / math.sqrt(S * K * T) + 80 * 2 * N * log / (S * T)
    assert close(fs.corollary_g1(c, 1, per_round=20, variant="printed").value, printed1, rel=1e-12)


def test_corollary_g1_printed_vs_corrected_differ_where_stated():
    c = make(L=1.5, sigma2=2, delta_f=4, F0=1, N=50, K=3, T=900)
    same = [(1, {"per_round": 5}), (4, {"per_round": 5}), ("case4", {"per_round": 7})]
    for case, kw in same:
        assert close(fs.corollary_g1(c, case, **kw).value, fs.corollary_g1(c, case, variant="printed", **kw).value)
    # Case 3 (deterministic cyclic): F.4's 2N/S gives 30√2 and 40 instead of 60 and 80.
    cor, pr = fs.corollary_g1(c, 3, per_round=5), fs.corollary_g1(c, 3, per_round=5, variant="printed")
    assert close(pr.terms["variance"] / cor.terms["variance"], math.sqrt(2))
    assert close(pr.terms["delay"] / cor.terms["delay"], 2)
    # Case 2: printed max{log} outside the root; (13) gives its square root.
    delta = 0.1
    mx = max(math.log(50 * 900), math.log(1 / delta))
    cor, pr = fs.corollary_g1(c, 2, delta=delta), fs.corollary_g1(c, 2, delta=delta, variant="printed")
    assert close(pr.terms["variance"] / cor.terms["variance"], math.sqrt(mx))
    assert close(pr.terms["delay"], cor.terms["delay"])


@given(constants_st, delays_st())
def test_corollary_4_1_equals_theorem_for_deterministic_delays(c, delays):
    tmax, tavg = delays
    assume(tmax >= 1)
    assert close(fs.corollary_4_1(c, tmax, tavg).value, fs.theorem_4_1(c, tmax, tavg).value)


@given(constants_st, st.lists(delays_st(), min_size=1, max_size=8))
def test_corollary_4_1_dominates_average_of_theorem_4_1(c, samples):
    """Jensen (the remark after Cor 4.1): mean over sequences of (12) ≤ (13) at the mean delays."""
    samples = [(max(1.0, a), b) for a, b in samples]
    mean = np.mean([fs.theorem_4_1(c, a, b).value for a, b in samples])
    e_max, e_avg = np.mean([a for a, _ in samples]), np.mean([b for _, b in samples])
    assert mean <= fs.corollary_4_1(c, e_max, e_avg).value * (1 + 1e-12)


# ---------------------------------------------------------------------------- monotonicity


def _all_values(c, tmax, tavg, steps=(0.2, 1e-3)):
    g, l = steps
    return [fs.theorem_4_1(c, tmax, tavg).value,
            fs.theorem_4_1(c, tmax, tavg, constants_variant="tight", algorithm="fedsum").value,
            fs.theorem_c1(c, tmax, tavg, constants_variant="tight").value,
            fs.theorem_d1(c, tmax, tavg).value, fs.theorem_e1(c, tmax, tavg).value,
            fs.corollary_4_1(c, tmax, tavg).value,
            fs.lemma_c6(c, g, l, tmax, tavg).value, fs.lemma_d6(c, g, l, tmax, tavg).value,
            fs.lemma_e6(c, g, l, tmax, tavg).value]


def _le(a, b):
    return all(x <= y * (1 + 1e-12) + 1e-300 for x, y in zip(a, b))


@pytest.mark.slow
@given(constants_st, delays_st(), st.floats(0.0, 100))
def test_monotone_in_tau_max(c, delays, extra):
    tmax, tavg = delays
    assert _le(_all_values(c, tmax, tavg), _all_values(c, tmax + extra, tavg))


@pytest.mark.slow
@given(constants_st, delays_st(), st.floats(1.0, 10.0))
def test_monotone_in_sigma2_and_L(c, delays, factor):
    tmax, tavg = delays
    base = _all_values(c, tmax, tavg)
    bigger_sigma = replace(c, sigma2=c.sigma2 * factor + 0.1)
    bigger_l = replace(c, L=c.L * factor)
    assert _le(base, _all_values(bigger_sigma, tmax, tavg))
    assert _le(base, _all_values(bigger_l, tmax, tavg))


@pytest.mark.slow
@given(constants_st, delays_st(), st.integers(1, 10_000))
def test_shrinks_with_T(c, delays, extra):
    tmax, tavg = delays
    longer = replace(c, rounds=c.rounds + extra)
    assert _le(_all_values(longer, tmax, tavg), _all_values(c, tmax, tavg))


def test_corollary_g1_monotone():
    c, longer = make(N=50, T=500), make(N=50, T=5000)
    for case, kw in ((1, {"per_round": 5}), (2, {"delta": 0.2}), (3, {"per_round": 5}), (4, {"per_round": 5})):
        assert fs.corollary_g1(longer, case, **kw).value < fs.corollary_g1(c, case, **kw).value
    # fewer clients per round → larger delays → larger bound
    assert fs.corollary_g1(c, 1, per_round=2).value > fs.corollary_g1(c, 1, per_round=10).value
    assert fs.corollary_g1(c, 2, delta=0.05).value > fs.corollary_g1(c, 2, delta=0.5).value


# ---------------------------------------------------------------------------- worked example (toy quadratic)


def test_numeric_example_toy_quadratic():
    """A toy quadratic run: N=20, K=5, T=400, L=1, σ=1, τ_max=30, τ_avg=14.2, RHS ≈ 51. Its Δ_f and
    F0 were not recorded, so test what is determinable: RHS = 30√(15.2/40000)·√Δ_f + (20·30/400)(Δ_f + F0),
    and the step sizes."""
    for delta_f, F0 in ((0.5, 0.0), (2.0, 3.0), (10.0, 20.0)):
        c = make(L=1, sigma2=1, delta_f=delta_f, F0=F0, N=20, K=5, T=400)
        b = fs.theorem_4_1(c, 30, 14.2)
        assert close(b.value, 30 * math.sqrt(15.2 / 40000) * math.sqrt(delta_f) + 1.5 * (delta_f + F0))
        assert b.step_sizes["eta_g"] == pytest.approx(1 / math.sqrt(30))
        assert b.step_sizes["eta_l"] == pytest.approx(1 / (10 * math.sqrt(30) * 5), rel=1e-12)  # 0.0036515
        assert b.step_sizes["eta_g_eta_l"] == pytest.approx(1 / 1500)
        assert b.valid
    # RHS ≈ 51 pins Δ_f + F0 ≈ 33–34 (for any Δ_f ≤ Δ_f + F0 in that range)
    for delta_f in (0.5, 5.0, 30.0):
        c = make(L=1, sigma2=1, delta_f=delta_f, F0=33.0 - delta_f, N=20, K=5, T=400)
        assert 49.5 < fs.theorem_4_1(c, 30, 14.2).value < 53.5


def test_edge_cases_sigma_zero_and_tau_max_zero():
    c = make(sigma2=0.0)
    s = fs.step_sizes_4_1(c, 30, 14.2)
    assert s["eta_l"] == pytest.approx(1 / (10 * math.sqrt(30) * 5))
    assert fs.theorem_4_1(c, 30, 14.2).terms["variance"] == 0
    s = fs.step_sizes_4_1(make(), 0, 0)                         # full participation: τ̂ = 1
    assert s["eta_g"] == 1.0
    assert fs.theorem_4_1(make(), 0, 0).terms["delay"] == pytest.approx(20 * (2 + 3) / 400)
    assert fs.lemma_c6(make(), 1, 1e-3, 0, 0).terms["initial gradients"] == 0


# ---------------------------------------------------------------------------- printed vs corrected


@given(constants_st, delays_st())
def test_step_sizes_printed_vs_corrected(c, delays):
    tmax, tavg = delays
    cor, pr = fs.step_sizes_4_1(c, tmax, tavg), fs.step_sizes_4_1(c, tmax, tavg, variant="printed")
    th, K, L = max(1.0, tmax), c.local_steps, c.L
    second = math.inf if c.sigma2 == 0 else math.sqrt(c.n_clients * th * c.delta_f / (max(1, tavg) * K * c.rounds * L * c.sigma2))
    assert cor["eta_g"] == pr["eta_g"]
    assert close(pr["eta_l"], min(1 / (10 * math.sqrt(th * K * L)), second))
    if math.isclose(K * L, 1.0) or second <= min(1 / (10 * math.sqrt(th * K * L)), 1 / (10 * math.sqrt(th) * K * L)):
        assert close(cor["eta_l"], pr["eta_l"])
    # the value (12) does not depend on the step sizes
    assert fs.theorem_4_1(c, tmax, tavg, variant="printed").value == fs.theorem_4_1(c, tmax, tavg).value


def test_printed_forms_differ_exactly_in_first_branch():
    c = make(L=2.0, K=5, N=20, sigma2=1e-6)   # small σ²: the first branch binds
    th = 30
    cor, pr = fs.theorem_4_1(c, th, 10), fs.theorem_4_1(c, th, 10, variant="printed")
    assert close(cor.step_sizes["eta_l"], 1 / (10 * math.sqrt(th) * 5 * 2))
    assert close(pr.step_sizes["eta_l"], 1 / (10 * math.sqrt(th * 5 * 2)))
    assert cor.valid and not pr.valid                          # KL > 1: printed breaks Π ≤ 1/(10τ̂KL)
    c_small = make(L=0.05, K=2, sigma2=1e-6)                   # KL < 1: printed is too small for the proof
    pr = fs.theorem_4_1(c_small, th, 10, variant="printed")
    assert [x.name.split(":")[0] for x in pr.violated] == ["proof"]
    assert fs.theorem_4_1(make(L=0.2, K=5), th, 10, variant="printed").step_sizes == \
        pytest.approx(fs.theorem_4_1(make(L=0.2, K=5), th, 10).step_sizes, rel=1e-14)   # K L = 1: identical
    # Thm D.1's printed statement: 1/(10√(τNK)) in proof notation → √N/(10√(τ̂K)) algorithm notation
    d = fs.theorem_d1(c, th, 10, variant="printed")
    assert close(d.step_sizes["eta_l"], math.sqrt(20) / (10 * math.sqrt(th * 5)))
    assert d.value == fs.theorem_d1(c, th, 10).value
    # Thm E.1 printed statement: 1/(10√(τNKL)) → √N/(10√(τ̂KL))
    e = fs.theorem_e1(c, th, 10, variant="printed")
    assert close(e.step_sizes["eta_l"], math.sqrt(20) / (10 * math.sqrt(th * 5 * 2)))
    # Lemma D.6's printed condition only changes the first condition's right-hand side
    lc, lp = fs.lemma_d6(c, 0.1, 1e-3, th, 10), fs.lemma_d6(c, 0.1, 1e-3, th, 10, variant="printed")
    assert lc.value == lp.value
    assert close(lp.conditions[0].rhs / lc.conditions[0].rhs, math.sqrt(20 * 5 * 2))
    assert lc.conditions[1] == lp.conditions[1]


def test_e6_variants():
    c = make()
    stated, cons = fs.lemma_e6(c, 0.2, 1e-3, 30, 10, variant="stated"), fs.lemma_e6(c, 0.2, 1e-3, 30, 10)
    assert cons.variant == "conservative"
    assert close(cons.terms["local drift"], 30 * stated.terms["local drift"])
    assert [x.name for x in cons.conditions] == [x.name for x in stated.conditions]
    assert close(fs.lemma_e6(c, 0.2, 1e-3, 1, 1).value, fs.lemma_e6(c, 0.2, 1e-3, 1, 1, variant="stated").value)


# ---------------------------------------------------------------------------- conditions, latex, sources


def test_user_step_sizes_violating_conditions():
    c = make()
    bad = fs.lemma_c6(c, 1.0, 0.01, 30, 10)           # Π K = 0.05 > 1/(8·30) = 0.00417
    assert not bad.valid and bad.violated[0].lhs == pytest.approx(0.05)
    assert fs.lemma_c6(c, 0.1, 0.001, 30, 10).valid
    d = fs.lemma_d6(c, 0.01, 0.01, 30, 10)             # η_l too big, Π fine
    assert [x.name for x in d.violated] == ["D.6: η_l ≤ 1/(10 √τ̂ K L)"]
    assert fs.check_step_sizes(c, 0.01, 0.01, 30, 10, algorithm="fedsum") == d.violated
    assert fs.check_step_sizes(c, 0.1, 0.001, 30, 10) == ()
    e = fs.check_step_sizes(c, 0.1, 0.001, 30, 10, algorithm="fedsum-cr")
    assert [x.name for x in e] == ["E.6: η_l ≤ 1/(10 τ̂ K L)"]


def test_latex_and_sources():
    c = make()
    bounds = [fs.theorem_4_1(c, 30, 14.2), fs.theorem_c1(c, 30, 14), fs.theorem_d1(c, 30, 14),
              fs.theorem_e1(c, 30, 14), fs.corollary_4_1(c, 30, 14.2), fs.lemma_c6(c, 0.1, 1e-3, 30, 14),
              fs.lemma_d6(c, 0.1, 1e-3, 30, 14), fs.lemma_e6(c, 0.1, 1e-3, 30, 14),
              fs.corollary_g1(c, 1, per_round=4), fs.corollary_g1(c, 2, delta=0.3, variant="printed")]
    for b in bounds:
        assert b.source.paper == "FedSUM" and b.source.reference is not None and b.source.item
        text = str(b.source)
        assert ".txt" not in text and "line" not in text and b.source.reference.identifier in text
        tex = b.latex()
        assert isinstance(tex, str) and r"\sigma" in tex and r"\Delta_{f}" in tex and "L" in tex
    assert r"\tau_{max}" in bounds[0].latex() and r"\tau_{avg}" in bounds[0].latex()
    assert r"\eta_{g}" in bounds[5].latex() and r"\eta_{l}" in bounds[6].latex()
    assert r"\mathbb{E}[\tau_{max}]" in bounds[4].latex()
    assert [b.source.item for b in bounds[:8]] == ["Thm 4.1", "Thm C.1", "Thm D.1", "Thm E.1", "Cor 4.1",
                                                    "Lemma C.6", "Lemma D.6", "Lemma E.6"]
    assert bounds[0].source.where.startswith("eq. (12)") and bounds[4].source.where == "eq. (13)"
    assert bounds[8].source.item == "Cor G.1" and "Lemma F.1" in bounds[8].source.note
    for fn in (fs.step_sizes_4_1, fs.theorem_4_1, fs.corollary_4_1, fs.lemma_c6, fs.lemma_d6, fs.lemma_e6,
               fs.theorem_c1, fs.theorem_d1, fs.theorem_e1, fs.corollary_g1):
        assert re.search(r"FedSUM (Thm|Lemma|Cor) [0-9C-G]\.[0-9]", fn.__doc__), fn.__name__
        assert ".txt" not in fn.__doc__ and not re.search(r"\blines? [0-9]{3}", fn.__doc__), fn.__name__


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("call,needle", [
    (lambda: make(L=-1.0), "-1"),
    (lambda: make(sigma2=-0.5), "-0.5"),
    (lambda: make(T=0), "0"),
    (lambda: fs.lemma_c6(make(), 0.0, 0.1, 3, 1), "eta_g"),
    (lambda: fs.lemma_d6(make(), 0.1, -2.0, 3, 1), "-2"),
    (lambda: fs.lemma_e6(make(), 0.1, 0.1, -1.0, 0), "tau_max"),
    (lambda: fs.theorem_4_1(make(), 3, 5), "tau_avg=5"),
    (lambda: fs.theorem_4_1(make(), 3, 1, variant="typo"), "'typo'"),
    (lambda: fs.theorem_4_1(make(), 3, 1, constants_variant="loose"), "'loose'"),
    (lambda: fs.theorem_4_1(make(), 3, 1, algorithm="fedavg"), "'fedavg'"),
    (lambda: fs.lemma_e6(make(), 0.1, 0.1, 3, 1, variant="printed"), "'printed'"),
    (lambda: fs.corollary_g1(make(), 5, per_round=2), "5"),
    (lambda: fs.corollary_g1(make(), "case7", per_round=2), "case7"),
    (lambda: fs.corollary_g1(make(), 1), "per_round"),
    (lambda: fs.corollary_g1(make(), 1, per_round=20), "20"),
    (lambda: fs.corollary_g1(make(), 2, delta=1.5), "1.5"),
    (lambda: fs.corollary_g1(make(), 2), "delta"),
    (lambda: fs.corollary_4_1(make(), float("nan"), 1), "nan"),
    (lambda: fs.check_step_sizes(make(), 0.1, 0.1, 3, 1, algorithm="scaffold"), "'scaffold'"),
])
def test_bad_input_raises_value_error(call, needle):
    with pytest.raises(ValueError) as err:
        call()
    message = str(err.value)
    assert needle in message and "\n" not in message
