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


def _plain_record(tmp_path, name="run.jsonl", seed=0):
    from verify.records import RunRecorder

    path = tmp_path / name
    with RunRecorder(path, 3, algorithm="fedavg", local_steps=1, seed=seed,
                     constants={"L": 1.0, "sigma2": 0.1, "delta_f": 1.0, "F0": 1.0}) as rec:
        for t in range(5):
            rec.record_round(t, [0, 1], [0, 1], grad_norm2=1.0 / (t + 1 + seed), loss=1.0 / (t + 1))
    return path


def _measure_plugin(tmp_path, name, measure, **options):
    path = tmp_path / f"{name.replace('.', '_')}.py"
    path.write_text(textwrap.dedent(f'''
        import math
        import numpy as np
        from verify.theorems import register, user_theorem

        register(user_theorem(lambda constants, tau_max: 1e-3, name="{name}", covers=("fedavg",),
                              measure=lambda history, problem: {measure}, **{options!r}))
    '''))
    return path


@pytest.mark.parametrize("measure, words", [("None", "returned None (NoneType)"),
                                            ("np.array([1.0, 2.0])", "returned array([1., 2.]) (ndarray)"),
                                            ("math.nan", "measured NaN on run.jsonl")])
def test_a_measure_that_returns_no_number_is_one_line_in_check_run(tmp_path, capsys, measure, words):
    """None or an array was a TypeError traceback from check-run (and check); NaN was judged as a
    run that diverged: 'violated (diverged)'."""
    from verify import theorems

    plugin = _measure_plugin(tmp_path, "mine.odd", measure)
    try:
        assert main(["check-run", str(_plain_record(tmp_path)), "--theorem", "mine.odd", "--plugin", str(plugin),
                     "--no-worst-case"]) == 2
        if measure != "math.nan":
            theorems.THEOREMS.pop("mine.odd", None)
            assert main(["check", "--theorem", "mine.odd", "--plugin", str(plugin), "--algorithms", "fedavg",
                         "--patterns", "P1", "-T", "5", "-N", "4", "-K", "1", "--seeds", "2", "--no-progress",
                         "-o", str(tmp_path / "out")]) == 2
    finally:
        theorems.THEOREMS.pop("mine.odd", None)
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and "diverged" not in err


@pytest.mark.parametrize("options, verdict", [({}, "inconclusive"), ({"nonnegative": True}, "violated")])
def test_a_measure_of_your_own_gets_markovs_limit_only_when_declared_nonnegative(tmp_path, options, verdict):
    """Markov's lower limit holds for a left side that is never negative; a measure of the user's
    own (here a loss decrease, which can be negative) was judged with it all the same."""
    from verify import check_run, theorems

    plugin = _measure_plugin(tmp_path, "mine.decrease", "float(history.loss[0] - history.loss[-1])", **options)
    try:
        load_plugin(str(plugin))
        result = check_run(_plain_record(tmp_path), "mine.decrease")
    finally:
        theorems.THEOREMS.pop("mine.decrease", None)
    assert result.measured == pytest.approx(0.8) and result.verdict == verdict
