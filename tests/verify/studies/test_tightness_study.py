"""The tightness study: FedSUM Thm 4.1 / Cor 4.1 at σ² = 0 beside the exact worst case; its store,
its findings, and the committed report that quotes its saved data."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.verify.test_cli import run_main
from verify.studies import tightness_study as ts

DOCS = Path(__file__).resolve().parents[3] / "docs" / "reproductions"
REPORT = DOCS / "fedsum-tightness.md"
SAVED = DOCS / "fedsum-tightness"


# ------------------------------------------------------------------------------ the library

def test_a_cell_key_is_the_hash_of_its_whole_config():
    config = ts.cell_config("fedsum-b", 3, 2, 0.05, 1.0, [[0, 1], [2]])
    assert ts.cell_key(config) == ts.cell_key(json.loads(json.dumps(config)))
    for change in ({"eta_l": 0.05 * (1 + 1e-15)}, {"sets": [[0, 1], [1]]}, {"algorithm": "fedsum"},
                   {"local_steps": 3}):
        assert ts.cell_key({**config, **change}) != ts.cell_key(config), change


def test_the_store_reads_back_only_a_record_of_its_own_config(tmp_path):
    config = ts.cell_config("fedsum-b", 2, 1, 0.1, 1.0, [[0], [1]])
    result = {"worst_case": 1.5, "primal": 1.5, "status": "optimal", "seconds": 0.1, "accuracy": 0.0}
    path = ts.save_cell(tmp_path, config, result)
    key = ts.cell_key(config)
    assert path.name == f"{key}.json"
    assert ts.load_cell(tmp_path, key)["worst_case"] == 1.5
    record = json.loads(path.read_text())
    record["config"]["eta_l"] = 0.2                        # a record whose config is not its name's
    path.write_text(json.dumps(record))
    assert ts.load_cell(tmp_path, key) is None
    path.write_text("{not json")
    assert ts.load_cell(tmp_path, key) is None


def test_relabelled_traces_are_one_trace():
    mask = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]], dtype=bool)
    assert ts.canonical(mask) == ts.canonical(mask[:, [2, 0, 1]])
    assert ts.canonical(mask) != ts.canonical(mask[::-1])


def test_an_equal_tau_group_has_one_tau_and_distinct_traces():
    from participation.delays import delay_metrics

    groups = ts.equal_tau_traces(ts.EqualTau(n_clients=3, rounds=6, draws=40, groups=3, per_group=3))
    assert groups
    for g in groups:
        keys = {ts.canonical(m) for m, _ in g["traces"]}
        assert len(keys) == len(g["traces"]) >= 2
        for mask, names in g["traces"]:
            d = delay_metrics(mask)
            assert (int(d.tau_max), float(d.tau_avg)) == (g["tau_max"], g["tau_avg"])
            assert names


def test_the_bound_at_sigma_zero_is_the_delay_term():
    """(12) at σ² = 0: 20 τ̂ (L Δ_f + F_0)/T; tight: 20 τ̂ L Δ_f/T + c τ_max F_0/T (c = 2, 3)."""
    b = ts.theorem_bounds("fedsum-b", 3, 2, 8, 0, 0.0, "corrected")
    assert b["bound_paper"] == pytest.approx(40 / 8) and b["bound_tight"] == pytest.approx(20 / 8)
    assert b["eta_g"] == pytest.approx(1.0) and b["eta_l"] == pytest.approx(1 / 20)
    b = ts.theorem_bounds("fedsum", 3, 2, 8, 3, 1.5, "printed")
    assert b["bound_paper"] == pytest.approx(40 * 3 / 8) and b["bound_tight"] == pytest.approx((60 + 9) / 8)
    assert b["eta_l"] == pytest.approx(1 / (10 * math.sqrt(3 * 2))) and not b["valid"]
    cr = ts.theorem_bounds("fedsum-cr", 3, 2, 8, 3, 1.5, "corrected")
    assert not cr["valid"] and any("E.6" in name for name in cr["failed_conditions"])


def test_a_worst_case_above_a_bound_is_a_counterexample():
    row = {"kind": "theorem", "worst_case": 2.0, "bound_paper": 3.0, "bound_tight": 1.5}
    found = ts.counterexamples([row])
    assert [f["bound"] for f in found] == ["Thm 4.1 (tight constants)"]
    assert ts.counterexamples([{"kind": "corollary", "worst_case": 1.0, "bound_corollary": 0.0}])


def test_the_quick_design_is_part_of_the_full_one():
    quick, full = ts.plan(ts.quick_design()), ts.plan(ts.design(max_rounds=4))
    assert set(quick.cells) <= set(full.cells)
    assert all(len(c["sets"]) <= 4 for c in quick.cells.values())


# ------------------------------------------------------------------------------ the command

def test_quick_and_rounds_together_are_a_usage_error(tmp_path):
    done = run_main("experiment", "tightness", "--quick", "--rounds", "4", "--output", tmp_path / "out")
    assert done.returncode == 2 and "--quick" in done.stderr


@pytest.mark.slow
def test_the_command_solves_saves_and_resumes(tmp_path):
    """A study cut to T = 2 solves each programme once; a second run reads them all back."""
    out = tmp_path / "study"
    design = ts.Design(rounds=(("fedsum-b", (2,)),), clients=(3,), local_steps=(2,), base_rounds=2,
                       appendix_rounds=2, corollary_traces=2, corollary_reps=200, equal_tau=None)
    p = ts.plan(design)
    assert ts.run(p, out) == len(p.cells) > 0
    assert ts.run(p, out) == 0
    result = ts.result_of(p, out)
    paths = ts.write(result, out)
    assert {path.name for path in paths} <= set(ts.FILES)
    assert ts.markdown(ts.load(out)) == (out / "tightness.md").read_text()
    assert not [f for f in ts.counterexamples(result["rows"]) if f["row"]["kind"] == "theorem"]


# ------------------------------------------------------------------------------ the committed study

def _saved():
    return ts.load(SAVED)


def test_the_report_quotes_the_saved_study():
    """tightness.md is the tables of tightness.json, the report quotes them whole, the figures exist."""
    result = _saved()
    text = ts.markdown(result)
    assert (SAVED / "tightness.md").read_text() == text
    report = REPORT.read_text()
    for block in text.split("\n### "):
        assert block.strip() in report, block.splitlines()[0]
    for name in ts.FILES:
        assert (SAVED / name).is_file(), name


def test_every_saved_row_is_its_saved_cells():
    """Each row's worst case is its cells' (their mean for Cor 4.1), and each cell is the record
    of its own config."""
    result = _saved()
    assert result["rows"]
    for row in result["rows"]:
        values = [ts.load_cell(SAVED, key)["worst_case"] for key in row["cells"]]
        assert row["worst_case"] == pytest.approx(float(np.mean(values)), rel=1e-12)
    for key in result["cells"]:
        assert ts.load_cell(SAVED, key) is not None


def test_the_report_states_the_counterexamples_of_the_saved_study():
    found = ts.counterexamples(_saved()["rows"])
    theorem = [f for f in found if f["row"]["kind"] != "corollary"]
    corollary = [f for f in found if f["row"]["kind"] == "corollary"]
    report = REPORT.read_text()
    assert f"worst cases above a Thm 4.1 bound: {len(theorem)}" in report
    assert f"worst cases above the printed Cor 4.1 bound: {len(corollary)}" in report
    assert {f["row"]["pattern"] for f in corollary} <= {"full"}


@pytest.mark.slow
def test_the_quick_study_reruns_to_the_saved_numbers():
    """Every programme of the quick design is in the committed store; one of each algorithm
    (T ≤ 4, full and partial participation) solved again gives the saved value."""
    p = ts.plan(ts.quick_design())
    assert not ts.pending(p, SAVED)
    chosen = {}
    for key, config in p.cells.items():
        partial = any(len(s) < config["n_clients"] for s in config["sets"])
        chosen.setdefault((config["algorithm"], partial), key)
    for key in [chosen[("fedsum-b", False)], chosen[("fedsum", True)], chosen[("fedsum-cr", True)]]:
        again = ts.solve_cell(p.cells[key])
        saved = ts.load_cell(SAVED, key)
        assert again["worst_case"] == pytest.approx(saved["worst_case"], rel=1e-6), p.cells[key]["algorithm"]


def test_the_corollary_counterexample_under_full_participation_runs_in_the_engine():
    """Cor 4.1 at σ² = 0 under full participation: E[τ_max] = 0, so (13) is 0; one quadratic
    f_i(x) = x²/2 for every client from x_0 = 1 (L = 1, f(x_0) − f* = 1/2 ≤ Δ_f, F_0 = 1) run by the
    engine at Thm 4.1's step sizes has (1/T) Σ ‖∇f(x_t)‖² > 0."""
    import torch

    import algorithms
    from algorithms.problems import Quadratic
    from bounds import fedsum

    n, k, t = 3, 2, 8
    problem = Quadratic(np.ones((n, 1)), np.zeros((n, 1)))
    constants = ts._constants(n, k, t)
    assert fedsum.corollary_4_1(constants, 0.0, 0.0).value == 0.0
    steps = fedsum.theorem_4_1(constants, 0, 0.0).step_sizes
    alg = algorithms.get("fedsum-b", eta_l=steps["eta_l"], eta_g=steps["eta_g"], local_steps=k)
    history = algorithms.run(alg, problem, np.ones((t, n), dtype=bool), x0=torch.ones(1, dtype=torch.float64))
    assert float(problem.loss(torch.ones(1, dtype=torch.float64))) == pytest.approx(0.5)
    # x_t = 0.9^t: the step η_g η_l K L = 1/10 of gradient descent on x²/2
    assert history.mean_grad_norm2 == pytest.approx(np.mean(0.81 ** np.arange(t)), rel=1e-12)
    assert history.mean_grad_norm2 > 0.5
