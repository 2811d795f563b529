"""The coverage table names every theorem, and a theorem's class reads the constants its
assumptions use."""
from __future__ import annotations

import pytest

from bounds.core import Constants
from verify import theorems
from verify.worst_case import COVERAGE, FunctionClass, coverage, covered_theorems, function_class_for


def test_every_theorem_has_an_entry():
    """Every theorem of ``verify.theorems`` is in COVERAGE, covered or with the reason why not, so
    that a new theorem cannot be left out of the table silently."""
    missing = sorted(set(theorems.names()) - set(COVERAGE))
    assert not missing, f"theorems without a worst-case coverage entry: {missing}"


def test_every_entry_is_a_theorem_and_says_why_it_is_not_covered():
    assert set(COVERAGE) <= set(theorems.names())
    for name, entry in COVERAGE.items():
        assert entry.theorem == name
        assert entry.covered or entry.reason, name
        assert not entry.covered or {"L", "delta_f"} <= set(entry.constants), name


@pytest.mark.parametrize("theorem", [t for t in covered_theorems() if t.startswith("fedsum.")])
def test_fedsum_theorems_read_F0(theorem):
    """FedSUM's class (Assumption 1.1 with Δ_f and F_0 of Thm 4.1): L, Δ_f and F_0 from the
    constants, no heterogeneity bound (even when ζ² is given)."""
    constants = Constants(L=2.0, sigma2=0.5, delta_f=3.0, F0=5.0, zeta2=7.0)
    assert function_class_for(theorem, constants) == FunctionClass(L=2.0, delta_f=3.0, F0=5.0)


@pytest.mark.parametrize("theorem", [t for t in covered_theorems() if t.startswith("momentum.")])
def test_momentum_theorems_read_the_heterogeneity(theorem):
    """Server momentum's class (A1 and A3): L, Δ_f and σ_g², from ``zeta2`` or else from
    ``extra["sigma_g2"]``; F_0 is not part of it."""
    from_zeta = Constants(L=2.0, sigma2=0.0, delta_f=3.0, F0=5.0, zeta2=0.7)
    from_extra = Constants(L=2.0, sigma2=0.0, delta_f=3.0, F0=5.0, extra={"sigma_g2": 0.4})
    assert function_class_for(theorem, from_zeta) == FunctionClass(L=2.0, delta_f=3.0, heterogeneity=0.7)
    assert function_class_for(theorem, from_extra) == FunctionClass(L=2.0, delta_f=3.0, heterogeneity=0.4)


def test_coverage_accepts_a_theorem_object():
    theorem = theorems.get("momentum.theorem_4_6")
    assert coverage(theorem) is COVERAGE["momentum.theorem_4_6"]
    assert coverage(theorem).over_traces and not coverage("momentum.theorem_4_1").over_traces
