"""Bad input to the worst-case engine is a ValueError that says what is wrong, and a programme
with no finite worst case reports None, never a number."""
from __future__ import annotations

import math

import numpy as np
import pytest

import algorithms
from bounds.core import Constants
from bounds.momentum import StageSchedule
from verify.worst_case import FunctionClass, function_class_for, worst_case
from verify.worst_case import programme

FC = FunctionClass(L=1.0, delta_f=1.0, F0=1.0)
FULL = np.ones((2, 2), dtype=bool)


def _fedsum_b():
    return algorithms.get("fedsum-b", eta_l=0.5, eta_g=1.0, local_steps=1)


def test_an_algorithm_without_transcription_is_refused():
    """MIFA has no transcription: the error names it and the supported algorithms."""
    with pytest.raises(ValueError, match=r"no worst case for 'mifa'.*fedsum-b"):
        worst_case(algorithms.get("mifa"), FULL, FC)


def test_a_multistage_fedgm_is_refused():
    """A FedGM schedule changes (η, β, ν) between stages, which the transcription does not follow."""
    schedule = StageSchedule((2, 4), (1.0, 0.5), 0.1, 0.5, 0.0)
    with pytest.raises(ValueError, match="multistage schedule is not transcribed"):
        worst_case(algorithms.get("fedgm", schedule=schedule), FULL, FC)


@pytest.mark.parametrize("kwargs,field", [
    ({"L": 0.0, "delta_f": 1.0}, "L"),
    ({"L": 1.0, "delta_f": -1.0}, "delta_f"),
    ({"L": 1.0, "delta_f": 1.0, "F0": math.nan}, "F0"),
    ({"L": 1.0, "delta_f": 1.0, "heterogeneity": math.inf}, "heterogeneity"),
    ({"L": True, "delta_f": 1.0}, "L"),
])
def test_function_class_constants_must_be_finite_and_positive(kwargs, field):
    with pytest.raises(ValueError, match=rf"^{field} must be a finite number > 0"):
        FunctionClass(**kwargs)


def test_an_unknown_solver_is_refused():
    with pytest.raises(ValueError, match=r"solver must be one of clarabel, scs, got 'mosek'"):
        worst_case(_fedsum_b(), FULL, FC, solver="mosek")


def test_an_unknown_measure_is_refused():
    with pytest.raises(ValueError, match=r"measure must be one of average, min, got 'last'"):
        worst_case(_fedsum_b(), FULL, FC, measure="last")


@pytest.mark.parametrize("trace", [[], np.zeros((0, 2), dtype=bool)], ids=["active-sets", "mask"])
def test_a_trace_of_no_rounds_is_refused(trace):
    """A worst case needs T ≥ 1, whether the trace comes as active sets or as a mask."""
    with pytest.raises(ValueError, match="at least one round"):
        worst_case(_fedsum_b(), trace, FC, n_clients=2)


def test_a_programme_above_the_time_limit_is_refused_before_it_is_built(monkeypatch):
    """The prediction is checked before the programme is built: ``_build`` is never reached, and
    the message gives the programme's size and the limit."""
    def build(*args, **kwargs):
        raise AssertionError("the programme was built")

    monkeypatch.setattr(programme, "_build", build)
    with pytest.raises(ValueError, match=r"would take about .* above the limit .*FEDVERIFY_WORST_CASE_SECONDS"):
        worst_case(_fedsum_b(), FULL, FC, max_seconds=1e-6)


def test_an_uncovered_theorem_has_no_function_class():
    """LOGIT's theorems bound a method whose gradients come from a trained generator; the error
    says so."""
    constants = Constants(L=1.0, sigma2=0.0, delta_f=1.0)
    with pytest.raises(ValueError, match=r"logit\.theorem_1 has no worst case: .*generated gradients"):
        function_class_for("logit.theorem_1", constants)


def test_an_unknown_theorem_has_no_function_class():
    with pytest.raises(ValueError, match=r"no worst-case coverage for 'fedsum\.theorem_9'"):
        function_class_for("fedsum.theorem_9", Constants(L=1.0, sigma2=0.0, delta_f=1.0))


def test_momentum_needs_the_heterogeneity():
    """Server momentum's class bounds the heterogeneity σ_g²; without it the class is not the
    theorem's."""
    constants = Constants(L=1.0, sigma2=0.0, delta_f=1.0)
    with pytest.raises(ValueError, match=r"momentum\.theorem_4_1's class needs σ_g²"):
        function_class_for("momentum.theorem_4_1", constants)


def test_a_zero_constant_is_refused_by_the_theorems_class():
    """FedSUM's class reads F_0; F_0 = 0 (the Constants default) would collapse the class."""
    with pytest.raises(ValueError, match=r"fedsum\.theorem_4_1's worst case needs F0 > 0"):
        function_class_for("fedsum.theorem_4_1", Constants(L=1.0, sigma2=0.0, delta_f=1.0))


def test_an_unbounded_programme_reports_no_value():
    """FedAvg with partial participation and no bound on the initial gradients: the client that
    is not sampled in the first round can have an arbitrarily large gradient at x_1 while f(x_0) −
    f(x_t) stays below Δ_f, so the worst case is unbounded: value None, status "unbounded"."""
    algorithm = algorithms.get("fedavg", eta_l=0.5, eta_g=1.0, local_steps=1)
    result = worst_case(algorithm, [[0], [1], [0]], FunctionClass(L=1.0, delta_f=1.0), n_clients=2)
    assert result.value is None and result.primal is None
    assert result.status == "unbounded" and not result.ok


def test_a_failed_clarabel_solve_is_an_error(monkeypatch):
    """A solve that ends without a solution (here Clarabel reporting a numerical error with finite
    objective values) certifies no bound: a ValueError naming Clarabel's status, never its numbers."""
    import clarabel

    class Failed:
        status, obj_val, obj_val_dual = "NumericalError", -1e48, -19.7

    class Solver:
        def __init__(self, *args):
            pass

        def solve(self):
            return Failed()

    monkeypatch.setattr(clarabel, "DefaultSolver", Solver)
    with pytest.raises(ValueError, match=r"CLARABEL solver stopped without a solution \(NumericalError\)"):
        worst_case(_fedsum_b(), FULL, FC)


def test_a_programme_clarabel_cannot_settle_gives_no_number():
    """FedSUM with K = 2, a full round then a partial one and no bound on the initial gradients:
    the worst case grows with F_0 (it is +∞ without F_0), and Clarabel stops on it without a
    certificate. The result is "unbounded" or an error, never a number."""
    algorithm = algorithms.get("fedsum", eta_l=0.1, eta_g=1.0, local_steps=2)
    try:
        result = worst_case(algorithm, [[0, 1], [1]], FunctionClass(L=1.0, delta_f=1.0), n_clients=2)
    except ValueError as err:
        assert "without a solution" in str(err)
    else:
        assert result.value is None and result.status == "unbounded"
    bounded = [worst_case(algorithm, [[0, 1], [1]], FunctionClass(L=1.0, delta_f=1.0, F0=F0), n_clients=2).value
               for F0 in (1.0, 1e2)]
    assert bounded[1] > 2 * bounded[0]


@pytest.mark.parametrize("bad", [float("nan"), "10", -1.0, 0.0])
def test_a_time_limit_that_is_not_a_positive_number_is_refused(bad):
    from verify.worst_case.programme import _limit

    with pytest.raises(ValueError, match="max_seconds must be a number > 0"):
        _limit(bad)
    assert _limit(math.inf) == math.inf
