"""The statistics of the reproduction reports: Holm's correction, paired p-values, the robust
late-round variability, power-law exponents with intervals, and Lemma D.6's constants read
back from its terms."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from verify.studies import report_statistics as rs

# ------------------------------------------------------------------------ Holm


def _step_down(pvalues, alpha):
    """Holm's procedure as Holm (1979) states it: test the ordered hypotheses in turn, the
    i-th (from 0) at level α/(m − i), and stop at the first that is not rejected (p > α/(m − i),
    compared as (m − i) p > α so that a candidate α = (m − i) p is not lost to rounding)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    m, rejected = len(pvalues), set()
    for i, k in enumerate(order):
        if (m - i) * pvalues[k] > alpha:
            break
        rejected.add(k)
    return rejected


def _adjusted_by_definition(pvalues):
    """The adjusted p-value of each hypothesis: the smallest α at which the step-down
    procedure rejects it, searched over every candidate α = (m − i) p_(i)."""
    m = len(pvalues)
    candidates = sorted({min(1.0, (m - i) * p) for i, p in enumerate(sorted(pvalues))})
    out = []
    for k in range(m):
        out.append(min((a for a in candidates if k in _step_down(pvalues, a)), default=1.0))
    return out


def test_holm_on_a_textbook_example():
    """Four hypotheses with p = 0.01, 0.04, 0.03, 0.005 at α = 0.05: 0.005 ≤ 0.05/4 and
    0.01 ≤ 0.05/3 are rejected, 0.03 > 0.05/2 stops the procedure (the worked example of the
    Holm–Bonferroni method); adjusted p = 0.03, 0.06, 0.06, 0.02."""
    p = [0.01, 0.04, 0.03, 0.005]
    adjusted = rs.holm(p)
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    assert {i for i, a in enumerate(adjusted) if a <= 0.05} == {0, 3} == _step_down(p, 0.05)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=12),
       st.sampled_from([0.001, 0.01, 0.05, 0.1, 0.2]))
def test_holm_rejects_what_the_step_down_loop_rejects(pvalues, alpha):
    adjusted = rs.holm(pvalues)
    assert {i for i, a in enumerate(adjusted) if a <= alpha} == _step_down(pvalues, alpha)
    np.testing.assert_allclose(adjusted, _adjusted_by_definition(pvalues), rtol=1e-12, atol=0)
    assert (adjusted >= np.asarray(pvalues)).all() and (adjusted <= 1).all()


def test_holm_leaves_missing_p_values_out_of_the_count():
    adjusted = rs.holm([0.01, float("nan"), 0.02])
    assert math.isnan(adjusted[1])
    np.testing.assert_allclose(adjusted[[0, 2]], [0.02, 0.02])
    with pytest.raises(ValueError, match="lie in"):
        rs.holm([0.5, 1.5])


def test_holm_is_bonferroni_for_the_smallest_and_never_below_it():
    p = np.array([0.038, 0.046, 0.054, 0.2, 0.9])
    adjusted = rs.holm(p)
    assert adjusted[0] == pytest.approx(5 * 0.038) and adjusted[1] == pytest.approx(5 * 0.038)   # 4 · 0.046 < 0.19
    assert adjusted[-1] == pytest.approx(0.9)
    assert rs.holm([0.3, 0.4])[0] == pytest.approx(0.6) and rs.holm([0.6, 0.7])[0] == 1.0


# ------------------------------------------------------------------------ paired p-values


@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=8))
def test_paired_p_value_is_scipys_one_sample_t_test(values):
    values = np.asarray(values)
    if np.ptp(values) < 1e-6 * (1 + np.abs(values).max()):
        return
    assert rs.paired_p_value(values) == pytest.approx(stats.ttest_1samp(values, 0.0).pvalue, rel=1e-9, abs=1e-300)


def test_paired_p_value_needs_two_values_with_spread():
    assert math.isnan(rs.paired_p_value([0.3])) and math.isnan(rs.paired_p_value([0.2, 0.2]))


# ------------------------------------------------------------------------ late variability


def _curve(rounds, loss):
    return {"rounds": np.asarray(rounds), "loss": np.asarray(loss, dtype=np.float64)}


def test_late_variability_ignores_a_bending_trend():
    rounds = np.arange(0, 501, 10)
    bend = 0.3 + 0.5 * np.exp(-rounds / 150.0)
    value, n = rs.late_variability([_curve(rounds, bend)], 160)
    assert n == 1 and value < 2e-4                             # the bend of a smooth descent is not noise


def test_late_variability_estimates_the_noise_standard_deviation():
    rng = np.random.default_rng(5)
    rounds = np.arange(0, 20001, 10)
    curves = [_curve(rounds, 1.0 - 1e-5 * rounds + rng.normal(0, 0.01, rounds.size)) for _ in range(3)]
    value, n = rs.late_variability(curves, 20000)
    assert n == 3 and value == pytest.approx(0.01, rel=0.08)


def test_late_variability_gives_one_jump_and_one_boundary_point_no_weight():
    rng = np.random.default_rng(1)
    rounds = np.arange(0, 501, 10)
    loss = [0.5 - 2e-4 * rounds + rng.normal(0, 0.003, rounds.size) for _ in range(3)]
    base, _ = rs.late_variability([_curve(rounds, y) for y in loss], 160)
    loss[2] = loss[2].copy()
    loss[2][rounds == 410] += 0.9                              # one seed jumps at one round
    jumped, _ = rs.late_variability([_curve(rounds, y) for y in loss], 160)
    assert jumped == pytest.approx(base, rel=0.35)
    for window in (150, 170):
        assert rs.late_variability([_curve(rounds, y) for y in loss], window)[0] == pytest.approx(base, rel=0.35)


def test_late_variability_without_three_points_is_nan():
    value, n = rs.late_variability([_curve([0, 400, 500], [1.0, 1.0, 1.0])], 50)
    assert math.isnan(value) and n == 0


# ------------------------------------------------------------------------ power laws


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000))
def test_power_law_is_linregress_on_the_logarithms(seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, 300, size=rng.integers(3, 15))
    if np.ptp(np.log(x)) < 1e-6:
        return
    y = 2.0 * x ** 0.8 * np.exp(rng.normal(0, 0.3, x.size))
    fit = rs.power_law(x, y)
    ref = stats.linregress(np.log(x), np.log(y))
    half = stats.t.ppf(0.975, x.size - 2) * ref.stderr
    assert fit["n"] == x.size
    assert fit["slope"] == pytest.approx(ref.slope, rel=1e-9, abs=1e-12)
    assert fit["low"] == pytest.approx(ref.slope - half, rel=1e-9, abs=1e-12)
    assert fit["high"] == pytest.approx(ref.slope + half, rel=1e-9, abs=1e-12)


def test_power_law_interval_covers_the_true_exponent_95_percent_of_the_time():
    rng = np.random.default_rng(11)
    x = np.array([4, 4, 8, 8, 16, 31, 32, 34, 64, 203, 286], dtype=float)   # the CNN study's τ_max
    covered = 0
    for _ in range(2000):
        fit = rs.power_law(x, 1.5 * x ** 0.9 * np.exp(rng.normal(0, 0.8, x.size)))
        covered += fit["low"] <= 0.9 <= fit["high"]
    assert covered / 2000 == pytest.approx(0.95, abs=0.015)      # 3 binomial standard deviations


def test_power_law_agrees_with_the_bootstrap_on_the_saved_cnn_study():
    """The t interval of the CNN study's τ_max exponent against a residual bootstrap of the same
    fit (the x fixed, the residuals, rescaled by √(n/(n − 2)), drawn with replacement): the
    percentile interval is a normal one, narrower than the t interval by about
    t_{0.975, 9}/z_{0.975} = 1.15, and centred on the same slope."""
    import json
    from pathlib import Path

    rows = json.loads((Path(__file__).resolve().parents[3] / "docs" / "reproductions" / "fedsum-delays" /
                       "cnn-digits-trains" / "delays.json").read_text())["rows"]
    same = [r for r in rows if r["group"] != "other rate"]
    x, y = np.array([r["tau_max"] for r in same]), np.array([r["measured"] for r in same])
    fit = rs.power_law(x, y)
    u, v = np.log(x), np.log(y)
    fitted = np.polyval(np.polyfit(u, v, 1), u)
    residual = (v - fitted) * math.sqrt(x.size / (x.size - 2))
    rng = np.random.default_rng(0)
    slopes = [rs.power_law(x, np.exp(fitted + rng.choice(residual, x.size)))["slope"] for _ in range(4000)]
    low, high = np.percentile(slopes, [2.5, 97.5])
    scale = stats.t.ppf(0.975, x.size - 2) / stats.norm.ppf(0.975)
    assert (high - low) * scale == pytest.approx(fit["high"] - fit["low"], rel=0.1)
    assert (low + high) / 2 == pytest.approx(fit["slope"], abs=0.05)


def test_power_law_of_too_few_points():
    assert math.isnan(rs.power_law([1, 2], [1, 2])["low"]) and rs.power_law([1, 2], [1, 2])["slope"] == pytest.approx(1)
    assert math.isnan(rs.power_law([3, 3, 3], [1, 2, 3])["slope"])
    assert rs.exponent({"slope": 1.0, "low": -0.08, "high": 2.07}) == "1.00 [−0.08, 2.07]"


# ------------------------------------------------------------------------ Lemma D.6's parts


def test_lemma_d6_constants_are_read_back_from_its_terms():
    from bounds import fedsum
    from bounds.core import Constants

    c = Constants(L=3.0, sigma2=0.7, delta_f=2.5, F0=1.3, n_clients=10, local_steps=2, rounds=300)
    bound = fedsum.lemma_d6(c, eta_g=1.5, eta_l=0.2, tau_max=31, tau_avg=12.8)
    row = {"eta_g": 1.5, "eta_l": 0.2, "tau_max": 31.0, "tau_avg": 12.8, "terms": dict(bound.terms)}
    setting = {"n_clients": 10, "local_steps": 2, "rounds": 300}
    back = rs.lemma_d6_constants(row, setting)
    for key in ("L", "sigma2", "delta_f", "F0"):
        assert getattr(back, key) == pytest.approx(getattr(c, key), rel=1e-12)
    parts = rs.lemma_d6_parts(row, setting)
    assert set(parts["tau"]) == {"variance", "initial gradients"}
    assert set(parts["tau_free"]) == {"optimization", "local drift"}
    assert parts["eta_l_limit"] == pytest.approx(1 / (10 * math.sqrt(31) * 2 * 3.0))
    assert parts["drift_limit"] == pytest.approx(1.5 * 0.7 / (31 * 10 * 2))    # 1.5 σ²/(τ̂ N K) at the limit
