"""A plugin is checked where it is loaded, so that its mistakes are named in one line instead of
surfacing as a traceback from the engine or a silent exit: an algorithm whose ``round`` cannot
take the engine's call, a module that calls ``sys.exit`` on import, a bound beyond a float's range."""
import textwrap

import pytest

from algorithms.registry import load_plugin, register
from verify.cli import main
from verify.theorems.delay import BoundSpec, evaluate

WRONG_ROUND = textwrap.dedent('''
    from dataclasses import dataclass
    import algorithms
    from algorithms.fedavg import FedAvg

    @dataclass(frozen=True, repr=False)
    class Short(FedAvg):
        name = "short-round"

        def round(self, state):
            return state

    algorithms.register(Short)
''')


def test_an_algorithm_whose_round_cannot_take_the_engines_call_is_refused_when_registered(tmp_path):
    path = tmp_path / "short.py"
    path.write_text(WRONG_ROUND)
    with pytest.raises(ValueError, match=r"Short.round\(self, state\) cannot take the engine's call "
                                         r"round\(state, problem, r\)"):
        load_plugin(str(path))


def test_an_algorithm_without_init_is_refused_when_registered():
    from algorithms.base import Algorithm

    class NoInit(Algorithm):
        name = "no-init"

        def round(self, state, problem, r):
            return state

    with pytest.raises(ValueError, match="NoInit does not define init"):
        register(NoInit)


def test_a_plugin_that_exits_on_import_is_an_error_not_a_silent_success(tmp_path, capsys):
    path = tmp_path / "leaves.py"
    path.write_text("import sys\nsys.exit(0)\n")
    assert main(["check", "--plugin", str(path), "--no-progress", "-o", str(tmp_path / "out")]) == 2
    assert "it called sys.exit(0) while being imported" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_bound_beyond_a_floats_range_is_named():
    spec = BoundSpec("mine.huge", lambda constants: 10**400, frozenset({"constants"}))
    with pytest.raises(ValueError, match=r"bound 'mine.huge' returned 100000000000…\(401 digits\), beyond"):
        evaluate(spec, constants=1.0)


def test_a_measure_that_returns_nan_on_a_finished_run_is_named_not_judged_as_divergence(tmp_path, capsys):
    path = tmp_path / "nan_measure.py"
    path.write_text(textwrap.dedent('''
        import math
        from verify.theorems import register, user_theorem

        register(user_theorem(lambda constants, tau_max: 100.0, name="mine.nan_measure", covers=("fedavg",),
                              measure=lambda history, problem: math.nan))
    '''))
    argv = ["check", "--theorem", "mine.nan_measure", "--plugin", str(path), "--algorithms", "fedavg", "--patterns",
            "P1", "-T", "10", "-N", "4", "-K", "1", "--seeds", "2", "--no-progress", "-o", str(tmp_path / "out")]
    try:
        assert main(argv) == 2
    finally:
        from verify import theorems

        theorems.THEOREMS.pop("mine.nan_measure", None)
    err = capsys.readouterr().err
    assert "measured NaN on seed 0, a run that did not stop" in err and "inf" not in err
