"""``fedverify bench``: the table, the Flower comparison and the GPU rows.

Nothing here asserts a time or a speed-up; the benchmarks run on tiny workloads and the
tests check what they compute and print.
"""
import sys

import numpy as np
import pytest
import torch

import verify
from participation import Trace
from verify import bench
from verify.bench import checks as bench_checks
from verify.cli import main
from tests.verify.records.test_flower import LocalGrid, flower, identity  # noqa: F401  (the last two are fixtures)


def peers_module():
    """``verify.bench.flower_baseline``, skipping the test when Flower or its simulation extra is absent."""
    pytest.importorskip("flwr")
    pytest.importorskip("ray")
    from verify.bench import flower_baseline as peers

    return peers


def tiny_workload(rounds=3, n_clients=6, active=3):
    return bench.training_workload(rounds=rounds, n_clients=n_clients, active=active)


# ------------------------------------------------------------------------- the table

def test_table_aligns_rows_and_prints_notes_and_skips():
    rows = [bench.Ratio("delay metrics", "dense trace", 0.03, 0.002, baseline="plain numpy"),
            bench.Ratio("FedAvg vs Flower", "digits", 12.0, 0.25, baseline="Flower 1.0", note="final loss 1.5 and 1.5"),
            bench.Skipped("GPU", "no CUDA device present")]
    lines = bench.format_table(rows).splitlines()
    assert lines[0].startswith("delay metrics:") and "15.0x" in lines[0] and "plain numpy 30.0 ms" in lines[0]
    assert "48.0x" in lines[1] and "Flower 1.0 12.00 s" in lines[1] and "fedverify 250.0 ms" in lines[1]
    assert lines[2].strip() == "final loss 1.5 and 1.5" and lines[2].startswith(" ")
    assert lines[3].startswith("GPU:") and "skipped" in lines[3] and "(no CUDA device present)" in lines[3]
    assert lines[0].index("x ") == lines[1].index("x ")             # speed-ups right-aligned in one column
    assert lines[0].index("fedverify") == lines[1].index("fedverify")


@pytest.mark.slow
def test_bench_quick_prints_every_row(monkeypatch, capsys):
    """The CLI's table with the slow training rows replaced by their tiny-workload versions."""
    work, training_round_ratios = tiny_workload(rounds=2), bench.training_round_ratios
    monkeypatch.setattr(bench, "training_round_ratios", lambda quick: training_round_ratios(work=work))
    monkeypatch.setattr(bench, "flower_ratio", lambda quick: bench.Skipped("FedAvg vs Flower", "not run in this test"))
    monkeypatch.setattr(bench_checks, "batch_ratios", lambda quick: tiny_batch_rows())
    cnn_row = bench.cnn_local_step_ratio
    monkeypatch.setattr(bench, "cnn_local_step_ratio",
                        lambda quick, batch=10: cnn_row(quick=True, clients=3, batch=batch, steps=1))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["bench", "--quick"]) == 0
    out = capsys.readouterr().out
    for row in ("delay metrics:", "Monte-Carlo E[tau_max], gap sampling:", "Monte-Carlo E[tau_max], whole traces:",
                "Monte-Carlo E[tau_max], on/off cycles (FedAU cyclic, cycles):",
                "Monte-Carlo E[tau_max], deterministic cyclic (Case 3, one trace):",
                "Monte-Carlo E[tau_max], diurnal groups (auto):",
                "Monte-Carlo E[tau_max], selection among available (uniform, auto):",
                "Monte-Carlo E[tau_max], selection among available (reshuffled, auto):",
                "training rounds, FedAvg:", "training rounds, FedSUM:", "local steps, MNIST CNN, batch 10:",
                "local steps, MNIST CNN, batch 128:", "FedAvg vs Flower:",
                "GPU:", "check (default), batched:", "conformance search:", "rounds/s per run, batch of 25:"):
        assert sum(line.startswith(row) for line in out.splitlines()) == 1, row
    assert out.startswith("fedverify bench --quick:")


def tiny_batch_rows():
    return [bench_checks.check_ratio("check (default), batched", ["--rounds", "20", "--seeds", "2",
                                                                   "--algorithms", "fedsum", "fedavg"], "tiny"),
            bench_checks.conformance_ratio(examples=2), bench_checks.rounds_per_second_ratio(rounds=10)]


@pytest.mark.slow
def test_batch_rows_compare_the_same_numbers():
    """Each batched row runs the same work both ways and says the numbers agree."""
    rows = tiny_batch_rows()
    assert [r.baseline for r in rows] == ["one run at a time"] * 3
    assert rows[0].note == "12 measured values, identical on both sides"
    assert rows[1].note == "same cases and worst margin"
    assert rows[2].note.endswith("histories bit-identical") and "rounds/s batched" in rows[2].note
    assert all(r.baseline_seconds > 0 and r.fast_seconds > 0 for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [2, 40])                     # one pass, and passes of 16 samples
def test_cnn_row_measures_equal_work(batch):
    row = bench.cnn_local_step_ratio(quick=True, clients=3, batch=batch, steps=1)
    assert row.name.endswith(f"batch {batch}")
    assert row.baseline == "vmap(grad)" and row.baseline_seconds > 0 and row.fast_seconds > 0
    assert float(row.note.split()[3]) < 1e-4                   # the same gradients, to float32 rounding


@pytest.mark.slow
def test_training_rows_measure_both_sides():
    rows = bench.training_round_ratios(work=tiny_workload(rounds=2))
    assert [r.name for r in rows] == ["training rounds, FedAvg", "training rounds, FedSUM"]
    assert all(r.baseline == "per-client loop" and r.baseline_seconds > 0 and r.fast_seconds > 0 for r in rows)


# --------------------------------------------------------------------------- Flower

def test_flower_absent_prints_the_skip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "flwr", None)          # import flwr → ImportError
    for name in [m for m in sys.modules if m.startswith("flwr.")]:   # submodules an earlier test imported
        monkeypatch.delitem(sys.modules, name)
    for name in ("verify.bench.flower_baseline", "verify.bench.flower_workload"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        monkeypatch.delattr(bench, name.rsplit(".", 1)[1], raising=False)
    row = bench.flower_ratio(quick=True)
    assert isinstance(row, bench.Skipped)
    line = bench.format_table([row])
    assert line.startswith("FedAvg vs Flower:") and "skipped" in line and "install fedverify[flower]" in line
    assert "\n" not in line


def test_flower_failing_to_start_is_a_skip_with_the_reason(monkeypatch):
    peers = peers_module()

    def refuse(*args, **kwargs):
        raise RuntimeError("Ray could not start\nno resources")

    monkeypatch.setattr(peers, "run_flower", refuse)
    row = bench.flower_ratio(work=tiny_workload())
    assert isinstance(row, bench.Skipped) and row.reason == "Flower's simulation did not run: no resources"


def test_the_shipped_flower_app_names_components_that_import():
    """The App ``run_flower`` hands to ``flwr run`` lies in the package, and its pyproject.toml
    (package data) names a ServerApp and a ClientApp of the package that Flower can load."""
    peers = peers_module()
    import fnmatch
    import importlib
    from pathlib import Path

    try:
        import tomllib
    except ImportError:                                # Python 3.10
        import tomli as tomllib
    from flwr.clientapp import ClientApp
    from flwr.common.config import validate_config
    from flwr.serverapp import ServerApp

    app = peers.app_dir()
    assert app == Path(peers.__file__).resolve().parent / "flower-app"
    config = tomllib.loads((app / "pyproject.toml").read_text(encoding="utf-8"))
    valid, errors, _ = validate_config(config, check_module=True, project_dir=app)  # as flwr run checks it
    assert valid, errors
    components = config["tool"]["flwr"]["app"]["components"]
    for kind, cls in (("serverapp", ServerApp), ("clientapp", ClientApp)):
        module, _, attribute = components[kind].partition(":")
        assert module.startswith("verify.bench.")                          # shipped with the package
        assert isinstance(getattr(importlib.import_module(module), attribute), cls)
    assert set(config["tool"]["flwr"]["app"]["config"]) == {"workload", "result"}
    # every file of the App is package data of verify.bench (pyproject.toml's setuptools entry)
    root = Path(bench.__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["package-data"]["verify.bench"]
    files = [p.relative_to(app.parent).as_posix() for p in app.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert files and all(any(fnmatch.fnmatch(f, pattern) for pattern in patterns) for f in files), (files, patterns)


def test_shared_batches_are_the_engines():
    peers = peers_module()
    from algorithms.noise import NoiseStream

    problem = tiny_workload().problem
    batches = peers.SharedBatches(7, tuple(int(s) for s in problem.data.sizes), problem.batch_size)
    everyone = torch.arange(problem.n_clients)
    for t, k in [(0, 0), (3, 2)]:
        engine = problem.data.batch_positions(everyone, NoiseStream(7).draws(t, k, everyone), problem.batch_size)
        for client in range(problem.n_clients):
            assert torch.equal(batches.rows(client, t, k), engine[client])


def test_flower_fedavg_computes_the_engines_fedavg(identity, tmp_path):
    """Same data, batches, participation (full, partial and empty rounds) and aggregation:
    the final parameters agree to float32 rounding, and so do the losses. The App's own
    ServerApp and ClientApp run in process, on Flower's strategy and messages, reading the run
    config's workload file and writing its result file as under ``flwr run``; ``flwr run``
    itself is left to the slow test below, the Flower App tests and the bench."""
    peers = peers_module()
    from flwr.app import Context, RecordDict

    from verify.bench import flower_workload

    work = tiny_workload()
    mask = np.ones((4, work.problem.n_clients), dtype=bool)
    mask[1, ::2] = False
    mask[2] = False
    mask[3, 1:] = False
    work = bench.TrainingWorkload(work.problem, Trace(mask), work.eta_l, work.local_steps, work.batch_size, "",
                                  work.factory)
    run_config = {"workload": str(tmp_path / "workload.npz"), "result": str(tmp_path / "result.json")}
    flower_workload.write_workload(run_config["workload"], problem=work.problem, mask=mask,
                                   initial=peers.initial_weight(work.problem), seed=0, eta_l=work.eta_l,
                                   local_steps=work.local_steps)
    grid = LocalGrid(flower_workload.client_app, n=work.problem.n_clients)
    for context in grid.contexts.values():
        context.run_config = dict(run_config)
    flower_workload.server_app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                             run_config=dict(run_config)))
    out = flower_workload.read_result(run_config["result"])
    assert out["rounds"] == 4 and out["round-seconds"] > 0 and out["rounds-end"] >= out["rounds-start"]
    engine = bench._engine_fedavg(work).final_params
    params = peers.engine_params(out["weight"])
    assert sorted(grid.trained) == sorted((t, int(i)) for t in range(4) for i in np.flatnonzero(mask[t]))
    assert params.shape == engine.shape
    assert np.abs(engine).max() > 1e-3                           # it trained
    np.testing.assert_allclose(params, engine, rtol=0, atol=1e-5)
    reference = work.problem.to(dtype=torch.float64)
    losses = [float(reference.loss(torch.as_tensor(x))) for x in (engine, params)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


def test_the_app_without_its_run_config_says_who_runs_it(identity):
    peers_module()
    from flwr.app import Context, RecordDict

    from verify.bench import flower_workload

    with pytest.raises(ValueError, match="run_flower"):
        flower_workload.server_app(LocalGrid(flower_workload.client_app, n=2),
                                   Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                           run_config={"workload": "", "result": ""}))


@pytest.mark.slow
@pytest.mark.longest
def test_flower_row_runs_the_shipped_app_with_flwr_run(monkeypatch):
    """The row end to end on a tiny workload: ``flwr run`` of the shipped App (SuperLink, Ray,
    one SuperNode per client), the same final model as the engine's, the rounds timed apart
    from start-up and shutdown."""
    peers = peers_module()
    runs, run_flower = [], peers.run_flower

    def recorded(*args, **kwargs):
        runs.append(run_flower(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(peers, "run_flower", recorded)
    work = tiny_workload()
    row = bench.flower_ratio(work=work)
    assert isinstance(row, bench.Ratio), row
    (run,) = runs
    assert run.rounds == work.rounds
    assert run.round_seconds > 0 and run.startup_seconds > 0 and run.shutdown_seconds >= 0
    assert run.overhead_seconds == pytest.approx(run.startup_seconds + run.shutdown_seconds)
    np.testing.assert_allclose(run.params, bench._engine_fedavg(work).final_params, rtol=0, atol=1e-5)
    assert row.baseline == f"Flower {peers.version()}" and row.baseline_seconds == run.round_seconds
    assert "final loss fedverify" in row.note and "Flower start-up" in row.note and "and shutdown" in row.note and "not counted" in row.note


# ------------------------------------------------------------------------------ GPU

def test_gpu_rows_are_skipped_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rows = bench.gpu_ratios(quick=True)
    assert len(rows) == 1 and isinstance(rows[0], bench.Skipped)
    line = bench.format_table(rows)
    assert line.startswith("GPU:") and "skipped" in line and "no CUDA device present" in line


def test_device_rows_run_on_the_cpu():
    """The GPU rows' code, pointed at the CPU on tiny inputs (it checks its own results)."""
    delay = bench.gpu_delay_ratio("cpu", 50, 130)
    assert delay.baseline == "fedverify CPU" and "cells/s" in delay.note
    training = bench.gpu_training_ratio("cpu", 2, n_clients=12, active=4, n_samples=400, dim=5)
    assert "rounds/s" in training.note and training.fast_seconds > 0
