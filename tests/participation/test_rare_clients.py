"""Rare clients (p from 1e−7 down to the smallest float): the gap sampler draws them in the same
small memory as common ones, agrees with the exact expectation, and FedSUM Lemma F.2's steps
stay finite where 1 − δ rounds to 1."""
import math
import tracemalloc

import mpmath
import numpy as np
import pytest

from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo
from participation.expected.samplers import gaps
from participation.expected.paper_bounds import paper_tau_max_bound
from participation.patterns import Bernoulli
from verify.cli import main

RARE = [1e-7, 1e-10, 1e-200, 1e-300, 5e-324]


@pytest.mark.parametrize("p", RARE)
def test_a_fleet_of_rare_clients_is_sampled_in_little_memory(p, monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.25")
    pattern = Bernoulli(p, 5)
    gaps._long_table.cache_clear()
    tracemalloc.start()
    try:
        result = monte_carlo(pattern, 100, 10, seed=0, method="gaps")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    assert result.tau_max.mean == exact_tau_max(pattern, 100) == 100.0
    assert result.tau_avg.mean == pytest.approx(exact_tau_avg(pattern, 100), abs=1e-9)


@pytest.mark.parametrize("rare", [1e-3, 1e-7, 1e-12, 1e-300])
def test_rare_clients_among_common_ones_agree_with_the_exact_expectation(rare):
    """Three rare clients beside 25 common ones; with p = 1e−3 some rare client is selected in
    about half the replicates, so the table path and the exact fallbacks are both exercised."""
    p = np.array([0.3] * 20 + [0.05] * 5 + [rare] * 3)
    pattern = Bernoulli(p, p.size)
    rounds, reps = 200, 4000
    result = monte_carlo(pattern, rounds, reps, seed=1, method="gaps")
    for estimate, exact in ((result.tau_max, exact_tau_max(pattern, rounds)),
                            (result.tau_avg, exact_tau_avg(pattern, rounds))):
        assert abs(estimate.mean - exact) <= 5 * estimate.stderr + 1e-9


@pytest.mark.parametrize("p", [2.0**-16, 2e-6])
def test_below_one_cell_every_inversion_cell_falls_back(p):
    """For p ≤ 2^−16 the long-gap table is all fallbacks without listing the breakpoints. Checked
    against the breakpoints themselves: every 16-bit cell holds or touches some 1 − q^k."""
    k = np.arange(1, int(math.ceil(16 * math.log(2) / -math.log1p(-p))) + 3)
    cells = np.unique(np.floor(-np.expm1(k * math.log1p(-p)) * 2**16).astype(np.int64))
    touched = np.zeros(2**16 + 2, dtype=bool)
    for shift in (0, 1, 2):
        touched[np.clip(cells + shift, 0, 2**16 + 1)] = True
    assert touched[1:-1].all()
    assert (gaps._long_table(p, 1) == -1).all()


def _lemma_f2_steps_mpmath(n: int, rounds: int, delta: float) -> dict[str, mpmath.mpf]:
    """Steps 3 and 4 of FedSUM Lemma F.2's proof at 200 digits, p = 1 − δ."""
    with mpmath.workdps(400):
        d = mpmath.mpf(delta)
        p, nt = 1 - d, mpmath.mpf(n * rounds)
        m = mpmath.ceil(mpmath.log((1 - p) / (nt * p)) / mpmath.log(p))
        return {"step 3": m + nt * p ** (m + 1) / (1 - p),
                "closed": mpmath.log(nt * p / (1 - p)) / mpmath.log(1 / p) + 2,
                "relaxed": mpmath.log(nt / d) / mpmath.log(1 / p) + 2,
                "stated": 4 / d * max(mpmath.log(nt), mpmath.log(1 / d))}


@pytest.mark.parametrize("delta", [0.3, 1e-7, 1e-200])
def test_lemma_f2_steps_for_a_rare_client_match_a_200_digit_computation(delta):
    bound = paper_tau_max_bound(Bernoulli(np.array([0.5, 0.9, delta]), 3), 100)
    want = _lemma_f2_steps_mpmath(3, 100, delta)
    steps = bound.steps
    assert steps["F.2 step 3 (eq. 112)"] == pytest.approx(float(want["step 3"]), rel=1e-9)
    assert steps["F.2 step 4: closed form"] == pytest.approx(float(want["closed"]), rel=1e-9)
    assert steps["F.2 step 4 relaxed"] == pytest.approx(float(want["relaxed"]), rel=1e-9)
    assert bound.value == pytest.approx(float(want["stated"]), rel=1e-12)
    assert all(math.isfinite(v) for v in steps.values())


def test_a_bound_beyond_float_range_is_infinite_not_an_error():
    bound = paper_tau_max_bound(Bernoulli(5e-324, 3), 100)
    assert bound.value == math.inf


@pytest.mark.parametrize("p", ["1e-7", "1e-200"])
def test_mc_on_rare_clients_answers(p, capsys, monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.5")
    assert main(["mc", "logit", "-T", "100", "--reps", "10", "--set", f"p={p}", "--no-progress"]) in (0, None)
    out = capsys.readouterr().out
    assert "tau_max        100" in out
