"""The spec of a sweep: its format (``SPEC_FORMAT``, what ``fedverify sweep --help`` prints),
reading it (``load_spec`` from a .toml or .json file, ``parse_spec`` from a mapping) and
validating it into a ``Spec``: per kind of cell, its grids of values, every key and value
checked, defaults filled in. Names (algorithms, theorems, presets, trace files) and sizes are
checked later, by :mod:`.grid`.

A spec file is at most ``MAX_SPEC_BYTES`` (4 MiB) and nests at most ``MAX_SPEC_DEPTH`` (16)
arrays or tables deep, with at most 16 parts to a dotted key; a deeper one is refused before it
is parsed (the JSON and TOML readers recurse). Errors are one-line ValueErrors naming the key
and the value.

This module imports nothing heavy (no numpy, none of the sweep's other modules), so that
``--help`` shows the format at once.
"""
from __future__ import annotations

import difflib
import json
import numbers
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from . import worst_case_cells
from ..choices import CHECK_ALGORITHMS, DEFAULT_CLIENTS, MAIN_PRESETS

__all__ = ["SPEC_FORMAT", "EXAMPLE_SPEC", "KINDS", "MAX_CELLS", "MAX_SPEC_DEPTH", "MAX_SPEC_BYTES", "Spec",
           "parse_spec", "load_spec"]

#: The kinds of cells, each a table of a spec.
KINDS = ("check", "monte_carlo", "worst_case")
#: The most cells a spec may have unless it says ``max_cells = N``.
MAX_CELLS = 100_000
#: The deepest nesting of arrays and tables in a spec file, and the most parts of a dotted TOML key.
MAX_SPEC_DEPTH = 16
#: The largest spec file read.
MAX_SPEC_BYTES = 4 * 2**20


SPEC_FORMAT = """\
A TOML (.toml) or JSON (.json) file. At the top level:

  description   free text (optional)
  max_cells     the most cells the spec may have (default 100000): a table has the
                product of its lists' lengths, the spec the sum over its tables
  check         a table of check cells, or a list of such tables ([[check]] in TOML)
  monte_carlo   a table of Monte-Carlo jobs, or a list of such tables ([[monte_carlo]])
  worst_case    a table of worst-case cells, or a list of such tables ([[worst_case]])

In a table every key takes one value or a list of values, and the cells are the
Cartesian product of the lists, the last key below varying fastest (a cell that two
tables both produce runs once). A key left out takes the default shown.

[check]: run each algorithm on the problem under the pattern at the step sizes the
theorem prescribes and compare the measured (1/T) Σ_t ‖∇f(x_t)‖² (mean over `runs` noise
seeds, one-sided limits) with the bound, as `fedverify check` does; also record
f(x_T) of the first run.
  problems     "quadratic"            quadratic, logistic-digits, logistic-synthetic, cnn-digits
  algorithms   fedsum-b, fedsum,      any of algorithms.names()
               fedsum-cr, fedavg,
               scaffold
  patterns     P1, P2, P3             presets scaled to n_clients (S = N/5 per round), or trace
                                      files (.npz, .csv, .json; relative to the spec's folder)
  theorems     "fedsum.theorem_4_1"   any theorem `fedverify bound --list` prints
  n_clients    20
  rounds       500                    (a shorter trace file runs its own length)
  local_steps  5
  seeds        0                      seed s: the pattern's trace has seed s and the runs
                                      noise seeds s·runs … s·runs + runs − 1 (so seed 0 is
                                      `fedverify check --seeds RUNS`)
  runs         5                      noise seeds per cell: the sample of the verdict
  confidence   0.95                   one-sided confidence of the verdict, in [0.5, 1)

[monte_carlo]: E[τ_max] and E[τ_avg] over `reps` traces of `rounds` rounds, with
confidence intervals, beside the exact values (where a formula exists) and FedSUM's
App. F bound on E[τ_max] (where it applies), as `fedverify mc` does.
  patterns     P1, P2, P3             presets (fedverify delays --list)
  n_clients    the preset's own       scale the preset to N clients (S = N/5 per round)
  rounds       2000
  reps         1000                   at least 2
  seeds        0
  confidence   0.95                   two-sided confidence of the intervals, in (0, 1)

[worst_case]: the exact worst case of (1/T) Σ_t ‖∇f(x_t)‖² of each algorithm on the
pattern's trace over the theorem's class at σ² = 0 (a semidefinite programme, as `fedverify
worst-case` solves it), beside the theorem's bound at its prescribed step sizes and the
ratio bound / worst case. For a theorem in expectation over the participation the worst
case is the mean over `traces` traces of the per-trace worst cases.
  algorithms   fedsum-b, fedsum       fedsum-b, fedsum, fedsum-cr, fedavg, scaffold, fedgm,
                                      fedavgm, fednag, qhm (those the theorem's class runs)
  patterns     "P1"                   presets with ⌊2N/3⌋ clients a round where they sample, or
                                      trace files (relative to the spec's folder)
  theorems     "fedsum.theorem_4_1"   fedsum.theorem_4_1, fedsum.corollary_4_1,
                                      momentum.theorem_4_1, momentum.theorem_4_6
  n_clients    3                      the programme grows as (N·T·K)²: keep N, T, K small
  rounds       6
  local_steps  2
  seeds        0                      seed of the pattern's trace(s)
  traces       3                      traces per cell of a theorem in expectation
  solvers      "clarabel"             clarabel or scs
  L, delta_f, F0, sigma_g2   1.0      the class's constants (sigma_g2: the momentum theorems)

Output folder: cells/<key>.json (one record per finished cell), cells/<key>.claim while a
sweep runs the cell, and results.csv (one row per cell of the spec, in spec order). Sweeps
started together on one output folder split the cells between them and end with the same
table. A spec file is at most 4 MiB and nests at most 16 levels.
"""


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
    return {"problems": ("quadratic",), "algorithms": CHECK_ALGORITHMS, "patterns": MAIN_PRESETS,
            "theorems": ("fedsum.theorem_4_1",), "n_clients": (DEFAULT_CLIENTS,), "rounds": (500,),
            "local_steps": (5,), "seeds": (0,), "runs": (5,), "confidence": (0.95,)}


def _mc_defaults() -> dict:
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
    """Read and validate a spec file (.toml or .json); see ``SPEC_FORMAT`` for the format.
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
