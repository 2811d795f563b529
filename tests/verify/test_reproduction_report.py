"""The committed reproduction of FedSUM Section 5 on the embedded MNIST subset: its report
states what its saved results say, and the saved runs are the command's own."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from verify import experiment

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reproductions"
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
    from verify import seed_study

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
    from verify import delay_study

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
    from verify import delay_study
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
    from verify import seed_study

    study = seed_study.collect(SEEDS, eta_l=0.0005, eta_g=20.0)
    return seed_study.markdown(study, at_rounds=(100, 200), pairs=seed_study.default_pairs(study.algorithms),
                               reference="fedsum-cr")


def test_the_seed_study_is_its_saved_runs_and_the_report_quotes_it():
    """seeds.md is the study of the saved runs (three seeds of the five algorithms the report's
    conclusions rest on), and the report quotes it whole."""
    from verify import seed_study

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
    from verify import seed_study

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
