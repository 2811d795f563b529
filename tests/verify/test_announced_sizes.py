"""Every experiment kind and `delays` say how long their work will take before starting it, and
refuse work estimated above six hours without --long; the estimate comes from short timed runs,
never from a full-size one. The sizes here would take hours to days: none of them is run."""
import pytest

from participation.budget import ENV_MEMORY
from verify import checking
from verify.studies import delay_study, experiment, tightness_study
from verify.cli import build_parser, main
from verify.cli.commands import LONG_SECONDS


@pytest.fixture
def checked_rounds(monkeypatch):
    """The rounds of every check the command runs (its timing included)."""
    seen = []
    check = checking.check

    def spy(algorithm, problem, trace, *args, **kwargs):
        seen.append(trace.n_rounds)
        return check(algorithm, problem, trace, *args, **kwargs)

    monkeypatch.setattr(checking, "check", spy)
    return seen


def _never(*args, **kwargs):
    raise AssertionError("the work itself started")


@pytest.mark.slow
def test_delays_at_days_is_refused_after_a_short_timing(tmp_path, capsys, monkeypatch, checked_rounds):
    monkeypatch.setenv(ENV_MEMORY, "100000")          # the time is refused here, not the memory
    monkeypatch.setattr(delay_study, "run", _never)
    assert main(["experiment", "delays", "-T", "100000", "-N", "10000", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "experiment delays: fedsum on quadratic (N=10000, K=2, T=100000)" in err
    assert "more than the 6.0 h a command starts on its own; pass --long" in err
    assert checked_rounds and max(checked_rounds) <= 64          # timed on short checks only
    assert not (tmp_path / "out" / "delays.json").exists()


def test_delays_beyond_the_memory_limit_is_refused_before_building_anything(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(ENV_MEMORY, "4")
    monkeypatch.setattr(delay_study, "estimate_seconds", _never)
    assert main(["experiment", "delays", "-T", "100000", "-N", "10000", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "experiment delays at N=10000, K=2, T=100000" in err and "needs about" in err


def test_delays_announces_its_time_before_starting(tmp_path, capsys, monkeypatch):
    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(delay_study, "run", stop)
    assert main(["experiment", "delays", "-N", "6", "-T", "20", "--seeds", "0", "1", "-o", str(tmp_path)]) == 130
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("fedverify: experiment delays: fedsum on quadratic (N=6, K=2, T=20)")
    assert ", about " in first


def test_the_delay_estimate_scales_the_timed_checks(monkeypatch):
    """With a clock that charges each check a cost per round and per active client-round, the
    estimate is the sum of those costs over the study's checks."""
    from participation import Trace
    from verify.choices import build_problem

    clock = [0.0]
    per_round, per_cell = 1e-3, 1e-5
    monkeypatch.setattr("time.perf_counter", lambda: clock[0])

    def fake_check(algorithm, problem, trace, theorem, seeds, **kwargs):
        mask = trace.mask
        clock[0] += mask.shape[0] * per_round + mask.sum() * per_cell

    monkeypatch.setattr(checking, "check", fake_check)
    n, rounds, rate = 50, 4000, 0.2
    members = delay_study.delay_family(n, rate, rounds, 0, fleet_subsets=0)
    seconds = delay_study.estimate_seconds("fedsum", build_problem("quadratic", n), rounds, members=members,
                                           seeds=[0, 1], regimes=("theorem",))
    exact = sum(rounds * per_round + Trace(delay_study._trace(m, rounds, 0).mask).mask.sum() * per_cell
                for m in members)
    assert seconds == pytest.approx(exact, rel=0.1)


def test_tightness_at_days_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tightness_study, "predicted_seconds", lambda cell: LONG_SECONDS)
    monkeypatch.setattr(tightness_study, "run", _never)
    assert main(["experiment", "tightness", "--quick", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "experiment tightness:" in err and "pass --long" in err


@pytest.mark.slow
def test_fedsum_at_days_is_refused_before_its_first_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(experiment, "estimate_seconds", lambda *args, **kwargs: 2 * LONG_SECONDS)
    monkeypatch.setattr(experiment, "fedsum_experiment", _never)
    argv = ["experiment", "fedsum", "--dataset", "digits", "-N", "4", "--limit", "40", "--algorithms", "fedavg",
            "--patterns", "P1", "-o", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "experiment: 1 runs of 30 rounds on digits (N=4)" in err and "pass --long" in err


@pytest.mark.parametrize("argv", [["delays", "--long"], ["experiment", "delays", "--long"],
                                  ["experiment", "fedsum", "--long"], ["experiment", "tightness", "--long"]])
def test_long_is_an_option_of_every_command_that_refuses_long_work(argv):
    assert build_parser().parse_args(argv).long is True
