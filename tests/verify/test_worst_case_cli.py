"""``fedverify worst-case`` and ``verify.worst_case.theorem_bounds``: the theorem's bound beside the exact
worst case at its step sizes, one-line errors before any heavy import, the JSON file."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bounds import Constants, fedsum
from participation import Trace, delay_metrics, preset
from verify.cli import main
from verify.worst_case.theorem_bounds import EXPECTATION_LABEL, against, pattern_for

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["-N", "2", "-K", "1", "-T", "4"]


def _constants(n=2, k=1, t=4):
    return Constants(1.0, 0.0, 1.0, 1.0, n, k, t)


def _trace(n=2, t=4, seed=0):
    return pattern_for("P1", n)[0].sample(t, seed=seed)


# ------------------------------------------------------------------------- the library

def test_fedsum_theorem_4_1_uses_its_prescribed_steps_and_bound():
    trace = _trace()
    m = delay_metrics(trace)
    r = against("fedsum.theorem_4_1", "fedsum-b", trace, _constants())
    expected = fedsum.theorem_4_1(_constants(), m.tau_max, m.tau_avg)
    assert r.step_sizes == {"eta_l": expected.step_sizes["eta_l"], "eta_g": expected.step_sizes["eta_g"]}
    assert r.bound == pytest.approx(expected.value)
    # σ² = 0: 20 τ̂ (L Δ_f + F_0)/T
    assert r.bound == pytest.approx(20 * max(1, m.tau_max) * 2 / 4)
    assert r.worst_case is not None and 0 < r.worst_case < r.bound
    assert r.ratio == pytest.approx(r.bound / r.worst_case)
    assert r.steps == "prescribed" and r.covered and r.label == "worst case on the trace"
    d = r.as_dict()
    assert d["worst_case"] == r.worst_case and d["bound"] == r.bound and d["ratio"] == r.ratio
    json.dumps(d)


def test_given_step_sizes_change_the_worst_case_and_are_reported():
    trace = _trace()
    prescribed = against("fedsum.theorem_4_1", "fedsum-b", trace, _constants())
    larger = against("fedsum.theorem_4_1", "fedsum-b", trace, _constants(), step_sizes={"eta_l": 0.3})
    assert larger.steps == "given" and larger.step_sizes["eta_l"] == 0.3
    assert larger.step_sizes["eta_g"] == prescribed.step_sizes["eta_g"]
    assert larger.worst_case != pytest.approx(prescribed.worst_case, rel=1e-3)
    assert any("step sizes given" in n for n in larger.notes)


def test_expectation_theorem_averages_per_trace_worst_cases():
    traces = [_trace(seed=s) for s in range(2)]
    r = against("fedsum.corollary_4_1", "fedsum-b", traces, _constants(), expected_tau=(2.0, 1.5))
    assert r.label == EXPECTATION_LABEL
    assert r.worst_case == pytest.approx(np.mean([c.worst_case.value for c in r.per_trace]))
    assert r.bound == pytest.approx(fedsum.corollary_4_1(_constants(), 2.0, 1.5).value)
    assert len(r.per_trace) == 2


def test_reference_algorithm_is_marked_not_covered():
    r = against("fedsum.theorem_4_1", "fedavg", _trace(), _constants())
    assert not r.covered and any("for reference" in n for n in r.notes)


@pytest.mark.parametrize("theorem, algorithm, traces, message", [
    ("cafed.theorem_1", "fedsum-b", None, "no worst case"),
    ("fedsum.lemma_c6", "fedsum-b", None, "no comparison"),
    ("fedsum.theorem_9", "fedsum-b", None, "unknown theorem"),
    ("fedsum.theorem_4_1", "fedgm", None, "not 'fedgm'"),
    ("fedsum.theorem_4_1", "fedsum-b", 2, "conditional on the trace"),
    ("momentum.theorem_4_1", "fedgm", None, "full participation"),
])
def test_errors_name_the_bad_value(theorem, algorithm, traces, message):
    trace = _trace() if traces is None else [_trace(seed=s) for s in range(traces)]
    with pytest.raises(ValueError, match=message) as err:
        against(theorem, algorithm, trace, _constants(), sigma_g2=1.0)
    assert "\n" not in str(err.value)
    if "unknown" in message:
        assert "fedsum.theorem_4_1" in str(err.value) and "momentum.theorem_4_6" in str(err.value)


def test_size_limit_refuses_before_solving():
    big = Trace(np.ones((40, 6), dtype=bool))
    with pytest.raises(ValueError, match="above the limit of 1 s"):
        against("fedsum.theorem_4_1", "fedsum", big, Constants(1.0, 0.0, 1.0, 1.0, 6, 3, 40), max_seconds=1)


@pytest.mark.slow
def test_momentum_theorem_4_1_on_full_participation():
    full = Trace(np.ones((4, 2), dtype=bool))
    r = against("momentum.theorem_4_1", "fedavgm", full, _constants(), sigma_g2=1.0, hparams={"beta": 0.5})
    assert r.covered and r.worst_case is not None and r.bound >= r.worst_case
    assert r.function_class.heterogeneity == 1.0 and r.function_class.F0 is None
    assert r.hparams["beta"] == 0.5


# ------------------------------------------------------------------------- the command

def test_command_prints_value_status_class_bound_and_ratio(capsys):
    assert main(["worst-case", "fedsum-b", *SMALL]) == 0
    out = capsys.readouterr().out
    for piece in ("worst case of (1/T)", "status optimal", "solver CLARABEL", "accuracy", "class: each f_i 1-smooth",
                  "relaxation: f* relaxed", "bound (fedsum.theorem_4_1", "bound / worst case:"):
        assert piece in out, piece
    assert "P1 (1 of 2 clients a round, seed 0)" in out


def test_json_is_written_with_the_result(tmp_path, capsys):
    path = tmp_path / "out" / "wc.json"
    assert main(["worst-case", "fedsum-b", *SMALL, "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["command"] == "worst-case" and data["status"] == "optimal"
    assert data["worst_case"] > 0 and data["bound"] > data["worst_case"]
    assert data["ratio"] == pytest.approx(data["bound"] / data["worst_case"])
    assert f"wrote {path}" in capsys.readouterr().out


def test_trace_file_and_run_record_are_read(tmp_path, capsys):
    trace = Trace.from_sets([[0], [1], [0, 1], [1]], 2)
    path = tmp_path / "t.csv"
    trace.save(path)
    assert main(["worst-case", "fedsum-b", "--trace", str(path), "-K", "1"]) == 0
    out = capsys.readouterr().out
    assert "t.csv" in out and "τ_max=" in out and "N=2" in out and "T=4" in out


@pytest.mark.parametrize("argv, message", [
    (["mifa"], "no worst case for algorithm 'mifa'"),
    (["fedfoo"], "no worst case for algorithm 'fedfoo'"),
    (["fedsum-b", "--trace", "missing.npz"], "does not exist"),
    (["fedsum-b", "--theorem", "cafed.theorem_2"], "has no worst case"),
    (["fedsum-b", "--pattern", "P9"], "unknown pattern 'P9'"),
    (["fedsum-b", "--eta-l", "-1"], "must be positive"),
    (["fedsum-b", "--L", "abc"], "expected a number"),
    (["fedsum-b", "--trace", "x.npz", "--pattern", "P1"], "exclude each other"),
    (["fedsum-b", "-N", "6", "-K", "3", "-T", "40"], "above the limit"),
    (["fedsum-b", "--per-round", "100"], "--per-round 100: exceeds the number of clients, 3"),
    (["fedsum-b", "--per-round", "2", "--pattern", "full"], "--per-round 2: preset full takes no clients-a-round"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, monkeypatch):
    monkeypatch.setenv("FEDVERIFY_WORST_CASE_SECONDS", "5")
    assert main(["worst-case", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fedverify: error:") and message in lines[0], captured.err


@pytest.mark.parametrize("argv", [["worst-case", "mifa"], ["worst-case", "fedsum-b", "--trace", "missing.npz"],
                                  ["worst-case", "fedsum-b", "--theorem", "logit.theorem_1"]])
def test_name_and_path_mistakes_are_answered_before_torch(argv):
    code = ("import sys\nfrom verify.cli import main\nrc = main(%r)\nprint(rc, 'torch' in sys.modules, "
            "'PEPit' in sys.modules)" % (argv,))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.split() == ["2", "False", "False"]
    assert len(result.stderr.strip().splitlines()) == 1


def test_above_two_seconds_the_predicted_time_is_announced(capsys, monkeypatch):
    from verify.worst_case import theorem_bounds as module
    from verify.worst_case.programme import Size

    real = module.refuse_above_limit

    def slow(*args, **kwargs):
        return [Size(s.gram, s.constraints, 3.0) for s in real(*args, **kwargs)]

    monkeypatch.setattr(module, "refuse_above_limit", slow)
    assert main(["worst-case", "fedsum-b", *SMALL]) == 0
    err = capsys.readouterr().err
    assert err.startswith("fedverify: worst-case: 1 programme(s)") and "about 3" in err


@pytest.mark.slow
def test_best_step_is_printed_beside_the_prescribed(capsys):
    assert main(["worst-case", "fedsum-b", *SMALL, "--best-step"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("best η_l"))
    assert "prescribed η_l" in line and "solves" in line


@pytest.mark.slow
def test_default_momentum_on_partial_participation_is_theorem_4_6(capsys):
    assert main(["worst-case", "fedavgm", *SMALL, "--traces", "2", "--set", "beta=0.5"]) == 0
    out = capsys.readouterr().out
    assert "theorem: momentum.theorem_4_6" in out and EXPECTATION_LABEL in out


def test_a_momentum_hyper_parameter_the_algorithm_does_not_take_is_named(capsys):
    assert main(["worst-case", "fedgm", "--set", "nope=1", "-T", "4"]) == 2
    assert "fedgm has no hyper-parameter 'nope'" in capsys.readouterr().err


def test_rounds_with_a_trace_file_are_an_error_not_ignored(tmp_path, capsys):
    import numpy as np

    from participation import Trace

    path = tmp_path / "t.npz"
    Trace(np.array([[1, 1, 0], [0, 1, 1]], dtype=bool)).save(path)
    assert main(["worst-case", "fedsum-b", "--trace", str(path), "-T", "4"]) == 2
    assert "-T 4 with --trace: a trace file has its own number of rounds" in capsys.readouterr().err
