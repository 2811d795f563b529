"""verify.constants and verify.check: estimators against exact constants, the verdict logic,
measured-vs-bound checks on quadratics, condition reporting and bad input."""
import json
import math

import numpy as np
import pytest
from scipy import stats

import algorithms
from algorithms.problems import Logistic, Quadratic
from bounds import Constants
from participation import Trace, preset
from verify.checking import check, confidence_limits, verdict
from verify.theorems import THEOREMS
from verify.constants import estimate_constants


@pytest.fixture(scope="module")
def quadratic():
    return Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.5, seed=0)


@pytest.fixture(scope="module")
def logistic():
    return Logistic.synthetic(n_clients=3, n_samples=120, dim=2, n_classes=2, batch_size=4, seed=0)


# ------------------------------------------------------------------ constants


@pytest.mark.slow
def test_quadratic_estimates_agree_with_exact_constants(quadratic):
    exact = quadratic.constants()
    est = estimate_constants(quadratic, use_exact=False, variance_samples=200)
    assert est.estimated == ("L", "sigma2", "f_star", "delta_f") and est.exact == {"F0"}
    assert abs(est.L.value - exact.L) <= 4 * est.L.uncertainty + 1e-8 * exact.L
    assert abs(est.sigma2.value - exact.sigma2) <= 5 * est.sigma2.uncertainty
    assert abs(est.f_star.value - exact.f_star) <= est.f_star.uncertainty + 1e-10
    assert abs(est.delta_f.value - exact.delta_f) <= est.delta_f.uncertainty + 1e-10
    assert est.F0.value == pytest.approx(exact.F0, rel=1e-12)


def test_exact_constants_are_taken_from_the_problem(quadratic):
    est = estimate_constants(quadratic)
    exact = quadratic.constants()
    assert est.exact == {"L", "sigma2", "f_star", "delta_f", "F0"} and est.estimated == ()
    assert all(getattr(est, n).value == getattr(exact, n) and getattr(est, n).uncertainty == 0
               for n in ("L", "sigma2", "f_star", "delta_f", "F0"))
    c = est.to_constants(local_steps=2, rounds=30)
    assert (c.L, c.sigma2, c.n_clients, c.local_steps, c.rounds) == (exact.L, exact.sigma2, 6, 2, 30)


@pytest.mark.slow
def test_logistic_estimates_agree_with_exact_constants(logistic):
    exact = logistic.constants()
    est = estimate_constants(logistic)
    assert est.exact == exact.exact | {"F0"} and "sigma2" in est.estimated
    # binary logistic at x⁰ = 0: p(1 − p) = 1/4, so the Hessian norm equals Böhning's bound there
    free = estimate_constants(logistic, use_exact=False)
    assert abs(free.L.value - exact.L) <= 4 * free.L.uncertainty + 1e-6 * exact.L
    assert abs(free.f_star.value - exact.f_star) <= free.f_star.uncertainty + 1e-9
    # σ² at the two points the problem uses (x⁰ and x*) agrees with its exact mini-batch variance
    points = np.stack([np.zeros(logistic.dim), logistic.solve()[0]])
    at = estimate_constants(logistic, use_exact=False, points=points, variance_samples=400)
    assert abs(at.sigma2.value - exact.sigma2) <= 5 * at.sigma2.uncertainty
    assert "estimated" in str(at.sigma2) and "exact" in str(est.L)


def test_estimate_constants_bad_input(quadratic):
    with pytest.raises(ValueError, match="variance_samples"):
        estimate_constants(quadratic, use_exact=False, variance_samples=1)
    with pytest.raises(ValueError, match="points"):
        estimate_constants(quadratic, use_exact=False, points=np.zeros((2, 5)))


# ------------------------------------------------------------------ verdict logic


@pytest.mark.parametrize("lower, upper, bound, want", [
    (0.5, 0.9, 1.0, "holds"), (0.5, 1.0, 1.0, "holds"), (1.1, 1.5, 1.0, "violated"),
    (0.9, 1.1, 1.0, "inconclusive"), (1.0, 1.2, 1.0, "inconclusive"), (-math.inf, math.inf, 1.0, "inconclusive"),
    (0.1, 0.2, math.nan, "inconclusive"), (math.inf, math.inf, 1.0, "violated")])
def test_verdict(lower, upper, bound, want):
    assert verdict(lower, upper, bound) == want


def test_verdict_rounding_tolerance():
    assert verdict(1e-34, 1e-34, 0.0) == "violated"
    assert verdict(1e-34, 1e-34, 0.0, atol=1e-20) == "holds"


def test_confidence_limits_are_one_sided_student_t():
    values = [1.0, 2.0, 4.0, 3.0]
    mean, low, high = confidence_limits(values, 0.9)
    half = stats.t.ppf(0.9, 3) * np.std(values, ddof=1) / 2
    assert (mean, low, high) == pytest.approx((2.5, 2.5 - half, 2.5 + half))
    assert confidence_limits([2.0]) == (2.0, -math.inf, math.inf)
    assert confidence_limits([2.0], exact=True) == (2.0, 2.0, 2.0)
    assert confidence_limits([1.0, math.inf]) == (math.inf, math.inf, math.inf)


# ------------------------------------------------------------------ check on quadratics


@pytest.mark.parametrize("pattern", ["P1", "P2", "P3"])
@pytest.mark.parametrize("name", ["fedsum-b", "fedsum"])
def test_theorem_4_1_holds_on_quadratics(quadratic, pattern, name):
    res = check(name, quadratic, preset(pattern, n_clients=6, per_round=2), seeds=3, rounds=40, local_steps=2)
    assert res.verdict == "holds", str(res)
    assert res.conditions_hold and 0 < res.ratio < 1 and res.upper <= res.bound_value
    assert len(res.values) == 3 and res.rounds == 40 and res.local_steps == 2
    assert res.step_sizes["eta_g"] == pytest.approx(res.bound.step_sizes["eta_g"])
    assert res.step_sizes["eta_l"] == pytest.approx(res.bound.step_sizes["eta_l"])
    assert res.first_run.mean_grad_norm2 == res.values[0] and len(res.first_run.grad_norm2) == 40


def test_corollary_4_1_over_fresh_traces(quadratic):
    res = check("fedsum", quadratic, preset("P2", n_clients=6, per_round=2), "fedsum.corollary_4_1", seeds=4, rounds=40)
    assert res.verdict == "holds" and res.expectation
    assert len(res.per_trace_tau) == 4 and len(set(res.per_trace_tau)) > 1       # fresh traces
    res2 = check("fedsum", quadratic, preset("P2", n_clients=6, per_round=2), "corollary_4_1", seeds=2, rounds=40,
                 traces=3)
    assert len(res2.values) == 3 and len(res2.per_trace_tau) == 3                # unit = trace


def test_too_small_bound_is_violated(quadratic):
    trace = preset("P1", n_clients=6, per_round=2).sample(30, seed=1)
    res = check("fedsum", quadratic, trace, lambda constants, tau_max: 1e-3, seeds=3)
    assert res.verdict == "violated" and res.lower > res.bound_value and res.ratio > 1


def test_fedsum_cr_reports_the_papers_gap(quadratic):
    """Thm 4.1's step sizes break Lemma E.6's η_l ≤ 1/(10τ̂KL) for FedSUM-CR: reported, not hidden."""
    res = check("fedsum-cr", quadratic, preset("P1", n_clients=6, per_round=2), seeds=2, rounds=40)
    assert not res.conditions_hold
    assert any(c.name.startswith("E.6: η_l") for c in res.violated_conditions)
    assert "VIOLATED" in str(res) and res.verdict in ("holds", "inconclusive", "violated")
    assert not res.to_dict()["conditions_hold"]


def test_given_step_sizes_are_checked_against_the_lemma(quadratic):
    trace = preset("P2", n_clients=6, per_round=2).sample(30, seed=0)
    big = algorithms.get("fedsum", eta_l=0.5, eta_g=1.0)
    res = check(big, quadratic, trace, "fedsum.lemma_d6", seeds=2)
    assert res.step_sizes["eta_l"] == 0.5 and not res.conditions_hold
    assert {c.name for c in res.violated_conditions} == {"D.6: η_l ≤ 1/(10 √τ̂ K L)", "D.6: η_g·η_l ≤ 1/(10 τ̂ K L)"}
    # a theorem judged at given step sizes: the lemma for those step sizes decides, and a note says so
    res = check(big, quadratic, trace, "fedsum.theorem_4_1", seeds=2)
    assert not res.conditions_hold and res.steps_outside is not None and "†" in res.label
    assert any("step sizes outside" in n for n in res.notes)
    # step_sizes="theorem" rebuilds the algorithm at the prescribed ones
    res = check(big, quadratic, trace, "fedsum.theorem_4_1", seeds=2, step_sizes="theorem")
    assert res.conditions_hold and res.step_sizes["eta_l"] == pytest.approx(res.bound.step_sizes["eta_l"])


def test_stopped_runs_are_reported(quadratic):
    trace = Trace(np.ones((60, 6), dtype=bool))
    res = check(algorithms.get("fedsum-b", eta_l=1e3, eta_g=1e3), quadratic, trace, "fedsum.lemma_c6", seeds=2)
    assert len(res.stopped) == 2 and "stopped" in str(res)
    assert res.measured == math.inf and res.verdict == "violated" and not res.conditions_hold


def test_result_serialises_and_prints(quadratic):
    res = check("fedsum-b", quadratic, preset("P1", n_clients=6, per_round=3), "fedsum.lemma_c6", seeds=2, rounds=20)
    text = str(res)
    assert "\n" not in text and res.verdict in text and "fedsum.lemma_c6" in text
    data = json.loads(json.dumps(res.to_dict()))
    assert data["verdict"] == res.verdict and data["bound"]["value"] == pytest.approx(res.bound_value)
    assert set(data["constants"]) == {"L", "sigma2", "f_star", "delta_f", "F0"}


def test_bounds_by_name_and_callable(quadratic):
    from bounds import fedsum

    trace = preset("P1", n_clients=6, per_round=3).sample(20, seed=0)
    by_name = check("fedsum", quadratic, trace, "lemma_d6", seeds=2)
    by_callable = check("fedsum", quadratic, trace, fedsum.lemma_d6, seeds=2)
    assert by_name.bound_value == by_callable.bound_value and by_callable.bound_name == "fedsum.lemma_d6"
    assert {n for n, t in THEOREMS.items() if t.delay_bound} >= {"fedsum.theorem_4_1", "fedsum.corollary_4_1", "fedsum.lemma_d6"}


@pytest.mark.parametrize("kwargs, match", [
    (dict(theorem="fedsum.theorem_9"), "fedsum.theorem_9"), (dict(theorem=3), "3"), (dict(seeds=0), "0"),
    (dict(seeds=-2), "-2"), (dict(seeds=[1, -1]), "-1"), (dict(step_sizes="sometimes"), "sometimes"),
    (dict(confidence=1.5), "1.5"), (dict(local_steps=0), "0"), (dict(rounds=99), "99"),
    (dict(algorithm="fedfoo"), "fedfoo"), (dict(step_sizes="given"), "given"), (dict(traces=3), "traces=3"),
    (dict(constants=Constants(L=1, sigma2=0, delta_f=1, n_clients=2)), "n_clients=2")])
def test_bad_input_names_the_value(quadratic, kwargs, match):
    args = dict(algorithm="fedsum", problem=quadratic, trace_or_pattern=preset("P1", n_clients=6, per_round=2).sample(20, seed=0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        check(**args)


def test_pattern_needs_rounds_and_matching_clients(quadratic):
    with pytest.raises(ValueError, match="rounds"):
        check("fedsum", quadratic, preset("P1", n_clients=6, per_round=2))
    with pytest.raises(ValueError, match="5 clients"):
        check("fedsum", quadratic, preset("P1", n_clients=5, per_round=2), rounds=10)


def test_coverage_belongs_to_the_library():
    """check itself marks FedAvg against a FedSUM theorem as a reference row (covered False,
    "(ref)" label), not a plain "holds" that only the command's table would qualify."""
    from algorithms.problems import Quadratic
    from participation.patterns import Uniform
    from verify.checking import check, covered_algorithms

    problem = Quadratic.random(4, 3, heterogeneity=0.5, noise_std=0.1, seed=0)
    trace = Uniform(4, 2).sample(30, seed=0)
    ref = check("fedavg", problem, trace, "fedsum.theorem_4_1", seeds=2)
    own = check("fedsum", problem, trace, "fedsum.theorem_4_1", seeds=2)
    assert ref.covered is False and ref.label.endswith(" (ref)") and "reference only" in str(ref)
    assert any("not fedavg" in n for n in ref.notes) and ref.to_dict()["covered"] is False
    assert own.covered is True and own.label == own.verdict
    assert covered_algorithms("fedsum.lemma_d6") == ("fedsum",)

    def my_bound(constants, tau_max, tau_avg):
        return 1e6
    assert covered_algorithms(my_bound) is None
    assert check("fedavg", problem, trace, my_bound, seeds=2).covered is None
    my_bound.covers = ("fedavg",)
    assert check("fedavg", problem, trace, my_bound, seeds=2, step_sizes="theorem").covered is True


def test_a_result_shows_itself_in_jupyter():
    from algorithms.problems import Quadratic
    from participation.patterns import Uniform
    from verify.checking import check

    problem = Quadratic.random(4, 3, heterogeneity=0.5, noise_std=0.1, seed=0)
    result = check("fedsum-cr", problem, Uniform(4, 2).sample(30, seed=0), "fedsum.theorem_4_1", seeds=2)
    shown = result._repr_markdown_()
    assert f"**{result.label}**" in shown and "$$" in shown and "hypotheses at these step sizes" in shown
    assert all(c.name in shown for c in result.conditions)
    assert ("✗ VIOLATED" in shown) == (not result.conditions_hold)


def test_the_deprecated_bound_name_still_works_and_says_so():
    problem = Quadratic.random(4, 2, noise_std=0.0, seed=0)
    trace = preset("P1", n_clients=4, per_round=2).sample(10, seed=0)
    with pytest.warns(DeprecationWarning, match="theorem="):
        old = check("fedsum", problem, trace, bound="fedsum.theorem_4_1", seeds=1, local_steps=2)
    new = check("fedsum", problem, trace, theorem="fedsum.theorem_4_1", seeds=1, local_steps=2)
    assert old.values == new.values and old.verdict == new.verdict and old.bound.value == new.bound.value
    with pytest.raises(ValueError, match="theorem only"), pytest.warns(DeprecationWarning):
        check("fedsum", problem, trace, "fedsum.theorem_4_1", bound="fedsum.theorem_4_1")
