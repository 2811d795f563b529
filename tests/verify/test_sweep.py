"""Sweeps: spec parsing and validation, cell keys, records, resuming, executors, the command."""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import algorithms
from participation import Trace, preset
from participation.expected import exact_tau_avg, monte_carlo
from verify import choices
from verify.sweep import cells as sweep_cells, runner as sweep
from verify.checking import check
from verify.cli import main
from verify.sweep.executors import local_processes, open_executor
from verify.sweep.spec import _toml

ROOT = Path(__file__).resolve().parents[2]

try:
    tomllib = _toml()
except ValueError:     # Python 3.10 without tomli: TOML specs are refused, JSON ones work
    tomllib = None
needs_toml = pytest.mark.skipif(tomllib is None, reason="reading TOML needs Python ≥ 3.11 or tomli")

#: A few seconds of work: 2 algorithms × 2 patterns × 3 seeds of a tiny quadratic, and 2 Monte-Carlo jobs.
TINY = {
    "description": "tiny",
    "check": {"algorithms": ["fedsum", "fedavg"], "patterns": ["P1", "P2"], "n_clients": 5, "rounds": 12,
              "local_steps": 2, "seeds": [0, 1, 2], "runs": 2},
    "monte_carlo": {"patterns": ["P2", "case4"], "n_clients": 5, "rounds": 30, "reps": 50, "seeds": 3},
}
TINY_TOML = """\
description = "tiny"
[check]
algorithms = ["fedsum", "fedavg"]
patterns = ["P1", "P2"]
n_clients = 5
rounds = 12
local_steps = 2
seeds = [0, 1, 2]
runs = 2
[monte_carlo]
patterns = ["P2", "case4"]
n_clients = 5
rounds = 30
reps = 50
seeds = 3
"""


def without_timing(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def same_numbers(a, b):
    """Equal rows, NaN equal to NaN (a deterministic run reproduces its NaN too)."""
    assert len(a) == len(b)
    for x, y in zip(without_timing(a), without_timing(b)):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], float) and np.isnan(x[k]):
                assert isinstance(y[k], float) and np.isnan(y[k]), k
            else:
                assert x[k] == y[k], (k, x[k], y[k])


def env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


# ------------------------------------------------------------------ spec


@needs_toml
def test_toml_and_json_specs_give_the_same_cells(tmp_path):
    (tmp_path / "s.toml").write_text(TINY_TOML)
    (tmp_path / "s.json").write_text(json.dumps(TINY))
    toml_cells, json_cells = sweep.expand(tmp_path / "s.toml"), sweep.expand(tmp_path / "s.json")
    assert [c.key for c in toml_cells] == [c.key for c in json_cells] == [c.key for c in sweep.expand(TINY)]
    assert len(toml_cells) == 2 * 2 * 3 + 2
    first = toml_cells[0].config
    assert first == {"problem": "quadratic", "algorithm": "fedsum", "pattern": "P1", "theorem": "fedsum.theorem_4_1",
                     "n_clients": 5, "rounds": 12, "local_steps": 2, "seed": 0, "runs": 2, "confidence": 0.95}
    assert [c.config["seed"] for c in toml_cells[:3]] == [0, 1, 2]      # the last key varies fastest
    assert toml_cells[-1].config == {"pattern": "case4", "n_clients": 5, "rounds": 30, "reps": 50, "seed": 3,
                                     "confidence": 0.95}


def test_defaults_aliases_and_repeats(tmp_path):
    cells = sweep.expand({"check": {}})    # an empty table is `fedverify check`'s default run
    assert len(cells) == len(choices.CHECK_ALGORITHMS) * 3
    assert {c.config["rounds"] for c in cells} == {500} and {c.config["runs"] for c in cells} == {5}
    # names are canonical, so spellings of one cell share its key; a cell two tables produce runs once
    spec = {"check": [{"algorithms": "FedSUM_B", "patterns": "p1", "theorems": "theorem_4_1"},
                      {"algorithms": "fedsum-b", "patterns": ["P1", "P1"]}]}
    cells = sweep.expand(spec)
    assert len(cells) == 1 and cells[0].config["algorithm"] == "fedsum-b" and cells[0].config["pattern"] == "P1"
    mc = sweep.expand({"monte_carlo": {"patterns": "cafed-spatial"}})    # no n_clients: the preset's own size
    assert mc[0].config["n_clients"] is None


@needs_toml
def test_example_spec_is_valid_and_small(tmp_path):
    path = tmp_path / "example.toml"
    path.write_text(sweep.EXAMPLE_SPEC)
    cells = sweep.expand(path)
    assert {c.kind for c in cells} == {"check", "monte_carlo"} and len(cells) <= 30
    assert max(c.config["rounds"] for c in cells if c.kind == "check") <= 50


@pytest.mark.parametrize("spec, fragment", [
    ({"checks": {}}, "unknown key 'checks' in the spec (did you mean 'check'?)"),
    ({"check": {"round": 5}}, "unknown key 'round' in check (did you mean 'rounds'?)"),
    ({"check": {"rounds": 0}}, "check.rounds: expected a positive integer, got 0"),
    ({"check": {"rounds": True}}, "check.rounds: expected a positive integer, got True"),
    ({"check": {"rounds": 2.5}}, "check.rounds: expected a positive integer, got 2.5"),
    ({"check": {"seeds": []}}, "check.seeds: empty list"),
    ({"check": {"seeds": [0, -1]}}, "check.seeds: expected an integer seed ≥ 0, got -1"),
    ({"check": {"confidence": 1.0}}, "check.confidence: expected a number in [0.5, 1), got 1.0"),
    ({"check": {"algorithms": "nosuch"}}, "check.algorithms: unknown algorithm 'nosuch'"),
    ({"check": {"algorithms": 3}}, "check.algorithms: expected a name, got 3"),
    ({"check": {"patterns": "nosuch"}}, "check.patterns: unknown pattern 'nosuch'"),
    ({"check": {"patterns": "missing.npz"}}, "missing.npz"),
    ({"check": {"problems": "nosuch"}}, "check.problems: unknown problem 'nosuch'"),
    ({"check": {"theorems": "nosuch"}}, "check.theorems: unknown theorem 'nosuch'"),
    ({"check": [{}, {"patterns": "cafed-spatial"}]}, "check[1].patterns: preset 'cafed-spatial' cannot be scaled"),
    ({"check": 3}, "check must be a table or a list of tables, got int"),
    ({"monte_carlo": {"reps": 1}}, "monte_carlo.reps: expected at least 2 replicates"),
    ({"monte_carlo": {"confidence": 0}}, "monte_carlo.confidence: expected a number in (0, 1), got 0"),
    ({"monte_carlo": {"patterns": "trace.npz"}}, "monte_carlo.patterns: unknown pattern 'trace.npz': not a preset"),
    ({"monte_carlo": {"local_steps": 2}}, "unknown key 'local_steps' in monte_carlo; expected patterns"),
    ({"description": 3, "check": {}}, "description: expected text, got 3"),
    ({"description": "nothing"}, "the spec has no cells"),
])
def test_bad_specs_are_one_line_value_errors(spec, fragment):
    with pytest.raises(ValueError) as err:
        sweep.expand(spec)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_bad_spec_files(tmp_path, monkeypatch):
    (tmp_path / "s.yaml").write_text("x: 1")
    with pytest.raises(ValueError, match=r"a spec is a \.toml or \.json file, got 's\.yaml'"):
        sweep.load_spec(tmp_path / "s.yaml")
    (tmp_path / "s.json").write_text('{"check": {"rounds": }}')
    with pytest.raises(ValueError, match=r"^s\.json: invalid JSON \(Expecting value at line 1\)") as err:
        sweep.load_spec(tmp_path / "s.json")
    assert "\n" not in str(err.value)
    if tomllib is not None:
        (tmp_path / "s.toml").write_text("[check]\nrounds = = 3\n")
        with pytest.raises(ValueError, match=r"^s\.toml: .*line 2") as err:
            sweep.load_spec(tmp_path / "s.toml")
        assert "\n" not in str(err.value)
    (tmp_path / "s.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="a spec must be a table of keys, got list"):
        sweep.load_spec(tmp_path / "s.json")
    monkeypatch.setitem(sys.modules, "tomllib", None)     # Python 3.10 without tomli
    monkeypatch.setitem(sys.modules, "tomli", None)
    with pytest.raises(ValueError, match="TOML spec needs Python ≥ 3.11 or the tomli package; or write the spec as JSON"):
        sweep.load_spec(tmp_path / "s.toml")


def test_trace_files_are_relative_to_the_spec_and_keyed_by_content(tmp_path):
    rng = np.random.default_rng(0)
    Trace(rng.random((20, 4)) < 0.5).save(tmp_path / "t.npz")
    (tmp_path / "s.json").write_text(json.dumps({"check": {"patterns": "t.npz", "n_clients": 4, "rounds": 50,
                                                           "algorithms": "fedsum", "runs": 2}}))
    [cell] = sweep.expand(tmp_path / "s.json")
    assert cell.config["pattern"] == "t.npz" and len(cell.config["trace_sha256"]) == 64
    assert sweep.run_cell(cell)["results"]["rounds_run"] == 20     # the trace's own length
    Trace(rng.random((20, 4)) < 0.5).save(tmp_path / "t.npz")
    assert sweep.expand(tmp_path / "s.json")[0].key != cell.key    # new content, new cell
    with pytest.raises(ValueError, match="trace file t.npz changed since the sweep was expanded"):
        sweep.run_cell(cell)
    with pytest.raises(ValueError, match="check.patterns: trace t.npz has 4 clients but n_clients is 5"):
        sweep.expand(sweep.parse_spec({"check": {"patterns": "t.npz", "n_clients": 5}}, base=tmp_path))


# ------------------------------------------------------------------ keys


def test_cell_key_is_a_stable_content_hash():
    config = {"problem": "quadratic", "algorithm": "fedsum", "pattern": "P1", "theorem": "fedsum.theorem_4_1",
              "n_clients": 5, "rounds": 12, "local_steps": 2, "seed": 0, "runs": 2, "confidence": 0.95}
    key = sweep.cell_key("check", config)
    # pinned: a change here orphans every stored record (bump SCHEMA_VERSION on purpose instead)
    assert key == "65df1807be473e68373c651847289039f93a0afe1427461145aa57502fbb63b2"
    assert key == sweep.cell_key("check", dict(reversed(list(config.items()))))
    assert key == sweep.expand(TINY)[0].key
    assert key != sweep.cell_key("monte_carlo", config)
    for name, other in (("seed", 1), ("rounds", 13), ("confidence", 0.9), ("algorithm", "fedavg")):
        assert sweep.cell_key("check", {**config, name: other}) != key


# ------------------------------------------------------------------ cells


@pytest.mark.parametrize("theorem", ["fedsum.theorem_4_1", "fedsum.corollary_4_1"])
def test_check_cell_is_fedverify_check(theorem):
    [cell] = sweep.expand({"check": {"algorithms": "fedsum", "patterns": "P2", "n_clients": 5, "rounds": 15,
                                     "local_steps": 2, "seeds": 1, "runs": 3, "theorems": theorem}})
    record = sweep.run_cell(cell)
    results = record["results"]
    problem, consts = sweep_cells._problem_and_constants("quadratic", 5)
    pattern = choices.scaled_preset("P2", 5)
    expected = check("fedsum", problem, pattern, theorem, seeds=[3, 4, 5], rounds=15, local_steps=2,
                     constants=consts, trace_seed=1)
    assert results["noise_seeds"] == [3, 4, 5]
    assert results["measured"] == expected.measured and results["bound"] == expected.bound_value
    assert results["verdict"] == expected.verdict and results["ratio"] == expected.ratio
    # f(x_T) is that of the check's first run (first seed, first trace, its step sizes)
    first = expected.first_run
    assert first.mean_grad_norm2 == expected.values[0]
    import torch

    assert results["final_loss"] == float(problem.loss(torch.as_tensor(first.final_params)))
    if theorem == "fedsum.theorem_4_1":      # the same run, built by hand
        alg = algorithms.get("fedsum", eta_g=expected.step_sizes["eta_g"], eta_l=expected.step_sizes["eta_l"],
                             local_steps=2)
        assert algorithms.run(alg, problem, pattern.sample(15, seed=1), seed=3).same_as(first)
    assert record["schema"] == sweep.SCHEMA_VERSION and record["key"] == cell.key and record["config"] == cell.config
    assert {"fedverify", "python", "numpy", "torch"} <= set(record["versions"]) and record["timing"]["seconds"] > 0


@pytest.mark.slow
def test_seed_0_is_the_check_command(tmp_path, capsys):
    assert main(["check", "-N", "5", "-T", "15", "-K", "2", "--seeds", "3", "--patterns", "P2", "P3", "--algorithms",
                 "fedsum", "scaffold", "-o", str(tmp_path), "--no-progress"]) == 0
    capsys.readouterr()
    rows = json.loads((tmp_path / "check.json").read_text())["rows"]
    cells = sweep.expand({"check": {"algorithms": ["fedsum", "scaffold"], "patterns": ["P2", "P3"], "n_clients": 5,
                                    "rounds": 15, "local_steps": 2, "runs": 3}})
    for row, cell in zip(rows, cells, strict=True):
        results = sweep.run_cell(cell)["results"]
        assert (row["algorithm"], row["pattern"]) == (cell.config["algorithm"], cell.config["pattern"])
        assert {k: results[k] for k in ("measured", "upper", "bound", "label", "eta_l")} == \
            {k: row[k] for k in ("measured", "upper", "bound", "label", "eta_l")}


def test_monte_carlo_cell_matches_monte_carlo():
    [cell] = sweep.expand({"monte_carlo": {"patterns": "P2", "n_clients": 5, "rounds": 30, "reps": 50, "seeds": 3,
                                           "confidence": 0.9}})
    results = sweep.run_cell(cell)["results"]
    pattern = preset("P2", n_clients=5, per_round=1)
    mc = monte_carlo(pattern, 30, 50, 3, confidence=0.9, progress=False)
    assert results["tau_max"]["mean"] == mc.tau_max.mean and results["tau_avg"]["ci_high"] == mc.tau_avg.ci_high
    assert results["tau_avg"]["exact"] == exact_tau_avg(pattern, 30) and results["n_clients"] == 5
    assert results["tau_max"]["quantiles"]["0.5"] == mc.tau_max.quantiles[0.5]


# ------------------------------------------------------------------ records and resuming


@pytest.mark.slow
def test_sweep_writes_records_and_resumes(tmp_path, monkeypatch):
    calls = []
    real = sweep.run_cell
    monkeypatch.setattr(sweep, "run_cell", lambda cell: calls.append(cell.key) or real(cell))
    out = tmp_path / "out"
    first = sweep.run_sweep(TINY, out, progress=False)
    cells = sweep.expand(TINY)
    assert (first.ran, first.skipped, len(calls)) == (len(cells), 0, len(cells))
    assert sorted(p.name for p in (out / "cells").iterdir()) == sorted(f"{c.key}.json" for c in cells)
    assert [r["key"] for r in first.rows] == [c.key for c in cells]       # the table is in spec order
    stamps = {p: p.stat().st_mtime_ns for p in (out / "cells").iterdir()}

    again = sweep.run_sweep(TINY, out, progress=False)                  # nothing to do
    assert (again.ran, again.skipped, len(calls)) == (0, len(cells), len(cells))
    assert {p: p.stat().st_mtime_ns for p in (out / "cells").iterdir()} == stamps
    same_numbers(again.rows, first.rows)

    (out / "cells" / f"{cells[4].key}.json").unlink()                    # a lost record runs again, alone
    (out / "cells" / f"{cells[5].key}.json").write_text("{trunc")        # so does an unreadable one
    grown = {**TINY, "check": {**TINY["check"], "seeds": [0, 1, 2, 3]}}  # and new cells
    calls.clear()
    with pytest.warns(sweep.SweepWarning, match=rf"{cells[5].key}\.json is not a sweep record \(not JSON\)"):
        outcome = sweep.run_sweep(grown, out, progress=False)
    new = {c.key for c in sweep.expand(grown)} - {c.key for c in cells}
    assert set(calls) == {cells[4].key, cells[5].key} | new and outcome.skipped == len(cells) - 2

    rows = sweep.load_results(out)                                       # every record, sorted by config
    assert len(rows) == len(cells) + len(new) and [r["kind"] for r in rows][-2:] == ["monte_carlo"] * 2
    with open(out / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["key"] for r in table] == [r["key"] for r in outcome.rows]
    assert float(table[0]["measured"]) == outcome.rows[0]["measured"]
    columns = sweep.to_columns(rows)
    assert list(columns)[:3] == ["key", "kind", "problem"] and len(columns["measured"]) == len(rows)
    assert columns["measured"][-1] is None and columns["tau_max_mean"][0] is None


def test_a_failing_cell_keeps_the_others(tmp_path, monkeypatch):
    def broken(cell):
        raise ArithmeticError("no luck")

    monkeypatch.setattr(sweep_cells, "_run_monte_carlo", broken)
    with pytest.raises(sweep.SweepError, match=r"2 of 14 cells failed \(first: Monte-Carlo P2 .*ArithmeticError: no luck\)") as err:
        sweep.run_sweep(TINY, tmp_path, progress=False)
    assert len(err.value.outcome.rows) == 12 and len(list((tmp_path / "cells").iterdir())) == 12
    with pytest.raises(ValueError, match="holds no sweep records"):
        sweep.load_results(tmp_path / "elsewhere")
    (tmp_path / "cells" / "stray.json").write_text("{}")
    with pytest.raises(ValueError, match="stray.json is not a sweep record"):
        sweep.load_results(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["SIGKILL the whole process group", "SIGTERM the command"])
def test_a_killed_sweep_resumes_to_the_uninterrupted_table(tmp_path, monkeypatch, stop):
    spec = {"check": {"algorithms": ["fedsum", "fedavg", "scaffold"], "patterns": ["P1", "P2", "P3"], "n_clients": 5,
                      "rounds": 20, "local_steps": 2, "seeds": [0, 1], "runs": 2},
            "monte_carlo": {"patterns": ["P1", "P3"], "n_clients": 5, "rounds": 40, "reps": 30}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    cells = sweep.expand(path)
    out = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-m", "verify", "sweep", str(path), "-o", str(out), "--processes", "2",
                                "--no-progress"], env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not list((out / "cells").glob("*.json")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if stop.startswith("SIGKILL"):
        os.killpg(process.pid, signal.SIGKILL)
    else:
        process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    if stop.startswith("SIGTERM"):
        assert process.returncode == 130 and stderr.strip().endswith("fedverify: interrupted"), stderr
    survivors = {p.stem for p in (out / "cells").glob("*.json")}
    assert 1 <= len(survivors) < len(cells)
    assert not (out / "results.csv").exists()

    calls = []
    real = sweep.run_cell
    monkeypatch.setattr(sweep, "run_cell", lambda cell: calls.append(cell.key) or real(cell))
    resumed = sweep.run_sweep(path, out, progress=False)
    assert set(calls) == {c.key for c in cells} - survivors and resumed.skipped == len(survivors)   # none twice
    reference = sweep.run_sweep(path, tmp_path / "whole", progress=False)
    same_numbers(resumed.rows, reference.rows)
    same_numbers(sweep.load_results(out), sweep.load_results(tmp_path / "whole"))


# ------------------------------------------------------------------ executors


@pytest.mark.slow
def test_a_dask_cluster_gives_the_numbers_of_local_processes(tmp_path):
    distributed = pytest.importorskip("distributed")
    import logging

    with local_processes(2) as executor:
        local = sweep.run_sweep(TINY, tmp_path / "local", executor=executor, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        with open_executor(scheduler=cluster.scheduler_address) as executor:   # what --scheduler ADDRESS runs
            dask = sweep.run_sweep(TINY, tmp_path / "dask", executor=executor, progress=False)
    same_numbers(dask.rows, local.rows)


@pytest.mark.slow
def test_a_local_dask_cluster_of_worker_processes_gives_the_same_numbers(tmp_path):
    pytest.importorskip("distributed")
    with open_executor(workers=2) as executor:      # what --workers 2 runs: two worker processes
        dask = sweep.run_sweep(TINY, tmp_path / "dask", executor=executor, progress=False)
    same_numbers(dask.rows, sweep.run_sweep(TINY, tmp_path / "inline", progress=False).rows)


def test_open_executor_choices(monkeypatch):
    with open_executor(processes=1) as executor:
        assert executor is None
    with pytest.raises(ValueError, match="choose one of processes, scheduler, workers; got processes, workers"):
        with open_executor(processes=2, workers=2):
            pass
    monkeypatch.setitem(sys.modules, "distributed", None)     # as if the extra were not installed
    with pytest.raises(ValueError, match=r'pip install "fedverify\[distributed\]"'):
        with open_executor(workers=2):
            pass


# ------------------------------------------------------------------ the command


@needs_toml
def test_command_prints_the_table_and_writes_csv(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(TINY_TOML)
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out"), "-j", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("14 cells: 14 run now on this process, 0 found done (tiny)")
    assert "check cells (12)" in out and "Monte-Carlo cells (2)" in out and "results.csv" in out
    with open(tmp_path / "out" / "results.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 14
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out"), "--no-progress"]) == 0
    assert capsys.readouterr().out.startswith("14 cells: 0 run now on this process, 14 found done")


@needs_toml
def test_command_example_round_trips(tmp_path, capsys):
    assert main(["sweep", "--example"]) == 0
    (tmp_path / "example.toml").write_text(capsys.readouterr().out)
    assert [c.key for c in sweep.expand(tmp_path / "example.toml")] == [
        c.key for c in sweep.expand(tomllib.loads(sweep.EXAMPLE_SPEC))]


@pytest.mark.parametrize("args, fragment", [
    (["sweep"], "sweep needs a SPEC file"),
    (["sweep", "missing.toml"], "missing.toml"),
    (["sweep", "bad.json"], "check.rounds: expected a positive integer, got 0"),
    (["sweep", "bad.json", "--workers", "2", "--processes", "2"], "not allowed with argument"),
    (["sweep", "ok.json", "--processes", "0"], "must be positive"),
    (["sweep", "ok.json", "-o", "file"], "'file' exists and is not a folder"),
])
def test_command_errors_are_one_line_exit_2(args, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text('{"check": {"rounds": 0}}')
    (tmp_path / "ok.json").write_text('{"monte_carlo": {"patterns": "P2", "rounds": 5, "reps": 4}}')
    (tmp_path / "file").write_text("x")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_command_without_dask_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "ok.json").write_text('{"monte_carlo": {"patterns": "P2", "rounds": 5, "reps": 4}}')
    monkeypatch.setitem(sys.modules, "distributed", None)     # as if the extra were not installed
    assert main(["sweep", str(tmp_path / "ok.json"), "-o", str(tmp_path / "out"), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install "fedverify[distributed]"' in err


def test_help_documents_the_spec(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and out.startswith("usage: fedverify sweep")
    for fragment in ("[check]", "[monte_carlo]", "local_steps", "reps", "--scheduler", "--workers", "--processes",
                     "results.csv", "--example", 'pip install "fedverify[distributed]"'):
        assert fragment in out
