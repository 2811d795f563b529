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
