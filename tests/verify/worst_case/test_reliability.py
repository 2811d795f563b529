"""A worst case certifies only what the solver resolves: a value that spans more orders of
magnitude than the solver's tolerances (step sizes of 50/L make the iterates grow geometrically)
is "unreliable" and certifies nothing, so a run on a problem inside the class is never called
outside it; a class with F_0 is never unbounded, so that answer is refused as a solver failure."""
import numpy as np
import pytest

import algorithms
from verify.verdicts import WorstCaseColumn, beyond_worst_case
from verify.worst_case import FunctionClass, worst_case

MASK = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 1]], dtype=bool)
CLASS = FunctionClass(L=0.9975, delta_f=3.195, F0=6.53)


def test_a_worst_case_beyond_the_solvers_range_certifies_nothing():
    result = worst_case(algorithms.get("fedsum-b", eta_l=50.0, eta_g=50.0, local_steps=2), MASK, CLASS)
    assert result.status == "unreliable" and result.accuracy is None and not result.ok
    column = WorstCaseColumn(value=result.value, accuracy=result.accuracy, status=result.status)
    assert not beyond_worst_case(1.5e42, column)


def test_moderate_step_sizes_stay_certified():
    result = worst_case(algorithms.get("fedsum-b", eta_l=1.0, eta_g=1.0, local_steps=2), MASK, CLASS)
    assert result.status == "optimal" and result.accuracy < 1e-5


def test_unbounded_is_refused_for_a_class_with_F0():
    with pytest.raises(ValueError, match="unbounded, which a class with F_0 cannot be"):
        worst_case(algorithms.get("fedsum-b", eta_l=0.0289, eta_g=0.577, local_steps=2), MASK,
                   FunctionClass(L=1.0, delta_f=1e12, F0=1.0))
