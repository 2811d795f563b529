"""Work announced at days does not start unless asked for: ``mc`` refuses a size whose announced
time is above six hours without ``--long``, before drawing anything; a preset setting it does not
take is named with the settings it does take."""
import pytest

from participation.patterns import preset
from verify.cli import build_parser, main


def test_mc_refuses_work_announced_at_days_without_long(capsys):
    assert main(["mc", "P1", "-T", "100000", "--reps", "100000000", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "days, more than the 6.0 h a command starts on its own; pass --long" in err


def test_long_is_an_option_of_mc():
    assert build_parser().parse_args(["mc", "P1", "--long"]).long is True


def test_a_setting_a_preset_does_not_take_is_named_with_those_it_takes():
    with pytest.raises(ValueError, match="preset 'P1' has no setting 'nclients'; it takes n_clients, per_round"):
        preset("P1", nclients=10000)


@pytest.mark.slow
def test_check_at_a_size_of_days_is_refused_after_a_short_timing(tmp_path, capsys):
    """100,000 clients and rounds: the estimate times a few runs of a few rounds and scales them (its
    own run is small), and the check, announced at days, does not start without --long."""
    argv = ["check", "--clients", "100000", "-T", "100000", "--seeds", "2", "--no-progress", "-o", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than the 6.0 h a command starts on its own; pass --long" in err
    assert not (tmp_path / "o" / "check.json").exists()


def test_long_is_an_option_of_check():
    assert build_parser().parse_args(["check", "--long"]).long is True
