"""CA-Fed records written by ``check --record`` carry every constant their header says check
measured (μ among them), so that ``check-run`` judges its own tool's records."""
import json

import pytest

from verify.cli import main


@pytest.mark.slow
def test_check_record_then_check_run_of_cafed_theorem_1(tmp_path, capsys):
    records = tmp_path / "rec"
    assert main(["check", "--theorem", "cafed.theorem_1", "--algorithms", "cafed", "-T", "30", "--seeds", "2",
                 "--record", str(records), "--no-progress", "-o", str(tmp_path / "out")]) == 0
    paths = sorted(records.glob("*.jsonl"))
    header = json.loads(paths[0].read_text().splitlines()[0])
    assert "measured by check" in header["constants"]["source"] and header["constants"]["mu"] > 0
    capsys.readouterr()
    assert main(["check-run", *map(str, paths), "--theorem", "cafed.theorem_1"]) == 0
    assert "cafed vs cafed.theorem_1" in capsys.readouterr().out
