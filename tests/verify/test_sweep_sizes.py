"""Sweep sizes: cells counted before expanding, a cap, lazy cells, linear resumes; spec files
nested too deeply refused before parsing."""
import json

import pytest

from verify.sweep import grid as sweep_grid, runner as sweep, spec as sweep_spec, store as sweep_store
from verify.cli import main

from .test_sweep import TINY, tomllib

#: 10^12 cells from three lists of 10^4: counted from the list lengths, never expanded.
HUGE = {"check": {"algorithms": "fedsum", "patterns": "P1", "seeds": list(range(10_000)),
                  "rounds": list(range(1, 10_001)), "n_clients": list(range(5, 10_005))}}
#: 10^6 Monte-Carlo cells (allowed by max_cells).
MILLION = {"max_cells": 10**6, "monte_carlo": {"patterns": "P2", "n_clients": 5, "rounds": list(range(1, 11)),
                                                "reps": 2, "seeds": list(range(100_000))}}


# ------------------------------------------------------------------ counting and the cap


def test_cells_are_counted_from_the_list_lengths():
    assert sweep.count_cells(HUGE) == 10**12
    assert sweep.count_cells(MILLION) == 10**6
    assert sweep.count_cells(TINY) == 14 == len(sweep.expand(TINY))
    # two tables sharing cells count them twice; the sweep runs them once
    shared = {"monte_carlo": [{"patterns": ["P2", "case4"], "rounds": 5, "reps": 2},
                              {"patterns": ["case4", "P3"], "rounds": 5, "reps": 2}]}
    assert sweep.count_cells(shared) == 4 and [c.config["pattern"] for c in sweep.expand(shared)] == [
        "P2", "case4", "P3"]


@pytest.mark.parametrize("call", [lambda spec: sweep.expand(spec), lambda spec: sweep.iter_cells(spec),
                                  lambda spec: sweep.run_sweep(spec, "never-made"),
                                  lambda spec: sweep.finished_keys(spec, "never-made")])
def test_a_spec_above_the_cap_is_refused_in_one_line_naming_count_and_cap(call, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as err:
        call(HUGE)
    message = str(err.value)
    assert "1,000,000,000,000 cells" in message and "100,000" in message and "max_cells" in message
    assert "\n" not in message and not (tmp_path / "never-made").exists()


def test_max_cells_raises_the_cap_and_is_checked():
    spec = {**TINY, "max_cells": 10}
    with pytest.raises(ValueError, match="the spec has 14 cells, more than the limit of 10"):
        sweep.expand(spec)
    assert len(sweep.expand({**TINY, "max_cells": 14})) == 14
    for bad in (0, -3, 2.5, True, "many"):
        with pytest.raises(ValueError, match="max_cells: expected a positive integer"):
            sweep.parse_spec({**TINY, "max_cells": bad})


def test_the_memory_budget_refuses_a_table_it_cannot_hold(monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.001")       # 1 MiB: 14 cells fit, 10^6 do not
    assert len(sweep.expand(TINY)) == 14
    with pytest.raises(ValueError, match=r"a sweep of 1,000,000 cells needs about .*the memory limit is"):
        sweep.expand(MILLION)


def test_cells_stream_one_at_a_time(monkeypatch):
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "64")
    made = []
    real = sweep.Cell

    class Counted(real):
        def __init__(self, *args, **kwargs):
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(sweep_grid, "Cell", Counted)
    cells = sweep.iter_cells(MILLION)
    first = [next(cells) for _ in range(5)]
    assert len(made) == 5 and [c.config["seed"] for c in first] == [0, 1, 2, 3, 4]
    assert first[0].config == {"pattern": "P2", "n_clients": 5, "rounds": 1, "reps": 2, "seed": 0, "confidence": 0.95}


def test_the_command_refuses_a_huge_spec_in_one_line(tmp_path, capsys):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(HUGE))
    assert main(["sweep", str(path), "-o", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1,000,000,000,000 cells, more than the limit of 100,000" in err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ resuming reads each record once


def test_a_resume_reads_each_record_once(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    sweep.run_sweep(TINY, out, progress=False)
    (out / "cells" / "unrelated.txt").write_text("not a record")
    reads = []
    real = sweep._read_record
    for module in (sweep, sweep_store):        # the run reads records, and so does finished_keys
        monkeypatch.setattr(module, "_read_record", lambda path: reads.append(path.name) or real(path))
    assert len(sweep.finished_keys(TINY, out)) == 14 and sorted(reads) == sorted(set(reads)) and len(reads) == 14
    reads.clear()
    again = sweep.run_sweep(TINY, out, progress=False)           # the table comes from the same reads
    assert (again.ran, again.skipped, len(reads), len(set(reads))) == (0, 14, 14, 14)
    reads.clear()
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(TINY))
    assert main(["sweep", str(spec), "-o", str(out), "--no-progress"]) == 0     # the command too
    assert (len(reads), len(set(reads))) == (14, 14) and "0 run now" in capsys.readouterr().out


def test_count_to_run_stops_early_and_reads_nothing(tmp_path, monkeypatch):
    out = tmp_path / "out"
    sweep.run_sweep({"monte_carlo": {"patterns": "P2", "rounds": 5, "reps": 2, "seeds": [0, 1]}}, out, progress=False)
    monkeypatch.setattr(sweep_store, "_read_record", None)     # it must not read records
    spec = {"monte_carlo": {"patterns": "P2", "rounds": 5, "reps": 2, "seeds": list(range(50))}}
    assert sweep.count_to_run(spec, out) == 48
    assert sweep.count_to_run(spec, out, at_most=3) == 3
    assert sweep.count_to_run(spec, tmp_path / "nothing-yet") == 50


# ------------------------------------------------------------------ nesting


DEEP = {
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "objects.json": '{"check": ' + '{"a": ' * 5_000 + "1" + "}" * 5_001,
    "arrays.toml": "x = " + "[" * 100_000 + "]" * 100_000,
    "inline.toml": "x = " + "{a = " * 5_000 + "1" + "}" * 5_000,
    "dotted.toml": "a" + ".a" * 100_000 + " = 1\n",
    "header.toml": "[a" + ".a" * 100_000 + "]\nx = 1\n",
    "inline-dotted.toml": "x = {" + "a." * 100_000 + "a = 1}\n",
    "seventeen.json": '{"check": {"seeds": ' + "[" * 17 + "]" * 17 + "}}",
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_a_deeply_nested_spec_is_refused_in_one_line(name, tmp_path):
    if name.endswith(".toml") and tomllib is None:
        pytest.skip("reading TOML needs Python ≥ 3.11 or tomli")
    path = tmp_path / name
    path.write_text(DEEP[name])
    with pytest.raises(ValueError) as err:
        sweep.load_spec(path)
    message = str(err.value)
    assert message.startswith(f"{name}: the spec ") and "16" in message and "\n" not in message


@pytest.mark.parametrize("name, text", [
    ("strings.json", '{"description": "' + "[{" * 100 + '", "monte_carlo": {"patterns": "P2", "seeds": [[0], 1]}}'),
    ("strings.toml", 'description = """' + "[{" * 100 + ' a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r = 1"""\n'
                     "# [[[[[[[[[[[[[[[[[[[[ a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q\n"
                     'max_cells = 100\n[[monte_carlo]]\npatterns = ["P2", \'case4\']\nconfidence = [0.9, 0.95]\n'
                     "seeds = [\n  0,\n  1,\n]\n"),
    ("dotted.toml", 'monte_carlo.patterns = "P2"\nmonte_carlo.confidence = 0.9\n'),
])
def test_brackets_in_strings_and_dots_in_numbers_are_not_nesting(name, text, tmp_path):
    if name.endswith(".toml") and tomllib is None:
        pytest.skip("reading TOML needs Python ≥ 3.11 or tomli")
    path = tmp_path / name
    path.write_text(text)
    if name == "strings.json":         # loads; then the spec's own check names the bad seed
        with pytest.raises(ValueError, match=r"monte_carlo.seeds: expected an integer seed ≥ 0, got \[0\]"):
            sweep.expand(path)
        return
    assert len(sweep.expand(path)) >= 1


def test_the_command_refuses_a_deep_spec_in_one_line(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text(DEEP["deep.json"])
    assert main(["sweep", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nests arrays or objects more than 16 levels deep" in err


def test_a_spec_file_is_bounded_and_regular(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_spec, "MAX_SPEC_BYTES", 100)
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"monte_carlo": {"patterns": "P2", "seeds": list(range(100))}}))
    with pytest.raises(ValueError, match="big.json is larger than"):
        sweep.load_spec(path)
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(ValueError, match="folder.json is not a regular file"):
        sweep.load_spec(tmp_path / "folder.json")
    (tmp_path / "latin.json").write_bytes(b'{"description": "caf\xe9"}')
    with pytest.raises(ValueError, match="latin.json is not UTF-8 text"):
        sweep.load_spec(tmp_path / "latin.json")


def test_a_huge_value_is_not_echoed_whole():
    with pytest.raises(ValueError) as err:
        sweep.expand({"check": {"rounds": [[1] * 10**5]}})
    assert len(str(err.value)) < 200
