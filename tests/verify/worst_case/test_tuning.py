"""``best_step`` returns a step size whose worst case is the one it reports, and no worse than the
worst case at the given step size."""
from __future__ import annotations

import dataclasses

import pytest

import algorithms
from verify.worst_case import FunctionClass, best_step, worst_case

SETS, N = [[0, 1], [1], [0]], 2
FC = FunctionClass(L=1.0, delta_f=1.0, F0=1.0)


@pytest.mark.parametrize("name", ["fedsum-b", "fedavg"])
def test_best_step_improves_on_the_given_step_and_is_reproducible(name):
    """On a three-round partial trace, from η_l = 0.05/L (F_0 bounded): the returned
    worst case is below the worst case at η_l (which is reported as ``start`` and equals a
    fresh solve there), equals a fresh solve at the returned η_l to 1e-6, and is the least of the
    values tried."""
    algorithm = algorithms.get(name, eta_l=0.05, eta_g=1.0, local_steps=1)
    best = best_step(algorithm, SETS, FC, n_clients=N)
    given = worst_case(algorithm, SETS, FC, n_clients=N)
    again = worst_case(dataclasses.replace(algorithm, eta_l=best.eta_l), SETS, FC, n_clients=N)
    assert best.start.value == pytest.approx(given.value, rel=1e-9)
    assert best.worst_case.value < given.value
    assert again.value == pytest.approx(best.worst_case.value, rel=1e-6)
    assert best.eta_g == algorithm.eta_g
    assert best.worst_case.value == min(v for _, v in best.tried if v is not None)


@pytest.mark.parametrize("kwargs, named", [({"scales": None}, "scales"), ({"scales": "ab"}, "scales"),
                                           ({"scales": (1, None)}, "scales"), ({"scales": (0.5, True)}, "scales"),
                                           ({"scales": (1, -2)}, "scales"), ({"refine": -1}, "refine"),
                                           ({"refine": 1.5}, "refine"), ({"refine": None}, "refine")])
def test_bad_search_settings_are_one_line_errors_naming_them(kwargs, named):
    algorithm = algorithms.get("fedsum-b", eta_l=0.1, eta_g=1.0, local_steps=1)
    with pytest.raises(ValueError, match=f"^{named} must be") as err:
        best_step(algorithm, SETS, FC, n_clients=N, **kwargs)
    assert "\n" not in str(err.value)
