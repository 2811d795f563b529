"""The one judge (verify.verdicts.judge) and the verdicts built on it: diverged runs, one sample,
huge values, repeated seeds and records, the noise-free rule, uncertain bounds, the marks."""
import math
import warnings

import numpy as np
import pytest
from scipy import stats

import algorithms
from algorithms.problems import Quadratic
from participation import Trace, preset
from verify import check, check_run
from verify.records import RunRecorder
from verify.verdicts import judge, noise_free, verdict


@pytest.fixture(scope="module")
def quadratic():
    return Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.5, seed=0)


@pytest.fixture(scope="module")
def still():
    return Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.0, seed=0)


# ------------------------------------------------------------------ the rule


@pytest.mark.parametrize("values", [[1.0, math.inf], [math.nan, 2.0], [1e200], [3.0, -1e160]])
def test_a_diverged_run_is_violated_against_any_finite_bound(values):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        j = judge(values, 50.0)
    assert j.verdict == "violated" and j.diverged and "diverged" in j.notes[0]
    assert judge(values, math.inf).verdict == "holds"          # a vacuous bound cannot be violated


def test_huge_finite_values_give_finite_limits_without_warnings():
    v = np.array([1.0e150, 1.1e150, 0.9e150])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        j = judge(v, 52.6)
    half = stats.t.ppf(0.975, 2) * np.std(v / 1e150, ddof=1) / math.sqrt(3) * 1e150     # t at 1 − α/2 (nonnegative)
    assert math.isfinite(j.lower) and j.lower == pytest.approx(max(v.mean() - half, 0.025 * v.mean()), rel=1e-12)
    assert j.verdict == "violated" and not j.diverged


def test_one_sample_gets_markovs_lower_limit_and_never_holds():
    assert judge([100.0], 1.0).verdict == "violated"            # 0.05·100 = 5 > 1
    assert judge([10.0], 1.0).verdict == "inconclusive"         # 0.5 < 1 < ∞
    assert judge([0.001], 1.0).verdict == "inconclusive"        # far below, but one noisy value proves no "holds"
    assert judge([0.001], 1.0, noise_free=True).verdict == "holds"
    j = judge([-3.0], 1.0, nonnegative=False)
    assert (j.lower, j.upper) == (-math.inf, math.inf) and j.verdict == "inconclusive"


@pytest.mark.slow
def test_markovs_one_sample_test_keeps_its_level():
    """Exponential and two-point samples whose mean equals the bound: 'violated' at most 5% of the time."""
    rng = np.random.default_rng(0)
    for sample in (rng.exponential(2.0, 20000), np.where(rng.random(20000) < 0.04, 50.0, 0.0)):
        rate = np.mean([judge([x], 2.0).verdict == "violated" for x in sample])
        assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sample.size)


def test_the_noise_free_rule():
    assert noise_free(0.0, "noise") and not noise_free(0.1, "noise")
    assert not noise_free(0.0, "participation", None)           # a fixed trace standing for an expectation
    assert not noise_free(0.0, "participation", preset("P1", n_clients=6, per_round=2))
    assert noise_free(0.0, "participation", preset("case3", n_clients=6, per_round=2))
    # ties: equal noise-free values exactly at the bound hold; spread values are judged by t-limits
    assert judge([2.0, 2.0, 2.0], 2.0, noise_free=True).verdict == "holds"
    j = judge([1.0, 2.0, 3.0], 2.0, noise_free=True)
    assert j.lower < 2.0 < j.upper and j.verdict == "inconclusive"


def test_an_uncertain_bound_widens_the_verdict():
    assert verdict(1.0, 1.5, (2.0, 3.0)) == "holds"
    assert verdict(1.0, 2.5, (2.0, 3.0)) == "inconclusive"
    assert verdict(3.5, 4.0, (2.0, 3.0)) == "violated"
    assert verdict(2.5, 2.8, (2.0, 3.0)) == "inconclusive"


# ------------------------------------------------------------------ samples that are not independent


def test_repeated_seeds_are_refused(quadratic):
    trace = preset("P1", n_clients=6, per_round=2).sample(10, seed=0)
    with pytest.raises(ValueError, match="repeat 0"):
        check("fedsum", quadratic, trace, seeds=(0, 0, 0))


def _record(path, g2, *, seed=0, F0=True):
    constants = {"L": 1.0, "sigma2": 0.25, "delta_f": 3.0, **({"F0": 2.0} if F0 else {})}
    with RunRecorder(path, 3, algorithm="fedsum", local_steps=2, step_sizes={"eta_g": 1.0, "eta_l": 0.01}, seed=seed,
                     constants=constants) as rec:
        for t, g in enumerate(g2):
            rec.record_round(t, [0, 1, 2], [0, 1, 2], grad_norm2=float(g))
    return path


def test_a_missing_F0_is_refused_not_taken_as_zero(tmp_path):
    path = _record(tmp_path / "noF0.jsonl", np.full(8, 0.5), F0=False)
    with pytest.raises(ValueError, match="no F0"):
        check_run(path)
    with_f0 = check_run(path, constants={"F0": 2.0})
    assert with_f0.bound_value == check_run(_record(tmp_path / "F0.jsonl", np.full(8, 0.5))).bound_value


def test_a_recorded_run_that_overflowed_is_violated_and_says_it_diverged(tmp_path):
    g2 = 10.0 ** np.linspace(0, 181, 20)                      # a loop at too large a step size
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = check_run(_record(tmp_path / "blown.jsonl", g2))
    assert r.verdict == "violated" and r.diverged and "(diverged)" in r.label
    r20 = check_run(_record(tmp_path / "short.jsonl", np.r_[g2[0], g2[1:3] * 1e3]))
    assert r20.verdict == "violated" and not r20.diverged      # Markov: 0.025·x far above the bound


# ------------------------------------------------------------------ marks and expectations


def test_a_fixed_trace_for_an_expectation_is_marked_and_never_exact(still):
    trace = preset("P1", n_clients=6, per_round=2).sample(30, seed=0)
    r = check("fedsum", still, trace, "fedsum.corollary_4_1", seeds=2, local_steps=2)
    assert r.fixed_trace and "‡" in r.label and r.expectation
    # σ² = 0: the seeds agree, but one trace is one sample of the participation, not its expectation
    assert len(r.values) == 1 and r.upper == math.inf and r.lower == pytest.approx(0.025 * r.measured, rel=1e-15)
    assert r.verdict in ("inconclusive", "violated")


@pytest.mark.slow
def test_monte_carlo_expected_delays_enter_with_their_range(quadratic):
    pattern = preset("P1", n_clients=6, per_round=2)          # Uniform: no exact law of τ_max
    r = check("fedsum", quadratic, pattern, "fedsum.corollary_4_1", seeds=2, rounds=20, local_steps=2)
    assert r.bound_range is not None and r.bound_range[0] < r.bound_value < r.bound_range[1]
    assert "Monte-Carlo" in r.extras["E[τ] from"] and not r.fixed_trace
    exact = check("fedsum", quadratic, preset("P2", n_clients=6, per_round=2), "fedsum.corollary_4_1", seeds=2,
                  rounds=20, local_steps=2)
    assert exact.bound_range is None and exact.extras["E[τ] from"] == "exact"


def test_admissible_step_sizes_give_theorem_e1_a_row_that_tests_it(quadratic):
    trace = preset("P1", n_clients=6, per_round=2).sample(30, seed=0)
    prescribed = check("fedsum-cr", quadratic, trace, "fedsum.theorem_e1", seeds=2, local_steps=2)
    assert not prescribed.conditions_hold                         # E.6's η_l ≤ 1/(10τ̂KL) fails: no test
    adm = check("fedsum-cr", quadratic, trace, "fedsum.theorem_e1", seeds=2, local_steps=2, step_sizes="admissible")
    assert adm.conditions_hold and "*" not in adm.label
    tau_hat = max(1, prescribed.tau_max)
    L = quadratic.constants().L
    assert adm.step_sizes["eta_l"] == pytest.approx(min(prescribed.step_sizes["eta_l"], 1 / (10 * tau_hat * 2 * L),
                                                       1 / (10 * tau_hat * 2 * L * adm.step_sizes["eta_g"])), rel=1e-9)
    assert "Lemma E.6" in str(adm.bound.source)
    lemma = check("fedsum-cr", quadratic, trace, "fedsum.lemma_e6", seeds=2, local_steps=2, step_sizes="admissible")
    assert lemma.conditions_hold and lemma.bound_value == pytest.approx(adm.bound_value, rel=1e-12)


def test_given_step_sizes_outside_the_theorem_are_marked(quadratic):
    trace = preset("P1", n_clients=6, per_round=2).sample(20, seed=0)
    own = algorithms.get("fedsum", eta_l=1e-3, eta_g=1.0, local_steps=2)
    r = check(own, quadratic, trace, "fedsum.theorem_4_1", seeds=2)
    assert r.steps_outside and "†" in r.label and r.to_dict()["marks"] == ["†"]
    same = check("fedsum", quadratic, trace, "fedsum.theorem_4_1", seeds=2, local_steps=2)
    assert same.steps_outside is None and "†" not in same.label


# ------------------------------------------------------------------ inputs that give no verdict


def test_a_bound_that_is_nan_is_an_error_not_inconclusive(quadratic):
    from verify.theorems import user_theorem

    nan = user_theorem(lambda constants, tau_max: math.nan, name="nan bound")
    trace = preset("P1", n_clients=6, per_round=2).sample(10, seed=0)
    with pytest.raises(ValueError, match="NaN"):
        check("fedsum", quadratic, trace, nan, seeds=2, local_steps=2)


def test_records_of_different_constants_are_not_judged_together(tmp_path):
    a = _record(tmp_path / "a.jsonl", np.full(8, 0.5), seed=0)
    constants = {"L": 100.0, "sigma2": 0.25, "delta_f": 3.0, "F0": 2.0}
    with RunRecorder(tmp_path / "b.jsonl", 3, algorithm="fedsum", local_steps=2, step_sizes={"eta_g": 1.0, "eta_l": 0.01},
                     seed=1, constants=constants) as rec:
        for t in range(8):
            rec.record_round(t, [0, 1, 2], [0, 1, 2], grad_norm2=0.4)
    with pytest.raises(ValueError, match=r"differ in constants.L \(1.0 against 100.0\)"):
        check_run([a, tmp_path / "b.jsonl"])


@pytest.mark.parametrize("setting, message", [({"stages": 0}, "stages must be"), ({"stages": ((1.0,), (2.0,))}, "stages"),
                                              ({"stages": (-1.0, 2.0)}, "stages"), ({"nu": (1.0, 2.0)}, "nu must")])
def test_wrong_shaped_momentum_options_are_named(quadratic, setting, message):
    full = Trace(np.ones((10, 6), dtype=bool))
    with pytest.raises(ValueError, match=message):
        check("fedgm", quadratic, full, "momentum.theorem_4_1", seeds=2, hparams=setting)
