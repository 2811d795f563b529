"""An option a command, or an experiment kind, does not use is a one-line error naming it (exit 2),
never silently ignored: each experiment kind is a sub-command of its own whose --help lists only
its options; `delays --trace` honours --rounds (its first T rounds, refused beyond its length) and
refuses --reps and --seed, which only the presets' Monte-Carlo traces use."""
import numpy as np
import pytest

from participation import Trace
from verify.cli import build_parser, main


def _one_line_error(capsys, *words):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedverify: error: ") and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("argv, words", [
    (["experiment", "delays", "--patterns", "P1"], ("experiment delays does not take --patterns",
                                                    "an option of experiment fedsum")),
    (["experiment", "delays", "--dataset", "mnist"], ("experiment delays does not take --dataset",)),
    (["experiment", "delays", "--device", "cpu"], ("experiment delays does not take --device",)),
    (["experiment", "delays", "--quick"], ("does not take --quick", "an option of experiment tightness")),
    (["experiment", "tightness", "--seed", "3"], ("experiment tightness does not take --seed",
                                                  "an option of experiment fedsum and delays")),
    (["experiment", "fedsum", "--regimes", "fixed"], ("experiment fedsum does not take --regimes",)),
    (["experiment", "fedsum", "--tune-rounds", "5"], ("--tune-rounds describes the tuning runs: give --tune",)),
    (["experiment", "fedsum", "--tune", "--eta-g", "2"], ("--tune chooses the rates itself", "--eta-g")),
    (["experiment", "fedsum", "--dataset", "digits", "--root", "data"], ("--root: digits ships with its package",)),
])
def test_an_option_the_kind_does_not_use_is_named(tmp_path, capsys, argv, words):
    assert main([*argv, "-o", str(tmp_path / "out")]) == 2
    _one_line_error(capsys, *words)
    assert not (tmp_path / "out").exists()


def test_a_lone_eta_g_is_refused_by_delays(tmp_path, capsys):
    """--eta-g is the server step size of the 'given' regime, which --eta-l starts."""
    assert main(["experiment", "delays", "--eta-g", "2", "-o", str(tmp_path / "out")]) == 2
    _one_line_error(capsys, "--eta-g", "give it with --eta-l")


def _options(argv) -> set:
    sub = build_parser()
    for word in argv:
        sub = sub._subparsers._group_actions[0].choices[word]
    return {s for a in sub._actions for s in a.option_strings}


def test_each_kind_lists_only_its_options():
    delays, fedsum, tightness = (_options(["experiment", k]) for k in ("delays", "fedsum", "tightness"))
    assert {"--regimes", "--rate", "--problem", "--eta-l", "--eta-g", "--long"} <= delays
    assert not {"--dataset", "--patterns", "--tune", "--device", "--plugin", "--quick", "--alpha"} & delays
    assert {"--dataset", "--patterns", "--tune", "--device", "--long"} <= fedsum
    assert not {"--regimes", "--quick"} & fedsum
    assert tightness == {"-h", "--help", "--rounds", "-T", "--quick", "--no-progress", "--output", "-o", "--long"}


def test_the_help_of_a_kind_is_its_own(capsys):
    with pytest.raises(SystemExit):
        main(["experiment", "delays", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: fedverify experiment delays") and "--regimes" in out
    assert "--dataset" not in out and "--patterns" not in out and "--quick" not in out


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.npz"
    Trace(np.random.default_rng(0).random((200, 10)) < 0.3).save(path)
    return path


def test_delays_of_a_trace_honour_rounds(trace_file, capsys):
    assert main(["delays", "--trace", str(trace_file), "-T", "50"]) == 0
    out = capsys.readouterr().out
    assert "its first 50 of 200 rounds: T=50 rounds" in out.splitlines()[0]


def test_delays_of_a_trace_refuse_more_rounds_than_it_holds(trace_file, capsys):
    assert main(["delays", "--trace", str(trace_file), "-T", "500"]) == 2
    _one_line_error(capsys, "--rounds 500: t.npz holds only 200 rounds")


@pytest.mark.parametrize("extra, words", [(["--reps", "5"], "--reps applies only to the presets"),
                                          (["--seed", "1"], "--seed applies only to the presets")])
def test_delays_of_a_trace_refuse_the_monte_carlo_options(trace_file, capsys, extra, words):
    assert main(["delays", "--trace", str(trace_file), *extra]) == 2
    _one_line_error(capsys, words)


def test_delays_list_takes_no_other_option(capsys):
    assert main(["delays", "--list", "-T", "5"]) == 2
    _one_line_error(capsys, "--list prints the presets and stops: it takes no --rounds")


def test_mc_max_reps_without_stderr_is_refused(capsys):
    assert main(["mc", "P1", "--reps", "10", "--max-reps", "100"]) == 2
    _one_line_error(capsys, "--max-reps bounds the replicates of --stderr")
