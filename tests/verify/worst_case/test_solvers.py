"""The two solvers agree: SCS (through cvxpy and PEPit's own wrapper) and Clarabel (the programme
handed over directly by ``verify.worst_case.conic``) give the same worst case on a small
programme, which checks the direct conic formulation (the packed Gram matrix, the √2 scaling of
its off-diagonal entries, the signs of the dual value) against PEPit's."""
from __future__ import annotations

import pytest

import algorithms
from verify.worst_case import FunctionClass, worst_case


@pytest.mark.parametrize("measure", ["average", "min"])
def test_scs_agrees_with_clarabel(measure):
    """FedSUM-B, N = 2, T = 3, K = 1 on a partial trace: the two values agree to 1e-3 relative,
    and each solver's primal value (an instance's) is within its accuracy of its dual value."""
    algorithm = algorithms.get("fedsum-b", eta_l=0.3, eta_g=1.0, local_steps=1)
    sets, fc = [[0, 1], [1], [0]], FunctionClass(L=1.0, delta_f=1.0, F0=1.0)
    clarabel = worst_case(algorithm, sets, fc, measure=measure, n_clients=2)
    scs = worst_case(algorithm, sets, fc, measure=measure, n_clients=2, solver="scs")
    assert (clarabel.solver, scs.solver) == ("CLARABEL", "SCS")
    assert clarabel.ok and scs.value is not None
    assert scs.value == pytest.approx(clarabel.value, rel=1e-3)
    assert scs.primal == pytest.approx(scs.value, rel=1e-3)
