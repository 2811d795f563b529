"""A cell of a sweep: one unit of work, its key and its computation.

A ``Cell`` is a kind ("check", "monte_carlo" or "worst_case") and a config (JSON values only,
its seed included); its key (``cell_key``) is the sha256 of the canonical JSON of the kind, the
config and ``SCHEMA_VERSION``, the name of its record. ``run_cell`` computes a cell and returns
its record: ``key``, ``kind``, ``config``, ``results``, ``timing`` (start time, seconds) and
``versions`` (fedverify, Python, numpy, scipy, torch), non-finite numbers as the strings "inf",
"-inf", "nan". A cell's result depends only on its config, never on the worker that ran it or
on the order: each cell builds its own problem and trace from the config and runs torch on one
thread.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
import platform
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property, lru_cache
from importlib import metadata
from pathlib import Path
from typing import Mapping

import numpy as np

from participation import Trace

from . import worst_case_cells
from .spec import KINDS, _toml
from ..choices import build_problem, scaled_preset
from ..jobs import check_cell, delay_case
from ..report import number

__all__ = ["SCHEMA_VERSION", "Cell", "cell_key", "run_cell"]


#: Part of every cell key: bump it when a cell's results change meaning, so old records are not reused.
SCHEMA_VERSION = 1


def _canonical_json(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def cell_key(kind: str, config: Mapping, schema: int = SCHEMA_VERSION) -> str:
    """sha256 (hex) of the canonical JSON of ``{"schema", "kind", "config"}``: the record's name."""
    payload = _canonical_json({"schema": schema, "kind": kind, "config": dict(config)})
    return hashlib.sha256(payload.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Cell:
    """One unit of work: ``kind`` ("check", "monte_carlo" or "worst_case") and its ``config`` (JSON values
    only; the key is its hash). ``trace_file``: where a trace-file pattern is read from (not
    part of the key; its content is, as ``config["trace_sha256"]``)."""

    kind: str
    config: dict
    trace_file: str | None = None

    @cached_property
    def key(self) -> str:
        return cell_key(self.kind, self.config)


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _scaled_pattern(name: str, n_clients: int | None):
    """Preset ``name`` (its own size when ``n_clients`` is None, else scaled like ``fedverify check``)."""
    from participation.patterns import preset

    return preset(name) if n_clients is None else scaled_preset(name, n_clients)


_threads_lock = threading.Lock()
_threads_users = 0
_threads_saved = 1


@contextmanager
def _one_torch_thread():
    """torch on one intra-op thread while any cell runs in this process (restored after the
    last one), so a result never depends on how many threads a worker has."""
    global _threads_users, _threads_saved
    import torch

    with _threads_lock:
        if _threads_users == 0:
            _threads_saved = torch.get_num_threads()
            torch.set_num_threads(1)
        _threads_users += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_saved)


@lru_cache(maxsize=4)
def _problem_and_constants(name: str, n_clients: int):
    """The named problem with ``n_clients`` and its constants, as ``fedverify check`` builds them."""
    from ..constants import estimate_constants

    problem = build_problem(name, n_clients)
    return problem, estimate_constants(problem)


def _check_source(cell: Cell):
    """The cell's participation: a Trace read from its file (checked against its hash) or the preset."""
    config = cell.config
    if "trace_sha256" not in config:
        return _scaled_pattern(config["pattern"], config["n_clients"])

    path = Path(cell.trace_file)
    if _file_sha256(path) != config["trace_sha256"]:
        raise ValueError(f"trace file {path.name} changed since the sweep was expanded")
    return Trace.load(path)


def _final_values(history, problem) -> tuple[float, float | None]:
    """f(x_T) and the accuracy there (None where the problem has none); inf if the run stopped."""
    import torch

    if history.stopped is not None:
        return math.inf, None
    x = torch.as_tensor(history.final_params, dtype=problem.dtype, device=problem.device)
    return float(problem.loss(x)), problem.accuracy(x)


def _run_check(cell: Cell) -> dict:
    c = cell.config
    problem, consts = _problem_and_constants(c["problem"], c["n_clients"])
    source = _check_source(cell)
    rounds = min(c["rounds"], source.n_rounds) if isinstance(source, Trace) else c["rounds"]
    seeds = [c["seed"] * c["runs"] + i for i in range(c["runs"])]
    result, row = check_cell(c["algorithm"], problem, source, c["theorem"], pattern_label=c["pattern"], seeds=seeds,
                             rounds=rounds, local_steps=c["local_steps"], constants=consts,
                             confidence=c["confidence"], trace_seed=c["seed"])
    final_loss, final_accuracy = _final_values(result.first_run, problem)
    flat = {k: row[k] for k in ("tau_max", "tau_avg", "eta_g", "eta_l", "measured", "lower", "upper", "bound",
                                "ratio", "verdict", "label", "covered", "violated_conditions", "stopped")}
    return {"rounds_run": result.rounds, **flat, "conditions_hold": result.conditions_hold,
            "final_loss": final_loss, "final_accuracy": final_accuracy, "noise_seeds": seeds,
            "detail": row["result"]}


def _run_monte_carlo(cell: Cell) -> dict:
    c = cell.config
    pattern = _scaled_pattern(c["pattern"], c["n_clients"])
    case = delay_case(pattern, c["rounds"], c["reps"], c["seed"], confidence=c["confidence"], progress=False)
    out = {"n_clients": case.n_clients}
    for name in ("tau_max", "tau_avg"):
        estimate = case.estimates[name]
        out[name] = {"mean": estimate.mean, "stderr": estimate.stderr, "ci_low": estimate.ci_low,
                     "ci_high": estimate.ci_high, "quantiles": {f"{q:g}": v for q, v in estimate.quantiles.items()},
                     "exact": case.exact[name]}
    out["paper_bound"] = case.bound["tau_max"]
    return out


def _jsonable(value):
    """JSON values only: numpy scalars to Python, tuples to lists, non-finite floats to strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return number(value)
    return value


@lru_cache(maxsize=1)
def _package_version() -> str:
    try:
        return metadata.version("fedverify")
    except metadata.PackageNotFoundError:   # a source checkout: read pyproject.toml
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return _toml().loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
        except (OSError, KeyError, ValueError):
            return "unknown"


def _versions() -> dict:
    import scipy

    out = {"fedverify": _package_version(), "python": platform.python_version(), "numpy": np.__version__,
           "scipy": scipy.__version__}
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].__version__
    return out


def run_cell(cell: Cell) -> dict:
    """Run one cell and return its record (what ``run_sweep`` writes to ``cells/<key>.json``)."""
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    if cell.kind == "check":
        with _one_torch_thread():
            results = _run_check(cell)
    elif cell.kind == "monte_carlo":
        results = _run_monte_carlo(cell)
    elif cell.kind == "worst_case":
        results = worst_case_cells.run(cell)
    else:
        raise ValueError(f"unknown cell kind {cell.kind!r}; expected one of {', '.join(KINDS)}")
    timing = {"started": started.isoformat(timespec="seconds"), "seconds": time.perf_counter() - clock}
    return _jsonable({"schema": SCHEMA_VERSION, "key": cell.key, "kind": cell.kind, "config": cell.config,
                      "results": results, "timing": timing, "versions": _versions()})
