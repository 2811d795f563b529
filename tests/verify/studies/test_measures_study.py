"""The measures study: its traces, the skip-empty control, the held-out model comparison and its
bootstrap, each against an independent computation; the saved study against a rerun of its cells
and against its report."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from verify.studies.measures_study import models
from verify.studies.measures_study.family import members, traces
from verify.studies.measures_study.runs import Design, skip_empty_measured

SAVED = Path(__file__).resolve().parents[3] / "docs" / "reproductions" / "participation-measures"


def test_every_sampler_gives_traces_of_the_design_at_about_its_rate():
    cases = traces(20, 200, 0.2, 2)
    assert len(cases) == 2 * len(members(20, 200, 0.2))
    assert {c.sampler for c in cases} >= {"uniform", "bernoulli", "cyclic", "reshuffled", "P3", "H8", "FedAWE sine",
                                          "markov", "on/off", "handover", "diurnal", "selected", "fleet"}
    for c in cases:
        assert c.mask.shape == (200, 20) and c.mask.dtype == bool
        assert 0.08 <= c.mask.mean() <= 0.3, c.key
    fleet = [c.mask for c in cases if c.sampler == "fleet"]
    assert not np.array_equal(fleet[0], fleet[1])                       # a new subset of devices per seed
    from participation.delays import delay_metrics

    tau = [delay_metrics(c.mask).tau_max for c in cases]
    assert min(tau) <= 5 and max(tau) >= 150                           # from cyclic blocks to the fleet's absences


def test_skipping_empty_rounds_equals_fedavg_which_does_nothing_in_them():
    """FedAvg leaves x unchanged in a round without participants, so the skip-empty weighting of
    the run on the compacted trace must give the full run's measured side exactly (noise-free)."""
    import algorithms
    from algorithms.problems import Quadratic
    from participation import Trace

    problem = Quadratic.random(5, 3, noise_std=0.0, seed=2)
    rng = np.random.default_rng(0)
    mask = rng.uniform(size=(30, 5)) < 0.2
    mask[:3] = False                                                   # empty rounds at the start, too
    mask[-4:] = False
    assert (~mask.any(axis=1)).sum() >= 8
    fedavg = algorithms.get("fedavg", eta_l=0.1, eta_g=1.0, local_steps=2)
    full = algorithms.run(fedavg, problem, Trace(mask))
    compact = algorithms.run(fedavg, problem, Trace(mask[mask.any(axis=1)]))
    assert skip_empty_measured(compact, mask, problem) == pytest.approx(float(np.mean(full.grad_norm2)), rel=1e-12)
    fedsum = algorithms.get("fedsum-cr", eta_l=0.1, eta_g=1.0, local_steps=2)       # FedSUM steps in them
    assert skip_empty_measured(algorithms.run(fedsum, problem, Trace(mask[mask.any(axis=1)])), mask, problem) != \
        pytest.approx(float(np.mean(algorithms.run(fedsum, problem, Trace(mask)).grad_norm2)), rel=1e-6)


def _loop_held_out(X, y, samplers):
    """Leave one sampler out by the normal equations, one fold at a time."""
    errors = np.empty(len(y))
    for s in sorted(set(samplers)):
        train = [j for j in range(len(y)) if samplers[j] != s]
        A = np.array([[1.0, *X[j]] for j in train])
        coef = np.linalg.solve(A.T @ A, A.T @ y[train])
        for j in range(len(y)):
            if samplers[j] == s:
                errors[j] = (y[j] - np.dot([1.0, *X[j]], coef)) ** 2
    return errors


def test_held_out_errors_equal_a_fold_by_fold_normal_equations_fit():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 3))
    y = X @ [0.5, -1.0, 0.2] + 0.1 * rng.standard_normal(40)
    samplers = [f"s{j % 7}" for j in range(40)]
    np.testing.assert_allclose(models.held_out_errors(X, y, samplers), _loop_held_out(X, y, samplers), rtol=1e-9)


def test_the_cluster_bootstrap_resamples_whole_samplers():
    diff = np.array([1.0, 1.0, 3.0, 5.0, 5.0, 5.0])
    samplers = np.array(["a", "a", "b", "c", "c", "c"])
    means = models._cluster_means(diff, samplers, 500, 1)
    picks = np.random.default_rng(1).integers(0, 3, size=(500, 3))
    groups = {0: [1.0, 1.0], 1: [3.0], 2: [5.0, 5.0, 5.0]}
    expected = [np.mean(sum((groups[k] for k in row), [])) for row in picks]
    np.testing.assert_allclose(means, expected, rtol=1e-12)


def test_a_measure_that_drives_the_response_is_found_and_a_noise_measure_is_not():
    rng = np.random.default_rng(0)
    rows, y, samplers = [], [], []
    for s in range(12):
        for _ in range(5):
            r = {"tau_max": rng.uniform(1, 100), "tau_avg": rng.uniform(1, 50), "longest_empty_run": rng.integers(0, 20),
                 "return_time": rng.uniform(1, 50)}
            rows.append(r)
            samplers.append(f"s{s}")
            y.append(0.3 * np.log1p(r["tau_max"]) + 0.8 * np.log1p(r["longest_empty_run"]) + 0.05 * rng.standard_normal())
    found = {c.model: c for c in models.compare(rows, y, samplers, 200, draws=500)}
    assert found["τ_max + τ_avg + longest_empty_run"].beyond_reference
    assert not found["τ_max + τ_avg + return_time"].beyond_reference
    assert found["τ_max + τ_avg"].improvement == 0.0


def test_unbounded_times_are_capped_at_the_trace_length():
    X = models.feature_matrix([{"mixing_time": math.inf, "tau_max": 3.0}], ["mixing_time", "tau_max"], 50)
    np.testing.assert_allclose(X, [[math.log(50), math.log1p(3.0)]])


def test_the_command_takes_only_its_own_options():
    from tests.verify.test_cli import run_main

    done = run_main("experiment", "measures", "--patterns", "P1")
    assert done.returncode == 2 and "experiment measures does not take --patterns" in done.stderr
    done = run_main("experiment", "measures", "--quick", "--part", "cnn")
    assert done.returncode == 2 and "has no CNN part" in done.stderr and "Traceback" not in done.stderr


def _saved():
    from verify.studies.measures_study import report

    if not (SAVED / "measures.json").is_file():
        pytest.skip("the saved study is not in this tree")
    return report.load(SAVED)


def test_the_saved_analysis_is_the_analysis_of_the_saved_runs():
    """Re-analysing the saved cells and traces gives the saved comparisons and controls exactly."""
    from verify.studies.measures_study import analyse

    saved = _saved()
    again = analyse(saved["result"])
    assert again["skip_empty"] == saved["analysis"]["skip_empty"]
    assert again["handover"] == saved["analysis"]["handover"]
    for a, b in zip(again["comparisons"], saved["analysis"]["comparisons"]):
        assert {k: a[k] for k in ("problem", "algorithm", "scale", "traces", "diverged")} == \
            {k: b[k] for k in ("problem", "algorithm", "scale", "traces", "diverged")}
        for x, y in zip(a["models"], b["models"]):
            assert x["model"] == y["model"]
            assert [x[k] for k in ("rmse", "improvement", "low", "high")] == \
                pytest.approx([y[k] for k in ("rmse", "improvement", "low", "high")], rel=1e-9, abs=1e-12)


def test_the_report_is_the_one_its_saved_data_generates():
    from verify.studies.measures_study import report

    saved = _saved()
    cnn = report.load(SAVED / "cnn") if (SAVED / "cnn" / "measures.json").is_file() else None
    page = (SAVED.parent / "participation-measures.md").read_text(encoding="utf-8")
    assert page == report.page(saved, cnn)


def test_the_saved_trace_measures_are_those_of_the_regenerated_traces():
    """The traces are regenerated from their samplers and seeds; their measures equal the saved ones."""
    from verify.studies.measures_study.study import _trace_measures, plan
    from verify.studies.measures_study.runs import Design

    saved = _saved()
    design = Design(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved["result"]["design"].items()})
    again = _trace_measures(plan(design))
    for name, rows in saved["result"]["measures"].items():
        for a, b in zip(again[name], rows):
            assert a == pytest.approx(b, rel=1e-12)


@pytest.mark.slow
def test_rerunning_saved_cells_gives_the_saved_numbers():
    """Two saved cells of the study (the quadratic with its skip-empty control, and a logistic one)
    recomputed from scratch equal the saved numbers."""
    from verify.studies.cell_store import cell_key, load_cell
    from verify.studies.measures_study.runs import Design, problem, run_cell
    from verify.studies.measures_study.study import plan

    saved = _saved()
    design = Design(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved["result"]["design"].items()})
    p = plan(design)
    for name, algorithm, scale, config in (p.cells[0], next(c for c in p.cells if c[0] != "quadratic")):
        stored = load_cell(SAVED, cell_key(config))
        assert stored is not None, (name, algorithm, scale)
        subset = p.traces[::9]
        fresh = run_cell(design, name, algorithm, scale, subset, problem(name, design))
        index = list(range(0, len(p.traces), 9))
        for column in ("measured", "skip_empty"):
            if stored.get(column) is None:
                continue
            want = np.array([[float(v) for v in stored[column][j]] for j in index])
            got = np.array([[float(v) for v in row] for row in fresh[column]])
            np.testing.assert_allclose(got, want, rtol=1e-9)


def test_worst_case_ranks_follow_a_measure_that_orders_the_worst_cases():
    """Rows of one equal-τ group whose worst cases rise with the longest empty run: ρ = 1 for it."""
    from participation.measures import longest_empty_run
    from verify.studies.measures_study.study import _sets_mask, worst_case_ranks

    traces = ["0 1 01 0 1 01", "0 - 1 0 1 01", "01 - - 0 1 0", "0 - - - 1 01"]
    runs = [longest_empty_run(_sets_mask(t, 2)) for t in traces]
    assert len(set(runs)) == len(runs)
    rows = [{"kind": "equal_tau", "group": "g", "algorithm": "fedsum-b", "trace": t, "n_clients": 2, "local_steps": 1,
             "eta_l": 0.1, "eta_g": 1.0, "worst_case": 1.0 + r} for t, r in zip(traces, runs)]
    ranks = {r["measure"]: r for r in worst_case_ranks(rows)}
    assert ranks["longest_empty_run"]["worst_case_mean_spearman"] == pytest.approx(1.0)
    assert ranks["longest_empty_run"]["groups_varying"] == 1


def test_the_readme_quotes_the_saved_findings():
    """The README's sentence on the study, recomputed from the saved analysis."""
    from verify.studies.measures_study.report import model_summary

    saved = _saved()
    readme = " ".join((SAVED.parents[2] / "README.md").read_text(encoding="utf-8").split())
    cells = {}
    for problem in saved["result"]["design"]["problems"]:
        summary = {m["model"]: m for m in model_summary(saved["analysis"], problem)}
        assert summary["τ_avg"]["rmse"] < summary["τ_max"]["rmse"], problem           # τ_avg alone predicts better
        cells[problem] = summary["τ_max + τ_avg + mixing_time"]["above"]
    assert cells["logistic α=0.1"] == cells["logistic α=0.5"] == 8
    assert f"{cells['logistic α=0.1']} of 9 (algorithm, step) cells on each Dirichlet split" in readme
    assert f"({cells['logistic α=∞']} of 9 on the i.i.d. split, {cells['quadratic']} of 9 on the quadratic)" in readme
    ranks = {r["measure"]: r for r in saved["worst_case"]}["longest_empty_run"]
    assert (f"ρ {ranks['worst_case_mean_spearman']:.2f} against {ranks['measured_mean_spearman']:.2f}"
            .replace("-", "−") in readme)


def test_the_readme_quotes_the_saved_cnn_findings():
    from verify.studies.measures_study import report

    if not (SAVED / "cnn" / "measures.json").is_file():
        pytest.skip("the saved CNN study is not in this tree")
    cnn = report.load(SAVED / "cnn")
    readme = " ".join((SAVED.parents[2] / "README.md").read_text(encoding="utf-8").split())
    problem = cnn["result"]["design"]["problems"][0]
    assert all(m["above"] == 0 for m in report.model_summary(cnn["analysis"], problem))
    ratios = [c["onoff"] / c["handover"] for c in cnn["analysis"]["handover"]]
    assert f"cost {min(ratios):.3g} to {max(ratios):.3g} times what groups that hand over" in readme
