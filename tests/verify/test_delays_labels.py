"""The delays table names every column: which are exact (closed forms) and which Monte-Carlo."""
from verify.cli import main


def test_the_delays_table_labels_its_exact_and_monte_carlo_columns(capsys):
    assert main(["delays", "case3", "-T", "30", "--reps", "3"]) == 0
    intro, header = capsys.readouterr().out.splitlines()[:2]
    assert "exact: the closed form" in intro and "MC: the Monte-Carlo mean ± standard error" in intro
    assert header.split() == ["pattern", "exact", "avg", "MC", "E[tau_avg]", "exact", "max", "MC", "E[tau_max]",
                              "bound", "proof"]
