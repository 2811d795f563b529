"""Sweeps: a grid of checks and Monte-Carlo jobs, run in parallel, stored cell by cell.

``load_spec(path)`` reads a spec, ``iter_cells(spec)`` yields its ``Cell`` s one at a time
(``expand(spec)`` lists them, ``count_cells(spec)`` counts them without expanding),
``run_sweep(spec, output, executor=...)`` runs the cells that have no record yet and
``load_results(folder)`` reads the records back as one table (a list of flat dicts;
``to_columns`` and ``write_table`` turn it into columns or a CSV file). ``fedverify sweep
SPEC`` is the command.

A cell's result depends only on its config (its seed included), never on the worker that
ran it or on the order: each cell builds its own problem and trace from the config and runs
torch on one thread. Each finished cell is written at once, atomically, to
``OUTPUT/cells/<key>.json``, where the key is the sha256 of the cell's canonical config
(sorted-key JSON of the kind, the config and the schema version). A sweep started again
skips every cell whose record exists and is valid, so an interrupted sweep (even by
``kill -9``) resumes losing no finished cell and running none twice. A record holds
``key``, ``kind``, ``config``, ``results``, ``timing`` (start time, seconds) and
``versions`` (fedverify, Python, numpy, scipy, torch); non-finite numbers are the strings
"inf", "-inf", "nan". A record is valid when it is a JSON object whose name is the hash of
its kind and config and whose config and results hold every field of the table with a
value of the right type; any other file in its place (truncated, emptied, edited) counts
as missing: ``run_sweep`` warns (``SweepWarning``, one line naming the file) and runs the
cell again, ``load_results`` raises a ValueError naming the file.

Sizes. The cells are counted before anything is expanded: the product of the lengths of a
table's lists, summed over the tables (an upper bound: two tables may share cells). A spec
of more than ``max_cells`` cells (default ``MAX_CELLS`` = 100,000) is refused with the count
and the limit; write ``max_cells = N`` at the top of the spec to allow more. The cells
themselves are never all held at once (they stream to the workers, a few per worker in
flight); the table of results is, about 4 KiB a cell, within ``participation.budget``'s memory
limit, and so is each table's largest cell (its trace and history, problem and noise seeds'
results for a check, ``check_monte_carlo`` for a Monte-Carlo job), checked with the names
before any cell runs and refused in one line naming the table and the cell's fields. A spec file is at most 4 MiB and nests at most ``MAX_SPEC_DEPTH`` (16) arrays or
tables deep, with at most 16 parts to a dotted key; a deeper one is refused before it is
parsed (the JSON and TOML readers recurse).

Several sweeps on one output folder split the work: before running a cell a sweep claims
it, by an exclusive ``flock`` on ``cells/<key>.claim`` (holding the claimant's pid and
host, removed when the record is written). A cell claimed by another sweep is not run
again: this sweep waits for its record (or, if that sweep dies, which releases its locks,
takes the cell over), so every sweep ends with the same complete table and no cell runs
twice. The locks are the operating system's, dropped when their process ends however it
ends: the claim file a ``kill -9`` leaves behind holds no lock and is simply taken over
(on a network file system the locks are as good as its locking; on systems without
``fcntl``, such as Windows, concurrent sweeps are not coordinated).

Spec format
-----------
``verify.sweep.spec.SPEC_FORMAT`` (``fedverify sweep --help`` prints it).
"""
from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import numbers
import os
import platform
import re
import reprlib
import signal
import socket
import stat
import sys
import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, CancelledError, Executor, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from . import worst_case_cells
from .executors import LocalPool
from ..report import number, write_csv, write_json

try:
    import fcntl
except ImportError:      # Windows: no advisory locks, so no claims (see the module docstring)
    fcntl = None

__all__ = ["Cell", "Spec", "SweepOutcome", "SweepError", "SweepWarning", "SCHEMA_VERSION", "EXAMPLE_SPEC", "COLUMNS",
           "MAX_CELLS", "MAX_SPEC_DEPTH", "MAX_SPEC_BYTES", "load_spec", "parse_spec", "count_cells", "iter_cells",
           "expand", "cell_key", "run_cell", "run_sweep", "finished_keys", "count_to_run", "load_results",
           "to_columns", "write_table", "summary_table"]

#: Part of every cell key: bump it when a cell's results change meaning, so old records are not reused.
SCHEMA_VERSION = 1
KINDS = ("check", "monte_carlo", "worst_case")
CELLS_FOLDER = "cells"
RESULTS_FILE = "results.csv"
CLAIM_SUFFIX = ".claim"

#: The most cells a spec may have unless it says ``max_cells = N``.
MAX_CELLS = 100_000
#: The deepest nesting of arrays and tables in a spec file, and the most parts of a dotted TOML key.
MAX_SPEC_DEPTH = 16
#: The largest spec file read.
MAX_SPEC_BYTES = 4 * 2**20
#: Memory one cell of a sweep keeps until the end (its row of the table), for the budget check.
_CELL_BYTES = 4096
#: Seconds between two looks at cells another sweep is running (the longest wait; it starts shorter).
_POLL_SECONDS = 1.0
#: Largest record file read back (a record is a few KiB).
_MAX_RECORD_BYTES = 64 * 2**20

#: A small spec that runs in seconds (``fedverify sweep --example``).
EXAMPLE_SPEC = """\
# fedverify sweep spec: every list is an axis; the cells are the product of the axes.
description = "FedSUM family and FedAvg under P1-P3 on a small quadratic, and the delays of the same patterns"

[check]
problems    = "quadratic"
algorithms  = ["fedsum-b", "fedsum", "fedavg"]
patterns    = ["P1", "P2", "P3"]
theorems    = "fedsum.theorem_4_1"
n_clients   = 10
rounds      = 40
local_steps = 2
seeds       = [0, 1]      # trace seed s, noise seeds s*runs ... s*runs + runs - 1
runs        = 3           # noise seeds per cell
confidence  = 0.95

[monte_carlo]
patterns   = ["P1", "P2", "P3", "case4"]
n_clients  = 10
rounds     = [100, 1000]
reps       = 400
seeds      = 0
"""


class SweepWarning(UserWarning):
    """Something in the output folder a sweep works around (an invalid record it runs again)."""


# ---------------------------------------------------------------------------- spec


_short_repr = reprlib.Repr()
_short_repr.maxlevel = 2
_short_repr.maxstring = _short_repr.maxother = 60
_short_repr.maxlist = _short_repr.maxtuple = _short_repr.maxdict = _short_repr.maxset = 6


def _short(value) -> str:
    """``repr(value)``, cut short: a value echoed in an error is never a megabyte (or a
    thousand levels) of the spec."""
    return _short_repr.repr(value)


def _positive_int(value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"expected a positive integer, got {_short(value)}")
    return int(value)


def _seed(value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"expected an integer seed ≥ 0, got {_short(value)}")
    return int(value)


def _reps(value) -> int:
    if _positive_int(value) < 2:
        raise ValueError(f"expected at least 2 replicates (for a standard error), got {_short(value)}")
    return int(value)


def _name(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a name, got {_short(value)}")
    return value.strip()


def _fraction(low: float, high: float, closed_low: bool):
    def parse(value) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
                (low <= value if closed_low else low < value) and value < high):
            interval = f"{'[' if closed_low else '('}{low:g}, {high:g})"
            raise ValueError(f"expected a number in {interval}, got {_short(value)}")
        return float(value)
    return parse


def _check_defaults() -> dict:
    from ..choices import CHECK_ALGORITHMS, DEFAULT_CLIENTS, MAIN_PRESETS

    return {"problems": ("quadratic",), "algorithms": CHECK_ALGORITHMS, "patterns": MAIN_PRESETS,
            "theorems": ("fedsum.theorem_4_1",), "n_clients": (DEFAULT_CLIENTS,), "rounds": (500,),
            "local_steps": (5,), "seeds": (0,), "runs": (5,), "confidence": (0.95,)}


def _mc_defaults() -> dict:
    from ..choices import MAIN_PRESETS

    return {"patterns": MAIN_PRESETS, "n_clients": (None,), "rounds": (2000,), "reps": (1000,), "seeds": (0,),
            "confidence": (0.95,)}


#: The keys of each kind of table, in product order, with the parser of one value.
_KEYS = {
    "check": {"problems": _name, "algorithms": _name, "patterns": _name, "theorems": _name, "n_clients": _positive_int,
              "rounds": _positive_int, "local_steps": _positive_int, "seeds": _seed, "runs": _positive_int,
              "confidence": _fraction(0.5, 1.0, True)},
    "monte_carlo": {"patterns": _name, "n_clients": _positive_int, "rounds": _positive_int, "reps": _reps,
                    "seeds": _seed, "confidence": _fraction(0.0, 1.0, False)},
    "worst_case": worst_case_cells.keys(_name, _positive_int, _seed),
}
_DEFAULTS = {"check": _check_defaults, "monte_carlo": _mc_defaults, "worst_case": lambda: worst_case_cells.DEFAULTS}
_TOP_KEYS = ("description", "max_cells", *KINDS)


def _unknown_key(key, known: Iterable[str], where: str) -> ValueError:
    known = list(known)
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f"; expected {', '.join(known)}"
    return ValueError(f"unknown key {_short(key)} in {where}{hint}")


@dataclass(frozen=True)
class Spec:
    """A parsed spec: per kind, its grids (key → tuple of values, defaults filled in);
    ``base`` is the folder trace files are relative to; ``max_cells`` the most cells it may have."""

    check: tuple[dict, ...] = ()
    monte_carlo: tuple[dict, ...] = ()
    worst_case: tuple[dict, ...] = ()
    base: Path = field(default_factory=Path.cwd)
    description: str = ""
    max_cells: int = MAX_CELLS


def _grid(kind: str, table, where: str) -> dict:
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table of keys, got {type(table).__name__}")
    parsers = _KEYS[kind]
    grid = dict(_DEFAULTS[kind]())
    for key, raw in table.items():
        if key not in parsers:
            raise _unknown_key(key, parsers, where)
        values = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        if not values:
            raise ValueError(f"{where}.{key}: empty list")
        parsed = []
        for value in values:
            try:
                parsed.append(parsers[key](value))
            except ValueError as err:
                raise ValueError(f"{where}.{key}: {err}") from None
        grid[key] = tuple(dict.fromkeys(parsed))
    return {key: grid[key] for key in parsers}


def parse_spec(data: Mapping, base=None) -> Spec:
    """A ``Spec`` from a mapping (a parsed TOML or JSON document). ``base`` (default: the
    current folder) is where relative trace files are looked up. Raises a one-line
    ValueError naming the bad key or value."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a spec must be a table of keys, got {type(data).__name__}")
    for key in data:
        if key not in _TOP_KEYS:
            raise _unknown_key(key, _TOP_KEYS, "the spec")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"description: expected text, got {_short(description)}")
    try:
        max_cells = _positive_int(data.get("max_cells", MAX_CELLS))
    except ValueError as err:
        raise ValueError(f"max_cells: {err}") from None
    grids = {}
    for kind in KINDS:
        tables = data.get(kind, [])
        tables = [tables] if isinstance(tables, Mapping) else tables
        if not isinstance(tables, list):
            raise ValueError(f"{kind} must be a table or a list of tables, got {type(tables).__name__}")
        grids[kind] = tuple(_grid(kind, table, kind if len(tables) == 1 else f"{kind}[{i}]")
                            for i, table in enumerate(tables))
    if not any(grids.values()):
        raise ValueError("the spec has no cells: add a [check], [monte_carlo] or [worst_case] table")
    return Spec(**grids, base=Path.cwd() if base is None else Path(base), description=description,
                max_cells=max_cells)


def _toml():
    """The TOML reader: the standard library's (Python ≥ 3.11) or tomli, its backport."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ValueError("reading a TOML spec needs Python ≥ 3.11 or the tomli package; "
                             "or write the spec as JSON") from None
    return tomllib


#: JSON: strings (skipped whole, so that brackets inside them do not count) and brackets.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
#: TOML: the four kinds of strings and comments (skipped whole), then the characters that
#: open and close arrays and tables, end a key, separate items, join dotted keys, end a line.
_TOML_TOKENS = re.compile(r'"""(?:\\.|[^\\])*?"{3,5}|\'\'\'[\s\S]*?\'{3,5}|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'
                          r'|[\[\]{}=,.\n]')


def _too_deep(what: str) -> ValueError:
    return ValueError(f"{what}; a spec needs 3 levels")


def _check_nesting(text: str, toml: bool) -> None:
    """Refuse, before parsing, a spec whose arrays and tables nest more than ``MAX_SPEC_DEPTH``
    deep or (TOML) whose dotted keys have more parts: ``json`` and ``tomllib`` recurse once per
    level (a RecursionError) and tomllib's dotted keys cost the square of their length.

    One pass over the text with a regular expression that steps over strings and comments;
    in TOML a dot counts only in a key (a table header, the left of ``=``, a key of an inline
    table), never in a value such as ``0.95``."""
    depth = 0
    if not toml:
        for token in _JSON_TOKENS.finditer(text):
            c = token.group()[0]
            if c in "[{":
                depth += 1
                if depth > MAX_SPEC_DEPTH:
                    raise _too_deep(f"the spec nests arrays or objects more than {MAX_SPEC_DEPTH} levels deep")
            elif c in "]}":
                depth -= 1
        return
    stack: list[str] = []           # "[" (an array) or "{" (an inline table) per open bracket
    in_key, header, parts = True, False, 0
    for token in _TOML_TOKENS.finditer(text):
        t = token.group()
        if t[0] in "\"'#":
            continue
        if t == "\n":
            if not stack:
                in_key, header, parts = True, False, 0
        elif t == "[":
            if not stack and in_key:       # [table] or [[array of tables]]
                header = True
            elif not header:
                stack.append("[")
                in_key = False
        elif t == "]":
            if not header and stack:
                stack.pop()
        elif t == "{":
            stack.append("{")
            in_key, parts = True, 0
        elif t == "}":
            if stack:
                stack.pop()
            in_key = False
        elif t == "=":
            in_key, parts = False, 0
        elif t == ",":
            if stack and stack[-1] == "{":
                in_key, parts = True, 0
        elif t == "." and in_key:
            parts += 1
            if parts >= MAX_SPEC_DEPTH:
                raise _too_deep(f"the spec has a dotted key of more than {MAX_SPEC_DEPTH} parts")
        if len(stack) > MAX_SPEC_DEPTH:
            raise _too_deep(f"the spec nests arrays or tables more than {MAX_SPEC_DEPTH} levels deep")


def _read_spec_text(path: Path) -> str:
    """The spec file's text: a regular file of at most ``MAX_SPEC_BYTES``, UTF-8."""
    if path.exists() and not path.is_file():     # a folder, a FIFO, /dev/zero: nothing to read whole
        raise ValueError(f"{path.name} is not a regular file")
    with open(path, "rb") as f:
        data = f.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_SPEC_BYTES // 2**20} MiB; "
                         "a spec lists its axes, not its cells")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path.name} is not UTF-8 text (byte {err.start})") from None


def load_spec(path) -> Spec:
    """Read and validate a spec file (.toml or .json); see the module docstring for the format.
    A file larger than ``MAX_SPEC_BYTES`` or nested deeper than ``MAX_SPEC_DEPTH`` is refused
    (one-line ValueError) before it is parsed."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ValueError(f"a spec is a .toml or .json file, got {path.name!r}")
    from participation.files import strict_json

    reader = json if suffix == ".json" else _toml()
    text = _read_spec_text(path)
    try:
        _check_nesting(text, toml=suffix == ".toml")
        data = strict_json(text) if suffix == ".json" else reader.loads(text)
    except RecursionError:       # a nesting the scan above missed still ends in one line
        raise ValueError(f"{path.name}: the spec nests too deeply (at most {MAX_SPEC_DEPTH} levels)") from None
    except ValueError as err:    # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        raise ValueError(f"{path.name}: {' '.join(str(err).split())}") from None
    return parse_spec(data, base=path.resolve().parent)


def _as_spec(spec) -> Spec:
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return parse_spec(spec)
    if isinstance(spec, (str, Path)):
        return load_spec(spec)
    raise ValueError(f"spec must be a Spec, a mapping or a path, got {type(spec).__name__}")


# ---------------------------------------------------------------------------- cells


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


class _Resolver:
    """Validates and canonicalises names (algorithms, theorems, patterns), once per name."""

    def __init__(self, base: Path):
        self.base = base
        self.algorithms: dict[str, str] = {}
        self.theorems: dict[str, str] = {}
        self.patterns: dict[tuple, tuple] = {}
        self.scaled: set[tuple] = set()
        self.file_rounds: dict[str, int] = {}

    def algorithm(self, name: str) -> str:
        if name not in self.algorithms:
            import algorithms

            self.algorithms[name] = algorithms.get(name).name
        return self.algorithms[name]

    def theorem(self, name: str) -> str:
        if name not in self.theorems:
            from ..checking import resolve_theorem

            self.theorems[name] = resolve_theorem(name).name
        return self.theorems[name]

    def problem(self, name: str) -> str:
        from ..choices import PROBLEMS

        if name not in PROBLEMS:
            raise ValueError(f"unknown problem {_short(name)}; choose from {', '.join(PROBLEMS)}")
        return name

    def pattern(self, text: str, n_clients: int | None, files: bool) -> tuple[str, dict, str | None]:
        """(label, extra config, trace file) of a preset scaled to ``n_clients`` or a trace file."""
        if (text, files) not in self.patterns:
            self.patterns[text, files] = self._pattern(text, files)
        label, extra, trace_file, clients = self.patterns[text, files]
        if trace_file is not None:
            if clients != n_clients:
                raise ValueError(f"trace {Path(trace_file).name} has {clients} clients but n_clients is {n_clients}")
        elif n_clients is not None and (label, n_clients) not in self.scaled:
            _scaled_pattern(label, n_clients)
            self.scaled.add((label, n_clients))
        return label, extra, trace_file

    def _pattern(self, text: str, files: bool):
        from participation.patterns import preset_names

        from ..choices import TRACE_SUFFIXES, canonical

        label = canonical(text)
        if label in preset_names():
            return label, {}, None, None
        path = self.base / text
        if not files or not (path.suffix.lower() in TRACE_SUFFIXES or path.exists()):
            what = "a preset" if not files else f"a preset or a trace file ({', '.join(TRACE_SUFFIXES)})"
            raise ValueError(f"unknown pattern {_short(text)}: not {what}; presets: {', '.join(preset_names())}")
        if not path.is_file():
            raise ValueError(f"trace file {_short(text)} not found in {str(self.base)!r}")
        from participation import Trace

        trace = Trace.load(path)
        self.file_rounds[str(path.resolve())] = trace.n_rounds
        return path.name, {"trace_sha256": _file_sha256(path)}, str(path.resolve()), trace.n_clients


def _scaled_pattern(name: str, n_clients: int | None):
    """Preset ``name`` (its own size when ``n_clients`` is None, else scaled like ``fedverify check``)."""
    from participation.patterns import preset

    from ..choices import scaled_preset

    return preset(name) if n_clients is None else scaled_preset(name, n_clients)


def _singular(key: str) -> str:
    return {"problems": "problem", "algorithms": "algorithm", "patterns": "pattern", "theorems": "theorem",
            "seeds": "seed", "solvers": "solver"}.get(key, key)


def _table_size(grid: dict) -> int:
    return math.prod(len(values) for values in grid.values())


def count_cells(spec) -> int:
    """The number of cells of ``spec``, counted without expanding it: the product of the
    lengths of each table's lists, summed over the tables. Two tables that share cells count
    them twice (the sweep runs them once), so this is an upper bound; it is what
    ``max_cells`` limits."""
    spec = _as_spec(spec)
    return sum(_table_size(grid) for kind in KINDS for grid in getattr(spec, kind))


def _check_size(spec: Spec) -> int:
    """``count_cells(spec)``, or a one-line ValueError when it is above the spec's
    ``max_cells`` or the table of that many cells would not fit the memory budget."""
    from participation.budget import require_memory

    n = count_cells(spec)
    if n > spec.max_cells:
        raise ValueError(f"the spec has {n:,} cells, more than the limit of {spec.max_cells:,}; "
                         f"shorten its lists, or write max_cells = {n} at the top of the spec to run them all")
    require_memory(n * _CELL_BYTES, f"a sweep of {n:,} cells")
    return n


@dataclass(frozen=True)
class _Table:
    """One table of a spec with every value checked and canonical: ``axes`` in product
    order, a pattern as (label, extra config, trace file); ``ids`` per axis, the values that
    make a cell's config (to tell the cells an earlier table already has)."""

    kind: str
    axes: tuple[tuple[str, tuple], ...]
    ids: tuple[frozenset, ...]
    where: str = ""


def _pattern_id(item: tuple) -> tuple:
    label, extra, _ = item
    return label, tuple(sorted(extra.items()))


def _tables(spec: Spec) -> list[_Table]:
    """The spec's tables, every name checked (algorithms, theorems, problems, presets and
    their scaling to each n_clients, trace files) once per distinct value, not per cell."""
    resolver = _Resolver(spec.base)
    tables = []
    for kind in KINDS:
        grids = getattr(spec, kind)
        for i, grid in enumerate(grids):
            where = kind if len(grids) == 1 else f"{kind}[{i}]"
            axes = {}
            what = "patterns"
            try:
                if kind == "check":
                    what = "problems"
                    axes["problems"] = tuple(dict.fromkeys(resolver.problem(v) for v in grid["problems"]))
                    what = "algorithms"
                    axes["algorithms"] = tuple(dict.fromkeys(resolver.algorithm(v) for v in grid["algorithms"]))
                    what = "theorems"
                    axes["theorems"] = tuple(dict.fromkeys(resolver.theorem(v) for v in grid["theorems"]))
                elif kind == "worst_case":
                    what = "algorithms and theorems"
                    axes["algorithms"], axes["theorems"] = worst_case_cells.check_names(grid["algorithms"],
                                                                                        grid["theorems"])
                what = "patterns"
                patterns = {}
                for text in grid["patterns"]:
                    for n_clients in grid["n_clients"]:
                        item = resolver.pattern(text, n_clients, files=kind != "monte_carlo")
                    patterns.setdefault(_pattern_id(item), item)
            except ValueError as err:
                raise ValueError(f"{where}.{what}: {' '.join(str(err).split())}") from None
            axes["patterns"] = tuple(patterns.values())
            ordered = tuple((key, axes.get(key, grid[key])) for key in grid)
            ids = tuple(frozenset(_pattern_id(v) for v in values) if key == "patterns" else frozenset(values)
                        for key, values in ordered)
            tables.append(_Table(kind, ordered, ids, where))
    _check_cell_sizes(tables, resolver.file_rounds)
    return tables


#: What one check cell keeps, counted as ``fedverify check`` counts a run: its history a round (the
#: trace adds N booleans a round), and each noise seed's number and measured value.
_HISTORY_BYTES, _SEED_BYTES = 64, 128


def _check_cell_sizes(tables: Sequence[_Table], file_rounds: Mapping[str, int]) -> None:
    """Refuse, before any cell runs, a table whose largest cell cannot fit the memory limit, in
    one line naming the table, the fields of that cell with their values, the need and the limit.
    A check cell holds one run's trace and history (a trace file runs its own length where it is
    shorter), the problem's clients and its noise seeds' results; a Monte-Carlo cell is checked by
    ``check_monte_carlo`` (its replicates' results and its largest chunk) at the table's largest
    rounds and reps, for every pattern and n_clients."""
    for table in tables:
        axes = dict(table.axes)
        if table.kind == "check":
            _check_run_sizes(table.where, axes, file_rounds)
        elif table.kind == "monte_carlo":
            _check_monte_carlo_sizes(table.where, axes)


def _refuse_cells(where: str, fields: Mapping, nbytes: float, what: str) -> None:
    """``require_memory`` for the cells of table ``where`` with these ``fields`` (name → value)."""
    from participation.budget import require_memory

    cells = ", ".join(f"{key} = {_short(value)}" for key, value in fields.items())
    require_memory(nbytes, f"{where} cells with {cells}: {what}")


def _check_run_sizes(where: str, axes: Mapping, file_rounds: Mapping[str, int]) -> None:
    from ..choices import problem_bytes

    n, rounds, runs = max(axes["n_clients"]), max(axes["rounds"]), max(axes["runs"])
    run = max(rounds if path is None else min(rounds, file_rounds[path]) for _, _, path in axes["patterns"])
    _refuse_cells(where, {"rounds": rounds, "n_clients": n}, run * (n + _HISTORY_BYTES), "one run's trace and history")
    _refuse_cells(where, {"runs": runs}, runs * _SEED_BYTES, "the noise seeds' results")
    for problem in axes["problems"]:
        _refuse_cells(where, {"problem": problem, "n_clients": n}, problem_bytes(problem, n), "the problem")


def _check_monte_carlo_sizes(where: str, axes: Mapping) -> None:
    from participation.expected import check_monte_carlo
    from participation.expected.montecarlo import RESULT_BYTES, clear_table_caches

    rounds, reps = max(axes["rounds"]), max(axes["reps"])
    _refuse_cells(where, {"reps": reps}, reps * RESULT_BYTES, f"{reps} replicates' τ_max and τ_avg")
    try:
        for label, _, _ in axes["patterns"]:
            for n in axes["n_clients"]:
                fields = {"pattern": label, **({} if n is None else {"n_clients": n}), "rounds": rounds, "reps": reps}
                try:
                    check_monte_carlo(_scaled_pattern(label, n), rounds, reps)
                except ValueError as err:
                    cells = ", ".join(f"{key} = {_short(value)}" for key, value in fields.items())
                    raise ValueError(f"{where} cells with {cells}: {err}") from None
    finally:
        clear_table_caches()     # the cells build their own tables, in their own processes


def _walk(tables: Sequence[_Table]) -> Iterator[Cell | None]:
    """Every position of every table, in spec order: its ``Cell``, or None where an earlier
    table of the same kind already has that cell. Nothing is held but the current cell."""
    for j, table in enumerate(tables):
        earlier = [t.ids for t in tables[:j] if t.kind == table.kind]
        names = [_singular(key) for key, _ in table.axes]
        position = names.index("pattern")
        for values in itertools.product(*(values for _, values in table.axes)):
            if earlier and any(all((_pattern_id(v) if k == position else v) in ids[k] for k, v in enumerate(values))
                               for ids in earlier):
                yield None
                continue
            config = dict(zip(names, values))
            label, extra, trace_file = values[position]
            config["pattern"] = label
            config.update(extra)
            yield Cell(table.kind, config, trace_file)


def iter_cells(spec) -> Iterator[Cell]:
    """The cells of ``spec`` (a ``Spec``, a mapping or a path), in spec order, each once, one
    at a time.

    The spec is checked at the call, before the first cell: its size (``count_cells``
    against ``max_cells`` and the memory budget) and every name (algorithms, theorems,
    problems, presets, trace files), so a bad spec fails before anything runs, with a
    ValueError naming the key and the value."""
    spec = _as_spec(spec)
    _check_size(spec)
    return (cell for cell in _walk(_tables(spec)) if cell is not None)


def expand(spec) -> list[Cell]:
    """The cells of ``spec`` as a list (``iter_cells`` streams them); refused, like
    ``iter_cells``, above ``max_cells``."""
    return list(iter_cells(spec))


# ---------------------------------------------------------------------------- running one cell


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
    from ..choices import build_problem
    from ..constants import estimate_constants

    problem = build_problem(name, n_clients)
    return problem, estimate_constants(problem)


def _check_source(cell: Cell):
    """The cell's participation: a Trace read from its file (checked against its hash) or the preset."""
    config = cell.config
    if "trace_sha256" not in config:
        return _scaled_pattern(config["pattern"], config["n_clients"])
    from participation import Trace

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
    from participation import Trace

    from ..jobs import check_cell

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
    from ..jobs import delay_case

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
    from importlib import metadata

    try:
        return metadata.version("fedverify")
    except metadata.PackageNotFoundError:   # a source checkout: read pyproject.toml
        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
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


# ---------------------------------------------------------------------------- records


def _cells_folder(folder) -> Path:
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"output {str(folder)!r} exists and is not a folder")
    return folder / CELLS_FOLDER


_NONFINITE = ("inf", "-inf", "nan")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or (isinstance(value, str)
                                                                                and value in _NONFINITE)


def _or_none(test):
    return lambda value: value is None or test(value)


def _is_text(value) -> bool:
    return isinstance(value, str)


def _is_bool(value) -> bool:
    return isinstance(value, bool)


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


#: What a valid record holds, per kind: its config's fields and its results' fields (every
#: one the table and the summary read), each with the test of its value.
_CONFIG_FIELDS = {
    "check": {"problem": _is_text, "algorithm": _is_text, "pattern": _is_text, "theorem": _is_text,
              "n_clients": _is_int, "rounds": _is_int, "local_steps": _is_int, "seed": _is_int, "runs": _is_int,
              "confidence": _is_number},
    "monte_carlo": {"pattern": _is_text, "n_clients": _or_none(_is_int), "rounds": _is_int, "reps": _is_int,
                    "seed": _is_int, "confidence": _is_number},
}
_RESULT_FIELDS = {
    "check": {"rounds_run": _is_int, **{name: _or_none(_is_number) for name in (
                  "tau_max", "tau_avg", "eta_g", "eta_l", "measured", "lower", "upper", "bound", "ratio", "final_loss",
                  "final_accuracy")},
              "verdict": _is_text, "label": _is_text, "covered": _is_bool, "conditions_hold": _is_bool,
              "violated_conditions": lambda v: isinstance(v, list) and all(map(_is_scalar, v)), "stopped": _is_scalar},
    "monte_carlo": {"n_clients": _is_int, "paper_bound": _or_none(_is_number)},
}
_CONFIG_FIELDS["worst_case"], _RESULT_FIELDS["worst_case"] = worst_case_cells.fields(
    _is_int, _is_number, _is_text, _is_bool, _or_none)
_ESTIMATE_FIELDS = {"mean": _or_none(_is_number), "stderr": _or_none(_is_number), "ci_low": _is_number,
                    "ci_high": _is_number, "exact": _or_none(_is_number)}


def _record_problem(record, name: str) -> str | None:
    """Why ``record`` (read from ``<name>.json``) is not a valid record, or None if it is."""
    if not isinstance(record, dict):
        return "not a JSON object"
    kind, config, results = record.get("kind"), record.get("config"), record.get("results")
    if kind not in KINDS or not isinstance(config, dict) or not isinstance(results, dict):
        return "its key, kind, config or results are missing"
    schema = record.get("schema", SCHEMA_VERSION)
    try:
        key = cell_key(kind, config, schema) if _is_int(schema) else None
    except (TypeError, ValueError):       # not plain JSON values
        key = None
    if record.get("key") != name or key != name:
        return "its name is not the hash of its kind and config"
    for part, fields in (("config", _CONFIG_FIELDS[kind]), ("results", _RESULT_FIELDS[kind])):
        values = record[part]
        for field_, test in fields.items():
            if field_ not in values or not test(values[field_]):
                return f"{part}.{field_} is missing or of the wrong type"
    if kind == "monte_carlo":
        for name_ in ("tau_max", "tau_avg"):
            estimate = results.get(name_)
            if not isinstance(estimate, dict) or not all(k in estimate and test(estimate[k])
                                                         for k, test in _ESTIMATE_FIELDS.items()):
                return f"results.{name_} is missing or of the wrong type"
    timing = record.get("timing", {})
    if not isinstance(timing, dict) or not _or_none(_is_number)(timing.get("seconds")):
        return "its timing is of the wrong type"
    return None


def _read_record(path: Path) -> dict:
    """The record in ``path``, or a one-line ValueError naming the file and saying what is wrong
    (a pipe or a folder in its place is never opened: a pipe would block)."""
    info = path.stat()             # FileNotFoundError: no record
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path.name} is not a sweep record (not a regular file)")
    with open(path, "rb") as f:
        data = f.read(_MAX_RECORD_BYTES + 1)
    problem = None
    if len(data) > _MAX_RECORD_BYTES:
        problem = f"larger than {_MAX_RECORD_BYTES // 2**20} MiB"
    else:
        try:
            record = json.loads(data)
        except (ValueError, RecursionError):      # JSONDecodeError, UnicodeDecodeError, a deep nesting
            problem = "not JSON"
        else:
            problem = _record_problem(record, path.stem)
    if problem is not None:
        raise ValueError(f"{path.name} is not a sweep record ({problem})")
    return record


def _record_names(cells: Path) -> set[str]:
    """The names (keys) of the record files in ``cells``: one listing of the folder."""
    try:
        with os.scandir(cells) as entries:
            return {e.name[:-5] for e in entries if e.name.endswith(".json") and not e.name.startswith(".")}
    except FileNotFoundError:
        return set()


def finished_keys(spec, output) -> set[str]:
    """The keys of the cells of ``spec`` whose record in ``output`` is valid (a missing or
    invalid one is a cell still to run). One listing of the folder, one read of each record
    of the spec's cells; nothing else."""
    cells = _cells_folder(output)
    present = _record_names(cells)
    done = set()
    for cell in iter_cells(spec):
        if cell.key in present:
            try:
                _read_record(cells / f"{cell.key}.json")
            except (ValueError, OSError):
                continue
            done.add(cell.key)
    return done


def count_to_run(spec, output, at_most: int | None = None) -> int:
    """How many cells of ``spec`` have no record file in ``output``, counting no further than
    ``at_most``: a quick estimate (one listing of the folder, no record read: an invalid
    record counts as done here, though ``run_sweep`` runs its cell again) for sizing a pool."""
    present = _record_names(_cells_folder(output))
    n = 0
    for cell in iter_cells(spec):
        if cell.key not in present:
            n += 1
            if at_most is not None and n >= at_most:
                break
    return n


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
    by kind and config. A file of ``cells/`` that is not a valid record (see the module
    docstring) raises a ValueError naming it; ``fedverify sweep`` on the same spec runs that
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


# ---------------------------------------------------------------------------- claims


@contextmanager
def _interrupts_deferred():
    """SIGINT and SIGTERM held back (in the main thread, where Python runs its handlers) until the
    block ends; they are delivered then, at once."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _Claims:
    """This process's claims on cells of one output folder.

    A claim is an exclusive, non-blocking ``flock`` on ``cells/<key>.claim`` (the file holds
    the claimant's pid and host, for a reader). The lock, not the file, is the claim: the
    operating system drops it when its process ends, however it ends, so a claim is never
    stale. Whoever holds a claim removes its file before letting go, and a lock taken on a
    file that is no longer at its path (removed meanwhile) is let go and taken again, so two
    sweeps never hold one cell. Without ``fcntl``, or on a file system that cannot lock
    (warned about once), every claim succeeds: no coordination."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.held: dict[str, int] = {}
        self.note = (json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n").encode()
        self.locking = fcntl is not None

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{CLAIM_SUFFIX}"

    def take(self, key: str) -> bool:
        """Claim ``key``; False if another live process holds it. An interrupt (SIGINT, SIGTERM)
        waits until the claim is either held (so that ``release_all`` removes its file) or not
        made at all: a file created just before the interrupt would otherwise stay behind."""
        with _interrupts_deferred():
            return self._take(key)

    def _take(self, key: str) -> bool:
        if not self.locking:
            self.held[key] = -1
            return True
        path = self._path(key)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            except OSError as err:        # ENOLCK, EOPNOTSUPP: a file system without locks
                os.close(fd)
                path.unlink(missing_ok=True)
                self.locking = False
                warnings.warn(SweepWarning(f"cannot lock files in {str(self.folder)!r} ({err.strerror}): sweeps "
                                           f"started together on it would each run every cell"), stacklevel=3)
                return self._take(key)
            except BaseException:
                os.close(fd)
                raise
            self.held[key] = fd   # from here an interrupt's release_all removes the file
            try:
                try:
                    on_disk, ours = os.stat(path), os.fstat(fd)
                    current = (on_disk.st_dev, on_disk.st_ino) == (ours.st_dev, ours.st_ino)
                except FileNotFoundError:
                    current = False
                if current:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, self.note, 0)
                    return True
            except BaseException:
                self.release(key)
                raise
            del self.held[key]
            os.close(fd)          # its holder removed it after we opened it: take the new one

    def release(self, key: str) -> None:
        with _interrupts_deferred():
            self._release(key)

    def _release(self, key: str) -> None:
        fd = self.held.pop(key, None)
        if fd is None or fd < 0:
            return
        try:
            self._path(key).unlink(missing_ok=True)
        finally:
            os.close(fd)

    def release_all(self) -> None:
        for key in list(self.held):
            self.release(key)


# ---------------------------------------------------------------------------- the sweep


class SweepError(RuntimeError):
    """Some cells failed; the others' records are written. ``outcome`` says which."""

    def __init__(self, message: str, outcome: "SweepOutcome"):
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class SweepOutcome:
    """``rows``: the table of the spec's finished cells in spec order; ``ran``/``skipped``:
    cells run now / found done; ``failed``: (key, one-line error) per cell that raised;
    ``table``: the CSV written; ``elsewhere``: cells another sweep on the same folder ran
    while this one was running (not counted in ``ran`` or ``skipped``)."""

    rows: list[dict]
    ran: int
    skipped: int
    failed: list[tuple[str, str]]
    folder: Path
    table: Path
    elsewhere: int = 0


def _describe(cell: Cell) -> str:
    c = cell.config
    if cell.kind == "worst_case":
        return worst_case_cells.describe(cell)
    if cell.kind == "check":
        return f"{c['algorithm']} on {c['problem']} under {c['pattern']} (N={c['n_clients']}, T={c['rounds']}, seed {c['seed']})"
    return f"Monte-Carlo {c['pattern']} (T={c['rounds']}, {c['reps']} reps, seed {c['seed']})"


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def _capacity(executor: Executor) -> int:
    """How many cells ``executor`` runs at once: a process pool's workers, a Dask cluster's
    threads, else this machine's CPUs."""
    if isinstance(executor, LocalPool):
        return executor.workers
    n = getattr(executor, "_max_workers", None)
    if not n:
        client = getattr(executor, "_client", None)
        try:
            n = sum(client.nthreads().values())
        except Exception:       # not a Dask executor, or its cluster is still starting
            n = None
    return max(1, n or os.cpu_count() or 1)


class _Run:
    """The state of one ``run_sweep``: the spec's cells stream by in order, each found done
    (a valid record), claimed and run here, or left to the sweep that holds its claim."""

    def __init__(self, folder: Path, executor: Executor | None, bar):
        self.folder = folder
        self.cells = _cells_folder(folder)
        self.executor = executor
        self.bar = bar
        self.present = _record_names(self.cells)
        self.claims = _Claims(self.cells)
        self.rows: list[dict | None] = []           # spec order; None until known
        self.failed: list[tuple[str, str]] = []
        self.ran = self.skipped = self.elsewhere = 0
        self.inflight: dict[Future, tuple[int, Cell]] = {}
        self.waiting: dict[int, Cell] = {}          # cells another sweep holds
        self.warned: set[str] = set()

    def _valid(self, cell: Cell) -> dict | None:
        """The cell's record if its file is there and valid; a file that is there but invalid
        is warned about (once) and counts as missing."""
        path = self.cells / f"{cell.key}.json"
        try:
            return _read_record(path)
        except FileNotFoundError:
            return None
        except (ValueError, OSError) as err:
            if cell.key not in self.warned:
                self.warned.add(cell.key)
                message = err if isinstance(err, ValueError) else f"{path.name} cannot be read ({err.strerror})"
                warnings.warn(SweepWarning(f"{message}; running its cell again"), stacklevel=2)
            return None

    def _done(self, i: int, record: dict, counter: str) -> None:
        self.rows[i] = _flat(record)
        setattr(self, counter, getattr(self, counter) + 1)
        self.bar.update(1)

    def add(self, cell: Cell) -> None:
        """The next cell of the spec: done, run (or sent to run), or left waiting."""
        i = len(self.rows)
        self.rows.append(None)
        if cell.key in self.present:
            record = self._valid(cell)
            if record is not None:
                self._done(i, record, "skipped")
                return
        self._claim_and_run(i, cell)

    def _claim_and_run(self, i: int, cell: Cell) -> bool:
        """Run the cell (or send it to run) if this sweep can claim it and it is still not
        done; False if it did not (another sweep holds it, or has just finished it)."""
        if not self.claims.take(cell.key):
            self.waiting[i] = cell
            return False
        record = self._valid(cell)     # another sweep may have finished it since the folder was listed
        if record is not None:
            self.claims.release(cell.key)
            self._done(i, record, "elsewhere")
            return False
        blocked = self.cells / f"{cell.key}.json"
        if os.path.lexists(blocked) and not blocked.is_file():
            self.claims.release(cell.key)        # its record could never be written there
            self.failed.append((cell.key, f"{_describe(cell)}: {blocked.name} is in the way (not a regular file); "
                                          "remove it to run this cell"))
            self.bar.update(1)
            return True
        if self.executor is None:
            self.bar.set_postfix_str(_describe(cell), refresh=False)
            try:
                outcome = run_cell(cell)
            except Exception as err:       # one bad cell does not stop the others
                outcome = err
            self.finish(i, cell, outcome)
        else:
            self.inflight[self.executor.submit(run_cell, cell)] = (i, cell)
        return True

    def finish(self, i: int, cell: Cell, outcome) -> None:
        """Write the cell's record (then let go of its claim), or note its failure."""
        try:
            if isinstance(outcome, BaseException):
                self.failed.append((cell.key, f"{_describe(cell)}: {_one_line(outcome)}"))
            else:
                write_json(self.cells / f"{cell.key}.json", outcome)
                self.rows[i] = _flat(outcome)
                self.ran += 1
        finally:
            self.claims.release(cell.key)
        self.bar.update(1)

    def look_again(self, room: int) -> None:
        """The waiting cells: done by the sweep that held them, or free to take (that sweep
        ended without a record); at most ``room`` of them are started here."""
        for i, cell in list(self.waiting.items()):
            if room <= 0:
                break
            if (self.cells / f"{cell.key}.json").exists():
                record = self._valid(cell)
                if record is not None:
                    del self.waiting[i]
                    self._done(i, record, "elsewhere")
                    continue
            del self.waiting[i]
            if self._claim_and_run(i, cell):
                room -= 1

    def collect(self, timeout: float | None) -> None:
        """Wait for at least one running cell (up to ``timeout`` seconds) and finish those done."""
        done, _ = wait(list(self.inflight), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            i, cell = self.inflight.pop(future)
            try:
                err = future.exception()
            except CancelledError as cancelled:     # e.g. the cluster went away
                err = cancelled
            self.finish(i, cell, err if err is not None else future.result())

    def abandon(self) -> None:
        """On an interrupt or an error: stop waiting for running cells and let go of every
        claim. A process pool's futures are left to the pool's own shutdown (cancelling them
        from here races with its manager thread, which then fails them: an InvalidStateError
        on Python < 3.12); other executors' (Dask) are cancelled."""
        if self.executor is not None and not isinstance(self.executor, (ProcessPoolExecutor, LocalPool)):
            for future in self.inflight:
                future.cancel()
        self.inflight.clear()
        self.claims.release_all()


def _fit_pool(executor: Executor | None, spec: Spec, folder: Path) -> None:
    """Start a ``LocalPool``'s workers, no more than the cells still to run (by
    ``count_to_run``), and none when every cell is done: idle workers cost a process each."""
    if isinstance(executor, LocalPool):
        executor.start(count_to_run(spec, folder, at_most=executor.limit))


def run_sweep(spec, output, *, executor: Executor | None = None, progress: bool | None = None) -> SweepOutcome:
    """Run every cell of ``spec`` (a ``Spec``, a mapping or a spec file) that has no valid
    record in ``output`` yet, writing each record as it finishes, then write ``output/results.csv``.

    The spec is checked first (its size against ``max_cells`` and the memory budget, every
    name), then its cells stream in spec order: a cell with a valid record is skipped, a
    file in its place that is not a valid record is warned about (``SweepWarning``) and the
    cell runs again; at most twice as many cells as the executor has workers are in flight.
    A cell another sweep on the same folder has claimed is left to it, and waited for: when
    this returns, every cell is done (or failed), whoever ran it.

    ``executor``: any ``concurrent.futures.Executor`` (see ``verify.sweep.executors``), or None to
    run in this process; a ``LocalPool`` (what ``open_executor(processes=N)`` gives) starts
    no more workers than there are cells still to run, and none when none is. ``progress``:
    a tqdm bar of cells done (None: only on a terminal). Raises ``SweepError`` after the
    table is written if any cell raised.
    """
    from tqdm.auto import tqdm

    spec = _as_spec(spec)
    total = _check_size(spec)
    stream = _walk(_tables(spec))            # every name is checked here, before anything is written
    folder = Path(output)
    _cells_folder(folder).mkdir(parents=True, exist_ok=True)
    _fit_pool(executor, spec, folder)
    window = 1 if executor is None else 2 * _capacity(executor)
    with tqdm(total=total, unit="cell", desc="fedverify sweep", disable=True if progress is False else None,
              file=sys.stderr) as bar:
        run = _Run(folder, executor, bar)
        pause = 0.05
        try:
            for cell in stream:
                if cell is None:                 # an earlier table's cell
                    bar.update(1)
                    continue
                run.add(cell)
                while len(run.inflight) >= window:
                    run.collect(None)
            while run.inflight or run.waiting:
                if run.waiting:
                    run.look_again(window - len(run.inflight))
                if run.inflight:
                    run.collect(_POLL_SECONDS if run.waiting else None)
                elif run.waiting:                # every cell left is another sweep's
                    time.sleep(pause)
                    pause = min(2 * pause, _POLL_SECONDS)
        except BaseException:
            run.abandon()
            raise
    rows = [row for row in run.rows if row is not None]
    table = write_table(folder / RESULTS_FILE, rows)
    outcome = SweepOutcome(rows, run.ran, run.skipped, run.failed, folder, table, run.elsewhere)
    if run.failed:
        raise SweepError(f"{len(run.failed)} of {len(run.rows)} cells failed (first: {run.failed[0][1]}); "
                         f"the other records are in {folder}", outcome)
    return outcome


# ---------------------------------------------------------------------------- summary


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
