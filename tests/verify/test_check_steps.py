"""``check`` at the user's step sizes: ``--eta-l`` with ``--eta-g`` runs every row there, marked †
where the theorem prescribes others; the ``--set eta_l=`` form and a lone ``--eta-l`` are one-line
errors, not a traceback or a step size left to a default."""
import json

import pytest

from verify.cli import main

RUN = ["--algorithms", "fedavg", "fedsum", "--patterns", "P1", "-T", "20", "-N", "4", "-K", "1", "--seeds", "2",
       "--no-progress"]


@pytest.mark.parametrize("argv, words", [(["--set", "eta_l=0.01"], "--set eta_l=...: step sizes are options of their own"),
                                         (["--eta-l", "0.01"], "--eta-l needs --eta-g too")])
def test_step_sizes_given_the_wrong_way_are_one_line(tmp_path, capsys, argv, words):
    assert main(["check", *argv, *RUN, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


@pytest.mark.slow
def test_given_step_sizes_run_every_row_marked(tmp_path, capsys):
    assert main(["check", "--eta-l", "0.01", "--eta-g", "0.5", *RUN, "-o", str(tmp_path / "out")]) == 0
    rows = json.loads((tmp_path / "out" / "check.json").read_text())["rows"]
    assert {r["algorithm"] for r in rows} == {"fedavg", "fedsum"}
    for row in rows:
        assert (row["eta_l"], row["eta_g"]) == (0.01, 0.5) and "†" in row["label"]
