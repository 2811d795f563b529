"""The table of a sweep's results: its records as flat rows (``COLUMNS``), read back from an
output folder (``load_results``), as columns (``to_columns``), as a CSV file (``write_table``)
and as text (``summary_table``)."""
from __future__ import annotations

import math
import numbers
from typing import Sequence

from . import worst_case_cells
from .store import CELLS_FOLDER, _NONFINITE, _cells_folder, _read_record, _record_names
from ..report import write_csv

__all__ = ["COLUMNS", "load_results", "to_columns", "write_table", "summary_table"]


#: The columns of the table, in order: the config, then check results, Monte-Carlo results, time.
COLUMNS = ("key", "kind", "problem", "algorithm", "pattern", "theorem", "n_clients", "rounds", "local_steps", "reps",
           "seed", "runs", "confidence", "rounds_run", "tau_max", "tau_avg", "eta_g", "eta_l", "measured", "lower",
           "upper", "bound", "ratio", "verdict", "label", "covered", "conditions_hold", "violated_conditions",
           "stopped", "final_loss", "final_accuracy", "tau_max_mean", "tau_max_stderr", "tau_max_ci_low",
           "tau_max_ci_high", "tau_max_exact", "tau_avg_mean", "tau_avg_stderr", "tau_avg_ci_low", "tau_avg_ci_high",
           "tau_avg_exact", "paper_bound", *worst_case_cells.COLUMNS, "seconds")


def _flat(record: dict) -> dict:
    """One table row of a (valid) record: its config and scalar results side by side."""
    row = {"key": record["key"], "kind": record["kind"], **{k: v for k, v in record["config"].items() if k in COLUMNS}}
    results = record["results"]
    if record["kind"] in ("check", "worst_case"):
        row.update({k: v for k, v in results.items() if k in COLUMNS})
    else:
        row["n_clients"] = results["n_clients"]
        for name in ("tau_max", "tau_avg"):
            for part in ("mean", "stderr", "ci_low", "ci_high", "exact"):
                row[f"{name}_{part}"] = results[name][part]
        row["paper_bound"] = results["paper_bound"]
    row["seconds"] = record.get("timing", {}).get("seconds")
    # JSON keeps non-finite numbers as strings; the table has floats again
    return {k: (float(v) if isinstance(v, str) and v in _NONFINITE else v) for k, v in row.items()}


def _sort_key(row: dict):
    def sortable(value):
        if value is None:
            return (2, 0, "")
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return (0, value, "")
        return (1, 0, str(value))
    return (row["kind"], *(sortable(row.get(k)) for k in COLUMNS[2:13]), row["key"])


def load_results(folder) -> list[dict]:
    """Every record in ``folder`` (a sweep's output) as flat rows (keys of ``COLUMNS``), sorted
    by kind and config. A file of ``cells/`` that is not a valid record (see
    :mod:`.store`) raises a ValueError naming it; ``fedverify sweep`` on the same spec runs that
    cell again and replaces the file."""
    cells = _cells_folder(folder)
    if not cells.is_dir():
        raise ValueError(f"{str(folder)!r} holds no sweep records (no {CELLS_FOLDER}/ folder)")
    return sorted((_flat(_read_record(cells / f"{name}.json")) for name in _record_names(cells)), key=_sort_key)


def to_columns(rows: Sequence[dict], columns: Sequence[str] | None = None) -> dict[str, list]:
    """Rows as columns (name → list), missing values as None; ``columns`` default to those
    any row has, in ``COLUMNS`` order."""
    if columns is None:
        present = {k for row in rows for k in row}
        columns = [c for c in COLUMNS if c in present] + sorted(present - set(COLUMNS))
    return {c: [row.get(c) for row in rows] for c in columns}


def write_table(path, rows: Sequence[dict]) -> Path:
    """Write ``rows`` as CSV (the columns any row has, in ``COLUMNS`` order), atomically."""
    return write_csv(path, rows, list(to_columns(rows)))


def _cell(value, width: int, digits: int = 4) -> str:
    if value is None:
        return f"{'—':>{width}s}"
    if isinstance(value, float):
        return f"{value:>{width}.{digits}g}" if math.isfinite(value) else f"{str(value):>{width}s}"
    return f"{value!s:>{width}s}"


def summary_table(rows: Sequence[dict]) -> str:
    """The rows as text: one table for check cells, one for worst-case cells, one for Monte-Carlo cells."""
    parts = []
    checks = [r for r in rows if r["kind"] == "check"]
    if checks:
        head = (f"{'problem':18s} {'algorithm':10s} {'pattern':10s} {'N':>4s} {'T':>5s} {'K':>3s} {'seed':>4s} "
                f"{'measured':>10s} {'bound':>10s} {'ratio':>7s} {'final loss':>10s}  verdict")
        parts += [f"check cells ({len(checks)})", head, "-" * len(head)]
        for r in checks:
            parts.append(f"{r['problem']:18s} {r['algorithm']:10s} {r['pattern']:10s} {r['n_clients']:>4d} "
                         f"{r['rounds_run']:>5d} {r['local_steps']:>3d} {r['seed']:>4d} {_cell(r['measured'], 10)} "
                         f"{_cell(r['bound'], 10)} {_cell(r['ratio'], 7, 3)} {_cell(r['final_loss'], 10)}  {r['label']}")
    worst = [r for r in rows if r["kind"] == "worst_case"]
    if worst:
        if parts:
            parts.append("")
        parts += worst_case_cells.summary(worst, _cell)
    mcs = [r for r in rows if r["kind"] == "monte_carlo"]
    if mcs:
        if parts:
            parts.append("")
        confidence = sorted({r["confidence"] for r in mcs})
        level = "/".join(f"{c:.0%}" for c in confidence)
        head = (f"{'pattern':22s} {'N':>4s} {'T':>6s} {'reps':>6s} {'seed':>4s} {'E[tau_max]':>10s} "
                f"{level + ' CI':>21s} {'exact':>9s} {'E[tau_avg]':>10s} {level + ' CI':>21s} {'exact':>9s} {'bound':>9s}")
        parts += [f"Monte-Carlo cells ({len(mcs)})", head, "-" * len(head)]
        for r in mcs:
            ci = lambda name: f"[{r[name + '_ci_low']:.4g}, {r[name + '_ci_high']:.4g}]"
            parts.append(f"{r['pattern']:22s} {r['n_clients']:>4d} {r['rounds']:>6d} {r['reps']:>6d} {r['seed']:>4d} "
                         f"{_cell(r['tau_max_mean'], 10)} {ci('tau_max'):>21s} {_cell(r['tau_max_exact'], 9)} "
                         f"{_cell(r['tau_avg_mean'], 10)} {ci('tau_avg'):>21s} {_cell(r['tau_avg_exact'], 9)} "
                         f"{_cell(r['paper_bound'], 9)}")
    return "\n".join(parts)
