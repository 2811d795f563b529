"""Worst cases in ``fedverify bench`` (the direct Clarabel path against PEPit's cvxpy path on one
programme) and in the sweep (worst-case cells, cached by their config hash, so a second run
computes nothing)."""
import json

import pytest

from verify.bench import format_table
from verify.bench import worst_case as bench_worst_case
from verify.sweep import load_results, run_sweep
from verify.sweep.runner import expand, parse_spec
from verify.sweep.spec import SPEC_FORMAT

TINY = {"worst_case": {"algorithms": ["fedsum-b"], "patterns": "P1", "n_clients": 2, "rounds": 3, "local_steps": 1,
                       "theorems": ["fedsum.theorem_4_1", "fedsum.corollary_4_1"], "traces": 2}}


def test_bench_row_solves_one_programme_both_ways():
    row = bench_worst_case.worst_case_row("fedsum-b", 2, 1, 3)
    assert row.baseline == "PEPit cvxpy+Clarabel" and row.baseline_seconds > 0 and row.fast_seconds > 0
    assert row.name == "worst case, fedsum-b N=2 K=1 T=3"
    direct, cvxpy = (float(part.split()[0]) for part in row.note.split("worst case ")[1].split(" and "))
    assert direct == pytest.approx(cvxpy, rel=1e-3)
    assert "predicted" in row.note and "Gram" in row.note
    assert format_table([row]).startswith("worst case, fedsum-b N=2 K=1 T=3:")


def test_bench_sizes_vary_t_n_and_k_for_both_algorithms():
    sizes = set(bench_worst_case.SIZES)
    for name in ("fedsum-b", "fedsum"):
        assert {(n, k, t) for a, n, k, t in sizes if a == name and (n, k) == (3, 2)} >= {(3, 2, 4), (3, 2, 8), (3, 2, 12)}
        assert {n for a, n, k, t in sizes if a == name and (k, t) == (2, 8)} == {2, 3, 4}
        assert {k for a, n, k, t in sizes if a == name and (n, t) == (3, 8)} == {1, 2, 3}
    assert len(bench_worst_case.QUICK_SIZES) < len(bench_worst_case.SIZES)


def test_spec_format_describes_worst_case_tables():
    assert "[worst_case]" in SPEC_FORMAT and "mean over `traces` traces" in SPEC_FORMAT


def test_worst_case_cells_have_distinct_keys_per_config():
    cells = expand(parse_spec(TINY))
    assert [c.kind for c in cells] == ["worst_case"] * 2
    assert {c.config["theorem"] for c in cells} == {"fedsum.theorem_4_1", "fedsum.corollary_4_1"}
    assert len({c.key for c in cells}) == 2
    more = expand(parse_spec({"worst_case": {**TINY["worst_case"], "rounds": 4}}))
    assert not {c.key for c in cells} & {c.key for c in more}


@pytest.mark.parametrize("table, message", [
    ({"algorithms": "mifa"}, "no worst case for 'mifa'"),
    ({"theorems": "cafed.theorem_1"}, "no worst case"),
    ({"algorithms": "fedgm"}, "not fedgm"),
    ({"solvers": "mosek"}, "expected one of clarabel, scs"),
    ({"L": -1}, "finite number > 0"),
])
def test_bad_worst_case_tables_are_one_line(table, message):
    with pytest.raises(ValueError, match=message) as err:
        expand(parse_spec({"worst_case": {**TINY["worst_case"], **table}}))
    assert "\n" not in str(err.value) and "worst_case." in str(err.value)


@pytest.mark.slow
def test_tiny_worst_case_sweep_runs_once_then_computes_nothing(tmp_path):
    first = run_sweep(TINY, tmp_path, progress=False)
    assert (first.ran, first.skipped) == (2, 0)
    rows = {r["theorem"]: r for r in first.rows}
    for r in rows.values():
        assert r["kind"] == "worst_case" and r["status"] == "optimal" and r["worst_case"] > 0
        assert r["ratio"] == pytest.approx(r["bound"] / r["worst_case"])
    assert rows["fedsum.corollary_4_1"]["label"].startswith("mean of per-trace worst cases")
    records = sorted((tmp_path / "cells").glob("*.json"))
    stamps = [p.stat().st_mtime_ns for p in records]
    second = run_sweep(TINY, tmp_path, progress=False)
    assert (second.ran, second.skipped) == (0, 2)
    assert [p.stat().st_mtime_ns for p in records] == stamps
    assert [r["worst_case"] for r in second.rows] == [r["worst_case"] for r in first.rows]
    detail = json.loads(records[0].read_text())["results"]["detail"]
    assert detail["class"]["F0"] == 1.0 and detail["solver"] == "CLARABEL"
    assert {r["key"] for r in load_results(tmp_path)} == {r["key"] for r in first.rows}
