"""The study of several seeds: intervals, paired differences, readings, and the saved runs it joins."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from tests.verify.test_cli import run_main
from verify import algorithm_styles
from verify.studies import experiment, seed_study


# ------------------------------------------------------------------------ statistics

@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=8))
def test_interval_excludes_zero_exactly_when_the_t_test_rejects(values):
    values = np.asarray(values)
    if np.ptp(values) < 1e-6 * (1 + np.abs(values).max()):
        return                                                   # no spread: the t statistic is undefined
    mean, half, n = seed_study.interval(values)
    assert n == values.size and mean == pytest.approx(values.mean())
    p = stats.ttest_1samp(values, 0.0).pvalue
    if abs(p - 0.05) > 1e-6:
        assert (abs(mean) > half) == (p < 0.05)


def test_interval_covers_the_true_mean_95_percent_of_the_time():
    """Monte-Carlo coverage of three normal draws: the t interval's promise, checked by counting."""
    rng = np.random.default_rng(3)
    draws = rng.normal(1.5, 0.7, size=(1500, 3))
    covered = 0
    for row in draws:
        mean, half, _ = seed_study.interval(row)
        covered += abs(mean - 1.5) <= half
    assert covered / 1500 == pytest.approx(0.95, abs=0.017)      # 3 binomial standard deviations


def test_interval_of_one_value_has_no_width_and_its_verdict_says_so():
    mean, half, n = seed_study.interval([0.3])
    assert (mean, n) == (0.3, 1) and math.isnan(half)
    assert seed_study.verdict(mean, half, "a", "b") == "one seed: unresolved"


@pytest.mark.parametrize("mean,half,said", [(-0.3, 0.1, "a lower"), (0.3, 0.1, "b lower"), (0.05, 0.1, "unresolved"),
                                            (-0.1, 0.1, "unresolved")])
def test_verdict_names_the_lower_only_when_the_interval_excludes_zero(mean, half, said):
    assert seed_study.verdict(mean, half, "a", "b") == said


# ------------------------------------------------------------------------ readings

def curve(rounds, loss, sent=None):
    rounds = np.asarray(rounds, dtype=np.int64)
    loss = np.asarray(loss, dtype=np.float64)
    sent = np.asarray(rounds * 2.0 if sent is None else sent, dtype=np.float64)
    return {"rounds": rounds, "loss": loss, "accuracy": np.full(loss.shape, 0.5), "communication": sent}


def test_reading_is_the_mean_of_the_points_ending_at_the_round():
    c = curve([0, 10, 20, 30, 40], [5.0, 4.0, 3.0, 2.0, 1.0])
    assert seed_study.reading(c, 25) == pytest.approx((4 + 3 + 5) / 3)
    assert seed_study.reading(c, 30, window=2) == pytest.approx(2.5)
    assert seed_study.reading(c) == pytest.approx(2.0)
    assert seed_study.reading(c, 41) is None                    # the run ended before


def test_late_variability_ignores_a_trend_and_measures_the_scatter():
    rounds = np.arange(0, 501, 10)
    line = curve(rounds, 3.0 - 0.004 * rounds)
    assert seed_study.late_variability(line) == pytest.approx(0.0, abs=1e-12)
    wiggle = np.where(np.arange(rounds.size) % 2 == 0, 0.01, -0.01)
    noisy = curve(rounds, 3.0 - 0.004 * rounds + wiggle)
    keep = rounds > 500 - 160
    x, y = rounds[keep].astype(float), noisy["loss"][keep]
    design = np.column_stack([x, np.ones_like(x)])
    residual = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    assert seed_study.late_variability(noisy) == pytest.approx(np.sqrt(residual @ residual / (y.size - 2)), rel=1e-9)
    with pytest.raises(ValueError, match="fewer than 3"):
        seed_study.late_variability(curve([0, 400, 500], [1, 1, 1]), window=50)


def test_loss_at_models_interpolates_between_recorded_points():
    c = curve([0, 10, 20], [3.0, 2.0, 1.5], sent=[0.0, 40.0, 80.0])
    assert seed_study.loss_at_models(c, 60.0) == pytest.approx(1.75)
    assert seed_study.loss_at_models(c, 40.0) == pytest.approx(2.0)
    assert seed_study.loss_at_models(c, 81.0) is None


# ------------------------------------------------------------------------ saved runs

SETTING = {"n_clients": 4, "local_steps": 2, "eta_l": 0.1, "eta_g": 1.0, "local_schedule": "sqrt",
           "record_every": 10, "dim": 7, "noise": "philox"}


def save(folder, algorithm, pattern, seed, rounds, loss, *, eta_l=0.1):
    setting = {**SETTING, "eta_l": eta_l, "rounds": rounds, "seed": seed}
    key = {"dataset": "toy", "problem": f"toy seed {seed}", "clients_data": f"digest {seed}"}
    recorded = np.arange(0, rounds + 1, 10)
    experiment._write_run(experiment._run_path(folder, key, setting, algorithm, pattern), key, setting, algorithm,
                          pattern, curve(recorded, loss[:recorded.size]), None)


def losses(seed_effect, algorithm_effect, count=51):
    return 2.0 + seed_effect + algorithm_effect - 0.002 * np.arange(count) * 10


def test_paired_differences_remove_what_the_seeds_share(tmp_path):
    """The seeds move both algorithms by 0.3 each; a constant 0.01 between them is resolved."""
    for seed, shift in enumerate((0.0, 0.3, -0.3)):
        save(tmp_path, "fedsum-cr", "P1", seed, 100, losses(shift, 0.0))
        save(tmp_path, "scaffold", "P1", seed, 100, losses(shift, 0.01 + 0.001 * seed))
    study = seed_study.collect(tmp_path)
    assert study.seeds == [0, 1, 2] and study.algorithms == ["fedsum-cr", "scaffold"]
    d = study.difference("fedsum-cr", "scaffold", "P1", 100)
    assert d["n"] == 3 and d["mean"] == pytest.approx(-0.011) and d["verdict"] == "fedsum-cr lower"
    mean, half, _ = study.summary("scaffold", "P1", 100)        # unpaired: the seeds' spread swamps 0.01
    assert half > 0.3


def test_a_longer_run_replaces_the_shorter_one_whose_points_it_repeats(tmp_path):
    full = losses(0.0, 0.0)
    save(tmp_path, "fedsum", "P1", 0, 200, full)
    save(tmp_path, "fedsum", "P1", 0, 500, full)
    study = seed_study.collect(tmp_path)
    assert study.horizon[("fedsum", "P1", 0)] == 500 and study.runs[("fedsum", "P1")][0]["rounds"][-1] == 500


def test_two_horizons_that_disagree_are_refused(tmp_path):
    save(tmp_path, "fedsum", "P1", 0, 200, losses(0.0, 0.0))
    save(tmp_path, "fedsum", "P1", 0, 500, losses(0.0, 0.001))
    with pytest.raises(ValueError, match="disagree on their common rounds"):
        seed_study.collect(tmp_path)


def test_runs_of_two_settings_need_the_rates_chosen(tmp_path):
    save(tmp_path, "fedavg", "P1", 0, 100, losses(0, 0), eta_l=0.1)
    save(tmp_path, "fedavg", "P1", 0, 100, losses(0, 0.5), eta_l=0.01)
    with pytest.raises(ValueError, match="2 different settings"):
        seed_study.collect(tmp_path)
    study = seed_study.collect(tmp_path, eta_l=0.01)
    assert study.values("fedavg", "P1", 100)[0] == pytest.approx(np.mean(losses(0, 0.5)[8:11]))
    with pytest.raises(ValueError, match="no saved experiment runs at eta_l=0.5"):
        seed_study.collect(tmp_path, eta_l=0.5)


def test_final_difference_is_read_where_both_runs_reached(tmp_path):
    for seed in range(2):
        save(tmp_path, "fedsum-cr", "P1", seed, 500, losses(0.1 * seed, 0.0))
        save(tmp_path, "fedavg", "P1", seed, 200, losses(0.1 * seed, 0.02 + 0.001 * seed))
    study = seed_study.collect(tmp_path)
    assert study.common_end("fedsum-cr", "fedavg", "P1") == 200
    d = study.difference("fedsum-cr", "fedavg", "P1")
    assert d["round"] == 200 and d["mean"] == pytest.approx(-0.0205)
    text = seed_study.markdown(study, at_rounds=(100,), pairs=[("fedsum-cr", "fedavg")], reference="fedsum-cr")
    assert "| fedsum-cr − fedavg | 200 |" in text and "| fedsum-cr − fedavg | 100 |" in text
    assert "fedsum-cr's final budget under P1" in text


# ------------------------------------------------------------------------ the command

@pytest.mark.slow
def test_seeds_command_joins_invocations_and_writes_the_study(tmp_path):
    out = tmp_path / "out"
    common = ["experiment", "fedsum", "--dataset", "digits", "--clients", "6", "--patterns", "P1", "--record-every",
              "5", "-K", "2", "--no-progress", "-o", out]
    first = run_main(*common, "-T", "10", "--seeds", "0", "1", "--algorithms", "fedsum-cr", "fedavg", "--at-rounds", "5")
    assert first.returncode == 0, first.stderr
    second = run_main(*common, "-T", "5", "--seeds", "0", "1", "--algorithms", "scaffold")
    assert second.returncode == 0, second.stderr
    study = seed_study.collect(out)
    assert study.algorithms == ["fedsum-cr", "fedavg", "scaffold"] and study.seeds == [0, 1]
    assert {study.horizon[("scaffold", "P1", s)] for s in (0, 1)} == {5}
    shipped = (out / "seeds.md").read_text()
    assert "| fedsum-cr − scaffold | 5 |" in shipped and "| fedsum-cr − fedavg | 10 |" in shipped
    data = json.loads((out / "seeds.json").read_text())
    assert len(data["runs"]) == 6
    # one seed's runs are the experiment's own: the same numbers as one --seed invocation
    single = experiment.fedsum_experiment(
        experiment.build_problem("digits", n_clients=6, alpha=0.1, batch_size=32, seed=1), 10,
        algorithms=("fedavg",), patterns=("P1",), local_steps=2, eta_l=0.05, record_every=5, seed=1)
    np.testing.assert_array_equal(study.runs[("fedavg", "P1")][1]["loss"], single.curves[("fedavg", "P1")]["loss"])


@pytest.mark.parametrize("extra,message", [
    (["--seeds", "0", "--tune"], "--tune chooses the rates on one seed"),
    (["--seeds", "1", "1"], "--seeds repeats a seed: 1 1"),
    (["--seeds", "0", "--pairs", "fedsum"], "--pairs takes FIRST:SECOND, got 'fedsum'"),
    (["--seeds", "0", "--pairs", "fedsum:nope"], "unknown algorithm 'nope' in --pairs"),
    (["--at-rounds", "5"], "give --seeds"),
])
def test_bad_seed_options_are_one_line_exit_2(tmp_path, extra, message):
    done = run_main("experiment", "fedsum", "--dataset", "digits", "-T", "5", "--no-progress", "-o", tmp_path / "o",
                    *extra)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------ styles

def test_every_listed_algorithm_has_its_own_colour_and_line_style():
    pairs = [(c, str(d)) for c, d in algorithm_styles.STYLES.values()]
    assert len(set(c for c, _ in pairs)) == len(pairs)
    assert algorithm_styles.style("fedsum")["linestyle"] != algorithm_styles.style("fedsum-cr")["linestyle"]
    assert algorithm_styles.style("my-plugin") == algorithm_styles.style("my-plugin")


def test_the_experiments_algorithms_and_fedsum_b_are_listed():
    assert {*experiment.ALGORITHMS, "fedsum-b"} <= set(algorithm_styles.STYLES)


def test_one_experiment_result_is_a_one_seed_study():
    result = experiment.ExperimentResult({"rounds": 40, "seed": 3, "eta_l": 0.1})
    result.curves[("fedsum-cr", "P1")] = curve([0, 10, 20, 30, 40], [3.0, 2.0, 1.5, 1.2, 1.0], sent=[0, 5, 10, 15, 20])
    result.curves[("fedvarp", "P1")] = curve([0, 10, 20, 30, 40], [3.0, 1.8, 1.4, 1.1, 0.9], sent=[0, 5, 10, 15, 20])
    result.curves[("fedavg", "P1")] = curve([0, 10], [3.0, np.inf])
    result.stopped[("fedavg", "P1")] = "loss became inf"
    study = seed_study.SeedStudy.from_result(result)
    assert study.seeds == [3] and study.algorithms == ["fedsum-cr", "fedvarp"]    # the stopped run left out
    assert study.horizon[("fedvarp", "P1", 3)] == 40 and "rounds" not in study.setting
    assert study.at_models("fedvarp", "P1", 20.0) == {3: 0.9}
    assert study.final_models("fedsum-cr", "P1") == 20.0
    assert seed_study.default_pairs(study.algorithms) == [("fedsum-cr", "fedvarp")]
    assert seed_study.default_pairs(["fedavg", "fedsum", "fedsum-cr"]) == [
        ("fedsum-cr", "fedavg"), ("fedsum-cr", "fedsum"), ("fedsum", "fedavg")]
