"""The delay study: a family spanning τ, each trace judged against FedSUM Thm 4.1 and its lemma."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import algorithms
from algorithms.problems import Quadratic
from participation.patterns import Cyclic, OnOffCycles, Uniform
from tests.verify.test_cli import run_main
from verify.studies import delay_study


def taus_by_definition(mask):
    """τ_t = t − a_{i,t} maximised over clients, a_{i,t} the last round ≤ t in which i took part
    (−1 before its first), FedSUM §2.2; returns (τ_max over t < T, τ_avg)."""
    rounds, n = mask.shape
    last = [-1] * n
    taus = []
    for t in range(rounds):
        for i in range(n):
            if mask[t, i]:
                last[i] = t
        taus.append(max(t - a for a in last))
    return max(taus), sum(taus) / rounds


def test_the_family_keeps_its_rate_and_spans_tau():
    members = delay_study.delay_family(20, 0.2, rounds=400, seed=0)
    labels = [m.label for m in members]
    assert len(set(labels)) == len(labels)
    same = [m for m in members if m.group == "same rate"]
    taus = {}
    for m in same:
        mask = np.asarray(delay_study._trace(m, 400, 0).mask)
        assert mask.mean() == pytest.approx(0.2, abs=0.02), m.label
        taus[m.label] = taus_by_definition(mask)[0]
    assert taus["cyclic S=4"] == 4                       # ⌈N/S⌉ − 1
    assert taus["on/off C=80"] == 64                     # the off stretch: 80 − round(0.2·80)
    assert taus["on/off C=80"] > 10 * taus["cyclic S=4"]
    fleet = [m for m in members if m.group == "fleet"]
    assert len(fleet) == 2 and all(np.asarray(m.pattern.mask).shape == (400, 20) for m in fleet)
    other = {m.label for m in members if m.group == "other rate"}
    assert other == {"cyclic S=2", "bernoulli p=0.1", "cyclic S=8", "bernoulli p=0.4"}


@pytest.mark.parametrize("rate", [0.0, 0.6, math.nan])
def test_a_rate_outside_the_family_is_refused(rate):
    with pytest.raises(ValueError, match="rate"):
        delay_study.delay_family(20, rate)


def test_slope_recovers_a_power_law():
    rows = [{"x": x, "y": 3.0 * x ** 0.5} for x in (1.0, 4.0, 9.0, 100.0)]
    assert delay_study.slope(rows, "x", "y") == pytest.approx(0.5)
    assert math.isnan(delay_study.slope(rows[:1], "x", "y"))


@pytest.fixture(scope="module")
def small_study():
    problem = Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.5, seed=0)
    members = [delay_study.Member("cyclic S=2", "same rate", Cyclic(6, 2)),
               delay_study.Member("uniform S=2", "same rate", Uniform(6, 2)),
               delay_study.Member("on/off C=12", "same rate", OnOffCycles.from_probability(6, 12, 1 / 3))]
    rows = delay_study.run("fedsum", problem, 60, members=members, seeds=[0, 1], local_steps=2)
    return problem, members, rows


def test_each_row_carries_its_traces_delays_and_theorem_4_1(small_study):
    problem, members, rows = small_study
    c = problem.constants()
    assert [r["regime"] for r in rows] == ["theorem"] * 3 + ["fixed"] * 3 + ["safe"] * 3
    for row, member in zip(rows[:3], members):
        mask = np.asarray(delay_study._trace(member, 60, 0).mask)
        tau_max, tau_avg = taus_by_definition(mask)
        assert (row["tau_max"], row["tau_avg"]) == (tau_max, pytest.approx(tau_avg))
        hat, m = max(1, tau_max), max(1.0, tau_avg)
        n, k, t = 6, 2, 60
        # FedSUM Thm 4.1's step sizes and eq. (12)'s two terms, from the theorem's statement
        eta_l = min(1 / (10 * math.sqrt(hat) * k * c.L), math.sqrt(n * hat * c.delta_f / (m * k * t * c.L * c.sigma2)))
        assert row["eta_g"] == pytest.approx(1 / math.sqrt(hat)) and row["eta_l"] == pytest.approx(eta_l)
        assert row["tau_avg_term"] == pytest.approx(30 * math.sqrt((1 + tau_avg) * c.L * c.sigma2 * c.delta_f)
                                                    / math.sqrt(n * k * t))
        assert row["tau_max_term"] == pytest.approx(20 * hat * (c.L * c.delta_f + c.F0) / t)
        assert row["bound"] == pytest.approx(row["tau_avg_term"] + row["tau_max_term"])


def test_the_measured_side_is_the_mean_over_seeds_of_independent_runs(small_study):
    problem, members, rows = small_study
    for row, member in zip(rows, members * 3):
        trace = delay_study._trace(member, 60, 0)
        algorithm = algorithms.get("fedsum", eta_l=row["eta_l"], eta_g=row["eta_g"], local_steps=2)
        values, losses = [], []
        for seed in (0, 1):
            history = algorithms.run(algorithm, problem, trace, seed=seed)
            values.append(float(np.mean(history.grad_norm2)))
            losses.append(float(problem.loss(torch.as_tensor(_iterate(algorithm, problem, trace, seed)))))
        assert row["measured"] == pytest.approx(np.mean(values), rel=1e-9)
        assert row["loss"] == pytest.approx(losses[0], rel=1e-9)          # f(x_{T−1}) of the first seed
        assert row["ratio"] == pytest.approx(row["measured"] / row["bound"])


def _iterate(algorithm, problem, trace, seed):
    """x_{T−1}: the final model of the same run stopped one round earlier (the rates, traces and
    noise of a round do not depend on T)."""
    from participation import Trace

    shorter = Trace(np.asarray(trace.mask)[:-1])
    return algorithms.run(algorithm, problem, shorter, seed=seed).final_params


def test_given_step_sizes_are_used_everywhere_and_marked_where_the_lemma_breaks():
    from bounds.fedsum import check_step_sizes

    problem = Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.5, seed=0)
    members = [delay_study.Member("cyclic S=2", "same rate", Cyclic(6, 2)),
               delay_study.Member("on/off C=12", "same rate", OnOffCycles.from_probability(6, 12, 1 / 3))]
    rows = delay_study.run("fedsum", problem, 40, members=members, seeds=[0, 1], local_steps=2, regimes=("given",),
                           given=(0.05, 1.0))
    c = _constants(problem)
    assert [(r["regime"], r["eta_l"], r["eta_g"]) for r in rows] == [("given", 0.05, 1.0)] * 2
    for r in rows:
        broken = bool(check_step_sizes(c, 1.0, 0.05, r["tau_max"], r["tau_avg"], algorithm="fedsum"))
        assert ("*" in r["label"]) == broken
    with pytest.raises(ValueError, match="come together"):
        delay_study.run("fedsum", problem, 40, members=members, seeds=[0, 1], regimes=("given",))


def _constants(problem):
    from bounds.core import Constants

    pc = problem.constants()
    return Constants(L=pc.L, sigma2=pc.sigma2, delta_f=pc.delta_f, F0=pc.F0, n_clients=6, local_steps=2, rounds=60)


def test_safe_step_sizes_are_shared_and_inside_every_traces_lemma(small_study):
    from bounds.fedsum import check_step_sizes

    problem, members, rows = small_study
    safe = [r for r in rows if r["regime"] == "safe"]
    assert len({(r["eta_l"], r["eta_g"]) for r in safe}) == 1
    assert all("*" not in r["label"] and "†" not in r["label"] for r in safe), [r["label"] for r in safe]
    widest = max(safe, key=lambda r: r["tau_max"])
    c = _constants(problem)
    # the largest τ_max binds: a step 5% larger breaks the lemma on that trace
    assert check_step_sizes(c, widest["eta_g"], widest["eta_l"] * 1.05, widest["tau_max"], widest["tau_avg"],
                            algorithm="fedsum")
    for r in safe:
        assert not check_step_sizes(c, r["eta_g"], r["eta_l"], r["tau_max"], r["tau_avg"], algorithm="fedsum")


def test_fixed_step_sizes_are_tuned_on_the_benign_trace_and_marked_where_a_trace_breaks_them(small_study):
    from bounds.fedsum import check_step_sizes

    problem, members, rows = small_study
    fixed = [r for r in rows if r["regime"] == "fixed"]
    assert len({(r["eta_l"], r["eta_g"]) for r in fixed}) == 1
    c = _constants(problem)
    benign = min(fixed, key=lambda r: r["tau_max"])
    assert check_step_sizes(c, benign["eta_g"], benign["eta_l"] * 1.05, benign["tau_max"], benign["tau_avg"],
                            algorithm="fedsum")
    marked = 0
    for r in fixed:
        broken = bool(check_step_sizes(c, r["eta_g"], r["eta_l"], r["tau_max"], r["tau_avg"], algorithm="fedsum"))
        assert ("*" in r["label"]) == broken, r
        marked += broken
    assert marked >= 1                                   # the on/off trace's τ_max breaks the benign trace's steps


def test_a_false_bound_is_reported_violated(small_study):
    """Every verdict can fail: the per-seed left sides of a theorem row, computed again by runs
    written here, hold against the row's bound and are "violated" against the bound scaled down
    below them."""
    from verify.verdicts import judge

    problem, members, rows = small_study
    row, member = rows[0], members[0]
    algorithm = algorithms.get("fedsum", eta_l=row["eta_l"], eta_g=row["eta_g"], local_steps=2)
    trace = delay_study._trace(member, 60, 0)
    values = [float(np.mean(algorithms.run(algorithm, problem, trace, seed=s).grad_norm2)) for s in (0, 1)]
    assert row["label"] == "holds" and judge(values, row["bound"]).verdict == "holds"
    scale = row["ratio"] / 4                # the bound scaled down to a quarter of what the runs measure
    assert judge(values, row["bound"] * scale).verdict == "violated"


def test_table_and_files(small_study, tmp_path):
    _, _, rows = small_study
    text = delay_study.table(rows)
    assert "**theorem step sizes**" in text and "**fixed step sizes**" in text and "log-log slopes" in text
    paths = delay_study.write(rows, tmp_path, setting={"rounds": 60})
    assert [p.name for p in paths] == ["delays.json", "delays.csv", "delays.md", "delays-theorem.png",
                                       "delays-fixed.png", "delays-safe.png"]
    data = json.loads((tmp_path / "delays.json").read_text())
    assert data["rows"][0]["measured"] == rows[0]["measured"] and "variance" in data["rows"][0]["terms"]


@pytest.mark.slow
def test_command_writes_the_study(tmp_path):
    done = run_main("experiment", "delays", "-N", "6", "-T", "30", "--seeds", "0", "1", "--regimes", "theorem",
                    "--no-progress", "-o", tmp_path)
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "delays.json").read_text())["rows"]
    assert len(rows) == len(delay_study.delay_family(6, 0.2, 30, 0)) and {r["regime"] for r in rows} == {"theorem"}


@pytest.mark.parametrize("extra,message", [(["--rate", "0.7"], "--rate must lie in (0, 0.5], got 0.7"),
                                           (["--seeds", "3"], "at least 2 seeds"),
                                           (["--seeds", "1", "1"], "--seeds repeats a seed: 1 1"),
                                           (["--regimes", "given"], "--regimes given runs at --eta-l and --eta-g")])
def test_bad_delay_options_are_one_line_exit_2(tmp_path, extra, message):
    done = run_main("experiment", "delays", "--no-progress", "-o", tmp_path, *extra)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_stopped_study_resumes_from_its_saved_rows(small_study, tmp_path, monkeypatch):
    """Every row is saved as it is judged; a second run reads the saved rows (no check runs), a
    removed row alone is judged again and equals the first, and another key shares nothing."""
    problem, members, rows = small_study
    key = {"problem": "quadratic(6, 3)", "rounds": 60, "seeds": [0, 1], "local_steps": 2}
    first = delay_study.run("fedsum", problem, 60, members=members, seeds=[0, 1], local_steps=2, folder=tmp_path, key=key)
    assert [r["measured"] for r in first] == [r["measured"] for r in rows]
    cells = sorted((tmp_path / "cells").glob("*.json"))
    assert len(cells) == len(rows)

    import verify.checking

    calls = []
    real = verify.checking.check

    def counted(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(verify.checking, "check", counted)
    again = delay_study.run("fedsum", problem, 60, members=members, seeds=[0, 1], local_steps=2, folder=tmp_path,
                            key=key)
    assert calls == [] and again == first            # every number back as saved, NaN and inf included
    theorem_row = delay_study.cell_key(delay_study._cell_config(key, "theorem", members[1]))
    (tmp_path / "cells" / f"{theorem_row}.json").unlink()
    resumed = delay_study.run("fedsum", problem, 60, members=members, seeds=[0, 1], local_steps=2, folder=tmp_path,
                              key=key)
    assert len(calls) == 1 and resumed == first
    other = delay_study.run("fedsum", problem, 60, members=members[:1], seeds=[0, 1], local_steps=2, folder=tmp_path,
                            key={**key, "rounds": 61}, regimes=("theorem",))
    assert len(calls) == 2 and other[0]["measured"] == first[0]["measured"]
    with pytest.raises(ValueError, match="folder and key come together"):
        delay_study.run("fedsum", problem, 60, members=members, folder=tmp_path)
