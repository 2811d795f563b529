"""The bench row of mistake latency: a mistyped theorem and a missing trace file against
`fedverify --help`, each in a fresh interpreter. The tests check what the row runs and reports,
never a time."""
import subprocess

import pytest

from verify import bench
from verify.bench import mistakes
from verify.bench.rows import Ratio


@pytest.mark.slow
def test_the_row_times_each_mistake_and_the_help():
    row = mistakes.mistake_latency_ratio(quick=True)
    assert row.name == "mistake latency" and row.baseline == "fedverify --help"
    assert row.baseline_seconds > 0 and row.fast_seconds > 0
    assert "check --theorem fedsum.theorem_41: " in row.note and "check --patterns missing.npz: " in row.note
    assert "python -c pass" in row.note and "NOT answered" not in row.note


def test_a_mistake_not_answered_as_one_is_said_so(monkeypatch):
    """A command line that ran (exit 0) instead of being refused is flagged in the note."""
    def fake(argv, folder):
        return 0.01, subprocess.CompletedProcess(argv, 0 if "missing.npz" in argv else 2, "",
                                                 "fedverify: error: unknown theorem 'fedsum.theorem_41'; did you mean "
                                                 "fedsum.theorem_4_1? (fedverify bound --list names them all)\n")

    monkeypatch.setattr(mistakes, "_run", fake)
    row = mistakes.mistake_latency_ratio(repeats=1)
    assert "check --patterns missing.npz: 10.0 ms (NOT answered as a mistake: exit 0)" in row.note
    assert "check --theorem fedsum.theorem_41: 10.0 ms;" in row.note


def test_the_bench_table_holds_the_row(monkeypatch):
    from verify.bench import checks, worst_case

    row = Ratio("mistake latency", "w", 0.05, 0.9, baseline="fedverify --help")
    for name in ("delay_metrics_ratio", "cnn_local_step_ratio", "flower_ratio"):
        monkeypatch.setattr(bench, name, lambda quick=False, batch=None: bench.Skipped("x", "not run here"))
    for name in ("monte_carlo_ratios", "training_round_ratios", "gpu_ratios"):
        monkeypatch.setattr(bench, name, lambda quick=False, workers=1: [])
    monkeypatch.setattr(checks, "batch_ratios", lambda quick=False: [])
    monkeypatch.setattr(worst_case, "worst_case_ratios", lambda quick=False: [])
    monkeypatch.setattr(mistakes, "mistake_latency_ratio", lambda quick=False: row)
    assert row in bench.run_all(quick=True)
    assert "mistake latency:" in bench.report(quick=True)
