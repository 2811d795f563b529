"""The Bound machinery: one sympy definition gives value, terms, LaTeX; log space for huge constants."""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from bounds.core import Constants, Formula, Source, at_most, check_variant, make_bound
from bounds.papers import PAPERS

N, L, T = sp.symbols("N L T", positive=True)
SOURCE = Source("Test", "Thm 0", "eq. (1)")


def test_value_and_terms_come_from_one_definition():
    formula = Formula({"lead": 3 * L / sp.sqrt(T), "tail": N * L / T}, (N, L, T))
    bound = make_bound(formula, {N: 4, L: 2.0, T: 16}, SOURCE)
    assert bound.terms == pytest.approx({"lead": 1.5, "tail": 0.5})
    assert bound.value == pytest.approx(2.0)
    assert float(bound.expr.subs({N: 4, L: 2, T: 16})) == pytest.approx(bound.value)
    assert "\\sqrt{T}" in bound.latex() and bound.log_value is None


def test_log_space_survives_overflow_and_matches_direct_evaluation():
    terms = {"mixing": 2**N * L / T, "noise": L / sp.sqrt(T)}
    direct = Formula(terms, (N, L, T))
    logged = Formula(terms, (N, L, T), log_space=True)
    small = {N: 10, L: 1.5, T: 100}
    assert make_bound(logged, small, SOURCE).value == pytest.approx(make_bound(direct, small, SOURCE).value, rel=1e-12)
    huge = make_bound(logged, {N: 5000, L: 1.5, T: 100}, SOURCE)
    assert huge.value == math.inf
    assert huge.log_value == pytest.approx(5000 * math.log(2) + math.log(1.5 / 100), rel=1e-12)


def test_conditions_and_validity():
    formula = Formula({"a": L}, (L,))
    bound = make_bound(formula, {L: 1.0}, SOURCE, conditions=[at_most("step", 0.5, 1.0), at_most("other", 2.0, 1.0)])
    assert not bound.valid and [c.name for c in bound.violated] == ["other"]
    assert "VIOLATED" in str(bound) and "Test, Thm 0 (eq. (1))" in str(bound)
    assert at_most("edge", 1.0 + 1e-15, 1.0).holds


def test_source_names_a_paper_and_a_place_in_it():
    assert SOURCE.reference is None and str(SOURCE) == "Test, Thm 0 (eq. (1))"
    source = Source("FedSUM", "Thm 4.1", "eq. (12)", "root over τ_max only")
    assert source.reference is PAPERS["FedSUM"]
    assert str(source) == f"{PAPERS['FedSUM'].short}, Thm 4.1 (eq. (12)); root over τ_max only"
    assert str(Source("LOGIT", "Thm 1")) == f"{PAPERS['LOGIT'].short}, Thm 1"
    for text in (str(SOURCE), str(source)):
        assert ".txt" not in text and "line" not in text


def test_formula_rejects_unlisted_symbols_and_missing_values():
    with pytest.raises(TypeError, match="T"):
        Formula({"a": L * T}, (L,))
    with pytest.raises(ValueError, match="no value given for T"):
        Formula({"a": L * T}, (L, T)).evaluate({L: 1.0})


@pytest.mark.parametrize("kwargs, message", [
    ({"L": -1.0}, "L must be > 0"), ({"sigma2": -0.1}, "sigma2"), ({"delta_f": float("nan")}, "delta_f"),
    ({"rounds": 0}, "rounds"), ({"n_clients": 2.5}, "n_clients"), ({"zeta2": -1.0}, "zeta2"),
])
def test_constants_reject_bad_values(kwargs, message):
    args = {"L": 1.0, "sigma2": 1.0, "delta_f": 1.0} | kwargs
    with pytest.raises(ValueError, match=message):
        Constants(**args)


def test_constants_require_names_the_missing_one():
    constants = Constants(L=1.0, sigma2=1.0, delta_f=1.0, extra={"sigma_g2": 0.5})
    assert constants.require("sigma_g2") == 0.5 and constants.require("L") == 1.0
    with pytest.raises(ValueError, match="zeta2"):
        constants.require("zeta2")
    with pytest.raises(ValueError, match="'H'"):
        constants.require("H")
    with pytest.raises(ValueError, match="'odd'"):
        check_variant("odd", ("printed", "corrected"))


def test_lambdified_terms_accept_numpy_scalars():
    formula = Formula({"a": L / T}, (L, T))
    assert make_bound(formula, {L: np.float32(2.0), T: np.int64(4)}, SOURCE).value == pytest.approx(0.5)


@pytest.mark.slow
def test_bounds_never_import_torch():
    """The one check that bounds stays torch-free: importing every module of the package in a
    fresh interpreter loads no torch, and no module names torch in any import statement
    (a function-local import included, which importing alone would not reach)."""
    import ast
    import pkgutil
    import subprocess
    import sys
    from pathlib import Path

    import bounds

    names = ["bounds"] + sorted(info.name for info in pkgutil.walk_packages(bounds.__path__, "bounds."))
    assert {"bounds.cafed", "bounds.core", "bounds.fedsum", "bounds.logit", "bounds.momentum"} <= set(names)
    code = f"import sys, {', '.join(names)}; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
    for path in sorted(Path(bounds.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, (ast.Import, ast.ImportFrom))
                    for alias in node.names} | {node.module.split(".")[0] for node in ast.walk(tree)
                                                if isinstance(node, ast.ImportFrom) and node.module}
        assert "torch" not in imported, path.name
