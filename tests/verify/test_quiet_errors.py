"""One-line errors are not preceded by numpy warnings or two-line Python warnings, and a file that
is not a run record is called so (not "cut off")."""
import subprocess
import sys
from pathlib import Path

import pytest

from verify.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _stderr(argv):
    done = subprocess.run([sys.executable, "-m", "verify", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("argv, fragment", [
    (["mc", "P1", "-T", "10", "--stderr", "1", "--max-reps", "1"], "max_reps must be at least 2"),
    (["check", "--theorem", "momentum.theorem_4_1", "-N", "4", "-T", "10", "--seeds", "2", "--set",
      "stages=1e308,1e308", "--no-progress"], "is too large"),
])
def test_no_warning_before_the_one_line_error(argv, fragment, tmp_path):
    code, err = _stderr([*argv, *(["-o", str(tmp_path)] if argv[0] == "check" else [])])
    assert code == 2 and err.count("\n") == 1 and fragment in err and "Warning" not in err


def test_a_file_that_is_not_a_record_is_called_so(tmp_path, capsys):
    path = tmp_path / "notes.jsonl"
    path.write_text("# my notes\nnot json at all")
    assert main(["check-run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a fedverify run record" in err and "cut off" not in err


@pytest.mark.slow
def test_a_cut_off_record_warns_in_one_line(tmp_path):
    from verify.records import RunRecorder

    path = tmp_path / "cut.jsonl"
    constants = {"L": 1.0, "sigma2": 0.1, "delta_f": 1.0, "F0": 1.0}
    with RunRecorder(path, 2, algorithm="fedsum", local_steps=1, step_sizes={"eta_g": 1.0, "eta_l": 0.01},
                     constants=constants) as rec:
        for t in range(3):
            rec.record_round(t, [0, 1], [0, 1], grad_norm2=0.5)
    with open(path, "a") as f:
        f.write('{"round": 3, "sel')
    code, err = _stderr(["check-run", str(path)])
    assert code == 0 and err == ("fedverify: warning: cut.jsonl: the last line is cut off (17 bytes, a run stopped "
                                 "mid-write); kept the 3 complete rounds\n")


def test_an_event_log_naming_a_device_twice_is_refused(tmp_path):
    from participation.events import load_events

    path = tmp_path / "events.json"
    path.write_text('{"format": "fedverify-events", "devices": {"a": [[0, 1]], "a": [[5, 1]]}}')
    with pytest.raises(ValueError, match="'a' appears twice"):
        load_events(path)


@pytest.mark.parametrize("mask_shape", [(5, 1), (1, 4)])
def test_delays_of_a_one_client_or_one_round_trace(tmp_path, capsys, mask_shape):
    import numpy as np

    from participation import Trace

    path = tmp_path / "t.npz"
    Trace(np.ones(mask_shape, dtype=bool)).save(path)
    assert main(["delays", "--trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tau_max=0" in out.replace(" ", "") or "tau_max 0" in out or "tau_max is 0" in out


def test_clients_with_a_data_set_is_refused_not_ignored(capsys):
    assert main(["delays", "--trace", "mobiperf", "--clients", "5"]) == 2
    assert "sets its own clients" in capsys.readouterr().err


def test_delays_reads_the_participation_of_a_run_record(tmp_path, capsys):
    import numpy as np

    from participation import delay_metrics
    from verify.records import RunRecorder

    mask = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], dtype=bool)
    path = tmp_path / "run.jsonl"
    with RunRecorder(path, 3, algorithm="fedavg", local_steps=1) as rec:
        for t, row in enumerate(mask):
            rec.record_round(t, [0, 1, 2], np.flatnonzero(row), grad_norm2=1.0)
    assert main(["delays", "--trace", str(path)]) == 0
    m = delay_metrics(mask)
    out = capsys.readouterr().out
    assert "run record" in out and f"tau_max={m.tau_max}" in out and f"tau_avg={m.tau_avg:.4f}" in out


@pytest.mark.slow
def test_check_paper_says_up_front_how_many_runs(tmp_path):
    code, err = _stderr(["check", "--paper", "momentum", "-T", "10", "-N", "4", "--seeds", "2", "--no-progress",
                         "-o", str(tmp_path)])
    assert code == 0 and err.startswith("fedverify: check: 4 theorems of momentum, ") and " runs of 10 rounds" in err


def test_mc_to_a_precision_says_up_front_its_longest_time(monkeypatch, capsys):
    import verify.cli.commands as commands
    from participation.patterns import preset

    monkeypatch.setattr(commands, "_mc_seconds", lambda pattern, rounds, reps, method="auto": reps * 0.01)
    commands.announce_mc("P1", preset("P1"), 2000, 1 << 20, stderr=1e-6)
    err = capsys.readouterr().err
    assert err.startswith("fedverify: P1: until both standard errors are ≤ 1e-06, at most 1048576 traces")
    assert "at most about" in err
