"""The fedverify command: output, files, and one-line errors with exit code 2."""
import contextlib
import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bounds import Constants, cafed, fedsum, logit, momentum
from participation import Trace, delay_metrics, preset
from participation.expected import exact_tau_avg, exact_tau_max, monte_carlo, paper_tau_max_bound
from verify import choices, cli
from verify.cli import main
from verify.theorems.index import load_index
from verify.cli.commands import bound as bound_command
from verify.report import CSV_FIELDS

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def run_module(*args, cwd=None, timeout=120):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "verify", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env)


def run_main(*args, cwd=None):
    """``main(args)`` in this process, reported as ``run_module`` reports a process: exit code,
    standard output and standard error. For what a command says; ``run_module`` for what only a
    fresh process shows (the entry point, help without heavy imports, pipes, signals)."""
    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as done:
                code = done.code
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_delays_table_matches_library(capsys):
    assert main(["delays", "P1", "P3", "-T", "60", "--reps", "4", "--seed", "7"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert set(rows) == {"P1", "P3"}
    mc = monte_carlo(preset("P3"), 60, 4, 7, progress=False)   # the command's Monte-Carlo column is the library's
    assert float(rows["P3"][1]) == pytest.approx(exact_tau_avg(preset("P3"), 60), abs=5e-4)
    assert float(rows["P3"][2]) == pytest.approx(mc.tau_avg.mean, abs=5e-4)
    assert float(rows["P3"][5]) == pytest.approx(exact_tau_max(preset("P3"), 60), abs=5e-4)
    assert float(rows["P3"][6]) == pytest.approx(mc.tau_max.mean, abs=5e-3)
    assert float(rows["P3"][9]) == pytest.approx(paper_tau_max_bound(preset("P3"), 60).value, abs=0.05)
    assert rows["P1"][5] == "—"  # no exact E[τ_max] under uniform sampling


def test_reference_table_command(capsys):
    assert main(["delays", "reference", "-T", "100", "--reps", "3"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]]
    assert names == ["P1", "P2", "P3", "case3", "case4", "H8"]


def test_mc_command(capsys):
    assert main(["mc", "P2", "-T", "50", "--reps", "40", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    expected = monte_carlo(preset("P2"), 50, 40, 2, progress=False)
    assert f"{expected.tau_max.mean:.4g} ± " in out and "q0.5=" in out


def test_mc_names_its_method_and_takes_preset_settings(capsys):
    assert main(["mc", "case4", "P1", "-T", "80", "--reps", "30", "--set", "n_clients=40", "--set", "per_round=8",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "case4: N=40, T=80, 30 replicates, seed 0, method shifts;" in out
    assert "P1: N=40, T=80, 30 replicates, seed 0, method subsets;" in out
    expected = monte_carlo(preset("P1", n_clients=40, per_round=8), 80, 30, 0, progress=False)
    assert f"{expected.tau_max.mean:.4g} ± " in out
    assert main(["mc", "P1", "-T", "80", "--reps", "30", "--method", "trace", "--no-progress"]) == 0
    out = capsys.readouterr().out
    traced = monte_carlo(preset("P1"), 80, 30, 0, progress=False, method="trace")
    assert "method trace;" in out and f"{traced.tau_max.mean:.4g} ± " in out


@pytest.mark.parametrize("argv, message", [
    (["mc", "P1", "--method", "shifts"], "method='shifts' needs a ReshuffledCyclic pattern"),
    (["mc", "P1", "--method", "fast"], "--method 'fast' is not one of auto, trace"),
    (["mc", "P1", "--set", "colour=3"], "preset 'P1' has no setting 'colour'; it takes n_clients, per_round"),
    (["mc", "P1", "--set", "n_clients"], "--set expects NAME=VALUE"),
    (["mc", "P1", "--set", "n_clients=-3"], "n_clients"),
])
def test_mc_refuses_a_bad_method_or_setting(argv, message, capsys):
    assert main(argv + ["-T", "10", "--reps", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_mc_methods_are_monte_carlos_own(capsys):
    """--method takes what monte_carlo takes, read from it: a name it lacks is one line listing them."""
    from participation.expected.montecarlo import METHODS

    assert main(["mc", "P1", "-T", "10", "--reps", "2", "--method", "nosuch", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nosuch'" in err and ", ".join(METHODS) in err
    for method in ("trace", "subsets"):
        assert main(["mc", "P1", "-T", "10", "--reps", "4", "--method", method, "--no-progress"]) == 0
        assert f"method {method}" in capsys.readouterr().out


def test_delays_of_a_trace_file(tmp_path, capsys):
    path = Trace(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=bool)).save(tmp_path / "t.json")
    assert main(["delays", "--trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tau_max=2" in out and "tau_avg=1.6667" in out


def test_list_presets(capsys):
    assert main(["delays", "--list"]) == 0
    out = capsys.readouterr().out
    assert "P3" in out and "cafed-temporal" in out


@pytest.mark.slow
@pytest.mark.parametrize("args, fragment", [
    (["delays", "nosuch"], "unknown preset 'nosuch'"),
    (["delays", "-T", "0"], "must be positive"),
    (["delays", "--reps", "x"], "expected an integer"),
    (["delays", "--seed", "-1"], "non-negative"),
    (["mc", "P2", "--confidence", "2"], "confidence"),
    (["mc", "nosuch"], "unknown preset"),
    (["frobnicate"], "invalid choice"),
])
def test_errors_are_one_line_exit_2(args, fragment):
    result = run_main(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and fragment in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_corrupt_trace_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    result = run_module("delays", "--trace", str(bad))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "bad.npz" in result.stderr


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert all(f in result.stderr for f in fragments), result.stderr


# ------------------------------------------------------------------ check: the default run, once


@pytest.fixture(scope="module")
def default_check(tmp_path_factory):
    """`python -m verify check` with no options, run once in a fresh folder."""
    cwd = tmp_path_factory.mktemp("check")
    result = run_module("check", cwd=cwd, timeout=600)
    assert result.returncode == 0, result.stderr
    out = cwd / "fedverify-check"
    return result.stdout, out, json.loads((out / "check.json").read_text())


@pytest.mark.slow
def test_default_check_verdicts_golden(default_check):
    stdout, _, summary = default_check
    rows = {(r["algorithm"], r["pattern"]): r for r in summary["rows"]}
    assert set(rows) == {(a, p) for a in (*choices.CHECK_ALGORITHMS, "fedsum-cr:adm") for p in ("P1", "P2", "P3")}
    assert summary["theorem"] == "fedsum.theorem_4_1" and summary["problem"]["name"] == "quadratic"
    for (algorithm, _), r in rows.items():
        if algorithm in ("fedsum-b", "fedsum", "fedsum-cr", "fedsum-cr:adm"):
            assert r["verdict"] == "holds" and r["covered"]
        else:
            assert r["label"].endswith("(ref)") and not r["covered"]
    # FedSUM-CR's broken hypothesis shows in the label, the JSON and a footnote, never hidden
    for p in ("P1", "P2", "P3"):
        assert rows["fedsum-cr", p]["label"] == "holds*"
        assert any("E.6" in c for c in rows["fedsum-cr", p]["violated_conditions"])
        assert rows["fedsum", p]["label"] == "holds" and rows["fedsum", p]["violated_conditions"] == []
        # ...and a row at the largest η_l where E.6 holds tests the theorem's proof
        assert rows["fedsum-cr:adm", p]["label"] == "holds" and rows["fedsum-cr:adm", p]["violated_conditions"] == []
    assert re.search(r"^\* fedsum-cr: .*E\.6", stdout, re.M) and re.search(r"^\(ref\) fedavg, scaffold", stdout, re.M)
    assert stdout.splitlines()[1].startswith("fedsum.theorem_4_1: measured (1/T)")
    header = stdout.splitlines()[2].split()
    assert header == ["algorithm", "pattern", "tau_max", "tau_avg", "measured", "bound", "ratio", "verdict"]


@pytest.mark.slow
def test_default_check_files_parse(default_check):
    _, out, summary = default_check
    assert sorted(p.name for p in out.iterdir()) == ["check.csv", "check.json", "check.png"]   # no temporary files left
    assert (out / "check.png").read_bytes()[:8] == PNG
    with open(out / "check.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 18 and tuple(rows[0]) == CSV_FIELDS
    by_key = {(r["algorithm"], r["pattern"]): r for r in summary["rows"]}
    for row in rows:
        assert float(row["measured"]) == pytest.approx(by_key[row["algorithm"], row["pattern"]]["measured"], rel=1e-12)
        assert row["verdict"] == by_key[row["algorithm"], row["pattern"]]["verdict"]


@pytest.mark.slow
def test_default_check_numbers_are_consistent(default_check):
    _, _, summary = default_check
    T, N = summary["rounds"], summary["problem"]["n_clients"]
    for r in summary["rows"]:
        assert r["ratio"] == pytest.approx(r["measured"] / r["bound"], rel=1e-12)
        assert r["lower"] <= r["measured"] <= r["upper"]
        assert (r["verdict"] == "holds") == (r["upper"] <= r["bound"])
        # the plotted curve is the first seed's run of the check itself
        assert r["plotted_run"]["mean"] == pytest.approx(r["result"]["values"][0], rel=1e-9)
        # delays of the judged trace, recomputed independently from the scaled preset
        m = delay_metrics(preset(r["pattern"], n_clients=N, per_round=N // 5).sample(T, seed=0))
        assert (r["tau_max"], r["tau_avg"]) == (m.tau_max, pytest.approx(m.tau_avg, rel=1e-12))
        # the bound is Theorem 4.1 at the problem's exact constants and these delays
        c = {k: v["value"] for k, v in summary["problem"]["constants"].items()}
        consts = Constants(L=c["L"], sigma2=c["sigma2"], delta_f=c["delta_f"], F0=c["F0"], n_clients=N,
                           local_steps=summary["local_steps"], rounds=T)
        algorithm = r["algorithm"] if r["covered"] else "fedsum-b"
        if algorithm.endswith(":adm"):      # Lemma E.6 at the admissible step sizes (the proof of Thm 4.1 for FedSUM-CR)
            expected = fedsum.lemma_e6(consts, r["eta_g"], r["eta_l"], m.tau_max, m.tau_avg).value
            assert r["eta_l"] == pytest.approx(1 / (10 * max(1, m.tau_max) * consts.local_steps * consts.L), rel=1e-9)
        else:
            expected = fedsum.theorem_4_1(consts, m.tau_max, m.tau_avg, algorithm=algorithm).value
        assert r["bound"] == pytest.approx(expected, rel=1e-12)


def test_bare_command_runs_check(monkeypatch, capsys):
    import verify.cli.commands.check

    monkeypatch.setattr(verify.cli.commands.check, "run", lambda args: f"check with {args.algorithms} into {args.output}")
    assert main([]) == 0
    assert capsys.readouterr().out.strip() == f"check with {list(choices.CHECK_ALGORITHMS)} into fedverify-check"


# ------------------------------------------------------------------ check: options, small runs in-process


@pytest.mark.slow
def test_check_with_a_trace_file_and_options(tmp_path, capsys):
    trace = preset("P2", n_clients=8, per_round=2).sample(40, seed=3)
    path = trace.save(tmp_path / "t.json")
    args = ["check", "--patterns", str(path), "P3", "--algorithms", "fedsum,fedavg", "-T", "50", "-K", "2",
            "--seeds", "2", "--no-progress", "--output", str(tmp_path / "out")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "(N=8, K=2, T=50)" in out and "t.json: T=40 (the trace file's length)" in out
    rows = {(r["algorithm"], r["pattern"]): r for r in json.loads((tmp_path / "out" / "check.json").read_text())["rows"]}
    assert set(rows) == {("fedsum", "t.json"), ("fedsum", "P3"), ("fedavg", "t.json"), ("fedavg", "P3")}
    m = delay_metrics(trace)
    assert rows["fedsum", "t.json"]["tau_max"] == m.tau_max and rows["fedsum", "t.json"]["rounds"] == 40
    assert rows["fedsum", "P3"]["rounds"] == 50 and len(rows["fedsum", "P3"]["result"]["values"]) == 2


# ------------------------------------------------------------------ bound


BASE = ["--L", "1", "--sigma2", "1", "--delta-f", "20"]


def _bound_cases():
    c = Constants(L=1, sigma2=1, delta_f=20, F0=13, n_clients=20, local_steps=5, rounds=400)
    cm = Constants(L=1, sigma2=1, delta_f=20, n_clients=20, local_steps=5, rounds=400, zeta2=0.5)
    cl = Constants(L=1, sigma2=1, delta_f=20, n_clients=10, local_steps=5, rounds=400, zeta2=0.5,
                   extra={"sigma2_surrogate": 0.2})
    cc = Constants(L=1, sigma2=1, delta_f=20, n_clients=2)
    fed = BASE + ["--F0", "13", "--N", "20", "--K", "5", "--T", "400", "--tau-max", "30", "--tau-avg", "14.2"]
    return [
        (["fedsum.theorem_4_1", *fed], lambda: fedsum.theorem_4_1(c, 30, 14.2)),
        (["fedsum.theorem_4_1", *fed, "--set", "algorithm=fedsum-cr"], lambda: fedsum.theorem_4_1(c, 30, 14.2, algorithm="fedsum-cr")),
        (["fedsum.lemma_d6", *fed, "--eta-g", "0.18", "--eta-l", "0.0036", "--set", "variant=printed"],
         lambda: fedsum.lemma_d6(c, 0.18, 0.0036, 30, 14.2, variant="printed")),
        (["fedsum.corollary_4_1", *fed], lambda: fedsum.corollary_4_1(c, 30, 14.2)),
        (["momentum.theorem_4_1", *BASE, "--N", "20", "--K", "5", "--T", "400", "--eta-g", "1", "--eta-l", "0.001",
          "--set", "zeta2=0.5", "--set", "beta=0.5", "--set", "nu=0.9"],
         lambda: momentum.theorem_4_1(cm, momentum.single_stage(400, 1.0, 0.001, 0.5, 0.9))),
        (["logit.theorem_2", *BASE, "--N", "10", "--K", "5", "--T", "400", "--set", "p=0.5", "--set", "eps_star=0.01",
          "--set", "C1=1", "--set", "zeta2=0.5", "--set", "sigma2_surrogate=0.2"],
         lambda: logit.theorem_2(cl, 0.5, 0.01, 1.0)),
        (["cafed.theorem_1", *BASE, "--N", "2", "--set", "alpha=0.5,0.5", "--set", "q=0.5,0.5", "--set", "pi=0.9,0.5",
          "--set", "mu=0.1", "--set", "Gamma=1", "--set", "eps_opt=0.01"],
         lambda: cafed.theorem_1([0.5, 0.5], [0.5, 0.5], [0.9, 0.5], cc, mu=0.1, Gamma=1.0, eps_opt=0.01)),
    ]


@pytest.mark.parametrize("args, expected", _bound_cases(), ids=lambda v: v[0] if isinstance(v, list) else "")
def test_bound_matches_library(args, expected, capsys):
    assert main(["bound", *args]) == 0
    out = capsys.readouterr().out
    want = expected()
    assert float(re.search(r"^value: (\S+)$", out, re.M).group(1)) == pytest.approx(want.value, rel=1e-5)
    for name, term in want.terms.items():
        assert f"  {name} = {term:.6g}" in out
    assert all(c.name in out for c in want.conditions)
    if want.step_sizes:
        assert "step sizes: " in out
    assert main(["bound", *args, "--latex"]) == 0
    assert capsys.readouterr().out.strip() == want.latex()


def test_bound_list_and_short_names(capsys):
    assert main(["bound", "--list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"fedsum.theorem_4_1", "fedsum.lemma_d6", "momentum.theorem_4_1", "logit.theorem_2", "cafed.theorem_2"} <= set(names)
    assert main(["bound", "lemma_c6", *BASE, "--tau-max", "3", "--tau-avg", "1", "--eta-g", "1", "--eta-l", "0.01"]) == 0
    assert capsys.readouterr().out.startswith("fedsum.lemma_c6: ")


@pytest.mark.parametrize("args, fragment", [
    (["nosuch"], "unknown theorem 'nosuch'"),
    (["theorem_4_1"], "unknown theorem"),                                     # ambiguous short name
    (["fedsum.theorem_4_1", "--L", "-1", "--sigma2", "1", "--delta-f", "1", "--tau-max", "3", "--tau-avg", "1"],
     "L must be > 0, got -1"),
    (["fedsum.theorem_4_1", "--L", "abc"], "expected a number, got 'abc'"),
    (["fedsum.theorem_4_1", "--L", "inf"], "must be finite"),
    (["fedsum.theorem_4_1", "--N", "0"], "must be positive"),
    (["fedsum.theorem_4_1", "--sigma2", "1"], "needs --L, --delta-f, --tau-max, --tau-avg"),
    (["fedsum.lemma_d6", *BASE, "--tau-max", "3", "--tau-avg", "1"], "needs --eta-g, --eta-l"),
    (["logit.theorem_2", *BASE], "needs --set p=VALUE, --set eps_star=VALUE, --set C1=VALUE"),
    (["fedsum.theorem_4_1", *BASE, "--tau-max", "3", "--tau-avg", "1", "--set", "variant=bogus"], "'bogus'"),
    (["fedsum.theorem_4_1", *BASE, "--tau-max", "3", "--tau-avg", "1", "--set", "beta=1"], "no input 'beta'"),
    (["fedsum.theorem_4_1", *BASE, "--tau-max", "3", "--tau-avg", "1", "--set", "oops"], "NAME=VALUE, got 'oops'"),
    (["fedsum.lemma_d6", *BASE, "--tau-max", "3", "--tau-avg", "1", "--eta-g", "1", "--set", "eta_l=a,b"], "'a,b'"),
    (["logit.theorem_2", *BASE, "--N", "3", "--set", "p=2", "--set", "eps_star=0", "--set", "C1=1"], "got 2.0"),
    ([], "needs a THEOREM"),
])
def test_bound_bad_input_is_one_line(args, fragment, capsys):
    assert main(["bound", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and err.startswith("fedverify: error: ")


# ------------------------------------------------------------------ delays and mc plots


@pytest.mark.slow
def test_delays_plot_of_presets_and_of_a_trace(tmp_path, capsys):
    assert main(["delays", "P1", "P3", "-T", "80", "--reps", "3", "--plot", str(tmp_path / "tau.png")]) == 0
    assert f"plot: {tmp_path / 'tau.png'}" in capsys.readouterr().out
    assert (tmp_path / "tau.png").read_bytes()[:8] == PNG
    path = Trace(np.eye(4, dtype=bool)).save(tmp_path / "t.csv")
    assert main(["delays", "--trace", str(path), "--plot", str(tmp_path / "sub" / "tau.svg")]) == 0
    assert "tau_max=3" in capsys.readouterr().out
    assert b"<svg" in (tmp_path / "sub" / "tau.svg").read_bytes()[:500]


@pytest.mark.slow
def test_mc_table_and_plot(tmp_path, capsys):
    assert main(["mc", "P2", "case3", "-T", "60", "--reps", "50", "--seed", "1", "--plot", str(tmp_path / "mc.png")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "mc.png").read_bytes()[:8] == PNG
    lines = {(case, line.split()[0]): line.split() for case in ("P2", "case3") for line in
             out.split(f"{case}: N=")[1].splitlines()[2:4]}
    mc = monte_carlo(preset("P2"), 60, 50, 1, progress=False)
    assert float(lines["P2", "tau_max"][1]) == pytest.approx(exact_tau_max(preset("P2"), 60), rel=1e-3)
    assert float(lines["P2", "tau_avg"][1]) == pytest.approx(exact_tau_avg(preset("P2"), 60), rel=1e-3)
    assert float(lines["P2", "tau_max"][2]) == pytest.approx(paper_tau_max_bound(preset("P2"), 60).value, rel=1e-3)
    assert f"{mc.tau_max.mean:.4g} ± " in out and f"CI [{mc.tau_max.ci_low:.4g}, {mc.tau_max.ci_high:.4g}]" in out
    assert float(lines["case3", "tau_max"][1]) == pytest.approx(exact_tau_max(preset("case3"), 60), rel=1e-3)


# ------------------------------------------------------------------ errors and help, end to end


@pytest.mark.slow
@pytest.mark.parametrize("args, fragment", [
    (["check", "--algorithms", "nosuch"], "unknown algorithm 'nosuch'"),
    (["check", "--patterns", "nosuch"], "unknown pattern 'nosuch'"),
    (["check", "--theorem", "nosuch"], "unknown theorem 'nosuch'"),
    (["check", "--problem", "nosuch"], "unknown problem 'nosuch'"),
    (["check", "--patterns", "missing.npz"], "missing.npz"),
    (["check", "--seeds", "0"], "must be positive"),
    (["bound", "nosuch"], "unknown theorem 'nosuch'"),
    (["delays", "P1", "--plot", "tau.xyz"], "tau.xyz"),
])
def test_new_errors_are_one_line_exit_2(args, fragment, tmp_path):
    assert_one_line_error(run_main(*args, cwd=tmp_path), fragment)


@pytest.mark.slow
def test_check_unreadable_trace_and_bad_output(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    assert_one_line_error(run_main("check", "--patterns", str(bad), cwd=tmp_path), "bad.npz")
    (tmp_path / "file").write_text("x")
    assert_one_line_error(run_main("check", "--output", "file", cwd=tmp_path), "'file'", "not a folder")


@pytest.mark.parametrize("command", [[], ["check"], ["delays"], ["mc"], ["bound"], ["bench"]])
def test_help(command):
    result = run_module(*command, "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"usage: fedverify {' '.join(command)}".rstrip())
    if command == ["check"]:
        assert "(ref)" in result.stdout and "holds*" in result.stdout and "quadratic" in result.stdout


# ------------------------------------------------------------------ a newcomer's paths


@pytest.mark.slow
def test_list_algorithms_names_every_registered_algorithm(tmp_path):
    """check --help points to --list-algorithms, which reads the registry itself (a plugin's
    algorithm included), one line per name."""
    import algorithms

    assert "--list-algorithms" in run_module("check", "--help").stdout
    plugin = tmp_path / "my_algorithms.py"
    plugin.write_text(PLUGIN)
    listed = run_module("check", "--list-algorithms", "--plugin", str(plugin), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert set(names) == set(algorithms.names()) - set(_registered_by_tests()) | {"test-half-step"}
    assert len(names) == len(set(names)) and all(len(line) <= 130 for line in listed.stdout.splitlines())


def _registered_by_tests():
    import algorithms

    return [n for n in algorithms.names() if n.startswith("test-")]


@pytest.mark.parametrize("command, flags", [
    ("mc", ("--rounds", "--reps", "--seed", "--confidence", "--no-progress")),
    ("experiment fedsum", ("--rounds", "--patterns", "--record-every", "--seed", "--algorithms")),
    ("experiment delays", ("--rounds", "--regimes", "--rate", "--seed", "--eta-g", "--long")),
])
def test_every_option_is_described(command, flags):
    sub = cli.build_parser()
    for word in command.split():
        sub = sub._subparsers._group_actions[0].choices[word]
    described = {s: a.help for a in sub._actions for s in a.option_strings}
    for flag in flags:
        assert described.get(flag), f"{command} {flag} has no help"


PLUGIN = '''
from dataclasses import dataclass
from algorithms import FedAvg, register


@register
@dataclass(frozen=True, repr=False)
class HalfStepFedAvg(FedAvg):
    name = "test-half-step"
'''


@pytest.mark.slow
@pytest.mark.longest
def test_a_users_algorithm_through_plugin(tmp_path):
    """An algorithm registered in a user's plugin (a file, or a module in the working folder) is one
    the command knows and runs, as the library does."""
    plugin = tmp_path / "my_algorithms.py"
    plugin.write_text(PLUGIN)
    done = run_module("check", "--algorithms", "test-half-step", "--patterns", "P1", "-T", "20", "--seeds", "2",
                      "--clients", "5", "--plugin", str(plugin), "--no-progress", "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "test-half-step" in done.stdout and "(ref)" in done.stdout
    # by module name from the working folder, too
    done = run_module("check", "--algorithms", "test-half-step", "--patterns", "P1", "-T", "10", "--seeds", "2",
                      "--clients", "5", "--plugin", "my_algorithms", "--no-progress", "-o", "out2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_one_line_error(run_main("check", "--plugin", "no_such_module_xyz", cwd=tmp_path), "no_such_module_xyz")


@pytest.mark.slow
def test_one_seed_says_why_it_is_inconclusive(tmp_path, capsys):
    assert main(["check", "--algorithms", "fedsum", "--patterns", "P1", "-T", "20", "--seeds", "1", "--clients", "5",
                 "--no-progress", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "inconclusive" in out and "--seeds 1: one run gives no confidence interval" in out


@pytest.mark.slow
@pytest.mark.parametrize("args, fragment", [
    (["delays", "P1", "-T", "1000000000"], "memory limit"),
    (["mc", "P1", "-T", "1000000000", "--reps", "2"], "memory limit"),
    (["check", "-T", "1000000000"], "memory limit"),
])
def test_sizes_that_cannot_fit_are_refused_before_the_work(args, fragment, tmp_path):
    """Sizes past the memory limit end in one line naming the need, not a MemoryError traceback
    or minutes of silent work."""
    env_limit = {"FEDVERIFY_MEMORY_GB": "1"}
    done = subprocess.run([sys.executable, "-m", "verify", *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, **env_limit,
                                             "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert_one_line_error(done, fragment, "needs about")


def test_memory_limit_names_the_need(monkeypatch):
    from participation import budget

    monkeypatch.setenv(budget.ENV_MEMORY, "2")
    assert budget.memory_limit() == 2 * 2**30
    with pytest.raises(ValueError, match=r"needs about 3 GiB; the memory limit is 2 GiB"):
        budget.require_memory(3 * 2**30, "a job")
    monkeypatch.setenv(budget.ENV_MEMORY, "lots")
    with pytest.raises(ValueError, match="FEDVERIFY_MEMORY_GB"):
        budget.memory_limit()


def test_an_output_that_cannot_be_written_is_refused_first(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):        # root ignores permissions
            pytest.skip("running as a user who can write anywhere")
        done = run_main("check", "--output", str(locked / "out"), cwd=tmp_path)
        assert_one_line_error(done, "cannot be written to")
    finally:
        locked.chmod(0o700)
    (tmp_path / "file").write_text("x")
    assert_one_line_error(run_main("check", "--output", "file/sub", cwd=tmp_path), "cannot be written to")


@pytest.mark.slow
def test_mc_draws_no_progress_bar_into_a_pipe(tmp_path):
    done = run_module("mc", "P1", "-T", "200", "--reps", "300", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr


@pytest.mark.parametrize("name", sorted(load_index()))
def test_every_bound_example_runs_and_latex_needs_no_numbers(name, capsys):
    assert main(["bound", name, *bound_command.example(name).split()]) == 0
    numeric = capsys.readouterr().out
    assert "value: " in numeric
    assert main(["bound", name, "--latex"]) == 0
    symbolic = capsys.readouterr().out.strip()
    assert symbolic and "\\" in symbolic or "frac" in symbolic
    assert main(["bound", name, "--inputs"]) == 0
    inputs = capsys.readouterr().out
    assert f"fedverify bound {name} {bound_command.example(name)}" in inputs and "required" in inputs


def test_every_theorem_declares_what_the_commands_read():
    """One home per theorem: its example, summary, patterns and algorithms are in its declaration."""
    from verify.theorems import THEOREMS

    for name, t in THEOREMS.items():
        assert t.example and t.summary and t.patterns and t.algorithms, name
    assert THEOREMS["fedsum.theorem_4_1"].algorithms == choices.CHECK_ALGORITHMS


def test_a_missing_input_points_to_inputs(capsys):
    assert main(["bound", "cafed.theorem_1", "--L", "1"]) == 2
    assert "--inputs" in capsys.readouterr().err


def test_bound_list_cites_papers_not_files(capsys):
    assert main(["bound", "--list"]) == 0
    out = capsys.readouterr().out
    assert ".txt" not in out and " line" not in out
    assert all(paper in out for paper in ("FedSUM", "CA-Fed", "Server momentum", "LOGIT"))


def test_a_bare_json_list_takes_clients_from_the_command(tmp_path, capsys):
    path = tmp_path / "sets.json"
    path.write_text("[[0], [1], [0, 2], []]")
    assert main(["delays", "--trace", str(path)]) == 2
    assert "--clients" in capsys.readouterr().err
    assert main(["delays", "--trace", str(path), "--clients", "4"]) == 0   # client 3 never takes part
    assert "tau_max=4" in capsys.readouterr().out


# ------------------------------------------------------------------ real fleets


def test_delays_of_the_shipped_fleet(capsys):
    assert main(["delays", "--trace", "mobiperf", "--round-seconds", "600"]) == 0
    out = capsys.readouterr().out
    assert "T=893 rounds, N=300 clients" in out and "4 never available" in out
    assert "without the 4 never-available clients: tau_max=870  tau_avg=445.0168" in out


def test_delays_of_an_event_log(tmp_path, capsys):
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"devices": {"a": [[0, 1], [30, 0]], "b": [[10, 1]]}}))
    assert main(["delays", "--trace", str(path)]) == 2
    assert "give --round-seconds" in capsys.readouterr().err
    assert main(["delays", "--trace", str(path), "--round-seconds", "10", "--rule", "start"]) == 0
    assert "T=3 rounds, N=2 clients" in capsys.readouterr().out
    assert main(["delays", "--trace", str(path), "--round-seconds", "10", "--fraction", "0.5"]) == 2
    assert "--rule fraction" in capsys.readouterr().err


def test_the_theorem_index_is_generated_from_the_declarations(tmp_path):
    """`bound --list` reads a generated index (it imports nothing); it must be the declarations' summaries,
    and the generator writes exactly that."""
    from verify.theorems import THEOREMS
    from verify.theorems.index import build_index, write_index

    declared = {name: t.summary for name, t in THEOREMS.items()}
    assert build_index() == declared
    assert load_index() == declared, "verify/theorems/index.json is stale: run python -m verify.theorems.index"
    assert write_index(tmp_path / "index.json") == declared
    assert json.loads((tmp_path / "index.json").read_text(encoding="utf-8")) == declared


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["bound", "--list"], ["sweep", "--help"]])
def test_help_and_list_load_no_numerics(argv):
    """--help and bound --list answer at once: they import neither numpy nor torch, scipy, sympy, nor the sweep."""
    code = ("import sys, contextlib, io\nfrom verify.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main({argv!r})\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('numpy', 'torch', 'scipy', 'sympy', 'matplotlib', 'participation', 'verify.sweep.runner',\n"
            "                         'bounds', 'verify.theorems.fedsum', 'verify.theorems.momentum') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "[]"


def test_delays_with_one_replicate_prints_a_dash_for_the_standard_error():
    done = run_main("delays", "P1", "-T", "30", "--reps", "1")
    assert done.returncode == 0 and "nan" not in done.stdout and "±     —" in done.stdout
