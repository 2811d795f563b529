"""The worst-case column of a check row: measured ≤ worst case ≤ bound on a noise-free run, a
reason wherever there is no value, the "outside the class" verdict for a run that breaks the
class's constants, and the same worst case from ``check`` and from ``check-run`` on its record."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import algorithms
from algorithms.problems import Quadratic
from participation import Trace
from verify.checking import check
from verify.cli import main
from verify.constants import estimate_constants
from verify.records.checks import check_run
from verify.records import record_from_history
from verify.theorems import runner
from verify.verdicts import OUTSIDE_CLASS, WorstCaseColumn, beyond_worst_case

ROOT = Path(__file__).resolve().parents[2]
N, T, K = 3, 8, 2
#: Active sets of a short trace with a client missing for several rounds (τ_max = 4).
TRACE = Trace.from_sets([[0, 1], [2], [0], [1, 2], [0], [0, 1, 2], [1], [2]], N)


def problem(noise_std=0.0):
    return Quadratic.random(N, 4, heterogeneity=1.0, noise_std=noise_std, seed=0)


def true_constants(p):
    return estimate_constants(p).to_constants(local_steps=K, rounds=T, n_clients=N)


@pytest.fixture(scope="module")
def fedsum_b():
    """FedSUM-B at Thm 4.1's step sizes on TRACE, noise-free, with its worst case."""
    p = problem()
    return p, check("fedsum-b", p, TRACE, seeds=1, local_steps=K, worst_case=True)


@pytest.mark.slow
def test_noise_free_row_sits_between_measured_and_bound(fedsum_b):
    _, r = fedsum_b
    wc = r.worst_case
    assert wc.value is not None and wc.reason is None and wc.status == "optimal"
    assert wc.accuracy < 1e-5 and wc.solver == "CLARABEL" and wc.traces == 1
    assert r.measured <= wc.value <= r.bound_value
    assert r.verdict == "holds" and not wc.outside
    assert wc.slack == pytest.approx(r.bound_value / wc.value) and wc.slack > 1
    assert wc.benignness == pytest.approx(wc.value / r.measured) and wc.benignness >= 1
    assert "smooth" in wc.function_class and wc.label == "worst case on the trace"
    assert set(wc.constants) == {"L", "delta_f", "F0"}
    row = r.to_dict()["worst_case"]
    assert row["value"] == wc.value and row["class"] == wc.function_class and row["outside"] is False


def test_noisy_row_says_why():
    r = check("fedsum-b", problem(noise_std=0.5), TRACE, seeds=2, local_steps=K, worst_case="auto")
    assert r.worst_case.value is None and r.worst_case.reason == runner.NOISY
    assert r.worst_case.reason.startswith("σ² > 0")


def test_off_and_uncovered_rows_say_why():
    p = problem()
    off = check("fedsum-b", p, TRACE, seeds=1, local_steps=K)          # the library's default: off
    assert off.worst_case.value is None and off.worst_case.reason.startswith("turned off")
    other = check("mifa", p, TRACE, seeds=1, local_steps=K, worst_case=True)
    assert other.worst_case.value is None and other.worst_case.reason.startswith("not covered")
    assert "mifa" in other.worst_case.reason


def test_over_budget_row_says_how_long(monkeypatch):
    monkeypatch.setattr(runner, "AUTO_SECONDS", 1e-6)
    r = check("fedsum-b", problem(), TRACE, seeds=1, local_steps=K, worst_case="auto")
    assert r.worst_case.value is None and r.worst_case.reason.startswith("would take about")
    assert r.worst_case.predicted > 1e-6


def test_worst_case_mode_is_validated():
    with pytest.raises(ValueError, match="worst_case must be 'auto', True or False, got 'yes'"):
        check("fedsum-b", problem(), TRACE, seeds=1, local_steps=K, worst_case="yes")


def test_beyond_worst_case_needs_a_certified_value():
    column = WorstCaseColumn(value=1.0, accuracy=1e-6)
    assert not beyond_worst_case(1.0 + 5e-6, column)          # within 10 × the solver's accuracy
    assert beyond_worst_case(1.0 + 1e-4, column)
    assert not beyond_worst_case(5.0, WorstCaseColumn.missing("σ² > 0"))
    assert not beyond_worst_case(5.0, WorstCaseColumn(value=1.0, accuracy=None))


@pytest.mark.slow
@pytest.mark.parametrize("constant", ["F0", "delta_f"])
def test_too_small_constant_puts_the_run_outside_the_class(fedsum_b, constant):
    """The same run (FedSUM-B at its true constants' step sizes) judged with a constant ten times
    too small: its measured side is above the certified worst case of the smaller class."""
    p, right = fedsum_b
    assert right.measured <= right.worst_case.value
    alg = algorithms.get("fedsum-b", eta_l=right.step_sizes["eta_l"], eta_g=right.step_sizes["eta_g"], local_steps=K)
    true = true_constants(p)
    wrong = dataclasses.replace(true, **{constant: getattr(true, constant) / 10})
    r = check(alg, p, TRACE, seeds=1, constants=wrong, step_sizes="given", worst_case=True)
    assert r.measured == pytest.approx(right.measured, rel=1e-12)
    assert r.measured > r.worst_case.value
    assert r.verdict == OUTSIDE_CLASS and r.label.startswith(OUTSIDE_CLASS) and r.worst_case.outside
    note = next(n for n in r.notes if n.startswith("outside the class:"))
    symbol = {"F0": "F_0", "delta_f": "Δ_f"}[constant]
    assert "as given: " in note and f"{symbol} = {getattr(wrong, constant):.4g}" in note
    assert "the problem's: " in note and f"{symbol} = {getattr(true, constant):.4g}" in note


@pytest.mark.slow
def test_check_run_on_the_record_gets_the_same_worst_case(fedsum_b, tmp_path):
    p, _ = fedsum_b
    pc = p.constants()
    paths = []

    def write(history, trace, algorithm, seed):
        steps = {k: v for k, v in algorithm.hparams.items() if k.startswith("eta")}
        paths.append(record_from_history(
            tmp_path / f"run_s{seed}.jsonl", history, trace, algorithm=algorithm.name,
            local_steps=algorithm.local_steps, step_sizes=steps, seed=int(seed), problem="quadratic",
            constants={"L": pc.L, "sigma2": pc.sigma2, "delta_f": pc.delta_f, "F0": pc.F0}))

    direct = check("fedavg", p, TRACE, seeds=1, local_steps=K, worst_case=True, on_run=write)
    judged = check_run(paths, "fedsum.theorem_4_1", worst_case=True)
    assert direct.worst_case.value is not None
    assert judged.worst_case.value == pytest.approx(direct.worst_case.value, rel=1e-9)
    assert judged.worst_case.slack == pytest.approx(direct.worst_case.slack, rel=1e-9)
    assert judged.measured == pytest.approx(direct.measured, rel=1e-12) and judged.verdict == direct.verdict
    assert check_run(paths, "fedsum.theorem_4_1").worst_case.reason.startswith("turned off")
    # F_0 ten times too small contradicts the record's round 0 (F_0 ≥ ‖∇f(x_0)‖²): refused, naming both
    with pytest.raises(ValueError, match=rf"F0 = {pc.F0 / 10!r} is below ‖∇f\(x_0\)‖² = "
                                         rf"{float(direct.first_run.grad_norm2[0])!r} recorded in round 0"):
        check_run(paths, "fedsum.theorem_4_1", constants={"F0": pc.F0 / 10}, worst_case=True)


@pytest.mark.slow
def test_expectation_row_is_the_mean_of_per_trace_worst_cases():
    from participation.patterns import Uniform

    r = check("fedsum-b", problem(), Uniform(N, 1), "fedsum.corollary_4_1", seeds=2, rounds=4, local_steps=1,
              worst_case=True)
    assert r.worst_case.traces == 2 and r.worst_case.label.startswith("mean of per-trace worst cases")
    assert r.measured <= r.worst_case.value <= r.bound_value


@pytest.mark.slow
def test_cli_check_shows_the_column_and_check_run_too(tmp_path):
    out = tmp_path / "out"
    args = ["check", "--clients", N, "-T", T, "-K", K, "--noise-free", "--seeds", 1, "--patterns", "P1",
            "--algorithms", "fedsum-b", "fedavg", "-o", out, "--record", tmp_path / "rec", "--no-progress"]
    assert main([str(a) for a in args]) == 0
    summary = json.loads((out / "check.json").read_text())
    assert summary["problem"]["noise_free"] is True
    for row in summary["rows"]:
        assert row["measured"] <= row["worst_case"] <= row["bound"]
        assert row["slack"] == pytest.approx(row["bound"] / row["worst_case"])
        assert row["result"]["worst_case"]["status"] in ("optimal", "optimal_inaccurate")
    assert "worst_case" in (out / "check.csv").read_text().splitlines()[0].split(",")
    record = sorted((tmp_path / "rec").glob("fedsum-b_*.jsonl"))
    command = [sys.executable, "-m", "verify", "check-run", str(record[0]), "--json", str(tmp_path / "r.json")]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert "worst case " in proc.stdout and "slack bound/worst" in proc.stdout
    judged = json.loads((tmp_path / "r.json").read_text())["worst_case"]["value"]
    fedsum_row = next(r for r in summary["rows"] if r["algorithm"] == "fedsum-b")
    assert judged == pytest.approx(fedsum_row["worst_case"], rel=1e-9)


@pytest.mark.slow
def test_cli_no_worst_case_turns_it_off(tmp_path, capsys):
    args = ["check", "--clients", N, "-T", T, "-K", K, "--noise-free", "--seeds", 1, "--patterns", "P1",
            "--algorithms", "fedsum-b", "-o", tmp_path, "--no-worst-case", "--no-progress"]
    assert main([str(a) for a in args]) == 0
    stdout = capsys.readouterr().out
    assert "worst" not in stdout.splitlines()[2] and "worst case not computed (every row): turned off" in stdout
    row = json.loads((tmp_path / "check.json").read_text())["rows"][0]
    assert row["worst_case"] is None and row["worst_case_reason"].startswith("turned off")


def test_cli_noise_free_refuses_a_mini_batch_problem(capsys):
    code = main(["check", "--problem", "logistic-synthetic", "--noise-free", "--clients", "3", "-T", "4"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--noise-free" in err[0] and "logistic-synthetic" in err[0]


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
def test_a_noisy_check_imports_no_worst_case_engine():
    code = ("import sys; from algorithms.problems import Quadratic; from participation import Trace; "
            "from verify.checking import check; "
            "p = Quadratic.random(3, 4, noise_std=0.5, seed=0); "
            "t = Trace.from_sets([[0], [1, 2], [0, 2]], 3); "
            "r = check('fedsum-b', p, t, seeds=2, worst_case='auto'); "
            "print(r.worst_case.reason.startswith('σ² > 0'), 'verify.worst_case' in sys.modules, "
            "'PEPit' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "False", "False"]
