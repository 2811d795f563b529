"""LOGIT bounds (bounds/logit.py) against the paper (Thms 1–2 and their proofs in
Appendix A) and values computed independently."""
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from bounds import logit
from bounds.core import Constants

S = logit.SYMBOLS


def constants(**overrides) -> Constants:
    """A worked example (inputs chosen here, not from the paper)."""
    base = dict(L=1.0, sigma2=1.0, delta_f=2.3, n_clients=10, local_steps=2, rounds=600, zeta2=1.0,
                extra={logit.SURROGATE_KEY: 1.0})
    base.update(overrides)
    return Constants(**base)


def thm1(c=None, p=0.5, tau_max=8.0, eps=0.0, C1=1.0, **kw):
    return logit.theorem_1(c or constants(), p, tau_max, eps, C1, **kw)


def thm2(c=None, p=0.5, eps=0.0, C1=1.0, **kw):
    return logit.theorem_2(c or constants(), p, eps, C1, **kw)


# ------------------------------------------------------------------------------ worked examples


def test_theorem_1_worked_example():
    bound = thm1()
    assert bound.step_sizes["eta"] == pytest.approx(0.0288675, abs=1e-7)
    expected = {"optimization": 0.265581, "variance": 0.005774, "drift_noise": 0.033333,
                "drift_heterogeneity": 0.4, "generator_floor": 0.0, "staleness": 0.653197}
    for name, value in expected.items():
        assert bound.terms[name] == pytest.approx(value, abs=1e-6), name
    assert bound.value == pytest.approx(1.357885, abs=1e-6)
    assert bound.valid


def test_theorem_2_worked_example():
    corrected, printed, exact = thm2(), thm2(variant="printed"), thm2(staleness="exact_mean")
    assert corrected.terms["staleness"] == pytest.approx(0.163299, abs=1e-6)
    assert corrected.value == pytest.approx(0.867987, abs=1e-6)
    assert printed.terms["staleness"] == pytest.approx(0.230940, abs=1e-6)
    assert exact.terms["staleness"] == pytest.approx(0.154023, abs=1e-6)


def test_step_size_branches():
    # corrected cap 1/(2√30·LI) = 0.0456435 at L = 1, I = 2; first branch iff T ≥ 120 L² I
    assert logit.step_size(constants()) == pytest.approx(1 / math.sqrt(1200))
    assert logit.step_size(constants(rounds=241)) == pytest.approx(1 / math.sqrt(482))
    assert logit.step_size(constants(rounds=239)) == pytest.approx(1 / (4 * math.sqrt(30)))
    small_T = thm1(constants(rounds=100))
    assert small_T.terms["optimization"] == pytest.approx(8 * math.sqrt(30) * 1.0 * 2.3 / 100)


def test_latex_and_source():
    bound = thm1()
    assert r"\bar{\tau}_{\max}" in bound.latex()
    assert bound.source.paper == "LOGIT" and bound.source.item == "Thm 1"
    items = {"Thm 2": thm2(), "eq. (19)": logit.client_drift(constants(), 0.01, 1.0),
             "eq. (23)": logit.averaged_bound(constants(), 0.5, 0.1),
             "eq. (33)": logit.generator_error(constants(), 0.5, 0.0, 1.0, tau_max=3.0)}
    for item, b in {"Thm 1": bound, **items}.items():
        assert b.source.paper == "LOGIT" and b.source.item == item
        assert b.source.reference is not None
        text = str(b.source)
        assert ".txt" not in text and "line" not in text
        assert all(".txt" not in c.detail and "line" not in c.detail for c in b.conditions)


# ------------------------------------------------------------------------------ Theorem 2 ⊂ Theorem 1


def test_theorem_2_is_theorem_1_with_constant_p_symbolically():
    """The two right-hand sides differ only in the staleness term ((38))."""
    t1 = thm1().expr
    t2 = thm2().expr
    c1, T, tau, pbm, pmin = S["C1_SYM"], S["T"], S["TAU_MAX"], S["P_BAR_MIN"], S["P_MIN"]
    difference = (8 * c1 * sp.sqrt(tau * (1 - pbm)) / sp.sqrt(T)
                  - 8 * c1 * (1 - pmin) ** sp.Rational(3, 2) / (sp.sqrt(T) * sp.sqrt(pmin)))
    assert sp.simplify(t1 - t2 - difference) == 0


@given(st.lists(st.floats(0.05, 1.0), min_size=3, max_size=3), st.integers(1, 4), st.integers(1, 2000))
def test_theorem_2_is_theorem_1_with_constant_p_numerically(p, local_steps, rounds):
    c = constants(n_clients=3, local_steps=local_steps, rounds=rounds)
    p = np.array(p)
    eps = np.array([0.1, 0.2, 0.3])
    # Theorem 1 with p_n^t ≡ p_n given as a full (T, N) array, τ̄_max = mean E[τ] cap (36)
    t1 = logit.theorem_1(c, np.tile(p, (rounds, 1)), (1 - p) / p, eps, 1.0)
    t2 = logit.theorem_2(c, p, eps, 1.0, staleness="per_client")
    for name in t1.terms:
        if name != "staleness":
            assert t1.terms[name] == pytest.approx(t2.terms[name], rel=1e-12), name
    # Cauchy–Schwarz as in step (j): mean √((1−p)/p)(1−p) ≤ √mean((1−p)/p) · √mean(1−p)
    assert t2.terms["staleness"] <= t1.terms["staleness"] * (1 + 1e-12)
    assert t2.step_sizes == t1.step_sizes


def test_exact_mean_equals_trace_level_at_expected_staleness():
    """(33)'s first line at τ_n^t = E[τ_n^t] (eq. (36)) is Theorem 2's exact-mean term."""
    c = constants(n_clients=4, rounds=300)
    p = np.array([0.2, 0.5, 0.7, 1.0])
    trace_level = logit.generator_error(c, p, 0.0, 1.0, tau=logit.expected_staleness(p, 300), form="trace")
    exact = logit.theorem_2(c, p, 0.0, 1.0, staleness="exact_mean")
    assert trace_level.value == pytest.approx(exact.terms["staleness"], rel=1e-12)


def test_theorem_2_forms_are_ordered():
    p = np.array([0.15, 0.4, 0.9] + [0.6] * 7)
    forms = [thm2(p=p, staleness=f).terms["staleness"] for f in ("exact_mean", "per_client", "p_min")]
    assert forms[0] <= forms[1] <= forms[2]


def test_generator_error_forms_are_ordered():
    c = constants(n_clients=5, rounds=200)
    rng = np.random.default_rng(0)
    p = rng.uniform(0.2, 0.9, size=(200, 5))
    mask = rng.random((200, 5)) < p
    tau = logit.staleness(mask)
    values = [logit.generator_error(c, p, 0.05, 1.0, tau=tau, form=f).value
              for f in ("trace", "cauchy_schwarz", "closed")]
    assert values[0] <= values[1] <= values[2]
    assert logit.generator_error(c, p, 0.05, 1.0, tau=tau).value == pytest.approx(
        logit.theorem_1(c, p, tau.max(axis=0), 0.05, 1.0).terms["generator_floor"]
        + logit.theorem_1(c, p, tau.max(axis=0), 0.05, 1.0).terms["staleness"])


def test_theorem_1_is_averaged_bound_plus_generator_error():
    c, p = constants(), np.linspace(0.3, 0.9, 10)
    gen = logit.generator_error(c, p, 0.1, 2.0, tau_max=5.0)
    assert logit.averaged_bound(c, p, gen.value).value == pytest.approx(thm1(p=p, tau_max=5.0, eps=0.1, C1=2.0).value)


# ------------------------------------------------------------------------------ staleness helpers


def test_staleness_recursion_and_expectation():
    mask = np.array([[0, 1], [0, 0], [1, 0], [0, 0]], dtype=bool)
    assert logit.staleness(mask).tolist() == [[0, 0], [1, 1], [0, 2], [1, 3]]
    assert logit.staleness(mask, paper_start=False).tolist() == [[1, 0], [2, 1], [0, 2], [1, 3]]
    assert logit.trace_tau_max_bar(mask) == pytest.approx(2.0)
    # Monte Carlo check of (36): E[τ_n^t] = (1−p)/p (1 − (1−p)^{t−1})
    p = np.array([0.2, 0.5, 0.8])
    masks = np.random.default_rng(1).random((4000, 25, 3)) < p
    mean = logit.staleness(masks).mean(axis=0)
    np.testing.assert_allclose(mean, logit.expected_staleness(p, 25), atol=0.25)


# ------------------------------------------------------------------------------ variants


def test_printed_and_corrected_step_caps():
    c = constants()  # L = 1, I = 2: caps 1/(2√30·2) vs 1/(2√60)
    corrected, printed = logit.step_size_conditions(c, 0.05), logit.step_size_conditions(c, 0.05, "printed")
    assert corrected[0].rhs == printed[0].rhs == 0.5
    assert corrected[2].rhs == pytest.approx(1 / (4 * math.sqrt(30)))
    assert printed[2].rhs == pytest.approx(1 / (2 * math.sqrt(60)))
    assert not corrected[2].holds and printed[2].holds
    # L·I = 1: printed and corrected coincide
    one = constants(local_steps=1)
    assert [x.rhs for x in logit.step_size_conditions(one, 0.01)] == pytest.approx(
        [x.rhs for x in logit.step_size_conditions(one, 0.01, "printed")])


def test_theorem_1_variants_differ_only_through_step_size():
    big_T = constants()  # T ≥ 120 L² I: both pick 1/√(IT)
    assert thm1(big_T).value == thm1(big_T, variant="printed").value
    small_T = constants(rounds=50)
    assert thm1(small_T, variant="printed").step_sizes["eta"] > thm1(small_T).step_sizes["eta"]
    fixed = dict(eta=0.01)
    assert thm1(small_T, **fixed).value == thm1(small_T, variant="printed", **fixed).value


def test_theorem_2_variants():
    fixed = dict(eta=0.01)
    corrected, printed = thm2(p=0.3, **fixed), thm2(p=0.3, variant="printed", **fixed)
    for name in corrected.terms:
        if name != "staleness":
            assert corrected.terms[name] == printed.terms[name]
    # printed/corrected staleness ratio = 1/√p_min ((39) vs the last line of (38));
    # per-client: √N (8C₁/√(TN) in the line before the last of (38) vs 4C₁/(TN)·2√T)
    assert printed.terms["staleness"] / corrected.terms["staleness"] == pytest.approx(1 / math.sqrt(0.3))
    per = [thm2(p=0.3, staleness="per_client", variant=v, **fixed).terms["staleness"] for v in logit.VARIANTS]
    assert per[1] / per[0] == pytest.approx(math.sqrt(10))
    # p_min = 1: both variants vanish
    assert thm2(p=1.0, variant="printed").terms["staleness"] == 0.0
    with pytest.raises(ValueError, match="exact_mean"):
        thm2(variant="printed", staleness="exact_mean")


# ------------------------------------------------------------------------------ monotonicity

positive_floats = st.floats(0.01, 10.0)


@given(positive_floats, positive_floats)
def test_grows_with_sigma2(a, b):
    lo, hi = sorted((a, b))
    assert thm1(constants(sigma2=lo)).value <= thm1(constants(sigma2=hi)).value
    assert thm2(constants(extra={logit.SURROGATE_KEY: lo})).value <= thm2(constants(extra={logit.SURROGATE_KEY: hi})).value
    assert thm2(constants(zeta2=lo)).value <= thm2(constants(zeta2=hi)).value


@given(positive_floats, positive_floats, st.sampled_from([None, 0.005]))
def test_grows_with_L(a, b, eta):
    lo, hi = sorted((a, b))
    assert thm1(constants(L=lo), eta=eta).value <= thm1(constants(L=hi), eta=eta).value * (1 + 1e-12)


@given(st.floats(0, 5), st.floats(0, 5), st.floats(0, 50), st.floats(0, 50))
def test_grows_with_eps_star_and_delay(e1, e2, t1, t2):
    assert thm1(eps=min(e1, e2)).value <= thm1(eps=max(e1, e2)).value
    assert thm2(eps=min(e1, e2)).value <= thm2(eps=max(e1, e2)).value
    assert thm1(tau_max=min(t1, t2)).value <= thm1(tau_max=max(t1, t2)).value


@pytest.mark.slow
@given(st.integers(1, 5000), st.integers(1, 5000), st.sampled_from([None, 0.001]))
def test_shrinks_with_T(a, b, eta):
    lo, hi = sorted((a, b))
    assert thm1(constants(rounds=hi), eta=eta).value <= thm1(constants(rounds=lo), eta=eta).value * (1 + 1e-12)
    for form in logit.STALENESS_FORMS:
        small, large = thm2(constants(rounds=lo), staleness=form), thm2(constants(rounds=hi), staleness=form)
        assert large.value <= small.value * (1 + 1e-12)


@given(st.floats(0.01, 1.0), st.floats(0.01, 1.0), st.sampled_from(logit.VARIANTS))
def test_smaller_p_min_gives_larger_bound(a, b, variant):
    lo, hi = sorted((a, b))
    p_lo, p_hi = np.full(10, 0.8), np.full(10, 0.8)
    p_lo[0], p_hi[0] = lo, hi
    # σ₂² ≥ σ₁² (here equal), so the variance term does not decrease as p falls
    assert thm2(p=p_lo, eps=0.1, variant=variant).value >= thm2(p=p_hi, eps=0.1, variant=variant).value
    assert thm1(p=p_lo, eps=0.1, variant=variant).value >= thm1(p=p_hi, eps=0.1, variant=variant).value


def test_time_varying_p_min():
    p = np.full((600, 10), 0.8)
    dipped = p.copy()
    dipped[100, 3] = 0.1  # one bad round lowers p_{3,min}
    assert thm1(p=dipped).terms["staleness"] > thm1(p=p).terms["staleness"]


# ------------------------------------------------------------------------------ bad inputs


@pytest.mark.parametrize("make, match", [
    (lambda: constants(L=-1.0), "L"),
    (lambda: constants(sigma2=-0.5), "sigma2"),
    (lambda: constants(rounds=0), "rounds"),
    (lambda: thm1(p=1.5), "p must lie in .*1.5"),
    (lambda: thm1(p=0.0), "p must lie in .*0.0"),
    (lambda: thm1(p=np.array([0.5] * 9 + [-0.2])), r"-0.2 at index \(9,\)"),
    (lambda: thm2(p=np.full((600, 10), 0.5)), "p must broadcast"),
    (lambda: thm1(eps=-0.1), "eps_star must be ≥ 0, got -0.1"),
    (lambda: thm2(eps=np.array([0.1] * 9 + [-1.0])), "eps_star .*-1.0"),
    (lambda: thm1(C1=-1.0), "C1 must be ≥ 0, got -1.0"),
    (lambda: thm1(tau_max=-2.0), "tau_max must be ≥ 0, got -2.0"),
    (lambda: thm1(eta=0.0), "eta must be > 0, got 0.0"),
    (lambda: thm2(eta=-0.1), "eta must be > 0, got -0.1"),
    (lambda: thm1(p=float("nan")), "p must be finite, got nan"),
    (lambda: thm1(variant="literal"), "variant must be one of"),
    (lambda: thm2(staleness="mean"), "staleness must be one of .*'mean'"),
    (lambda: logit.generator_error(constants(), 0.5, 0.0, 1.0, tau_max=1.0, form="x"), "form must be one of"),
    (lambda: thm1(constants(zeta2=None)), "zeta2"),
    (lambda: thm1(constants(extra={})), logit.SURROGATE_KEY),
    (lambda: thm1(constants(extra={logit.SURROGATE_KEY: -1.0})), "sigma2_surrogate.*-1.0"),
    (lambda: logit.generator_error(constants(), 0.5, 0.0, 1.0, form="trace"), "needs tau"),
    (lambda: logit.client_drift(constants(), 0.01, -1.0), "grad_norm2 must be ≥ 0, got -1.0"),
    (lambda: logit.averaged_bound(constants(), 0.5, -0.3), "generation_error must be ≥ 0, got -0.3"),
])
def test_bad_inputs_raise(make, match):
    with pytest.raises(ValueError, match=match) as info:
        make()
    assert "\n" not in str(info.value)
