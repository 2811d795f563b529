"""``verify.check_tables``: the tables of ``fedverify check`` as a library, equal to ``check``
called row by row, and the only way the rest of the package reaches them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_nothing_outside_the_command_line_imports_a_command_module():
    """Library code lives in the library: the bench and the studies call ``verify.check_tables``,
    not a command's private functions."""
    offenders = []
    for path in (ROOT / "verify").rglob("*.py"):
        if "cli" in path.relative_to(ROOT / "verify").parts:
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"from \.+cli\.commands(\.\w+)? import|import verify\.cli\.commands", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_compute_rows_equals_check_row_by_row():
    from algorithms.problems import Quadratic
    from participation import preset
    from verify.check_tables import CheckSettings, compute_rows
    from verify.checking import check
    from verify.constants import problem_constants
    from verify.theorems import get

    problem = Quadratic.random(6, 3, noise_std=0.3, seed=0)
    consts = problem_constants(problem)
    theorem = get("fedsum.theorem_4_1")
    patterns = [("P1", preset("P1", n_clients=6, per_round=2)), ("P2", preset("P2", n_clients=6, per_round=2))]
    settings = CheckSettings(problem, consts, rounds=20, local_steps=2, seeds=2, worst_case=False)
    cells, results, _ = compute_rows([(theorem, ["fedsum", "fedavg"], patterns)], settings)
    assert [(c[1], c[2]) for c in cells] == [("fedsum", "P1"), ("fedsum", "P2"), ("fedavg", "P1"), ("fedavg", "P2")]
    for (_, name, _, source), result in zip(cells, results):
        alone = check(name, problem, source, "fedsum.theorem_4_1", seeds=2, rounds=20, local_steps=2, constants=consts,
                      worst_case=False)
        assert result.values == pytest.approx(alone.values, rel=1e-12) and result.verdict == alone.verdict


def test_a_row_that_fails_is_one_error_naming_it():
    from algorithms.problems import Quadratic
    from participation import preset
    from verify.check_tables import CheckSettings, compute_rows
    from verify.constants import problem_constants
    from verify.theorems import get

    problem = Quadratic.random(4, 2, seed=0)
    settings = CheckSettings(problem, problem_constants(problem), rounds=5, local_steps=1, seeds=1, worst_case=False,
                             eta_l=0.1, eta_g=1.0, hparams={"beta": 2.0})
    with pytest.raises(ValueError) as err:
        compute_rows([(get("momentum.theorem_4_1"), ["fedavgm"], [("full", preset("full", n_clients=4))])], settings)
    assert "\n" not in str(err.value) and "fedavgm" in str(err.value)
