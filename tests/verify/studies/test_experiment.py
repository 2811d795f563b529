"""`fedverify experiment fedsum`: FedSUM Section 5 on the embedded digits and on MNIST-format files."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.algorithms.test_data import write_idx_set
from tests.verify.test_cli import run_main, run_module
from verify.studies import experiment


@pytest.mark.slow
def test_runs_share_traces_and_record_loss_accuracy_and_communication():
    problem = experiment.build_problem("digits", n_clients=10, alpha=0.5, batch_size=16, seed=0)
    result = experiment.fedsum_experiment(problem, rounds=12, algorithms=("fedavg", "fedsum", "scaffold"),
                                          patterns=("P1", "P2"), local_steps=3, eta_l=0.1, record_every=4)
    assert set(result.curves) == {(a, p) for a in ("fedavg", "fedsum", "scaffold") for p in ("P1", "P2")}
    for (name, _), curve in result.curves.items():
        assert curve["rounds"].tolist() == [0, 4, 8, 12]      # x_T included: the final model is what a reader wants
        assert np.all((curve["accuracy"] >= 0) & (curve["accuracy"] <= 1))
        assert curve["communication"][0] == 0 and np.all(np.diff(curve["communication"]) > 0)
    # every algorithm starts from the same model: identical round-0 loss and accuracy
    first = {c["loss"][0] for c in result.curves.values()}
    assert len(first) == 1
    # SCAFFOLD sends twice FedAvg's floats each way on the same trace
    fedavg, scaffold = result.curves[("fedavg", "P1")], result.curves[("scaffold", "P1")]
    assert np.allclose(scaffold["communication"], 2 * fedavg["communication"])
    assert all(np.isfinite(c["loss"]).all() for c in result.curves.values()) and not result.stopped
    assert "fedsum" in result.table()


@pytest.mark.slow
def test_command_on_mnist_format_files(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_idx_set(data, "train", n=40, gz=True)
    write_idx_set(data, "test", n=10)
    out = tmp_path / "out"
    done = run_module("experiment", "fedsum", "--dataset", "mnist", "--root", str(data), "--clients", "4",
                      "--rounds", "3", "--local-steps", "1", "--batch", "4", "--algorithms", "fedsum", "fedavg",
                      "--patterns", "P1", "--record-every", "1", "-o", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    # the expected time up front and a line per finished run, so a long experiment is never silent
    assert done.stderr.startswith("fedverify: experiment: 2 runs of 3 rounds") and " about " in done.stderr
    assert "run 1/2: fedsum on P1: loss " in done.stdout and "run 2/2: fedavg on P1" in done.stdout
    report = json.loads((out / "experiment.json").read_text())
    assert {r["algorithm"] for r in report["runs"]} == {"fedsum", "fedavg"}
    assert report["setting"]["dim"] == 51_480  # FedSUM Table 2's MNIST CNN
    assert (out / "experiment.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "experiment.csv").read_text().startswith("algorithm,pattern,round,loss,accuracy,models_sent")


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (("--dataset", "mnist", "--root", "missing-folder"), "train-images-idx3-ubyte"),
    (("--algorithms", "fedsun"), "unknown algorithm 'fedsun'"),
    (("--patterns", "P9"), "unknown pattern 'P9'"),
    (("--alpha", "0"), "--alpha: must be positive, got 0"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    done = run_main("experiment", "fedsum", *args)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1


def _small_cnn(name, n_clients):
    """The check's digits CNN on 300 samples: the same code path as ``--problem cnn-digits``
    at a size whose constants are estimated in seconds, not minutes."""
    import torch

    from algorithms.data import load
    from algorithms.problems import Classifier

    X, y = load("digits", None, "train")
    return Classifier.from_arrays(X[:300], y[:300], n_clients, 0.5, model="cnn", dataset="digits", seed=0,
                                  batch_size=16, dtype=torch.float64)


@pytest.mark.slow
@pytest.mark.longest
@pytest.mark.parametrize("source", ["estimate", "problem"])
def test_check_on_the_cnn_labels_estimated_constants(tmp_path, source, monkeypatch, capsys):
    import verify.cli.commands.check
    from verify import cli

    monkeypatch.setattr(verify.cli.commands.check, "build_problem", _small_cnn)
    code = cli.main(["check", "--problem", "cnn-digits", "--algorithms", "fedsum", "--patterns", "P1", "--clients", "4",
                     "--rounds", "4", "--seeds", "2", "--constants", source, "--no-progress", "-o", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "estimated constants (L, sigma2, f_star, delta_f)" in out
    report = json.loads((tmp_path / "check.json").read_text())
    constants = report["problem"]["constants"]
    assert constants["F0"]["exact"] and not constants["L"]["exact"]
    if source == "problem":      # the problem's own estimates carry no uncertainty
        assert constants["L"]["uncertainty"] is None
    else:                        # non-convex: f* and Δ_f come as rigorous intervals from f ≥ 0
        assert "autograd" in constants["L"]["method"] and constants["L"]["uncertainty"] is not None
        assert constants["f_star"]["interval"] == "below" and constants["delta_f"]["interval"] == "above"
        assert constants["f_star"]["uncertainty"] == pytest.approx(constants["f_star"]["value"])
    assert report["rows"][0]["verdict"] in ("holds", "violated", "inconclusive")


@pytest.mark.slow
def test_a_diverged_run_is_still_written(tmp_path):
    result = experiment.ExperimentResult({"rounds": 6})
    result.curves[("fedavg", "P1")] = {"rounds": np.array([0, 5]), "loss": np.array([2.3, np.inf]),
                                       "accuracy": np.array([0.1, np.nan]), "communication": np.array([0.0, 10.0])}
    result.stopped[("fedavg", "P1")] = "loss became inf at round 5"
    json_path, csv_path, png_path = experiment.write(result, tmp_path)
    run = json.loads(json_path.read_text())["runs"][0]
    assert run["loss"] == [2.3, "inf"] and run["stopped"] == "loss became inf at round 5"
    assert csv_path.read_text().splitlines()[2].startswith("fedavg,P1,5,inf")
    assert png_path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_the_paper_decay_is_applied_to_every_algorithm_once():
    """Decayed runs equal runs whose local rate is rebuilt each round; FedAWE decays once."""
    import algorithms
    from participation import preset

    problem = experiment.build_problem("digits", n_clients=6, alpha=0.5, batch_size=8, seed=0, limit=240)
    result = experiment.fedsum_experiment(problem, rounds=6, algorithms=("fedavg", "fedawe"), patterns=("P1",),
                                          local_steps=2, eta_l=0.1, record_every=1)
    assert result.setting["local_schedule"] == "sqrt"
    trace = preset("P1", n_clients=6, per_round=1).sample(6, seed=0)
    fedawe = algorithms.run(algorithms.get("fedawe", eta_l=0.1, local_steps=2), problem, trace, seed=0)
    assert np.allclose(result.curves[("fedawe", "P1")]["loss"][:6], fedawe.loss, rtol=1e-5)
    import torch

    final = float(problem.loss(torch.as_tensor(fedawe.final_params, dtype=problem.dtype)))
    assert result.curves[("fedawe", "P1")]["loss"][6] == pytest.approx(final, rel=1e-5)
    constant = experiment.fedsum_experiment(problem, rounds=6, algorithms=("fedavg",), patterns=("P1",),
                                            local_steps=2, eta_l=0.1, record_every=1, local_schedule=None)
    decayed, flat = result.curves[("fedavg", "P1")]["loss"], constant.curves[("fedavg", "P1")]["loss"]
    assert decayed[1] == pytest.approx(flat[1], rel=1e-6) and not np.allclose(decayed[2:], flat[2:])


def _tiny():
    return experiment.build_problem("digits", n_clients=6, alpha=0.5, batch_size=8, seed=0, limit=240)


def test_saved_runs_are_read_back_not_rerun(tmp_path):
    problem = _tiny()
    options = dict(algorithms=("fedavg", "fedsum"), patterns=("P1",), local_steps=2, eta_l=0.1, record_every=2)
    assert experiment.pending_runs(problem, 4, tmp_path, "digits-tiny", **options) == 2
    first = experiment.fedsum_experiment(problem, 4, runs_folder=tmp_path, problem_key="digits-tiny", **options)
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert experiment.pending_runs(problem, 4, tmp_path, "digits-tiny", **options) == 0
    seen = []
    again = experiment.fedsum_experiment(problem, 4, runs_folder=tmp_path, problem_key="digits-tiny",
                                         on_run=lambda done, a, p, c, s: seen.append((a, s)), **options)
    assert seen == [("fedavg", 0.0), ("fedsum", 0.0)]
    for run in first.curves:
        for k in ("rounds", "loss", "accuracy", "communication"):
            assert np.array_equal(first.curves[run][k], again.curves[run][k])
    # another problem, rate or horizon is another run
    assert experiment.pending_runs(problem, 4, tmp_path, "another problem", **options) == 2
    assert experiment.pending_runs(problem, 4, tmp_path, "digits-tiny", **{**options, "eta_l": 0.2}) == 2
    assert experiment.pending_runs(problem, 6, tmp_path, "digits-tiny", **options) == 2
    # a damaged run file is named, not silently rerun or trusted
    victim = sorted(tmp_path.glob("*.json"))[0]
    victim.write_text("{not json")
    with pytest.raises(ValueError, match=victim.name):
        experiment.fedsum_experiment(problem, 4, runs_folder=tmp_path, problem_key="digits-tiny", **options)


def test_tuning_picks_the_lowest_final_loss_and_never_a_diverged_rate(tmp_path):
    problem = _tiny()
    grid = ((0.1, 1.0), (0.01, 10.0), (1e20, 1e20))
    rows = experiment.tune_rates(problem, 4, pattern="P1", grid=grid, local_steps=2, record_every=2,
                                 runs_folder=tmp_path)
    assert [(r["eta_0"], r["eta_g"]) for r in rows] == list(grid)
    assert rows[2]["loss"] is None and not rows[2]["chosen"]            # η_0 = 1e20 overflows
    finite = [r for r in rows if r["loss"] is not None]
    assert sum(r["chosen"] for r in rows) == 1
    assert next(r for r in rows if r["chosen"])["loss"] == min(r["loss"] for r in finite)
    # the chosen FedAvg run is an ordinary saved run: the experiment at that rate reads it back
    chosen = next(r for r in rows if r["chosen"])
    seen = []
    experiment.fedsum_experiment(problem, 4, algorithms=("fedavg",), patterns=("P1",), local_steps=2,
                                 record_every=2, eta_l=chosen["eta_0"], eta_g=chosen["eta_g"], runs_folder=tmp_path,
                                 on_run=lambda *a: seen.append(a[-1]))
    assert seen == [0.0]
    assert "<- chosen" in experiment.tuning_table(rows) and "diverged" in experiment.tuning_table(rows)
    with pytest.raises(ValueError, match="diverged at every"):
        experiment.tune_rates(problem, 3, grid=((1e20, 1e20),), local_steps=2, record_every=1)


@pytest.mark.slow
def test_command_tunes_then_resumes(tmp_path):
    out = tmp_path / "out"
    args = ("experiment", "fedsum", "--dataset", "digits", "--limit", "120", "--clients", "4", "--rounds", "2",
            "--local-steps", "1", "--batch", "4", "--algorithms", "fedsum", "--patterns", "P1", "--tune",
            "--record-every", "1", "-o", str(out))
    done = run_main(*args)
    assert done.returncode == 0, done.stderr
    assert "tuning (eta_0, eta_g) on FedAvg under P1: 4 runs of 2 rounds to go" in done.stderr
    assert done.stdout.count("<- chosen") == 2                         # as it is found, and in the summary
    rows = (out / "tuning.csv").read_text().splitlines()
    assert rows[0] == ",".join(experiment.TUNING_FIELDS) and len(rows) == 5
    again = run_main(*args)
    assert again.returncode == 0, again.stderr
    assert "0 runs of 2 rounds to go" in again.stderr and "(1 read back from" in again.stderr
    assert "run 1/1: fedsum on P1" in again.stdout and "(read back)" in again.stdout


@pytest.mark.slow
def test_embedded_mnist_is_the_default_with_the_paper_network():
    from verify.cli import build_parser

    args = build_parser().parse_args(["experiment", "fedsum"])
    assert args.dataset == "mnist-5k"
    problem = experiment.build_problem("mnist-5k", n_clients=10, batch_size=10, limit=200)
    assert problem.dim == 51_480 and problem.image_shape == (1, 28, 28)   # FedSUM Table 2's MNIST CNN


@pytest.mark.slow
def test_bad_tuning_pattern_is_one_line_exit_2():
    done = run_module("experiment", "fedsum", "--tune", "--tune-pattern", "P7")
    assert done.returncode == 2 and "unknown pattern 'P7' (--tune-pattern)" in done.stderr
    assert done.stderr.count("\n") == 1


def test_ranking_and_rounds_to_read_the_curves():
    result = experiment.ExperimentResult({"rounds": 20})
    rounds = np.array([0, 10, 20])
    result.curves[("a", "P1")] = {"rounds": rounds, "loss": np.array([2.0, 1.0, 0.5]),
                                  "accuracy": np.array([0.1, 0.5, 0.8]), "communication": np.zeros(3)}
    result.curves[("b", "P1")] = {"rounds": rounds, "loss": np.array([2.0, 0.8, 0.6]),
                                  "accuracy": np.array([0.1, 0.6, 0.7]), "communication": np.zeros(3)}
    result.curves[("c", "P1")] = {"rounds": rounds, "loss": np.array([2.0, 0.1, np.inf]),
                                  "accuracy": np.array([0.1, 0.9, np.nan]), "communication": np.zeros(3)}
    result.curves[("a", "P2")] = result.curves[("a", "P1")]
    result.stopped[("c", "P1")] = "loss became inf at round 20"
    assert [n for n, _ in experiment.ranking(result, "P1")] == ["a", "b", "c"]
    # at round 15 the rows of round 10 count; a run that stopped later is still last
    assert experiment.ranking(result, "P1", at_round=15) == [("b", 0.8), ("a", 1.0), ("c", float("inf"))]
    assert experiment.ranking(result, "P1", metric="accuracy", at_round=19)[0][0] == "b"
    assert experiment.ranking(result, "P1", window=2)[:2] == [("b", pytest.approx(0.7)), ("a", pytest.approx(0.75))]
    assert experiment.rounds_to(result, "P1", 0.9) == {"a": 20, "b": 10, "c": 10}
    assert experiment.rounds_to(result, "P2", 0.1) == {"a": None}
    with pytest.raises(ValueError, match="metric"):
        experiment.ranking(result, "P1", metric="speed")
    with pytest.raises(ValueError, match="no runs"):
        experiment.ranking(result, "P3")


@pytest.mark.slow
def test_a_written_result_loads_back_and_summarises(tmp_path):
    result = experiment.fedsum_experiment(_tiny(), 4, algorithms=("fedavg", "fedsum"), patterns=("P1", "P2"),
                                          local_steps=2, eta_l=0.1, record_every=2)
    result.tuning = [{"eta_0": 0.1, "eta_g": 1.0, "pattern": "P1", "rounds": 4, "loss": 1.0, "accuracy": 0.5,
                      "chosen": True}]
    result.stopped[("fedsum", "P2")] = "loss became nan at round 3"
    experiment.write(result, tmp_path)
    back = experiment.load_result(tmp_path)
    assert back.setting == result.setting and back.tuning == result.tuning and back.stopped == result.stopped
    for key, curve in result.curves.items():
        for k in curve:
            assert np.array_equal(back.curves[key][k], curve[k], equal_nan=True)
    text = experiment.summary_markdown(back, at_rounds=(2,), window=1, level=10.0)
    assert text.count("| rank | loss at round 2 | final loss | final test accuracy |") == 2
    assert "first round with training loss ≤ 10: " in text
    p2 = text[text.index("**P2**"):]
    assert p2.index("fedavg") < p2.index("fedsum inf")                   # the stopped run ranks last
    (tmp_path / "experiment.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not an experiment.json"):
        experiment.load_result(tmp_path)
