"""Sweep records: a file in a record's place that is not a valid record counts as missing
(warned about, run again); ``load_results`` names it in a ValueError, never a KeyError."""
import json

import pytest

from verify.sweep import runner as sweep
from verify.cli import main

SMALL = {"check": {"algorithms": "fedsum", "patterns": ["P1", "P2"], "n_clients": 5, "rounds": 10, "local_steps": 2,
                   "runs": 2},
         "monte_carlo": {"patterns": "P2", "n_clients": 5, "rounds": 20, "reps": 10}}


def broken_variants(record: dict) -> dict[str, dict]:
    """A valid record spoiled in each way a resume must recognise (the name stays right)."""
    check = record["kind"] == "check"
    results = record["results"]
    first = "rounds_run" if check else "n_clients"
    return {
        "empty results": {**record, "results": {}},
        "a missing result": {**record, "results": {k: v for k, v in results.items() if k != first}},
        "a result of the wrong type": {**record, "results": {**results, first: "many"}},
        "a missing config field": {**record, "config": {k: v for k, v in record["config"].items() if k != "seed"}},
        "a foreign key": {**record, "key": "0" * 64},
        "a list": [record],
        "wrong timing": {**record, "timing": ["soon"]},
        **({} if check else {"a broken estimate": {**record, "results": {**results, "tau_max": {"mean": 1.0}}}}),
    }


@pytest.mark.parametrize("kind", ["check", "monte_carlo"])
def test_an_invalid_record_is_run_again_with_a_warning(kind, tmp_path, monkeypatch):
    out = tmp_path / "out"
    first = sweep.run_sweep(SMALL, out, progress=False)
    cell = next(c for c in sweep.expand(SMALL) if c.kind == kind)
    path = out / "cells" / f"{cell.key}.json"
    good = json.loads(path.read_text())
    calls = []
    real = sweep.run_cell
    monkeypatch.setattr(sweep, "run_cell", lambda c: calls.append(c.key) or real(c))
    for what, bad in broken_variants(good).items():
        path.write_text(json.dumps(bad))
        assert cell.key not in sweep.finished_keys(SMALL, out), what
        with pytest.raises(ValueError, match=rf"^{path.name} is not a sweep record \(") as err:
            sweep.load_results(out)          # a ValueError naming the file, never a KeyError
        assert "\n" not in str(err.value)
        calls.clear()
        with pytest.warns(sweep.SweepWarning, match=rf"{path.name} is not a sweep record .*running its cell again"):
            again = sweep.run_sweep(SMALL, out, progress=False)
        assert calls == [cell.key] and (again.ran, again.skipped) == (1, 2), what
        assert json.loads(path.read_text())["results"] == good["results"]        # replaced by a valid one
        assert [r["key"] for r in again.rows] == [r["key"] for r in first.rows]
    assert len(sweep.load_results(out)) == 3


def test_the_command_warns_in_one_line_and_finishes(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(SMALL))
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "-j", "1", "--no-progress"]) == 0
    capsys.readouterr()
    for cell in sweep.expand(SMALL):            # every record emptied of its results
        path = out / "cells" / f"{cell.key}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "results": {}}))
    assert main(["sweep", str(spec), "-o", str(out), "-j", "1", "--no-progress"]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 3 and all(line.startswith("fedverify: warning: ") and "is not a sweep record" in line
                                   for line in lines), captured.err
    assert captured.out.startswith("3 cells: 3 run now on this process, 0 found done")
    assert len(sweep.load_results(out)) == 3


def test_records_are_read_safely(tmp_path):
    out = tmp_path / "out"
    sweep.run_sweep({"monte_carlo": SMALL["monte_carlo"]}, out, progress=False)
    (name,) = [p.name for p in (out / "cells").iterdir()]
    path = out / "cells" / name
    for text in ("[" * 100_000 + "]" * 100_000, "{trunc", "", "\xff\xfe"):
        path.write_text(text, encoding="latin-1")
        with pytest.raises(ValueError, match=rf"{name} is not a sweep record \(not JSON\)"):
            sweep.load_results(out)
    assert sweep.finished_keys({"monte_carlo": SMALL["monte_carlo"]}, out) == set()


@pytest.mark.slow
def test_a_pipe_or_folder_in_place_of_a_record_neither_hangs_nor_stops_the_sweep(tmp_path):
    """cells/<key>.json that is a FIFO (opening it would block) or a folder (no record can replace
    it): those cells fail with a one-line reason, the others run, nothing hangs."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from verify.sweep import runner as sweep
        spec = sweep.parse_spec({{"monte_carlo": {{"patterns": ["P2"], "n_clients": 5, "rounds": 10, "reps": 4,
                                                   "seeds": [0, 1, 2]}}}})
        keys = [c.key for c in sweep.iter_cells(spec)]
        cells = Path({str(tmp_path)!r}) / "out" / "cells"
        cells.mkdir(parents=True)
        os.mkfifo(cells / f"{{keys[0]}}.json")
        (cells / f"{{keys[1]}}.json").mkdir()
        try:
            sweep.run_sweep(spec, cells.parent, progress=False)
        except sweep.SweepError as err:
            print(len(err.outcome.failed), err.outcome.ran, "in the way" in str(err.outcome.failed))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "1", "True"], done.stdout + done.stderr
