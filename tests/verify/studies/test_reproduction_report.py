"""The committed reproduction of FedSUM Section 5 on the embedded MNIST subset: its report
states what its saved results say, and the saved runs are the command's own."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from verify.studies import experiment

DOCS = Path(__file__).resolve().parents[3] / "docs" / "reproductions"
REPORT = DOCS / "fedsum-mnist.md"
MAIN = DOCS / "fedsum-mnist"


def _summary(folder: Path) -> str:
    return experiment.summary_markdown(experiment.load_result(folder), at_rounds=(60, 200), window=3, level=0.5)


def test_the_report_quotes_the_saved_results():
    text = REPORT.read_text()
    result = experiment.load_result(MAIN)
    assert len(result.curves) == 24 and not result.stopped          # 8 algorithms × P1, P2, P3
    assert {c["rounds"][-1] for c in result.curves.values()} == {500}
    assert _summary(MAIN) in text
    assert experiment.tuning_table(result.tuning) in text
    for folder in sorted(p for p in MAIN.iterdir() if p.is_dir() and (p / "experiment.json").is_file()):
        assert _summary(folder) in text, folder.name                 # the ablations' tables too


def test_every_run_of_the_report_is_a_saved_run_of_the_command():
    """Each curve in experiment.json is the curve of one file in runs/, whose configuration
    names its algorithm, pattern and rates, so the command resumes from them."""
    result = experiment.load_result(MAIN)
    saved = {}
    for path in (MAIN / "runs").glob("*.json"):
        data = json.loads(path.read_text())
        config = data["config"]
        saved[(config["algorithm"], config["pattern"], config["setting"]["eta_l"], config["setting"]["eta_g"])] = data
    rates = (result.setting["eta_l"], result.setting["eta_g"])
    for (name, pattern), curve in result.curves.items():
        run = saved[(name, pattern, *rates)]
        assert run["curve"]["rounds"] == curve["rounds"].tolist()
        assert run["curve"]["loss"] == pytest.approx(curve["loss"].tolist(), rel=0, abs=0)


def test_the_report_states_stability_and_equal_communication_from_the_saved_runs():
    from verify.studies import seed_study

    text = REPORT.read_text()
    study = seed_study.SeedStudy.from_result(experiment.load_result(MAIN))
    for pattern in ("P1", "P2", "P3"):
        assert "\n".join(seed_study.loss_table(study, pattern, (200,))) in text, pattern
        assert "\n".join(seed_study.communication_table(study, pattern, "fedsum-cr")) in text, pattern


def test_the_readme_and_the_report_make_the_same_claim():
    readme = (DOCS.parents[1] / "README.md").read_text()
    title = REPORT.read_text().splitlines()[0]
    assert "partly reproduced" in title and "headline ordering is not" in title
    assert "*partly* reproduced" in readme and "headline ordering is not reproduced" in readme
    assert "FedSUM Section 5 reproduced" not in readme


DELAYS = DOCS / "fedsum-delays"


def _delay_rows(folder):
    import json

    return json.loads((folder / "delays.json").read_text())["rows"]


@pytest.mark.parametrize("problem", sorted(p.name for p in DELAYS.iterdir() if (p / "delays.json").is_file()))
def test_the_delay_report_quotes_its_saved_study(problem):
    """delays.md is the table of delays.json, and the report quotes it whole; the figures exist."""
    from verify.studies import delay_study

    rows = _delay_rows(DELAYS / problem)
    table = delay_study.table(rows)
    assert (DELAYS / problem / "delays.md").read_text() == table
    assert table.rstrip() in (DOCS / "fedsum-delays.md").read_text()
    for regime in dict.fromkeys(r["regime"] for r in rows):
        assert (DELAYS / problem / f"delays-{regime}.png").is_file()


def test_the_delay_report_quotes_its_tau_tables():
    text = (DOCS / "fedsum-delays.md").read_text()
    for name in ("paper-settings-T500.txt", "paper-settings-T2000.txt", "mobiperf.txt"):
        body = [line for line in (DELAYS / "tau" / name).read_text().splitlines() if not line.startswith("fedverify:")]
        assert "\n".join(body) in text, name


def test_the_quadratic_delay_study_reruns_to_the_same_numbers():
    """The first rows of the shipped study, run again from the command's own settings."""
    from verify.studies import delay_study
    from verify.choices import build_problem

    import json

    data = json.loads((DELAYS / "quadratic" / "delays.json").read_text())
    setting = data["setting"]
    problem = build_problem(setting["problem"], setting["n_clients"])
    members = delay_study.delay_family(setting["n_clients"], setting["rate"], setting["rounds"], setting["trace_seed"])
    wanted = {"cyclic S=4", "on/off C=20"}
    rows = delay_study.run(setting["algorithm"], problem, setting["rounds"],
                           members=[m for m in members if m.label in wanted], seeds=setting["seeds"],
                           local_steps=setting["local_steps"], regimes=("theorem",), trace_seed=setting["trace_seed"])
    shipped = {r["pattern"]: r for r in data["rows"] if r["regime"] == "theorem"}
    for row in rows:
        for key in ("tau_max", "tau_avg", "measured", "bound", "eta_l", "eta_g"):
            assert row[key] == pytest.approx(shipped[row["pattern"]][key], rel=1e-12), (row["pattern"], key)


SEEDS = MAIN / "seeds"


def _seed_markdown() -> str:
    from verify.studies import seed_study

    study = seed_study.collect(SEEDS, eta_l=0.0005, eta_g=20.0)
    return seed_study.markdown(study, at_rounds=(100, 200), pairs=seed_study.default_pairs(study.algorithms),
                               reference="fedsum-cr")


def test_the_seed_study_is_its_saved_runs_and_the_report_quotes_it():
    """seeds.md is the study of the saved runs (three seeds of the five algorithms the report's
    conclusions rest on), and the report quotes it whole."""
    from verify.studies import seed_study

    study = seed_study.collect(SEEDS, eta_l=0.0005, eta_g=20.0)
    assert study.seeds == [0, 1, 2]
    assert set(study.algorithms) == {"fedsum", "fedsum-cr", "fedavg", "fedvarp", "scaffold"}
    for runs in study.runs.values():
        assert sorted(runs) == [0, 1, 2]
    text = _seed_markdown()
    assert (SEEDS / "seeds.md").read_text() == text
    assert text.rstrip() in REPORT.read_text()


def test_the_batch_comparison_pairs_each_batch_128_run_with_its_saved_batch_10_twin():
    """The report's batch-10/batch-128 table: readings of the saved runs of seed 0 under P1, the
    batch-128 runs differing from the seed study's in the mini-batch only."""
    from verify.studies import seed_study

    folder = MAIN / "batch-128"
    large = seed_study.SeedStudy.from_result(experiment.load_result(folder))
    small = seed_study.collect(SEEDS, eta_l=0.0005, eta_g=20.0)
    ours = {k: v for k, v in large.setting.items() if k not in ("rounds", "dim")}
    theirs = {k: v for k, v in small.setting.items() if k not in ("rounds", "dim")}
    assert ours == theirs                                  # same rates, K, schedule, noise; seed 0
    for path in (folder / "runs").glob("*.json"):
        config, _, _ = experiment.read_saved_run(path)
        assert config["problem"]["batch"] == 128 and "batch_size=128" in config["problem"]["problem"]
    text = REPORT.read_text()
    for name in ("fedsum-cr", "scaffold", "fedvarp"):
        for batch, study in ((10, small), (128, large)):
            curve = study.runs[(name, "P1")][0]
            row = f"| {name} | {batch} | " + " | ".join(f"{seed_study.reading(curve, r):.4f}" for r in (60, 100, 150, 200))
            assert row + " |" in text, row


# ------------------------------------------------------------------------ corrected claims
# Each corrected sentence of the two reports and of the README, recomputed from the saved data.


def _flat(path: Path) -> str:
    """The text with every run of whitespace one space: the reports wrap their sentences."""
    return " ".join(path.read_text().split())


def _three_seeds():
    from verify.studies import seed_study

    return seed_study.collect(SEEDS, eta_l=0.0005, eta_g=20.0)


def _seed_zero():
    from verify.studies import seed_study

    return seed_study.SeedStudy.from_result(experiment.load_result(MAIN))


def _resolution_at_500() -> float:
    from verify.studies import seed_study

    study = _three_seeds()
    return seed_study.resolution(study, seed_study.default_pairs(study.algorithms), 500)


def _gaps(one, baselines) -> dict:
    """(baseline, pattern) -> the seed-0 final-loss gaps of the baseline above FedSUM and FedSUM-CR
    (the three-point readings of the tables)."""
    from verify.studies import seed_study

    final = {key: seed_study.reading(runs[0]) for key, runs in one.runs.items()}
    return {(b, p): [final[(b, p)] - final[(f, p)] for f in ("fedsum", "fedsum-cr")]
            for b in baselines for p in ("P1", "P2", "P3")}


def test_the_seed_zero_lead_over_fedavg_mifa_fedau_is_single_seed_and_about_the_resolution():
    text, readme = _flat(REPORT), _flat(DOCS.parents[1] / "README.md")
    resolution = _resolution_at_500()
    assert f"{resolution:.3f}" == "0.022"
    gaps = _gaps(_seed_zero(), ("fedavg", "mifa", "fedau"))
    every = [g for pair in gaps.values() for g in pair]
    assert min(every) > 0                                          # FedSUM and FedSUM-CR end below on seed 0
    span = f"{min(every):.3f}–{max(every):.3f}"
    above = {key for key, pair in gaps.items() if max(pair) > resolution}
    assert above == {("fedavg", "P3"), ("fedau", "P3")} and f"{max(every) / resolution:.1f}" == "1.5"
    for sentence in (f"on seed 0 (single-seed) FedSUM and FedSUM-CR end below FedAvg, MIFA, FedAU and FedAWE under "
                     f"P1, P2 and P3, but below FedAvg, MIFA and FedAU only by {span}, below the {resolution:.3f} that "
                     f"three seeds resolve at round 500 except FedAvg's and FedAU's gaps under P3 (up to 1.5 times it)",
                     f"ahead of FedAvg, MIFA and FedAU only by {span} in final loss (largest under P3, where FedAU is "
                     f"{max(gaps[('fedau', 'P3')]):.3f} and FedAvg {max(gaps[('fedavg', 'P3')]):.3f} behind; smallest "
                     f"under P2, where FedAvg is {min(gaps[('fedavg', 'P2')]):.3f} behind)"):
        assert sentence in text, sentence
    awe = [g for pair in _gaps(_seed_zero(), ("fedawe",)).values() for g in pair]
    assert f"FedAWE's gap ({min(awe):.3f}–{max(awe):.3f})" in text and f"FedAWE is {min(awe):.3f}–{max(awe):.3f} behind" in text
    assert f"FedAvg, MIFA and FedAU by {span}, about the {resolution:.3f} that three seeds resolve" in readme


def test_holm_over_the_studys_comparisons_leaves_none_resolved():
    from verify.studies import report_statistics, seed_study

    study = _three_seeds()
    pairs = seed_study.default_pairs(study.algorithms)
    family = report_statistics.comparisons(study, pairs, (100, 200), "fedsum-cr")
    rows = sum(len(seed_study.difference_table(study, pairs, p, (100, 200))) - 2 +
               len(seed_study.communication_table(study, p, "fedsum-cr")) - 5 for p in study.patterns)
    assert len(family) == rows == 54                     # every row of the tables, the reference's own left out
    raw = sorted(c["p"] for c in family if c["p"] < 0.05)
    assert [f"{p:.3f}" for p in raw] == ["0.038", "0.046"]
    assert all(c["holm"] > 0.05 for c in family)
    for c in family:                                      # the p-values are the intervals' own test
        d = study.difference(c["first"], c["second"], c["pattern"], c["at"]) if c["kind"] == "round" else None
        if d is not None and d["n"] > 1:
            assert (c["p"] < 0.05) == (d["verdict"] != "unresolved")
    smallest = min(c["holm"] for c in family if c["p"] < 0.05)
    text, readme = _flat(REPORT), _flat(DOCS.parents[1] / "README.md")
    assert (f"(p = {raw[0]:.3f} and {raw[1]:.3f}) and not under P1 (0.1473 ± 0.1540), but those are 2 of the study's "
            f"{len(family)} comparisons, and after Holm's correction over the {len(family)} neither survives (adjusted "
            f"p = {smallest:.3f}, table above)") in text
    assert f"none of the study's {len(family)} comparisons survives Holm's correction" in text
    assert "\n".join(report_statistics.holm_markdown(family)) in REPORT.read_text()
    assert f"no comparison survives Holm's correction over the study's {len(family)}" in readme


def test_the_final_order_counts_three_seeds_not_nine_runs():
    from scipy import stats

    study = _three_seeds()
    signs = {}
    for other in ("scaffold", "fedvarp"):
        for pattern in study.patterns:
            a, b = study.values("fedsum-cr", pattern, 500), study.values(other, pattern, 500)
            signs.update({(other, pattern, s): a[s] - b[s] for s in a})
    assert all(v > 0 for (o, _, _), v in signs.items() if o == "scaffold")
    below = {k: v for k, v in signs.items() if v <= 0}
    assert list(below) == [("fedvarp", "P3", 0)]
    sign_test = stats.binomtest(3, 3).pvalue
    text = _flat(REPORT)
    assert (f"SCAFFOLD ends below FedSUM-CR in every pattern on every seed, FedVARP in every pattern on seeds 1 and 2 "
            f"and under P1 and P2 on seed 0 (under P3 on seed 0 FedSUM-CR is {-below[('fedvarp', 'P3', 0)]:.4f} below)") in text
    assert "three independent units, not nine" in text and f"(a two-sided sign test, p = {sign_test:.2f})" in text
    means = [study.difference("fedsum-cr", o, p, 500)["mean"] for o in ("scaffold", "fedvarp") for p in study.patterns]
    assert f"every pattern, by {min(means):.3f}–{max(means):.3f} on average" in text
    readme = _flat(DOCS.parents[1] / "README.md")
    assert f"below FedSUM-CR in every pattern's mean over three seeds (by {min(means):.3f}–{max(means):.3f};" in readme


def _boundary_change(measure, groups) -> float:
    """The largest factor by which ``measure`` of a group moves when the 160-round window gains or
    loses its boundary recorded point (windows 170 and 150)."""
    out = 1.0
    for group in groups:
        base = measure(group, 160)
        for window in (150, 170):
            other = measure(group, window)
            out = max(out, max(base, other) / min(base, other))
    return out


def test_the_late_variability_is_robust_to_one_boundary_point():
    """The tables' robust measure (at every round the median across seeds, then over rounds)
    against one run's standard deviation about its line, on the saved 500-round runs."""
    from verify.studies import report_statistics, seed_study

    study = _three_seeds()
    long = [key for key in study.runs if study.horizon[(*key, 0)] == 500]
    robust = _boundary_change(lambda runs, w: report_statistics.late_variability(runs, w)[0],
                              [[study.runs[k][s] for s in study.seeds] for k in long])
    per_run = _boundary_change(seed_study.late_variability, [c for k in long for c in study.runs[k].values()])
    assert robust < 1.2 and per_run > 3
    fedvarp = study.runs[("fedvarp", "P2")][2]
    assert seed_study.late_variability(fedvarp, 170) / seed_study.late_variability(fedvarp, 160) == pytest.approx(per_run)
    one = _seed_zero()
    single = _boundary_change(lambda runs, w: report_statistics.late_variability(runs, w)[0],
                              [list(runs.values()) for runs in one.runs.values()])
    text = _flat(REPORT)
    assert (f"The measure moves by at most a factor of {robust:.2f} when the window gains or loses its boundary point, "
            f"where a run's standard deviation about its least-squares line (`verify.studies.seed_study.late_variability`) "
            f"moves by up to {per_run:.2f} (FedVARP under P2 on seed 2, when round 340 enters the window)") in text
    assert f"on one seed the measure still moves by up to a factor of {single:.2f} when the window gains or loses" in text


def _ratio_span(v, low, high, patterns) -> tuple[float, float]:
    """min over patterns of min(high)/max(low) and max of max(high)/min(low)."""
    lo = min(min(v[(b, p)] for b in high) / max(v[(a, p)] for a in low) for p in patterns)
    hi = max(max(v[(b, p)] for b in high) / min(v[(a, p)] for a in low) for p in patterns)
    return lo, hi


def test_the_stability_sentences_are_the_robust_measure_of_the_saved_runs():
    from verify.studies import report_statistics

    text = _flat(REPORT)
    one = _seed_zero()
    v = {key: one.variability(*key)[0] for key in one.runs}
    fam = ("fedsum", "fedsum-cr")
    p12 = _ratio_span(v, fam, ("scaffold", "fedvarp"), ("P1", "P2"))
    p3 = _ratio_span(v, fam, ("scaffold", "fedvarp"), ("P3",))
    weak = _ratio_span(v, fam, ("fedavg", "fedau", "fedawe"), ("P1", "P2", "P3"))
    low12 = [v[(a, p)] for a in fam for p in ("P1", "P2")]
    low3 = [v[(a, "P3")] for a in fam]
    assert (f"FedSUM's and FedSUM-CR's late variability ({min(low12):.4f}–{max(low12):.4f} under P1 and P2, "
            f"{min(low3):.4f}–{max(low3):.4f} under P3) is {p12[0]:.1f} to {p12[1]:.1f} times below SCAFFOLD's and "
            f"FedVARP's under P1 and P2 but only {p3[0]:.1f} to {p3[1]:.1f} times under P3, and {weak[0]:.1f} to "
            f"{weak[1]:.0f} times below FedAvg's, FedAU's and FedAWE's") in text
    mifa = [v[("mifa", p)] for p in ("P1", "P2", "P3")]
    assert f"is as low ({mifa[0]:.4f}, {mifa[1]:.4f}, {mifa[2]:.4f})" in text
    assert min(mifa[0] - v[(a, "P1")] for a in fam) <= 0 < min(mifa[2] - v[(a, "P3")] for a in fam) + 1e-3
    every = _ratio_span(v, fam, [b for b in {a for a, _ in one.runs} if b not in fam and b != "mifa"],
                        ("P1", "P2", "P3"))
    assert f"vary less than those of every baseline but MIFA, {every[0]:.1f} to {every[1]:.0f} times less" in text

    study = _three_seeds()
    w = {key: study.variability(*key)[0] for key in study.runs}
    cr = [w[("fedsum-cr", p)] for p in study.patterns]
    sc = [w[("scaffold", p)] for p in study.patterns]
    vp = [w[("fedvarp", p)] for p in study.patterns]
    span = (min(min(s / c, f / c) for c, s, f in zip(cr, sc, vp)), max(max(s / c, f / c) for c, s, f in zip(cr, sc, vp)))
    assert (f"is {cr[0]:.4f}, {cr[1]:.4f} and {cr[2]:.4f} under P1, P2 and P3, SCAFFOLD's {sc[0]:.4f}, {sc[1]:.4f} and "
            f"{sc[2]:.4f} and FedVARP's {vp[0]:.4f}, {vp[1]:.4f} and {vp[2]:.4f}: FedSUM-CR's is {span[0]:.1f} to "
            f"{span[1]:.1f} times lower in every pattern") in text
    assert f"varies {span[0]:.1f} to {span[1]:.1f} times less than SCAFFOLD's and FedVARP's" in text
    assert f"FedSUM-CR's late losses vary {span[0]:.1f} to {span[1]:.1f} times less" in _flat(DOCS.parents[1] / "README.md")
    lowest = {}
    for p in study.patterns:
        for s in study.seeds:
            per = {a: report_statistics.late_variability([study.runs[(a, p)][s]], 160)[0]
                   for a in ("fedsum-cr", "scaffold", "fedvarp")}
            lowest[(p, s)] = min(per, key=per.get), per
    assert [k for k, (a, _) in lowest.items() if a != "fedsum-cr"] == [("P2", 1)]
    per = lowest[("P2", 1)][1]
    assert f"(under P2 on seed 1 SCAFFOLD's is {per['scaffold']:.4f} against its {per['fedsum-cr']:.4f})" in text
    jumps = {}
    for a in ("scaffold", "fedvarp"):
        c = study.runs[(a, "P3")][2]
        y, r = c["loss"], c["rounds"]
        k = int(np.argmax(y[1:-1] - np.maximum(y[:-2], y[2:]))) + 1
        jumps[a] = (int(r[k]), y[k] - max(y[k - 1], y[k + 1]))
    assert {r for r, _ in jumps.values()} == {410}
    assert (f"SCAFFOLD and FedVARP jump by {jumps['scaffold'][1]:.2f} and {jumps['fedvarp'][1]:.2f} in training loss "
            f"at round 410") in text


def _delay_study(problem):
    data = json.loads((DELAYS / problem / "delays.json").read_text())
    return data["setting"], data["rows"]


def _fit(rows, x, y):
    from verify.studies import report_statistics

    xs = [r["tau_max"] if x == "tau_max" else 1 + r["tau_avg"] for r in rows]
    return report_statistics.power_law(xs, [y(r) for r in rows])


def test_the_delay_reports_exponents_carry_their_intervals():
    from verify.studies.report_statistics import exponent

    text = _flat(DOCS / "fedsum-delays.md")
    _, quadratic = _delay_study("quadratic")

    def same(rows, regime, fleet=True):
        return [r for r in rows if r["regime"] == regime and r["group"] != "other rate" and (fleet or r["group"] != "fleet")]

    def bracket(fit):
        return exponent(fit).split(" ", 1)[1]

    measured, bound = (lambda r: r["measured"]), (lambda r: r["bound"])
    theorem = same(quadratic, "theorem")
    grows, plain = _fit(theorem, "tau_max", measured), _fit(same(quadratic, "theorem", fleet=False), "tau_max", measured)
    assert (f"τ_max^{grows['slope']:.2f} (95% interval {bracket(grows)}; {exponent(plain)} without the two fleet subsets) "
            f"and the bound as τ_max^{_fit(theorem, 'tau_max', bound)['slope']:.2f} ({bracket(_fit(theorem, 'tau_max', bound))};") in text
    fixed = _fit(same(quadratic, "fixed"), "tau_max", measured)
    plain = _fit(same(quadratic, "fixed", fleet=False), "tau_max", measured)
    assert f"the quadratic's {fixed['slope']:.2f} ({exponent(plain)} without its fleet subsets)" in text
    assert f"grows only as τ_max^{fixed['slope']:.2f} ({bracket(fixed)})" in text
    _, cnn = _delay_study("cnn-digits-trains")
    rows = same(cnn, "given")
    tmax, tavg = _fit(rows, "tau_max", measured), _fit(rows, "tau_avg", measured)
    no_fleet = _fit(same(cnn, "given", fleet=False), "tau_max", measured)
    assert (tmax["n"], no_fleet["n"]) == (11, 9)
    assert (f"as τ_max^{tmax['slope']:.2f}, 95% interval {bracket(tmax)}, and as (1 + τ_avg)^{tavg['slope']:.2f} "
            f"{bracket(tavg)} (log-log slopes in the table), against τ_max^{fixed['slope']:.2f} {bracket(fixed)} on the "
            f"quadratic at fixed step sizes") in text
    assert no_fleet["low"] < 0 < no_fleet["high"] and no_fleet["low"] < fixed["slope"]
    assert f"the τ_max exponent is {no_fleet['slope']:.2f} with the interval {bracket(no_fleet)}, which contains 0" in text
    assert tmax["low"] > fixed["high"]                        # with the fleet subsets, apart from the quadratic
    assert f"(log-log slope {exponent(_fit(rows, 'tau_max', bound))} against τ_max)" in text
    _, plateau = _delay_study("cnn-digits")
    flat, plain = _fit(same(plateau, "given"), "tau_max", measured), _fit(same(plateau, "given", False), "tau_max", measured)
    values = [r["measured"] for r in plateau]
    assert flat["low"] > 0 and max(values) - min(values) < 0.003
    assert (f"the measured side grows as τ_max^{exponent(flat)} ({exponent(plain)} without the fleet subsets), an "
            f"exponent whose interval excludes 0 but that moves it by less than 0.003") in text


def test_the_cnn_bound_is_flat_by_its_tau_free_drift_term_and_its_tau_terms_grow():
    """The split of Lemma D.6 into τ-free and τ-terms, from bounds.fedsum at the constants the saved
    terms imply; the report's sentence and the README's."""
    from verify.studies import report_statistics

    setting, rows = _delay_study("cnn-digits-trains")
    parts = [report_statistics.lemma_d6_parts(r, setting) for r in rows]
    for row, part in zip(rows, parts):
        for name, value in {**part["tau_free"], **part["tau"]}.items():
            assert value == pytest.approx(row["terms"][name], rel=1e-9)        # lemma_d6 gives the saved terms
        assert part["bound"] == pytest.approx(row["bound"], rel=1e-12)
        assert sum(part["tau"].values()) == pytest.approx(row["tau_avg_term"] + row["tau_max_term"], rel=1e-12)
    c = parts[0]["constants"]
    assert all(p["constants"].L == pytest.approx(c.L, rel=1e-9) for p in parts)
    drift = {p["tau_free"]["local drift"] for p in parts}
    optimization = {p["tau_free"]["optimization"] for p in parts}
    assert max(drift) / min(drift) - 1 < 1e-12 and max(optimization) / min(optimization) - 1 < 1e-12
    share = [sum(p["tau_free"].values()) / p["bound"] for p in parts]
    over = [r["eta_l"] / p["eta_l_limit"] for r, p in zip(rows, parts)]
    same = [(r, p) for r, p in zip(rows, parts) if r["group"] != "other rate"]
    tau_terms = [sum(p["tau"].values()) for _, p in same]
    by_avg = _fit([r for r, _ in same], "tau_avg", lambda r: r["tau_avg_term"] + r["tau_max_term"])
    by_max = _fit([r for r, _ in same], "tau_max", lambda r: r["tau_avg_term"] + r["tau_max_term"])
    measured = _fit([r for r, _ in same], "tau_avg", lambda r: r["measured"])
    assert measured["low"] < by_avg["slope"] < measured["high"]
    ex = report_statistics.exponent
    text = _flat(DOCS / "fedsum-delays.md")
    for sentence in (
            f"With estimated constants (L = {c.L:.0f}, σ² = {c.sigma2:.2f}, Δ_f = {c.delta_f:.2f}, F_0 = {c.F0:.2f},",
            f"the local-drift term 150 η_l² K σ² L²/N = {min(drift):,.0f} and the optimization term 2Δ_f/(η_g η_l K T) = "
            f"{min(optimization):.3f}, the same on every trace and {min(share):.0%} to {max(share):.1%} of the bound",
            f"0.2 is {min(over):,.0f} to {max(over):,.0f} times that limit on these traces, and the term grows as η_l², "
            f"so where the hypothesis holds it is at most {max(p['drift_limit'] for p in parts):.3f}",
            f"they grow from {min(tau_terms):,.0f} to {max(tau_terms):,.0f}, as (1 + τ_avg)^{ex(by_avg)} "
            f"(and τ_max^{ex(by_max)}), an exponent inside the interval of the measured side's (1 + τ_avg)^{ex(measured)}"):
        assert sentence in text, sentence
    readme = _flat(DOCS.parents[1] / "README.md")
    assert f"its τ-terms, which grow as (1 + τ_avg)^{ex(by_avg)}" in readme
